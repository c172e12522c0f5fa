"""tokenmill's own tokenizer file: versioned JSON with a content hash, validated on read.

Version 1 holds trained tokenizers (``model.type`` "merges": merge pairs in rank order, with their
training counts) and rank files ("ranks": base64 tokens by id, null where no token holds the id).
Version 2 adds model type "bpe" for imported merge lists (tokenizer.json): tokens by id, merges as id
pairs in priority order with the ids they make, HF's added tokens, normalizer and pre-tokenization.
Version 3 adds ``pretrained``: the roles of the special tokens, the chat template and the longest input of
the model the tokenizer was read from (``schemas.SavedRoles``), outside the tokenizer's content hash (they
decide no id). What version 1 or 2 holds is still written as that version (same files, same hashes). Every file is checked
against ``schemas.TokenizerFile`` and its hash before use; ids must lie below the file's size.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import os

import numpy as np

from ..._io import canonical_hash, read_bytes_limited, write_json_atomic
from ..._schema import check, parse_json, show_value
from ...errors import FormatError, TokenmillError
from ..added import AddedToken
from ..pretokenize.patterns import preset_name
from ..pretokenize.splitter import pattern_name
from .kind import reading
from .schemas import BpeModel, MergesModel, TokenizerFile, check_ids_below

FORMAT_NAME = "tokenmill.tokenizer"
FORMAT_VERSION = 3  # 2 adds model type "bpe" (imported merge lists, ids anywhere, added tokens); 3 "pretrained"


def _b64(vocab) -> list:
    enc = binascii.b2a_base64  # base64.b64encode's own call, without its wrapper (2x on 200k tokens)
    return [None if b is None else enc(b, newline=False).decode("ascii") for b in vocab]


def _as_lists(kind: str, value):
    """The body's large lists as JSON holds them (see :func:`_body`)."""
    return _b64(value) if kind == "b64" else value.tolist()


def _body(spec, merge_counts, big) -> dict:
    """The file's JSON body without its hash; ``big(kind, value)`` gives each large list: kind "b64"
    (the vocabulary, a list of bytes or None), "pairs" (an (n, 2) int array) or "ints" (1-D)."""
    if spec.merge_ids is not None or spec.added_tokens is not None:
        no_ints = np.zeros(0, np.int64)
        return {
            "format": FORMAT_NAME,
            "version": 2,  # (3 only with "pretrained": with_pretrained)
            "pattern": spec.pattern,
            "pattern_preset": pattern_name(spec.pattern),
            "split_patterns": list(spec.split_patterns),
            "add_prefix_space": spec.add_prefix_space,
            "normalizer": spec.normalizer,
            "special_tokens": dict(spec.special_tokens),
            "added_tokens": None if spec.added_tokens is None else [t.to_dict() for t in spec.added_tokens],
            "model": {
                "type": "bpe",
                "tokens": big("b64", spec.vocab),
                "merges": big("pairs", no_ints.reshape(0, 2) if spec.merges is None else spec.merges),
                "merge_ids": big("ints", no_ints if spec.merge_ids is None else spec.merge_ids),
                "ignore_merges": spec.whole_chunk_lookup,
            },
        }
    body = {
        "format": FORMAT_NAME,
        "version": 1,
        "pattern": spec.pattern,
        "pattern_preset": preset_name(spec.pattern),
        "special_tokens": dict(spec.special_tokens),
    }
    if spec.merges is not None:
        body["model"] = {"type": "merges", "merges": big("pairs", spec.merges)}
        if merge_counts is not None:
            body["model"]["merge_counts"] = big("ints", merge_counts)
    else:
        body["model"] = {"type": "ranks", "tokens": big("b64", spec.vocab)}
    return body


def to_dict(spec, merge_counts=None) -> dict:
    """The file's JSON body of a :class:`~tokenmill.tokenizer.spec.TokenizerSpec`, hash included."""
    body = _body(spec, merge_counts, _as_lists)
    body["hash"] = canonical_hash(body)
    return body


