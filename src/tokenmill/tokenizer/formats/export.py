"""Export a tokenizer to Hugging Face ``tokenizer.json`` and to a tiktoken ``.tiktoken`` rank file.

Hugging Face: a ``BPE`` model with the byte-to-unicode alphabet of GPT-2's ByteLevel, merges in rank
order, the split regex as a ``Split`` pre-tokenizer (``Isolated``, so unmatched text is kept, as
tokenmill does) followed by ``ByteLevel(use_regex=False)``, special tokens as added tokens. HF applies
merges by rank inside each chunk, which is exactly tokenmill's encoding, so ids match.

Rank-file tokenizers (tiktoken's rule) export too: ``recover_merges`` lists, for every token, each
split of its bytes into two tokens (HF's own tiktoken converter does the same), and ``ignore_merges``
carries tiktoken's "a chunk that is a token is that token"; Llama 3's ``tokenizer.model`` exported so
gives HF the ids tiktoken gives (tested). tokenizer.json imports export back with their own merges,
added tokens (flags included), normalizer and pre-tokenization.

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

from ..._io import atomic_path
from ...errors import ConfigError
from ..pretokenize.patterns import resolve_pattern


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


@lru_cache(maxsize=1)
def _byte_level_table() -> dict[int, str]:
    return str.maketrans({chr(b): c for b, c in bytes_to_unicode().items()})


def byte_level_string(token: bytes) -> str:
    r"""A token's bytes as a ByteLevel tokenizer.json spells them (``b" the"`` -> ``"Ġthe"``).

    >>> byte_level_string(b" the\n")
    'ĠtheĊ'
    """
    return token.decode("latin-1").translate(_byte_level_table())


def _unique_vocab(tok) -> dict[int, bytes]:
    """id -> bytes of the model's tokens (special and added tokens excluded), every bytes string once."""
    vocab: dict[int, bytes] = {}
    seen: dict[bytes, int] = {}
    for i, b in enumerate(tok.spec.vocab):
        if b is None:
            continue
        if b in seen:
            raise ConfigError(
                f"tokens {seen[b]} and {i} have the same bytes {b!r} (two merges built the same string); "
                "this format keys tokens by their bytes and cannot hold both"
            )
        seen[b] = i
        vocab[i] = b
    return vocab


def recover_merges(tok) -> list[tuple[int, int]]:
    """The merge list of a rank-file (tiktoken) tokenizer, as HF's own converter derives it.

    tiktoken merges two adjacent tokens whenever their bytes together are a token, lowest rank of the
    result first. As a merge list: for every token (in rank order), every split of its bytes into two
    tokens, ordered by the ranks of the left then the right part. With ``ignore_merges`` (tiktoken's
    whole-chunk rule) HF ``tokenizers`` then gives tiktoken's ids (tested on Llama 3's and Qwen's
    files). Merge-list tokenizers (trained, tokenizer.json) return their own merges.
    """
    if tok.merges is not None:
        return [tuple(m) for m in tok.merges.tolist()]
    vocab = _unique_vocab(tok)
    rank = {b: i for i, b in vocab.items()}
    out: list[tuple[int, int]] = []
    for i in sorted(vocab):
        b = vocab[i]
        local = [(rank[b[:k]], rank[b[k:]]) for k in range(1, len(b)) if b[:k] in rank and b[k:] in rank]
        out.extend(sorted(local))
    return out


def onig_pattern(regex_str: str) -> str:
    r"""The same split in Oniguruma syntax (HF tokenizers' regex engine).

    Oniguruma reads ``{1,3}+`` as "``{1,3}``, one or more times", not as possessive, so cl100k's
    ``\p{N}{1,3}+`` would group any number of digits there. With nothing after it in its branch, the
    possessive form equals the plain ``{1,3}``, which both engines read alike.

    >>> onig_pattern(r"\p{N}{1,3}+|x")
    '\\p{N}{1,3}|x'
    """
    import re

    _same_everywhere(regex_str, "HF tokenizers' engine (Oniguruma: '^' and '$' at every line)", oniguruma=True)
    return re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", regex_str)


