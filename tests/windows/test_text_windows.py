"""Tokenizer-facing parts: chunk_text spans, assemble_context, BM25, preview, SemanticWindows."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenmill
from tokenmill.errors import ConfigError, InputError
from tokenmill.windows import (
    SemanticWindows,
    SlidingWindows,
    assemble_context,
    bm25_scores,
    chunk_text,
    coverage_report,
    preview,
)

TEXT = ("滑动窗口把长文档切成一段一段。每个窗口不超过模型上限！\n\n"
        "Sliding windows cut long documents. Each window fits the model? Yes.\n"
        "Overlap keeps context; 重叠保留上下文。")


class Bytes:
    """A byte-level tokenizer: one token per UTF-8 byte (tokens split characters)."""

    vocab_size = 256

    def encode_ordinary(self, text):
        return list(text.encode())

    def token_bytes(self, i):
        return bytes([i])

    def decode_bytes(self, ids):
        return bytes(ids)

    def decode(self, ids, errors="replace"):
        return bytes(ids).decode("utf-8", errors)


@pytest.fixture(scope="module")
def bpe():
    return tokenmill.train_bpe([TEXT] * 3, 300)


@pytest.fixture(params=["bytes", "bpe"])
def tok(request, bpe):
    return Bytes() if request.param == "bytes" else bpe


# -- chunk_text ------------------------------------------------------------------------------------


def test_chunk_spans_are_exact(tok):
    chunks = chunk_text(TEXT, tok, 16, 8)
    ids = tok.encode_ordinary(TEXT)
    assert chunks[0].start == 0 and chunks[-1].end == len(TEXT)
    for c in chunks:
        assert TEXT[c.span] == c.text
        assert c.ids.tolist() == ids[c.token_start:c.token_end]
    # the windows are those of SlidingWindows(16, 8) over the ids
    plan = SlidingWindows(16, 8).plan([len(ids)])
    assert [c.token_start for c in chunks] == plan.start.tolist()


def test_non_overlapping_chunks_partition_the_text(tok):
    chunks = chunk_text(TEXT, tok, 7, 7, tail="pad")
    assert "".join(c.text for c in chunks) == TEXT
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))


def test_span_snapping_golden():
    # "a中b" = bytes 61 | e4 b8 ad | 62. Windows of 2 bytes, stride 2: [61 e4] [b8 ad] [62].
    # A character belongs to the token holding its first byte: 中 goes with chunk 0.
    chunks = chunk_text("a中b", Bytes(), 2, 2, tail="pad")
    assert [(c.text, c.start, c.end) for c in chunks] == [("a中", 0, 2), ("", 2, 2), ("b", 2, 3)]


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab 。中é\n😀")), max_size=40), st.integers(1, 9), st.integers(1, 9))
def test_chunk_spans_property(text, w, s):
    for c in chunk_text(text, Bytes(), w, s):
        assert text[c.span] == c.text
        # the chunk's characters are exactly those whose first byte lies in its bytes
        b0 = len(text[:c.start].encode())
        assert b0 >= c.token_start and b0 - c.token_start < 4


def test_lossy_tokenizer_is_refused():
    class Lossy(Bytes):
        def token_bytes(self, i):
            return b"xx"

    with pytest.raises(InputError, match="lossless"):
        chunk_text("abc", Lossy(), 2, 1)


# -- BM25 and context assembly ---------------------------------------------------------------------


def test_bm25_golden():
    # N=3 docs, query term 7 appears in docs 1, 2: df=2, idf = ln(1 + (3-2+.5)/(2+.5)) = ln 1.6.
    # avgdl = 7/3. doc 1: tf=2, |d|=3: 2*2.5 / (2 + 1.5*(.25 + .75*3/(7/3))) = 1.30841...
    idf = np.log(1.6)
    want1 = idf * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / (7 / 3)))
    got = bm25_scores([7, 7], [[1, 2], [7, 7, 3], [7, 1]])
    assert got[0] == 0 and got[1] == pytest.approx(want1)
    assert bm25_scores([1], []).shape == (0,)


def test_assemble_context_budget_merge_order():
    chunks = chunk_text("0123456789abcdefghij", Bytes(), 4, 2)  # starts 0, 2, ..., 16: 9 chunks
    scores = np.zeros(9)
    scores[[1, 2, 7]] = [0.9, 0.8, 0.7]
    # 1 = [2,6), 2 = [4,8) -> union 6 tokens; 7 = [14,18) adds 4 -> 10 <= 10
    pieces = assemble_context(chunks, scores, 10)
    assert [(p.token_start, p.token_end, p.text, p.chunks) for p in pieces] == [
        (2, 8, "234567", (1, 2)), (14, 18, "efgh", (7,))]
    assert pieces[0].score == 0.9 and "0123456789abcdefghij"[pieces[1].span] == "efgh"
    # budget 6: after 1 and 2 (6 tokens) nothing else fits
    assert [p.chunks for p in assemble_context(chunks, scores, 6)] == [(1, 2)]
    assert assemble_context(chunks, scores, 0) == []


def test_assemble_context_keeps_the_chunks_of_different_texts_apart():
    """Chunks of two texts in one list (a corpus searched at once): each piece is text of one source (its
    span in that text), chunks of different texts never merge, their tokens never count as overlap, and
    the pieces come text by text (the order of each text's first chunk), in document order within one.
    They had merged by token range into text found in neither, under a budget the union undercounted."""
    a, b = "The capital of France is Paris.", "Bananas are rich in potassium."
    ca, cb = chunk_text(a, Bytes(), 8, 8), chunk_text(b, Bytes(), 8, 8)
    assert {c.source for c in ca} == {tokenmill.windows.chunking.text_digest(a)} != {c.source for c in cb}
    chunks = cb + ca  # b's first: b's pieces come first
    scores = np.zeros(len(chunks))
    scores[[0, 1, len(cb), len(cb) + 1]] = [0.9, 0.2, 0.8, 0.1]  # b0, b1, a0, a1 ([0, 8) and [8, 16) of each)
    pieces = assemble_context(chunks, scores, 24)  # b0 + a0 + b1 = 24 tokens (a1 would be 32)
    assert [(p.source == cb[0].source, p.span, p.chunks) for p in pieces] == [
        (True, slice(0, 16), (0, 1)), (False, slice(0, 8), (0,))]
    for p in pieces:
        assert (a if p.source == ca[0].source else b)[p.span] == p.text
    assert sum(p.num_tokens for p in pieces) == 24
    assert len(assemble_context(chunks, scores, 16)) == 2  # b0 and a0 (8 + 8), not one merged piece
    # the same text chunked twice is one source: its chunks merge as one text's
    twice = chunk_text(a, Bytes(), 8, 8) + ca
    assert [p.text for p in assemble_context(twice, np.ones(len(twice)), None)] == [a]


def _union_size(ranges):
    """Tokens covered by ``ranges``, summed from scratch (the rule the running union must keep)."""
    covered = set()
    for a, e in ranges:
        covered.update(range(a, e))
    return len(covered)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(1, 12), st.integers(0, 60), st.integers(0, 2**32 - 1))
def test_assemble_context_picks_what_summing_the_union_again_picks(n, window, stride, budget, seed):
    """The running union (O(log n) a chunk; it summed every chosen range again: quadratic) takes the
    chunks the greedy rule takes with the union recomputed for each."""
    rng = np.random.default_rng(seed)
    text = "".join(rng.choice(list("ab c"), size=n * 3))
    chunks = chunk_text(text, Bytes(), window, stride)
    scores = rng.integers(0, 4, len(chunks)).astype(float)
    chosen, ranges = [], []
    for i in sorted(range(len(chunks)), key=lambda i: (-scores[i], i)):
        trial = ranges + [(chunks[i].token_start, chunks[i].token_end)]
        if _union_size(trial) <= budget:
            chosen.append(i)
            ranges = trial
    got = assemble_context(chunks, scores, budget)
    assert sorted(i for p in got for i in p.chunks) == sorted(chosen)
    assert sum(p.token_end - p.token_start for p in got) == _union_size(ranges) <= budget


def test_assemble_context_default_bm25():
    text = "cats sleep. dogs bark. cats purr. birds sing."
    chunks = chunk_text(text, Bytes(), 11, 11, tail="pad")
    query = list(b"cats")
    pieces = assemble_context(chunks, None, 11, query_ids=query)
    assert len(pieces) == 1 and "cat" in pieces[0].text
    with pytest.raises(ConfigError, match="query_ids"):
        assemble_context(chunks, None, 10)
    with pytest.raises(InputError, match="one score each"):
        assemble_context(chunks, [1.0], 10)
    with pytest.raises(ConfigError, match="budget_tokens"):
        assemble_context(chunks, None, -1, query_ids=query)
    # never coerced, never ignored: scores of strings, bools or None (a "9" had ranked as 9.0), query_ids beside
    # scores (they had been ignored), negative query ids
    n = len(chunks)
    for scores in (["0.1"] * n, [True] * n, [1.0] * (n - 1) + [None]):
        with pytest.raises(ConfigError, match="it must hold numbers"):
            assemble_context(chunks, scores, 10)
    with pytest.raises(ConfigError, match="not both"):
        assemble_context(chunks, [1.0] * n, 10, query_ids=query)
    with pytest.raises(InputError, match="query_ids holds -1"):
        bm25_scores([-1], [[1, 2]])
    assert [p.text for p in assemble_context(chunks, np.arange(n, dtype=np.float32), 11)] == \
        [p.text for p in assemble_context(chunks, list(range(n)), 11)]


# -- preview ---------------------------------------------------------------------------------------


def test_preview_marks_overlap_and_gaps():
    docs = [list(b"abcdefghijk"), list(b"xyz")]
    plan = SlidingWindows(4, 3).plan([11, 3])  # doc 0: 0, 3, 6, tail 7; doc 1: short [0, 3)
    pv = preview(plan, docs, Bytes(), n=5)
    assert [p.overlap_text for p in pv] == ["", "d", "g", "hij", ""]
    assert [p.new_text for p in pv] == ["abcd", "efg", "hij", "k", "xyz"]
    assert str(pv[1]).splitlines() == ["window 1  doc 0  tokens [3, 7) of 11  overlap 1", "[[d]]efg"]
    gap = preview(SlidingWindows(2, 4).plan([8]), [list(b"abcdefgh")], Bytes())
    assert gap[1].gap_tokens == 2 and "gap of 2" in str(gap[1])
    with pytest.raises(ConfigError):
        preview(plan, docs, Bytes(), n=-1)
    assert [p.new_text for p in preview(plan, docs, Bytes(), n=np.int64(2))] == ["abcd", "efg"]
    with pytest.raises(ConfigError, match="plan is a list; pass the WindowPlan"):  # (an AttributeError before)
        preview([1, 2], docs, Bytes())

    class TextOnly:  # a tokenizer with decode but no decode_bytes
        def decode(self, ids):
            return bytes(ids).decode()

    assert [p.new_text for p in preview(plan, docs, TextOnly(), n=2)] == ["abcd", "efg"]

    class Replacing:  # text alone, U+FFFD for a character's part (an HF-like decode)
        def decode(self, ids):
            return bytes(ids).decode("utf-8", "replace")

    # the overlap's cut splits é (c3 a9): with bytes it snaps forward, é in the overlap; with text alone the same
    # (the head's U+FFFD is 3 bytes: its length had been taken as an offset, y put into the overlap)
    doc = [list("xaéyz".encode())]
    split = SlidingWindows(3, 2).plan([6])
    for tok in (Bytes(), Replacing()):
        p = preview(split, doc, tok, n=2)[1]
        assert (p.overlap_text, p.new_text) == ("é", "y"), type(tok).__name__


def test_preview_does_not_cut_characters(bpe):
    ids = bpe.encode_ordinary(TEXT)
    plan = SlidingWindows(10, 5).plan([len(ids)])
    for p in preview(plan, [ids], bpe, n=len(plan)):
        assert "\ufffd" not in p.overlap_text or "\ufffd" in bpe.decode(ids[p.start:p.start + p.length])


# -- semantic windows ------------------------------------------------------------------------------


def test_cut_points_golden():
    sw = SemanticWindows(8)
    # "Hi." ends at 3 (space follows); 3.14 is not a sentence end; "now!" ends at 19; the blank
    # line "\n\n" ends at 21; "你好。" at 24; "再见" runs to the end.
    assert sw.cut_points("Hi. It is 3.14 now!\n\n你好。再见") == [3, 19, 21, 24]
    assert SemanticWindows(8, boundaries="paragraph").cut_points("a.\nb\n\nc") == [6]
    assert SemanticWindows(8, boundaries="line").cut_points("a.\nb\n\nc") == [3, 6]
    assert SemanticWindows(8, boundaries=r";").cut_points("a;b;") == [2]
    # a preset's name misspelt had been a regex of that word (cut after "sentences" only, so no cut at all)
    with pytest.raises(ConfigError, match=r"boundaries='sentences' is not one of .*did you mean 'sentence'"):
        SemanticWindows(8, boundaries="sentences")
    assert SemanticWindows(8, boundaries=r"(?:word)").cut_points("a word b") == [6]
    # closing quotes and brackets stay with their sentence, the same set after ".!?" and after "。": a
    # full-width closer after ".!?" had blocked the cut, and "》】" after "。" were cut off their sentence
    for text, cut in (("他说「Stop.」 然后走了", 9), ("Done!） Next one", 6), ("Done!) Next one", 6),
                      ("书名《好。》下一句", 6), ("注【完。】下一句", 5), ("«Oui.» Non", 6), ("Yes.\" No", 5)):
        assert sw.cut_points(text) == [cut], text


def test_plan_units_packing_golden():
    # units of 2, 3, 2, 4 tokens = [0,2) [2,5) [5,7) [7,11), C=6, overlap 1:
    # w0 = u0+u1 (5; +u2 = 7 > 6); w1 starts at u1 (overlap): u1+u2 = 5 (+u3 = 9 > 6);
    # w2 starts at u2: u2+u3 = 6.
    plan = SemanticWindows(6, overlap_units=1).plan_units([np.array([2, 3, 2, 4])])
    assert list(zip(plan.start.tolist(), plan.end.tolist())) == [(0, 5), (2, 7), (5, 11)]
    # one window fills the 6 tokens, two are cut short at a unit's end (all three had been said full)
    assert (plan.stats.full_windows, plan.stats.short_windows) == (1, 2)
    # overlap 0: w0 = u0+u1, w1 = u2+u3
    plan0 = SemanticWindows(6, overlap_units=0).plan_units([np.array([2, 3, 2, 4])])
    assert list(zip(plan0.start.tolist(), plan0.end.tolist())) == [(0, 5), (5, 11)]
    # the overlap shrinks when it and the next unit do not fit: units 3, 8, 8 with C=11:
    # w0 = u0+u1 (11); starting w1 at u1 would leave no room for u2 -> w1 = u2 alone
    p = SemanticWindows(11).plan_units([np.array([3, 8, 8])])
    assert list(zip(p.start.tolist(), p.end.tolist())) == [(0, 11), (11, 19)]


def test_unit_lengths_past_what_a_plan_holds_are_refused():
    """Units adding up past 2**63 had wrapped the int64 sum: a plan of -2**63 tokens, without a word."""
    with pytest.raises(InputError, match=r"^document 1: its units add up to 9,223,372,036,854,775,811 tokens"):
        SemanticWindows(5, overlap_units=0).plan_units([[1], [2**62, 2**62, 3]])
    with pytest.raises(InputError, match=r"^the documents' units add up to 9,223,372,036,854,775,806 tokens"):
        SemanticWindows(5, overlap_units=0).plan_units([[2**62 - 1], [2**62 - 1]])


def test_oversize_units():
    # a plain unit of 10 with C=4 is hard-split into 4, 4, 2
    p = SemanticWindows(4, overlap_units=0).plan_units([np.array([1, 10])])
    assert list(zip(p.start.tolist(), p.end.tolist())) == [(0, 1), (1, 5), (5, 9), (9, 11)]
    atomic = [np.array([False, True, False])]
    units = [np.array([2, 6, 2])]
    with pytest.raises(InputError, match="atomic segment has 6 tokens"):
        SemanticWindows(4, oversize="error").plan_units(units, atomic)
    t = SemanticWindows(4, oversize="truncate", overlap_units=0)
    plan, _, truncated, _ = t._plan(units, atomic, 0)
    # the atomic unit [2, 8) keeps [2, 6); tokens 6, 7 are truncated and uncovered
    assert list(zip(plan.start.tolist(), plan.end.tolist())) == [(0, 2), (2, 6), (8, 10)]
    assert truncated == 2 and plan.stats.uncovered_gap == 2
    s = SemanticWindows(4, oversize="split", overlap_units=0).plan_units(units, atomic)
    assert s.stats.covered_tokens == 10


def test_plan_units_refuses_bare_lengths_and_deeper_nesting():
    """``plan_units([3, 4])`` had read two documents of one unit each, and ``[[[3, 1]]]`` was flattened: one
    list of unit lengths per document, each 1-D, or a ConfigError/InputError saying so."""
    sw = SemanticWindows(8, overlap_units=0)
    with pytest.raises(ConfigError, match=r"pass \[\[3, 4\]\] for one document"):
        sw.plan_units([3, 4])
    with pytest.raises(InputError, match="document 0: unit lengths"):
        sw.plan_units([[[3, 1]]])
    assert sw.plan_units([[3, 4]]).doc.tolist() == [0]


def test_semantic_text_windows(tok):
    sw = SemanticWindows(24, overlap_units=1)
    sp = sw.plan_texts([TEXT, "", "短。"], tok)
    plan = sp.plan
    assert (plan.length <= 24).all() and sp.truncated_tokens == 0
    rep = coverage_report(plan, sp.source.lengths)
    assert rep.coverage == 1.0 and rep.starts_monotonic and rep.duplicate_windows == 0
    assert plan.doc.tolist().count(1) == 0 and plan.doc.tolist().count(2) == 1
    cuts = set(sw.cut_points(TEXT))
    ids = tok.encode_ordinary(TEXT)
    for r in np.flatnonzero(plan.doc == 0).tolist():
        span = sp.window_span(r)
        # a character belongs to the window holding its first byte
        b0 = sum(len(tok.token_bytes(i)) for i in ids[:plan.start[r]])
        b1 = sum(len(tok.token_bytes(i)) for i in ids[:plan.end[r]])
        firsts = [len(TEXT[:k].encode()) for k in range(len(TEXT))]
        assert TEXT[span] == "".join(ch for ch, f in zip(TEXT, firsts) if b0 <= f < b1)
        # windows start and end on unit edges (which sit at cut points or inside hard-split units)
        assert plan.start[r] in sp.units[:, 1] and plan.end[r] in sp.units[:, 2]
    # the windows materialize against the plan's own source
    w = next(plan.materialize(sp.source))
    assert w.input_ids.tolist() == ids[:w.input_ids.size]
    assert any(c in cuts for c in range(len(TEXT)))


def test_atomic_spans_stay_whole():
    text = "Q: what is a window? A: a slice. Next question. Another one."
    a0 = text.index("Q:")
    a1 = text.index(" Next")
    sw = SemanticWindows(40, overlap_units=0)
    sp = sw.plan_texts([text], Bytes(), atomic=[[(a0, a1)]])
    spans = [sp.window_span(r) for r in range(len(sp.plan))]
    assert any(s.start <= a0 and a1 <= s.stop for s in spans)  # instruction + response together
    with pytest.raises(InputError, match="outside"):
        sw.plan_texts([text], Bytes(), atomic=[[(0, 999)]])


def test_an_atomic_span_starting_inside_a_token_stays_whole(bpe):
    """A span that starts inside a token (the trained tokenizer's " the" holds the space before "the", as
    GPT-2's does) lost that token to the unit before it: a cut inside the span, which windows then split."""
    text = "Intro text here. Then the atomic instruction follows now. " * 2
    a0 = text.index("the atomic")
    a1 = text.index("now.") + 4
    from tokenmill.windows._text import encode_with_byte_offsets

    ids, _, bb = encode_with_byte_offsets(text, bpe)
    assert bb[np.searchsorted(bb, a0, side="right") - 1] < a0  # the span's first character is inside a token
    fits = 0
    for w in range(30, 70, 3):
        sp = SemanticWindows(w, overlap_units=0).plan_texts([text], bpe, atomic=[[(a0, a1)]])
        spans = [sp.window_span(r) for r in range(len(sp.plan))]
        n_span = len(bpe.encode_ordinary(text[a0 - 1:a1]))
        if n_span <= w:  # it fits in a window: one window holds all of it
            assert any(s.start <= a0 and a1 <= s.stop for s in spans), (w, [text[s] for s in spans])
            fits += 1
    assert fits > 5


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=8), max_size=4), st.integers(1, 10), st.integers(0, 3))
def test_semantic_invariants(unit_lists, w, ov):
    units = [np.array(u, np.int64) for u in unit_lists]
    plan = SemanticWindows(w, overlap_units=ov).plan_units(units)
    lengths = [int(u.sum()) for u in units]
    rep = coverage_report(plan, lengths)
    assert rep.coverage == 1.0 and rep.lengths_ok and rep.duplicate_windows == 0
    same = np.diff(plan.doc) == 0
    assert (np.diff(plan.start)[same] > 0).all() and (np.diff(plan.end)[same] > 0).all()


