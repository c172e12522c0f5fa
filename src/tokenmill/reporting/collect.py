"""What ``tokenmill report`` shows, collected from a tokenizer, a token store and texts.

Everything here is data: JSON-ready dicts of ints, floats, strings and lists, one per section of the
page (:mod:`.render` draws them). The work is bounded whatever the size of the input:

* ``samples`` documents (and every given text) are shown token by token, each cut to its first
  ``sample_tokens`` tokens;
* at most ``stat_tokens`` tokens, from at most ``stat_docs`` documents drawn with ``seed``, feed the
  vocabulary statistics (texts: their first ``text_bytes`` bytes);
* window and packing plans use the lengths of at most ``plan_docs`` documents (a seeded sample of a
  larger store, said so on the page); only the store's lengths are read whole.

Token pieces: the text of a sample is cut where its tokens are, with an incremental UTF-8 decoder
fed one token's bytes at a time, so a character split across tokens appears in the token that
completes it (the others show an empty, marked piece) and the pieces join to ``tok.decode(ids)`` (a
SentencePiece-style tokenizer's first piece drops the space its encoder put before the text, as its
``decode`` does)::

    ids     [20013]  [19990, 157]   ->  bytes  e4 b8  |  96 e7  |  95 8c     ("世界")
    pieces  ""        "世"           "界"                (the first two are partial UTF-8)
"""

from __future__ import annotations

import codecs
import os
import unicodedata
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from .._validate import check_int
from .._version import __version__
from .._words import counted
from ..batching.packing import pack
from ..batching.padding import pad_batch
from ..conventions import IGNORE_INDEX
from ..data.readers import open_binary, read_chunk
from ..data.source import as_source, ids_checked
from ..data.stats import PERCENTILES, store_stats
from ..data.store import TokenStore
from ..data.text import Replaced, check_input_file, decode_utf8
from ..errors import ConfigError, InputError, TokenmillError
from ..tokenizer.adapters import as_tokenizer
from ..windows.coverage import coverage_report
from ..windows.sliding import SlidingWindows

SHOWN_ROWS = 20  # first/last merges, files, scripts listed
MAX_LENGTH_BIN = 32  # token lengths of 32 bytes and more share the last bin
MAX_DRAWN_SEGMENTS = 64  # per drawn block (a block of 800 tiny documents would be 800 slivers)
MAX_DRAWN_POSITIONS = 1 << 22  # blocks drawn x block size: the batch materialized to count their targets
EXACT_FILE_DOCS = 4_000_000  # tokens per source file: exact (all provenance) up to this many documents


# Tokens drawn one element each: a page of 716K of them took ~21 s to open in chromium (2 cores), the
# default page's 8K ~2 s; 262,144 keep the largest page allowed under ~8 s.
SHOWN_TOKENS = 1 << 18