def _same_everywhere(regex_str: str, engine: str, *, tiktoken: bool = False, oniguruma: bool = False) -> None:
    """Refuse a split pattern that ``engine`` would read otherwise than tokenmill (``engine_differences``:
    anchors, inline flags; POSIX classes and named characters for tiktoken's): exported as it is, it would
    give other ids, silently."""
    from ..pretokenize.patterns import engine_differences, matches_empty

    if matches_empty(regex_str):
        raise ConfigError(f"the split pattern {regex_str!r} matches the empty string, after which {engine} goes "
                          "on otherwise than tokenmill (or fails), so the export would cut other chunks; use a "
                          "pattern that never matches nothing, or keep the tokenizer in tokenmill's own format "
                          "(tok.save)")
    differ = engine_differences(regex_str, tiktoken=tiktoken, oniguruma=oniguruma)
    if differ:
        raise ConfigError(f"the split pattern {regex_str!r} uses {', '.join(map(repr, differ))}, which {engine} "
                          "reads otherwise than tokenmill, so the export would cut other chunks; write the pattern "
                          "without those (what the engines read alike: properties such as \\p{L} and \\p{N} in "
                          "place of \\w and of POSIX classes, \\x41 in place of a named character, no anchors, no "
                          "inline flags but i), or keep the tokenizer in tokenmill's own format (tok.save)")


def to_huggingface_dict(tok) -> dict:
    """A ``tokenizer.json`` body that HF ``tokenizers`` encodes exactly as ``tok`` does."""
    vocab = _unique_vocab(tok)
    rank_file = tok.merges is None
    merges = recover_merges(tok)
    added, held = _added_for_export(tok, vocab)
    patterns = [p for p in [tok.pattern, *tok.spec.split_patterns] if p is not None]
    prefix = tok.spec.add_prefix_space
    if prefix:
        if patterns not in ([], [resolve_pattern("gpt2")]):
            raise ConfigError("a tokenizer with add_prefix_space and split patterns other than ByteLevel's own "
                              "has no tokenizer.json form")
        pre = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": bool(patterns)}
    else:
        steps = [{"type": "Split", "pattern": {"Regex": onig_pattern(p)}, "behavior": "Isolated", "invert": False}
                 for p in patterns]
        steps.append({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False})
        pre = {"type": "Sequence", "pretokenizers": steps}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"} if tok.spec.normalizer == "NFC" else None,
        "pre_tokenizer": pre,
        "post_processor": getattr(tok, "hf_post_processor", None),  # (an imported file's: its BOS, say)
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": bool(rank_file or tok.spec.whole_chunk_lookup),
            "vocab": {byte_level_string(b): i for i, b in vocab.items()} | held,
            "merges": [[byte_level_string(vocab[a]), byte_level_string(vocab[b])] for a, b in merges],
        },
    }


def _added_for_export(tok, vocab: dict[int, bytes]) -> tuple[list[dict], dict[str, int]]:
    """Added tokens, and those of them the model's vocabulary holds (text -> id); HF re-derives their
    ids on load (vocabulary tokens keep theirs, the others are numbered from the vocabulary's size on),
    so those must already be numbered that way."""
    if tok.spec.added_tokens is not None:
        items = [t.to_dict() for t in tok.spec.added_tokens]
    else:
        items = [{"id": i, "content": s, "special": True, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False} for s, i in tok.special_tokens.items()]
    items.sort(key=lambda t: t["id"])
    by_string = {byte_level_string(b): i for i, b in vocab.items()}
    # a token in a slot of the model's ids that holds no byte string (DeepSeek V3's <｜begin▁of▁sentence｜> at
    # id 0, tekken's special ids) goes in the model's vocabulary under its text, as the imported file had it:
    # HF keeps a vocabulary token's id
    model = tok.spec.vocab
    held = {t["content"]: t["id"] for t in items
            if t["id"] < len(model) and model[t["id"]] is None and t["content"] not in by_string}
    next_id = len(vocab) + len(held)  # HF numbers the others from its model's vocabulary size on
    for t in items:
        if t["content"] not in by_string and t["content"] not in held:
            if t["id"] != next_id:
                # not the ids HF would number them with (cl100k's specials after a gap at 100,256): all of them go
                # in the model's vocabulary too, where HF keeps every token's id
                held.update({u["content"]: u["id"] for u in items if u["content"] not in by_string})
                break
            next_id += 1
    by_string.update(held)
    next_id = len(vocab) + len(held)
    for t in items:
        want = by_string.get(t["content"])
        if want is None:
            want, next_id = next_id, next_id + 1
        if want != t["id"]:
            why = (f"the vocabulary holds {t['content']!r} as a token of its own at id {want:,d}, and HF keeps "
                   "one id per string: rename the special token (e.g. '<x>')" if t["content"] in by_string and
                   t["content"] not in held else "added tokens outside the vocabulary must take the ids right "
                   "after it, in order")
            raise ConfigError(f"added token {t['content']!r} has id {t['id']:,d}, but HF tokenizers would give it "
                              f"id {want:,d} ({why})")
    return [{"id": t["id"], "content": t["content"], "single_word": t["single_word"], "lstrip": t["lstrip"],
             "rstrip": t["rstrip"], "normalized": t["normalized"], "special": t["special"]} for t in items], held


