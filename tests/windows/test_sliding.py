"""SlidingWindows: golden values (derivations in comments), invariants, parity with the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill._gather import gather_rows, gather_rows_py
from tokenmill.errors import ConfigError, InputError
from tokenmill.windows import MultiScaleWindows, SlidingWindows
from tokenmill.windows.reference import reference_target_starts, reference_window_arrays, reference_windows
from tokenmill.windows.sliding import spread_indices


def rows(plan, d=None):
    sel = np.ones(len(plan), bool) if d is None else plan.doc == d
    return list(zip(plan.start[sel].tolist(), plan.length[sel].tolist()))


# -- golden values ---------------------------------------------------------------------------------


def test_worked_example_10000_512_256():
    # N=10000, W=512, stride=256. Full windows start at 0, 256, ..., k*256 while
    # k*256 + 512 <= 10000, i.e. k <= (10000-512)/256 = 37.06 -> k = 0..37: 38 full windows
    # (not 37). The last full one starts at 37*256 = 9472 and ends at 9984 (not 9216..9727).
    # 16 tokens remain, so the aligned tail starts at 10000-512 = 9488: 39 windows.
    plan = SlidingWindows(512, 256).plan([10000])
    assert len(plan) == 39
    assert plan.stats.full_windows == 38 and plan.stats.tail_windows == 1
    assert plan.start[:3].tolist() == [0, 256, 512]
    assert plan.start[-2:].tolist() == [9472, 9488]
    assert (plan.length == 512).all()
    assert plan.stats.covered_tokens == 10000 and plan.stats.coverage == 1.0
    # drop: the 16 tokens 9984..9999 stay uncovered and are reported
    drop = SlidingWindows(512, 256, tail="drop").plan([10000])
    assert len(drop) == 38 and drop.stats.uncovered_tail == 16
    # pad: the stride grid's next start 38*256 = 9728 gives a short window of 10000-9728 = 272 tokens
    pad = SlidingWindows(512, 256, tail="pad").plan([10000])
    assert rows(pad)[-1] == (9728, 272) and len(pad) == 39


def test_small_worked_example():
    # N=11, C=4, S=3: full at 0, 3, 6 (6+4=10 <= 11; 9+4=13 > 11); token 10 remains -> tail at 7.
    assert rows(SlidingWindows(4, 3).plan([11])) == [(0, 4), (3, 4), (6, 4), (7, 4)]
    # N=10: the last full window (6..9) ends exactly at N: no tail, so never a duplicate.
    assert rows(SlidingWindows(4, 3).plan([10])) == [(0, 4), (3, 4), (6, 4)]


def test_short_and_empty_documents():
    sw = SlidingWindows(8, 4)
    plan = sw.plan([0, 5, 8])
    # doc 0 (N=0): nothing; doc 1 (N=5 < 8): one short window [0, 5); doc 2 (N=8): exactly one full.
    assert plan.doc.tolist() == [1, 2]
    assert rows(plan) == [(0, 5), (0, 8)]
    assert plan.stats.empty_docs == 1 and plan.stats.short_docs == 1 and plan.stats.short_windows == 1
    drop = SlidingWindows(8, 4, short="drop").plan([0, 5, 8])
    assert rows(drop) == [(0, 8)] and drop.stats.uncovered_short == 5 and drop.stats.short_docs_dropped == 1


def test_start_offset_is_clamped():
    # offset 7 in N=10, C=4: first start min(7, 10-4) = 6 -> one full window; 6 head tokens uncovered.
    plan = SlidingWindows(4, 2, start_offset=7).plan([10])
    assert rows(plan) == [(6, 4)] and plan.stats.uncovered_head == 6
    # offset 1 in N=10: 1, 3, 5 (5+4=9), 7+4=11 > 10 -> tail at 6
    assert rows(SlidingWindows(4, 2, start_offset=1).plan([10])) == [(1, 4), (3, 4), (5, 4), (6, 4)]
    # short documents ignore the offset: max(N-W, 0) = 0
    assert rows(SlidingWindows(4, 2, start_offset=3).plan([3])) == [(0, 3)]


def test_stride_larger_than_window_reports_gaps():
    # N=20, C=4, S=6: full at 0, 6, 12 (12+4=16), 18+4=22 > 20 -> align tail at 16.
    # Uncovered: 4..5, 10..11 = 4 gap tokens; the tail [16, 20) covers the end.
    plan = SlidingWindows(4, 6).plan([20])
    assert rows(plan) == [(0, 4), (6, 4), (12, 4), (16, 4)]
    assert plan.stats.uncovered_gap == 4 and plan.stats.covered_tokens == 16
    # pad: the grid's next start 18 < 20 -> short [18, 20); tokens 16, 17 are a gap.
    pad = SlidingWindows(4, 6, tail="pad").plan([20])
    assert rows(pad) == [(0, 4), (6, 4), (12, 4), (18, 2)] and pad.stats.uncovered_gap == 6
    # pad with the next grid start past the end: N=17, starts 0, 6, 12 (16 <= 17), next 18 >= 17.
    assert rows(SlidingWindows(4, 6, tail="pad").plan([17])) == [(0, 4), (6, 4), (12, 4)]


def test_max_windows_per_doc_spreads_evenly():
    # N=40, C=4, S=4: 10 windows at 0, 4, ..., 36. k=4 keeps indices round(i*9/3) = 0, 3, 6, 9.
    plan = SlidingWindows(4, 4, max_windows_per_doc=4).plan([40])
    assert plan.start.tolist() == [0, 12, 24, 36] and plan.stats.windows_capped == 6
    # m=4, k=3: i*3/2 = 0, 1.5, 3 -> round half to even: 0, 2, 3
    assert SlidingWindows(4, 4, max_windows_per_doc=3).plan([16]).start.tolist() == [0, 8, 12]
    # k=1 keeps the first; k >= m keeps all
    assert SlidingWindows(4, 4, max_windows_per_doc=1).plan([16]).start.tolist() == [0]
    assert len(SlidingWindows(4, 4, max_windows_per_doc=9).plan([16])) == 4
    # the aligned tail is the last window and is kept: N=42 -> 0..36 (10) + tail 38; k=2 -> 0, 38
    assert SlidingWindows(4, 4, max_windows_per_doc=2).plan([42]).start.tolist() == [0, 38]


def test_spread_indices_matches_python_round():
    for m in range(2, 40):
        for k in range(1, m):
            got = spread_indices(np.arange(k), np.full(k, m), k).tolist()
            want = [0] if k == 1 else [round(i * (m - 1) / (k - 1)) for i in range(k)]
            assert got == want, (m, k)


def test_labels_positions_and_score_new():
    ids = np.arange(100, 110)  # N=10, W=4, S=2: windows at 0, 2, 4, 6 (6+4=10)
    sw = SlidingWindows(4, 2, score="new", positions="absolute")
    ws = list(sw.windows(ids))
    assert [w.offset for w in ws] == [0, 2, 4, 6]
    # window 0 scores tokens 1..3 (token 0 has no context); window 1 (2..5) scores only the new 4, 5
    assert ws[0].labels.tolist() == [-100, 101, 102, 103]
    assert ws[1].labels.tolist() == [-100, -100, 104, 105]
    assert ws[1].position_ids.tolist() == [2, 3, 4, 5]
    assert ws[1].attention_mask.dtype == bool and ws[1].attention_mask.all()
    # score="all": every target after the first position of every window
    ws_all = list(SlidingWindows(4, 2).windows(ids))
    assert ws_all[1].labels.tolist() == [-100, 103, 104, 105]
    assert ws_all[1].position_ids.tolist() == [0, 1, 2, 3]
    plan = sw.plan([10])
    # each token 1..9 scored exactly once, token 0 never
    assert plan.multiplicity([10], targets=True).tolist() == [0] + [1] * 9
    assert plan.stats.target_tokens == plan.stats.unique_targets == 9


def test_template_and_reserve():
    # window_size=6 with (bos, eos): 4 content tokens per window; N=6, S=2 -> starts 0, 2.
    sw = SlidingWindows(6, 2, template=(1, 2))
    assert sw.capacity == 4
    ws = list(sw.windows(np.array([10, 11, 12, 13, 14, 15])))
    assert [w.input_ids.tolist() for w in ws] == [[1, 10, 11, 12, 13, 2], [1, 12, 13, 14, 15, 2]]
    # bos makes the first content token a target; eos is a target only where the document ends
    assert ws[0].labels.tolist() == [-100, 10, 11, 12, 13, -100]
    assert ws[1].labels.tolist() == [-100, 12, 13, 14, 15, 2]
    assert SlidingWindows(6, 2, reserve=3).capacity == 3
    assert SlidingWindows(6, 2, reserve=1, template=(1, 2)).capacity == 4  # the template fills the reserve
    assert SlidingWindows(6, 2, reserve=3, template=(1, None)).capacity == 3
    absolute = list(SlidingWindows(6, 2, template=(1, 2), positions="absolute").windows(np.arange(6)))
    assert absolute[1].position_ids.tolist() == [2, 3, 4, 5, 6, 7]  # positions in [bos] + document


def test_extras_are_cut_the_same_way():
    ids = np.arange(8)
    tt = np.arange(8) % 2
    # content 3 per window (bos takes one of 4), stride 3: starts 0, 3, then the aligned tail at 5
    ws = list(SlidingWindows(4, 3, template=(99, None)).windows(ids, token_type_ids=tt))
    assert [w.offset for w in ws] == [0, 3, 5]
    assert ws[0].extras["token_type_ids"].tolist() == [0, 0, 1, 0]
    assert ws[1].input_ids.tolist() == [99, 3, 4, 5] and ws[1].extras["token_type_ids"].tolist() == [0, 1, 0, 1]
    plan = SlidingWindows(4, 4).plan([8, 3])
    got = list(plan.materialize([ids, ids[:3]], extras={"loss_mask": [tt, tt[:3]]}))
    assert [w.extras["loss_mask"].tolist() for w in got] == [[0, 1, 0, 1], [0, 1, 0, 1], [0, 1, 0]]
    assert [w.doc for w in got] == [0, 0, 1]
    with pytest.raises(InputError, match="extra 'x'"):
        next(SlidingWindows(4, 4).windows(ids, x=np.zeros(3)))
    # an extra named like a window's own field would replace it in to_dict (an extra 'labels' made the
    # bos a target): refused, by windows and by materialize
    for name in ("labels", "input_ids", "attention_mask", "position_ids", "offset"):
        with pytest.raises(ConfigError, match=f"extra '{name}' has the name of a window's own field"):
            next(SlidingWindows(4, 2, template=(99, None)).windows(ids, **{name: ids}))
        with pytest.raises(ConfigError, match=f"extra '{name}'"):
            next(plan.materialize([ids, ids[:3]], extras={name: [tt, tt[:3]]}))


def test_low_level_planners_take_lists_and_refuse_bad_counts():
    """``count_windows``/``place_windows`` take a list of lengths (an AttributeError before);
    ``jitter_offsets`` refuses a negative count by name (numpy's "negative dimensions" before)."""
    sw = SlidingWindows(4, 2)
    assert sw.count_windows([10, 3], 0) == sw.count_windows(np.array([10, 3]), 0) == sw.place_windows([10, 3], 0)[1].num_windows
    with pytest.raises(InputError, match="lengths"):
        sw.count_windows([10, -3], 0)
    with pytest.raises(ConfigError, match="num_docs"):
        SlidingWindows(4, 2, jitter="per_doc").jitter_offsets(-1, 0)


def test_place_windows_refuses_out_columns_longer_than_the_plan():
    """Columns of more rows than the plan's windows: the rows past them would hold whatever ``out`` held
    (the compiled path returned them, and counted them as windows; the numpy path refused)."""
    sw = SlidingWindows(4, 2)
    lengths = np.array([9, 5], np.int64)
    n = sw.count_windows(lengths, 0)
    cols, stats = sw.place_windows(lengths, 0)
    assert stats.num_windows == n == cols["doc"].size
    exact = {k: np.empty(n, np.int64) for k in ("doc", "start", "length", "target_start")}
    got, _ = sw.place_windows(lengths, 0, out=exact)
    assert all(got[k].tolist() == cols[k].tolist() for k in cols)
    for rows in (n + 3, n - 1):
        out = {k: np.full(rows, 7, np.int64) for k in ("doc", "start", "length", "target_start")}
        with pytest.raises(ConfigError, match=f"out columns hold {rows}|of the plan's {n} rows"):  # compiled|numpy
            sw.place_windows(lengths, 0, out=out)


def test_jitter_is_reproducible_and_in_range():
    g = SlidingWindows(64, 16, jitter="global", seed=7)
    a, b = g.plan([1000, 900], epoch=3), g.plan([1000, 900], epoch=3)
    assert (a.start == b.start).all()
    j = a.stats.jitter
    assert 0 <= j < 16 and a.start[a.doc == 0][0] == j and a.start[a.doc == 1][0] == j
    assert len({g.plan([1000], epoch=e).stats.jitter for e in range(30)}) > 1
    p = SlidingWindows(64, 16, jitter="per_doc", seed=7)
    offs = p.jitter_offsets(500, epoch=2)
    assert offs.min() >= 0 and offs.max() < 16 and len(set(offs.tolist())) > 1
    plan = p.plan(np.full(500, 1000), epoch=2)
    firsts = plan.start[np.r_[0, np.flatnonzero(np.diff(plan.doc)) + 1]]
    assert (firsts == offs).all()
    assert SlidingWindows(64, 16).jitter_offsets(3) == 0
    # windows() of one sequence as document 3 equals document 3's rows of the corpus plan
    ws = list(p.windows(np.arange(1000), epoch=2, doc=3))
    assert [w.offset for w in ws] == plan.start[plan.doc == 3].tolist() and {w.doc for w in ws} == {3}
    # a document far into a corpus: its jitter is drawn in blocks, the documents before it never placed
    d = (1 << 20) + 5
    big = p.jitter_offsets(d + 1, epoch=2)
    ws = list(p.windows(np.arange(1000), epoch=2, doc=d))
    assert ws[0].offset == big[d] and {w.doc for w in ws} == {d}
    ws = list(SlidingWindows(64, 16).windows(np.arange(100), doc=2**40))  # no jitter: nothing drawn
    assert {w.doc for w in ws} == {2**40} and [w.offset for w in ws] == [0, 16, 32, 36]
    with pytest.raises(InputError, match="per_doc.*plan"):
        next(p.windows(np.arange(100), doc=2**40))


@pytest.mark.parametrize("kw, match", [
    (dict(window_size=0, stride=1), "window_size"),
    (dict(window_size=4, stride=0), "stride"),
    (dict(window_size=4, stride=1, reserve=4), "reserve"),
    (dict(window_size=2, stride=1, template=(1, 2)), "template"),
    (dict(window_size=4, stride=1, tail="wrap"), "tail"),
    (dict(window_size=4, stride=1, jitter="local"), "jitter"),
    (dict(window_size=4, stride=1, max_windows_per_doc=0), "max_windows_per_doc"),
    (dict(window_size=4.0, stride=1), "window_size"),
])
def test_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        SlidingWindows(**kw)


def test_numpy_scalar_options_are_kept_as_python_ints():
    """An option given as a numpy scalar is checked and kept as a Python int, so the planners' sums never run in
    its width: a window of 2**31 beside ``reserve=np.int8(5)`` overflowed int8 (found by ``make fuzz``)."""
    from tokenmill.windows import SemanticWindows

    sw = SlidingWindows(2**31, np.int8(1), reserve=np.int8(5), start_offset=np.uint16(3), seed=np.int64(7),
                        max_windows_per_doc=np.int32(2), template=(np.int16(1), None))
    for name in ("window_size", "stride", "reserve", "start_offset", "seed", "max_windows_per_doc"):
        assert type(getattr(sw, name)) is int, name
    assert sw.template == (1, None) and type(sw.template[0]) is int
    assert sw.capacity == 2**31 - 5
    plan = sw.plan([10, 0], epoch=np.int8(1))
    assert plan.length.tolist() == [10]
    sem = SemanticWindows(np.int8(100), overlap_units=np.int8(1), reserve=np.int8(90))
    assert (type(sem.window_size), type(sem.reserve), sem.capacity) == (int, int, 10)


def test_input_errors():
    with pytest.raises(InputError, match="length -1"):
        SlidingWindows(4, 2).plan([3, -1])
    with pytest.raises(ConfigError, match="epoch"):
        SlidingWindows(4, 2).plan([3], epoch=-1)


def test_public_exports():
    assert tokenmill.SlidingWindows is SlidingWindows
    assert tokenmill.WindowPlan.__name__ == "WindowPlan"


# -- invariants and parity with the reference ------------------------------------------------------

configs = st.fixed_dictionaries({
    "window_size": st.integers(1, 12),
    "stride": st.integers(1, 15),
    "start_offset": st.integers(0, 10),
    "tail": st.sampled_from(["align", "drop", "pad"]),
    "short": st.sampled_from(["keep", "drop"]),
    "max_windows_per_doc": st.one_of(st.none(), st.integers(1, 6)),
    "score": st.sampled_from(["all", "new"]),
    "reserve": st.integers(0, 2),
})
lengths_st = st.lists(st.integers(0, 60), max_size=8)


def build(cfg):
    cfg = dict(cfg)
    cfg["reserve"] = min(cfg["reserve"], cfg["window_size"] - 1)
    return SlidingWindows(**cfg)


@settings(max_examples=300, deadline=None)
@given(configs, lengths_st)
def test_plan_matches_reference(cfg, lengths):
    sw = build(cfg)
    plan = sw.plan(lengths)
    for d, n in enumerate(lengths):
        want = reference_windows(n, sw.capacity, sw.stride, offset=sw.start_offset, tail=sw.tail,
                                 short=sw.short, max_windows=sw.max_windows_per_doc)
        assert rows(plan, d) == want
        assert plan.target_start[plan.doc == d].tolist() == reference_target_starts(want, score=sw.score)


@settings(max_examples=200, deadline=None)
@given(configs, lengths_st)
def test_plan_invariants(cfg, lengths):
    sw = build(cfg)
    plan = sw.plan(lengths)
    L = np.asarray(lengths, np.int64)
    assert (plan.length >= 1).all() and (plan.length <= sw.capacity).all()
    assert (plan.end <= L[plan.doc]).all() if len(plan) else True
    assert (np.diff(plan.doc) >= 0).all()
    same = np.diff(plan.doc) == 0
    assert (np.diff(plan.start)[same] > 0).all()  # strictly increasing starts: no duplicate windows
    assert (np.diff(plan.end)[same] >= 0).all()
    mult = plan.multiplicity(L)
    st_ = plan.stats
    assert st_.covered_tokens == int((mult > 0).sum()) and st_.window_tokens == int(mult.sum())
    assert st_.uncovered_head + st_.uncovered_gap + st_.uncovered_tail + st_.uncovered_short == st_.uncovered_tokens
    assert min(st_.uncovered_head, st_.uncovered_gap, st_.uncovered_tail, st_.uncovered_short) >= 0
    tm = plan.multiplicity(L, targets=True)
    assert st_.target_tokens == int(tm.sum()) and st_.unique_targets == int((tm > 0).sum())
    if sw.score == "new":
        assert tm.max(initial=0) <= 1
    if (sw.tail == "align" and sw.stride <= sw.capacity and sw.start_offset == 0 and sw.short == "keep"
            and sw.max_windows_per_doc is None):
        assert (mult > 0).all()  # every token covered
    # tokens in a window that no window scores, other than documents' first tokens (no context
    # before them unless a bos precedes), are counted in unscored_tokens
    firsts = np.concatenate([[0], np.cumsum(L)[:-1]])[L > 0]
    lost = (mult > 0) & (tm == 0)
    if sw.bos is None:
        lost[firsts] = False
    assert st_.unscored_tokens == int(lost.sum())
    if sw.score == "new" and sw.tail == "align" and sw.stride <= sw.capacity and sw.start_offset == 0 \
            and sw.max_windows_per_doc is None and sw.short == "keep":
        # each token but the documents' first is scored at most once; with overlap (stride < capacity)
        # exactly once. With stride == capacity the first token of every later window has no context
        # in its window, so it is never a target: those are the unscored_tokens, not an error.
        expect = np.ones(int(L.sum()), np.int32)
        expect[firsts] = 0
        expect[lost] = 0
        assert (tm == expect).all()
        if sw.stride < sw.capacity or sw.bos is not None:
            assert st_.unscored_tokens == 0


def test_stride_equal_to_capacity_reports_the_unscored_window_starts():
    plan = SlidingWindows(4, 4, score="new").plan([10])  # windows [0,4) [4,8) [6,10) (aligned tail)
    tm = plan.multiplicity([10], targets=True)
    assert tm.tolist() == [0, 1, 1, 1, 0, 1, 1, 1, 1, 1]  # token 4 starts window 1: nothing before it
    assert plan.stats.unscored_tokens == 1 and "1 covered but never scored" in plan.summary()


@settings(max_examples=100, deadline=None)
@given(configs, lengths_st, st.sampled_from([None, (1, 2), (1, None), (None, 2)]),
       st.sampled_from(["reset", "absolute"]))
def test_materialized_windows_match_reference(cfg, lengths, template, positions):
    cfg = dict(cfg, window_size=cfg["window_size"] + 2, template=template, positions=positions)
    sw = build(cfg)
    rng = np.random.default_rng(len(lengths))
    docs = [rng.integers(3, 1000, n) for n in lengths]
    plan = sw.plan(lengths)
    for w in plan.materialize(docs):
        r = w.index
        want = reference_window_arrays(docs[w.doc].tolist(), int(plan.start[r]), int(plan.length[r]),
                                       int(plan.target_start[r]), lengths[w.doc], bos=sw.bos, eos=sw.eos,
                                       absolute=positions == "absolute")
        assert w.input_ids.tolist() == want["input_ids"]
        assert w.labels.tolist() == want["labels"]
        assert w.position_ids.tolist() == want["position_ids"]
        assert len(w) <= sw.window_size


@settings(max_examples=50, deadline=None)
@given(configs, lengths_st, st.sampled_from([np.uint16, np.uint32, np.int64]))
def test_gather_matches_materialize_and_reference(cfg, lengths, dtype):
    sw = build(cfg)
    plan = sw.plan(lengths)
    flat = np.random.default_rng(1).integers(1, 60000, int(sum(lengths))).astype(dtype)
    offs = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    ids, n = plan.gather(flat, offs, pad_id=0)
    assert ids.dtype == dtype and (n == plan.length).all()
    docs = [flat[offs[d]:offs[d + 1]] for d in range(len(lengths))]
    for w in plan.materialize(docs):
        assert ids[w.index, :n[w.index]].tolist() == w.input_ids.tolist()
        assert (ids[w.index, n[w.index]:] == 0).all()
    src = offs[plan.doc] + plan.start
    out = np.empty_like(ids)
    gather_rows_py(flat, src, plan.length, out, 7)
    out2 = np.empty_like(ids)
    gather_rows(flat, src, plan.length, out2, 7)
    assert (out == out2).all()


def test_gather_from_memmap(tmp_path):
    path = tmp_path / "tokens.bin"
    data = np.arange(1000, dtype=np.uint16)
    data.tofile(path)
    mm = np.memmap(path, dtype=np.uint16, mode="r")
    plan = SlidingWindows(128, 64).plan([600, 400])
    ids, n = plan.gather(mm, np.array([0, 600, 1000]))
    assert ids.shape == (len(plan), 128) and ids[-1].tolist() == list(range(872, 1000))


@settings(max_examples=200, deadline=None)
@given(configs, lengths_st, st.booleans(), st.sampled_from([None, "per_doc"]))
def test_compiled_fill_matches_numpy_twin(cfg, lengths, bos, jitter):
    from tokenmill.windows.sliding import as_lengths, place

    sw = build(dict(cfg, jitter=jitter))
    L = as_lengths(lengths)
    off = sw.start_offset + sw.jitter_offsets(L.size, 1)
    kw = dict(tail=sw.tail, short=sw.short, max_windows_per_doc=sw.max_windows_per_doc, score=sw.score, bos=bos)
    a_cols, a_stats = place(L, sw.capacity, sw.stride, off, kernel=True, **kw)
    b_cols, b_stats = place(L, sw.capacity, sw.stride, off, kernel=False, **kw)
    for k in a_cols:
        assert a_cols[k].tolist() == b_cols[k].tolist(), k
    assert a_stats == b_stats


def _plan_arrays(plan):
    return {k: np.asarray(getattr(plan, k)).tolist() for k in ("doc", "start", "length", "target_start", "scale")}


@pytest.mark.parametrize("windows", [SlidingWindows(64, 48, tail="align", jitter="per_doc", seed=3),
                                     SlidingWindows(50, 50, tail="pad", short="drop", max_windows_per_doc=3),
                                     SlidingWindows(40, 16, tail="drop", score="new", jitter="global", seed=1),
                                     MultiScaleWindows([96, 32], stride_ratio=0.75, tail="pad")])
def test_first_run_twins_plan_and_gather_like_the_kernels(monkeypatch, windows):
    """On a first run (kernels not compiled) plans are counted and placed by the numpy twin (a
    multi-scale plan's slices filled in place) and windows gathered by the Python twin: equal results."""
    from tokenmill import _gather
    from tokenmill.windows import sliding

    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 400, 300)
    tokens = rng.integers(0, 60_000, int(lengths.sum())).astype(np.uint16)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def run():
        plan = windows.plan(lengths, epoch=2)
        ids, n = plan.gather(tokens, offsets, pad_id=9)
        return _plan_arrays(plan), plan.stats, ids.tolist(), n.tolist()

    monkeypatch.setattr(sliding, "_python_first", lambda num_docs: False)
    monkeypatch.setattr(_gather, "_python_first", lambda kernel, positions: False)
    want = run()  # compiled
    twins = []
    monkeypatch.setattr(sliding, "_python_first", lambda num_docs: twins.append("plan") or True)
    monkeypatch.setattr(_gather, "_python_first", lambda kernel, positions: twins.append("gather") or True)
    assert run() == want
    assert {"plan", "gather"} <= set(twins)


