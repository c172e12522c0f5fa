"""``TrainingLoader``: deterministic, exactly and elastically resumable batches for a training loop.

::

    loader = TrainingLoader(store, batch_size=8, block_size=2048, seed=0,
                            rank=rank, world_size=world, num_workers=2)
    loader.load_state_dict(ckpt["data"])          # optional: resume
    for batch in loader:                          # dicts of tensors (see to_tensors) + num_targets
        ...
        ckpt = {"model": ..., "data": loader.state_dict()}    # ints and strings

Every batch is a pure function of ``(data, plan options, seed, epoch, global batch g, rank)``
(:class:`tokenmill.batching.schedule.BatchSchedule`). The loader is an ``IterableDataset`` over this
rank's batches of the current epoch, with the pass semantics of torchdata's ``StatefulDataLoader``
(each ``iter()`` starts the epoch, except right after ``load_state_dict``; see the class docstring),
so ``DataLoader(loader, batch_size=None)`` gives the same batches; with ``num_workers > 0`` a torch
``DataLoader`` only parallelizes building them (worker ``w`` builds batches ``w, w + k, ...`` of the
remaining range, the DataLoader returns them in order), and the loader counts the batches it hands
out in the main process, so ``state_dict()`` is exact whatever was prefetched.
"""

from __future__ import annotations

import numpy as np

from .._validate import check_bool, check_float, check_int
from ..batching.schedule import BatchSchedule, checksum_of
from ..conventions import count_targets
from ..errors import ConfigError, TokenmillError, interruptible, require

torch = require("torch", "torch")


def batch_tensors(batch) -> dict:
    """A :class:`~tokenmill.batching.Batch` as the loader's dict: ``input_ids``, ``labels``,
    ``position_ids``, ``doc_ids``, ``token_offsets`` (int64 ``(B, T)``), ``attention_mask`` (bool
    non-pad), ``cu_seqlens`` (int32, over the flattened ``B*T`` positions), ``max_seqlen`` (int) and
    ``num_targets`` (0-d int64 tensor: this batch's effective targets)."""
    out = {name: torch.from_numpy(getattr(batch, name))
           for name in ("input_ids", "labels", "position_ids", "doc_ids", "token_offsets", "attention_mask",
                        "cu_seqlens")}
    out["max_seqlen"] = int(batch.max_seqlen)
    out["num_targets"] = torch.tensor(int(count_targets(batch.labels)), dtype=torch.int64)
    return out


class _RangeBatches(torch.utils.data.IterableDataset):
    """Batches ``start .. stop-1`` of one epoch; DataLoader worker ``w`` of ``k`` builds ``start + w``,
    ``start + w + k``, ... and the DataLoader interleaves them back in order. With a :class:`_Ring`,
    a worker writes each batch into shared memory and sends only where it is."""

    def __init__(self, schedule: BatchSchedule, epoch: int, start: int, stop: int, ring: "_Ring | None" = None):
        super().__init__()
        self.schedule, self.epoch, self.start, self.stop, self.ring = schedule, epoch, start, stop, ring

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        ring = self.ring if info is not None else None
        last = [-1] * (ring.slots if ring is not None else 0)  # the batch each of this worker's slots holds
        j = 0
        for g in range(self.start + w, self.stop, k):
            batch = self.schedule.batch(self.epoch, g)
            if ring is None or not ring.fits(batch):
                yield g, _to_wire(batch)
                continue
            slot = j % ring.slots
            ring.wait_free(w, slot, last[slot])
            yield g, ring.write(w, slot, g, batch)
            last[slot] = g
            j += 1