@pytest.mark.parametrize("kw", [dict(oversize="drop"), dict(boundaries="("), dict(reserve=8),
                                dict(overlap_units=-1)])
def test_semantic_config_errors(kw):
    with pytest.raises(ConfigError):
        SemanticWindows(8, **kw)


def test_text_stages_take_what_as_tokenizer_takes(bpe, tmp_path):
    """chunk_text, SemanticWindows and preview take a tokenizer file's path or a tiktoken Encoding, as
    ``as_tokenizer`` converts them (an AttributeError from inside before), with the same result; None or
    an int is a ConfigError naming it."""
    bpe.save(tmp_path / "tok.json")
    want_chunks = [(c.start, c.end, c.ids.tolist()) for c in chunk_text(TEXT, bpe, 16, 8)]
    ids = np.asarray(bpe.encode_ordinary(TEXT))
    plan = SlidingWindows(16, 8).plan([ids.size])
    want_preview = [str(p) for p in preview(plan, [ids], bpe, n=3)]
    want_semantic = SemanticWindows(16).plan_texts([TEXT], bpe).plan.length.tolist()
    for other in (str(tmp_path / "tok.json"), tmp_path / "tok.json", bpe.to_tiktoken()):
        assert [(c.start, c.end, c.ids.tolist()) for c in chunk_text(TEXT, other, 16, 8)] == want_chunks
        assert [str(p) for p in preview(plan, [ids], other, n=3)] == want_preview
        assert SemanticWindows(16).plan_texts([TEXT], other).plan.length.tolist() == want_semantic
    for bad, kind in ((None, "NoneType"), (5, "int")):
        with pytest.raises(ConfigError, match=f"(a {kind} is not a tokenizer|cannot use a builtins.{kind})"):
            chunk_text(TEXT, bad, 16, 8)
        with pytest.raises(ConfigError, match=f"(a {kind} is not a tokenizer|cannot use a builtins.{kind})"):
            preview(plan, [ids], bad)


