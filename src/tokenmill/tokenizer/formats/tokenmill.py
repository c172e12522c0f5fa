"""tokenmill's own tokenizer file: versioned JSON with a content hash, validated on read.

Version 1 holds trained tokenizers (``model.type`` "merges": merge pairs in rank order, with their
training counts) and rank files ("ranks": base64 tokens by id, null where no token holds the id).
Version 2 adds model type "bpe" for imported merge lists (tokenizer.json): tokens by id, merges as id
pairs in priority order with the ids they make, HF's added tokens, normalizer and pre-tokenization.
What version 1 holds is still written as version 1 (same files, same hashes). Every file is checked
against ``schemas.TokenizerFile`` and its hash before use; ids must lie below the file's size.
"""

from __future__ import annotations

import binascii
import os

import numpy as np

from ..._io import canonical_hash, read_bytes_limited, write_json_atomic
from ..._schema import check, parse_json, show_value
from ...errors import FormatError, TokenmillError
from ..added import AddedToken
from ..pretokenize.patterns import preset_name
from ..pretokenize.splitter import pattern_name
from .schemas import BpeModel, MergesModel, TokenizerFile, check_ids_below

FORMAT_NAME = "tokenmill.tokenizer"
FORMAT_VERSION = 2  # 2 adds model type "bpe" (imported merge lists, ids anywhere, added tokens); 1 still read


def _b64(vocab) -> list:
    enc = binascii.b2a_base64  # base64.b64encode's own call, without its wrapper (2x on 200k tokens)
    return [None if b is None else enc(b, newline=False).decode("ascii") for b in vocab]


def to_dict(spec, merge_counts=None) -> dict:
    """The file's JSON body of a :class:`~tokenmill.tokenizer.spec.TokenizerSpec`, hash included."""
    if spec.merge_ids is not None or spec.added_tokens is not None:
        body: dict = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "pattern": spec.pattern,
            "pattern_preset": pattern_name(spec.pattern),
            "split_patterns": list(spec.split_patterns),
            "add_prefix_space": spec.add_prefix_space,
            "normalizer": spec.normalizer,
            "special_tokens": dict(spec.special_tokens),
            "added_tokens": None if spec.added_tokens is None else [t.to_dict() for t in spec.added_tokens],
            "model": {
                "type": "bpe",
                "tokens": _b64(spec.vocab),
                "merges": [] if spec.merges is None else spec.merges.tolist(),
                "merge_ids": [] if spec.merge_ids is None else spec.merge_ids.tolist(),
                "ignore_merges": spec.whole_chunk_lookup,
            },
        }
    else:
        body = {
            "format": FORMAT_NAME,
            "version": 1,
            "pattern": spec.pattern,
            "pattern_preset": preset_name(spec.pattern),
            "special_tokens": dict(spec.special_tokens),
        }
        if spec.merges is not None:
            body["model"] = {"type": "merges", "merges": spec.merges.tolist()}
            if merge_counts is not None:
                body["model"]["merge_counts"] = merge_counts.tolist()
        else:
            body["model"] = {"type": "ranks", "tokens": _b64(spec.vocab)}
    body["hash"] = canonical_hash(body)
    return body


def save(body: dict, path: str | os.PathLike) -> None:
    """Write a file's body atomically (a temporary name, then rename)."""
    write_json_atomic(path, body)


def load(cls, path: str | os.PathLike):
    """Read a file written by ``save``; a corrupted file, wrong hash or newer version fails clearly."""
    raw = read_bytes_limited(path, what="tokenizer")
    body = parse_json(raw, what=f"tokenizer file {os.fspath(path)!r}")
    return from_dict(cls, body, source=str(path), size=len(raw))


def from_dict(cls, body: dict, *, source: str = "<dict>", size: int | None = None):
    """A ``cls`` (Tokenizer) from a file's body, checked against ``schemas.TokenizerFile`` and its hash.
    ``size``: the size in bytes of the file ``body`` was read from; every id must lie below it
    (tokenmill sizes its tables by the largest id). None for a dict that is no file's (a worker's
    copy of a tokenizer already in memory): ids are then only bounded by 2**31."""
    if not isinstance(body, dict) or body.get("format") != FORMAT_NAME:
        raise FormatError(f"{source}: not a tokenmill tokenizer file (missing format={FORMAT_NAME!r})")
    version = body.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise FormatError(f"{source}: tokenizer format version {version!r} is not a format version "
                          "(a positive integer); the file is corrupted")
    if version > FORMAT_VERSION:
        raise FormatError(
            f"{source}: tokenizer format version {version!r} is newer than this tokenmill reads "
            f"(<= {FORMAT_VERSION}); upgrade tokenmill"
        )
    spec = check(body, TokenizerFile, what=source)
    unhashed = {k: v for k, v in body.items() if k != "hash"}
    try:
        expected = canonical_hash(unhashed)
    except (ValueError, RecursionError) as e:  # a number or a nesting JSON cannot write back
        raise FormatError(f"{source}: holds a value that cannot be hashed ({e}); the file is corrupted") from None
    if spec.hash != expected:
        raise FormatError(f"{source}: content hash mismatch (stored {spec.hash!r}); the file was modified or corrupted")
    try:
        return _build(cls, spec, source, size)
    except TokenmillError as e:
        if str(e).startswith(f"{source}:"):
            raise
        raise type(e)(f"{source}: {e}") from e  # name the file
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as e:
        raise FormatError(f"{source}: malformed tokenizer file ({type(e).__name__}: {e})") from e


