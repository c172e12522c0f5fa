"""Export a tokenizer to Hugging Face ``tokenizer.json`` and to a tiktoken ``.tiktoken`` rank file.

Hugging Face: a ``BPE`` model with the byte-to-unicode alphabet of GPT-2's ByteLevel, merges in rank
order, the split regex as a ``Split`` pre-tokenizer (``Isolated``, so unmatched text is kept, as
tokenmill does) followed by ``ByteLevel(use_regex=False)``, special tokens as added tokens. HF applies
merges by rank inside each chunk, which is exactly tokenmill's encoding, so ids match.

tiktoken: ``base64(token bytes) rank`` per line, rank = id. tiktoken merges by the rank of the
concatenated bytes, which can differ from merge-list BPE when a token is reachable by two different
splits; on real text the two agree (tested), and ``Tokenizer.from_tiktoken`` reproduces tiktoken's
rule exactly.
"""

from __future__ import annotations

import base64
import json
import os
from functools import lru_cache

from .._io import atomic_path
from ..errors import ConfigError


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by ByteLevel tokenizers."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, map(chr, chars)))


def _unique_vocab(tok) -> list[bytes]:
    n = tok.vocab_size - len(tok.special_tokens)
    vocab = [tok.token_bytes(i) for i in range(n)]
    seen: dict[bytes, int] = {}
    for i, b in enumerate(vocab):
        if b in seen:
            raise ConfigError(
                f"tokens {seen[b]} and {i} have the same bytes {b!r} (two merges built the same string); "
                "this format keys tokens by their bytes and cannot hold both"
            )
        seen[b] = i
    return vocab


def onig_pattern(regex_str: str) -> str:
    r"""The same split in Oniguruma syntax (HF tokenizers' regex engine).

    Oniguruma reads ``{1,3}+`` as "``{1,3}``, one or more times", not as possessive, so cl100k's
    ``\p{N}{1,3}+`` would group any number of digits there. With nothing after it in its branch, the
    possessive form equals the plain ``{1,3}``, which both engines read alike.

    >>> onig_pattern(r"\p{N}{1,3}+|x")
    '\\p{N}{1,3}|x'
    """
    import re

    return re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", regex_str)


def to_huggingface_dict(tok) -> dict:
    if tok.merges is None:
        raise ConfigError("only tokenizers with a merge list (trained or loaded from tokenmill files) export to "
                          "Hugging Face; rank-file tokenizers have no merge list")
    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
    vocab = _unique_vocab(tok)
    pre = [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]
    if tok.pattern is not None:
        pre.insert(0, {"type": "Split", "pattern": {"Regex": onig_pattern(tok.pattern)}, "behavior": "Isolated",
                       "invert": False})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True}
            for s, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": pre},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {enc(b): i for i, b in enumerate(vocab)},
            "merges": [[enc(vocab[a]), enc(vocab[b])] for a, b in tok.merges.tolist()],
        },
    }


def save_huggingface(tok, path: str | os.PathLike) -> None:
    """Write a ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads."""
    body = to_huggingface_dict(tok)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")


def save_tiktoken(tok, path: str | os.PathLike) -> None:
    """Write a ``.tiktoken`` rank file (special tokens are not part of it; pass them to tiktoken)."""
    vocab = _unique_vocab(tok)
    lines = "".join(f"{base64.b64encode(b).decode('ascii')} {i}\n" for i, b in enumerate(vocab))
    with atomic_path(path) as tmp:
        tmp.write_text(lines, encoding="ascii")
