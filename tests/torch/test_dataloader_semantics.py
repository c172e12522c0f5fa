"""TrainingLoader as torch users hold it: inside ``DataLoader(loader, batch_size=None)`` and torchdata's
``StatefulDataLoader``, with their pass semantics (each ``iter()`` starts the epoch unless a state was
just loaded; ``len()`` is the epoch; ``state_dict()`` is the live pass's position)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill import ConfigError, TokenmillError
from tokenmill.torch import TrainingLoader

rng = np.random.default_rng(7)
DOCS = [rng.integers(0, 500, int(n)) for n in rng.integers(1, 90, 120)]
FIELDS = ("input_ids", "labels", "position_ids", "doc_ids", "token_offsets", "attention_mask", "cu_seqlens")


def make(**kw):
    return TrainingLoader(DOCS, batch_size=2, block_size=48, seed=5, **kw)


def key(batch) -> tuple:
    return tuple(batch[f].numpy().tobytes() for f in FIELDS) + (batch["max_seqlen"], int(batch["num_targets"]))


def epochs(n: int) -> list[list[tuple]]:
    """The batches of epochs 0 .. n-1, each from a fresh loader (the reference)."""
    out = []
    for e in range(n):
        ld = make()
        ld.set_epoch(e)
        out.append([key(b) for b in ld])
    return out


REF = epochs(2)
N = len(REF[0])


def position(loader) -> tuple[int, int]:
    s = loader.state_dict()
    return s["epoch"], s["batches_consumed"]


def test_dataloader_around_the_loader_gives_its_batches_epoch_after_epoch():
    loader = make()
    dl = torch.utils.data.DataLoader(loader, batch_size=None)
    assert len(dl) == len(loader) == N
    assert [key(b) for b in dl] == REF[0]  # the same batches, in the same order
    assert position(loader) == (1, 0)  # a pass that ran to its end moves to the next epoch
    assert [key(b) for b in dl] == REF[1]
    b = next(iter(torch.utils.data.DataLoader(make(), batch_size=None)))
    assert isinstance(b["max_seqlen"], int) and b["cu_seqlens"].dtype == torch.int32


def test_every_iter_starts_the_epoch_and_takes_over_the_position():
    loader = make()
    first = iter(loader)
    got = [key(next(first)) for _ in range(3)]
    assert got == REF[0][:3] and position(loader) == (0, 3)
    second = iter(loader)  # a new pass: epoch 0 from its start, not batch 3
    assert position(loader) == (0, 0)
    assert key(next(second)) == REF[0][0] and position(loader) == (0, 1)
    with pytest.raises(TokenmillError, match="superseded"):
        next(first)  # the old pass no longer owns the position
    assert [key(b) for b in second] == REF[0][1:] and position(loader) == (1, 0)
    for _ in loader:  # a pass left early is not continued; the epoch stays until a pass ends
        break
    assert position(loader) == (1, 1)
    assert [key(b) for b in loader] == REF[1]


def test_len_is_the_batches_of_an_epoch_whatever_the_position():
    loader = make()
    it = iter(loader)
    next(it)
    assert len(loader) == N
    resumed = make()
    resumed.load_state_dict(loader.state_dict())
    assert len(resumed) == N and len(list(resumed)) == N - 1  # the resumed pass: the rest of the epoch


@pytest.mark.parametrize("wrap", [False, True], ids=["loader", "DataLoader"])
def test_state_mid_epoch_resumes_exactly_in_a_fresh_loader(wrap):
    def passes(loader):
        return torch.utils.data.DataLoader(loader, batch_size=None) if wrap else loader

    a = make()
    it = iter(passes(a))
    got = [key(next(it)) for _ in range(5)]
    state = a.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (0, 5)
    b = make()
    b.load_state_dict(state)
    b.set_epoch(0)  # the loop's set_epoch of the current epoch keeps the loaded position
    got += [key(x) for x in passes(b)]  # the first iter() after the load continues from it
    assert got == REF[0]
    assert [key(x) for x in passes(b)] == REF[1]  # then passes start epochs again
    c = make()
    c.load_state_dict(state)
    c.set_epoch(1)  # another epoch: from its start
    assert [key(x) for x in passes(c)] == REF[1]


def test_a_pass_that_handed_out_the_last_batch_is_done():
    loader = make()
    for i, _ in enumerate(loader):
        if i == N - 1:
            break  # the last batch taken, StopIteration never seen
    assert position(loader) == (0, N)
    assert [key(b) for b in loader] == REF[1]  # the next iter() is the next epoch
    resumed = make()
    resumed.load_state_dict(make().schedule.state_dict(0, N))
    assert list(resumed) == [] and [key(b) for b in resumed] == REF[1]


def test_set_epoch_and_load_state_dict_supersede_a_live_pass():
    loader = make()
    it = iter(loader)
    next(it)
    loader.set_epoch(0)  # the current epoch: nothing changes
    next(it)
    loader.set_epoch(1)
    with pytest.raises(TokenmillError, match="superseded"):
        next(it)
    it = iter(loader)
    next(it)
    loader.load_state_dict(make().state_dict())
    with pytest.raises(TokenmillError, match="superseded"):
        next(it)


def test_dataloader_workers_around_the_loader_are_refused_by_name():
    dl = torch.utils.data.DataLoader(make(), batch_size=None, num_workers=1)
    with pytest.raises(ConfigError, match=r"num_workers > 0 .*num_workers=k to TrainingLoader itself.*as_dataset"):
        next(iter(dl))


def test_stateful_dataloader_around_the_loader_resumes_exactly():
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    dl = sdl.StatefulDataLoader(make(), batch_size=None)
    assert len(dl) == N
    assert [key(b) for b in dl] == REF[0]
    a = make()
    dl = sdl.StatefulDataLoader(a, batch_size=None)
    it = iter(dl)
    got = [key(next(it)) for _ in range(4)]
    state = dl.state_dict()
    assert a.state_dict()["batches_consumed"] == 4
    del it, dl
    dl2 = sdl.StatefulDataLoader(make(), batch_size=None)
    dl2.load_state_dict(state)
    got += [key(b) for b in dl2]
    assert got == REF[0]
    end = dl2.state_dict()  # after a finished pass: the next epoch
    dl3 = sdl.StatefulDataLoader(make(), batch_size=None)
    dl3.load_state_dict(end)
    assert [key(b) for b in dl3] == REF[1]