def _build(cls, spec, source: str, size: int | None):
    model = spec.model
    specials = {k: json_int(v, f"special token {k!r} id", source, hi=2**31 - 1)
                for k, v in spec.special_tokens.items()}
    if size is not None:
        check_ids_below(size, ((f"special_tokens[{k!r}]", i) for k, i in specials.items()), where=source,
                        what="special token id")
    if isinstance(model, MergesModel):
        counts = model.merge_counts
        merges = json_ints(model.merges, "merges", source, hi=2**31 - 1)
        return cls.from_merges(merges.reshape(-1, 2) if merges.size == 0 else merges,
                               pattern=spec.pattern, special_tokens=specials,
                               merge_counts=None if counts is None else json_ints(counts, "merge_counts", source))
    vocab = b64_tokens(model.tokens, source)
    if not isinstance(model, BpeModel):  # ranks
        ranks: dict[bytes, int] = {}
        for i, b in enumerate(vocab):
            if b is not None:
                if b in ranks:
                    raise FormatError(f"{source}: model.tokens[{i:,d}] repeats the token {b!r} of "
                                      f"model.tokens[{ranks[b]:,d}]; each token has one rank")
                ranks[b] = i
        return cls.from_ranks(ranks, pattern=spec.pattern, special_tokens=specials)
    added = spec.added_tokens
    if added is not None and size is not None:
        check_ids_below(size, ((f"added_tokens[{k}].id", t.id) for k, t in enumerate(added)), where=source,
                        what="added token id")
    merges = json_ints(model.merges, "merges", source, hi=2**31 - 1)
    merge_ids = json_ints(model.merge_ids, "merge_ids", source, hi=2**31 - 1) if model.merge_ids else None
    return cls.from_merge_list(
        vocab, merges.reshape(-1, 2), pattern=spec.pattern,
        special_tokens=None if added is not None else specials,
        added_tokens=None if added is None else [AddedToken.from_entry(t) for t in added],
        ignore_merges=model.ignore_merges, normalizer=spec.normalizer, merge_ids=merge_ids,
        add_prefix_space=spec.add_prefix_space, split_patterns=spec.split_patterns, source=source)


def b64_tokens(tokens, source: str) -> list[bytes | None]:
    """A tokenmill file's ``model.tokens`` (base64 or null) as bytes, decoded strictly."""
    out: list[bytes | None] = []
    for i, t in enumerate(tokens):
        try:
            out.append(None if t is None else binascii.a2b_base64(t, strict_mode=True))
        except ValueError as e:
            raise FormatError(f"{source}: field model.tokens[{i:,d}] = {show_value(t)}: not base64 ({e})") from None
    return out


def json_int(v, what: str, source: str, hi: int = 2**63 - 1) -> int:
    """An integer as JSON holds it: not a bool, a float (1.5 or 2.0) or a string ("398")."""
    if type(v) is not int or not -(2**63) <= v <= hi:
        shown = f"{v:,d}" if type(v) is int else repr(v) if isinstance(v, (bool, float, str)) else show_value(v)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise FormatError(f"{source}: {what} is {shown}; it must be an integer no larger than {hi:,d}")
    return v


def json_ints(value, what: str, source: str, hi: int = 2**63 - 1) -> np.ndarray:
    """A JSON list of integers, or of equal-length lists of integers, as an int64 array (each entry
    checked as :func:`json_int`)."""
    if not isinstance(value, list):
        raise FormatError(f"{source}: {what} must be a list, got {type(value).__name__}")
    if not (value and isinstance(value[0], list)):
        return np.array([json_int(v, f"{what}[{i:,d}]", source, hi) for i, v in enumerate(value)], np.int64)
    width = len(value[0])
    flat = []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != width:
            raise FormatError(f"{source}: {what}[{i:,d}] is {show_value(row)}; every entry must be a list of {width} "
                              "integers")
        flat.extend(json_int(v, f"{what}[{i:,d}]", source, hi) for v in row)
    return np.array(flat, np.int64).reshape(len(value), width)