def to_tiktoken(tok, name: str | None = None):
    """A ``tiktoken.Encoding`` with ``tok``'s ranks, pattern and special tokens.

    tiktoken's rule is "merge the adjacent pair whose bytes together have the lowest rank; a chunk that
    is a token is that token". That is exact for rank-file tokenizers and for tokenizer.json imports
    that follow it (merges ordered as their results' ids, ``ignore_merges``: Llama 3's), and agrees on
    real text for trained tokenizers (tested). Anything tiktoken cannot express is refused."""
    from ...errors import require

    tiktoken = require("tiktoken", "tiktoken")
    vocab = _tiktoken_vocab(tok)
    # tokenmill (and HF) take the longest special token starting at a place; tiktoken tries them in no fixed
    # order (its Rust side keeps them in a hash map), so where one is the start of another it may take either
    specials = sorted(tok.special_tokens)
    for a, b in zip(specials, specials[1:]):
        if b.startswith(a):
            raise ConfigError(f"the special token {a!r} is the start of {b!r}: tokenmill encodes {b!r} as its own "
                              "id, tiktoken tries its special tokens in no fixed order and may give "
                              f"{a!r} and text; export with save_huggingface, or rename one of them")
    return tiktoken.Encoding(
        name or f"tokenmill-{tok.content_hash[:12]}",
        pat_str=_tiktoken_pattern(tok.pattern),
        mergeable_ranks={b: i for i, b in vocab.items()},
        special_tokens=dict(tok.special_tokens),
    )


def _tiktoken_vocab(tok) -> dict[int, bytes]:
    """``tok``'s ranks for tiktoken (id -> bytes), or a ConfigError where tiktoken's ranks would give other
    ids (``to_tiktoken`` and ``save_tiktoken`` alike: a rank file read back gives the same ids or is not
    written)."""
    uses = [f"a {tok.spec.normalizer} normalizer"] if tok.spec.normalizer is not None else []
    uses += ["a prefix space (add_prefix_space)"] if tok.spec.add_prefix_space else []
    n = len(tok.spec.split_patterns)
    uses += [f"{n} more split pattern{'s' * (n > 1)} after the first (a pre-tokenizer Sequence of {n + 1} Splits)"
             ] if n else []
    if uses:
        raise ConfigError(f"tiktoken has one split pattern and no normalizer or prefix space; this tokenizer has "
                          f"{' and '.join(uses)}, so tiktoken would give other ids (encode with tokenmill, or export "
                          "with save_huggingface)")
    if tok.spec.added_tokens is not None and any(not t.special for t in tok.spec.added_tokens):
        plain = [t.content for t in tok.spec.added_tokens if not t.special]
        raise ConfigError(f"tiktoken has no non-special added tokens; this tokenizer has {len(plain):,d} (such as "
                          f"{plain[0]!r}), which tiktoken would encode as text (encode with tokenmill, or export "
                          "with save_huggingface)")
    vocab = _unique_vocab(tok)
    if tok.spec.merge_ids is not None:
        _tiktoken_rule_holds(tok, vocab)
    return vocab


