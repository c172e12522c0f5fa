"""coverage_report and MultiScaleWindows: golden values and agreement with per-token counting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.errors import ConfigError, InputError
from tokenmill.windows import MultiScaleWindows, SlidingWindows, coverage_report


def test_report_worked_example():
    # N=10000, W=512, S=256 (39 windows): every token covered; tokens 256..9983 sit in two windows,
    # 9488..9983 even in three (the aligned tail overlaps the last two full windows) -> max 3.
    rep = coverage_report(SlidingWindows(512, 256).plan([10000]), [10000])
    assert rep.coverage == 1.0 and rep.coverage_percent == 100.0 and rep.ok and rep.uncovered_spans.shape == (0, 3)
    assert rep.multiplicity_min == 1 and rep.multiplicity_max == 3
    assert rep.windows_per_doc.tolist() == [39]
    assert rep.multiplicity_mean == pytest.approx(39 * 512 / 10000)
    assert rep.tokens_never_scored == 1  # token 0 has no context
    assert "100.00%" in rep.summary()


def test_report_uncovered_spans_and_checks():
    plan = SlidingWindows(4, 6, tail="drop").plan([0, 3, 15])
    # doc 1 (N=3): short window; doc 2: windows at 0, 6 (6+4=10), 12+4 > 15 -> uncovered [4,6), [10,15)
    rep = coverage_report(plan, [0, 3, 15])
    assert rep.uncovered_spans.tolist() == [[2, 4, 6], [2, 10, 15]]
    assert rep.covered_tokens == 11 and not rep.ok and rep.starts_monotonic and rep.lengths_ok
    assert rep.windows_per_doc.tolist() == [0, 1, 2]
    assert rep.to_dict()["uncovered_span_count"] == 2
    with pytest.raises(InputError, match=r"document 2 has 5 tokens but window \d+ needs \[.*plan and lengths disagree; pass the lengths"):
        coverage_report(plan, [0, 3, 5])
    with pytest.raises(InputError, match="documents"):
        coverage_report(plan, [0, 3])
    # a longer source or lengths (more documents, or a document grown) had passed: its extra tokens never
    # windowed, the last window's EOS label lost
    with pytest.raises(InputError, match=r"made for 3 documents of 18 tokens, but the lengths holds 4 of 19"):
        coverage_report(plan, [0, 3, 15, 1])
    eos = SlidingWindows(4, 2, template=(None, 2)).plan([5])
    with pytest.raises(InputError, match=r"made for 1 documents of 5 tokens, but the source holds 1 of 10"):
        list(eos.materialize([np.arange(10, 20)]))
    assert [w.labels.tolist()[-1] for w in eos.materialize([np.arange(10, 15)])][-1] == 2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=6), st.integers(1, 10), st.integers(1, 12),
       st.sampled_from(["align", "drop", "pad"]), st.sampled_from(["all", "new"]))
def test_report_agrees_with_per_token_counts(lengths, w, s, tail, score):
    plan = SlidingWindows(w, s, tail=tail, score=score).plan(lengths)
    rep = coverage_report(plan, lengths)
    mult = plan.multiplicity(lengths)
    tm = plan.multiplicity(lengths, targets=True)
    assert rep.covered_tokens == int((mult > 0).sum()) == plan.stats.covered_tokens
    if mult.size:
        assert (rep.multiplicity_min, rep.multiplicity_max) == (mult.min(), mult.max())
        assert rep.multiplicity_mean == pytest.approx(mult.mean())
        assert (rep.target_multiplicity_min, rep.target_multiplicity_max) == (tm.min(), tm.max())
        assert rep.tokens_never_scored == int((tm == 0).sum())
    # the uncovered spans are exactly the zero runs
    zero = np.zeros(int(sum(lengths)), bool)
    base = np.concatenate([[0], np.cumsum(lengths)])
    for d, a, b in rep.uncovered_spans.tolist():
        assert a < b and not zero[base[d] + a:base[d] + b].any()
        zero[base[d] + a:base[d] + b] = True
    assert (zero == (mult == 0)).all()
    assert rep.starts_monotonic and rep.duplicate_windows == 0 and rep.lengths_ok


def test_multiscale_plan():
    # N=20, sizes 4 (stride 2) and 8 (stride 4): 4 -> starts 0..16 step 2 (9 windows);
    # 8 -> 0, 4, 8, 12 (12+8=20): 4 windows. Rows sorted by (scale, doc, start).
    ms = MultiScaleWindows([8, 4], stride_ratio=0.5)
    plan = ms.plan([20])
    assert plan.scale.tolist() == [4] * 9 + [8] * 4
    assert plan.start.tolist() == list(range(0, 17, 2)) + [0, 4, 8, 12]
    assert [s.num_windows for s in plan.scale_stats] == [9, 4]
    assert plan.stats.num_windows == 13 and plan.stats.num_docs == 1
    rep = coverage_report(plan, [20])
    assert rep.ok and rep.multiplicity_max == 4  # up to 2 windows per scale
    # stride floor(5 * 0.5) = 2; a tiny ratio still steps by at least 1
    assert [s.stride for s in MultiScaleWindows([5, 3], stride_ratio=0.1).scales] == [1, 1]
    two_docs = MultiScaleWindows([2, 4], tail="drop").plan([4, 6])
    # scale 2 (stride 1): doc 0 starts 0..2, doc 1 starts 0..4; scale 4 (stride 2): doc 0 at 0, doc 1 at 0, 2
    assert list(zip(two_docs.scale.tolist(), two_docs.doc.tolist(), two_docs.start.tolist())) == [
        (2, 0, 0), (2, 0, 1), (2, 0, 2), (2, 1, 0), (2, 1, 1), (2, 1, 2), (2, 1, 3), (2, 1, 4),
        (4, 0, 0), (4, 1, 0), (4, 1, 2)]
    assert coverage_report(two_docs, [4, 6]).starts_monotonic


@pytest.mark.parametrize("args, kw", [([], {}), ([4, 4], {}), ([4], {"stride_ratio": 0}),
                                      ([4], {"stride": 2}), ([0], {}), ([4], {"stide_ratio": 0.5})])
def test_multiscale_errors(args, kw):
    with pytest.raises(ConfigError):
        MultiScaleWindows(args, **kw)


def test_multiscale_names_an_unknown_option_and_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown option\(s\) foo;.*\bjitter\b.*\breserve\b"):
        MultiScaleWindows([4], foo=1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=6), st.lists(st.integers(1, 12), min_size=1, max_size=3, unique=True),
       st.sampled_from([0.25, 0.5, 1.0, 1.5]), st.sampled_from([None, "global", "per_doc"]),
       st.sampled_from(["align", "drop", "pad"]))
def test_multiscale_equals_per_scale_plans(lengths, sizes, ratio, jitter, tail):
    ms = MultiScaleWindows(sizes, stride_ratio=ratio, jitter=jitter, tail=tail, seed=5)
    plan = ms.plan(lengths, epoch=2)
    parts = [s.plan(lengths, epoch=2) for s in ms.scales]
    for k in ("doc", "start", "length", "target_start"):
        assert plan.__dict__[k].tolist() == sum((p.__dict__[k].tolist() for p in parts), [])
    assert plan.scale.tolist() == sum(([s.window_size] * len(p) for s, p in zip(ms.scales, parts)), [])
    assert plan.scale_stats == tuple(p.stats for p in parts)
    assert plan.stats.num_windows == len(plan)


def test_a_capped_plan_of_a_huge_document_keeps_its_starts_exact():
    """``max_windows_per_doc`` spread ``round(i * (m - 1) / (k - 1))`` computed the product in int64: for a
    document of 2**60 tokens 7 of 16 starts came out negative (both paths), and coverage_report of such a
    plan raised a bare IndexError."""
    from fractions import Fraction

    from tokenmill.windows.sliding import place

    for n, k in ((2**60, 16), (2**50, 16_384), (2**62 - 1, 3)):
        m = n  # windows of 1, stride 1
        want = [round(Fraction(i * (m - 1), k - 1)) for i in range(k)]
        for kernel in (True, False):
            cols, stats = place(np.array([n]), 1, 1, 0, max_windows_per_doc=k, kernel=kernel)
            assert cols["start"].tolist() == want and stats.windows_capped == m - k, (n, k, kernel)
    plan = SlidingWindows(1, 1, max_windows_per_doc=16).plan([2**60])
    assert coverage_report(plan, [2**60]).num_windows == 16
    with pytest.raises(InputError, match="plan and lengths disagree"):
        coverage_report(plan, [2**40])


def test_stride_ratios_are_read_as_written():
    """floor(size * stride_ratio) of the float's binary value: 0.7 (just below 7/10) made strides 6/13/69 for
    sizes 10/20/100, one short of the documented 7/14/70, silently (more overlap, more windows)."""
    from fractions import Fraction

    for ratio in (0.7, 0.3, 0.6, 0.1, np.float32(0.7), 0.5, 0.25):
        ms = MultiScaleWindows([10, 20, 100, 1000], stride_ratio=ratio)
        want = [max(1, int(w * Fraction(str(ratio)))) for w in (10, 20, 100, 1000)]
        assert [s.stride for s in ms.scales] == want, ratio
    assert MultiScaleWindows([10], stride_ratio=0.7).plan([24]).start.tolist() == [0, 7, 14]
    # ratios written as fractions: 2/3 is the double 0.6666666666666666, whose decimal form had made size 3 step 1
    # (twice the windows) and 300 step 199; a ratio that is no near fraction stays as written
    for ratio, strides in ((2 / 3, [2, 4, 6, 54, 200]), (1 / 3, [1, 2, 3, 27, 100]), (0.123456789, [1, 1, 1, 9, 37])):
        assert [s.stride for s in MultiScaleWindows([3, 6, 9, 81, 300], stride_ratio=ratio).scales] == strides, ratio


def test_multiscale_summary_counts_documents_once():
    """Per-document counters were summed over the scales: a plan of 2 documents said "3 empty, 3 shorter than
    the window". Empty documents are counted once; those shorter than the window are said per scale."""
    plan = MultiScaleWindows([4, 8, 16]).plan([0, 3, 10])
    assert plan.stats.num_docs == 3 and plan.stats.empty_docs == 1
    first = plan.summary().split("\n")[0]
    assert first == "documents 3 (1 empty; shorter than the window, by scale: 4: 1 (0 dropped), 8: 1 (0 dropped), " \
                    "16: 2 (0 dropped))"
    assert [st.short_docs for st in plan.scale_stats] == [1, 1, 2]
    # a scale without windows keeps its size in the summary (the sizes had been taken from the rows)
    assert MultiScaleWindows([4, 16], short="drop").plan([10]).summary().split("\n")[0] == \
        "documents 1 (0 empty; shorter than the window, by scale: 4: 0 (0 dropped), 16: 1 (1 dropped))"
    assert plan.select([0]).scale_sizes == (4, 8, 16)