class _Ring:
    """Shared memory the DataLoader workers of one pass write their batches into.

    Sent as tensors, every batch costs a new shared-memory segment, its page faults on both sides
    and a file descriptor passed over a socket: ~2.8 ms per 8 x 2048 batch on the benchmark machine,
    six times the cost of building it. Here each worker ``w`` has ``slots`` slots allocated once
    before the workers start; it writes batch ``g`` into its next slot, stamps it ``g`` and sends
    ``(w, slot, ...)``; the main process checks the stamp, copies the batch out (so the caller may
    keep it) and marks the slot free. A worker reuses a slot only once the main process has freed
    it (the DataLoader's bounded prefetch keeps it from ever waiting long).
    """

    def __init__(self, workers: int, slots: int, rows: int, row_length: int):
        n = rows * row_length
        self.rows, self.row_length, self.slots = rows, row_length, slots
        self.data = torch.empty((workers, slots, len(_WIRE) * n), dtype=torch.int64).share_memory_()
        self.cu = torch.empty((workers, slots, n + 1), dtype=torch.int32).share_memory_()
        self.stamp = torch.full((workers, slots), -1, dtype=torch.int64).share_memory_()
        self.freed = torch.full((workers, slots), -1, dtype=torch.int64).share_memory_()

    @staticmethod
    def nbytes(workers: int, slots: int, rows: int, row_length: int) -> int:
        n = rows * row_length
        return workers * slots * (8 * len(_WIRE) * n + 4 * (n + 1) + 16)

    def fits(self, batch) -> bool:
        return tuple(batch.input_ids.shape) == (self.rows, self.row_length)

    def wait_free(self, w: int, slot: int, previous: int, limit_s: float = 600.0) -> None:
        """Block until the main process has taken batch ``previous`` out of the slot (-1: never used)."""
        import time

        if previous < 0:
            return
        freed = self.freed[w].numpy()
        t0 = time.monotonic()
        while freed[slot] != previous:
            if time.monotonic() - t0 > limit_s:
                raise RuntimeError(f"DataLoader worker {w}: the main process has not taken batch {previous} out of "
                                   f"its shared-memory slot for {limit_s:.0f} s")
            time.sleep(0.0002)

    def write(self, w: int, slot: int, g: int, batch) -> tuple:
        data = self.data[w, slot].numpy().reshape(len(_WIRE), self.rows, self.row_length)
        for i, name in enumerate(_WIRE):
            data[i] = getattr(batch, name)
        cu = batch.cu_seqlens
        self.cu[w, slot].numpy()[: cu.size] = cu
        self.stamp[w, slot] = g  # after the data: the message below is sent after this store
        targets = int(count_targets(batch.labels))
        return "ring", w, slot, int(cu.size), int(batch.max_seqlen), targets

    def read(self, g: int, message: tuple) -> tuple:
        """The batch a worker announced, copied out of its slot, as the wire tuple; the slot is freed."""
        _, w, slot, ncu, max_seqlen, targets = message
        if int(self.stamp[w, slot]) != g:
            raise RuntimeError(f"shared-memory slot {slot} of DataLoader worker {w} holds batch "
                               f"{int(self.stamp[w, slot])}, not batch {g}: it was overwritten")
        stacked = self.data[w, slot].clone().view(len(_WIRE), self.rows, self.row_length)
        cu = self.cu[w, slot, :ncu].clone()
        if int(self.stamp[w, slot]) != g:  # written again while being copied
            raise RuntimeError(f"shared-memory slot {slot} of DataLoader worker {w} was overwritten while batch "
                               f"{g} was copied out of it")
        self.freed[w, slot] = g
        return stacked, cu, max_seqlen, targets


_WIRE = ("input_ids", "labels", "position_ids", "doc_ids", "token_offsets")

_IN_A_WORKER = ("a TrainingLoader is being iterated inside a DataLoader worker: a DataLoader with num_workers > 0 "
                "around it gives every worker a copy that yields the whole epoch (each batch once per worker) and "
                "that the loader's state_dict() never sees. Wrap it with num_workers=0 "
                "(DataLoader(loader, batch_size=None)) and pass num_workers=k to TrainingLoader itself, or use "
                "StatefulDataLoader(loader.as_dataset(), batch_size=None, num_workers=k)")


def _to_wire(batch):
    """A batch as few tensors as possible: each tensor costs a shared-memory segment between processes."""
    stacked = torch.from_numpy(np.stack([getattr(batch, name) for name in _WIRE]))  # (5, B, T)
    targets = int(count_targets(batch.labels))
    return stacked, torch.from_numpy(batch.cu_seqlens), int(batch.max_seqlen), targets