def _tiktoken_rule_holds(tok, vocab: dict[int, bytes]) -> None:
    """Refuse an imported merge list (a tokenizer.json's) that tiktoken's rule would not follow: tiktoken
    merges any two adjacent tokens whose bytes together are a token, by that token's rank, and maps a
    chunk that is a token to it. The same ids need the merges in the order of their results' ids, every
    multi-byte token built by a merge, every split of a token into two tokens a merge (HF's converter
    writes them all for a rank file: Llama 3's file), and, without ``ignore_merges``, no token that BPE
    does not reach from its own bytes. A tokenizer trained by tokenmill is not held to the last three:
    tiktoken's rule agrees with its merges on real text (tested), and its ranks are its merges' order."""
    import numpy as np

    spec = tok.spec
    use = "; export with save_huggingface instead"
    if len(spec.merge_ids) and np.any(np.diff(spec.merge_ids) < 0):
        raise ConfigError("this tokenizer's merge order differs from its id order, so tiktoken's ranks "
                          "(= ids) would merge differently" + use)
    merges = set(map(tuple, tok.merges.tolist()))
    built = {int(i) for i in np.asarray(spec.merge_ids).tolist()}
    rank = {b: i for i, b in vocab.items()}
    specials = set(tok.special_tokens.values())
    for i, b in vocab.items():
        if len(b) < 2 or i in specials:
            continue
        if i not in built:
            raise ConfigError(f"token {i} ({b!r}) is built by no merge: tiktoken would merge its parts into it, "
                              "this tokenizer does not" + use)
        for k in range(1, len(b)):
            left, right = rank.get(b[:k]), rank.get(b[k:])
            if left is not None and right is not None and (left, right) not in merges:
                raise ConfigError(f"token {i} ({b!r}) splits into tokens {left} and {right}, which no merge joins: "
                                  "tiktoken would join them, this tokenizer does not" + use)
    unreached = 0 if spec.whole_chunk_lookup else tok._compiled().unreached
    if unreached:
        raise ConfigError(f"{unreached:,d} tokens are not what BPE makes of their own bytes, and "
                          "this tokenizer has no ignore_merges: tiktoken maps such a chunk to the token" + use)


def _tiktoken_pattern(pattern: str | None) -> str:
    """The split for tiktoken that cuts text as tokenmill cuts it with ``pattern``. tokenmill encodes the
    text between two matches as a chunk of its own (as HF's ``Split``); tiktoken drops it, so a pattern
    that leaves gaps (``\\w+``) exported as it is lost the text between words, silently. A preset covers
    every character and goes as it is; any other pattern goes with an alternative that takes each gap
    whole (a run of characters none of which starts a match: the same chunks). One that matches the empty
    string (tiktoken's engine panics on it) or refers back to its groups (the copy would shift them) is
    refused."""
    import regex

    from ..pretokenize.splitter import pattern_name

    if pattern is None:
        return r"[\s\S]+"
    if pattern_name(pattern) is not None:
        return pattern
    _same_everywhere(pattern, "tiktoken's engine (fancy-regex: '$' only at the very end, POSIX classes ASCII)",
                     tiktoken=True)
    if regex.search(r"\\[1-9]|\(\?P=|\\k<|\\g<", pattern):
        raise ConfigError(f"the split pattern {pattern!r} refers back to its own groups, which the tiktoken export "
                          "cannot keep; export with save_huggingface")
    return f"(?:{pattern})|(?:(?!(?:{pattern}))[\\s\\S])+"


def save_huggingface(tok, path: str | os.PathLike) -> None:
    """Write a ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads."""
    body = to_huggingface_dict(tok)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")


def save_tiktoken(tok, path: str | os.PathLike) -> None:
    """Write a ``.tiktoken`` rank file (special tokens and the split pattern are not part of it; pass them
    to tiktoken). Refused where tiktoken's ranks would give other ids, as ``to_tiktoken`` is."""
    vocab = _tiktoken_vocab(tok)
    lines = "".join(f"{base64.b64encode(b).decode('ascii')} {i}\n" for i, b in vocab.items())
    with atomic_path(path) as tmp:
        tmp.write_text(lines, encoding="ascii")