@dataclass(frozen=True)
class ReportOptions:
    """How much the report reads and shows (see the module docstring); every bound is a count."""

    samples: int = 8
    sample_tokens: int = 1024
    stat_tokens: int = 1_000_000
    stat_docs: int = 2048
    plan_docs: int = 1_000_000
    text_bytes: int = 1 << 20
    window: int = 512
    stride: int | None = None  # default window // 2
    block_size: int = 2048
    blocks: int = 24  # packed blocks drawn
    seed: int = 0
    allow_special: bool = False  # texts: special-token text becomes special tokens (else plain text)
    errors: str = "strict"  # texts: invalid UTF-8 fails naming the file, or "replace"

    def __post_init__(self):
        # each bound checked and kept as a Python int (a numpy scalar would do the products below, and the
        # collectors' sums, in its own width); frozen: set through object.__setattr__
        for name, lo, hi in (("samples", 1, 1000), ("sample_tokens", 1, 1 << 20), ("stat_tokens", 1, 1 << 30),
                             ("stat_docs", 1, 1 << 24), ("plan_docs", 1, 1 << 30), ("text_bytes", 1, 1 << 30),
                             ("window", 1, 1 << 30), ("stride", 1, 1 << 30), ("block_size", 1, 1 << 24),
                             ("blocks", 1, 256), ("seed", 0, None)):
            object.__setattr__(self, name, check_int(getattr(self, name), name, min=lo, max=hi, none=name == "stride"))
        if self.block_size < 2:  # (the loader's rule too: a row of one position holds no target)
            raise ConfigError(f"block_size={self.block_size}: a block of one position holds no target (the first label "
                              "of every document in a block is ignored); pass 2 or more")
        if self.samples * self.sample_tokens > SHOWN_TOKENS:
            raise ConfigError(f"samples={self.samples:,d} x sample_tokens={self.sample_tokens:,d} shows more than "
                              f"{SHOWN_TOKENS:,d} tokens; the page would open too slowly: show fewer or shorter "
                              "samples")
        if self.errors not in ("strict", "replace"):
            raise ConfigError(f"errors={self.errors!r}; use 'strict' or 'replace'")

    @property
    def window_stride(self) -> int:
        return self.stride if self.stride is not None else max(1, self.window // 2)


@dataclass(frozen=True)
class ReportData:
    """The page's data, one dict per section (``store`` is None without a store)."""

    meta: dict
    tokens: dict
    vocabulary: dict
    store: dict | None
    windows: dict
    packing: dict

    def to_dict(self) -> dict:
        return asdict(self)


# ---- documents ---------------------------------------------------------------------------------------
@dataclass
class _Doc:
    """A document read for the report: its first tokens (``ids``) and where it comes from."""

    name: str  # shown above the sample
    source: str  # the group of "per source" statistics: a file name
    ids: np.ndarray  # int64, the tokens read (a prefix of the document)
    length: int  # the document's full length in tokens
    index: int = -1  # the store's document index (-1 for a text)
    note: str = ""  # e.g. "first 1,048,576 bytes of 5,000,000"


class _Vocab:
    """Per-id tables of a tokenizer: bytes, byte length, special, partial UTF-8 (id -> value)."""

    def __init__(self, tok):
        n = int(tok.vocab_size)
        self.size = n
        self.bytes: list[bytes | None] = [None] * n
        items = getattr(tok, "vocab_items", None)
        pairs = items() if items is not None else ((i, _token_bytes(tok, i)) for i in range(n))
        for i, b in pairs:
            if 0 <= i < n:
                self.bytes[i] = b
        specials = dict(getattr(tok, "added_tokens", None) or {}) | dict(tok.special_tokens)
        self.special = np.zeros(n, bool)
        for i in specials.values():
            if 0 <= i < n:
                self.special[i] = True
                self.bytes[i] = _token_bytes(tok, i)
        self.special_names = {int(i): s for s, i in specials.items() if 0 <= i < n}
        self.nbytes = np.fromiter((len(b) if b is not None else 0 for b in self.bytes), np.int64, n)
        self.content = np.fromiter((b is not None for b in self.bytes), bool, n) & ~self.special
        self.partial = np.fromiter((b is not None and not _valid_utf8(b) for b in self.bytes), bool, n)
        self.dummy_prefix = self._strips_leading_space(tok)

    def _strips_leading_space(self, tok) -> bool:
        """Whether ``tok.decode`` drops the space its encoder put before the text (SentencePiece's dummy prefix:
        "Hello" is the token "▁Hello", decoded "Hello"): then a sample's first piece drops it too, so the pieces
        join to the decoded text and its bytes are the text's (they had held the prefix: 12 bytes for 11)."""
        for text in ("x", "a", "e", "1", "的"):  # (a letter its vocabulary spells, not its unknown token)
            try:
                ids = tok.encode(text, allowed_special=(), disallowed_special=())
                joined, decoded = b"".join(self.of(int(i)) for i in ids), tok.decode(list(ids))
            except Exception:  # noqa: BLE001 -- (a tokenizer without these keywords, say: no prefix assumed)
                return False
            if decoded == text and joined in (text.encode(), b" " + text.encode()):
                return joined != text.encode()
        return False

    def of(self, i: int) -> bytes:
        b = self.bytes[i] if 0 <= i < self.size else None
        return b if b is not None else b""


def _token_bytes(tok, i: int) -> bytes | None:
    try:
        return tok.token_bytes(i)
    except (TokenmillError, KeyError, ValueError, IndexError, TypeError):
        return None


def _valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which UTF-8 cannot hold) replaced by U+FFFD.

    >>> clean_text("a\\ud800b")
    'a\\ufffdb'
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def whole_chars(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut off at its end (a prefix read from a longer file).

    >>> whole_chars("ab世".encode()[:4])
    b'ab'
    """
    j = len(data)
    while j > 0 and j > len(data) - 4 and data[j - 1] & 0xC0 == 0x80:
        j -= 1
    if j == 0:
        return data
    lead = data[j - 1]
    need = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC0 else 1
    return data[: j - 1] if len(data) - (j - 1) < need else data


def _read_prefix(path, limit: int, errors: str, total: Replaced) -> tuple[str, str]:
    """The text of the first ``limit`` bytes of a file (whole characters), and a note when cut or when
    invalid UTF-8 was replaced (``errors="replace"``; counted in ``total`` too)."""
    raw = os.fspath(path)
    check_input_file(raw)  # missing, a directory, a device: an InputError naming it
    compressed = raw.lower().endswith((".gz", ".zst"))
    try:
        with open_binary(Path(raw)) as f:  # .gz and .zst decompressed, as the store's readers do
            data = read_chunk(f, raw, limit + 1)
            size = None if compressed else os.fstat(f.fileno()).st_size
    except OSError as e:
        raise InputError(f"cannot read text {raw!r}: {e.strerror or e}") from None
    note = ""
    if len(data) > limit:
        data = whole_chars(data[:limit])
        note = (f"first {len(data):,d} bytes of {size:,d}" if size is not None and size > limit
                else f"first {len(data):,d} bytes" + (" decompressed" if compressed else ""))
    replaced = Replaced()
    text = decode_utf8(data, name=raw, errors=errors, replaced=replaced)
    total.merge(replaced)
    if replaced.count:
        note = ", ".join(filter(None, [note, f"{counted(replaced.count, 'invalid UTF-8 sequence')} replaced with "
                                             f"U+FFFD, the first at byte offset {replaced.offset:,d}"]))
    return text, note


def _text_docs(tok, files, texts, opts: ReportOptions, replaced: Replaced) -> list[_Doc]:
    named = [(os.fspath(p), *_read_prefix(p, opts.text_bytes, opts.errors, replaced)) for p in files]
    for k, t in enumerate(texts):
        if not isinstance(t, str):
            raise ConfigError(f"texts[{k}] is a {type(t).__name__}; pass str (file paths go in files=)")
        data = clean_text(t).encode("utf-8")
        cut = whole_chars(data[: opts.text_bytes]) if len(data) > opts.text_bytes else data
        named.append((f"text {k + 1}", cut.decode("utf-8"), f"first {len(cut):,d} bytes" if cut is not data else ""))
    docs = []
    for name, text, note in named:
        if opts.allow_special:
            ids = tok.encode(text, allowed_special="all")
        else:
            ids = tok.encode(text, allowed_special=(), disallowed_special=())
        ids = np.asarray(ids, np.int64)
        docs.append(_Doc(name, name, ids, int(ids.size), note=note))
    return docs


def _first_tokens(docs: list[_Doc], budget: int) -> list[_Doc]:
    """``docs`` with ``budget`` tokens in all, from the first on (a text's statistics are bounded as a
    store's are: a 50 MB text's whole ids took 40 s and 3 GB in the per-script table)."""
    out = []
    for d in docs:
        if budget <= 0:  # (the texts past the budget are not in the statistics: counted, they had made the page
            break        # say "1,000,000 tokens of 2,562 sampled documents" of 117 texts, 2,445 of them 0-token rows)
        out.append(replace(d, ids=d.ids[:budget]))
        budget -= out[-1].ids.size
    return out


def _sample_order(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``min(n, k)`` distinct indices of ``0 .. n-1`` in a random order (O(k) for a huge ``n``)."""
    if n <= k:
        return rng.permutation(n)
    return rng.choice(n, size=k, replace=False)


def _store_docs(source, opts: ReportOptions, rng, n_ids: int) -> list[_Doc]:
    """The documents read from the store: a seeded sample, each cut, ``stat_tokens`` in all; each id checked
    to be one of the tokenizer's ``n_ids`` (a Megatron file or arrays record no vocabulary to compare: an id
    past it failed inside the report as an IndexError, a negative one read another token)."""
    lengths = source.lengths
    order = _sample_order(len(source), opts.stat_docs, rng)
    per_doc = max(opts.sample_tokens, opts.stat_tokens // 64)
    provenance = getattr(source, "provenance", None)
    docs, budget = [], opts.stat_tokens
    for i in order.tolist():
        if budget <= 0:
            break
        n = int(lengths[i])
        ids = np.asarray(source.get(i)[: min(n, per_doc, budget)], np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n_ids):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise ConfigError(f"document {i:,d} of the store holds token id {bad:,d}, outside the tokenizer's "
                              f"0 .. {n_ids - 1:,d}; pass the tokenizer that made these ids")
        budget -= ids.size
        src_name = provenance(i)[1] if provenance is not None else "store"
        docs.append(_Doc(f"document {i:,d}", str(src_name), ids, n, index=i))
    return docs


# ---- tokens over text ----------------------------------------------------------------------------------
def token_pieces(ids: Sequence[int], vocab: _Vocab) -> list[str]:
    """The text of each token in context (see the module docstring); they join to the decoded text."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    pieces = [dec.decode(vocab.of(i)) for i in ids]
    tail = dec.decode(b"", final=True)
    if pieces:
        pieces[-1] += tail
    return pieces


def _counts(ids: np.ndarray, vocab: _Vocab, chars: int, prefix: int = 0) -> dict:
    special = int(vocab.special[ids].sum()) if ids.size else 0
    content = ids[~vocab.special[ids]] if ids.size else ids
    nbytes = int(vocab.nbytes[content].sum()) - prefix  # (less a dummy prefix its decode drops)
    return {"chars": chars, "bytes": nbytes, "tokens": int(ids.size), "special_tokens": special,
            "bytes_per_token": round(nbytes / content.size, 4) if content.size else None}


def _sample(doc: _Doc, vocab: _Vocab, opts: ReportOptions) -> dict:
    ids = doc.ids[: opts.sample_tokens]
    pieces = token_pieces(ids.tolist(), vocab)
    prefix = 0
    if vocab.dummy_prefix:  # the first piece with text drops the space the encoder put before the text
        k = next((k for k, p in enumerate(pieces) if p and not vocab.special[ids[k]]), None)
        if k is not None and pieces[k].startswith(" "):
            pieces[k], prefix = pieces[k][1:], 1
    note = doc.note
    if doc.length > ids.size:
        note = ", ".join(filter(None, [note, f"first {ids.size:,d} of {doc.length:,d} tokens"]))
    # characters as bytes are counted: the text's, special tokens left out (their text had been counted: 980
    # characters beside 977 bytes of one ASCII text)
    chars = sum(len(p) for p, special in zip(pieces, vocab.special[ids].tolist()) if not special)
    return {"name": doc.name, "source": doc.source, "doc": doc.index, "note": note, "ids": ids.tolist(),
            "pieces": pieces, **_counts(ids, vocab, chars, prefix)}


def _token_table(samples: list[dict], vocab: _Vocab) -> list[list]:
    """``[id, hex bytes, flags]`` of every id the samples show (flags: "s" special, "p" partial UTF-8)."""
    ids = sorted({i for s in samples for i in s["ids"]})
    return [[i, vocab.of(i).hex(" "), ("s" if vocab.special[i] else "") + ("p" if vocab.partial[i] else "")]
            for i in ids]


def _tokens_section(text_docs, store_docs, vocab, opts) -> dict:
    shown = text_docs[: opts.samples] + store_docs[: opts.samples]
    samples = [_sample(d, vocab, opts) for d in shown]
    totals = {k: sum(s[k] for s in samples) for k in ("chars", "bytes", "tokens", "special_tokens")}
    content = totals["tokens"] - totals["special_tokens"]
    totals["bytes_per_token"] = round(totals["bytes"] / content, 4) if content else None
    return {"samples": samples, "table": _token_table(samples, vocab), "totals": totals,
            "specials": [[i, s] for i, s in sorted(vocab.special_names.items())][:64]}


# ---- vocabulary ----------------------------------------------------------------------------------------
def show_bytes(b: bytes) -> str:
    r"""Token bytes as readable text: UTF-8 as is, other bytes and control characters escaped.

    >>> show_bytes(" 低\n".encode() + b"\xe0")
    ' 低\\n\\xe0'
    """
    text = b.decode("utf-8", errors="backslashreplace")
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


_SCRIPT_WORDS = {"CJK": "Han (CJK)", "COMBINING": "combining marks", "MODIFIER": "other letters"}


def script_of(cp: int) -> str:
    """A coarse script or class of a code point (U+DC80-U+DCFF: a byte that is not valid UTF-8).

    >>> [script_of(ord(c)) for c in "a世 7,д"]
    ['Latin', 'Han (CJK)', 'whitespace', 'digits', 'punctuation, symbols', 'Cyrillic']
    """
    if 0xDC80 <= cp <= 0xDCFF:
        return "invalid UTF-8"
    ch = chr(cp)
    cat = unicodedata.category(ch)
    if ch.isspace():
        return "whitespace"
    if cat == "Nd":
        return "digits"
    if cat[0] in "PS":
        return "punctuation, symbols"
    if cat[0] in "LM":
        word = unicodedata.name(ch, "").split(" ")[0]
        return _SCRIPT_WORDS.get(word, word.title() or "other letters")
    return "other"


def _by_script(ids: np.ndarray, vocab: _Vocab) -> list[dict]:
    """Bytes per token per script: every byte gets its character's script, every token spreads one
    token over its bytes, so a token across scripts counts partly in each."""
    content = ids[vocab.content[ids]] if ids.size else ids
    if not content.size:
        return []
    nb = vocab.nbytes[content]
    data = b"".join([vocab.bytes[i] for i in content.tolist()])
    cps = np.frombuffer(data.decode("utf-8", "surrogateescape").encode("utf-32-le", "surrogatepass"), "<u4")
    # UTF-8 length of every code point; an escaped invalid byte (U+DC80-U+DCFF) stands for one byte
    clen = np.select([cps < 0x80, cps < 0x800, (cps >= 0xDC80) & (cps <= 0xDCFF), cps < 0x10000], [1, 2, 1, 3], 4)
    uniq, inv = np.unique(cps, return_inverse=True)
    labels = [script_of(int(c)) for c in uniq.tolist()]
    names = sorted(set(labels))
    per_char = np.array([names.index(s) for s in labels], np.int64)[inv.ravel()]
    per_byte = np.repeat(per_char, clen)
    byte_count = np.bincount(per_byte, minlength=len(names))
    token_share = np.bincount(per_byte, weights=np.repeat(1.0 / nb, nb), minlength=len(names))
    chars = np.bincount(per_char, minlength=len(names))
    rows = [{"script": s, "bytes": int(byte_count[k]), "chars": int(chars[k]), "tokens": round(float(token_share[k]), 2),
             "bytes_per_token": round(float(byte_count[k] / token_share[k]), 4) if token_share[k] else None}
            for k, s in enumerate(names)]
    return sorted(rows, key=lambda r: -r["bytes"])[:SHOWN_ROWS]


def _by_source(docs: list[_Doc], vocab: _Vocab) -> list[dict]:
    groups: dict[str, list] = {}
    for d in docs:
        content = d.ids[vocab.content[d.ids]] if d.ids.size else d.ids
        g = groups.setdefault(d.source, [0, 0, 0])
        g[0] += 1
        g[1] += int(content.size)
        g[2] += int(vocab.nbytes[content].sum())
    rows = [{"source": s, "documents": n, "tokens": t, "bytes": b, "bytes_per_token": round(b / t, 4) if t else None}
            for s, (n, t, b) in groups.items()]
    return sorted(rows, key=lambda r: -r["tokens"])[:SHOWN_ROWS]


def _length_bins(nbytes: np.ndarray) -> list[int]:
    """Counts of byte lengths 1 .. MAX_LENGTH_BIN (the last bin: that many bytes and more)."""
    counts = np.bincount(np.clip(nbytes, 0, MAX_LENGTH_BIN), minlength=MAX_LENGTH_BIN + 1)
    return counts[1:].tolist()


def _merge_rows(tok, vocab: _Vocab) -> dict:
    """The first and last merges (trained or imported merge lists), else the first and last tokens
    by rank (rank files: id order is rank order)."""
    merges = getattr(tok, "merges", None)
    k = SHOWN_ROWS // 2
    if merges is not None and len(merges):
        merges = np.asarray(merges, np.int64)
        m = len(merges)
        merge_ids = getattr(tok, "merge_ids", None)
        new = np.asarray(merge_ids, np.int64) if merge_ids is not None else np.arange(256, 256 + m)
        trace = getattr(tok, "trace", None)
        counts = trace.counts if trace is not None else None
        ranks = sorted(set(range(min(k, m))) | set(range(max(0, m - k), m)))
        rows = [{"rank": r, "left": int(merges[r, 0]), "right": int(merges[r, 1]), "id": int(new[r]),
                 "text": show_bytes(vocab.of(int(new[r]))),
                 "count": int(counts[r]) if counts is not None else None} for r in ranks]
        return {"kind": "merges", "total": m, "rows": rows}
    ids = np.flatnonzero(vocab.content[256:]) + 256
    picks = sorted(set(ids[:k].tolist()) | set(ids[-k:].tolist()))
    rows = [{"rank": int(np.searchsorted(ids, i)), "id": i, "text": show_bytes(vocab.of(i))} for i in picks]
    return {"kind": "ranks", "total": int(ids.size), "rows": rows}


def _vocabulary_section(tok, vocab: _Vocab, docs: list[_Doc]) -> dict:
    all_ids = np.concatenate([d.ids for d in docs]) if docs else np.zeros(0, np.int64)
    all_ids = all_ids[(all_ids >= 0) & (all_ids < vocab.size)]
    used = np.bincount(all_ids, minlength=vocab.size) > 0
    unused = vocab.content & ~used
    unused_merged = np.flatnonzero(unused[256:]) + 256
    longest = unused_merged[np.lexsort((unused_merged, -vocab.nbytes[unused_merged]))][:40]
    occurring = all_ids[vocab.content[all_ids]]
    return {
        "vocab_size": vocab.size, "content_tokens": int(vocab.content.sum()), "special_tokens": int(vocab.special.sum()),
        "sample_tokens": int(all_ids.size), "sample_documents": len(docs),
        "length_bins": {"vocabulary": _length_bins(vocab.nbytes[vocab.content]),
                        "sample": _length_bins(vocab.nbytes[occurring])},
        "max_token_bytes": int(vocab.nbytes[vocab.content].max()) if vocab.content.any() else 0,
        "by_script": _by_script(all_ids, vocab), "by_source": _by_source(docs, vocab),
        "merges": _merge_rows(tok, vocab),
        "unused": {"merged": int(unused_merged.size), "bytes": int(unused[:256].sum()),
                   "distinct_used": int((used & vocab.content).sum()),
                   "longest": [[int(i), show_bytes(vocab.of(int(i)))] for i in longest.tolist()]},
    }


# ---- store ------------------------------------------------------------------------------------------
def _files_section(source, docs: list[_Doc], lengths: np.ndarray) -> dict:
    """Tokens per source file: exact from the store's provenance table up to EXACT_FILE_DOCS
    documents, else estimated from the sampled documents (scaled to the store's size)."""
    if isinstance(source, TokenStore) and len(lengths) <= EXACT_FILE_DOCS:
        files = source.manifest["files"]
        f = np.asarray(source.meta()[:, 0], np.int64)
        toks = np.bincount(f, weights=lengths, minlength=len(files))
        ndocs = np.bincount(f, minlength=len(files))
        order = np.argsort(-toks, kind="stable")[:SHOWN_ROWS]
        rows = [{"file": str(files[k]), "documents": int(ndocs[k]), "tokens": int(toks[k])} for k in order.tolist()]
        return {"exact": True, "files": len(files), "rows": rows}
    groups: dict[str, list[int]] = {}
    for d in docs:
        g = groups.setdefault(d.source, [0, 0])
        g[0] += 1
        g[1] += d.length
    scale = len(lengths) / max(len(docs), 1)
    rows = [{"file": s, "documents": round(n * scale), "tokens": round(t * scale)} for s, (n, t) in groups.items()]
    rows.sort(key=lambda r: -r["tokens"])
    return {"exact": len(docs) == len(lengths), "files": len(groups), "sampled_documents": len(docs),
            "rows": rows[:SHOWN_ROWS]}


def _store_section(source, docs: list[_Doc]) -> dict:
    st = source.stats() if hasattr(source, "stats") else store_stats(source)
    lengths = np.asarray(source.lengths, np.int64)
    edges = np.asarray(st.histogram["edges"], np.int64)
    root = getattr(source, "store", source)
    # token-weighted figures: the store's statistics (as `tokenmill store stats` prints them)
    token_pct = [int(st.token_percentiles[f"p{p}"]) for p in PERCENTILES]
    token_hist = st.histogram["tokens"]
    return {
        "path": str(getattr(root, "path", "")), "repr": repr(source)[:300],
        "fingerprint": getattr(source, "fingerprint", None), "documents": st.documents, "tokens": st.tokens,
        "input_bytes": st.input_bytes, "bytes_per_token": st.bytes_per_token, "empty_documents": st.empty_documents,
        "mean_length": round(st.mean_length, 2), "percentiles": list(PERCENTILES),
        "doc_percentiles": [int(st.percentiles[f"p{p}"]) for p in PERCENTILES],
        "token_percentiles": token_pct,
        "histogram": {"edges": edges.tolist(), "documents": list(st.histogram["counts"]),
                      "tokens": [int(x) for x in token_hist]},
        "files": _files_section(source, docs, lengths),
    }


# ---- plans: windows and packing ---------------------------------------------------------------------------
class _Picked:
    """Documents ``docs`` of ``source`` as a token source that reads one document at a time (``get``):
    materializing a few drawn blocks reads their documents only, never an index of the whole store."""

    def __init__(self, source, docs: np.ndarray, lengths: np.ndarray):
        self._source, self._docs, self._lengths = source, docs, lengths
        self.ids_checked = ids_checked(source)

    @property
    def lengths(self) -> np.ndarray:
        return self._lengths

    def __len__(self) -> int:
        return int(self._lengths.size)

    def get(self, i: int) -> np.ndarray:
        return self._source.get(int(self._docs[i]))


@dataclass
class _Plans:
    """The documents the plans are made for: all, or a seeded sample of a large store."""

    source: _Picked  # a token source over exactly these documents
    lengths: np.ndarray
    docs: np.ndarray  # their indices in the store (or the texts)
    of: int  # documents in all
    sampled: bool = False


def _plan_docs(source, opts: ReportOptions, rng) -> _Plans:
    lengths = np.asarray(source.lengths, np.int64)
    n = lengths.size
    if n <= opts.plan_docs:
        return _Plans(_Picked(source, np.arange(n), lengths), lengths, np.arange(n), n)
    idx = np.sort(_sample_order(n, opts.plan_docs, rng))
    return _Plans(_Picked(source, idx, lengths[idx]), lengths[idx], idx, n, sampled=True)


def _window_options(opts: ReportOptions) -> list[tuple[int, int]]:
    w = opts.window
    sizes = sorted({max(1, w // 2), w, 2 * w})
    choices = {(s, st) for s in sizes for st in {max(1, s // 4), max(1, s // 2), s}}
    return sorted(choices | {(w, opts.window_stride)})


def _picture_docs(lengths: np.ndarray, docs: np.ndarray, opts: ReportOptions) -> list[tuple[int, int, int]]:
    """Up to three documents to draw, ``(index, tokens drawn, length)``: the median, the 90th
    percentile and the longest length among those short enough to draw whole (32 windows of the
    chosen size; where none is, the first tokens of the shortest)."""
    cap = 32 * opts.window
    fit = np.flatnonzero((lengths > 0) & (lengths <= cap))
    if not fit.size:
        fit = np.array([int(np.argmin(lengths))]) if lengths.size else fit
    if not fit.size:
        return []
    order = fit[np.argsort(lengths[fit], kind="stable")]
    picks = dict.fromkeys(int(order[int(q * (order.size - 1))]) for q in (0.5, 0.9, 1.0))
    return [(int(docs[k]), min(int(lengths[k]), cap), int(lengths[k])) for k in picks]


def _windows_section(plans: _Plans, opts: ReportOptions) -> dict:
    pictures = _picture_docs(plans.lengths, plans.docs, opts)
    options = []
    for size, stride in _window_options(opts):
        plan = SlidingWindows(size, stride).plan(plans.lengths)
        s = plan.stats
        drawn = []
        for _, n, _ in pictures:
            p = SlidingWindows(size, stride).plan(np.array([n]))
            drawn.append([p.start.tolist(), p.length.tolist()])
        options.append({"window": size, "stride": stride, "windows": s.num_windows, "coverage_percent":
                        round(s.coverage_percent, 4), "uncovered_tokens": s.uncovered_tokens,
                        "window_tokens_per_token": round(s.window_tokens / s.num_tokens, 4) if s.num_tokens else None,
                        "targets_scored_again": s.target_tokens - s.unique_targets, "short_docs": s.short_docs,
                        "drawn": drawn})
    chosen = SlidingWindows(opts.window, opts.window_stride).plan(plans.lengths)
    cov = coverage_report(chosen, plans.lengths)
    return {"window": opts.window, "stride": opts.window_stride, "options": options,
            "pictures": [{"doc": d, "length": n, "full_length": full} for d, n, full in pictures],
            "coverage": {"multiplicity_min": cov.multiplicity_min, "multiplicity_mean": round(cov.multiplicity_mean, 4),
                         "multiplicity_max": cov.multiplicity_max, "uncovered_spans": int(cov.uncovered_spans.shape[0]),
                         "tokens_never_scored": cov.tokens_never_scored},
            "documents": int(plans.lengths.size), "of": plans.of, "sampled": plans.sampled}


def _drawn_segments(segs, plans: _Plans) -> list[list[int]]:
    """``[doc, start, length, doc length]`` of a drawn block's segments, at most MAX_DRAWN_SEGMENTS:
    the rest of a block of many tiny documents becomes one ``[-1, segments, tokens, 0]`` entry."""
    rows = [[int(plans.docs[d]), s, n, int(plans.lengths[d])] for d, s, n in segs[:MAX_DRAWN_SEGMENTS]]
    rest = segs[MAX_DRAWN_SEGMENTS:]
    if rest:
        rows.append([-1, len(rest), sum(n for _, _, n in rest), 0])
    return rows


def _targets(labels: np.ndarray) -> list[int]:
    return (np.asarray(labels) != IGNORE_INDEX).sum(axis=1).tolist()


def _packing_section(plans: _Plans, opts: ReportOptions, pad_id: int) -> dict:
    T = opts.block_size
    plan = pack(plans.lengths, T, seed=opts.seed)
    k = min(opts.blocks, plan.num_blocks, max(1, MAX_DRAWN_POSITIONS // T))  # huge blocks: fewer drawn
    drawn = plan.select(np.arange(k))
    blocks, rows = [], []
    if k:
        batch = next(drawn.batches(plans.source, batch_size=k, pad_id=pad_id))
        targets = _targets(batch.labels)
        for b in range(k):
            segs = drawn.segments(b)
            blocks.append({"segments": _drawn_segments(segs, plans),
                           "tokens": sum(n for _, _, n in segs), "targets": targets[b]})
        pieces = [(d, s, n) for b in range(k) for d, s, n in drawn.segments(b)][: 2 * k]
        padded = pad_batch([plans.source.get(d)[s:s + n] for d, s, n in pieces], pad_id=pad_id, max_length=T)
        for (d, s, n), t in zip(pieces, _targets(padded.labels)):
            rows.append({"segments": [[int(plans.docs[d]), s, n, int(plans.lengths[d])]], "tokens": n, "targets": t})
    pad_rows = int((-(-plans.lengths // T)).sum())  # every document in rows of its own, cut every T
    tokens = int(plans.lengths.sum())
    return {"block_size": T, "method": plan.method, "blocks": plan.num_blocks, "fill": round(plan.fill, 6) if plan.num_blocks else None,
            "split_docs": plan.split_docs, "targets_lost_at_cuts": plan.boundary_targets,
            "padding_rows": pad_rows, "padding_fill": round(tokens / (pad_rows * T), 6) if pad_rows else None,
            "tokens": tokens, "drawn_blocks": blocks, "drawn_rows": rows,
            "segments_in_drawn_blocks": int(drawn.num_segments),
            "documents": int(plans.lengths.size), "of": plans.of, "sampled": plans.sampled}


# ---- all of it ------------------------------------------------------------------------------------------
def _check_store_tokenizer(source, tok) -> None:
    root = getattr(source, "store", source)
    check = getattr(root, "check_tokenizer", None)
    if check is not None:
        check(tok)
    vs = getattr(root, "vocab_size", None)
    if vs is not None and int(vs) > int(tok.vocab_size):
        raise ConfigError(f"the store's vocabulary has {int(vs):,d} ids but the tokenizer only {int(tok.vocab_size):,d}; "
                          "pass the tokenizer that built the store")


def _open_store(store):
    if store is None:
        return None
    if isinstance(store, (str, os.PathLike)):
        return TokenStore.open(store)
    return as_source(store)


def _meta(tok, source, files, texts, opts) -> dict:
    return {"tokenmill": __version__, "tokenizer": repr(tok)[:300], "vocab_size": int(tok.vocab_size),
            "pattern": getattr(tok, "pattern", None), "store": None if source is None else repr(source)[:300],
            "files": [os.fspath(p) for p in files], "texts": len(texts),
            "options": asdict(opts)}


def collect(tokenizer, *, store=None, files: Sequence = (), texts: Sequence[str] = (),
            options: ReportOptions | None = None, progress=None) -> ReportData:
    """The report's data (see the module docstring). ``tokenizer``: what :func:`tokenmill.as_tokenizer`
    accepts; ``store``: a store folder, a :class:`TokenStore` or any token source; ``files``: text files
    (one document each); ``texts``: strings. ``progress``: a callable told each stage's name."""
    opts = options or ReportOptions()
    say = progress or (lambda stage: None)
    for name, value in (("files", files), ("texts", texts)):
        if isinstance(value, (str, bytes, os.PathLike)):
            raise ConfigError(f"{name} is a single {type(value).__name__}; pass a list ({name}=[...])")
    files, texts = list(files), list(texts)
    if store is None and not files and not texts:
        raise ConfigError("nothing to report on: pass a store (--store) or texts (--text FILE)")
    tok = as_tokenizer(tokenizer)
    source = _open_store(store)
    if source is not None:
        _check_store_tokenizer(source, tok)
    say("vocabulary")
    vocab = _Vocab(tok)
    say("samples")
    replaced = Replaced()
    text_docs = _text_docs(tok, files, texts, opts, replaced)
    store_docs = (_store_docs(source, opts, np.random.default_rng([opts.seed, 0]), int(tok.vocab_size))
                  if source is not None else [])
    tokens = _tokens_section(text_docs, store_docs, vocab, opts)
    vocabulary = _vocabulary_section(tok, vocab, _first_tokens(text_docs, opts.stat_tokens) + store_docs)
    say("store")
    store_part = _store_section(source, store_docs) if source is not None else None
    say("windows")
    plan_src = source if source is not None else as_source([d.ids for d in text_docs])
    plans = _plan_docs(plan_src, opts, np.random.default_rng([opts.seed, 1]))
    windows = _windows_section(plans, opts)
    say("packing")
    pad_id = getattr(getattr(source, "store", source), "eos_id", None) if source is not None else None
    packing = _packing_section(plans, opts, int(pad_id) if pad_id is not None else 0)
    meta = _meta(tok, source, files, texts, opts)
    meta["invalid_utf8_replaced"] = replaced.count  # (the CLI says so on stderr, as every command does)
    if replaced.count:
        meta["invalid_utf8_note"] = replaced.note()
    return ReportData(meta, tokens, vocabulary, store_part, windows, packing)
