"""TrainingLoader: order, coverage, exact resume (ranks, workers, elastic), state checks, mixtures."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill import ConfigError, FormatError, Mixture, SlidingWindows, TokenmillError
from tokenmill.data.source import ArraySource
from tokenmill.torch import TrainingLoader


def make_docs(n=240, seed=0, lo=1, hi=150, vocab=1000):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, int(k)) for k in rng.integers(lo, hi, n)]


DOCS = make_docs()
FIELDS = ("input_ids", "labels", "position_ids", "doc_ids", "token_offsets", "attention_mask", "cu_seqlens")


def key(batch) -> tuple:
    """A batch as comparable bytes (every field of the conventions)."""
    return tuple(batch[f].numpy().tobytes() for f in FIELDS) + (batch["max_seqlen"], int(batch["num_targets"]))


def rows(batch) -> list[tuple]:
    """Each row as (doc ids bytes, offsets bytes, ids bytes)."""
    return [(batch["doc_ids"][i].numpy().tobytes(), batch["token_offsets"][i].numpy().tobytes(),
             batch["input_ids"][i].numpy().tobytes()) for i in range(batch["input_ids"].shape[0])]


def run(loader, epochs):
    """Every batch of ``epochs`` epochs from the loader's current position, as keys."""
    out = []
    for _ in range(epochs):
        out += [key(b) for b in loader]
    return out


def resumed_run(make, epochs, stops):
    """Like ``run``, but the loader is replaced by a fresh one loaded with ``state_dict()`` after
    every step in ``stops`` (a crash and restart)."""
    n = len(make())  # batches per epoch (constant without window jitter)
    stops = set(stops)
    out, loader = [], make()
    it = iter(loader)
    while len(out) < epochs * n:
        try:
            b = next(it)
        except StopIteration:
            it = iter(loader)  # the next epoch
            continue
        out.append(key(b))
        if len(out) in stops:
            state = copy.deepcopy(loader.state_dict())
            it.close()
            loader = make()
            loader.load_state_dict(state)
            it = iter(loader)
    return out


OPTS = dict(block_size=64, seed=3)
# For the tests that run DataLoader workers over several epochs and save points: 35 batches an epoch (DOCS: 148).
# Each batch's tensors cross from a worker through shared memory, ~1 ms a tensor, most of those tests' time;
# an epoch still holds several times the batches the workers prefetch.
FEW = DOCS[:60]


def test_batches_follow_the_conventions_and_len_is_exact():
    loader = TrainingLoader(DOCS, batch_size=4, **OPTS)
    batches = list(loader)
    assert len(batches) == len(loader) == loader.num_samples(0) // 4
    b = batches[0]
    assert b["input_ids"].shape == (4, 64) and b["input_ids"].dtype == torch.int64
    assert b["cu_seqlens"].dtype == torch.int32 and int(b["cu_seqlens"][-1]) == 4 * 64
    assert (b["labels"][:, 0] == -100).all()
    assert int(b["num_targets"]) == int((b["labels"][:, 1:] != -100).sum())
    assert b["attention_mask"].dtype == torch.bool
    assert isinstance(b["max_seqlen"], int)
    # the tensors are plain CPU tensors that pin_memory accepts (no accelerator needed to check the type)
    assert all(b[f].is_contiguous() for f in FIELDS)


def test_every_token_of_every_sample_exactly_once_per_epoch_over_ranks():
    src = ArraySource(DOCS)
    flat, base = np.concatenate(DOCS), np.concatenate([[0], np.cumsum(src.lengths)])
    for drop_last in (False, True):
        loaders = [TrainingLoader(src, batch_size=3, world_size=2, rank=r, drop_last=drop_last, **OPTS)
                   for r in range(2)]
        pairs, ids, samples = [], [], 0
        for ld in loaders:
            for b in ld:
                real = b["doc_ids"] >= 0
                pairs.append(np.stack([b["doc_ids"][real].numpy(), b["token_offsets"][real].numpy()], 1))
                ids.append(b["input_ids"][real].numpy())
                samples += int((real.sum(1) > 0).sum())
        pairs, ids = np.concatenate(pairs), np.concatenate(ids)
        assert np.unique(pairs, axis=0).shape[0] == pairs.shape[0]  # never twice: ranks disjoint
        assert np.array_equal(ids, flat[base[pairs[:, 0]] + pairs[:, 1]])  # the source's ids
        n, dropped = loaders[0].num_samples(0), loaders[0].dropped_samples(0)
        if drop_last:
            assert dropped == n % 6 and samples == n - dropped
        else:
            assert dropped == 0 and samples == n and pairs.shape[0] == flat.size  # every token


def test_ranks_together_are_the_global_sequence_whatever_the_split():
    one = [rows(b) for b in TrainingLoader(DOCS, batch_size=4, world_size=1, **OPTS)]
    two = [TrainingLoader(DOCS, batch_size=2, world_size=2, rank=r, **OPTS) for r in range(2)]
    four = [TrainingLoader(DOCS, batch_size=1, world_size=4, rank=r, **OPTS) for r in range(4)]
    for split in (two, four):
        per_rank = [[rows(b) for b in ld] for ld in split]
        joined = [sum((per_rank[r][g] for r in range(len(split))), []) for g in range(len(one))]
        assert joined == one