def test_overlapping_atomic_spans_stay_whole_and_bad_arguments_are_named():
    """Two atomic spans that overlap were cut at the second's start, inside the first, with nothing counted;
    one str was planned as one document per character; bytes, a span of three values and an atomic list
    shorter than the texts raised bare errors; a tokenizer giving floats was truncated."""
    text = "aaaa. bbbb. cccc."
    plan = SemanticWindows(12, overlap_units=0).plan_texts([text], Bytes(), atomic=[[(0, 9), (6, 11)]])
    assert [text[plan.window_span(r)] for r in range(len(plan.plan))] == ["aaaa. bbbb.", " cccc."]
    assert plan.split_units == 0
    wide = SemanticWindows(12, overlap_units=0).plan_texts([text], Bytes(), atomic=[[(0, 9), (6, 17)]])
    assert wide.split_units == 1  # the union (17 tokens) cannot fit: split by the oversize rule, and counted
    with pytest.raises(ConfigError, match="not one str"):
        SemanticWindows(6).plan_texts("abc", Bytes())
    with pytest.raises(InputError, match="atomic has 1 entries for 2 texts"):
        SemanticWindows(12).plan_texts([text, text], Bytes(), atomic=[[(0, 3)]])
    with pytest.raises(InputError, match=r"atomic span \(0, 3, 4\) is not a \(start, end\) pair"):
        SemanticWindows(12).plan_texts([text], Bytes(), atomic=[[(0, 3, 4)]])
    with pytest.raises(InputError, match=r"atomic span \(3, 1\) starts after it ends"):  # (was "outside")
        SemanticWindows(12).plan_texts([text], Bytes(), atomic=[[(3, 1)]])
    for call in (lambda: SemanticWindows(12).plan_texts([b"abc"], Bytes()), lambda: chunk_text(b"abc", Bytes(), 2, 1)):
        with pytest.raises(ConfigError, match=r"a bytes, not a str; decode it first"):
            call()

    class Floats(Bytes):
        def encode_ordinary(self, text):
            return [float(b) + 0.9 for b in text.encode()]

    with pytest.raises(InputError, match="encode_ordinary ids has dtype float64"):
        chunk_text("abc", Floats(), 2, 1)


