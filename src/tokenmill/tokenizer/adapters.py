"""One tokenizer protocol for every stage, and ``as_tokenizer`` to get it from whatever a user has.

Every stage that takes a tokenizer (store build, windows previews, chunking, the CLI, the demo) needs
only what ``TokenizerLike`` lists. ``as_tokenizer(obj)`` returns a tokenmill ``Tokenizer`` whenever
that is exact, else a ``ForeignTokenizer`` that calls the object's own batch encode:

* a ``Tokenizer``: itself;
* a path: a tokenmill tokenizer file, a ``tokenizer.json`` (or the folder holding one), a
  SentencePiece ``.model`` (protobuf: Mistral v1-v3, Llama 2; ``tokenizer.sentencepiece``), or a
  tiktoken rank file (``.tiktoken``, Llama 3's ``tokenizer.model``; give ``pattern=`` a preset name
  or regex, and ``special_tokens=``);
* a name, where no file has it: a Hugging Face Hub repo id (``"meta-llama/Meta-Llama-3-8B"``, fetched with
  ``huggingface_hub``) or a tiktoken encoding (``"cl100k_base"``) (``named.py``);
* a ``sentencepiece.SentencePieceProcessor``: its model, exactly (BPE) or wrapped (Unigram);
* a ``tokenizers.Tokenizer`` or a ``transformers.PreTrainedTokenizerFast`` (its backend): imported
  with ``Tokenizer.from_huggingface`` when it is byte-level BPE;
* a ``tiktoken.Encoding``: its ranks, pattern and special tokens.

A conversion is checked before it is trusted: a probe text (scripts, digits, whitespace runs,
contractions, the special tokens) must encode to the same ids both ways. A tokenizer tokenmill cannot
reproduce (WordPiece, Unigram, byte fallback, ...) is wrapped instead: slower, same ids.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..errors import ConfigError, FormatError, MissingExtraError
from .foreign import ForeignTokenizer
from .formats.kind import HEAD, READERS, file_kind

PROBE = (
    "Hello, world! It's 2024: naïve café, don't WE'LL 12345678 9.99% x\n\n  \tindented\r\n"
    "中文分词测试，标点。日本語のテキスト 한국어 Ελληνικά русский العربية हिन्दी 🙂👍🏽 e\u0301 "
    "def f(x):\n    return x ** 2  # comment\n\n\n   trailing   "
)


@runtime_checkable
class TokenizerLike(Protocol):
    """What the stages use. ``Tokenizer`` and ``ForeignTokenizer`` provide it."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def special_tokens(self) -> dict[str, int]: ...

    @property
    def content_hash(self) -> str: ...

    def encode(self, text: str, *, allowed_special=(), disallowed_special="all") -> list[int]: ...

    def encode_ordinary(self, text: str) -> list[int]: ...

    def encode_batch(self, texts, *, num_threads=None, as_arrays=False, allowed_special=(),
                     disallowed_special="all") -> list: ...

    def decode(self, ids, errors: str = "replace", *, skip_special_tokens: bool = False) -> str: ...

    def decode_bytes(self, ids) -> bytes: ...

    def token_bytes(self, token_id: int) -> bytes: ...


def as_tokenizer(obj, *, pattern=None, special_tokens=None, check: bool = True):
    """A tokenizer for every stage, from a Tokenizer, a path, or an HF / transformers / tiktoken object.

    ``pattern``/``special_tokens`` are for rank files only (a preset name or regex; a dict name -> id).
    ``check``: verify a conversion on a probe text before returning it (else fall back to a wrapper).
    """
    from .model import Tokenizer

    if isinstance(obj, Tokenizer):
        return obj
    if isinstance(obj, (str, os.PathLike)):
        return load_tokenizer_path(obj, pattern=pattern, special_tokens=special_tokens)
    if isinstance(obj, ForeignTokenizer):
        return obj
    hf = _hf_backend(obj)
    if hf is not None:
        from .formats.pretrained import transformers_config

        tok = _from_hf(hf, check)
        conf = transformers_config(obj)  # (a transformers object's roles and chat template: Llama 3 Instruct's EOS
        if conf is not None:             # is <|eot_id|>, not the <|end_of_text|> found by name)
            tok.pretrained_config = conf
        return tok
    if _is_tiktoken(obj):
        return _from_tiktoken(obj, check)
    if type(obj).__name__ == "SentencePieceProcessor" and hasattr(obj, "serialized_model_proto"):
        from .sentencepiece import from_processor

        return from_processor(obj)
    if isinstance(obj, TokenizerLike):
        return obj
    # a transformers tokenizer on sentencepiece (no fast backend): its processor or its file is what can be taken
    hint = ("; it runs sentencepiece: pass its .sp_model (sentencepiece's ids) or its .model file"
            if type(getattr(obj, "sp_model", None)).__name__ == "SentencePieceProcessor" else "")
    raise ConfigError(
        f"cannot use a {type(obj).__module__}.{type(obj).__name__} as a tokenizer{hint}; pass a tokenmill Tokenizer, "
        "a path (tokenmill file, tokenizer.json or its folder, tekken.json, SentencePiece .model, .tiktoken rank file), "
        "a tokenizers.Tokenizer, a transformers PreTrainedTokenizerFast, a tiktoken.Encoding or a "
        "sentencepiece.SentencePieceProcessor"
    )