def with_pretrained(body: dict, pretrained: dict | None) -> dict:
    """``body`` (:func:`to_dict`'s) with the model's roles (``formats.pretrained.saved_roles``): version 3, and the
    file's hash over both (the tokenizer's content hash, its identity, stays ``body``'s); ``body`` itself where
    there are none."""
    if pretrained is None:
        return body
    out = {k: v for k, v in body.items() if k != "hash"}
    out["version"], out["pretrained"] = 3, pretrained
    out["hash"] = canonical_hash(out)
    return out


def content_hash(spec, merge_counts=None) -> str:
    """``to_dict(spec, merge_counts)["hash"]``, the same sha256 of the same canonical JSON, with the large
    lists written by numpy (:func:`_b64_json`, :func:`_ints_json`) instead of made as Python lists and
    written by ``json``: 50k base64 tokens ~25 -> ~5 ms, 32k merges with their counts ~35 -> ~5 ms. Most
    of that time no longer holds the interpreter lock, which a store build's encoding thread needs
    between its kernel calls while the calling thread hashes the tokenizer."""
    fragments: dict[str, str] = {}

    def big(kind: str, value):
        mark = f"\0{len(fragments)}\0"  # a string no field of the body holds (JSON: "\u00000\u0000")
        fragments[mark] = _b64_json(value) if kind == "b64" else _ints_json(value, pairs=kind == "pairs")
        return mark

    text = json.dumps(_body(spec, merge_counts, big), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for mark, frag in fragments.items():
        quoted = json.dumps(mark)
        if frag is None or text.count(quoted) != 1:  # (never expected: then the plain way)
            return to_dict(spec, merge_counts)["hash"]
        text = text.replace(quoted, frag)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


_B64_PAD = ord("=")
_PIECE = 8192  # tokens or values rendered at a time (see _in_pieces)


def _in_pieces(n: int, render, step: int | None = None) -> list[str]:
    """``render(lo, hi)`` over ``[0, n)`` in pieces, handing the interpreter lock to a waiting thread
    between them (``time.sleep(0)``): each piece holds it for well under a millisecond, so a store
    build's encoding thread, which needs it between kernel calls, is not kept waiting for the whole
    list (20 ms of its first shards' time, GPT-2's 50k tokens, when this ran in one go)."""
    import time

    out, step = [], step or _PIECE
    for lo in range(0, n, step):
        out.append(render(lo, min(n, lo + step)))
        time.sleep(0)
    return out


def _b64_json(vocab) -> str:
    """``json.dumps(_b64(vocab), separators=(",", ":"))``: see :func:`_b64_items`."""
    vocab = list(vocab)
    return "[" + ",".join(_in_pieces(len(vocab), lambda lo, hi: _b64_items(vocab[lo:hi]))) + "]"


def _b64_items(vocab: list) -> str:
    """The items of a non-empty ``json.dumps(_b64(vocab))``, comma-separated: each token's base64 in one
    pass of ``b2a_base64`` over the tokens laid out on 3-byte boundaries (the zero bytes that pad a token
    give the "A"s that become its "="), then quotes, commas and nulls put in place by numpy."""
    n = len(vocab)
    present = np.ones(n, bool)
    at = -1
    for _ in range(vocab.count(None)):  # ids no token holds (rank files' gaps, special ids): C-speed scans
        at = vocab.index(None, at + 1)
        vocab[at], present[at] = b"", False
    size = np.fromiter(map(len, vocab), np.int64, n)
    padded = (size + 2) // 3 * 3
    src = np.cumsum(size) - size
    dst = np.cumsum(padded) - padded
    data = np.zeros(int(padded.sum()), np.uint8)
    blob = np.frombuffer(b"".join(vocab), np.uint8)
    owner = np.repeat(np.arange(n), size)
    data[np.arange(blob.size) + (dst - src)[owner]] = blob
    chars = np.frombuffer(binascii.b2a_base64(data.tobytes(), newline=False), np.uint8).copy()
    width, cstart = padded // 3 * 4, dst // 3 * 4
    end = (cstart + width)[size % 3 != 0]
    rem = (size % 3)[size % 3 != 0]
    chars[end - 1] = _B64_PAD  # 1 or 2 bytes in the last group: "xx==" or "xxx="
    chars[(end - 2)[rem == 1]] = _B64_PAD
    item = np.where(present, width + 2, 4)  # '"...."' or 'null'
    start = np.cumsum(item + 1) - (item + 1)  # each followed by a comma
    out = np.full(int(item.sum()) + n - 1, ord(","), np.uint8)
    out[start[present]] = ord('"')
    out[(start + item - 1)[present]] = ord('"')
    owner = np.repeat(np.arange(n), width)
    out[np.arange(chars.size) + (start + 1 - cstart)[owner]] = chars
    out[start[~present][:, None] + np.arange(4)] = np.frombuffer(b"null", np.uint8)
    return out.tobytes().decode("ascii")


def _ints_json(values, *, pairs: bool) -> str | None:
    """``json.dumps(values.tolist(), separators=(",", ":"))`` of a 1-D array, or of an (n, 2) one
    (``pairs``): see :func:`_ints_items`. None for a negative value (no such id or count is written;
    the caller then takes the plain way)."""
    v = np.ascontiguousarray(values, np.int64).reshape(-1)
    if v.size == 0:
        return "[]"
    if int(v.min()) < 0:
        return None
    step = 2 * _PIECE  # (even: a piece holds whole pairs)
    text = ("],[" if pairs else ",").join(_in_pieces(v.size, lambda lo, hi: _ints_items(v[lo:hi], pairs), step))
    return f"[[{text}]]" if pairs else f"[{text}]"


def _ints_items(v: np.ndarray, pairs: bool) -> str:
    """The decimal digits of every value of non-empty, non-negative ``v`` at once, comma-separated
    (``pairs``: "a,b],[c,d", the inside of a list of pairs)."""
    top = int(v.max())
    width, gap = len(str(top)), 3 if pairs else 1
    # right-aligned digits and the separator after them ("," or "],[" after a pair's second value), row by
    # row; the bytes that belong to the text picked out in one pass (row-major: the text's order)
    rows = np.empty((v.size, width + gap), np.uint8)
    q, ten = (v.astype(np.uint32), np.uint32(10)) if top < 2**32 else (v.copy(), np.int64(10))  # (uint32: 3x)
    digits = np.ones(v.size, np.uint8)
    for k in range(width):
        nxt = q // ten
        rows[:, width - 1 - k] = q - nxt * ten + ord("0")
        digits += nxt != 0
        q = nxt
    rows[:, width] = ord(",")
    sep = np.ones(v.size, np.uint8)
    if pairs:
        rows[1::2, width:] = np.frombuffer(b"],[", np.uint8)
        sep[1::2] = 3
    sep[-1] = 0
    col = np.arange(width + gap)  # which bytes of a row are text, for each (digits, separator length)
    shapes = (col >= width - np.arange(width + 1)[:, None, None]) & (col < width + np.arange(4)[None, :, None])
    keep = shapes.reshape(-1, width + gap)[digits.astype(np.intp) * 4 + sep]
    return rows[keep].tobytes().decode("ascii")


def save(body: dict, path: str | os.PathLike) -> None:
    """Write a file's body atomically (a temporary name, then rename)."""
    write_json_atomic(path, body)


def load(cls, path: str | os.PathLike):
    """Read a file written by ``save``; a corrupted file, wrong hash or newer version fails clearly."""
    raw = read_bytes_limited(path, what="tokenizer")
    # (another tokenizer format's file, a tokenizer.json or a rank file, is named with the reader it wants)
    return reading(str(path), raw, "tokenmill", lambda: from_dict(
        cls, parse_json(raw, what=f"tokenizer file {os.fspath(path)!r}"), source=str(path), size=len(raw)))


def from_dict(cls, body: dict, *, source: str = "<dict>", size: int | None = None):
    """A ``cls`` (Tokenizer) from a file's body, checked against ``schemas.TokenizerFile`` and its hash.
    ``size``: the size in bytes of the file ``body`` was read from; every id must lie below it
    (tokenmill sizes its tables by the largest id). None for a dict that is no file's (a worker's
    copy of a tokenizer already in memory): ids are then only bounded by 2**31."""
    if not isinstance(body, dict) or body.get("format") != FORMAT_NAME:
        found = body.get("format") if isinstance(body, dict) else None
        raise FormatError(f"{source}: not a tokenmill tokenizer file (" + (
            f"format={found!r} where a tokenmill file has {FORMAT_NAME!r}: damaged or edited; save it again"
            if isinstance(found, str) else f"missing format={FORMAT_NAME!r}") + ")")
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
        tok = _build(cls, spec, source, size)
        if spec.pretrained is not None:
            from .pretrained import roles_read

            tok.pretrained_config = roles_read(spec.pretrained, source)
        return tok
    except TokenmillError as e:
        if str(e).startswith(f"{source}:"):
            raise
        raise type(e)(f"{source}: {e}") from e  # name the file
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as e:
        raise FormatError(f"{source}: malformed tokenizer file ({type(e).__name__}: {e})") from e


def _build(cls, spec, source: str, size: int | None):
    model = spec.model
    if spec.pattern_preset is not None:  # (written beside the pattern, never read back: an edit had gone unseen)
        from ..pretokenize.patterns import resolve_pattern

        try:
            named = resolve_pattern(spec.pattern_preset)
        except TokenmillError:
            named = None
        if named != spec.pattern:
            raise FormatError(f"{source}: pattern_preset {spec.pattern_preset!r} is " + (
                "no preset this tokenmill knows" if named is None else "not the file's pattern") +
                "; the file was edited: save the tokenizer again (or set pattern_preset to null)")
    specials = {k: json_int(v, f"special token {k!r} id", source, hi=2**31 - 1)
                for k, v in spec.special_tokens.items()}
    if size is not None:
        check_ids_below(size, ((f"special_tokens[{k!r}]", i) for k, i in specials.items()), where=source,
                        what="special token id")
    if isinstance(model, MergesModel):
        counts = model.merge_counts
        merges = json_ints(model.merges, "merges", source, hi=2**31 - 1, width=2)
        return cls.from_merges(merges,
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
    merges = json_ints(model.merges, "merges", source, hi=2**31 - 1, width=2)
    merge_ids = json_ints(model.merge_ids, "merge_ids", source, hi=2**31 - 1) if model.merge_ids else None
    return cls.from_merge_list(
        vocab, merges, pattern=spec.pattern,
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


def json_ints(value, what: str, source: str, hi: int = 2**63 - 1, width: int | None = None) -> np.ndarray:
    """A JSON list of integers, or (``width``: lists of ``width`` integers each; else of equal-length lists,
    the first's length) a 2-D int64 array (each entry checked as :func:`json_int`)."""
    if not isinstance(value, list):
        raise FormatError(f"{source}: {what} must be a list, got {type(value).__name__}")
    if width is None and not (value and isinstance(value[0], list)):
        return np.array([json_int(v, f"{what}[{i:,d}]", source, hi) for i, v in enumerate(value)], np.int64)
    if width is None:
        width = len(value[0])
    if not value:
        return np.zeros((0, width), np.int64)
    flat = []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != width:
            raise FormatError(f"{source}: {what}[{i:,d}] is {show_value(row)}; every entry must be a list of {width} "
                              "integers")
        flat.extend(json_int(v, f"{what}[{i:,d}]", source, hi) for v in row)
    return np.array(flat, np.int64).reshape(len(value), width)

