"""The compiled encoding path behind ``Tokenizer``: split kernels + BPE kernels + a per-thread cache.

Plain Python around ``_encode_kernels``. Results equal the pure-Python path (``reference.encode_chunk``)
exactly (tested); the kernels release the GIL, so ``encode_batch`` scales over threads.
"""

from __future__ import annotations

import mmap
import sys
import threading

import numpy as np

from ..._arrays import offsets_of, readonly
from ..._jit import ExactCall
from .._scratch import heap_for_large_blocks, scratch
from ..pretokenize.patterns import split_with_gaps
from ..pretokenize.presets import raise_not_utf8
from ..pretokenize.splitter import compiled_offsets, kernel_splitter

_CACHE_LIMIT = 1 << 18  # cached chunks per thread before the cache is reset to its pinned part
_NONE = np.zeros(0, np.int64)  # no document marks (one text per kernel call)
_PART_CHUNKS = 1 << 15  # encode_many cuts its kernel work across threads only above this many chunks a thread
_PREMERGE_MIN = 1000  # 3-byte characters whose own BPE is one or two tokens, below which none are merged ahead
_NO_VOCAB = np.zeros(2, np.uint64)  # an empty word-table seed of one row (see _encode_kernels.build_vocab_table)
_NO_VOCAB2 = np.zeros(4, np.uint64)  # and of the wide one (build_vocab_table2)
# rows of a thread's merged tables (chunks of 1-7 and 8-15 bytes it merged, emptied when half full): 2 MB
# each, beside the shared seeds (o200k: 16 + 8 MB, one copy for every thread)
_MERGED_ROWS = 1 << 17
_LONG_ROWS = 1 << 13  # the long table's rows (64 bytes each: 512 KB a thread)
_MERGED_ROWS2 = 1 << 16
_M20 = np.uint64((1 << 20) - 1)
# A process on a machine whose encoding kernels are not compiled yet encodes up to this many
# characters with the pure-Python encoder (same ids, ~1 MB/s) before it compiles them (~25-45 s).
FIRST_RUN_PYTHON_CHARS = 1 << 21
# tables of this many bytes or more start on a huge-page boundary, asked for huge pages before any of
# their pages is touched (``_line_aligned_zeros``)
_HUGE_PAGE = 1 << 21
_SMALL = 7  # longest chunk, in bytes, of the first vocabulary table (_encode_kernels._SMALL)
_VOCAB2 = 15  # and of the second


def python_first(size: int) -> bool:
    """True on a machine whose encoding kernels are not compiled yet, for the first
    :data:`FIRST_RUN_PYTHON_CHARS` characters this process encodes: the pure-Python encoder gives the
    same ids at ~1 MB/s, where compiling the kernels first takes ~25-45 s (``_jit.python_first``)."""
    from ..._jit import python_first as first
    from . import _encode_kernels

    return first("encode", _encode_kernels.encode_chunks, size, FIRST_RUN_PYTHON_CHARS)