def test_plan_and_source_must_agree_in_materialize_and_preview():
    """An extra longer than its document was cut silently (a shorter one raised a bare ValueError), a source of
    fewer documents than the plan a bare IndexError, and preview rendered windows past a document's end as
    empty text."""
    plan = SlidingWindows(4, 4).plan([8])
    ids = [np.arange(100, 108)]
    for bad in ([np.arange(12)], [np.arange(5)], [np.arange(8), np.arange(3)]):
        with pytest.raises(InputError, match="extra 'm' does not align with the source's tokens"):
            list(plan.materialize(ids, extras={"m": bad}))
    got = [w.extras["m"].tolist() for w in plan.materialize(ids, extras={"m": [np.arange(8)]})]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(InputError, match="the plan names document 1 but the source holds 1 documents"):
        list(SlidingWindows(4, 2).plan([4, 4]).materialize([np.arange(4)]))
    with pytest.raises(InputError, match=r"document 0 has 5 tokens but window 1 needs \[3, 7\): plan and source"):
        preview(SlidingWindows(4, 3).plan([11]), [list(b"abcde")], Bytes(), n=4)


def test_malformed_arguments_are_named_not_bare_errors():
    """Each raised a bare ValueError, AttributeError or TypeError from inside, or (epoch, "False" flags) was
    taken as something else."""
    from tokenmill.windows import MultiScaleWindows

    chunks = chunk_text("hello world foo bar", Bytes(), 4, 2)
    cases = [(lambda: assemble_context(chunks, ["x"] * len(chunks), 3), ConfigError, "scores has dtype <U1; it must hold"),
             (lambda: coverage_report([1, 2], [10]), ConfigError, "takes a WindowPlan first"),
             (lambda: MultiScaleWindows([[4]]), ConfigError, "window size=.* must be an integer"),
             (lambda: MultiScaleWindows(4), ConfigError, "must be a list of window sizes"),
             (lambda: SemanticWindows(4).plan_units(5), ConfigError, "plan_units takes an iterable"),
             (lambda: SemanticWindows(4).plan_units([[5]], epoch=-5), ConfigError, "epoch=-5"),
             (lambda: SemanticWindows(4).plan_units([[5]], epoch=1.5), ConfigError, "epoch=1.5"),
             (lambda: SemanticWindows(4, oversize="error").plan_units([[5]], atomic=[["False"]]), InputError,
              "atomic flags must be True/False")]
    for call, error, match in cases:
        with pytest.raises(error, match=match):
            call()
    for flags in ([[0, 1, 0]], [[False, True, False]]):  # 1/0 as True/False, as before
        assert SemanticWindows(5, overlap_units=0).plan_units([[2, 4, 3]], atomic=flags).length.tolist() == [2, 4, 3]


