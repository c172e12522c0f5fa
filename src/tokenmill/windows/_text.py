"""Token positions <-> character offsets, for any lossless byte-level tokenizer (duck-typed).

A token may hold part of a character (byte-level BPE splits UTF-8). The rule used everywhere: a
character belongs to the token that holds its first byte. So the character offset of a token
boundary at byte ``B`` is the number of characters whose first byte lies before ``B``::

    text   "a中b"        bytes  61 | e4 b8 ad | 62
    tokens [61 e4] [b8 ad 62]  ->  token 0 = chars [0, 2) ("a中"), token 1 = chars [2, 3) ("b")

>>> class Bytes:  # a byte-level tokenizer: one token per byte
...     def encode_ordinary(self, text): return list(text.encode())
...     def token_bytes(self, i): return bytes([i])
>>> ids, bounds = encode_with_offsets("a中b", Bytes())
>>> bounds.tolist()   # char offset of each token boundary: the 3 bytes of 中 map to char 1..2
[0, 1, 2, 2, 2, 3]
"""

from __future__ import annotations

import numpy as np

from .._validate import check_array
from ..errors import ConfigError, InputError


def token_byte_lengths(ids: np.ndarray, tokenizer) -> np.ndarray:
    """Byte length of each token, looking each distinct id up once."""
    uniq, inv = np.unique(np.asarray(ids, np.int64), return_inverse=True)
    lens = np.fromiter((len(tokenizer.token_bytes(int(t))) for t in uniq), np.int64, uniq.size)
    return lens[inv.ravel()] if uniq.size else np.zeros(0, np.int64)


def char_offsets(text: str, byte_offsets: np.ndarray) -> np.ndarray:
    """Character index of each byte offset, snapped up to the next character start."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    char_starts = np.flatnonzero((data & 0xC0) != 0x80)  # byte offset of each character's first byte
    return np.searchsorted(char_starts, byte_offsets, side="left").astype(np.int64)


def encode_with_offsets(text: str, tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, bounds)``: ids int64 ``(n,)``; bounds int64 ``(n + 1,)``, the character offset of each
    token boundary, so tokens ``[a, b)`` are the text ``text[bounds[a]:bounds[b]]``."""
    ids, bounds, _ = encode_with_byte_offsets(text, tokenizer)
    return ids, bounds


def encode_with_byte_offsets(text: str, tokenizer) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, char bounds, byte bounds)``: as :func:`encode_with_offsets`, plus the byte offset of
    each token boundary (int64 ``(n + 1,)``)."""
    from ..tokenizer.adapters import tokenizer_with

    if not isinstance(text, str):
        raise ConfigError(f"the text is a {type(text).__name__}, not a str" +
                          ("; decode it first (text.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""))
    tokenizer = tokenizer_with(tokenizer, ("encode_ordinary", "token_bytes"))
    # (ids checked, never truncated: a tokenizer giving floats or negative numbers is named)
    ids = check_array(tokenizer.encode_ordinary(text), "the tokenizer's encode_ordinary ids", min=0)
    byte_bounds = np.concatenate([[0], np.cumsum(token_byte_lengths(ids, tokenizer))])
    n_bytes = len(text.encode("utf-8"))
    if int(byte_bounds[-1]) != n_bytes:
        raise InputError(f"the tokenizer's tokens hold {int(byte_bounds[-1]):,d} bytes but the text has "
                         f"{n_bytes:,d}; character spans need a lossless byte-level tokenizer (byte-level BPE: "
                         "GPT-2, cl100k, o200k, Llama 3, Qwen, a tokenmill-trained one; a SentencePiece .model adds "
                         "a prefix space the text does not hold)")
    return ids, char_offsets(text, byte_bounds), byte_bounds.astype(np.int64)


def char_byte_starts(text: str) -> np.ndarray:
    """int64 ``(len(text) + 1,)``: the byte offset where each character starts, then the byte length."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    return np.append(np.flatnonzero((data & 0xC0) != 0x80), data.size).astype(np.int64)