def test_epochs_reshuffle_and_are_reproducible():
    a = TrainingLoader(DOCS, batch_size=4, **OPTS)
    e0, e1 = run(a, 1), run(a, 1)
    assert a.epoch == 2 and e0 != e1
    b = TrainingLoader(DOCS, batch_size=4, **OPTS)
    b.set_epoch(1)
    assert run(b, 1) == e1 and b.epoch == 2
    b.set_epoch(2)  # the loop's `set_epoch(epoch)` after a finished epoch: a no-op
    assert (b.epoch, b.batches_consumed) == (2, 0)
    b.set_epoch(1)  # another epoch: from its start
    assert run(b, 1) == e1
    c = TrainingLoader(DOCS, batch_size=4, **{**OPTS, "seed": 4})
    assert run(c, 1) != e0


@pytest.mark.parametrize("world", [1, 2])
def test_interrupted_at_random_steps_equals_uninterrupted(world):
    rng = np.random.default_rng(world)
    for rank in range(world):
        make = lambda rank=rank: TrainingLoader(DOCS, batch_size=2, world_size=world, rank=rank, **OPTS)
        n = len(make())
        full = run(make(), 3)
        stops = rng.choice(np.arange(1, 3 * n), size=6, replace=False).tolist() + [n, 2 * n]
        assert resumed_run(make, 3, stops) == full


def test_set_epoch_after_resume_keeps_the_position():
    a = TrainingLoader(DOCS, batch_size=4, **OPTS)
    it = iter(a)
    first = [key(next(it)) for _ in range(3)]
    state = a.state_dict()
    rest = [key(b) for b in it]
    b = TrainingLoader(DOCS, batch_size=4, **OPTS)
    b.load_state_dict(state)
    b.set_epoch(0)  # the usual `for epoch in ...: loader.set_epoch(epoch)` loop
    assert [key(x) for x in b] == rest and len(first) == 3


def test_elastic_resume_continues_the_global_sequence():
    ref = [rows(b) for b in TrainingLoader(DOCS, batch_size=4, world_size=1, **OPTS)]
    n = len(ref)
    # 2 ranks x 2 consume 5 global batches, then 4 ranks x 1 and 1 rank x 4 continue
    saved = []
    for r in range(2):
        ld = TrainingLoader(DOCS, batch_size=2, world_size=2, rank=r, **OPTS)
        it = iter(ld)
        for _ in range(5):
            next(it)
        saved.append(ld.state_dict())
    assert saved[0]["batches_consumed"] == 5 and saved[0]["samples_consumed"] == 20
    four = []
    for r in range(4):
        ld = TrainingLoader(DOCS, batch_size=1, world_size=4, rank=r, **OPTS)
        ld.load_state_dict(saved[r % 2])  # any rank's state: the position is global
        four.append([rows(b) for b in ld])
    assert [sum((four[r][g] for r in range(4)), []) for g in range(n - 5)] == ref[5:]
    one = TrainingLoader(DOCS, batch_size=4, world_size=1, **OPTS)
    one.load_state_dict(saved[1])
    assert [rows(b) for b in one] == ref[5:]


def test_other_global_batch_is_refused_with_a_way_forward():
    a = TrainingLoader(DOCS, batch_size=2, world_size=2, **OPTS)
    next(iter(a))
    b = TrainingLoader(DOCS, batch_size=3, world_size=2, **OPTS)
    with pytest.raises(ConfigError, match=r"global batch of 4 .*world_size 2 x batch_size 3.*use batch_size=2"):
        b.load_state_dict(a.state_dict())