def test_first_run_windows_rule(monkeypatch, first_run):
    from tokenmill import _jit
    from tokenmill.windows import sliding

    assert not sliding._python_first(sliding.FIRST_RUN_PYTHON_DOCS + 1)  # too large: compile once
    plan = SlidingWindows(8, 4).plan([20, 3, 0])
    assert len(plan) == 5 and "windows plan" in _jit.twins_used
    ids, n = plan.gather(np.arange(23, dtype=np.int32), np.array([0, 20, 23, 23]))
    assert n.tolist() == [8, 8, 8, 8, 3] and ids[-1].tolist() == [20, 21, 22, 0, 0, 0, 0, 0]
    assert "windows gather" in _jit.twins_used
    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")
    assert not sliding._python_first(1)


def test_gather_refuses_offsets_that_disagree_with_the_plan():
    """``gather`` checked the windows against the token array only: offsets that made document 0 two tokens
    long read document 1's tokens into document 0's window, silently."""
    plan = SlidingWindows(4, 4).plan([4, 4])
    with pytest.raises(InputError, match=r"window 0 reads tokens \[0, 4\) of document 0, which doc_offsets make 2 "
                                         "tokens long"):
        plan.gather(np.arange(8), np.array([0, 2, 8]))
    with pytest.raises(InputError, match="doc_offsets has 2 entries but the plan names document 1"):
        plan.gather(np.arange(8), np.array([0, 4]))
    ids, n = plan.gather(np.arange(8), np.array([0, 4, 8]))
    assert ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]] and n.tolist() == [4, 4]
    with pytest.raises(InputError, match="token_ids holds -100"):  # an id of -100 would read as an ignored label
        list(SlidingWindows(4, 2).windows([1, -100, 3, 4]))


