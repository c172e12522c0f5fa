"""Packing: a worked example (two documents in one block), hand-drawn masks, every method, long documents, invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.batching import PackPlan, chunk_stream, pack
from tokenmill.errors import ConfigError, InputError

BOS, EOS, PAD = 1, 2, 0
JIA, YI, BING = 10, 11, 12
A = [BOS, JIA, YI, EOS]
B = [BOS, BING, EOS]
METHODS = ["best_fit", "first_fit_decreasing", "greedy", "concat"]


def only_block(plan, docs, **kw):
    blocks = list(plan.blocks(docs, pad_id=PAD, **kw))
    assert len(blocks) == 1
    return blocks[0]


def test_packed_worked_example():
    # A (4) and B (3) in one block of 7: no padding, 7 positions; B's BOS label is ignored so A's EOS
    # never predicts it: targets 甲 乙 EOS 丙 EOS = 5; positions restart for B: 0 1 2 3 0 1 2.
    block = only_block(pack([4, 3], 7), [A, B])
    assert block.input_ids.tolist() == [BOS, JIA, YI, EOS, BOS, BING, EOS]
    assert block.labels.tolist() == [-100, JIA, YI, EOS, -100, BING, EOS]
    assert block.position_ids.tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert block.doc_ids.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert block.cu_seqlens.tolist() == [0, 4, 7] and block.cu_seqlens.dtype == np.int32
    assert block.max_seqlen == 4
    s = block.stats()
    assert (s.positions, s.non_pad, s.targets, s.padding) == (7, 7, 5, 0)


def test_packed_mask_hand_drawn():
    # 丙 (position 5) reads only B's BOS and itself; nothing of A.
    expected = np.array([
        # 0  1  2  3  4  5  6      keys
        [1, 0, 0, 0, 0, 0, 0],  # 0 BOS(A)
        [1, 1, 0, 0, 0, 0, 0],  # 1 甲
        [1, 1, 1, 0, 0, 0, 0],  # 2 乙
        [1, 1, 1, 1, 0, 0, 0],  # 3 EOS(A)
        [0, 0, 0, 0, 1, 0, 0],  # 4 BOS(B)
        [0, 0, 0, 0, 1, 1, 0],  # 5 丙
        [0, 0, 0, 0, 1, 1, 1],  # 6 EOS(B)
    ], dtype=bool)
    assert (only_block(pack([4, 3], 7), [A, B]).dense_mask() == expected).all()


def test_padding_is_its_own_segment_and_pad_eq_eos():
    block = next(pack([4, 3], 9).blocks([A, B], pad_id=EOS))
    assert block.input_ids.tolist() == [BOS, JIA, YI, EOS, BOS, BING, EOS, EOS, EOS]
    assert block.labels.tolist() == [-100, JIA, YI, EOS, -100, BING, EOS, -100, -100]
    assert block.position_ids.tolist() == [0, 1, 2, 3, 0, 1, 2, 0, 1]
    assert block.doc_ids.tolist() == [0, 0, 0, 0, 1, 1, 1, -1, -1]
    assert block.cu_seqlens.tolist() == [0, 4, 7, 9]
    mask = block.dense_mask()
    assert mask[8].tolist() == [False] * 7 + [True, True]
    assert not mask[7:, :7].any() and not mask[:7, 7:].any()


def test_concat_is_a_stream_on_purpose():
    # Plain text stream: one causal triangle, positions 0..6, A's EOS -> B's BOS is a target (6 targets).
    block = only_block(pack([4, 3], 7, method="concat"), [A, B])
    assert block.labels.tolist() == [-100, JIA, YI, EOS, BOS, BING, EOS]
    assert block.position_ids.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert block.doc_ids.tolist() == [0, 0, 0, 0, 1, 1, 1]  # still says where every token came from
    assert block.cu_seqlens.tolist() == [0, 7]
    assert block.dense_mask().tolist() == np.tril(np.ones((7, 7), bool)).tolist()
    # the documents it cuts at block edges are counted as split (it had said "split 0 documents")
    cut = pack([4, 3, 5, 20, 2], 6, method="concat")
    assert cut.split_docs == 2 and "split 2 documents" in str(cut)  # the 3 (tokens 4-6 of the stream) and the 20
    assert pack([3, 3, 6], 6, method="concat").split_docs == 0


def test_stream_override_on_document_plan():
    block = only_block(pack([4, 3], 7), [A, B], stream=True)
    assert block.position_ids.tolist() == list(range(7))
    assert block.labels[4] == BOS


def test_split_fragments_restart_or_continue():
    doc = list(range(100, 110))  # 10 tokens, block 4 -> pieces 4, 4, 2
    plan = pack([10], 4, seed=None)
    assert [plan.segments(b) for b in range(3)] == [[(0, 0, 4)], [(0, 4, 4)], [(0, 8, 2)]]
    assert (plan.split_docs, plan.truncated_tokens, plan.boundary_targets) == (1, 0, 2)
    restart = list(plan.blocks([doc], pad_id=PAD))
    assert [b.position_ids.tolist() for b in restart] == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 1]]
    cont = list(plan.blocks([doc], pad_id=PAD, fragment_positions="continue"))
    assert [b.position_ids.tolist() for b in cont] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert [b.token_offsets.tolist() for b in cont] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, -1, -1]]
    # Each piece's first token has no context in its block: 9 possible targets, 7 scored, 2 counted lost.
    assert sum(b.stats().targets for b in restart) == 9 - plan.boundary_targets


def test_concat_counts_every_block_start_as_a_lost_target():
    """In stream layout every token of the stream but its first is a target, so each block's first token
    is lost, a document's start as well as a continuation; ``boundary_targets`` had counted continuations
    only (``[4, 4, 6]`` in blocks of 4 scored 10 of 13, and said 1 lost)."""
    rng = np.random.default_rng(0)
    for _ in range(100):
        lengths = rng.integers(0, 9, int(rng.integers(1, 8))).tolist()
        if not sum(lengths):
            continue
        plan = pack(lengths, int(rng.integers(1, 7)), method="concat")
        docs = [list(range(1, n + 1)) for n in lengths]
        scored = sum(b.stats().targets for b in plan.batches(docs, batch_size=1, pad_id=PAD))
        assert scored == sum(lengths) - 1 - plan.boundary_targets
    assert pack([4, 4, 6], 4, method="concat").boundary_targets == 3


def test_long_docs_truncate_and_error():
    plan = pack([10, 3], 4, long_docs="truncate")
    assert (plan.tokens, plan.truncated_docs, plan.truncated_tokens) == (7, 1, 6)
    with pytest.raises(ConfigError, match=r"document 0 has 10 tokens, more than block_size=4; pass long_docs="):
        pack([10, 3], 4, long_docs="error")


def test_best_fit_beats_greedy_on_a_small_case():
    lengths = [6, 3, 6, 3, 4, 2, 4]  # 28 tokens, block 8: at least 4 blocks
    # Best-fit decreasing: 6 | 6 | 4+4 | 3+3, then 2 goes to the fullest block with room 2 (the 3+3
    # block, most recently filled among equal rooms): 4 blocks, the optimum.
    bf = pack(lengths, 8, method="best_fit", seed=None)
    assert [sorted(n for _, _, n in bf.segments(b)) for b in range(bf.num_blocks)] == [[6], [6], [4, 4], [2, 3, 3]]
    # In order: 6 (3 would make 9) | 3 (+6 = 9) | 6 | 3+4 (+2 = 9) | 2+4: 5 blocks.
    assert pack(lengths, 8, method="greedy").num_blocks == 5


def test_plan_is_deterministic_for_a_seed():
    lengths = np.random.default_rng(1).integers(1, 300, 500)
    a, b, c = pack(lengths, 512, seed=7), pack(lengths, 512, seed=7), pack(lengths, 512, seed=8)
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("doc", "start", "length", "block_ptr"))
    assert not np.array_equal(a.doc, c.doc)
    assert a.num_blocks == c.num_blocks


def test_source_mismatch_is_refused():
    plan = pack([4, 3], 7)
    with pytest.raises(InputError, match="the source has 1 documents but the plan was made for 2"):
        next(plan.blocks([A], pad_id=PAD))
    with pytest.raises(InputError, match="document 1 has 4 tokens in the source but 3 in the plan"):
        next(plan.blocks([A, A], pad_id=PAD))


def test_batches_stack_blocks():
    docs = [list(range(1, n + 1)) for n in (5, 3, 2, 4, 4, 1)]
    plan = pack([len(d) for d in docs], 6)
    batches = list(plan.batches(docs, batch_size=2, pad_id=PAD))
    assert [b.shape for b in batches] == [(2, 6)] * (plan.num_blocks // 2) + [(1, 6)] * (plan.num_blocks % 2)
    assert sum(b.stats().targets for b in batches) == sum(len(d) - 1 for d in docs)
    again = list(plan.blocks(docs, pad_id=PAD, batch_size=2))
    assert all(np.array_equal(x.input_ids, y.input_ids) for x, y in zip(batches, again))


class FlatSource:
    """A memory-mapped-store lookalike: all ids in one array plus document offsets."""

    def __init__(self, docs, dtype=np.uint16):
        self.lengths = np.array([len(d) for d in docs], np.int64)
        self.doc_offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.token_array = np.concatenate([np.asarray(d, dtype) for d in docs])

    def __len__(self):
        return self.lengths.size

    def get(self, i):
        return self.token_array[self.doc_offsets[i] : self.doc_offsets[i + 1]]


def test_flat_source_gathers_the_same_blocks(tmp_path):
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 60000, n) for n in rng.integers(1, 40, 200)]
    src = FlatSource(docs)
    path = tmp_path / "tokens.u16"
    src.token_array.tofile(path)
    src.token_array = np.memmap(path, dtype=np.uint16, mode="r")
    plan = pack(src, 32)
    for x, y in zip(plan.blocks(src, pad_id=PAD), plan.blocks(docs, pad_id=PAD)):
        assert np.array_equal(x.input_ids, y.input_ids) and np.array_equal(x.labels, y.labels)


# ---- invariants ----------------------------------------------------------------------------------
lengths_st = st.lists(st.integers(0, 40), min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_st, block_size=st.integers(1, 24), method=st.sampled_from(METHODS),
       long_docs=st.sampled_from(["split", "truncate"]), seed=st.one_of(st.none(), st.integers(0, 3)))
def test_every_token_packed_exactly_once(lengths, block_size, method, long_docs, seed):
    plan = pack(lengths, block_size, method=method, long_docs=long_docs, seed=seed)
    plan.validate()
    assert (plan.block_tokens <= block_size).all()
    covered = {}
    for b in range(plan.num_blocks):
        for d, s, n in plan.segments(b):
            for t in range(s, s + n):
                assert (d, t) not in covered
                covered[(d, t)] = b
    kept = {(d, t) for d, n in enumerate(lengths)
            for t in range(n if long_docs == "split" or method == "concat" else min(n, block_size))}
    assert set(covered) == kept
    assert plan.tokens + plan.truncated_tokens == sum(lengths)
    if method != "concat" and long_docs == "split":
        # No document that fits a block is ever cut.
        for b in range(plan.num_blocks):
            for d, s, n in plan.segments(b):
                if lengths[d] <= block_size:
                    assert (s, n) == (0, lengths[d])


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=12), block_size=st.integers(1, 16),
       method=st.sampled_from(METHODS), fragment_positions=st.sampled_from(["restart", "continue"]),
       batch_size=st.integers(1, 4))
def test_materialized_batches_are_consistent(lengths, block_size, method, fragment_positions, batch_size):
    docs = [[1000 * d + t for t in range(n)] for d, n in enumerate(lengths)]
    plan = pack(lengths, block_size, method=method)
    seen = []
    for batch in plan.batches(docs, batch_size=batch_size, pad_id=PAD, fragment_positions=fragment_positions):
        B, T = batch.shape
        cu = batch.cu_seqlens
        assert cu.dtype == np.int32 and cu[0] == 0 and cu[-1] == B * T and (np.diff(cu) > 0).all()
        assert set(np.arange(1, B) * T) <= set(cu.tolist())  # no segment crosses a row
        assert batch.max_seqlen == np.diff(cu).max()
        real = batch.doc_ids >= 0
        assert (batch.attention_mask == real).all()
        assert (batch.labels[~real] == -100).all()
        starts = np.zeros(B * T, bool)
        starts[cu[:-1]] = True
        assert (batch.labels.ravel()[starts] == -100).all()  # nothing predicts across a boundary
        ids = batch.input_ids[real]
        assert (ids == 1000 * batch.doc_ids[real] + batch.token_offsets[real]).all()
        seen += list(zip(batch.doc_ids[real].tolist(), batch.token_offsets[real].tolist()))
        mask = batch.dense_mask()
        assert mask[:, np.arange(T), np.arange(T)].all()  # every row attends at least to itself
        assert not np.triu(mask, 1).any()
    assert sorted(seen) == [(d, t) for d, n in enumerate(lengths) for t in range(n)]


def test_summary_mentions_what_was_not_packed_as_is():
    text = str(pack([10, 3, 0], 4, long_docs="truncate"))
    assert "truncated 1 (6 tokens)" in text and "1 empty document" in text


def test_bad_options():
    with pytest.raises(ConfigError, match="method='nope'"):
        pack([1], 4, method="nope")
    with pytest.raises(ConfigError, match="block_size=0"):
        pack([1], 0)
    with pytest.raises(InputError, match="document 1 has length -1"):
        pack([1, -1], 4)
    with pytest.raises(ConfigError, match="fragment_positions='x'"):
        next(pack([1], 4).blocks([[5]], pad_id=0, fragment_positions="x"))


def test_empty_plan():
    plan = pack([], 8)
    assert plan.num_blocks == 0 and plan.fill == 0.0  # (as an empty batch's fill_rate; it had said 100%)
    assert list(plan.blocks([], pad_id=0)) == []
    assert isinstance(plan, PackPlan)


def test_stream_shards_count_their_lost_targets_and_drop_last_is_said():
    """From a probe: a shard or selection of a concat plan counted the first block it holds as the stream's start
    (rank 1 lost 2 targets and said 1); the blocks drop_last leaves out were counted nowhere."""
    import warnings

    p = pack([4, 4, 4, 4], 4, method="concat")
    assert p.boundary_targets == 3
    assert p.shard(0, 2).boundary_targets + p.shard(1, 2).boundary_targets == 3
    for sub in (p.shard(1, 2), p.select([1]), p.select([0])):
        lost = sum(int((b.labels[:, 0] == -100).sum()) for b in sub.batches([np.arange(4)] * 4, batch_size=1, pad_id=0))
        assert sub.boundary_targets == lost - (1 if 0 in sub.doc[:1].tolist() and sub.start[0] == 0 else 0)
    q = pack([3] * 5, 3)
    with pytest.warns(UserWarning, match=r"drop_last=True leaves out the last 1 of 5 blocks \(3 tokens\)"):
        assert len(list(q.batches([np.arange(3)] * 5, batch_size=2, pad_id=0, drop_last=True))) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(q.batches([np.arange(3)] * 5, batch_size=5, pad_id=0, drop_last=True))) == 1


# ---- long documents as a stream ------------------------------------------------------------------
def test_chunk_stream_scores_every_target_once():
    # 10 tokens, T=4: samples [0..4] [4..8] [8..9]; targets t1..t4, t5..t8, t9: each exactly once.
    c = chunk_stream(10, 4)
    assert c.start.tolist() == [0, 4, 8] and c.length.tolist() == [5, 5, 2]
    assert c.targets == 9 and c.dropped_targets == 0
    d = chunk_stream(10, 4, last="drop")
    assert d.length.tolist() == [5, 5] and (d.targets, d.dropped_targets, d.dropped_tokens) == (8, 1, 1)
    assert chunk_stream(9, 4).length.tolist() == [5, 5]  # 8 targets, exactly two full samples


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 60), T=st.integers(1, 10))
def test_chunk_stream_targets_tile_the_document(n, T):
    from tokenmill.batching import pad_batch

    c = chunk_stream(n, T)
    assert c.targets == max(n - 1, 0)
    if len(c) == 0:
        return
    assert (c.length <= T + 1).all()
    doc = np.arange(n)
    batch = pad_batch([doc[s : s + k] for s, k in zip(c.start, c.length)], pad_id=0,
                      doc_ids=np.zeros(len(c), np.int64), starts=c.start)
    s = batch.stats()
    assert s.targets == n - 1 and s.duplicate_targets == 0


# ---- data parallelism and resumption -------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 30), min_size=0, max_size=30), world=st.integers(1, 4))
def test_shards_cover_the_plan_once_and_run_equal_steps(lengths, world):
    plan = pack(lengths, 32)
    shards = [plan.shard(r, world) for r in range(world)]
    assert len({s.num_blocks for s in shards}) == 1  # same number of steps on every rank
    for s in shards:
        s.validate()
    segs = sorted(seg for s in shards for b in range(s.num_blocks) for seg in s.segments(b))
    assert segs == sorted(seg for b in range(plan.num_blocks) for seg in plan.segments(b))
    assert sum(s.tokens for s in shards) == plan.tokens


def test_empty_block_of_an_even_shard_has_no_targets():
    docs = [[1, 2, 3, 4, 5]] * 3
    shard = pack([5, 5, 5], 6).shard(1, 2)
    blocks = list(shard.blocks(docs, pad_id=0))
    assert [b.stats().targets for b in blocks] == [4, 0]
    assert blocks[1].labels.tolist() == [-100] * 6 and blocks[1].cu_seqlens.tolist() == [0, 6]
    assert pack([5, 5, 5], 6).shard(1, 2, even=False).num_blocks == 1


def test_resume_from_a_block():
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 100, n) for n in rng.integers(1, 20, 40)]
    plan = pack([len(d) for d in docs], 24)
    full = [b.input_ids.tolist() for b in plan.blocks(docs, pad_id=0)]
    tail = [r.tolist() for batch in plan.batches(docs, batch_size=3, pad_id=0, start_block=5) for r in batch.input_ids]
    assert tail == full[5:]
    with pytest.raises(ConfigError, match="start_block=99"):
        next(plan.batches(docs, batch_size=3, pad_id=0, start_block=99))


def test_batches_on_threads_equal_one_thread():
    import dataclasses

    from tokenmill.batching.packing import pack as _pack

    rng = np.random.default_rng(5)
    docs = [rng.integers(0, 1000, n) for n in rng.integers(1, 300, 200)]
    plan = _pack([len(d) for d in docs], 256)
    one = list(plan.batches(docs, batch_size=8, pad_id=0))
    for threads in (2, 3):
        many = list(plan.batches(docs, batch_size=8, pad_id=0, num_threads=threads))
        assert len(many) == len(one)
        for a, b in zip(one, many):
            for f in dataclasses.fields(a):
                x, y = getattr(a, f.name), getattr(b, f.name)
                assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f.name


def _plan_by_sorting(lengths, T, method, long_docs, seed):
    """The plan as pack made it before its counting sorts: lexsort, the pure-Python kernels, argsort."""
    from tokenmill.batching import packing, reference

    doc, start, length, _ = packing._items(np.array(lengths, np.int64), T, long_docs)
    if method != "greedy":
        order = np.lexsort((start, doc, -length))
        doc, start, length = doc[order], start[order], length[order]
    kernel = {"best_fit": reference.best_fit, "first_fit_decreasing": reference.first_fit, "greedy": reference.greedy}
    assign, nblocks = kernel[method](length.tolist(), T)
    assign = np.array(assign, np.int64)
    if seed is not None and method != "greedy":
        assign = np.random.default_rng(seed).permutation(nblocks)[assign]
    by_block = np.argsort(assign, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(assign, minlength=nblocks))])
    return doc[by_block], start[by_block], length[by_block], ptr


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), max_size=120), T=st.sampled_from([1, 7, 16, 33, 10**6]),
       method=st.sampled_from(["best_fit", "first_fit_decreasing", "greedy"]),
       long_docs=st.sampled_from(["split", "truncate"]), seed=st.sampled_from([None, 0, 7]))
def test_plan_equals_the_sorting_twin(lengths, T, method, long_docs, seed):
    plan = pack(lengths, T, method=method, long_docs=long_docs, seed=seed)
    want = _plan_by_sorting(lengths, T, method, long_docs, seed)
    for got, ref in zip((plan.doc, plan.start, plan.length, plan.block_ptr), want):
        assert got.tolist() == ref.tolist()


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), max_size=120), T=st.sampled_from([1, 7, 16, 33, 10**6]),
       method=st.sampled_from(["best_fit", "greedy"]), long_docs=st.sampled_from(["split", "truncate"]),
       seed=st.sampled_from([None, 0, 7]))
def test_first_run_plan_twin_equals_the_kernels(lengths, T, method, long_docs, seed):
    """pack on a first run (kernels not compiled, small plan) places items with the pure-Python twin
    (numpy items, reference loops, stable sort): the same plan, array for array."""
    from tokenmill.batching import packing

    saved = packing._python_first
    try:
        packing._python_first = lambda *a: False  # compiled, even where the kernels are not in the cache yet
        compiled = pack(lengths, T, method=method, long_docs=long_docs, seed=seed)
        packing._python_first = lambda *a: True
        twin = pack(lengths, T, method=method, long_docs=long_docs, seed=seed)
    finally:
        packing._python_first = saved
    for name in ("doc", "start", "length", "block_ptr"):
        a, b = getattr(compiled, name), getattr(twin, name)
        assert a.dtype == b.dtype == np.int64 and a.tolist() == b.tolist(), name
    for name in ("truncated_docs", "truncated_tokens", "split_docs", "empty_docs", "stream", "complete"):
        assert getattr(compiled, name) == getattr(twin, name), name
    twin.validate()


def test_first_run_pack_rule(monkeypatch, first_run):
    from tokenmill import _jit
    from tokenmill.batching import packing

    small = np.array([5, 300, 7], np.int64)
    assert packing._python_first(small, 8, "best_fit", "split")
    assert not packing._python_first(np.array([8 * packing.FIRST_RUN_PYTHON_ITEMS + 1]), 8, "best_fit", "split")
    assert packing._python_first(np.array([8 * packing.FIRST_RUN_PYTHON_ITEMS + 1]), 8, "greedy", "truncate")
    plan = pack([5, 30, 7, 0], 8)
    assert "pack" in _jit.twins_used and plan.tokens == 42


def _fields_equal(a, b, *, same_dtype=True):
    import dataclasses

    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y) and (x.dtype == y.dtype or not same_dtype), f.name
        else:
            assert x == y, f.name


class _FlatSource:
    """A source with the flat layout of a store (token_array + doc_offsets)."""

    def __init__(self, docs):
        self.lengths = np.array([len(d) for d in docs], np.int64)
        self.doc_offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.token_array = np.concatenate(docs).astype(np.uint32)

    def __len__(self):
        return self.lengths.size

    def get(self, i):
        return self.token_array[self.doc_offsets[i] : self.doc_offsets[i + 1]]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), block_size=st.sampled_from([8, 33, 64]), method=st.sampled_from(METHODS),
       fragment_positions=st.sampled_from(["restart", "continue"]), threads=st.sampled_from([1, 2]))
def test_int32_indices_and_reused_memory_give_the_same_batches(seed, block_size, method, fragment_positions, threads):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 50_000, n) for n in rng.integers(1, 90, 40)]
    plan = pack([len(d) for d in docs], block_size, method=method)
    for source in (docs, _FlatSource(docs)):
        kw = dict(batch_size=3, pad_id=0, fragment_positions=fragment_positions)
        ref = list(plan.batches(source, reuse_memory=False, **kw))
        held = list(plan.batches(source, num_threads=threads, **kw))  # all kept alive: nothing may be reused
        small = list(plan.batches(source, num_threads=threads, index_dtype=np.int32, **kw))
        assert len(ref) == len(held) == len(small)
        for r, h, s in zip(ref, held, small):
            _fields_equal(r, h)
            _fields_equal(r, s, same_dtype=False)
            assert s.position_ids.dtype == s.doc_ids.dtype == s.token_offsets.dtype == np.int32
            assert s.input_ids.dtype == s.labels.dtype == np.int64


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_segment_tables_prepared_ahead_equal_the_per_batch_path(monkeypatch, threads):
    """plan.batches prepares the segment tables of a flat source for many blocks at once (chunks of
    _FlatTables.BLOCKS); with tiny chunks every batch boundary, resume point and thread count must
    still give exactly the batches of the per-batch path (a list source)."""
    from tokenmill.batching import packing

    monkeypatch.setattr(packing._FlatTables, "BLOCKS", 5)
    rng = np.random.default_rng(11)
    docs = [rng.integers(0, 60_000, n) for n in rng.integers(1, 120, 150)]
    for method in ("best_fit", "concat"):
        plan = pack([len(d) for d in docs], 48, method=method)
        for start_block, batch_size, drop_last in ((0, 2, False), (7, 3, True), (plan.num_blocks - 1, 4, False)):
            for index_dtype in (np.int64, np.int32):
                kw = dict(batch_size=batch_size, pad_id=0, start_block=start_block, drop_last=drop_last,
                          index_dtype=index_dtype)
                ref = list(plan.batches(docs, reuse_memory=False, **kw))
                got = list(plan.batches(_FlatSource(docs), num_threads=threads, **kw))
                assert len(got) == len(ref) > 0
                for r, g in zip(ref, got):
                    _fields_equal(r, g)


@pytest.mark.parametrize("method", ["best_fit", "concat"])
def test_first_run_layout_twin_equals_the_kernel(monkeypatch, method):
    """On a first run small batches are laid out by the numpy twin (reference.assemble): the same
    batches, dtypes included, from list and flat sources, for every option."""
    from tokenmill.batching import layout

    rng = np.random.default_rng(4)
    docs = [rng.integers(0, 60_000, n) for n in rng.integers(1, 70, 60)]
    plan = pack([len(d) for d in docs], 32, method=method)
    cases = [dict(fragment_positions=f, index_dtype=i, stream=st_) for f in ("restart", "continue")
             for i in (np.int64, np.int32) for st_ in (None, True)]
    monkeypatch.setattr(layout, "_python_first", lambda positions: False)  # compiled
    want = {(j, k): list(plan.batches(src, batch_size=3, pad_id=7, **kw))
            for j, src in enumerate((docs, _FlatSource(docs))) for k, kw in enumerate(cases)}
    monkeypatch.setattr(layout, "_python_first", lambda positions: True)
    for (j, k), ref in want.items():
        src = (docs, _FlatSource(docs))[j]
        got = list(plan.batches(src, batch_size=3, pad_id=7, **cases[k]))
        assert len(got) == len(ref)
        for r, g in zip(ref, got):
            _fields_equal(r, g)


def test_reused_memory_never_overwrites_what_is_still_referenced():
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 1000, n) for n in rng.integers(1, 60, 300)]
    plan = pack([len(d) for d in docs], 64)
    src = _FlatSource(docs)
    ref = [b.input_ids.copy() for b in plan.batches(src, batch_size=4, pad_id=0, reuse_memory=False)]
    kept, addresses = [], set()
    for i, b in enumerate(plan.batches(src, batch_size=4, pad_id=0)):
        addresses.add(b.input_ids.ctypes.data)
        if i % 3 == 0:
            kept.append((i, b.input_ids[1:]))  # a view keeps the whole buffer alive
    assert len(addresses) < len(ref)  # dropped batches lent their memory to later ones
    assert len(kept) > 3
    for i, view in kept:
        assert np.array_equal(view, ref[i][1:])


def test_batches_options_are_checked():
    plan = pack([3, 4], 8)
    with pytest.raises(ConfigError, match="index_dtype"):
        next(plan.batches([[1, 2, 3], [1, 2, 3, 4]], batch_size=1, pad_id=0, index_dtype=np.int16))


def test_a_bad_plan_on_the_flat_path_is_refused_with_its_reason():
    src = _FlatSource([np.arange(5), np.arange(6)])
    lengths = np.array([5, 6], np.int64)

    def ro(*xs):  # sealed arrays: taken as the plan's own, unchecked (as tokenmill's own plans are)
        from tokenmill._arrays import seal

        return [seal(np.array(x, np.int64)) for x in xs]

    # made by hand (writeable arrays): checked when made
    with pytest.raises(InputError, match="block 0 holds 11 tokens, more than block_size=8"):
        PackPlan(8, "best_fit", np.array([0, 1]), np.array([0, 0]), lengths, np.array([0, 2]), lengths)
    with pytest.raises(InputError, match="reaches outside its document"):
        PackPlan(8, "best_fit", np.array([1]), np.array([3]), np.array([5]), np.array([0, 1]), lengths)
    # unchecked, the flat path's own checks still refuse them
    too_full = PackPlan(8, "best_fit", *ro([0, 1], [0, 0], lengths, [0, 2], lengths))
    with pytest.raises(ConfigError, match="more than row_length"):
        next(too_full.batches(src, batch_size=1, pad_id=0))
    outside = PackPlan(8, "best_fit", *ro([1], [3], [5], [0, 1], lengths))
    with pytest.raises(InputError):
        next(outside.batches(src, batch_size=1, pad_id=0))


def test_a_plan_written_between_two_batches_cannot_reach_past_its_arrays():
    """A plan's arrays were writeable views, its segment table checked once per chunk of batches: a
    ``length`` written after the first batch made the layout kernel read and write past its arrays
    (a segmentation fault). The arrays are the plan's own, read-only."""
    docs = [np.arange(1, 5), np.arange(10, 13), np.arange(20, 26), np.arange(30, 32)]
    plan = pack([4, 3, 6, 2], 7)
    it = plan.batches(docs, batch_size=1, pad_id=0)
    next(it)
    for name in ("doc", "start", "length", "block_ptr", "doc_lengths"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(plan, name)[:] = 10**6
    assert [b.input_ids.tolist() for b in it] == [b.input_ids.tolist() for b in plan.batches(docs, batch_size=1,
                                                                                                pad_id=0)][1:]
    mine = np.array([4, 3, 6, 2])  # a plan keeps its own copy of what it was handed
    by_hand = PackPlan(7, "best_fit", plan.doc.copy(), plan.start.copy(), plan.length.copy(), plan.block_ptr.copy(),
                       mine)
    mine[:] = 0
    assert by_hand.doc_lengths.tolist() == [4, 3, 6, 2]
    # nor can a plan's arrays be made writeable again (that had reached the same segmentation fault)
    for name in ("doc", "start", "length", "block_ptr", "doc_lengths"):
        with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
            getattr(plan, name).flags.writeable = True


def test_a_pickled_plan_comes_back_sealed():
    """A plan pickled to a spawned DataLoader worker came back with writeable, unsealed arrays (__post_init__ does
    not run on unpickling): written there, they reached the layout kernel unchecked."""
    import copy
    import pickle

    docs = [np.arange(1, 5), np.arange(10, 13), np.arange(20, 26), np.arange(30, 32)]
    plan = pack([4, 3, 6, 2], 7)
    for back in (pickle.loads(pickle.dumps(plan)), copy.deepcopy(plan)):
        for name in ("doc", "start", "length", "block_ptr", "doc_lengths"):
            assert getattr(back, name).tolist() == getattr(plan, name).tolist()
            with pytest.raises(ValueError, match="cannot set WRITEABLE flag"):
                getattr(back, name).flags.writeable = True
        assert [b.input_ids.tolist() for b in back.batches(docs, batch_size=1, pad_id=0)] == \
            [b.input_ids.tolist() for b in plan.batches(docs, batch_size=1, pad_id=0)]


def test_a_plan_of_read_only_arrays_is_copied_and_checked():
    """Read-only arrays had been taken as tokenmill's own, unchecked and not copied: read-only views of arrays
    the caller kept writing (a segmentation fault when written between two batches) or a memory-mapped plan
    whose segment ran past its document (document 1's tokens trained as document 0's). Only arrays tokenmill
    made and sealed are kept as they are."""
    docs = [np.arange(1, 5), np.arange(10, 13), np.arange(20, 26), np.arange(30, 32)]
    plan = pack([4, 3, 6, 2], 7)
    mine = {k: np.array(getattr(plan, k)) for k in ("doc", "start", "length", "block_ptr")}

    def view(a):
        v = a.view()
        v.flags.writeable = False
        return v

    by_hand = PackPlan(7, plan.method, *(view(mine[k]) for k in ("doc", "start", "length", "block_ptr")),
                       plan.doc_lengths)
    it = by_hand.batches(docs, batch_size=1, pad_id=0)
    first = next(it)
    mine["length"][:] = 10**7  # the caller's arrays written: the plan holds its own copies
    want = [b.input_ids.tolist() for b in plan.batches(docs, batch_size=1, pad_id=0)]
    assert [first.input_ids.tolist()] + [b.input_ids.tolist() for b in it] == want

    def frozen(*v):
        a = np.array(v, np.int64)
        a.flags.writeable = False
        return a

    lengths = frozen(3, 3)
    with pytest.raises(InputError, match="reaches outside its document"):
        PackPlan(8, "best_fit", frozen(0), frozen(0), frozen(5), frozen(0, 1), lengths)
    with pytest.raises(InputError, match=r"names a document outside 0 \.\. 1"):  # (a raw IndexError in batches)
        PackPlan(8, "best_fit", frozen(5), frozen(0), frozen(2), frozen(0, 1), lengths)


@pytest.mark.parametrize("method", ["best_fit", "concat"])
def test_provenance_read_later_equals_what_the_layout_pass_writes(monkeypatch, method):
    """plan.batches leaves doc_ids and token_offsets to be derived on first read (compiled pass, or
    its numpy twin on a first run); both must equal what the layout pass writes when asked to, for
    every option, from list and flat sources."""
    import dataclasses

    from tokenmill import _jit
    from tokenmill.batching import batch as batch_module
    from tokenmill.batching import layout, packing

    rng = np.random.default_rng(21)
    docs = [rng.integers(0, 60_000, n) for n in rng.integers(1, 70, 60)]
    plan = pack([len(d) for d in docs], 32, method=method)
    cases = [dict(fragment_positions=f, index_dtype=i, stream=s) for f in ("restart", "continue")
             for i in (np.int64, np.int32) for s in (None, True)]
    monkeypatch.setattr(layout, "_python_first", lambda positions: False)  # the layout kernel itself
    outputs = layout.batch_outputs

    def eager_outputs(N, idx, buffers, provenance=True):
        return outputs(N, idx, buffers)

    for src in (docs, _FlatSource(docs)):
        for kw in cases:
            with monkeypatch.context() as m:
                m.setattr(layout, "batch_outputs", eager_outputs)
                m.setattr(packing, "batch_outputs", eager_outputs)
                want = list(plan.batches(src, batch_size=3, pad_id=7, reuse_memory=False, **kw))
            for twin in (False, True):
                with monkeypatch.context() as m:
                    m.setattr(_jit, "python_first",
                              lambda family, kernels, size, limit, twin=twin: twin and family == "provenance")
                    got = list(plan.batches(src, batch_size=3, pad_id=7, **kw))
                    assert len(got) == len(want) > 1
                    for g, w in zip(got, want):
                        assert type(g.__dict__["_doc_ids"]) is batch_module.Provenance  # not written yet
                        assert isinstance(w.__dict__["_doc_ids"], np.ndarray)
                        _fields_equal(g, w)
                        assert g.__dict__["_token_offsets"] is g.token_offsets  # derived once, then kept
    b = next(plan.batches(docs, batch_size=3, pad_id=7))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.doc_ids = b.doc_ids
    assert dataclasses.replace(b, max_seqlen=1).doc_ids is b.doc_ids


def test_negative_ids_of_an_in_memory_source_are_refused():
    """A list source's id -100 became an ignored label in the packed batch: a target dropped, silently."""
    from tokenmill.errors import InputError

    with pytest.raises(InputError, match="document 1 holds token id -100 at position 1"):
        next(pack([2, 3], 8).batches([[5, 6], [1, -100, 3]], batch_size=1, pad_id=0))
    b = next(pack([2, 3], 8).batches([[5, 6], [1, 2, 3]], batch_size=1, pad_id=0))
    assert sorted(b.input_ids[0][:5].tolist()) == [1, 2, 3, 5, 6]