def test_state_checks_name_what_differs():
    a = TrainingLoader(DOCS, batch_size=4, **OPTS)
    it = iter(a)
    next(it)
    state = a.state_dict()
    assert all(isinstance(v, (int, str)) for v in state.values())
    # same content in other objects (a moved folder), and more workers: accepted
    moved = [np.array(d, dtype=np.int32) for d in DOCS]
    TrainingLoader(moved, batch_size=4, num_workers=3, **OPTS).load_state_dict(state)
    # the same state with numpy integers (a checkpoint format that stores arrays) resumes the same
    c = TrainingLoader(DOCS, batch_size=4, **OPTS)
    c.load_state_dict({k: np.int64(v) if isinstance(v, int) else v for k, v in state.items()})
    assert (c.epoch, c.batches_consumed) == (a.epoch, a.batches_consumed) == (0, 1)
    t = TrainingLoader(DOCS, batch_size=4, **OPTS)  # and 0-d integer tensors (a tensor-typed checkpoint)
    t.load_state_dict({k: torch.tensor(v) if isinstance(v, int) else v for k, v in state.items()})
    assert (t.epoch, t.batches_consumed) == (0, 1)
    with pytest.raises(FormatError):  # a float tensor is no int
        t.load_state_dict({k: torch.tensor(float(v)) if isinstance(v, int) else v for k, v in state.items()})
    other = [d.copy() for d in DOCS]
    other[7] = other[7].copy()
    other[7][0] += 1
    with pytest.raises(ConfigError, match="other data: data fingerprint"):
        TrainingLoader(other, batch_size=4, **OPTS).load_state_dict(state)
    with pytest.raises(ConfigError, match="block_size: 64 in the state, 32 here"):
        TrainingLoader(DOCS, batch_size=4, block_size=32, seed=3).load_state_dict(state)
    with pytest.raises(ConfigError, match="method"):
        TrainingLoader(DOCS, batch_size=4, method="greedy", **OPTS).load_state_dict(state)
    # windows that leave every document out: said so (it had been "lower batch_size", which cannot help)
    with pytest.raises(ConfigError, match=r"epoch 0 has no samples under this plan: every document is shorter "
                                          r"than the window \(500 tokens\) and short='drop'"):
        TrainingLoader(DOCS, batch_size=1, windows=SlidingWindows(500, 250, short="drop"))
    # windows whose one option differs: that field named (both whole option dicts had been printed)
    w1 = TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(16, 8, jitter="global", seed=1))
    with pytest.raises(ConfigError, match=r"differ: windows\.seed: 1 in the state, 2 here\. Pass the same"):
        TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(16, 8, jitter="global", seed=2)).load_state_dict(
            w1.state_dict())
    # without jitter the windows' seed draws nothing: the same samples, and the state loads (it had been refused)
    w0 = TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(16, 8))
    w7 = TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(16, 8, seed=7))
    w7.load_state_dict(w0.state_dict())
    assert [rows(b) for b in _take(w7, 3)] == [rows(b) for b in _take(w0, 3)]
    with pytest.raises(ConfigError, match="seed=3"):
        TrainingLoader(DOCS, batch_size=4, block_size=64, seed=5).load_state_dict(state)
    b = TrainingLoader(DOCS, batch_size=4, **OPTS)
    for bad, pattern in [
        ({**state, "version": 99}, "version 99"),
        ({k: v for k, v in state.items() if k != "epoch"}, "truncated: missing epoch"),
        ({**state, "batches_consumed": 2}, "edited or corrupted"),
        ({**state, "epoch": "1"}, "edited or corrupted"),
        ([1, 2], "must be a dict"),
        ({**state, "format": "x"}, "not a TrainingLoader state"),
    ]:
        with pytest.raises(FormatError, match=pattern):
            b.load_state_dict(bad)
    from tokenmill.batching.schedule import _checksum

    forged = {**state, "plan": "{not json"}
    forged["checksum"] = _checksum(forged)
    with pytest.raises(FormatError, match="'plan' is not valid JSON: the state was edited or corrupted") as e:
        b.load_state_dict(forged)
    assert "write it again" not in str(e.value)  # (a state is no file: the advice was parse_json's for files)
    forged = {**state, "seed": -1}
    forged["checksum"] = _checksum(forged)
    with pytest.raises(FormatError, match="seed"):  # not "pass seed=-1 to resume", which no loader takes
        b.load_state_dict(forged)
    assert (b.epoch, b.batches_consumed) == (0, 0)  # a refused state changes nothing


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ConfigError, match="rank=2 must be in 0 .. world_size-1 = 1"):
        TrainingLoader(DOCS, batch_size=2, rank=2, world_size=2, **OPTS)
    with pytest.raises(ConfigError, match="larger than epoch 0"):
        TrainingLoader(DOCS, batch_size=10_000, **OPTS)
    with pytest.raises(ConfigError, match="block_size=T"):
        TrainingLoader(DOCS, batch_size=2)
    with pytest.raises(ConfigError, match="batch_size"):
        TrainingLoader(DOCS, batch_size=0, **OPTS)
    with pytest.raises(ConfigError, match="template"):
        TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(16, 8, template=(1, 2)))
    with pytest.raises(ConfigError, match="num_workers"):
        TrainingLoader(DOCS, batch_size=2, num_workers=-1, **OPTS)
    # worker options without workers (ignored before), a start method that is none (said at the first batch)
    with pytest.raises(ConfigError, match="prefetch_factor is for worker processes, and num_workers=0 starts none"):
        TrainingLoader(DOCS, batch_size=2, prefetch_factor=4, **OPTS)
    with pytest.raises(ConfigError, match="multiprocessing_context='nope' is not a start method"):
        TrainingLoader(DOCS, batch_size=2, num_workers=1, multiprocessing_context="nope", **OPTS)
    # a state whose fields disagree with its global batch, checksum recomputed: refused
    from tokenmill.batching.schedule import _checksum

    ld = TrainingLoader(DOCS, batch_size=2, **OPTS)
    state = ld.state_dict()
    for edit in ({"rank": 7}, {"world_size": 3, "batch_size": 1}):
        bad = {**state, **edit}
        bad["checksum"] = _checksum(bad)
        with pytest.raises(FormatError, match="do not make its global batch"):
            TrainingLoader(DOCS, batch_size=2, **OPTS).load_state_dict(bad)


def test_windows_padded_and_packed_with_jitter():
    sw = SlidingWindows(32, 24, jitter="global", seed=1)
    padded = TrainingLoader(DOCS, batch_size=4, windows=sw, seed=2)
    b = next(iter(padded))
    assert b["input_ids"].shape == (4, 32)
    # each row is one window: one document, offsets consecutive
    for i in range(4):
        d = b["doc_ids"][i][b["doc_ids"][i] >= 0].unique()
        assert d.numel() == 1
    e0 = run(TrainingLoader(DOCS, batch_size=4, windows=sw, seed=2), 1)
    ld = TrainingLoader(DOCS, batch_size=4, windows=sw, seed=2)
    ld.set_epoch(1)
    assert run(ld, 1) != e0  # jitter and shuffle per epoch
    packed = TrainingLoader(DOCS, batch_size=2, windows=sw, block_size=64, seed=2)
    pb = next(iter(packed))
    assert pb["input_ids"].shape == (2, 64)
    assert len(packed) == packed.num_samples(0) // 2
    # resume across the epoch boundary, where the jitter (and the number of windows) changes
    make = lambda: TrainingLoader(DOCS, batch_size=2, windows=sw, block_size=64, seed=2)
    full = []
    ld = make()
    for _ in range(2):
        full += [key(x) for x in ld]
    cut = len(make()) + 3
    a = make()
    got = []
    while len(got) < cut:
        got += [key(x) for x in _take(a, cut - len(got))]
    c = make()
    c.load_state_dict(a.state_dict())
    got += [key(x) for x in c]
    assert got == full


