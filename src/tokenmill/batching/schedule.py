"""The global sample sequence of a training run, as arrays indexed by (seed, epoch, position).

This is the torch-free core of :class:`tokenmill.torch.TrainingLoader`. A *sample* is one row of a
batch: a packed block, or one window (padded, or packed with other windows into a block). Per epoch:

::

    plan      pack(lengths) / windows.plan(lengths, epoch) [-> pack]    arrays, no tokens read
    order     permutation of the plan's samples from default_rng([tag, seed, part, epoch])
    global    batch g = samples g*G .. (g+1)*G - 1,   G = batch_size * world_size
    rank r    slots r*b .. (r+1)*b - 1 of every global batch

    epoch 0, 10 samples, b=2, W=2 (G=4), drop_last:    global batch 0: s3 s7 | s0 s9
                                                        global batch 1: s5 s1 | s8 s2
                                                        (s4 s6 dropped: 10 % 4; counted)

The state of a run is ``(epoch, global batches consumed)``; because every batch is a function of
``(seed, epoch, g, rank)``, a run resumed from that state sees exactly the batches of an
uninterrupted one, and a state saved with ``W1 x b1`` continues on ``W2 x b2`` when
``W1 * b1 == W2 * b2`` (same global batches, sliced differently).

With ``drop_last=False`` the last global batch is completed with empty samples (all padding, zero
targets; a no-op under the token-weighted loss), so every rank still gets ``batch_size`` rows.

Mixtures (:class:`tokenmill.data.mixture.Mixture`): each part has its own plan and order per *part
epoch*; a mixture epoch has as many samples as the parts together have in their epoch 0, and global
batch ``g`` takes from part ``i`` the count :func:`~tokenmill.data.mixture.allocate_counts` gives
(within one sample of its share; shares are the token weights converted with each part's mean
tokens per sample), interleaved evenly inside the batch. A part that runs out continues with its
next part epoch (upsampling).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np

from .._arrays import ranks_in_groups, seal
from .._io import is_regular_file
from .._schema import BIG, Count, Meta, Sha256, Struct, check, load_json, parse_json
from .._validate import check_bool, check_int
from ..data.masked import item_loss_mask, loss_mask_of, refuse_flags_as_ids
from ..data.mixture import Mixture, allocate_counts, source_fingerprint
from ..data.source import as_source, check_memory_ids
from ..errors import ConfigError, FormatError
from .batch import Batch, check_fragment_positions, with_loss_mask
from .layout import INT32_MAX, Buffers, assemble_segments
from .packing import LONG_DOCS, METHODS, PackPlan, pack, segment_filler_of, segment_origins
from .sources import SliceSource

_PLAN_ARRAYS = ("doc", "start", "length", "block_ptr")
_PLAN_COUNTS = ("truncated_docs", "truncated_tokens", "split_docs", "empty_docs")
_ORDER_TAG = 0x6F72646572  # "order": keeps the sample order's generator apart from pack's and the jitter's
STATE_FORMAT = "tokenmill.TrainingLoader"
STATE_VERSION = 1
_STATE_KEYS = {"format": str, "version": int, "epoch": int, "batches_consumed": int, "samples_consumed": int,
               "global_batch_size": int, "world_size": int, "batch_size": int, "rank": int, "seed": int,
               "data": str, "plan": str, "checksum": str}
class PlanCacheMeta(Struct):
    """``plan.json`` of a cached packing plan (its arrays are .npy files beside it)."""

    format: Literal["tokenmill.pack-plan"]
    version: Literal[2]
    block_size: Annotated[int, Meta(ge=1, le=BIG)]
    method: str
    long_docs: str
    stream: bool
    num_docs: Count
    truncated_docs: Count
    truncated_tokens: Count
    split_docs: Count
    empty_docs: Count
    arrays_sha256: Sha256  # of the arrays' int64 bytes in _PLAN_ARRAYS order (plan_digest)


def plan_digest(arrays) -> str:
    """sha256 of a packing plan's arrays (``_PLAN_ARRAYS`` order, each as int64 bytes, its length first):
    what a cached plan is checked against, so a flipped bit that keeps every index in range (document 803
    read as 802: one document seen twice in an epoch, another never) is refused."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a, np.int64)
        h.update(int(a.size).to_bytes(8, "little"))
        h.update(a.data)
    return "sha256:" + h.hexdigest()


class LoaderState(Struct):
    """What :meth:`BatchSchedule.state_dict` returns (and a user hands back to resume)."""

    format: Literal["tokenmill.TrainingLoader"]
    version: Literal[1]
    epoch: Count
    batches_consumed: Count
    samples_consumed: Count
    global_batch_size: Annotated[int, Meta(ge=1, le=BIG)]
    world_size: Annotated[int, Meta(ge=1, le=BIG)]
    batch_size: Annotated[int, Meta(ge=1, le=BIG)]
    rank: Count
    seed: Annotated[int, Meta(ge=0)]  # (a loader's seed is >= 0: "pass seed=-1 to resume" could not be done)
    data: Annotated[str, Meta(max_length=200)]
    plan: Annotated[str, Meta(max_length=1 << 20)]
    checksum: Annotated[str, Meta(max_length=100)]


EPOCH_LIMIT = 2**62  # epoch x samples per epoch stays below this: the int64 sample arithmetic cannot wrap
ROW_MEMORY_FLOOR = 64 * 2**20  # batches smaller than this may have rows longer than the data (toy runs)
BYTES_PER_POSITION = 49  # a batch's arrays per position: 5 int64 (ids, labels, positions, doc ids,
#                          offsets), the bool mask and the int32 cu_seqlens


@dataclass(frozen=True, eq=False)
class _Stream:
    """One (part, part epoch): what its samples are made of and the order they are drawn in."""

    source: object  # token source the plan indexes (the part, or a SliceSource of its windows)
    plan: PackPlan
    order: np.ndarray  # (num_samples,) block ids in draw order
    window_stats: object = None  # PlanStats of the windows, if any

    @property
    def num_samples(self) -> int:
        return int(self.order.size)

    @property
    def tokens(self) -> int:
        return self.plan.tokens