def _from_wire(wire) -> dict:
    stacked, cu, max_seqlen, targets = wire
    out = {name: stacked[i] for i, name in enumerate(_WIRE)}
    out["attention_mask"] = out["doc_ids"] >= 0
    out["cu_seqlens"], out["max_seqlen"] = cu, max_seqlen
    out["num_targets"] = torch.tensor(targets, dtype=torch.int64)
    return {k: out[k] for k in ("input_ids", "labels", "position_ids", "doc_ids", "token_offsets", "attention_mask",
                                "cu_seqlens", "max_seqlen", "num_targets")}


class TrainingLoader(torch.utils.data.IterableDataset):
    """This rank's batches, epoch after epoch, resumable exactly (see the module docstring).

    ``source``: a token store, a store view (split), a :class:`tokenmill.Mixture` or any token
    source (a list of id arrays works); a :class:`tokenmill.MaskedSource` (supervised fine-tuning) makes
    the labels of its tokens flagged 0 ``-100``, and ``num_targets`` counts what is left. Samples: with ``block_size`` and no ``windows``, packed blocks
    (:func:`tokenmill.pack` with ``method``, ``long_docs``); with ``windows=SlidingWindows(...)``,
    windows (jitter per epoch), one per row padded to the window size, or packed into blocks of
    ``block_size`` when it is given.

    Order: a global sequence of samples per epoch from ``(seed, epoch)`` (reshuffled every epoch
    unless ``shuffle=False``); rank ``r`` of ``world_size`` takes slots ``r*batch_size ..`` of every
    global batch of ``batch_size * world_size`` samples. The samples a rank sees do not depend on
    ``num_workers``. ``drop_last=True`` (default) leaves out the last ``num_samples % global batch``
    samples of each epoch (a different set every epoch when shuffled; counted by
    :meth:`dropped_samples`); ``drop_last=False`` completes the last global batch with empty rows
    (all padding, ``num_targets`` 0), so every rank gets the same number of full-shape batches and
    nothing is dropped. ``len(loader)`` is the number of batches of the current epoch.

    Passes, as with torchdata's ``StatefulDataLoader``: each ``iter(loader)`` is a new pass over
    the current epoch from its first batch, except the first ``iter()`` after :meth:`load_state_dict`,
    which continues at the loaded position. A pass that runs to its end moves the loader to the next
    epoch (so does a new ``iter()`` after a pass that handed out the epoch's last batch), so
    ``for epoch in range(n): for batch in loader`` sees ``n`` epochs, each reshuffled; a pass left
    early is not continued by the next ``iter()``. ``set_epoch(e)`` selects epoch ``e`` from its
    start (a no-op when ``e`` is the current epoch, so a resumed run that calls ``set_epoch`` at the
    top of its epoch loop keeps the loaded position). A new pass, ``set_epoch`` of another epoch and
    ``load_state_dict`` take over the loader's one position: an older iterator raises a
    TokenmillError when used again. ``state_dict()`` is the position of the latest pass (the batches
    it handed out; a DataLoader in between does not read ahead with ``num_workers=0``), and
    ``len(loader)`` the number of batches of the current epoch, what a fresh pass yields.

    ``torch.utils.data.DataLoader(loader, batch_size=None)`` and torchdata's
    ``StatefulDataLoader(loader, batch_size=None)`` iterate the loader in the training process and
    give exactly its batches, in order, with the same state semantics (the StatefulDataLoader's
    ``state_dict()`` holds the loader's). Their own ``num_workers`` must stay 0 (a worker copy of the
    loader raises a ConfigError): pass ``num_workers`` to the loader, or use :meth:`as_dataset`.

    Epochs run from 0 to
    ``loader.schedule.max_epoch`` (``epoch x samples per epoch`` stays below ``2**62``, so the int64
    sample arithmetic cannot wrap); a later one, from ``set_epoch`` or a loaded state, is a
    ConfigError.

    Arguments are checked, never coerced: ``shuffle``, ``drop_last`` and ``pin_memory`` must be real
    bools (``"no"`` is refused, not True), in-memory documents must hold ids ``>= 0`` (an
    InputError names the document), and ``block_size`` may exceed all the tokens of the source only
    while a batch of such rows takes at most 64 MiB (49 bytes per position; a longer row could only
    hold padding): beyond, a ConfigError says the largest useful ``block_size``. A batch whose
    memory cannot be allocated is a ConfigError naming ``batch_size``, ``block_size`` and the bytes.

    ``plan_cache``: a folder where packing plans (``block_size`` without windows) are kept, keyed by
    the data fingerprint and the plan options, so a restarted run loads its plan instead of
    recomputing it (best-fit packing of 10 M documents takes seconds; loading takes milliseconds). A
    loaded plan is checked against the sha256 of its arrays and the data's lengths: a damaged one is
    said (a warning naming it), planned again and written anew; an entry that cannot be written (its name taken by
    a file or a FIFO, a full disk) is said, and the run goes on with the plan it made.

    ``pin_memory``, ``prefetch_factor``, ``multiprocessing_context`` and ``timeout`` go to the
    DataLoader used when ``num_workers > 0`` (a new one per pass over an epoch; with 0 workers
    ``pin_memory`` pins in the main process when CUDA is available); the batches are plain
    CPU tensors, ready for ``pin_memory`` and ``.to(device, non_blocking=True)``. With a
    ``spawn``/``forkserver`` context the workers receive the plans pickled (the source must pickle).

    >>> docs = [[i + 1] * n for i, n in enumerate([3, 5, 2, 4, 6, 1, 2, 3])]
    >>> loader = TrainingLoader(docs, batch_size=2, block_size=6, seed=0)
    >>> len(loader), [b["input_ids"].shape for b in loader]
    (2, [torch.Size([2, 6]), torch.Size([2, 6])])
    >>> loader.state_dict()["epoch"], loader.state_dict()["batches_consumed"]
    (1, 0)
    """

    def __init__(self, source, *, batch_size: int, block_size: int | None = None, method: str = "best_fit",
                 windows=None, seed: int = 0, rank: int = 0, world_size: int = 1, num_workers: int = 0,
                 shuffle: bool = True, drop_last: bool = True, pad_id: int | None = None,
                 long_docs: str = "split", plan_cache=None, pin_memory: bool = False,
                 prefetch_factor: int | None = None, multiprocessing_context=None, timeout: float = 0):
        self.schedule = BatchSchedule(source, batch_size=batch_size, block_size=block_size, method=method,
                                      windows=windows, seed=seed, rank=rank, world_size=world_size,
                                      shuffle=shuffle, drop_last=drop_last, pad_id=pad_id, long_docs=long_docs,
                                      plan_cache=plan_cache)
        self.num_workers = check_int(num_workers, "num_workers", min=0)
        self._dl_options = dict(pin_memory=check_bool(pin_memory, "pin_memory"),
                                timeout=check_float(timeout, "timeout", min=0),
                                multiprocessing_context=multiprocessing_context)
        prefetch_factor = check_int(prefetch_factor, "prefetch_factor", min=1, none=True)
        if self.num_workers == 0 and (prefetch_factor is not None or multiprocessing_context is not None):
            given = "prefetch_factor" if prefetch_factor is not None else "multiprocessing_context"
            raise ConfigError(f"{given} is for worker processes, and num_workers=0 starts none; pass num_workers > 0, "
                              f"or leave {given} out (torch's DataLoader refuses it so too)")
        if isinstance(multiprocessing_context, str):  # (checked here: torch said so at the first batch)
            import multiprocessing

            if multiprocessing_context not in multiprocessing.get_all_start_methods():
                raise ConfigError(f"multiprocessing_context={multiprocessing_context!r} is not a start method of "
                                  f"this machine ({', '.join(multiprocessing.get_all_start_methods())}); pass one of "
                                  "them, a multiprocessing context, or None")
        if self.num_workers > 0:
            if prefetch_factor is not None:
                self._dl_options["prefetch_factor"] = prefetch_factor
        self.epoch = 0
        self._consumed = 0  # global batches of self.epoch handed out by the latest pass (or loaded)
        self._resume = False  # a state was loaded: the next iter() continues from it
        self._pass = 0  # the latest pass (iterator); older ones refuse to go on

    # ---- shape of the run ------------------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        return self.schedule.batch_size

    @property
    def world_size(self) -> int:
        return self.schedule.world_size

    @property
    def rank(self) -> int:
        return self.schedule.rank

    @property
    def batches_consumed(self) -> int:
        """Batches of the current epoch handed out by the latest pass (after :meth:`load_state_dict`:
        the loaded position, where the next ``iter()`` continues)."""
        return self._consumed

    def __len__(self) -> int:
        return self.schedule.num_batches(self.epoch)

    def num_samples(self, epoch: int | None = None) -> int:
        """Samples in the global sequence of an epoch (all ranks, before ``drop_last``)."""
        return self.schedule.num_samples(self.epoch if epoch is None else epoch)

    def dropped_samples(self, epoch: int | None = None) -> int:
        """Samples that ``drop_last`` leaves out of an epoch."""
        return self.schedule.dropped_samples(self.epoch if epoch is None else epoch)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` (0 .. ``schedule.max_epoch``) from its first batch (no-op if it is
        the current epoch)."""
        epoch = self.schedule.check_epoch(epoch)
        if epoch != self.epoch:
            self.schedule.num_batches(epoch)
            self.epoch, self._consumed, self._resume = epoch, 0, False
            self._pass += 1

    # ---- iteration -------------------------------------------------------------------------------
    @interruptible
    def __iter__(self):
        """A new pass: the current epoch from its first batch, or from the position of a state loaded
        since the last ``iter()``; the next epoch when the last pass handed out every batch of this
        one. The new pass takes over the loader's position (an older iterator raises if used again)."""
        if torch.utils.data.get_worker_info() is not None:
            raise ConfigError(_IN_A_WORKER)
        epoch, start = self.epoch, self._consumed
        if self._resume:
            pass
        elif start > 0 and start >= self.schedule.num_batches(epoch):
            epoch, start = epoch + 1, 0
        else:
            start = 0
        stop = self.schedule.num_batches(epoch)  # refuses an epoch past schedule.max_epoch
        self.epoch, self._consumed, self._resume = epoch, start, False
        self._pass += 1
        return self._batches(self._pass, epoch, start, stop)

    def _current(self, token: int) -> None:
        if token != self._pass:
            raise TokenmillError("this iterator over the TrainingLoader was superseded: a later iter(loader), "
                                 "set_epoch() or load_state_dict() took over the loader's position (a loader has "
                                 "one position, like a DataLoader's current iterator, and state_dict() follows it); "
                                 "iterate the newest iterator")

    @interruptible
    def _batches(self, token: int, epoch: int, start: int, stop: int):
        pin = self._dl_options["pin_memory"] and torch.cuda.is_available()
        if self.num_workers == 0 or stop - start <= 0:
            for g in range(start, stop):
                self._current(token)
                batch = batch_tensors(self.schedule.batch(epoch, g))
                if pin:
                    batch = {k: v.pin_memory() if torch.is_tensor(v) else v for k, v in batch.items()}
                self._consumed = g + 1
                yield batch
        else:
            workers = min(self.num_workers, stop - start)
            ring = self._ring(workers)
            dl = torch.utils.data.DataLoader(_RangeBatches(self.schedule, epoch, start, stop, ring), batch_size=None,
                                             num_workers=workers, **self._dl_options)
            expected = start
            for g, wire in dl:
                self._current(token)
                if g != expected:  # the DataLoader's round robin keeps order; never trust it silently
                    raise RuntimeError(f"DataLoader returned batch {g} where {expected} was due")
                expected += 1
                self._consumed = g + 1
                if isinstance(wire[0], str):  # ("ring", worker, slot, ...): the batch is in shared memory
                    batch = _from_wire(ring.read(g, wire))
                    if pin:
                        batch = {k: v.pin_memory() if torch.is_tensor(v) else v for k, v in batch.items()}
                    yield batch
                else:
                    yield _from_wire(wire)
        self._current(token)
        self.epoch, self._consumed = epoch + 1, 0  # the pass ran to its end: the next one is the next epoch

    def _ring(self, workers: int) -> "_Ring | None":
        """Shared memory for this pass's workers to hand batches over in, or None (batches then travel
        as tensors) where the row length is not known ahead or /dev/shm has too little room."""
        import os

        s = self.schedule
        T = s.block_size if s.block_size is not None else getattr(s.windows, "capacity", None)
        if not isinstance(T, int) or T < 1:
            return None
        slots = self._dl_options.get("prefetch_factor") or 2
        slots = int(slots) + 2  # a worker is at most prefetch_factor batches ahead of the main process
        need = _Ring.nbytes(workers, slots, s.batch_size, T)
        try:
            st = os.statvfs("/dev/shm")
            room = st.f_bavail * st.f_frsize
        except OSError:
            room = None
        if room is not None and need > room // 2:
            return None
        return _Ring(workers, slots, s.batch_size, T)

    # ---- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this run is (epoch, global batches consumed) and what defines its sample sequence
        (data fingerprint, plan options, seed, global batch size): a dict of ints and strings."""
        return self.schedule.state_dict(self.epoch, self._consumed)

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (from :meth:`state_dict`, possibly of another rank or world size
        with the same global batch). Raises a :class:`tokenmill.TokenmillError` that names what
        differs when the state cannot continue this loader's sequence."""
        self.epoch, self._consumed = self.schedule.check_state(state)
        self._resume = True  # the next iter() continues from here
        self._pass += 1

    # ---- torchdata ---------------------------------------------------------------------------------
    def as_dataset(self) -> "LoaderDataset":
        """This loader's batches as a stateful ``IterableDataset`` for
        ``torchdata.stateful_dataloader.StatefulDataLoader(ds, batch_size=None, num_workers=k)``, from where
        this loader is: its epoch and the batches of it consumed (after ``load_state_dict``, the batches the
        saved run had; the dataset had started the epoch over, repeating them)."""
        ds = LoaderDataset(self.schedule, self.epoch, self._consumed)
        # a loaded state not iterated yet: the dataset's first pass goes on from it as the loader's would (at an
        # epoch's end: no batch); it had gone on to the next epoch, so the guide's loop from loader.epoch gave
        # an epoch too many, or one twice
        ds._restored = self._resume
        return ds

    def __repr__(self) -> str:
        s = self.schedule
        what = (f"block_size={s.block_size}, method={s.method!r}" if s.windows is None else
                f"windows={s.windows!r}" + (f", packed into {s.block_size}" if s.block_size else ", padded"))
        return (f"TrainingLoader({what}, batch_size={s.batch_size}, rank {s.rank} of {s.world_size}, "
                f"epoch {self.epoch}, {self._consumed}/{len(self)} batches consumed, workers={self.num_workers})")


class LoaderDataset(torch.utils.data.IterableDataset):
    """A rank's batches of one epoch for torchdata's ``StatefulDataLoader`` (``batch_size=None``).

    Each DataLoader worker ``w`` of ``k`` builds batches ``w, w + k, ...``; its ``state_dict()`` is
    the epoch and the next batch it will build, which ``StatefulDataLoader`` snapshots per worker
    and restores, so a resumed ``StatefulDataLoader`` (same ``num_workers``) continues exactly.
    Call ``set_epoch(e)`` before each epoch, as with a ``DistributedSampler``. The first iteration after
    ``load_state_dict`` goes on exactly where the state was saved, even where that is the epoch's end (it
    then gives no batch): ``StatefulDataLoader`` iterates a restored copy once to fill its prefetch and,
    for a state saved after the epoch's loop had ended, drops what came and starts a new iteration. A new
    iteration of a copy at its epoch's end takes the next epoch (or a later one ``set_epoch`` asked for):
    so persistent workers, whose copies never see the main process's ``set_epoch``, go on in order.
    """

    def __init__(self, schedule: BatchSchedule, epoch: int = 0, start: int = 0):
        super().__init__()
        self.schedule, self.epoch = schedule, schedule.check_epoch(epoch)
        self._start = check_int(start, "start", min=0, max=schedule.num_batches(self.epoch))  # batches consumed
        self._next: int | None = None  # next batch this copy builds (None: its worker's first: start + its id)
        self._workers: int | None = None
        self._restored = False  # load_state_dict ran and no iteration has started since
        self._asked: int | None = None  # the last epoch set_epoch asked for

    def __len__(self) -> int:
        return self.schedule.num_batches(self.epoch) - self._start  # (the batches this epoch still has to give)

    def set_epoch(self, epoch: int) -> None:
        """Take epoch ``epoch`` from its start; the current epoch stays where it is (as ``TrainingLoader.set_epoch``:
        ``for e in range(loader.epoch, n): ds.set_epoch(e)`` after a resume had started it over)."""
        epoch = self.schedule.check_epoch(epoch)
        self.schedule.num_batches(epoch)
        self._asked = epoch
        if epoch != self.epoch:
            self.epoch, self._next, self._start, self._restored = epoch, None, 0, False

    def __iter__(self):
        # (where the iteration starts is settled here, when the iterator is made, not at its first batch: the
        # DataLoader makes one for a restored copy that it may never run)
        info = torch.utils.data.get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        if self._workers is not None and self._workers != k:
            raise ConfigError(f"the dataset state was saved with {self._workers} workers, this DataLoader has "
                              f"{k}; StatefulDataLoader resumes with the same num_workers")
        self._workers = k
        stop = self.schedule.num_batches(self.epoch)
        if self._restored:
            # the state's own position, even at the epoch's end (no batch). StatefulDataLoader fills its prefetch
            # from a restored copy and, for a state saved after the epoch's loop ended, drops those batches and
            # iterates again: a restored copy that had gone on to the next epoch here lost a prefetch's worth
            # of it (num_workers x prefetch_factor batches), one that went on at the next set_epoch repeated or
            # shifted epochs
            self._restored = False
        elif (self._next if self._next is not None else self._start) >= stop:
            # a new iteration of a copy whose epoch has ended: the next epoch, or a later one set_epoch asked for
            # (a persistent worker's copy never sees the main process's set_epoch; StatefulDataLoader with no
            # workers restores a state over it)
            nxt = self.epoch + 1 if self._asked is None else max(self.epoch + 1, self._asked)
            self.epoch, self._next, self._start = self.schedule.check_epoch(nxt), None, 0
            stop = self.schedule.num_batches(self.epoch)
        return self._batches(w, k, stop)

    def _batches(self, w: int, k: int, stop: int):
        # the workers take the batches from the start in turn, as StatefulDataLoader reads them
        g = self._start + w if self._next is None else self._next
        while g < stop:
            batch = batch_tensors(self.schedule.batch(self.epoch, g))
            g += k
            self._next = g
            yield batch
        # (a worker with no batch left in a resumed epoch yields none: its position is past the end all the same,
        # or it stayed at the start and never went on to the next epoch, its batches lost from every later one)
        self._next = g

    def state_dict(self) -> dict:
        st = self.schedule.state_dict(self.epoch, self._start)
        st.update({"worker_next": -1 if self._next is None else int(self._next),
                   "num_workers": -1 if self._workers is None else int(self._workers)})
        st["dataset_checksum"] = checksum_of(st)  # (the worker's fields too: an edited worker_next had been taken)
        return st

    def load_state_dict(self, state: dict) -> None:
        from ..errors import FormatError

        if not isinstance(state, dict) or "worker_next" not in state or "num_workers" not in state:
            raise FormatError("not a LoaderDataset state (no worker_next/num_workers); pass what "
                              "StatefulDataLoader.state_dict() saved")
        if "dataset_checksum" not in state:
            # (it had been a warning, for states saved before the checksum (2026-12-06): deleting the checksum then
            # let an edited worker position through, batches skipped without a word)
            raise FormatError("the dataset state has no dataset_checksum: it was edited, or saved by a tokenmill "
                              "before the checksum covered its workers' positions; load an unmodified "
                              "StatefulDataLoader state saved by this version")
        if checksum_of({k: v for k, v in state.items() if k != "dataset_checksum"}) != state["dataset_checksum"]:
            raise FormatError("the dataset state's checksum does not match its fields: it was edited or "
                              "corrupted; load an unmodified StatefulDataLoader state")
        core = {k: v for k, v in state.items() if k not in ("worker_next", "num_workers", "dataset_checksum")}
        epoch, start = self.schedule.check_state(core)
        stop = self.schedule.num_batches(epoch)
        workers = check_int(state["num_workers"], "the dataset state's num_workers", min=-1, max=1 << 16,
                            error=FormatError)
        # a worker's next batch lies past the start, at most one round of workers past the epoch's end
        nxt = check_int(state["worker_next"], "the dataset state's worker_next", min=-1,
                        max=stop + max(workers, 1), error=FormatError)
        if 0 <= nxt < start:
            raise FormatError(f"the dataset state's worker_next={nxt:,d} lies before its start ({start:,d} batches "
                              "consumed): it was edited or corrupted")
        self.epoch, self._start = epoch, start
        self._next = None if nxt < 0 else nxt
        self._workers = None if workers < 0 else workers
        self._restored = True