def _take(loader, n):
    out = []
    for b in loader:
        out.append(b)
        if len(out) == n:
            break
    return out


def test_absolute_window_positions_continue_in_the_document():
    sw = SlidingWindows(16, 16, positions="absolute")
    b = next(iter(TrainingLoader(DOCS, batch_size=8, windows=sw, shuffle=False)))
    real = b["doc_ids"] >= 0
    assert torch.equal(b["position_ids"][real], b["token_offsets"][real])


@pytest.mark.slow
def test_workers_give_the_same_batches_and_resume_exactly():
    make = lambda w: TrainingLoader(DOCS, batch_size=2, world_size=2, rank=1, num_workers=w, **OPTS)
    full = run(make(0), 2)
    n = len(make(0))
    a = make(2)
    got = [key(b) for b in _take_across(a, n + 3)]  # into epoch 1, with prefetching workers
    state = a.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (1, 3)
    b = make(2)
    b.load_state_dict(state)
    got += [key(x) for x in b]
    assert got == full


def _mix(seed=0):
    a = make_docs(120, seed=1, lo=20, hi=120)
    b = make_docs(15, seed=2, lo=10, hi=60, vocab=50)
    return Mixture({ArraySource(a): 0.7, ArraySource(b): 0.3}, seed=seed)


def test_mixture_holds_the_proportions_in_every_global_batch():
    mix = _mix()
    ld = TrainingLoader(mix, batch_size=10, block_size=64, seed=0)
    sched = ld.schedule
    _, q, counts, _ = sched._mixture()
    tokens = np.zeros(2)
    for b in ld:
        part = mix.part_of(b["doc_ids"].numpy())
        # samples per part: blocks never mix parts
        row_part = np.array([np.unique(p[p >= 0])[0] for p in part])
        assert all(np.unique(p[p >= 0]).size == 1 for p in part)
        n = np.bincount(row_part, minlength=2)
        assert (np.abs(n - q * 10) < 1).all()
        tokens += np.bincount(part[part >= 0], minlength=2)
    share = tokens / tokens.sum()
    assert abs(share[0] - 0.7) < 0.03, share
    # the small part is upsampled: its documents repeat within the epoch
    report = mix.report(int(tokens.sum()))
    assert report.parts[1].epochs > 1 and report.parts[0].epochs < 1


def test_mixture_resume_and_elastic_resume():
    mix = _mix()
    ref = [rows(b) for b in TrainingLoader(mix, batch_size=6, block_size=64, seed=0)]
    ref += [rows(b) for b in _second_epoch(TrainingLoader(mix, batch_size=6, block_size=64, seed=0))]
    a = [TrainingLoader(mix, batch_size=3, world_size=2, rank=r, block_size=64, seed=0) for r in range(2)]
    k = len(a[0]) + 2
    parts = [[rows(b) for b in _take_across(ld, k)] for ld in a]
    got = [parts[0][g] + parts[1][g] for g in range(k)]
    state = a[0].state_dict()
    c = TrainingLoader(mix, batch_size=6, block_size=64, seed=0)
    c.load_state_dict(state)
    got += [rows(b) for b in c]
    # the same global batches, in the same order, each holding the same rows: which rank takes which
    # row depends on the world size (the mixture is dealt so that every rank draws every part at its
    # share), the gradient of a global batch does not
    assert [sorted(map(repr, b)) for b in got] == [sorted(map(repr, b)) for b in ref]


def test_a_mixtures_seed_changes_its_order_and_seed_0_keeps_the_order_it_had():
    """``Mixture(seed=...)`` shuffles each part's samples (the loader had ignored it: two mixture seeds gave
    the same batches, so a seed ablation trained on the same data). Seed 0,
    the default, keeps the order a mixture always had (the part's order drawn from the loader's seed
    alone), and a mixture of another seed has a new fingerprint (a state saved when its seed was ignored is
    refused, not resumed on another order)."""

    def epoch(seed):
        return [rows(b) for b in TrainingLoader(_mix(seed=seed), batch_size=6, block_size=64, seed=0)]

    zero, one, two = epoch(0), epoch(1), epoch(2)
    assert zero != one and one != two and zero != two
    assert epoch(1) == one  # deterministic
    # seed 0: each part's order is the loader seed's permutation (as before the mixture's seed was read)
    sched = TrainingLoader(_mix(seed=0), batch_size=6, block_size=64, seed=0).schedule
    s = sched.stream(1, 0)
    n = s.plan.num_blocks
    assert s.order.tolist() == np.random.default_rng([0x6F72646572, 0, 1, 0]).permutation(n).tolist()
    assert _mix(seed=0).fingerprint != _mix(seed=1).fingerprint