def _is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, np.integer))


def _positive(name: str, v) -> int:
    if not _is_int(v) or v < 1:
        raise ConfigError(f"{name}={v!r} must be a positive integer")
    return int(v)


class BatchSchedule:
    """Which samples every rank gets in every batch of every epoch, and how to build them.

    Arguments as :class:`tokenmill.torch.TrainingLoader` (minus the torch ones). ``batch(epoch, g)``
    materializes this rank's rows of global batch ``g`` as a :class:`~tokenmill.batching.Batch`.

    Checked up front, each a :class:`~tokenmill.errors.ConfigError` naming the argument (or an
    :class:`~tokenmill.errors.InputError` naming the document): ``shuffle`` and ``drop_last`` are
    real bools (``"no"`` is not False); ids of in-memory documents (lists, arrays) are ``>= 0``;
    epochs run from 0 to :attr:`max_epoch`, the last one whose sample positions
    (``epoch x samples per epoch``) stay below ``2**62`` in int64; and a row (``block_size``, or
    the windows' capacity) longer than all the tokens of the source (of its largest part, for a
    mixture) can never be filled, so it is refused when ``batch_size`` such rows would need more than
    64 MiB of buffers (49 bytes per position): lower ``block_size`` to the source's token count.

    >>> docs = [[i] * n for i, n in enumerate([3, 5, 2, 4, 6, 1])]
    >>> s = BatchSchedule(docs, batch_size=1, block_size=6, world_size=2, rank=1, seed=0)
    >>> s.num_batches(0), s.num_samples(0)
    (2, 4)
    >>> s.batch(0, 0).input_ids.tolist()
    [[3, 3, 3, 3, 2, 2]]
    """

    def __init__(self, source, *, batch_size: int, block_size: int | None = None, method: str = "best_fit",
                 windows=None, seed: int = 0, rank: int = 0, world_size: int = 1, shuffle: bool = True,
                 drop_last: bool = True, pad_id: int | None = None, long_docs: str = "split",
                 plan_cache=None):
        self.plan_cache = None if plan_cache is None else Path(plan_cache)
        if self.plan_cache is not None:
            if self.plan_cache.exists() and not self.plan_cache.is_dir():
                raise ConfigError(f"plan_cache={str(plan_cache)!r} is a file; pass a folder (made if missing) to "
                                  "keep packing plans in")
            if (self.plan_cache / "manifest.json").is_file() or (self.plan_cache / "build.json").is_file():
                raise ConfigError(f"plan_cache={str(plan_cache)!r} is a token store's folder, whose files a build "
                                  "owns; pass a folder of its own (e.g. one beside the store)")
        self.batch_size = _positive("batch_size", batch_size)
        self.world_size = _positive("world_size", world_size)
        if not _is_int(rank) or not 0 <= rank < self.world_size:
            raise ConfigError(f"rank={rank!r} must be in 0 .. world_size-1 = {self.world_size - 1} "
                              f"(world_size={self.world_size})")
        self.rank = int(rank)
        if not _is_int(seed) or seed < 0:
            raise ConfigError(f"seed={seed!r} must be an integer >= 0")
        self.seed = int(seed)
        if method not in METHODS:
            raise ConfigError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
        if long_docs not in LONG_DOCS:
            raise ConfigError(f"long_docs={long_docs!r} is not one of {', '.join(map(repr, LONG_DOCS))}")
        self.method, self.long_docs = method, long_docs
        self.block_size = None if block_size is None else _positive("block_size", block_size)
        self.windows = windows
        if windows is None and block_size is None:
            raise ConfigError("pass block_size=T (packed blocks of T positions) or windows=SlidingWindows(...) "
                              "(windows, padded; with block_size also packed)")
        self.fragment_positions = "restart"
        if windows is not None:
            for attr in ("plan", "capacity", "window_size"):
                if not hasattr(windows, attr):
                    raise ConfigError(f"windows={windows!r} is not a SlidingWindows (it has no {attr!r})")
            if getattr(windows, "template", None) is not None:
                raise ConfigError("windows with a template (bos/eos) are not supported by the loader; add the "
                                  "special tokens to the documents (e.g. the store's append_eos) instead")
            if getattr(windows, "score", "all") != "all":
                raise ConfigError("windows with score='new' are for evaluation; the loader trains on every "
                                  "target: use score='all'")
            if getattr(windows, "positions", "reset") == "absolute":
                self.fragment_positions = "continue"
        check_fragment_positions(self.fragment_positions)
        self.shuffle, self.drop_last = check_bool(shuffle, "shuffle"), check_bool(drop_last, "drop_last")
        if pad_id is not None and (not _is_int(pad_id) or pad_id < 0):
            raise ConfigError(f"pad_id={pad_id!r} must be an integer >= 0 (padding is found by length, so "
                              "the EOS id is safe)")
        self.pad_id = 0 if pad_id is None else int(pad_id)

        self.source = source
        if isinstance(source, Mixture):
            self.mixture: Mixture | None = source
            self.parts = list(source.parts)
            self.doc_base = source.doc_base
        else:
            self.mixture = None
            self.parts = [as_source(source)]
            self.doc_base = np.zeros(2, np.int64)
            if len(self.parts[0]) == 0:
                raise ConfigError("the source has 0 documents; there is nothing to train on")
            if int(np.sum(self.parts[0].lengths)) == 0:  # (was "the global batch is larger than epoch 0")
                raise ConfigError(f"the source's {len(self.parts[0]):,d} documents hold no tokens; there is nothing "
                                  "to train on")
            check_memory_ids(self.parts[0])  # in memory, never validated (a store's ids were)
        for part in self.parts:
            refuse_flags_as_ids(part)
        self._check_row_memory()
        self._streams: dict[tuple[int, int], _Stream] = {}
        self._fills: dict[tuple[int, int], object] = {}  # packing.segment_filler_of per stream (not pickled)
        self._item_masks: dict[int, object] = {}  # flags in the numbering batches name (_origins; not pickled)
        self._buffers = Buffers()  # memory of batches nobody holds any more, lent to the next (not pickled)
        self._pack_cache: dict[int, PackPlan] = {}
        self._part_counts: dict[tuple[int, int], int] = {}
        # per part (jittered windows: part epochs of different sizes), where each part epoch starts in its stream
        self._part_starts: dict[int, tuple[list[int], np.ndarray]] = {}
        self._mix = None
        self._fingerprint: str | None = None
        self.max_epoch: int | None = None  # set below, from the size of epoch 0
        nb = self.num_batches(0)  # fail early: batch larger than an epoch, empty plans
        per_epoch = max(self.num_samples(0), nb * self.global_batch_size, 1)
        self._epoch_samples = per_epoch
        self.max_epoch = EPOCH_LIMIT // per_epoch - 1

    def _check_row_memory(self) -> None:
        """Refuse rows longer than all the tokens they could ever hold when a batch of them is large
        (see the class docstring): the allocation would otherwise fail, or succeed, as padding."""
        T = self.block_size if self.block_size is not None else getattr(self.windows, "capacity", None)
        if not _is_int(T):
            return
        T = int(T)
        what = "block_size" if self.block_size is not None else "the windows' capacity"
        if T < 2:  # (55 batches and not one target, in silence)
            raise ConfigError(f"{what} is {T}: a row of one position holds no target (a row's first position is "
                              "never one: nothing precedes it in the row); use 2 or more")
        if self.batch_size * T > INT32_MAX:  # (said at the first batch before, and naming block_size for windows)
            from .._words import counted

            raise ConfigError(f"a batch of {counted(self.batch_size, 'row')} of {T:,d} positions ({self.batch_size * T:,d}) "
                              f"overflows int32 cu_seqlens (at most {INT32_MAX:,d} positions a batch); use a smaller "
                              f"batch_size or {what}")
        most = max(int(np.asarray(p.lengths, np.int64).sum(dtype=np.float64)) for p in self.parts)
        need = self.batch_size * T * BYTES_PER_POSITION
        if T > most and need > ROW_MEMORY_FLOOR:
            what = "block_size" if self.block_size is not None else "the windows' capacity"
            where = "the source" if self.mixture is None else "the largest part of the mixture"
            raise ConfigError(f"{what}={T:,d} is longer than all {most:,d} tokens of {where}, and a batch of "
                              f"batch_size={self.batch_size:,d} such rows would need {_size(need)} of buffers "
                              f"for padding: lower {'block_size' if self.block_size is not None else 'the window'} "
                              f"to at most {most:,d}")

    def check_epoch(self, epoch) -> int:
        """``epoch`` as an int in ``0 ..`` :attr:`max_epoch`, else a ConfigError naming it."""
        if not _is_int(epoch):
            check_int(epoch, "epoch")  # refuses bool, float, str, None: a ConfigError naming the type
        v = int(epoch)
        if v < 0:
            raise ConfigError(f"epoch={v:,d} is out of range; pass an integer >= 0")
        if self.max_epoch is not None and v > self.max_epoch:
            raise ConfigError(f"epoch={v:,d} is out of range; pass an integer in 0 .. {self.max_epoch:,d} (the "
                              f"sample positions of an epoch, epoch x {self._epoch_samples:,d} samples, "
                              "must stay below 2**62 in int64)")
        return v

    # ---- identity --------------------------------------------------------------------------------
    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.world_size

    @property
    def data_fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = source_fingerprint(self.source if self.mixture is not None else self.parts[0])
        return self._fingerprint

    def plan_options(self) -> dict:
        """What, besides the data and the seed, defines the sample sequence (JSON-able)."""
        win = None
        if self.windows is not None:
            win = asdict(self.windows) if is_dataclass(self.windows) else repr(self.windows)
            if isinstance(win, dict):
                win = {k: (list(v) if isinstance(v, tuple) else v) for k, v in win.items()}
        return {"block_size": self.block_size, "method": self.method, "long_docs": self.long_docs,
                "windows": win, "shuffle": self.shuffle, "drop_last": self.drop_last,
                "mixture": self.mixture is not None}

    # ---- per (part, part epoch) plans --------------------------------------------------------------
    def stream(self, part: int, epoch: int) -> _Stream:
        key = (part, epoch)
        s = self._streams.get(key)
        if s is not None:
            return s
        src = self.parts[part]
        wstats = None
        if self.windows is None:
            plan = self._pack_cache.get(part)
            if plan is None:
                plan = self._cached_pack(part) if self.plan_cache is not None else None
                if plan is None:
                    plan = pack(src.lengths, self.block_size, method=self.method, long_docs=self.long_docs,
                                seed=self.seed)
                    if self.plan_cache is not None:
                        self._store_pack(part, plan)
                self._pack_cache[part] = plan
            base = src
        else:
            wplan = self.windows.plan(src.lengths, epoch=epoch)
            wstats = wplan.stats
            base = SliceSource(src, doc=wplan.doc, start=wplan.start, length=wplan.length)
            if self.block_size is not None:
                plan = pack(base.lengths, self.block_size, method=self.method, long_docs=self.long_docs,
                            seed=self.seed)
            else:
                # one window a row; the arrays sealed, tokenmill's own (not copied and checked again: 56M windows
                # had spent ~8 s there); the lengths are the slice's own sealed column
                n, lengths = len(base), base.lengths
                plan = PackPlan(int(self.windows.capacity), "windows", seal(np.arange(n, dtype=np.int64)),
                                seal(np.zeros(n, np.int64)), lengths, seal(np.arange(n + 1, dtype=np.int64)), lengths)
        n = plan.num_blocks
        if self.shuffle:
            # a tag first: default_rng([seed, 0, 0]) would equal pack's default_rng(seed) (trailing zeros)
            # a mixture's own seed last; none for seed 0, the default (a mixture of seed 0 keeps the order
            # it had when loaders ignored a mixture's seed)
            mseed = [] if self.mixture is None or not self.mixture.seed else [self.mixture.seed]
            order = np.random.default_rng([_ORDER_TAG, self.seed, part, epoch, *mseed]).permutation(n).astype(np.int64)
        else:
            order = np.arange(n, dtype=np.int64)
        s = _Stream(base, plan, order, wstats)
        if len(self._streams) >= 4 * len(self.parts):  # keep a few recent epochs
            old = next(iter(self._streams))
            self._streams.pop(old)
            self._fills.pop(old, None)
        self._streams[key] = s
        self._part_counts[key] = n
        return s

    # ---- the packing plan cache (startup of a resumed run) ---------------------------------------
    def _cache_dir(self, part: int) -> Path:
        src = self.parts[part]
        # (v3: concat plans count the documents they cut at block edges in split_docs; v2 plans said 0)
        key = json.dumps({"v": 3, "data": source_fingerprint(src), "block_size": self.block_size,
                          "method": self.method, "long_docs": self.long_docs, "seed": self.seed}, sort_keys=True)
        return self.plan_cache / ("pack-" + hashlib.sha256(key.encode()).hexdigest()[:24])

    def _store_pack(self, part: int, plan: PackPlan) -> None:
        """Write the plan's arrays (.npy) and counts (JSON, written last) atomically. A cache that cannot be written
        (its entry's name taken by a file or a folder of something else, a full disk) is said and left: the plan
        is used as it is, and the run goes on (it had stopped on a bare FileExistsError)."""
        from ..errors import TokenmillError, warn

        try:
            self._write_pack(self._cache_dir(part), plan)
        except (OSError, TokenmillError) as e:
            warn(f"the packing plan could not be kept in the cache {self._cache_dir(part)} "
                 f"({' '.join(str(e).split())}); this run uses it as planned, and the next one plans it again")

    @staticmethod
    def _write_pack(d: Path, plan: PackPlan) -> None:
        from .._io import atomic_path, write_json_atomic

        d.mkdir(parents=True, exist_ok=True)
        for name in _PLAN_ARRAYS:
            with atomic_path(d / f"{name}.npy") as tmp:
                with open(tmp, "wb") as f:
                    np.save(f, np.ascontiguousarray(getattr(plan, name), np.int64), allow_pickle=False)
        meta = {"format": "tokenmill.pack-plan", "version": 2, "block_size": plan.block_size, "method": plan.method,
                "long_docs": plan.long_docs, "stream": plan.stream, "num_docs": plan.num_docs,
                **{k: int(getattr(plan, k)) for k in _PLAN_COUNTS},
                "arrays_sha256": plan_digest(getattr(plan, name) for name in _PLAN_ARRAYS)}
        write_json_atomic(d / "plan.json", meta)

    def _cached_pack(self, part: int) -> PackPlan | None:
        """The cached plan of ``part``, checked against the source's lengths; None if absent, or damaged (said,
        then planned again and written anew: the plan is a function of the data and the options, so the
        cache is never needed to be right; it had been an error asking the user to delete the folder, and an
        emptied array file a bare EOFError)."""
        d = self._cache_dir(part)
        if not (d / "plan.json").exists():
            return None
        try:
            return self._read_pack(d, part)
        except Exception as e:  # noqa: BLE001 -- whatever a damaged file raises
            from ..errors import warn

            warn(f"the packing plan cache {d} is damaged ({' '.join(str(e).split())}); planning again "
                 "and writing it anew")
            return None

    def _read_pack(self, d: Path, part: int) -> PackPlan:
        meta, _ = load_json(d / "plan.json", PlanCacheMeta, what="packing plan cache")
        lengths = np.asarray(self.parts[part].lengths, np.int64)
        odd = [name for name in _PLAN_ARRAYS if not is_regular_file(d / f"{name}.npy")]
        if odd:  # (a FIFO there: np.load had waited for a writer forever)
            raise FormatError(f"{odd[0]}.npy is missing or not a regular file")
        try:
            arrays = {name: np.load(d / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in _PLAN_ARRAYS}
        except Exception as e:  # noqa: BLE001 -- (an emptied file: EOFError)
            raise FormatError(f"an array file does not load: {type(e).__name__}: {e}") from None
        doc, start, length, ptr = (arrays[k] for k in _PLAN_ARRAYS)
        if not all(a.dtype == np.int64 and a.ndim == 1 for a in arrays.values()) \
                or plan_digest(arrays[k] for k in _PLAN_ARRAYS) != meta["arrays_sha256"]:
            raise FormatError("its arrays do not hash to the sha256 its plan.json records")
        ok = (meta["num_docs"] == lengths.size and meta["method"] in METHODS and meta["long_docs"] in LONG_DOCS and meta.get("block_size") == self.block_size
              and doc.size == start.size == length.size and ptr.size >= 1 and ptr[0] == 0 and ptr[-1] == doc.size
              and not (np.diff(ptr) < 0).any())
        if ok and doc.size:
            ok = (doc.min() >= 0 and doc.max() < lengths.size and start.min() >= 0 and length.min() >= 1
                  and not (start + length > lengths[doc]).any()
                  and not (np.bincount(np.repeat(np.arange(ptr.size - 1), np.diff(ptr)), weights=length,
                                       minlength=ptr.size - 1) > self.block_size).any())
        if not ok:
            raise FormatError("it does not match this source's lengths and options")
        # checked above: copied out of the memory maps and sealed, so the plan is not checked again
        return PackPlan(self.block_size, meta["method"], *(seal(a) for a in (doc, start, length, ptr)), lengths,
                        meta["long_docs"], stream=bool(meta["stream"]), **{k: int(meta[k]) for k in _PLAN_COUNTS})

    def _part_samples(self, part: int, epoch: int) -> int:
        key = (part, epoch)
        if key not in self._part_counts:
            if self.windows is None or getattr(self.windows, "jitter", None) is None:
                self._part_counts[key] = self.stream(part, 0).num_samples
            else:
                self._part_counts[key] = self.stream(part, epoch).num_samples
        return self._part_counts[key]

    # ---- sizes -----------------------------------------------------------------------------------
    def num_samples(self, epoch: int) -> int:
        """Samples in the global sequence of ``epoch`` (before drop_last)."""
        if self.mixture is None:
            return self._part_samples(0, epoch)
        return self._mixture()[0]

    def num_batches(self, epoch: int) -> int:
        """Batches of ``epoch`` for every rank (= global batches)."""
        epoch = self.check_epoch(epoch)
        n, G = self.num_samples(epoch), self.global_batch_size
        nb = n // G if self.drop_last else -(-n // G)
        if n == 0:  # (no batch size helps: "lower batch_size" had been the advice)
            raise ConfigError(f"epoch {epoch} has no samples under this plan: " + (
                f"every document is shorter than the window ({getattr(self.windows, 'window_size', '?')} tokens) "
                "and short='drop' leaves them out; use a smaller window or short='keep'"
                if getattr(self.windows, "short", None) == "drop" else "add data or change the plan's options"))
        if nb == 0:
            from .._words import counted

            raise ConfigError(f"the global batch (batch_size={self.batch_size} x world_size={self.world_size} = "
                              f"{G:,d} samples) is larger than epoch {epoch}, which has {counted(n, 'sample')}, and "
                              "drop_last=True would give no batch; lower batch_size, use a smaller block_size or "
                              "window, add data, or pass drop_last=False (one batch, completed with empty rows; CLI: --batch-size, "
                              "--block-size, --window, --keep-last)")
        return nb

    def dropped_samples(self, epoch: int) -> int:
        """Samples of ``epoch`` that ``drop_last`` leaves out (0 without drop_last or for mixtures)."""
        if not self.drop_last or self.mixture is not None:
            return 0
        return self.num_samples(epoch) % self.global_batch_size

    def epoch_counts(self, epoch: int) -> dict:
        """What epoch ``epoch`` yields, from the plans alone (no token is read): ``rows`` (every batch row, the
        empty samples that complete a last batch under ``drop_last=False`` included), ``samples`` (those
        holding tokens), ``tokens``, effective ``targets`` (a segment's first label is not one; in stream
        layout only a block's first), and per part the ``part_samples`` and ``part_tokens`` drawn (a
        mixture's parts as the epoch draws them: upsampled ones more than once)."""
        epoch = self.check_epoch(epoch)
        rows = self.num_batches(epoch) * self.global_batch_size
        drawn = ([min(rows, self.num_samples(epoch))] if self.mixture is None
                 else self._mixture()[3][-1].tolist())  # samples of each part in a mixture epoch
        part_samples, part_tokens, targets = [], [], 0
        for i, n in enumerate(drawn):
            if self.mixture is None:
                p_ep, idx = np.full(n, epoch, np.int64), np.arange(n, dtype=np.int64)
            else:
                p_ep, idx = self._part_position(i, epoch * n + np.arange(n, dtype=np.int64))
            tokens = 0
            for e in np.unique(p_ep).tolist():
                s = self.stream(i, int(e))
                blocks = s.order[idx[p_ep == e]]
                held = s.plan.block_tokens[blocks]
                segments = np.diff(s.plan.block_ptr)[blocks]
                tokens += int(held.sum())
                if loss_mask_of(s.source) is None:
                    targets += int((held - (np.minimum(segments, 1) if s.plan.stream else segments)).sum())
                else:  # the flagged tokens of the blocks' segments, a segment's (a stream block's) first left out
                    targets += self._flagged(s, i, blocks)
            part_samples.append(int(n))
            part_tokens.append(tokens)
        return {"rows": rows, "samples": sum(part_samples), "tokens": sum(part_tokens), "targets": targets,
                "part_samples": part_samples, "part_tokens": part_tokens}

    def _flagged(self, s: _Stream, part: int, blocks: np.ndarray) -> int:
        """The targets of ``blocks`` of stream ``s`` (of part ``part``) over a masked source: its tokens flagged 1,
        but for the first token of every segment (of every block, in stream layout), which no label scores."""
        ptr, plan = s.plan.block_ptr, s.plan
        counts = ptr[blocks + 1] - ptr[blocks]
        seg = np.repeat(ptr[blocks], counts) + ranks_in_groups(counts)  # the blocks' segments, in block order
        o_doc, o_start, masked = self._origins(s, part, plan.doc[seg], plan.start[seg])
        first = np.ones(seg.size, bool) if not plan.stream else np.isin(seg, ptr[blocks])
        begin = o_start + first
        return masked.flagged(o_doc, begin, o_start + plan.length[seg])

    # ---- mixtures --------------------------------------------------------------------------------
    def _mixture(self):
        """(samples per epoch, sample fractions, per-batch counts (nb, k), cumulative counts (nb+1, k))."""
        if self._mix is None:
            k = len(self.parts)
            firsts = [self.stream(i, 0) for i in range(k)]
            S = sum(s.num_samples for s in firsts)
            per_sample = np.array([s.tokens / max(s.num_samples, 1) for s in firsts])
            for i, s in enumerate(firsts):
                if s.num_samples == 0:
                    raise ConfigError(f"mixture part {i} ({self.mixture.names[i]!r}) has no samples under "
                                      "this plan (its documents are all shorter than the windows kept?)")
            q = self.mixture.weights / per_sample
            q = q / q.sum()
            G = self.global_batch_size
            nb = S // G if self.drop_last else -(-S // G)
            counts = allocate_counts(q, G, max(nb, 0))
            cum = np.zeros((counts.shape[0] + 1, k), np.int64)
            np.cumsum(counts, axis=0, out=cum[1:])
            self._mix = (S, q, counts, cum)
        return self._mix

    def _part_position(self, part: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stream index ``k`` of a part (samples drawn from it since the run began) -> (part epoch, index)."""
        k = np.asarray(k, np.int64)
        p_ep = np.zeros(k.shape, np.int64)
        idx = k.copy()
        if self.windows is None or getattr(self.windows, "jitter", None) is None:
            n = self._part_samples(part, 0)
            return idx // n, idx % n
        # part epochs of different sizes (window jitter): where each starts, kept as it grows and searched (a
        # walk from part epoch 0 on every call had made a small, upsampled part's batches slower every epoch:
        # 2 ms a batch at epoch 0, 174 ms at epoch 6)
        if k.size == 0:
            return p_ep, idx
        starts, arr = self._part_starts.get(part, ([0], None))
        hi = int(k.max())
        if arr is None or starts[-1] <= hi:
            while starts[-1] <= hi:
                starts.append(starts[-1] + self._part_samples(part, len(starts) - 1))
            arr = np.asarray(starts, np.int64)
            self._part_starts[part] = (starts, arr)
        p_ep = np.searchsorted(arr, k, side="right") - 1  # (a part epoch of 0 samples is stepped over)
        return p_ep, k - arr[p_ep]

    # ---- the sequence ----------------------------------------------------------------------------
    def global_samples(self, epoch: int, g: int):
        """``(part, part_epoch, block)`` int64 arrays of the ``G`` samples of global batch ``g``;
        ``block == -1`` is an empty sample (padding only)."""
        nb = self.num_batches(epoch)
        if not _is_int(g) or not 0 <= g < nb:
            raise ConfigError(f"batch {g!r} is outside 0 .. {nb - 1} of epoch {epoch}")
        G = self.global_batch_size
        if self.mixture is None:
            s = self.stream(0, epoch)
            t = g * G + np.arange(G, dtype=np.int64)
            block = np.where(t < s.num_samples, s.order[np.minimum(t, max(s.num_samples - 1, 0))], -1)
            return np.zeros(G, np.int64), np.full(G, epoch, np.int64), block
        _, _, counts, cum = self._mixture()
        n = counts[g]
        part = np.repeat(np.arange(n.size, dtype=np.int64), n)
        local = ranks_in_groups(n)  # j-th sample of its part
        key = (local + 0.5) / n[part]  # spread every part evenly over each rank's rows
        order = np.lexsort((part, key, self._deal(part, cum[g])))  # rank by rank, then the spread
        part, local = part[order], local[order]
        per_epoch = cum[-1]
        kk = epoch * per_epoch[part] + cum[g][part] + local  # samples drawn from the part before this one
        p_ep = np.empty(G, np.int64)
        block = np.empty(G, np.int64)
        for i in np.unique(part).tolist():
            m = part == i
            pe, idx = self._part_position(i, kk[m])
            p_ep[m] = pe
            block[m] = [int(self.stream(i, int(e)).order[j]) for e, j in zip(pe.tolist(), idx.tolist())]
        return part, p_ep, block

    def _deal(self, part: np.ndarray, before: np.ndarray) -> np.ndarray:
        """The rank that takes each sample of a global batch (``part``: each sample's part;
        ``before``: samples drawn from each part in earlier batches of the epoch).

        Each part's samples are dealt to the ranks round-robin, its deal continuing from batch to
        batch where its running count left it, so every rank draws every part at its share over an
        epoch (within one sample of ``part total / world_size`` for the first part dealt, the
        smallest; with two parts both are that exact). Ranks hold ``batch_size`` samples each: a
        part dealt later skips the ranks already full. With one rank this is all zeros.
        """
        W, B = self.world_size, self.batch_size
        rank = np.zeros(part.size, np.int64)
        if W == 1:
            return rank
        fill = [0] * W
        share = self._mixture()[1]
        for i in sorted(range(before.size), key=lambda i: (share[i], i)):  # the smallest share first
            r = int(before[i]) % W
            for j in np.flatnonzero(part == i).tolist():
                while fill[r] >= B:
                    r = (r + 1) % W
                rank[j] = r
                fill[r] += 1
                r = (r + 1) % W
        return rank

    def rank_samples(self, epoch: int, g: int, rank: int | None = None):
        """This rank's slice (``batch_size`` samples) of global batch ``g``."""
        r = self.rank if rank is None else rank
        lo = r * self.batch_size
        return tuple(a[lo : lo + self.batch_size] for a in self.global_samples(epoch, g))

    # ---- materialization -------------------------------------------------------------------------
    def batch(self, epoch: int, g: int) -> Batch:
        """This rank's rows of global batch ``g`` of ``epoch``; ``doc_ids`` in the source's numbering
        (for a mixture: the concatenated numbering, part ``i`` from ``mixture.doc_base[i]``). Memory
        that cannot be allocated for its rows is a ConfigError naming ``batch_size`` and the row
        length, with the bytes they need."""
        part, p_ep, block = self.rank_samples(epoch, g)
        try:
            return self._batch(part, p_ep, block)
        except MemoryError:
            T = self.stream(int(part[0]), int(p_ep[0])).plan.block_size
            need = self.batch_size * int(T) * BYTES_PER_POSITION
            what = "block_size" if self.block_size is not None else "the windows' capacity"
            raise ConfigError(f"out of memory for a batch of batch_size={self.batch_size:,d} rows x {what}={T:,d} "
                              f"positions: it needs about {_size(need)}; lower batch_size or {what}") from None

    def _batch(self, part: np.ndarray, p_ep: np.ndarray, block: np.ndarray) -> Batch:
        groups: dict[tuple[int, int], list[int]] = {}
        for row, (i, e) in enumerate(zip(part.tolist(), p_ep.tolist())):
            groups.setdefault((i, e), []).append(row)
        if len(groups) == 1:
            (i, e), = groups
            out = self._build((i, e), block)
            return _shift_docs(out, int(self.doc_base[i])) if self.doc_base[i] else out
        pieces = []
        for (i, e), rows in groups.items():
            b = self._build((i, e), block[rows])
            pieces.append((rows, _shift_docs(b, int(self.doc_base[i])) if self.doc_base[i] else b))
        return _merge_rows(pieces, len(block))

    def _build(self, key: tuple[int, int], blocks: np.ndarray) -> Batch:
        s = self.stream(*key)
        fill = self._fills.get(key)
        if fill is None:
            fill = self._fills[key] = segment_filler_of(s.source, s.plan.doc_lengths)
        plan = s.plan
        blocks = np.asarray(blocks, np.int64)
        real = blocks >= 0
        safe = np.where(real, blocks, 0)
        counts = np.where(real, plan.block_ptr[safe + 1] - plan.block_ptr[safe], 0)
        first = np.where(real, plan.block_ptr[safe], 0)
        seg = np.repeat(first - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        rows = np.repeat(np.arange(blocks.size, dtype=np.int64), counts)
        doc, start, length = plan.doc[seg], plan.start[seg], plan.length[seg]
        o_doc, o_start, masked = self._origins(s, key[0], doc, start)
        return with_loss_mask(assemble_segments(
            fill(doc, start, length), rows, o_doc, o_start, length, num_rows=blocks.size, row_length=plan.block_size,
            pad_id=self.pad_id, stream=plan.stream, fragment_positions=self.fragment_positions,
            buffers=self._buffers), masked)

    def _origins(self, s: _Stream, part: int, doc: np.ndarray, start: np.ndarray):
        """``(doc, start, flags)``: where segments ``(doc, start)`` of stream ``s`` (of part ``part``) come from, as a
        batch names them, and the loss-mask flags in that same numbering (None: no mask). A window names its part's
        document; a part that is a slice (a :class:`SliceSource`) names its base's documents, as packing's batches
        do, unless it is a mixture's part: a mixture numbers its parts' items (``Mixture.part_of``,
        ``Mixture.get``; a slice part's rows had named its base's documents, shifted as items: other parts'
        numbers). The flags had been the deepest masked source's, in its numbering, also where the segments named
        a slice's items (windows over a slice of a masked source)."""
        o_doc, o_start, numbered = doc, start, self.parts[part]
        if s.source is not numbered:  # (the part's windows)
            o_doc, o_start = segment_origins(s.source, doc, start)
        if self.mixture is None and getattr(numbered, "origin_doc", None) is not None:
            o_doc, o_start = segment_origins(numbered, o_doc, o_start)
            numbered = numbered.base
        key = id(numbered)  # (a part, or a part's base: held as long as the schedule)
        if key not in self._item_masks:
            self._item_masks[key] = item_loss_mask(numbered)
        return o_doc, o_start, self._item_masks[key]

    def __getstate__(self):  # for DataLoader workers started by spawn/forkserver: fillers are closures
        state = dict(self.__dict__)
        state["_fills"] = {}
        state["_item_masks"] = {}
        state["_buffers"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._buffers = Buffers()

    # ---- state -----------------------------------------------------------------------------------
    def state_dict(self, epoch: int, batches_consumed: int) -> dict:
        """A plain dict of ints and strings: where the run is, and what defines its sequence."""
        state = {"format": STATE_FORMAT, "version": STATE_VERSION, "epoch": int(epoch),
                 "batches_consumed": int(batches_consumed),
                 "samples_consumed": int(batches_consumed) * self.global_batch_size,
                 "global_batch_size": self.global_batch_size, "world_size": self.world_size,
                 "batch_size": self.batch_size, "rank": self.rank, "seed": self.seed,
                 "data": self.data_fingerprint, "plan": json.dumps(self.plan_options(), sort_keys=True)}
        state["checksum"] = _checksum(state)
        return state

    def check_state(self, state) -> tuple[int, int]:
        """Validate a state from :meth:`state_dict` against this schedule; return (epoch, consumed)."""
        if not isinstance(state, dict):
            raise FormatError(f"a loader state must be a dict (from state_dict()), got {type(state).__name__}")
        # numpy integers and 0-d integer tensors (a state kept in an array- or tensor-typed checkpoint format)
        # are the ints they hold
        state = {k: _plain_int(v) for k, v in state.items()}
        if state.get("format") != STATE_FORMAT:
            raise FormatError(f"this is not a TrainingLoader state (format={state.get('format')!r}); pass "
                              "the dict that TrainingLoader.state_dict() returned")
        if state.get("version") != STATE_VERSION:
            raise FormatError(f"the loader state has version {state.get('version')!r}; this tokenmill reads "
                              f"version {STATE_VERSION}: resume with the tokenmill release that wrote it")
        if "worker_next" in state:  # (the state's schema had called it edited or corrupted)
            raise ConfigError("this is the state of a loader's as_dataset() (one StatefulDataLoader worker's), not "
                              "of a TrainingLoader: load it with the StatefulDataLoader that saved it "
                              "(dl.load_state_dict(dl_state)), or save the TrainingLoader's own state_dict()")
        missing = [k for k in _STATE_KEYS if k not in state]
        if missing:
            raise FormatError(f"the loader state is truncated: missing {', '.join(missing)}; save it again "
                              "with state_dict() (store the whole dict)")
        check(state, LoaderState, what="the loader state", hint="the state was edited or corrupted")
        if state["rank"] >= state["world_size"] or state["world_size"] * state["batch_size"] != state["global_batch_size"]:
            raise FormatError(f"the loader state's rank {state['rank']:,d}, world_size {state['world_size']:,d} and "
                              f"batch_size {state['batch_size']:,d} do not make its global batch of "
                              f"{state['global_batch_size']:,d} (a rank below world_size, world_size x batch_size): "
                              "it was edited or corrupted; load an unmodified state_dict()")
        if _checksum(state) != state["checksum"]:
            raise FormatError("the loader state's checksum does not match its fields: it was edited or "
                              "corrupted; load an unmodified state_dict()")
        if state["data"] != self.data_fingerprint:
            raise ConfigError(f"the state was saved for other data: data fingerprint {state['data']} in the "
                              f"state, {self.data_fingerprint} here; load it with the same store, split or "
                              "mixture (a moved folder is fine: the fingerprint is of the content; a store built "
                              "again into other shards, another --shard-mb, is other data)" + (
                                  ". A mixture's fingerprint covers its parts' data and its weights, names and "
                                  "seed: with another weight it is another mixture, whose sample sequence starts "
                                  "anew (restore the weights to resume, or start it from its beginning)"
                                  if self.mixture is not None else ""))
        try:
            saved = parse_json(state["plan"].encode(), what="the loader state's 'plan'")
        except FormatError:  # (parse_json's advice is a file's: "write it again")
            raise FormatError("the loader state's 'plan' is not valid JSON: the state was edited or corrupted; "
                              "load an unmodified state_dict()") from None
        mine = self.plan_options()
        if not isinstance(saved, dict):
            raise FormatError("the loader state's 'plan' is not an object: the state was edited or corrupted")
        diff = []
        for k in sorted(set(saved) | set(mine)):
            a, b = saved.get(k), mine.get(k)
            if a == b:
                continue
            if isinstance(a, dict) and isinstance(b, dict):  # (the windows' options: the fields that differ, not
                # both whole 12-key dicts; the windows' seed draws their jitter alone: without jitter it changes
                # nothing, and a state is not refused for it)
                unread = {"seed"} if k == "windows" and a.get("jitter") is None and b.get("jitter") is None else set()
                diff += [f"{k}.{f}: {a.get(f)!r} in the state, {b.get(f)!r} here"
                         for f in sorted((set(a) | set(b)) - unread) if a.get(f) != b.get(f)]
            else:
                diff.append(f"{k}: {a!r} in the state, {b!r} here")
        if diff:
            raise ConfigError("the state was saved with other plan options, so the sample sequence would "
                              "differ: " + "; ".join(diff) + ". Pass the same options to resume")
        if state["seed"] != self.seed:
            raise ConfigError(f"the state was saved with seed={state['seed']}, this loader has "
                              f"seed={self.seed}; pass seed={state['seed']} to resume")
        G0, G = state["global_batch_size"], self.global_batch_size
        if G0 != G:
            hint = (f"batch_size={G0 // self.world_size}" if G0 % self.world_size == 0 else
                    f"a world size that divides {G0:,d}")
            raise ConfigError(
                f"the state was saved with a global batch of {G0:,d} samples (world_size {state['world_size']} "
                f"x batch_size {state['batch_size']}); this loader has {G:,d} (world_size {self.world_size} x "
                f"batch_size {self.batch_size}). Elastic resume needs world_size x batch_size to stay "
                f"{G0:,d}: use {hint} (keep the step size with gradient accumulation), or start the next "
                f"epoch fresh with set_epoch({state['epoch'] + 1}) instead of loading this state")
        epoch, consumed = state["epoch"], state["batches_consumed"]
        if epoch < 0 or consumed < 0 or state["samples_consumed"] != consumed * G0:
            raise FormatError("the loader state has inconsistent positions: it was edited or corrupted")
        nb = self.num_batches(epoch)
        if consumed > nb:
            raise ConfigError(f"the state says {consumed:,d} batches of epoch {epoch} were consumed, but the "
                              f"epoch has {nb:,d}: the data or options differ from the saved run")
        return epoch, consumed


def _plain_int(v):
    """``v``, or the int a numpy integer or a 0-d integer tensor holds (torch is not imported here)."""
    if isinstance(v, np.integer):
        return int(v)
    if type(v).__module__.split(".")[0] == "torch" and getattr(v, "ndim", None) == 0:
        dtype = str(getattr(v, "dtype", ""))
        if dtype.startswith(("torch.int", "torch.uint")):
            return int(v.item())
    return v


def _checksum(state: dict) -> str:
    return checksum_of({k: v for k, v in state.items() if k != "checksum"})


def checksum_of(body: dict) -> str:
    """The checksum of a loader state's fields (ints and strings): what tells an edited state."""
    blob = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:32]


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit} ({nbytes:,d} bytes)"
    return f"{nbytes:,d} bytes"


def _shift_docs(b: Batch, base: int) -> Batch:
    doc_ids = np.where(b.doc_ids >= 0, b.doc_ids + base, b.doc_ids)
    return Batch(b.input_ids, b.labels, b.position_ids, b.attention_mask, doc_ids, b.token_offsets,
                 b.cu_seqlens, b.max_seqlen, b.truncated_tokens)


def _merge_rows(pieces, num_rows: int) -> Batch:
    """Rows of several batches (``[(row positions, batch), ...]``) as one batch in row order."""
    T = pieces[0][1].shape[1]
    arrays = {k: np.empty((num_rows, T), np.int64) for k in ("input_ids", "labels", "position_ids", "doc_ids",
                                                             "token_offsets")}
    row_cu: list = [None] * num_rows
    longest = 0
    for rows, b in pieces:
        for k, a in arrays.items():
            a[rows] = getattr(b, k)
        for j, r in enumerate(rows):
            row_cu[r] = b.block(j).cu_seqlens.astype(np.int64)
        longest = max(longest, b.max_seqlen)
    cu = np.concatenate([[0]] + [c[1:] + r * T for r, c in enumerate(row_cu)]).astype(np.int32)
    return Batch(arrays["input_ids"], arrays["labels"], arrays["position_ids"], arrays["doc_ids"] >= 0,
                 arrays["doc_ids"], arrays["token_offsets"], cu, int(longest))