def _line_aligned_zeros(shape, dtype) -> np.ndarray:
    """A C-contiguous array of zeros starting on a 64-byte boundary (a cache line); one of 2 MB or more
    starts on a huge-page boundary in memory asked for transparent huge pages (``_huge_zeros``)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = _huge_zeros(nbytes) if nbytes >= _HUGE_PAGE else None
    if raw is None:
        raw = np.zeros(nbytes + 64, np.uint8)
    skip = -raw.ctypes.data % 64
    return raw[skip : skip + nbytes].view(dtype).reshape(shape)


def _huge_zeros(nbytes: int) -> np.ndarray | None:
    """``nbytes`` zero bytes (and a huge page's worth more) of their own anonymous private mapping, starting
    on a 2 MB boundary and advised ``MADV_HUGEPAGE`` before any page is touched; None where the platform
    has no such advice (not Linux), and the caller allocates as usual.

    The kernel reads the vocabulary seeds, the pair table and its thread's merged and small-chunk tables at
    random rows (12 MB, 8 MB and 6 MB for cl100k), prefetching the rows it will need; on 4 KB pages most
    of those rows are also misses of the TLB, and AMD's Zen cores drop a prefetch that misses the TLB.
    numpy asks for huge pages only for blocks of 4 MB or more, and after ``calloc`` (whose block need not
    start on a huge page): with Linux's default THP mode ``madvise`` these tables got none. On huge pages,
    one thread encoded 1.00-1.07x faster (GPT-2, cl100k, o200k; English and code; on a Zen 1 machine),
    as gigatoken's authors found for their table (+7% warm, +15% cold on Zen 5). The memory is released
    when the last array using it goes."""
    if sys.platform != "linux" or not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    try:
        m = mmap.mmap(-1, nbytes + _HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):
        return None
    raw = np.frombuffer(m, np.uint8)
    skip = -raw.ctypes.data % _HUGE_PAGE
    return raw[skip : skip + nbytes]


def _line_aligned_copy(a: np.ndarray) -> np.ndarray:
    out = _line_aligned_zeros(a.shape, a.dtype)
    out[...] = a
    return out


def _shrunk(out: np.ndarray, n: int) -> np.ndarray:
    """``out[:n]`` as an array of its own size, ``out`` being an array nothing else references (the kernel's
    buffer, made by the caller: numba keeps no reference to its arguments). That buffer has a slot per
    input byte (~4x the ids it returns); shrinking it in place (``realloc`` keeps the address of a block
    it shrinks) costs nothing where a copy of the ids cost ~0.2 ms a MB of text."""
    out.resize(n, refcheck=False)
    return out


class _OneText:
    """What one thread's ``encode`` of one text (``CompiledEncoder._encode_whole``) keeps from call to call:
    the documents array ``[0, n]`` (its ``n`` set each call) and the split and BPE kernels called through
    their machine code for the argument types of those calls (``_jit.ExactCall``: no per-call dispatch on
    ~45 arguments, ~1.5 us). That code trusts its arguments unchecked; every one is made the same way each
    call (the text's bytes read-only, these documents, the thread's split buffer, the splitter's offsets, a
    new output array, the encoder's tables), so their types never change, and the BPE kernel's is looked
    up again for a new ``state`` (the thread's cache, replaced where it outgrew its arrays)."""

    __slots__ = ("docs", "split", "bpe")

    def __init__(self):
        self.docs = np.zeros(2, np.int64)
        self.split = None
        self.bpe = None


class CompiledEncoder:
    def __init__(self, vocab: list, pair_table: dict, byte_ids: list[int], pattern: str | None,
                 pin_vocab: bool, merge_ids=None, split_patterns: tuple = ()):
        """``pair_table``: (lefts, rights, priorities) arrays, lower priority merging first; ``merge_ids``: None when
        the priority is the merged id, else an int array priority -> merged id. ``vocab`` entries may be
        None (ids held by added tokens). ``split_patterns``: further patterns, each splitting the chunks
        of the one before (HF ``Sequence`` of ``Split``)."""
        from . import _encode_kernels as K

        heap_for_large_blocks()
        self._K = K
        lefts, rights, merged = pair_table  # int64 arrays: (left, right) -> priority
        self.res = np.zeros(0, np.int64) if merge_ids is None else np.ascontiguousarray(merge_ids, np.int64)
        # the kernels do not check bounds: every priority must index ``res``, every id be a real one
        if self.res.size and (merged.size and (merged.min() < 0 or merged.max() >= self.res.size)):
            raise ValueError("merge priorities out of range of merge_ids")
        if self.res.size and (self.res.min() < 0 or self.res.max() >= len(vocab)):
            raise ValueError("merge_ids hold an id outside the vocabulary")
        if merged.size and (merged.min() < 0 or merged.max() >= 1 << 30 or len(vocab) >= 1 << 31):
            raise ValueError("merge priorities must lie in [0, 2**30) and ids below 2**31 (packed in one int64)")
        if not self.res.size and merged.size and merged.max() >= len(vocab):
            raise ValueError("a merge priority that is its merged id lies outside the vocabulary")
        # (on huge pages: a first sighting's merges read it at random rows)
        # (read-only views: one argument type whether the merges came from a file just read or a caller's arrays)
        self.pairs = _line_aligned_copy(K.build_pair_table(*readonly(lefts, rights, merged, self.res)))
        self.filt = _line_aligned_copy(K.build_pair_filter(self.pairs))
        self.byte_ids = np.asarray(byte_ids, dtype=np.int64)
        self.byte_pairs = K.build_byte_pairs(self.byte_ids, self.pairs, self.filt)
        chars = self._char_tables(vocab, lefts, rights, merged)
        # a word-table value's ids: 20 bits each where every id fits (all but vocabularies over 2**20)
        self.imask = _M20 if len(vocab) <= 1 << 20 else np.uint64((1 << 62) - 1)
        # tiktoken's whole-chunk rule (a chunk that is a token is that token) changes an id only for a
        # token BPE does not reach from its own bytes (Llama 3: 588 of 127,744): only those are pinned
        # in the chunk cache, which then stays small (Llama 3, in-process: en +26%, code +11%, zh +9%)
        probe = self._probe_tokens(vocab, chars)
        unreached = self._unreached(probe)
        self.unreached = len(unreached)  # tokens BPE does not reach from their own bytes (see to_tiktoken)
        pinned = unreached if pin_vocab else []
        self.chars = chars[:-1] + (self._han_keys(pinned) if chars[0].size else chars[-1],)
        self.pattern = pattern
        from ..pretokenize.splitter import has_compiled, has_kernel

        self.preset = has_kernel(pattern)  # a hand-written kernel (presets, Llama 3 / Qwen family)
        self.compiled_split = has_compiled(pattern)  # that, or the general DFA/VM (offsets checked)
        self.split_patterns = tuple(split_patterns)
        # an HF Sequence of Splits whose every pattern is compiled: split by one kernel call a pattern
        self.compiled_sequence = bool(split_patterns) and all(has_compiled(p) for p in (pattern, *split_patterns))
        # the seeds, shared read-only by every thread, on 64-byte boundaries (a wide row is half a cache line)
        self.vtab, self.vtab2 = (_line_aligned_copy(t) for t in self._vocab_tables(probe, pin_vocab))
        self._check_vocab_tables(len(vocab))
        # the pinned cache every thread's state starts from (``_state``: a copy, and empty tables)
        self._template = self._pinned_cache(pinned)
        self._local = threading.local()
        # the BPE kernel's tables, as every call passes them (``_run``, ``_encode_whole``)
        self._tables = (self.byte_ids, self.byte_pairs, self.pairs, self.filt, self.chars, self.vtab, self.vtab2,
                        self.imask)
        self._splitter = None  # ``kernel_splitter(pattern)``, resolved on one text's first encode

    def _char_tables(self, vocab, lefts, rights, prio):
        """The tables ``_premerge`` needs (see ``_encode_kernels``), or empty ones (nothing merged ahead):
        when ids do not fit its 20-bit packing, or when fewer than ``_PREMERGE_MIN`` 3-byte characters
        have their own BPE result of one or two tokens (GPT-2: 170 + 7,986; Llama 3: 3,299 one-token;
        Qwen 3.5: 7,299 one-token), where the checks cost more than the merges they save (GPT-2 zh:
        +11% with them). Exact either way: this is only a question of speed."""
        K = self._K
        e = np.zeros(0, np.int64)
        m = np.zeros((0, 4), np.uint64)
        off = (e, np.zeros(0, np.uint8), e, e, e, e, m, e, e, m, np.zeros(0, np.uint64))
        if len(vocab) > 1 << 20 or not prio.size:
            return off
        # a character merged ahead needs vocabulary tokens of 2 or 3 bytes that start one: without those
        # (an English-only vocabulary) the answer is no without building (or compiling) the table
        if sum(1 for b in vocab if b is not None and 2 <= len(b) <= 3 and 0xE0 <= b[0] <= 0xEF) < _PREMERGE_MIN // 8:
            return off
        first_use = np.full(len(vocab), np.int64(1) << 40, np.int64)  # lowest priority taking each id as a part
        np.minimum.at(first_use, lefts, prio)
        np.minimum.at(first_use, rights, prio)
        cp3 = K.char_table(self.byte_ids, self.pairs, self.filt, first_use)
        if int(np.count_nonzero((cp3 >> 60 == 1) | (cp3 >> 60 == 2))) < _PREMERGE_MIN:
            return off
        toks = [b for b in vocab if b is not None]
        lens = np.fromiter((len(b) for b in toks), np.int64, len(toks))
        flat = np.frombuffer(b"".join(toks), np.uint8).copy()
        starts = np.cumsum(lens) - lens
        return (cp3, flat, starts, lens, *K.partial_index(flat, starts, lens), np.zeros(0, np.uint64))

    def _probe_tokens(self, vocab, chars) -> dict:
        """Every multi-byte token encoded as a chunk of its own, in one kernel call on an empty cache
        (``chars``: the tables it will run with; their last entry, the Han keys, empty): ``toks``
        ((bytes, id) pairs), ``lens``, ``buf`` (their bytes joined), ``ids``, ``counts`` (ids each got) and
        ``first`` (the first of them). ``_unreached`` and ``_vocab_tables`` read it."""
        toks = [(b, i) for i, b in enumerate(vocab) if b is not None and len(b) > 1]
        lens = np.fromiter((len(b) for b, _ in toks), np.int64, len(toks))
        offs = offsets_of(lens)
        buf = np.frombuffer(b"".join(b for b, _ in toks), np.uint8)  # read-only, as _run passes it
        ids = np.fromiter((i for _, i in toks), np.int64, len(toks))
        if not toks:
            return {"toks": toks, "lens": lens, "buf": buf, "ids": ids, "counts": lens, "first": ids}
        marks = np.arange(len(toks), dtype=np.int64)
        pos = np.empty(len(toks), np.int64)
        out = np.empty(buf.size, np.int64)
        n, _ = self._K.encode_chunks(buf, offs, marks, pos, self.byte_ids, self.byte_pairs, self.pairs, self.filt,
                                     chars, _NO_VOCAB, _NO_VOCAB2, self.imask, self._pinned_state([]), _CACHE_LIMIT,
                                     out)
        return {"toks": toks, "lens": lens, "buf": buf, "ids": ids, "counts": np.diff(np.append(pos, n)),
                "first": out[pos]}

    @staticmethod
    def _unreached(probe) -> list[tuple[bytes, int]]:
        """(bytes, id) of every multi-byte token that BPE does not reach from its own bytes (``probe``:
        ``_probe_tokens``). The whole-chunk rule needs only these."""
        missed = np.flatnonzero((probe["counts"] != 1) | (probe["first"] != probe["ids"]))
        return [probe["toks"][k] for k in missed.tolist()]

    def _vocab_tables(self, probe, pin_vocab: bool) -> tuple[np.ndarray, np.ndarray]:
        """The vocabulary tables of ``encode_chunks``: every byte and token of 1 to 7 bytes (``vtab``) and of 8 to 15
        bytes (``vtab2``) whose encoding as a chunk is one id, with that id: with the whole-chunk rule
        (``pin_vocab``) every token, as its own id (BPE reaches it, or it is pinned); without it, the
        tokens the probe (``_probe_tokens``, this very kernel) encoded as one id, with that id. A hit
        there is what a miss would compute, by construction; no second kernel call. GPT-2: 34,022 +
        15,848 tokens; o200k: 132,104 + 62,146."""
        lens, buf = probe["lens"], probe["buf"]
        one = (lens <= _VOCAB2) & (True if pin_vocab else probe["counts"] == 1)
        ids = probe["ids"] if pin_vocab else probe["first"]
        # the keys as the kernel packs them: the bytes little-endian, the length in the top byte of the last word
        short = lens <= _VOCAB2
        padded = np.zeros((int(np.count_nonzero(short)), 16), np.uint8)
        offs = offsets_of(lens)
        take = (offs[:-1][short][:, None] + np.arange(16)[None, :])
        inside = np.arange(16)[None, :] < lens[short][:, None]
        padded[inside] = buf[take[inside]]
        words = padded.view(np.uint64)
        top = lens[short].astype(np.uint64) << np.uint64(56)
        sel, sid, slen = one[short], ids[short], lens[short]
        small, big = sel & (slen <= _SMALL), sel & (slen > _SMALL)
        # and every single byte, as its byte id: the kernel has no separate path for 1-byte chunks
        singles = np.arange(256, dtype=np.uint64) | (np.uint64(1) << np.uint64(56))
        vtab = self._K.build_vocab_table(np.concatenate((singles, (words[:, 0] | top)[small])),
                                         np.concatenate((self.byte_ids, sid[small])))
        vtab2 = self._K.build_vocab_table2(np.ascontiguousarray(words[big, 0]),
                                           np.ascontiguousarray((words[:, 1] | top)[big]), sid[big])
        return vtab, vtab2

    def _check_vocab_tables(self, n_ids: int) -> None:
        """The kernel reads the tables unchecked: rows a power of two (a slot is a hash masked by their
        count), the filter a power of two words, every id a real one."""
        for t, width in ((self.vtab, 2), (self.vtab2, 4)):
            rows = t.size // width
            if t.dtype != np.uint64 or t.size != rows * width or rows < 1 or rows & (rows - 1):
                raise ValueError("a vocabulary table must hold a power of two rows of uint64")
            ids = t[width - 1 if width == 2 else 2 :: width][t[0 if width == 2 else 1 :: width] != 0]
            if ids.size and not (ids & np.uint64(3) == 1).all():  # word-table values of one id: count 1, the id above
                raise ValueError("a word-table seed holds a value that is not one id")
            ids = ids >> np.uint64(2)
            if ids.size and int(ids.max()) >= n_ids:
                raise ValueError("a vocabulary table holds an id outside the vocabulary")

    @staticmethod
    def _han_keys(pinned) -> np.ndarray:
        """Sorted keys (``_han_key``: length, first 7 bytes) of the pinned tokens that the kernel's
        Han-run shortcut (no cache: see ``encode_chunks``) must not miss: those of its shape (over 7
        bytes, one of the first 4 in 0xE4-0xE9; Qwen 3.5: 33 of 20,387, e.g. '加拿大'; Llama 3: 1)."""
        keys = [min(len(b), 255) << 56 | int.from_bytes(b[:7], "little") for b, _ in pinned
                if len(b) > 7 and any(0xE4 <= x <= 0xE9 for x in b[:4])]
        return np.sort(np.array(keys, np.uint64))

    def _pinned_state(self, tokens, rows: int = _MERGED_ROWS, rows2: int = _MERGED_ROWS2):
        """A fresh cache holding the pinned ``tokens`` ((bytes, id) pairs) and empty merged tables of ``rows``
        and ``rows2`` rows (``encode_chunks``' ``state``)."""
        return self._pinned_cache(tokens) + self._empty_tables(rows, rows2)

    def _pinned_cache(self, tokens) -> tuple:
        """The byte-keyed cache holding the pinned ``tokens`` and its ``sizes``: the first 9 entries of a state."""
        K = self._K
        n = len(tokens)
        lens = np.fromiter((len(b) for b, _ in tokens), np.int64, n)
        data = np.frombuffer(b"".join(b for b, _ in tokens), np.uint8).copy()
        cap_e = max(1024, 2 * n)
        cap_t = 1 << 12
        while cap_t < 2 * cap_e:
            cap_t *= 2
        ctab = np.full(cap_t, -1, np.int64)
        c_start = np.zeros(cap_e, np.int64)
        c_len = np.zeros(cap_e, np.int64)
        c_hash = np.zeros(cap_e, np.uint64)
        c_ids_start = np.zeros(cap_e, np.int64)
        c_ids_len = np.zeros(cap_e, np.int64)
        c_bytes = np.zeros(max(1 << 16, 2 * data.size), np.uint8)
        c_ids = np.zeros(max(1 << 14, 2 * n), np.int64)
        if n:
            c_bytes[: data.size] = data
            c_start[:n] = np.cumsum(lens) - lens
            c_len[:n] = lens
            c_ids[:n] = [i for _, i in tokens]
            c_ids_start[:n] = np.arange(n)
            c_ids_len[:n] = 1
            K.pin_tokens(c_bytes, c_start[:n], c_len[:n], ctab, c_hash)
        sizes = np.array([n, data.size, n, n, data.size, n, 0, 0, 0], np.int64)
        return ctab, c_start, c_len, c_hash, c_bytes, c_ids_start, c_ids_len, c_ids, sizes

    @staticmethod
    def _empty_tables(rows: int = _MERGED_ROWS, rows2: int = _MERGED_ROWS2) -> tuple:
        """The rest of a fresh ``state``, all empty: the small-chunk table, in buckets of 4 rows (the two
        words of a chunk of up to 15 bytes: the bytes, the length in the top byte of the last; up to 7
        bytes: one word and 0; all zero = empty; a bucket's keys are one cache line) and its ids (count,
        then up to 7 ids), the admission filter (hashes of chunks seen once), the merged tables of chunks
        of 1-7 and 8-15 bytes (``rows`` and ``rows2`` rows) and the long table of chunks of 16-31 bytes."""
        return (_line_aligned_zeros((1 << 16, 2), np.uint64), _line_aligned_zeros((1 << 16, 8), np.int32),
                _line_aligned_zeros((1 << 16,), np.uint64), _line_aligned_zeros((2 * rows,), np.uint64),
                _line_aligned_zeros((4 * rows2,), np.uint64), _line_aligned_zeros((8 * _LONG_ROWS,), np.uint64))

    def _state(self):
        """This thread's state: a copy of the template's pinned cache and fresh empty tables (zeroed
        pages, not 7 MB of zeros copied)."""
        st = getattr(self._local, "state", None)
        if st is None:
            st = self._local.state = tuple(_line_aligned_copy(a) for a in self._template) + self._empty_tables()
        return st

    def offsets(self, data: bytes, text: str) -> np.ndarray:
        """Chunk boundaries in ``data`` (the UTF-8 of ``text``): possibly a view of this thread's split
        buffer, valid until its next split."""
        if self.pattern is None:
            return np.array([0, len(data)] if data else [0], np.int64)
        if self.compiled_split and not self.split_patterns:
            offs = compiled_offsets(data, self.pattern, compact=False, out_buf=scratch("split", len(data) + 2, np.int64))
            if offs is not None:
                return offs
        if self.compiled_sequence:
            return self._sequence_offsets(data, None)
        if self.split_patterns:
            chunks = split_with_gaps(self.pattern, text)
            for p in self.split_patterns:
                chunks = [c for chunk in chunks for c in split_with_gaps(p, chunk)]
            lens = [len(c.encode("utf-8")) for c in chunks]
            return np.concatenate(([0], np.cumsum(lens, dtype=np.int64)))
        lens = [len(c.encode("utf-8")) for c in split_with_gaps(self.pattern, text)]
        return np.concatenate(([0], np.cumsum(lens, dtype=np.int64)))

    def _sequence_offsets(self, data, docs) -> np.ndarray:
        """HF's Sequence of Splits, compiled: each pattern splits every chunk of the one before (the chunks
        are passed to the kernels as documents); ``docs``: the documents of ``data`` (None: one)."""
        offs = compiled_offsets(data, self.pattern, doc_offsets=docs)
        for p in self.split_patterns:
            offs = compiled_offsets(data, p, doc_offsets=offs)
        return offs

    def _one_pass(self) -> bool:
        """Whether a batch of texts splits in one pass (``encode_many``): no split, a compiled one, or a
        compiled Sequence of Splits."""
        if self.split_patterns:
            return self.compiled_sequence
        return self.pattern is None or self.compiled_split

    def encode(self, text: str) -> np.ndarray:
        """Token ids (int64 array) of ``text`` with no special-token handling."""
        try:
            data = str.encode(text, "utf-8")  # (a str subclass's own encode() is not the text's UTF-8)
        except UnicodeEncodeError:
            from ..surrogates import lone_surrogate_error

            raise lone_surrogate_error(text) from None
        if not data:
            return np.zeros(0, np.int64)
        if self.preset and not self.split_patterns:
            return self._encode_whole(data)
        return self._run(data, self._checked(self.offsets(data, text), len(data)), _NONE, _NONE)

    def _encode_whole(self, data: bytes) -> np.ndarray:
        """``encode`` of the UTF-8 ``data`` of one text under a hand-written splitter: ``offsets`` and ``_run``
        with their per-call glue cut for short texts (a sentence's split and BPE take ~1 us of kernel work,
        where a call took ~10 us before). The splitter is resolved once (``kernel_splitter``), and both
        kernels are called through their machine code for these calls' argument types
        (``_jit.ExactCall``; see ``_OneText``)."""
        one = getattr(self._local, "one", None)
        if one is None:
            one = self._local.one = _OneText()
        if self._splitter is None:
            self._splitter = kernel_splitter(self.pattern)
        kernel, table, tail = self._splitter
        n = len(data)
        buf = np.frombuffer(data, np.uint8)
        docs = one.docs
        docs[1] = n
        if one.split is None:
            one.split, one.bpe = ExactCall(kernel), ExactCall(self._K.encode_chunks)
        offs, bad = one.split(True, buf, table, docs, *tail, scratch("split", n + 2, np.int64))
        if bad >= 0:
            raise_not_utf8(buf, bad)
        out = np.empty(n, np.int64)
        st = self._state()
        k, state = one.bpe(st, buf, offs, _NONE, _NONE, *self._tables, st, _CACHE_LIMIT, out)
        if state is not None:  # the cache outgrew its arrays (else they were updated in place)
            self._local.state = state
        return _shrunk(out, k)

    def _checked(self, offs: np.ndarray, n: int) -> np.ndarray:
        """The kernel writes one id slot per byte of each chunk: chunks that overlap or run past the text
        (a misbehaving custom splitter) would write past its buffer. The compiled preset splitters
        guarantee this contract (tested), and never cut an empty chunk; everything else is checked here,
        and its empty chunks dropped."""
        if self.preset and not self.split_patterns:
            return offs
        from ..._validate import check_offsets
        from ...errors import ConfigError

        offs = check_offsets(offs, f"the chunk offsets of pattern {self.pattern!r}", n=n, error=ConfigError)
        if offs.size > 1 and not (offs[1:] > offs[:-1]).all():
            # an empty chunk has no ids, and its key (0, no bytes) is the vocabulary tables' empty slot:
            # the kernels take none (dropping it changes no chunk's bytes)
            offs = np.unique(offs)
        return offs

    def _run(self, data: bytes, offs, marks, pos, view: bool = False) -> np.ndarray:
        """The BPE kernel over the chunks ``offs`` of ``data`` on this thread's cache: the ids, an array of
        their size (``view``: a view of this thread's buffer, valid until its next call of ``_run``)."""
        # a slot per byte at most (~0.25 of them used: English): a view is read in this thread's buffer
        # (``_scratch``: no page faults, no copy); ids to keep in a block of their own, shrunk to its ids
        # in place (a copy out of the thread's buffer measured 3-5% slower where the heap had room)
        size = len(data) if offs.size < 2 else int(offs[-1] - offs[0])
        out = scratch("bpe_ids", size, np.int64) if view else np.empty(size, np.int64)
        n, state = self._K.encode_chunks(np.frombuffer(data, np.uint8), offs, marks, pos, *self._tables,
                                         self._state(), _CACHE_LIMIT, out)
        if state is not None:  # the cache outgrew its arrays (else they were updated in place)
            self._local.state = state
        return out[:n] if view else _shrunk(out, n)

    def _run_parts(self, data: bytes, offs, marks, threads: int) -> tuple[np.ndarray, np.ndarray]:
        """``_run`` over the chunks ``offs`` cut into ``threads`` ranges of about equal bytes, one kernel call
        each, on up to ``threads`` threads (each on its own cache): the ids of all chunks in order, and the
        position of each document's first id (``marks``: the chunk where each document starts). The same
        ids as one call: a chunk's ids do not depend on the chunks around it, nor on the cache."""
        from ..groups import in_parts

        nch = offs.size - 1
        cuts = np.searchsorted(offs, offs[0] + (offs[-1] - offs[0]) * np.arange(1, threads) // threads)
        bounds = np.unique(np.concatenate(([0], np.clip(cuts, 0, nch), [nch])))
        ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))

        def part(k):
            lo, hi = ranges[k]
            m = marks[(marks >= lo) & (marks < hi)]
            pos = np.empty(m.size, np.int64)
            return self._run(data, offs[lo : hi + 1], m - lo, pos), pos

        got = in_parts([int(offs[hi] - offs[lo]) for lo, hi in ranges], threads, part)
        base = np.cumsum([0] + [ids.size for ids, _ in got])
        pos = np.concatenate([p + b for (_, p), b in zip(got, base[:-1].tolist())])
        return np.concatenate([ids for ids, _ in got]), np.append(pos, base[-1])

    def encode_many(self, texts: list[str], threads: int = 1, forbid=None,
                    view: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        """Ids of several non-empty texts in one pass (one split call, one kernel call: a small
        document no longer pays the kernels' per-call cost, most of it spent holding the GIL):
        ``(ids, bounds)``, text ``i``'s ids being ``ids[bounds[i]:bounds[i + 1]]``. Exactly
        ``[encode(t) for t in texts]``. None where that cannot be done in one pass (HF ``Sequence`` of
        Splits, a splitter that is not compiled, a text UTF-8 cannot encode): encode each then.
        ``threads`` > 1: the kernel's work (not the split) is cut into that many ranges of chunks run
        on the pool's threads, for a batch whose texts are too few or too large to keep them busy.
        ``forbid``: special tokens (``_special_scan.check_needles``) none of the texts may spell: None if
        one does (the caller then goes text by text and raises). ``view``: ``ids`` may be a view of this
        thread's buffer, valid until the thread's next encode (a caller that reads them at once: no copy)."""
        if not self._one_pass():
            return None
        from .._cpython import utf8_joined

        joined = utf8_joined(texts)  # CPython's own UTF-8 of each str (kept with it: a second pass copies)
        if joined is None:
            return None  # a lone surrogate: encode() handles it
        return self.encode_utf8(*joined, threads, forbid, view)

    def encode_utf8(self, data: np.ndarray, docs: np.ndarray, threads: int = 1, forbid=None,
                    view: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`encode_many` of the texts whose UTF-8 is ``data[docs[i]:docs[i + 1]]`` (``data`` a read-only
        uint8 array of well-formed UTF-8, ``docs`` int64 offsets from 0 to ``data.size``, each text non-empty:
        checked here, the kernels' boundary; the splitters check the UTF-8 as they read it)."""
        if not self._one_pass():
            return None
        if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1
                and data.flags.c_contiguous and not data.flags.writeable):
            raise ValueError("encode_utf8 takes a read-only 1-D uint8 array")
        docs = np.ascontiguousarray(docs, np.int64)
        if docs.ndim != 1 or docs.size < 2 or docs[0] != 0 or docs[-1] != data.size or np.any(docs[1:] <= docs[:-1]):
            raise ValueError("encode_utf8 takes offsets from 0 to len(data), each text non-empty")
        if forbid is not None:
            from .._special_scan import find_special

            if find_special(data, docs, forbid) >= 0:
                return None
        if self.pattern is None:
            offs = docs
        elif self.split_patterns:
            offs = self._checked(self._sequence_offsets(data, docs), len(data))
        else:
            offs = compiled_offsets(data, self.pattern, doc_offsets=docs, compact=False,
                                    out_buf=scratch("split", len(data) + 2, np.int64))
            if offs is None:
                return None
            offs = self._checked(offs, len(data))
        # every document start is a chunk boundary (the splitters never cross one): its chunk index
        marks = np.searchsorted(offs, docs[:-1]).astype(np.int64)
        if not np.array_equal(offs[marks], docs[:-1]):
            return None  # a chunk crossing a document boundary (not the compiled splitters' way): one by one
        if threads > 1 and offs.size > _PART_CHUNKS * threads:
            return self._run_parts(data, offs, marks, threads)
        pos = np.empty(docs.size - 1, np.int64)
        out = self._run(data, offs, marks, pos, view)
        return out, np.append(pos, out.size)