def _second_epoch(loader):
    for _ in loader:
        pass
    return loader


def _take_across(loader, n):
    out = []
    while len(out) < n:
        out += _take(loader, n - len(out))
    return out


def test_mixture_bad_input():
    a = ArraySource(DOCS[:10])
    for w in (0, -1, float("nan"), float("inf"), "x"):
        with pytest.raises(ConfigError, match="weight"):
            Mixture([(a, 1.0), (ArraySource(DOCS[10:20]), w)])
    with pytest.raises(TokenmillError, match="no tokens"):
        Mixture([(a, 1.0), (ArraySource([]), 1.0)])
    with pytest.raises(ConfigError, match="at least one part"):
        Mixture({})
    # a state of the mixture does not load into a loader over one of its parts
    ld = TrainingLoader(_mix(), batch_size=4, block_size=64)
    with pytest.raises(ConfigError, match="other data|mixture"):
        TrainingLoader(DOCS, batch_size=4, block_size=64).load_state_dict(ld.state_dict())
    # another weight is another mixture: said as such (it read as other data only); a dataset's state is named
    reweighted = Mixture({ArraySource(make_docs(120, seed=1, lo=20, hi=120)): 0.5,
                          ArraySource(make_docs(15, seed=2, lo=10, hi=60, vocab=50)): 0.5})
    with pytest.raises(ConfigError, match="A mixture's fingerprint covers its parts' data and its weights"):
        TrainingLoader(reweighted, batch_size=4, block_size=64).load_state_dict(ld.state_dict())
    with pytest.raises(ConfigError, match=r"the state of a loader's as_dataset\(\).*load it with the StatefulDataLoader"):
        ld.load_state_dict(ld.as_dataset().state_dict())


@pytest.mark.slow
def test_stateful_dataloader_resumes_exactly():
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    make = lambda: TrainingLoader(DOCS, batch_size=2, **OPTS).as_dataset()
    full = [key(b) for b in sdl.StatefulDataLoader(make(), batch_size=None, num_workers=2)]
    assert full == run(TrainingLoader(DOCS, batch_size=2, **OPTS), 1)
    dl = sdl.StatefulDataLoader(make(), batch_size=None, num_workers=2)
    it = iter(dl)
    got = [key(next(it)) for _ in range(7)]
    state = dl.state_dict()
    del it, dl
    dl2 = sdl.StatefulDataLoader(make(), batch_size=None, num_workers=2)
    dl2.load_state_dict(state)
    got += [key(b) for b in dl2]
    assert got == full


@pytest.mark.slow
def test_as_dataset_continues_where_the_loader_is_and_its_state_is_checked():
    """as_dataset() after load_state_dict started the epoch over (the batches the saved run had consumed were
    trained on again, without a word); the dataset state's worker fields were outside its checksum (an edited
    worker_next was taken: 20 batches, or a jump to the next epoch)."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    from tokenmill.errors import FormatError

    full = run(TrainingLoader(DOCS, batch_size=2, **OPTS), 1)
    saved = TrainingLoader(DOCS, batch_size=2, **OPTS)
    it = iter(saved)
    for _ in range(5):
        next(it)
    state = saved.state_dict()
    for workers in (0, 2):
        resumed = TrainingLoader(DOCS, batch_size=2, **OPTS)
        resumed.load_state_dict(state)
        dl = sdl.StatefulDataLoader(resumed.as_dataset(), batch_size=None, num_workers=workers)
        assert [key(b) for b in dl] == full[5:], workers
    # resumed one batch before the end, persistent workers: the worker with no batch left had stayed at the start
    # and lost its batches of every later epoch; set_epoch of the current epoch started it over
    per = len(full)
    both = run(TrainingLoader(DOCS, batch_size=2, **OPTS), 2)
    saved = TrainingLoader(DOCS, batch_size=2, **OPTS)
    it = iter(saved)
    for _ in range(per - 1):
        next(it)
    resumed = TrainingLoader(DOCS, batch_size=2, **OPTS)
    resumed.load_state_dict(saved.state_dict())
    ds = resumed.as_dataset()
    assert len(ds) == 1
    dl = sdl.StatefulDataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
    got = []
    for epoch in (0, 1):
        ds.set_epoch(epoch)  # (the current one: kept where it is)
        got += [key(b) for b in dl]
    assert got == both[per - 1:]
    ds = TrainingLoader(DOCS, batch_size=2, **OPTS).as_dataset()
    it = iter(ds)
    next(it)
    st = ds.state_dict()
    ds.load_state_dict(dict(st))  # an unmodified state loads
    for field, value in (("worker_next", 7), ("worker_next", 10**6), ("num_workers", 3)):
        with pytest.raises(FormatError, match="dataset state's checksum does not match"):
            ds.load_state_dict({**st, field: value})
    # the checksum deleted with the edit: refused too (it had been a warning, and the edited position was taken)
    with pytest.raises(FormatError, match="has no dataset_checksum: it was edited"):
        ds.load_state_dict({k: v for k, v in {**st, "worker_next": 7}.items() if k != "dataset_checksum"})


@pytest.mark.slow
def test_as_dataset_goes_on_to_the_next_epoch_with_persistent_workers_and_after_a_restored_end():
    """Persistent workers' copies never see the main process's set_epoch, and a StatefulDataLoader without
    workers restores a finished epoch's state over set_epoch: every epoch after the first had given 0
    batches, a training loop running its later epochs without a step."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    ref = run(TrainingLoader(FEW, batch_size=2, **OPTS), 3)  # three epochs, in order
    per = len(ref) // 3
    for make_dl in (lambda ds: torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True),
                    lambda ds: sdl.StatefulDataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)):
        ds = TrainingLoader(FEW, batch_size=2, **OPTS).as_dataset()
        dl, got = make_dl(ds), []
        for epoch in range(3):
            ds.set_epoch(epoch)
            epoch_keys = [key(b) for b in dl]
            assert len(epoch_keys) == per
            got += epoch_keys
        assert got == ref
    make = lambda: TrainingLoader(FEW, batch_size=2, **OPTS).as_dataset()
    ds = make()
    dl = sdl.StatefulDataLoader(ds, batch_size=None)
    first = [key(b) for b in dl]
    state = dl.state_dict()  # at the end of epoch 0
    ds2 = make()
    dl2 = sdl.StatefulDataLoader(ds2, batch_size=None)
    dl2.load_state_dict(state)
    ds2.set_epoch(1)
    assert first + [key(b) for b in dl2] == ref[: 2 * per]