def test_the_report_counted_a_group_of_documents_at_a_time_is_the_report_counted_at_once(monkeypatch):
    """coverage_report sweeps a group of whole documents at a time (memory in the group, not the plan: ~220 bytes a
    window had been held at once); the report is the same whatever the group's size, for plans in document order
    and out of it (a multi-scale plan lists its scales one after the other)."""
    from tokenmill.windows import coverage as C

    rng = np.random.default_rng(7)
    for trial in range(12):
        lengths = rng.integers(0, 60, int(rng.integers(1, 40))).tolist()
        plan = (MultiScaleWindows([8, 16], stride_ratio=0.75).plan(lengths) if trial % 2 else
                SlidingWindows(int(rng.integers(2, 12)), int(rng.integers(1, 15)), tail="drop").plan(lengths))
        monkeypatch.setattr(C, "_CHUNK", 1 << 20)
        ref = coverage_report(plan, lengths)
        for chunk in (1, 2, 5):
            monkeypatch.setattr(C, "_CHUNK", chunk)
            got = coverage_report(plan, lengths)
            assert got.to_dict() == ref.to_dict() and got.summary() == ref.summary()
            assert got.uncovered_spans.tolist() == ref.uncovered_spans.tolist()
    assert trial % 2 and not (np.diff(plan.doc) >= 0).all()  # (the last plan is out of document order)
