"""What a tokenizer file is, told from its first bytes: one sniffer for the reader that takes any file
(``adapters.load_tokenizer_path``) and for the readers of one format, which name the reader a file of
another format wants instead of only saying "not this format"."""

from __future__ import annotations

import re

from ...errors import FormatError
from .sentencepiece import is_sentencepiece_model

HEAD = 4096  # bytes of a file the sniffer reads

# kind -> (what the file is, the call that reads it)
READERS = {
    "tokenmill": ("a tokenmill tokenizer file", "Tokenizer.load(path)"),
    "huggingface": ("a Hugging Face tokenizer.json", "Tokenizer.from_huggingface(path)"),
    "tekken": ("Mistral's tekken.json", "Tokenizer.from_tekken(path)"),
    "sentencepiece": ("a SentencePiece .model file", "Tokenizer.from_sentencepiece(path)"),
    "tiktoken": ("a tiktoken rank file", "Tokenizer.from_tiktoken(path, pattern=...) with its split pattern"),
}


def file_kind(head: bytes) -> str | None:
    """The kind (a key of ``READERS``) of the tokenizer file whose first bytes are ``head`` (up to
    ``HEAD``), or None where they look like none of them (a JSON document without the marks of a
    tokenmill, tekken or HF file included)."""
    if is_sentencepiece_model(head):  # a protobuf ModelProto (Llama 3's tokenizer.model is a rank file)
        return "sentencepiece"
    h = head.lstrip()
    if h.startswith((b"{", b"[")):
        if b'"tokenmill.tokenizer"' in h or re.match(rb'\{\s*"format"\s*:', h):
            return "tokenmill"  # (a "format" key first: tokenmill's, its value damaged; HF files have none)
        if b'"default_num_special_tokens"' in h or (b'"config"' in h and b'"token_bytes"' in h):
            return "tekken"
        if any(k in h for k in (b'"added_tokens"', b'"pre_tokenizer"', b'"normalizer"', b'"model"')):
            return "huggingface"
        return None
    first = h.split(b"\n", 1)[0].rstrip(b"\r")
    if re.fullmatch(rb"[A-Za-z0-9+/]+={0,2} [0-9]+", first):
        return "tiktoken"
    return None


def other_format_error(source: str, head: bytes, want: str) -> str | None:
    """The message for a reader of ``want`` files handed ``source`` whose first bytes say it is a tokenizer
    file of another kind (which reader takes it), or None where they do not."""
    kind = file_kind(head)
    if kind is None or kind == want:
        return None
    what, call = READERS[kind]
    return (f"{source}: {what}, not {READERS[want][0]}; read it with {call}, or with tokenmill.as_tokenizer(path), "
            "which reads every tokenizer file")


def reading(source: str, head, want: str, parse):
    """``parse()``, a reader of ``want`` files at work on ``source``; where it fails (a FormatError) on a file
    whose first bytes (``head``: bytes, or a function giving them, called only then) are another tokenizer
    format's, a FormatError saying which reader takes it instead (a tokenizer.json handed to
    ``Tokenizer.load`` read "not a tokenmill tokenizer file", a rank file "not valid JSON ... write it
    again")."""
    try:
        return parse()
    except FormatError:
        msg = other_format_error(source, (head() if callable(head) else head)[:HEAD], want)
        if msg is None:
            raise
        raise FormatError(msg) from None


def file_head(path) -> bytes:
    """The first ``HEAD`` bytes of ``path`` (b"" where it cannot be read: the reader's own error stands)."""
    try:
        with open(path, "rb") as f:
            return f.read(HEAD)
    except OSError:
        return b""