@pytest.mark.slow
@pytest.mark.parametrize("workers, persistent, prefetch", [(0, False, None), (2, False, 2), (2, True, 2), (2, True, 3)])
def test_stateful_dataloader_resumes_every_save_point_exactly(workers, persistent, prefetch):
    """A StatefulDataLoader state saved mid-epoch, after an epoch's last batch inside its loop (resumed from that
    epoch: its pass gives none) or after the loop ended (resumed from the next epoch) gives the uninterrupted
    run's batches, none lost or repeated. torchdata fills its prefetch from the restored copies and, for a
    state saved after the loop, drops those batches and iterates again: copies that went on to the next epoch
    there lost num_workers x prefetch_factor of its batches, and a state saved on the last batch repeated or
    shifted an epoch (57 batches for 38)."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    E = 3
    ref = run(TrainingLoader(FEW, batch_size=2, **OPTS), E)
    per = len(ref) // E
    kw = dict(batch_size=None, num_workers=workers)
    if workers:
        kw.update(persistent_workers=persistent, prefetch_factor=prefetch)
    make = lambda: TrainingLoader(FEW, batch_size=2, **OPTS).as_dataset()  # noqa: E731
    for save_at, resume_epoch, rest in (("mid", 1, ref[per + 4:]), ("last", 0, ref[per:]), ("after", 1, ref[per:])):
        ds = make()
        dl, state, got = sdl.StatefulDataLoader(ds, **kw), None, []
        for e in range(E):
            ds.set_epoch(e)
            for i, b in enumerate(dl):
                got.append(key(b))
                if state is None and ((save_at == "mid" and (e, i) == (1, 3)) or
                                      (save_at == "last" and (e, i) == (0, per - 1))):
                    state = dl.state_dict()
            if state is None and save_at == "after":
                state = dl.state_dict()
        assert got == ref  # (saving changed nothing)
        ds2 = make()
        dl2 = sdl.StatefulDataLoader(ds2, **kw)
        dl2.load_state_dict(state)
        got = []
        for e in range(resume_epoch, E):
            ds2.set_epoch(e)
            got += [key(b) for b in dl2]
        assert got == rest, save_at


@pytest.mark.slow
def test_as_dataset_of_a_loader_restored_at_an_epochs_end_gives_that_epoch_no_batch():
    """A loader restored from a state saved after its epoch's last batch gives that epoch's pass no batch; its
    as_dataset() had gone on to the next epoch at once, so the guide's loop from loader.epoch gave an epoch
    too many (0 or persistent workers) or one twice (non-persistent workers)."""
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    E = 3
    ref = run(TrainingLoader(FEW, batch_size=2, **OPTS), E)
    per = len(ref) // E
    saved = TrainingLoader(FEW, batch_size=2, **OPTS)
    it = iter(saved)
    for _ in range(per):  # every batch of epoch 0, its loop not ended (a checkpoint on the last step)
        next(it)
    state = saved.state_dict()
    for kw in (dict(num_workers=0), dict(num_workers=2), dict(num_workers=2, persistent_workers=True)):
        loader = TrainingLoader(FEW, batch_size=2, **OPTS)
        loader.load_state_dict(state)
        ds = loader.as_dataset()
        dl, got = sdl.StatefulDataLoader(ds, batch_size=None, **kw), []
        for e in range(loader.epoch, E):
            ds.set_epoch(e)
            got += [key(b) for b in dl]
        assert got == ref[per:], kw


def test_a_part_position_is_found_without_walking_its_epochs():
    """Stream index -> (part epoch, index) under jittered windows walked the part's epochs from 0 on every call:
    a small, upsampled part's batches became slower every epoch (2 ms at epoch 0, 174 ms at epoch 6). The
    searched starts give what the walk gave, part epochs of 0 samples stepped over."""
    mix = _mix(seed=1)
    sch = TrainingLoader(mix, batch_size=4, windows=SlidingWindows(24, 16, jitter="per_doc", seed=3),
                         block_size=48, seed=2).schedule
    part = 1
    sizes = [sch._part_samples(part, p) for p in range(40)]
    k = np.random.default_rng(0).integers(0, sum(sizes) - 1, 500)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    want_ep = np.searchsorted(starts, k, side="right") - 1
    got_ep, got_idx = sch._part_position(part, k)
    assert got_ep.tolist() == want_ep.tolist() and got_idx.tolist() == (k - starts[want_ep]).tolist()
    assert all(0 <= i < sizes[e] for e, i in zip(got_ep.tolist(), got_idx.tolist()))


def test_mixture_of_jittered_windows_resumes_across_part_epochs():
    mix = _mix(seed=1)
    sw = SlidingWindows(24, 16, jitter="per_doc", seed=3)
    make = lambda: TrainingLoader(mix, batch_size=4, windows=sw, block_size=48, seed=2)
    ref = make()
    full = [key(b) for b in _take_across(ref, 3 * len(make()))]  # several part epochs of the small part
    a = make()
    got = [key(b) for b in _take_across(a, len(make()) + 5)]
    b = make()
    b.load_state_dict(a.state_dict())
    got += [key(x) for x in _take_across(b, len(full) - len(got))]
    assert got == full


def test_schedule_pickles_for_spawned_workers():
    import pickle

    ld = TrainingLoader(DOCS, batch_size=2, **OPTS)
    first = key(next(iter(ld)))  # fillers now cached (closures): they must not be pickled
    clone = pickle.loads(pickle.dumps(ld.schedule))
    from tokenmill.torch.loader import batch_tensors

    assert key(batch_tensors(clone.batch(0, 0))) == first


def test_plan_cache_gives_the_same_batches_and_plans_a_damaged_one_again(tmp_path, monkeypatch):
    import tokenmill.batching.schedule as schedule

    ref = run(TrainingLoader(DOCS, batch_size=4, **OPTS), 1)
    a = TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS)
    assert run(a, 1) == ref
    (folder,) = list(tmp_path.iterdir())
    assert (folder / "plan.json").exists()
    with monkeypatch.context() as m:
        m.setattr(schedule, "pack", lambda *a, **k: pytest.fail("planned again instead of loading the cache"))
        b = TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS)
        assert run(b, 1) == ref
    other = [np.concatenate([d, d]) for d in DOCS]  # other data: another key, planned anew
    TrainingLoader(other, batch_size=4, plan_cache=tmp_path, **OPTS)
    assert len(list(tmp_path.iterdir())) == 2
    # damaged (an array edited, emptied by a power loss): said, planned again and written anew (a damaged
    # cache had been an error asking to delete the folder, an emptied array a bare EOFError)
    good = (folder / "length.npy").read_bytes()
    for damage in (lambda: np.save(folder / "length.npy", np.load(folder / "length.npy") + 1000),
                   lambda: (folder / "length.npy").write_bytes(b"")):
        damage()
        with pytest.warns(UserWarning, match=f"packing plan cache {folder} is damaged .*planning again"):
            assert run(TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS), 1) == ref
        assert (folder / "length.npy").read_bytes() == good
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="is a file; pass a folder"):
        TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path / "a-file", **OPTS)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError, match="is a token store's folder"):
        TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path / "store", **OPTS)


def _within(seconds, fn):
    """``fn()``'s result, or a failure when it takes more than ``seconds`` (it had waited forever on a FIFO)."""
    import threading

    out: list = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    return out[0]