def tokenizer_with(obj, needs: tuple[str, ...]):
    """``obj`` if it has every attribute in ``needs`` (a tokenmill tokenizer, or any object a stage can use as
    it is); else what :func:`as_tokenizer` makes of it (a tokenizer file's path, an HF, transformers,
    tiktoken or SentencePiece object), so that every stage takes what ``as_tokenizer`` takes; else a
    ConfigError naming what it got (an AttributeError from inside the stage before)."""
    if obj is not None and all(hasattr(obj, a) for a in needs):
        return obj
    if obj is not None:
        obj = as_tokenizer(obj)  # (a ConfigError naming what it cannot use)
    missing = [a for a in needs if not hasattr(obj, a)]
    if missing:
        raise ConfigError(f"a {type(obj).__name__} is not a tokenizer (no {', '.join(missing)}); pass a tokenmill "
                          "Tokenizer, a tokenizer file's path, or tokenmill.as_tokenizer(...) of an HF or a tiktoken "
                          "tokenizer")
    return obj


def load_tokenizer_path(path, *, pattern=None, special_tokens=None):
    """A tokenmill file, a tokenizer.json (or its folder), a tekken.json, or a rank file (needs ``pattern``)."""
    from .model import Tokenizer

    p = Path(path)
    if p.is_dir():
        if (p / "tokenizer.json").is_file():
            return _huggingface_file(p / "tokenizer.json")
        if (p / "tekken.json").is_file():
            return Tokenizer.from_tekken(p / "tekken.json")
        for name in ("tokenizer.model", "tokenizer.tiktoken"):
            if (p / name).is_file():
                return load_tokenizer_path(p / name, pattern=pattern, special_tokens=special_tokens)
        if (p / "manifest.json").is_file() or ((p / "tokens").is_dir() and (p / "loss_mask").is_dir()):
            raise ConfigError(f"{p} is a token store (data encoded by a tokenizer), not a tokenizer; pass the tokenizer "
                              "file or folder the store was built with")
        raise ConfigError(f"{p} is a folder without tokenizer.json or tokenizer.model; point at the tokenizer file")
    if not p.is_file():
        if p.exists():
            raise ConfigError(f"tokenizer {str(p)!r} is not a regular file (a device, FIFO or socket); pass a "
                              "tokenmill tokenizer file, a tokenizer.json (or its folder) or a .tiktoken rank file")
        from .named import named_tokenizer, not_found_note

        got = named_tokenizer(os.fspath(path), load_tokenizer_path, as_tokenizer, pattern=pattern,
                              special_tokens=special_tokens)
        if got is not None:
            return got
        raise ConfigError(f"tokenizer {str(p)!r} does not exist{not_found_note(os.fspath(path))}; pass a tokenmill "
                          "tokenizer file, a tokenizer.json (or its folder) or a .tiktoken rank file (or, by name, a "
                          "Hugging Face Hub repo id 'owner/name' or a tiktoken encoding such as 'cl100k_base')")
    with open(p, "rb") as f:
        head = f.read(HEAD)
    from .sentencepiece import load_or_wrap

    kind = file_kind(head)
    if kind not in (None, "tiktoken") and (pattern is not None or special_tokens):
        from .named import rank_options_refused

        raise rank_options_refused(pattern, special_tokens, f"{p} is {READERS[kind][0]}")
    if kind == "sentencepiece":  # a SentencePiece .model (protobuf), not Llama 3's rank file
        return load_or_wrap(p)
    if kind == "tokenmill":
        return Tokenizer.load(p)
    if kind == "tekken":  # Mistral's tekken.json
        return Tokenizer.from_tekken(p)
    if head.lstrip().startswith((b"{", b"[")):
        if p.name.lower().endswith((".jsonl", ".ndjson")):  # (it had been "tokenizer.json ... not valid JSON: write
            raise ConfigError(f"{p} is a JSONL file (data: a record a line), not a tokenizer; pass a tokenmill "  # it
                              "tokenizer file, a tokenizer.json (or its folder) or a .tiktoken rank file")  # again")
        return _huggingface_file(p)
    _check_rank_file(p, head)
    specials = None if special_tokens is None else dict(special_tokens)  # None: the model's, for a file it knows
    return Tokenizer.from_tiktoken(p, pattern=pattern, special_tokens=specials)


_WRAPPED_NOTICE: set = set()  # files already announced as run through HF tokenizers