def test_semantic_and_retrieval_edges_are_refused_or_read_as_documented(monkeypatch):
    """A blank line of U+3000 or U+00A0 did not end a paragraph; one unit longer than the row cap allocated
    without bound (8 TiB); a custom boundary pattern that backtracks hung; bm25_scores took [1, 2, 3] as
    three documents and None raised a bare TypeError; assemble_context of ints an AttributeError;
    window_span past the end a bare IndexError (-1 a window from the end); chunk_text(window=0) named
    'window_size'."""
    para = SemanticWindows(8, boundaries="paragraph")
    for blank in ("\u3000", "\u00a0", " \t", ""):
        assert para.cut_points(f"para one\n{blank}\npara two") == [10 + len(blank)], repr(blank)
    with pytest.raises(ConfigError, match="semantic plan's units would hold 1,099,511,627,776 rows"):
        SemanticWindows(1).plan_units([[2**40]])
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0.2")
    with pytest.raises(ConfigError, match=r"boundaries='\(a\|a\)\+\$' ran past its"):
        SemanticWindows(64, boundaries=r"(a|a)+$").cut_points("a" * 40 + "b")
    assert SemanticWindows(64, boundaries=r"\n").cut_points("a\nb\nc") == [2, 4]
    with pytest.raises(ConfigError, match="bare id"):
        bm25_scores([1], [1, 2, 3])
    with pytest.raises(ConfigError, match="documents is a NoneType"):
        bm25_scores([1], None)
    assert bm25_scores([1], [[1, 2, 3]]).shape == (1,)
    with pytest.raises(ConfigError, match="chunks holds a int"):
        assemble_context([1, 2], [1.0, 2.0])
    sp = SemanticWindows(4, overlap_units=0).plan_texts(["One. Two. Three."], Bytes())
    for r in (-1, len(sp.plan)):
        with pytest.raises(InputError, match=f"window={r} is out of range"):
            sp.window_span(r)
    with pytest.raises(ConfigError, match="window=0"):
        chunk_text("abc", Bytes(), window=0, stride=1)