def test_a_plan_cache_entry_that_is_no_file_of_its_own_never_stops_or_hangs_a_run(tmp_path):
    """A FIFO in place of an array file: the loader waited for a writer forever; the entry's name taken by a file:
    a bare FileExistsError; an array's name taken by a folder: a ConfigError about an output path. Each is now
    said, and the run goes on with its plan."""
    import os

    ref = run(TrainingLoader(DOCS, batch_size=4, **OPTS), 1)
    run(TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS), 1)
    (folder,) = list(tmp_path.iterdir())
    (folder / "doc.npy").unlink()
    os.mkfifo(folder / "doc.npy")
    with pytest.warns(UserWarning, match="doc.npy is missing or not a regular file"):
        assert _within(60, lambda: run(TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS), 1)) == ref
    (folder / "doc.npy").unlink()
    (folder / "doc.npy").mkdir()
    with pytest.warns(UserWarning, match="could not be kept in the cache"):
        assert run(TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS), 1) == ref
    import shutil

    shutil.rmtree(folder)
    folder.write_text("not a folder")
    with pytest.warns(UserWarning, match="could not be kept in the cache"):
        assert run(TrainingLoader(DOCS, batch_size=4, plan_cache=tmp_path, **OPTS), 1) == ref
    assert folder.read_text() == "not a folder"  # (nothing of the user's removed)


def test_plan_cache_refuses_a_flipped_bit_that_keeps_every_index_in_range(tmp_path):
    """One bit of a cached plan's documents flipped (document 1 read as 0: in range, and every segment still
    fits its document) would repeat one document in an epoch and drop another: the arrays' sha256 in
    plan.json finds it, and the plan is made again."""
    docs = [np.arange(1, 41, dtype=np.int64) + 100 * k for k in range(6)]  # equal lengths: any doc fits
    ref = run(TrainingLoader(docs, batch_size=2, plan_cache=tmp_path, **OPTS), 1)
    (folder,) = list(tmp_path.iterdir())
    meta = json.loads((folder / "plan.json").read_text())
    assert meta["version"] == 2 and meta["arrays_sha256"].startswith("sha256:")
    doc = np.load(folder / "doc.npy")
    k = int(np.flatnonzero(doc == 1)[0])
    doc[k] = 0
    np.save(folder / "doc.npy", doc)
    with pytest.warns(UserWarning, match=r"damaged \(its arrays do not hash.*planning again"):
        assert run(TrainingLoader(docs, batch_size=2, plan_cache=tmp_path, **OPTS), 1) == ref
    assert np.load(folder / "doc.npy")[k] == 1  # written anew