def test_gather_names_a_foreign_byte_order_and_an_out_over_its_tokens():
    """A big-endian array reached numba ("Unsupported array dtype: >u2"), and an out over the tokens was
    written while later rows read it (wrong windows)."""
    import numpy as np

    from tokenmill import SlidingWindows
    from tokenmill.errors import ConfigError, InputError

    plan = SlidingWindows(3, 2).plan([4, 2])
    offs = np.array([0, 4, 6])
    with pytest.raises(InputError, match="tokens has dtype >u2, not in this machine's byte order"):
        plan.gather(np.arange(6, dtype=">u2"), offs)
    with pytest.raises(InputError, match="out has dtype >u2, not in this machine's byte order"):
        plan.gather(np.arange(6, dtype=np.uint16), offs, out=np.zeros((3, 3), ">u2"))
    t = np.arange(12, dtype=np.int64)
    with pytest.raises(ConfigError, match="out shares memory with tokens"):
        plan.gather(t, offs, out=t[:9].reshape(3, 3))


def test_a_window_plans_columns_are_read_only():
    """A plan's target_start written after it was made turned a window's first token into a target when it
    was materialized (silently); its columns are read-only."""
    from tokenmill import SlidingWindows

    plan = SlidingWindows(4, 2).plan([10, 3])
    for name in ("doc", "start", "length", "target_start"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(plan, name)[:] = 0


def test_a_plan_made_by_hand_of_lists_is_read_as_int64_columns_or_refused():
    """WindowPlan's columns given as lists had stayed lists: ``plan.end`` (start + length) joined two lists, and
    materializing raised from inside numpy; they are now int64 columns, checked, one row per window."""
    from tokenmill.windows.sliding import PlanStats, WindowPlan

    stats = PlanStats(*[0] * 18)
    plan = WindowPlan([0, 0], [0, 2], [2, 2], [0, 2], [4, 4], stats)
    assert plan.end.tolist() == [2, 4] and plan.doc.dtype == np.int64 and not plan.doc.flags.writeable
    with pytest.raises(ConfigError, match="WindowPlan.start has 1 rows, WindowPlan.doc 2"):
        WindowPlan([0, 0], [0], [2, 2], [0, 2], [4, 4], stats)
    with pytest.raises(ConfigError, match="WindowPlan.doc has dtype float64; it must hold integers"):
        WindowPlan([0.5, 0], [0, 2], [2, 2], [0, 2], [4, 4], stats)
    # rows a planner never makes are named where they are read: a window's first token as a target without a bos
    # (it had been given a label), a negative length (numpy's "negative dimensions are not allowed")
    docs, stats4 = [np.arange(4)], PlanStats(1, 4, 2, *[0] * 15)
    for ts, length in (([1, 2], [2, 2]), ([1, 3], [2, -1])):
        bad = WindowPlan([0, 0], [0, 2], length, ts, [4, 4], stats4)
        with pytest.raises(InputError, match="window 1 of the plan has start 2, .* target_start lies in"):
            list(bad.materialize(docs))
    ok = WindowPlan([0, 0], [0, 2], [2, 2], [1, 3], [4, 4], stats4)
    assert [w.labels.tolist() for w in ok.materialize(docs)] == [[-100, 1], [-100, 3]]