def _huggingface_file(p: Path):
    """A tokenizer.json: tokenmill's own exact encoder where it can reproduce every component, else
    (an NFKC normalizer, another pre-tokenizer or model) HF ``tokenizers`` itself, said once on stderr."""
    import sys

    from ..errors import UnsupportedTokenizerError
    from .model import Tokenizer

    try:
        return Tokenizer.from_huggingface(p)
    except UnsupportedTokenizerError as e:
        reason = str(e).split(";")[0]
    try:
        import tokenizers
    except ImportError:
        raise MissingExtraError(f"{reason}; running it needs HF tokenizers: pip install 'tokenmill[hf]'") from None
    try:
        hf = tokenizers.Tokenizer.from_file(str(p))
    except Exception as e:  # noqa: BLE001  (HF's own parse errors: the file is not one it reads)
        raise FormatError(f"{reason}; HF tokenizers cannot read it either ({e})") from None
    key = os.path.realpath(p)
    if key not in _WRAPPED_NOTICE:
        _WRAPPED_NOTICE.add(key)
        print(f"tokenmill: {reason}; running it through HF tokenizers {tokenizers.__version__} instead "
              "(same ids, slower)", file=sys.stderr, flush=True)
    return ForeignTokenizer.from_hf(hf, hf.to_str(), str(p))


EXPECTED = ("expected a tokenmill tokenizer file, a Hugging Face tokenizer.json (or its folder), Mistral's "
            "tekken.json, a SentencePiece .model file, or a tiktoken rank file (.tiktoken, Llama 3's tokenizer.model: "
            "'<base64 token> <rank>' lines)")


def _check_rank_file(p: Path, head: bytes) -> None:
    """A file that is not JSON must look like a rank file (its first 4 kB); else say what it is."""
    import re

    model = p.name.endswith(".model") and head[:1] == b"\x0a"  # (a SentencePiece model starts with a piece)
    head = head.lstrip()
    if not head:
        raise FormatError(f"tokenizer file {str(p)!r} is empty; {EXPECTED}")
    if head.startswith(b"PAR1"):
        raise FormatError(f"tokenizer file {str(p)!r} is a Parquet file (binary), not a tokenizer; {EXPECTED}")
    try:
        head.decode("utf-8")
        binary = b"\0" in head
    except UnicodeDecodeError as e:  # a character cut at the end of the 4 kB read is still text
        binary = e.end < len(head) or e.reason != "unexpected end of data"
    if binary:
        raise FormatError(f"tokenizer file {str(p)!r} is a binary file (bytes that are not UTF-8 text), not a "
                          f"tokenizer; {EXPECTED}")
    first = head.splitlines()[0]
    if not re.fullmatch(rb"[A-Za-z0-9+/]+={0,2} [0-9]+", first):
        raise FormatError(f"tokenizer file {str(p)!r} is neither JSON nor a rank file (its first line {first[:60]!r} "
                          f"is not '<base64 token> <rank>')" + (
                              "; it starts as a SentencePiece .model does, so it may be one cut short or damaged: get "
                              "it again" if model else "") + f"; {EXPECTED}")


# ----------------------------------------------------------------------------------- HF objects
def _hf_backend(obj):
    """The ``tokenizers.Tokenizer`` of an HF object (itself, or a fast transformers tokenizer's backend)."""
    backend = getattr(obj, "backend_tokenizer", None)
    if backend is not None:
        return backend
    mod = type(obj).__module__ or ""
    if mod.startswith("tokenizers") and hasattr(obj, "to_str") and hasattr(obj, "encode_batch"):
        return obj
    return None


def _from_hf(hf, check: bool):
    from .foreign import plain_hf
    from .model import Tokenizer

    hf = plain_hf(hf, "the HF tokenizer object")  # (one that truncates or pads: a copy that does not, said)
    body = hf.to_str()
    try:
        tok = Tokenizer.from_huggingface_str(body, source="<the HF tokenizer object>")
    except FormatError:
        return ForeignTokenizer.from_hf(hf, body)
    if check:
        probe = PROBE + "".join(tok.added_tokens)
        if tok.encode(probe, allowed_special="all") != hf.encode(probe, add_special_tokens=False).ids:
            return ForeignTokenizer.from_hf(hf, body)
    return tok


def _is_tiktoken(obj) -> bool:
    return (type(obj).__module__ or "").startswith("tiktoken") and hasattr(obj, "_mergeable_ranks")


def _from_tiktoken(enc, check: bool):
    from .model import Tokenizer
    from .pretokenize.patterns import engine_differences

    if engine_differences(enc._pat_str, tiktoken=True):  # anchors tiktoken's engine reads otherwise: run it as it is
        return ForeignTokenizer.from_tiktoken(enc)
    try:
        tok = Tokenizer.from_ranks(dict(enc._mergeable_ranks), pattern=enc._pat_str,
                                   special_tokens=dict(enc._special_tokens))
    except (FormatError, ConfigError):
        return ForeignTokenizer.from_tiktoken(enc)
    if check:
        probe = PROBE + "".join(tok.special_tokens)
        if tok.encode(probe, allowed_special="all") != enc.encode(probe, allowed_special="all"):
            return ForeignTokenizer.from_tiktoken(enc)
    return tok