@pytest.mark.slow
def test_two_ranks_with_workers_resume_on_one_rank_with_a_worker():
    ref = [rows(b) for b in TrainingLoader(DOCS, batch_size=4, **OPTS)]
    states, got = [], [[] for _ in range(2)]
    for r in range(2):
        ld = TrainingLoader(DOCS, batch_size=2, world_size=2, rank=r, num_workers=2, **OPTS)
        got[r] = [rows(b) for b in _take(ld, 6)]
        states.append(ld.state_dict())
    assert [got[0][g] + got[1][g] for g in range(6)] == ref[:6]
    one = TrainingLoader(DOCS, batch_size=4, num_workers=1, **OPTS)
    one.load_state_dict(states[1])
    assert [rows(b) for b in one] == ref[6:]


@pytest.mark.parametrize("make", [
    lambda w, **kw: TrainingLoader(DOCS, batch_size=2, num_workers=w, prefetch_factor=1 if w else None, **OPTS, **kw),
    lambda w, **kw: TrainingLoader(DOCS, batch_size=3, windows=SlidingWindows(48, 24), num_workers=w,
                                   prefetch_factor=1 if w else None, seed=1, **kw),
    lambda w, **kw: TrainingLoader(DOCS, batch_size=2, windows=SlidingWindows(40, 40), block_size=64, num_workers=w,
                                   prefetch_factor=1 if w else None, seed=2, **kw),
], ids=["packed", "windows padded", "windows packed"])
def test_workers_hand_batches_over_in_shared_memory_slots(monkeypatch, make):
    """With workers, every batch travels through the loader's shared-memory ring (each worker's few
    slots reused many times over an epoch), and the batches are the ones built in-process."""
    from tokenmill.torch import loader as mod

    want = run(make(0), 1)
    reads = []
    read = mod._Ring.read
    monkeypatch.setattr(mod._Ring, "read", lambda self, g, m: reads.append(g) or read(self, g, m))
    got = run(make(2), 1)
    assert got == want
    assert len(want) > 4 * 2 * 3  # far more batches than the ring has slots (2 workers x 3)
    assert reads == list(range(len(want)))  # all of them went through the ring
    # /dev/shm without room for the ring: the batches travel as tensors, the same ones
    import os

    monkeypatch.setattr(os, "statvfs", lambda p: type("S", (), {"f_bavail": 10, "f_frsize": 4096})())
    reads.clear()
    assert run(make(2), 1) == want and reads == []


def test_a_ring_slot_is_checked_before_and_after_it_is_copied():
    from tokenmill.torch import loader as mod

    ld = TrainingLoader(DOCS, batch_size=2, **OPTS)
    b0, b1 = ld.schedule.batch(0, 0), ld.schedule.batch(0, 1)
    ring = mod._Ring(1, 2, 2, 64)
    m0 = ring.write(0, 0, 0, b0)
    assert key(mod._from_wire(ring.read(0, m0))) == key(mod.batch_tensors(b0))
    assert int(ring.freed[0, 0]) == 0
    ring.wait_free(0, 0, 0)  # freed: returns at once
    ring.write(0, 0, 1, b1)  # the slot now holds batch 1
    with pytest.raises(RuntimeError, match="holds batch 1, not batch 0"):
        ring.read(0, m0)
    with pytest.raises(RuntimeError, match="has not taken batch 7"):
        ring.wait_free(0, 1, 7, limit_s=0.01)


@pytest.mark.slow
def test_spawned_workers_use_the_ring_too(monkeypatch):
    """spawn/forkserver workers get the ring pickled (torch shares its memory, not a copy)."""
    from tokenmill.torch import loader as mod

    want = run(TrainingLoader(DOCS, batch_size=2, **OPTS), 1)
    reads = []
    read = mod._Ring.read
    monkeypatch.setattr(mod._Ring, "read", lambda self, g, m: reads.append(g) or read(self, g, m))
    got = run(TrainingLoader(DOCS, batch_size=2, num_workers=2, multiprocessing_context="spawn", **OPTS), 1)
    assert got == want and reads == list(range(len(want)))


def test_batches_kept_by_the_caller_are_never_overwritten():
    """The schedule lends the memory of batches nobody holds any more to later ones; batches (and
    views of them) that the caller keeps must keep their values."""
    want = run(TrainingLoader(DOCS, batch_size=2, **OPTS), 1)
    kept = list(TrainingLoader(DOCS, batch_size=2, **OPTS))
    views = [b["input_ids"][1:] for b in TrainingLoader(DOCS, batch_size=2, **OPTS)]
    assert [key(b) for b in kept] == want
    assert [v.numpy().tobytes() for v in views] == [
        b["input_ids"][1:].numpy().tobytes() for b in kept]
