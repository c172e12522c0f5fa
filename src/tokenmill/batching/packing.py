"""Packing: several documents per block of ``block_size`` positions, with exact document boundaries.

A plan is a segment table, not tokens: block ``b`` holds segments ``ptr[b] .. ptr[b+1]`` of the
arrays ``doc``, ``start``, ``length`` (a slice of one source document each). It is computed from
the document lengths alone; token ids are gathered only when blocks are materialized::

    pack([4, 3], 7)          A = [BOS 甲 乙 EOS] (doc 0), B = [BOS 丙 EOS] (doc 1)

    block 0    segments (doc, start, length): (0, 0, 4) (1, 0, 3)

    input_ids     BOS 甲 乙 EOS BOS 丙 EOS
    position_ids  0   1  2  3   0   1  2       (reset per document)
    labels        -   甲 乙 EOS -   丙 EOS     (B's BOS is not a target of A's EOS)
    mask          A's positions and B's positions each see only their own document

Methods:

* ``"best_fit"`` -- best-fit decreasing (Ding et al. 2024, "Fewer Truncations Improve Language
  Modeling"): longest first, each into the fullest block it still fits. O(n log T). No document
  that fits a block is ever cut; blocks come out in a seeded random order.
* ``"first_fit_decreasing"`` -- longest first, each into the first block it fits. O(n log n).
* ``"greedy"`` -- documents in order, a new block when the next does not fit (torchtune's packer).
* ``"concat"`` -- all documents in order as one token stream cut every ``block_size`` tokens.
  Documents cross block boundaries and, on purpose, attend to each other: materialized blocks use
  the *stream* layout (one causal triangle, positions 0..T-1, only the first label ignored).

``long_docs`` (documents longer than ``block_size``; not used by ``"concat"``): ``"split"`` into
``block_size`` pieces (each later piece loses the target of its first token, which has no context in
its block: counted in ``plan.boundary_targets``), ``"truncate"`` (the tail is dropped and counted in
``plan.truncated_tokens``) or ``"error"``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Iterator, Literal

import numpy as np

from .._arrays import is_sealed, owned, ranks_in_groups, readonly, seal
from .._validate import check_array, check_bool, check_int, check_rows, check_spans, document_lengths
from .._words import counted
from ..data.masked import loss_mask_of, refuse_flags_as_ids
from ..data.source import TokenSource, as_source, check_memory_ids, ids_checked, reader
from ..errors import ConfigError, InputError, interruptible, warn
from .batch import Batch, Block, FragmentPositions, check_fragment_positions, with_loss_mask
from .layout import (
    INT32_MAX,
    Buffers,
    assemble_segments,
    batch_outputs,
    check_index_dtype,
    check_token_array,
    layout_batch,
)

Method = Literal["best_fit", "first_fit_decreasing", "greedy", "concat"]
LongDocs = Literal["split", "truncate", "error"]
METHODS = ("best_fit", "first_fit_decreasing", "greedy", "concat")
LONG_DOCS = ("split", "truncate", "error")


def _unpickled_plan(values: dict) -> "PackPlan":
    """A plan from its pickled fields: the arrays pickle made (fresh, the plan's alone) sealed, not checked again."""
    arrays = ("doc", "start", "length", "block_ptr", "doc_lengths")
    return PackPlan(**{k: seal(v) if k in arrays and isinstance(v, np.ndarray) else v for k, v in values.items()})


def _own(*arrays):
    """Arrays a plan is made of, sealed where they are made (no copy): what :class:`PackPlan` takes as its own,
    unchecked (one array: it; several: a tuple)."""
    out = [seal(a) for a in arrays]
    return out[0] if len(out) == 1 else tuple(out)


@dataclass(frozen=True, eq=False)
class PackPlan:
    """Which slice of which document goes where: arrays, one entry per segment (``S`` segments).

    ``doc``, ``start``, ``length``: int64 ``(S,)``; ``block_ptr``: int64 ``(num_blocks + 1,)``, the
    segments of block ``b`` are ``block_ptr[b] : block_ptr[b+1]`` in their order inside the block.
    Counts of what was not packed as-is are fields: nothing is dropped silently.

    >>> plan = pack([4, 3, 6, 2], 7)
    >>> plan.num_blocks, plan.tokens, plan.padding, round(plan.fill, 3)
    (3, 15, 6, 0.714)
    >>> sorted(plan.segments(b) for b in range(plan.num_blocks))
    [[(0, 0, 4), (1, 0, 3)], [(2, 0, 6)], [(3, 0, 2)]]
    """

    block_size: int
    method: str
    doc: np.ndarray
    start: np.ndarray
    length: np.ndarray
    block_ptr: np.ndarray
    doc_lengths: np.ndarray  # (num_docs,) the lengths the plan was made for
    long_docs: str = "split"
    stream: bool = False  # True for "concat": documents attend to each other on purpose
    truncated_docs: int = 0
    truncated_tokens: int = 0
    split_docs: int = 0
    empty_docs: int = 0
    complete: bool = True  # False for a shard or selection: holds only some of the plan's blocks

    def __post_init__(self):
        """The plan's arrays are its own and read-only: a segment table is checked once per chunk of batches,
        and a plan's ``length`` written between two batches (its arrays had been writeable views) made the
        layout kernel read and write past its arrays, a segmentation fault. Arrays handed in writeable (a plan
        made by hand, or read-only but not tokenmill's: a view of an array still written, a memory map) are copied
        and the plan is checked (:meth:`validate`); tokenmill's own come sealed (``_arrays.seal``), never copied."""
        object.__setattr__(self, "block_size", check_int(self.block_size, "block_size", min=1, max=2**62))
        handed = False
        for name in ("doc", "start", "length", "block_ptr", "doc_lengths"):
            a = getattr(self, name)
            if is_sealed(a) and a.ndim == 1:  # (a read-only array of the caller's is no plan's own: copied, checked)
                continue
            object.__setattr__(self, name, owned(check_array(a, f"the plan's {name}", error=InputError)))  # (exact)
            handed = handed or name != "doc_lengths"
        if not self.doc.size == self.start.size == self.length.size or self.block_ptr.size < 1:
            raise InputError(f"the plan's doc, start and length hold {self.doc.size:,d}, {self.start.size:,d} and "
                             f"{self.length.size:,d} segments (one each per segment), block_ptr {self.block_ptr.size:,d} "
                             "entries (at least 1); they must agree")
        if handed:
            if self.doc.size and (self.doc.min() < 0 or self.doc.max() >= self.doc_lengths.size):
                raise InputError(f"a segment names a document outside 0 .. {self.doc_lengths.size - 1}")
            self.validate()

    def __reduce__(self):
        """Pickled (to DataLoader workers under spawn) and back: the arrays pickle makes are the plan's own copies,
        sealed again (they had come back writeable and unsealed: a worker's plan could be written under its
        kernels, and every ``shard`` copied its lengths)."""
        return (_unpickled_plan, ({f.name: getattr(self, f.name) for f in fields(self)},))

    # ---- sizes -------------------------------------------------------------------------------
    @property
    def num_docs(self) -> int:
        return int(self.doc_lengths.size)

    @property
    def num_blocks(self) -> int:
        return int(self.block_ptr.size - 1)

    @property
    def num_segments(self) -> int:
        return int(self.doc.size)

    @property
    def block(self) -> np.ndarray:
        """``(S,)`` int64: the block of every segment."""
        return np.repeat(np.arange(self.num_blocks, dtype=np.int64), np.diff(self.block_ptr))

    @property
    def block_tokens(self) -> np.ndarray:
        """``(num_blocks,)`` int64: tokens in every block."""
        # exact int64 (a float bincount rounds sums above 2**53)
        cs = np.concatenate([[0], np.cumsum(self.length, dtype=np.int64)])
        return cs[self.block_ptr[1:]] - cs[self.block_ptr[:-1]]

    @property
    def tokens(self) -> int:
        return int(self.length.sum())

    @property
    def padding(self) -> int:
        return self.num_blocks * self.block_size - self.tokens

    @property
    def fill(self) -> float:
        """Share of block positions holding real tokens."""
        return self.tokens / (self.num_blocks * self.block_size) if self.num_blocks else 0.0  # (as an empty batch's)

    @property
    def boundary_targets(self) -> int:
        """Targets lost at cuts: the first token of a continuation piece starts an attention segment, so it
        has no context there and is not scored. In stream layout (``concat``) a block is the segment and
        every token of the stream but its first is a target (a document's first token is predicted from
        the token before it), so each block's first token is lost, whether it continues a document or
        starts one, except the one that starts the data (it had no context in the stream either)."""
        if self.stream:
            ptr = self.block_ptr
            firsts = ptr[:-1][np.diff(ptr) > 0]  # the first segment of each block that holds one
            # the document that starts the whole stream (the first with tokens), not the first this plan holds:
            # a shard's or selection's first block starts mid-stream and loses its first target too
            kept = np.flatnonzero(np.asarray(self.doc_lengths) > 0)
            first_doc = int(kept[0]) if kept.size else -1
            return int(((self.doc[firsts] != first_doc) | (self.start[firsts] != 0)).sum())
        return int((self.start > 0).sum())

    def segments(self, b: int) -> list[tuple[int, int, int]]:
        """Block ``b`` as a list of ``(doc, start, length)`` (``b`` in ``[0, num_blocks)``; -1 is no block:
        ``segments(-1)`` read ``block_ptr[-1:0]``, an empty block, silently)."""
        b = check_int(b, "block", min=0, max=self.num_blocks - 1)
        lo, hi = int(self.block_ptr[b]), int(self.block_ptr[b + 1])
        return list(zip(self.doc[lo:hi].tolist(), self.start[lo:hi].tolist(), self.length[lo:hi].tolist()))

    def __str__(self) -> str:
        return (f"PackPlan({self.method}, block_size={self.block_size:,d}): {counted(self.num_docs, 'document')} "
                f"-> {counted(self.num_blocks, 'block')}, {counted(self.tokens, 'token')}, fill {self.fill:.2%}, "
                f"padding {self.padding:,d}; split {counted(self.split_docs, 'document')}, truncated "
                f"{self.truncated_docs:,d} ({counted(self.truncated_tokens, 'token')}), "
                f"{counted(self.boundary_targets, 'target')} lost at cuts, "
                f"{counted(self.empty_docs, 'empty document')}")

    # ---- checks ------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`InputError` unless the plan is consistent: blocks within ``block_size``,
        segments inside their documents, every kept token packed exactly once."""
        T = self.block_size
        if self.block_ptr[0] != 0 or self.block_ptr[-1] != self.num_segments or (np.diff(self.block_ptr) < 0).any():
            raise InputError("block_ptr must start at 0, end at the segment count and never decrease")
        if (self.block_tokens > T).any():
            b = int(np.argmax(self.block_tokens > T))
            raise InputError(f"block {b} holds {int(self.block_tokens[b]):,d} tokens, more than block_size={T:,d}")
        if (self.length < 1).any() or (self.start < 0).any() or (self.start + self.length > self.doc_lengths[self.doc]).any():
            raise InputError("a segment is empty or reaches outside its document")
        order = np.lexsort((self.start, self.doc))
        d, s, n = self.doc[order], self.start[order], self.length[order]
        same = d[1:] == d[:-1]
        if (s[1:][same] < (s + n)[:-1][same]).any():
            raise InputError("two segments overlap: a token would be packed twice")
        if self.complete and self.tokens + self.truncated_tokens != self.doc_lengths.sum():
            raise InputError("packed + truncated tokens differ from the documents' total")

    # ---- data parallelism and resumption -----------------------------------------------------
    def shard(self, rank: int, world_size: int, *, even: bool = True) -> "PackPlan":
        """Blocks ``rank, rank + world_size, ...`` of this plan: one data-parallel rank's part.

        With ``even=True`` a rank that gets one block fewer gets an empty block instead (all
        padding, zero targets), so every rank runs the same number of steps and nothing is dropped;
        under the token-weighted loss an empty block changes nothing. The stored counts (``truncated_docs``,
        ``split_docs``, ``empty_docs``, ...) still describe the whole plan; what is computed from the blocks
        (``tokens``, ``fill``, ``padding``, ``boundary_targets``) describes this rank's.

        >>> plan = pack([5, 5, 5], 6)
        >>> [plan.shard(r, 2).num_blocks for r in (0, 1)]
        [2, 2]
        >>> plan.shard(1, 2).block_tokens.tolist()
        [5, 0]
        """
        world_size = check_int(world_size, "world_size", min=1)
        rank = check_int(rank, "rank", min=0)
        even = check_bool(even, "even")
        if not (0 <= rank < world_size):
            raise ConfigError(f"rank={rank} must be in 0 .. world_size-1 (world_size={world_size})")
        idx = np.arange(rank, self.num_blocks, world_size)
        if even:
            per_rank = -(-self.num_blocks // world_size)
            idx = np.concatenate([idx, np.full(per_rank - idx.size, -1)])
        return self.select(idx)

    def select(self, blocks) -> "PackPlan":
        """A plan of the given blocks, in the given order; ``-1`` stands for an empty block."""
        blocks = check_array(blocks, "blocks", error=ConfigError)
        if blocks.size and (blocks.max(initial=-1) >= self.num_blocks or blocks.min() < -1):
            raise ConfigError(f"block indices must be in -1 .. {self.num_blocks - 1}")
        real = blocks >= 0
        counts = np.where(real, np.diff(self.block_ptr)[np.where(real, blocks, 0)], 0)
        first = np.where(real, self.block_ptr[:-1][np.where(real, blocks, 0)], 0)
        seg = np.repeat(first - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return replace(self, doc=_own(self.doc[seg]), start=_own(self.start[seg]), length=_own(self.length[seg]),
                       block_ptr=_own(ptr), complete=False)

    # ---- materialization ---------------------------------------------------------------------
    def batches(self, source, *, batch_size: int, pad_id: int, fragment_positions: FragmentPositions = "restart",
                stream: bool | None = None, drop_last: bool = False, start_block: int = 0,
                num_threads: int = 1, index_dtype=np.int64, reuse_memory: bool = True) -> Iterator[Batch]:
        """Yield :class:`Batch` es of ``batch_size`` blocks (the last one smaller unless ``drop_last``).

        ``source``: a list of id arrays or any :class:`~tokenmill.data.source.TokenSource`. A source
        that also exposes ``token_array`` (all ids, 1-D) and ``doc_offsets`` (``(num_docs + 1,)``
        int64) -- e.g. a memory-mapped store -- is gathered by one compiled copy per batch.
        ``fragment_positions``: pieces of a split document count positions from 0 (``"restart"``) or
        from their offset in the document (``"continue"``). ``stream`` overrides the layout
        (default: the plan's, True only for ``"concat"``); ``stream=True`` on a document plan gives
        plain stream packing -- no boundaries in the mask, no position reset -- for comparison.
        ``start_block`` resumes from that block (the state of a run is the epoch's plan and the
        number of blocks consumed). ``num_threads > 1`` builds the next batches on that many threads
        while the current one is consumed (the compiled passes release the GIL); the batches and
        their order are the same whatever the thread count.
        ``index_dtype=np.int32`` makes ``position_ids``, ``doc_ids`` and ``token_offsets`` int32 (12
        fewer bytes written per position; ids and labels stay int64); the default keeps them int64.
        ``reuse_memory``: a batch's memory is lent to a later batch once nothing refers to it any more
        (no Batch, array or tensor made from it is alive: a reference count says so), which saves
        the page faults of fresh memory; a batch you keep is never overwritten.
        Every batch's ``doc_ids`` and ``token_offsets`` (where each position comes from; no model
        reads them) are derived from its segment table when first read, not written with the rest.
        """
        start_block = check_int(start_block, "start_block", min=0, max=self.num_blocks)
        batch_size = check_int(batch_size, "batch_size", min=1)
        pad_id = check_int(pad_id, "pad_id", min=0)  # (a token id, as the documents'; EOS is safe)
        num_threads = check_int(num_threads, "num_threads", min=1, max=1024)
        check_fragment_positions(fragment_positions)
        index_dtype = check_index_dtype(index_dtype)
        src = self._checked_source(source)
        fill = segment_filler_of(src, self.doc_lengths)
        masked = loss_mask_of(src)  # (a MaskedSource: the labels of tokens flagged 0 become -100)
        stream = self.stream if stream is None else check_bool(stream, "stream")
        drop_last, reuse_memory = check_bool(drop_last, "drop_last"), check_bool(reuse_memory, "reuse_memory")
        stop = self.num_blocks - ((self.num_blocks - start_block) % batch_size if drop_last else 0)
        if stop < self.num_blocks:  # (said, not left out in silence: the loader counts them as dropped_samples)
            left = int(self.block_ptr[stop])
            tokens = int(self.length[left:].sum())
            warn(f"drop_last=True leaves out the last {self.num_blocks - stop:,d} of {self.num_blocks - start_block:,d} "
                 f"blocks ({tokens:,d} tokens), fewer than batch_size={batch_size:,d}; pass drop_last=False to get them "
                 "as a smaller last batch")
        buffers = Buffers(keep=num_threads + 4) if reuse_memory else None
        ptr, T = self.block_ptr, self.block_size

        def make_checked(b0: int) -> Batch:
            """One batch the slow way: every check per batch, each error naming its problem."""
            b1 = min(b0 + batch_size, self.num_blocks)
            lo, hi = int(ptr[b0]), int(ptr[b1])
            rows = np.repeat(np.arange(b1 - b0, dtype=np.int64), np.diff(ptr[b0 : b1 + 1]))
            doc, start, length = self.doc[lo:hi], self.start[lo:hi], self.length[lo:hi]
            o_doc, o_start = segment_origins(src, doc, start)
            return with_loss_mask(assemble_segments(
                fill(doc, start, length), rows, o_doc, o_start, length, num_rows=b1 - b0, row_length=T, pad_id=pad_id,
                stream=stream, fragment_positions=fragment_positions, index_dtype=index_dtype, buffers=buffers,
                defer_provenance=True), masked)

        flat = _FlatTables(self, src, fill, batch_size, start_block, index_dtype == np.int32)
        continue_positions = fragment_positions == "continue"

        def make(b0: int) -> Batch:
            b1 = min(b0 + batch_size, self.num_blocks)
            table = flat.get(b0, b1)
            if table is None:
                return make_checked(b0)
            rows, doc, start, length, tokens, seg_src = table
            return with_loss_mask(layout_batch(
                rows, doc, start, length, b1 - b0, T, stream, continue_positions, pad_id, tokens, seg_src,
                batch_outputs((b1 - b0) * T, index_dtype, buffers, provenance=False), 0), masked)

        firsts = range(start_block, stop, batch_size)
        if num_threads == 1:
            yield from map(make, firsts)
            return
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(int(num_threads)) as ex:
            pending: deque = deque()
            for b0 in firsts:
                pending.append(ex.submit(make, b0))
                if len(pending) > num_threads:  # bounded read-ahead, order kept
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()

    def blocks(self, source, *, pad_id: int, fragment_positions: FragmentPositions = "restart",
               stream: bool | None = None, batch_size: int | None = None) -> Iterator[Block] | Iterator[Batch]:
        """Yield one :class:`Block` per block, in plan order (with ``batch_size``: :class:`Batch` es,
        as :meth:`batches`). Options as in :meth:`batches`."""
        if batch_size is not None:
            yield from self.batches(source, batch_size=batch_size, pad_id=pad_id,
                                    fragment_positions=fragment_positions, stream=stream)
            return
        for batch in self.batches(source, batch_size=64, pad_id=pad_id,
                                  fragment_positions=fragment_positions, stream=stream):
            yield from batch.blocks()

    def _checked_source(self, source) -> TokenSource:
        src = as_source(source)
        if len(src) != self.num_docs:
            raise InputError(f"the source has {len(src):,d} documents but the plan was made for "
                             f"{self.num_docs:,d}; pack the lengths of this source")
        lengths = check_array(src.lengths, "the source's lengths", min=0)
        if not np.array_equal(lengths, self.doc_lengths):
            i = int(np.argmax(lengths != self.doc_lengths))
            raise InputError(f"document {i} has {int(lengths[i]):,d} tokens in the source but "
                             f"{int(self.doc_lengths[i]):,d} in the plan; pack the lengths of this source")
        check_memory_ids(src)  # in memory, never validated (a store's ids were): -100 would read as an ignored label
        refuse_flags_as_ids(src)
        return src


class _FlatTables:
    """The segment tables of a flat source (one token array), prepared and checked for many batches
    at a time: the rows, origins and source offsets of ~8k blocks are computed by a few numpy calls
    and checked by one compiled pass (:func:`_kernels.segments_ok`), so a batch costs only slices
    and the layout pass (the per-batch Python was a sixth of the time of full 64 x 2048 batches).
    ``get(b0)`` is None where the source is not flat or a check fails: the caller then takes the
    per-batch path, whose checks name the problem. Thread-safe (batches are made on worker threads).
    """

    BLOCKS = 8192  # blocks per prepared chunk (rounded to whole batches)

    def __init__(self, plan: "PackPlan", src, fill, batch_size: int, first_block: int, index32: bool):
        import threading

        self.plan, self.src, self.fill, self.index32 = plan, src, fill, index32
        self.first = first_block
        self.span = batch_size * max(1, self.BLOCKS // batch_size)
        self.usable = batch_size * plan.block_size <= INT32_MAX  # else the per-batch path refuses it
        self.chunks: dict[int, tuple | None] = {}
        self.lock = threading.Lock()
        # a memory-mapped source's check that its files still have their sizes, in the numbering of the
        # documents the chunks hold (a SliceSource's: its base's)
        base = getattr(src, "base", src) if getattr(src, "origin_doc", None) is not None else src
        self.mapped = getattr(base, "check_mapped", None)

    def get(self, b0: int, b1: int):
        """``(rows, doc, start, length, tokens, seg_src)`` of blocks ``b0 .. b1`` (in one chunk)."""
        if not self.usable:
            return None
        key = (b0 - self.first) // self.span
        with self.lock:
            if key not in self.chunks:
                if len(self.chunks) >= 4:  # worker threads stay within a chunk or two of each other
                    del self.chunks[min(self.chunks)]
                self.chunks[key] = self._prepare(self.first + key * self.span)
                if self.chunks[key] is None:
                    self.usable = False
            chunk = self.chunks[key]
        if chunk is None:
            return None
        c0, lo, rows, doc, start, length, tokens, seg_src = chunk
        ptr = self.plan.block_ptr
        k0, k1 = int(ptr[b0]) - lo, int(ptr[b1]) - lo
        if self.mapped is not None:  # the chunk's files were checked when it was prepared; a batch's, again now
            self.mapped(doc[k0:k1])
        return rows[k0:k1] - (b0 - c0), doc[k0:k1], start[k0:k1], length[k0:k1], tokens, seg_src[k0:k1]

    def _prepare(self, c0: int):
        from . import _kernels

        plan = self.plan
        c1 = min(c0 + self.span, plan.num_blocks)
        ptr = plan.block_ptr
        lo, hi = int(ptr[c0]), int(ptr[c1])
        doc, start, length = plan.doc[lo:hi], plan.start[lo:hi], plan.length[lo:hi]
        how = self.fill(doc, start, length)
        if not isinstance(how, tuple):
            return None
        tokens = check_token_array(how[0], "tokens")
        o_doc, o_start = segment_origins(self.src, doc, start)
        arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (o_doc, o_start, length, how[1])]
        if any(a.shape != length.shape for a in arrays):
            return None
        rows = np.repeat(np.arange(c1 - c0, dtype=np.int64), np.diff(ptr[c0 : c1 + 1]))
        rows, o_doc, o_start, length, seg_src = readonly(rows, *arrays)  # (one kernel type, see layout_batch)
        if not _kernels.segments_ok(rows, o_doc, o_start, length, seg_src, c1 - c0, plan.block_size, tokens.size,
                                    self.index32):
            return None
        return c0, lo, rows, o_doc, o_start, length, tokens, seg_src


def segment_origins(src, doc: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where segments come from in the original documents (a SliceSource maps windows back)."""
    origin_doc = getattr(src, "origin_doc", None)
    if origin_doc is None:
        return doc, start
    return origin_doc[doc], src.origin_start[doc] + start


def segment_filler_of(src: TokenSource, lengths: np.ndarray):
    """``fill(doc, start, length)`` -> what :func:`assemble` copies the segments' ids with: the flat
    token array and offsets (read inside the compiled pass), or a per-segment copy from ``src.get``.

    The flat arrays are checked once here against the lengths the plan was made for: document
    ``d`` must lie inside ``token_array`` at ``doc_offsets[d] .. doc_offsets[d] + lengths[d]``
    (a source whose arrays disagree with its lengths would make the compiled pass read stale memory).
    """
    segment_filler = getattr(src, "segment_filler", None)
    if segment_filler is not None:  # e.g. a multi-shard TokenStore: one compiled copy per shard, per batch
        return segment_filler
    tokens = getattr(src, "token_array", None)
    offsets = getattr(src, "doc_offsets", None)
    if tokens is not None and offsets is not None:
        tokens = check_token_array(tokens, "the source's token_array")
        offsets = check_array(offsets, "the source's doc_offsets")
        n = lengths.size
        if offsets.size < n:
            raise InputError(f"the source's doc_offsets has {offsets.size:,d} entries for {n:,d} documents; "
                             "it needs one per document (plus the end)")
        check_spans(offsets[:n], lengths, tokens.size, "the source's token_array/doc_offsets")
        if not ids_checked(src) and getattr(src, "origin_doc", None) is None:
            # a user's flat arrays, which nothing checked: each document inside its own span (offsets that
            # disagree with the lengths read the next document's ids into a batch), no negative id (-100 would
            # read as an ignored label)
            if n and offsets.size > n:
                over = offsets[:n] + lengths > offsets[1 : n + 1]
                if over.any():
                    d = int(np.argmax(over))
                    raise InputError(f"the source's doc_offsets make document {d:,d} {int(offsets[d + 1] - offsets[d]):,d} "
                                     f"ids long where its lengths say {int(lengths[d]):,d}: its ids would run into the "
                                     "next document's; pass offsets and lengths that agree")
            if tokens.size and tokens.dtype.kind == "i" and int(tokens.min()) < 0:
                i = int(np.argmax(tokens < 0))
                raise InputError(f"the source's token_array holds id {int(tokens[i]):,d} at position {i:,d}; token ids "
                                 "are >= 0 (-100 would read as an ignored label, a target dropped without a word)")
        mapped = getattr(src, "check_mapped", None)  # (a file under a memory map: its size, every call)

        def flat(doc, start, length):
            if mapped is not None:
                mapped(doc)
            return tokens, offsets[doc] + start
        return flat

    get = reader(src, lengths)  # (a user's class: each document checked as it is read)

    def fill_each(doc, start, length):
        def fill(out, dst):
            for d, s, n, o in zip(doc.tolist(), start.tolist(), length.tolist(), dst.tolist()):
                out[o : o + n] = get(d)[s : s + n]
        return fill

    return fill_each


# ---- planning ------------------------------------------------------------------------------------
@interruptible
def pack(lengths, block_size: int, *, method: Method = "best_fit", long_docs: LongDocs = "split",
         seed: int | None = 0) -> PackPlan:
    """Plan blocks of ``block_size`` positions from document lengths (see the module docstring).

    ``lengths``: ``(num_docs,)`` integers, or a token source (its ``lengths`` are used).
    ``seed``: blocks of ``"best_fit"`` / ``"first_fit_decreasing"`` are shuffled with it (sorted
    order would put all long documents first); ``None`` keeps creation order. ``"greedy"`` and
    ``"concat"`` keep document order. Deterministic for a seed.

    >>> p = pack([10], 4)                  # split into pieces of 4 (each later piece loses 1 target)
    >>> sorted(s for b in range(p.num_blocks) for s in p.segments(b)), p.boundary_targets
    ([(0, 0, 4), (0, 4, 4), (0, 8, 2)], 2)
    >>> p = pack([10, 3], 4, long_docs="truncate"); (p.tokens, p.truncated_tokens)
    (7, 6)
    >>> c = pack([4, 3, 5], 6, method="concat"); [c.segments(b) for b in range(c.num_blocks)]
    [[(0, 0, 4), (1, 0, 2)], [(1, 2, 1), (2, 0, 5)]]
    """
    if method not in METHODS:
        raise ConfigError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
    if long_docs not in LONG_DOCS:
        raise ConfigError(f"long_docs={long_docs!r} is not one of {', '.join(map(repr, LONG_DOCS))}")
    T = check_int(block_size, "block_size", min=1, max=2**62)
    seed = check_int(seed, "seed", min=0, none=True)
    doc_lengths = document_lengths(lengths)
    empty = int((doc_lengths == 0).sum())
    if method == "concat":
        doc, start, length, ptr = _concat(doc_lengths, T)
        split = int((np.bincount(doc, minlength=doc_lengths.size) > 1).sum())  # cut at a block edge (had said 0)
        return PackPlan(T, method, *_own(doc, start, length, ptr), doc_lengths, long_docs, stream=True, empty_docs=empty,
                        split_docs=split)

    if method != "first_fit_decreasing" and _python_first(doc_lengths, T, method, long_docs):
        doc, start, length, counts = _items(doc_lengths, T, long_docs, twin=True)
        doc, start, length, ptr = _place_python(doc, start, length, T, method, seed)
        return PackPlan(T, method, *_own(doc, start, length, ptr), doc_lengths, long_docs, empty_docs=empty, **counts)
    doc, start, length, counts = _items(doc_lengths, T, long_docs)
    from . import _kernels

    perm = np.zeros(0, np.int64)  # block renumbering (empty: none)
    dense = T + 1 <= 4 * length.size + 65536  # memory ~ 24 bytes x T is fine
    if method == "greedy":
        assign, nblocks = _kernels.greedy(length, T)
    else:
        # Longest first; equal lengths by document then piece order, so the plan is reproducible.
        if dense:  # _items gives (doc, start) order: a stable counting sort by length is the lexsort
            items = (doc, start, length)
            doc, start, length = (np.empty(length.size, np.int64) for _ in range(3))
            _kernels.sort_decreasing(*items, T, doc, start, length)
        else:
            order = np.lexsort((start, doc, -length))
            doc, start, length = doc[order], start[order], length[order]
        if method == "first_fit_decreasing":
            kernel = _kernels.first_fit
        elif dense:  # dense rooms: fastest
            kernel = _kernels.best_fit
        else:  # huge blocks: memory ~ items, not T (same plan)
            kernel = _kernels.best_fit_sparse
        assign, nblocks = kernel(length, T)
        if seed is not None:
            perm = np.random.default_rng(seed).permutation(nblocks).astype(np.int64)
    # by block (renumbered by perm), inside a block in the order items were placed: a counting sort
    # into the memory of the unsorted items where they are ours and dead (no fresh pages to fault in)
    if method == "greedy":  # blocks already come in item order
        ptr = np.zeros(nblocks + 1, np.int64)
        np.cumsum(np.bincount(assign, minlength=nblocks), out=ptr[1:])
    else:
        unsorted = items if dense else (None,) * 3
        out = tuple(a if a is not None and a.flags.owndata and a.flags.writeable else np.empty(length.size, np.int64)
                    for a in unsorted)
        ptr = _kernels.group_by_block(assign, perm, nblocks, doc, start, length, *out)
        doc, start, length = out
    return PackPlan(T, method, *_own(doc, start, length, ptr), doc_lengths, long_docs, empty_docs=empty, **counts)


# A plan of up to this many items (documents, or their pieces) is placed by the pure-Python twins
# while the packing kernels are not compiled yet (a first run): ~1 s, instead of ~7 s compiling.
FIRST_RUN_PYTHON_ITEMS = 100_000


def _python_first(doc_lengths: np.ndarray, T: int, method: str, long_docs: str) -> bool:
    from .._jit import python_first
    from . import _kernels

    split = long_docs == "split" and bool((doc_lengths > T).any())
    n = int((-(-doc_lengths // T)).sum(dtype=np.float64)) if split else int((doc_lengths > 0).sum())
    if n > FIRST_RUN_PYTHON_ITEMS:
        return False
    kernels = [_kernels.items, _kernels.greedy] if method == "greedy" else [
        _kernels.items, _kernels.sort_decreasing, _kernels.best_fit, _kernels.group_by_block]
    return python_first("pack", kernels, n, FIRST_RUN_PYTHON_ITEMS)


def _place_python(doc, start, length, T: int, method: str, seed: int | None):
    """The twin of pack's compiled placement: longest first (ties by document, then piece), the
    reference loops of ``reference.py``, blocks renumbered by a permutation drawn from ``seed``, then grouped
    by block in placement order. Equal to the kernels (tests/batching/test_packing.py)."""
    from . import reference

    if method == "greedy":
        assign, nblocks = reference.greedy(length.tolist(), T)
    else:
        order = np.lexsort((start, doc, -length))
        doc, start, length = doc[order], start[order], length[order]
        assign, nblocks = reference.best_fit(length.tolist(), T)
    assign = np.asarray(assign, np.int64)
    if seed is not None and method != "greedy":
        assign = np.random.default_rng(seed).permutation(nblocks).astype(np.int64)[assign]
    by_block = np.argsort(assign, kind="stable")
    ptr = np.zeros(nblocks + 1, np.int64)
    np.cumsum(np.bincount(assign, minlength=nblocks), out=ptr[1:])
    return doc[by_block], start[by_block], length[by_block], ptr


def _items(doc_lengths: np.ndarray, T: int, long_docs: str, twin: bool = False):
    """Documents -> items ``(doc, start, length)`` of at most ``T`` tokens, by the long_docs rule
    (``twin``: by numpy, not the compiled pass)."""
    over = doc_lengths > T
    nonempty = np.flatnonzero(doc_lengths > 0)
    counts = dict(truncated_docs=0, truncated_tokens=0, split_docs=0)
    if over.any() and long_docs == "error":
        i = int(np.argmax(over))
        raise ConfigError(f"document {i} has {int(doc_lengths[i]):,d} tokens, more than block_size={T:,d}; "
                          "pass long_docs='split' or 'truncate'")
    if long_docs == "truncate" or not over.any():
        counts["truncated_docs"] = int(over.sum())
        counts["truncated_tokens"] = int((doc_lengths[over] - T).sum())
        return (*_item_arrays(doc_lengths, T, False, nonempty.size, twin), counts)
    pieces = -(-doc_lengths[nonempty] // T)  # ceil
    check_rows(int(pieces.sum(dtype=np.float64)), "the plan", "raise block_size or pass long_docs='truncate'")
    doc, start, length = _item_arrays(doc_lengths, T, True, int(pieces.sum()), twin)
    counts["split_docs"] = int(over.sum())
    return doc, start, length, counts


def _item_arrays(doc_lengths: np.ndarray, T: int, split: bool, n: int, twin: bool = False):
    """The ``n`` items of :func:`_items` by one compiled pass (numpy temporaries of this size cost
    more in page faults than the pass itself), or by numpy (``twin``, small first runs)."""
    if twin:
        nonempty = np.flatnonzero(doc_lengths > 0)
        if not split:
            return nonempty.astype(np.int64), np.zeros(n, np.int64), np.minimum(doc_lengths[nonempty], T)
        pieces = -(-doc_lengths[nonempty] // T)
        doc = np.repeat(nonempty, pieces).astype(np.int64)
        start = ranks_in_groups(pieces) * T
        return doc, start, np.minimum(doc_lengths[doc] - start, T).astype(np.int64)
    from . import _kernels

    doc, start, length = (np.empty(n, np.int64) for _ in range(3))
    lengths, = readonly(np.ascontiguousarray(doc_lengths, np.int64))  # (one kernel type: see document_lengths)
    if _kernels.items(lengths, T, split, doc, start, length) != n:
        raise AssertionError("tokenmill bug: the item count of a plan changed while it was computed")
    return doc, start, length


def _concat(doc_lengths: np.ndarray, T: int):
    """One stream of all documents, cut every T tokens; a document crossing a cut becomes pieces."""
    nonempty = np.flatnonzero(doc_lengths > 0)
    lens = doc_lengths[nonempty]
    ends = np.cumsum(lens)
    begins = ends - lens
    first_block, last_block = begins // T, (ends - 1) // T
    pieces = last_block - first_block + 1
    check_rows(int(pieces.sum(dtype=np.float64)), "the plan", "raise block_size")
    doc = np.repeat(nonempty, pieces)
    blk = np.repeat(first_block, pieces) + ranks_in_groups(pieces)
    lo = np.maximum(np.repeat(begins, pieces), blk * T)
    hi = np.minimum(np.repeat(ends, pieces), (blk + 1) * T)
    nblocks = int(last_block[-1]) + 1 if lens.size else 0
    ptr = np.zeros(nblocks + 1, np.int64)
    np.cumsum(np.bincount(blk, minlength=nblocks), out=ptr[1:])
    return doc, lo - np.repeat(begins, pieces), hi - lo, ptr


# ---- long documents as a stream ------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Chunks:
    """Samples of one long document: ``start`` / ``length`` int64 ``(n,)``, plus what was dropped."""

    start: np.ndarray
    length: np.ndarray
    targets: int  # targets scored over all kept samples (each exactly once)
    dropped_tokens: int  # tokens of a dropped short last sample that were scored nowhere
    dropped_targets: int

    def __len__(self) -> int:
        return int(self.start.size)


def chunk_stream(length: int, block_size: int, *, last: Literal["pad", "drop"] = "pad") -> Chunks:
    """Cut a document of ``length`` tokens into samples of ``block_size + 1`` tokens that share one
    boundary token, so that every target (tokens 1 .. length-1) is scored exactly once::

        length 10, block_size 4:   t0 t1 t2 t3 t4 t5 t6 t7 t8 t9
        sample 0                   [t0 ........ t4]                 inputs t0..t3, targets t1..t4
        sample 1                               [t4 ........ t8]     inputs t4..t7, targets t5..t8
        sample 2                                           [t8 t9]  input  t8,     target  t9

    Each sample is a row of ``block_size + 1`` positions whose first label is ignored (the usual
    layout: pad them with :func:`tokenmill.batching.pad_batch`). A later sample does not see the
    prefix before its boundary token. The last sample, if shorter, is kept (``last="pad"``) or
    dropped (``last="drop"``; its tokens and targets are counted: ``dropped_tokens`` are the tokens
    no kept sample holds, so a document shorter than ``block_size + 1`` drops all of its tokens). A document
    of one token has no target: it gives no sample under either rule, its token counted in ``dropped_tokens``.

    >>> c = chunk_stream(10, 4); c.start.tolist(), c.length.tolist(), c.targets
    ([0, 4, 8], [5, 5, 2], 9)
    >>> d = chunk_stream(10, 4, last="drop"); d.length.tolist(), d.dropped_targets, d.dropped_tokens
    ([5, 5], 1, 1)
    >>> d = chunk_stream(4, 4, last="drop"); len(d), d.dropped_targets, d.dropped_tokens
    (0, 3, 4)
    """
    if last not in ("pad", "drop"):
        raise ConfigError(f"last={last!r} is not 'pad' (keep a short last sample) or 'drop'")
    T = check_int(block_size, "block_size", min=1, max=2**62)
    n = check_int(length, "length", min=0, max=2**62)
    if n < 2:
        return Chunks(np.zeros(0, np.int64), np.zeros(0, np.int64), 0, n, 0)
    count = check_rows(-(-(n - 1) // T), "chunk_stream", "raise block_size")  # samples for targets 1 .. n-1
    start = np.arange(count, dtype=np.int64) * T
    size = np.minimum(start + T + 1, n) - start
    if last == "drop" and size[-1] < T + 1:
        dropped_targets = int(size[-1] - 1)
        # the dropped sample's first token is also the previous sample's last one, unless it is alone
        dropped_tokens = int(size[-1]) - (1 if count > 1 else 0)
        return Chunks(start[:-1], size[:-1], int((size[:-1] - 1).sum()), dropped_tokens, dropped_targets)
    return Chunks(start, size, int((size - 1).sum()), 0, 0)