@settings(max_examples=150, deadline=None)
@given(text=st.lists(st.sampled_from(list("ab 。\n") + ["😀", "你", "é", "👩‍👩‍👧", "\u0301"]), max_size=30).map("".join),
       window=st.integers(1, 9), overlap=st.integers(0, 2), boundaries=st.sampled_from(["sentence", "paragraph"]))
def test_hard_splits_of_long_units_cut_where_a_character_starts(gpt2_ranks_path, text, window, overlap, boundaries):
    """A unit longer than the window was cut every C tokens, inside characters (GPT-2 spells an emoji in two
    tokens): a window began with an emoji's last byte, and window_span gave whole characters that were not the
    window's tokens. Cuts now fall where a character starts; only a character of more than C tokens is cut."""
    tok = _gpt2(gpt2_ranks_path)
    sp = SemanticWindows(window, overlap_units=overlap, boundaries=boundaries).plan_texts([text], tok)
    ids = sp.source.get(0) if len(sp.source) else np.zeros(0, np.int64)
    covered = np.zeros(ids.size, bool)
    for r in range(len(sp.plan)):
        s, e = int(sp.plan.start[r]), int(sp.plan.end[r])
        covered[s:e] = True
        got = b"".join(tok.token_bytes(int(i)) for i in ids[s:e])
        widest = max(len(tok.encode_ordinary(c)) for c in text)  # (a character of more tokens than the window)
        if widest <= window:
            assert text[sp.window_span(r)].encode() == got, (r, s, e)
    assert covered.all()


@functools.lru_cache(maxsize=None)
def _gpt2(path):
    return tokenmill.Tokenizer.from_tiktoken(path, pattern="gpt2")
