"""Packing windows: SliceSource maps blocks back to the original documents."""

import numpy as np
import pytest

from tokenmill.batching import SliceSource, pack
from tokenmill.errors import InputError


def test_overlapping_windows_packed_report_duplicate_targets():
    doc = np.arange(100, 110)  # 10 tokens
    # windows t0..t5 and t4..t9: the second window's first label (t4) is ignored, t5 is scored twice
    src = SliceSource([doc], doc=[0, 0], start=[0, 4], length=[6, 6])
    plan = pack(src, 12)
    block = next(plan.blocks(src, pad_id=0))
    assert block.doc_ids.tolist() == [0] * 12
    assert sorted(block.token_offsets.tolist()) == sorted(list(range(6)) + list(range(4, 10)))
    s = block.stats()
    assert (s.targets, s.duplicate_targets, s.documents) == (10, 1, 1)
    assert sorted(block.input_ids.tolist()) == sorted(list(doc[:6]) + list(doc[4:]))


def test_from_sliding_windows_plan_and_flat_path():
    from tokenmill.windows import SlidingWindows

    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 1000, n) for n in rng.integers(5, 60, 30)]
    wplan = SlidingWindows(16, 8).plan([len(d) for d in docs])
    src = SliceSource.from_windows(wplan, docs)
    assert len(src) == len(wplan)

    class Flat:
        lengths = np.array([len(d) for d in docs], np.int64)
        doc_offsets = np.concatenate([[0], np.cumsum(lengths)])
        token_array = np.concatenate(docs).astype(np.uint32)

        def __len__(self):
            return len(docs)

        def get(self, i):
            return self.token_array[self.doc_offsets[i] : self.doc_offsets[i + 1]]

    flat = SliceSource.from_windows(wplan, Flat())
    assert hasattr(flat, "token_array")
    plan = pack(src, 32)
    for a, b in zip(plan.blocks(src, pad_id=0), plan.blocks(flat, pad_id=0)):
        assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.token_offsets, b.token_offsets)
        real = a.doc_ids >= 0
        for d, o, t in zip(a.doc_ids[real], a.token_offsets[real], a.input_ids[real]):
            assert docs[d][o] == t


def test_slice_outside_document_is_refused():
    with pytest.raises(InputError, match="slice 0 .* reaches outside its document"):
        SliceSource([[1, 2, 3]], doc=[0], start=[2], length=[2])


@pytest.mark.parametrize("compiled", [False, True])
def test_slice_check_names_the_first_bad_slice(monkeypatch, compiled):
    """The first slice outside its document is named, by numpy (small slice sets: no numba to load) and by one
    compiled pass (large ones: no slice-sized temporaries), the same rule: a document out of range, a
    negative start or length, an end past the document."""
    from tokenmill.batching import sources

    monkeypatch.setattr(sources, "COMPILED_SLICES", 0 if compiled else 1 << 16)
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 20, 50)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        doc = rng.integers(-2, 52, n)
        start = rng.integers(-2, 22, n)
        length = rng.integers(-2, 22, n)
        inside = (doc >= 0) & (doc < 50)
        bad = ~inside | (start < 0) | (length < 0)
        bad |= start + length > np.where(inside, lengths[np.clip(doc, 0, 49)], 0)
        docs = [np.zeros(k, np.int64) for k in lengths]
        if not bad.any():
            assert SliceSource(docs, doc=doc, start=start, length=length).lengths.tolist() == length.tolist()
            continue
        i = int(np.argmax(bad))
        what = "names a document outside 0 .. 49" if not inside[i] else "reaches outside its document"
        with pytest.raises(InputError, match=f"slice {i} .*{what}" if inside[i] else f"slice {i} {what}"):
            SliceSource(docs, doc=doc, start=start, length=length)
    with pytest.raises(InputError, match=r"slice 0 names a document outside"):  # (no documents: an IndexError)
        SliceSource([], doc=[0], start=[0], length=[1])


def test_a_slice_whose_end_overflows_is_refused():
    """``start + length`` past int64 max wrapped negative and passed the bounds check: the source said 2
    tokens and gave none."""
    import numpy as np

    from tokenmill import SliceSource
    from tokenmill.errors import InputError

    for start, length in ((2**63 - 1, 2), (2**62, 2**62)):
        with pytest.raises(InputError, match="reaches outside its document"):
            SliceSource([np.arange(10)], doc=[0], start=[start], length=[length])
    assert SliceSource([np.arange(10)], doc=[0], start=[2], length=[3]).get(0).tolist() == [2, 3, 4]


class _UserSource:
    """A user's token source: ``lengths``, ``__len__`` and ``get`` (nothing tokenmill made or checked)."""

    def __init__(self, docs, lengths=None):
        self.docs = docs
        self.lengths = np.array(lengths if lengths is not None else [len(d) for d in docs], np.int64)

    def __len__(self):
        return len(self.docs)

    def get(self, i):
        return np.asarray(self.docs[i])


def test_ids_no_one_checked_are_checked_as_they_are_read():
    """A SliceSource over in-memory documents and a user's own source had reached batches unchecked: -100
    became an ignored label (a target dropped, counted nowhere), -7 a label cross-entropy fails on, float
    ids were truncated and a short document failed inside numpy. Each is now an InputError naming the
    document, in packed batches and in materialized windows; good documents give the same batches."""
    from tokenmill.windows import SlidingWindows

    sliced = SliceSource([np.array([1, -100, 3, 4, 5, 6]), np.array([7, 8, 9])], doc=[0, 1], start=[0, 0],
                         length=[6, 3])
    with pytest.raises(InputError, match="document 0 holds token id -100 at position 1"):
        next(pack(sliced, 16).batches(sliced, batch_size=1, pad_id=0))
    for docs, lengths, match in (([[1, 2, 3], [4, -7, 6]], None, "document 1 holds token id -7 at position 1"),
                                 ([[1.7, 2.2, 3.0]], None, "document 0 has dtype float64"),
                                 ([[1, 2, 3]], [5], r"document 0: get\(\) gave 3 ids where the source's lengths say 5")):
        src = _UserSource(docs, lengths)
        with pytest.raises(InputError, match=match):
            list(pack(src, 16).batches(src, batch_size=2, pad_id=0))
        plan = SlidingWindows(4, 4).plan(src.lengths)
        with pytest.raises(InputError, match=match):
            list(plan.materialize(src))
    good = [[1, 2, 3], [4, 5]]
    a, b = _UserSource(good), [np.array(d) for d in good]
    assert [x.input_ids.tolist() for x in pack(a, 8).batches(a, batch_size=1, pad_id=0)] == \
        [x.input_ids.tolist() for x in pack(b, 8).batches(b, batch_size=1, pad_id=0)]


def test_a_slice_of_a_multi_shard_store_pickles_with_its_segment_filler(tmp_path):
    """The slice kept its base's filler in a lambda on the instance: windows over a store of several shards
    could not travel to a spawned DataLoader worker ("Can't pickle local object")."""
    import pickle

    from tokenmill import TokenStore

    store = TokenStore.from_token_arrays(tmp_path / "s", [([3, 4], np.arange(7)), ([5], np.arange(10, 15))],
                                         vocab_size=100)
    src = SliceSource(store, doc=[0, 1, 2], start=[1, 0, 2], length=[2, 4, 3])
    assert src.segment_filler is not None
    again = pickle.loads(pickle.dumps(src))
    plan = pack(src, 8)
    for a, b in zip(plan.blocks(src, pad_id=0), plan.blocks(again, pad_id=0), strict=True):
        assert np.array_equal(a.input_ids, b.input_ids)
    assert sorted(t for blk in plan.blocks(again, pad_id=0) for t, d in zip(blk.input_ids.tolist(),
                                                                              blk.doc_ids.tolist()) if d >= 0) == \
        [1, 2, 3, 4, 5, 6, 12, 13, 14]
    assert SliceSource([[1, 2, 3]], doc=[0], start=[0], length=[2]).segment_filler is None


def test_a_slice_keeps_its_own_columns_and_an_array_source_its_lengths():
    """A SliceSource kept the caller's arrays (a length written afterwards read into the next document) and an
    ArraySource's lengths were writeable (written, they merged documents in batches): both are their own now."""
    from tokenmill.data.source import ArraySource

    length = np.array([2, 3])
    src = SliceSource([np.arange(5), np.arange(10, 15)], doc=[0, 1], start=[0, 0], length=length)
    length[:] = 5
    assert src.lengths.tolist() == [2, 3] and src.get(0).tolist() == [0, 1]
    arr = ArraySource([[1, 2], [3]])
    with pytest.raises(ValueError, match="read-only"):
        arr.lengths[:] = 0
    # a read-only view of an array its caller still writes is no slice's own either: copied
    base = np.array([2, 3])
    view = base.view()
    view.flags.writeable = False
    src = SliceSource([np.arange(5), np.arange(10, 15)], doc=[0, 1], start=[0, 0], length=view)
    base[:] = 5
    assert src.lengths.tolist() == [2, 3]
    # a window plan's own columns are taken as they are (a loader over windows copied them every epoch)
    from tokenmill import MultiScaleWindows, SemanticWindows, SlidingWindows

    for plan in (SlidingWindows(4, 2).plan([9, 3]), MultiScaleWindows([4, 8]).plan([9, 3]),
                 SemanticWindows(4).plan_units([[2, 3], [1]]), SlidingWindows(4, 2).plan([9, 3]).select([0, 2])):
        src = SliceSource([np.arange(9), np.arange(3)], doc=plan.doc, start=plan.start, length=plan.length)
        assert np.shares_memory(src.lengths, plan.length) and np.shares_memory(src.origin_doc, plan.doc)


def test_a_flat_source_in_a_foreign_byte_order_is_named():
    """A user's flat source of big-endian ids reached numba ("Unsupported array dtype: >i4")."""
    lengths = np.array([3, 2], np.int64)

    class Flat:
        token_array = np.arange(5, dtype=">i4")
        doc_offsets = np.array([0, 3, 5], np.int64)

        def __init__(self):
            self.lengths = lengths

        def __len__(self):
            return 2

        def get(self, i):
            return self.token_array[self.doc_offsets[i]:self.doc_offsets[i + 1]]

    with pytest.raises(InputError, match="has dtype >i4, not in this machine's byte order"):
        next(pack(lengths, 8).batches(Flat(), batch_size=1, pad_id=0))


def test_a_users_flat_arrays_are_checked_against_their_lengths_and_for_negative_ids():
    """A user's token_array/doc_offsets were read as they came: offsets that disagree with the lengths read the
    next document's ids into a batch, and -100 became an ignored label."""

    def flat(ids, offsets, lengths):
        class Flat:
            token_array = np.asarray(ids, np.int64)
            doc_offsets = np.asarray(offsets, np.int64)

            def __init__(self):
                self.lengths = np.asarray(lengths, np.int64)

            def __len__(self):
                return len(lengths)

            def get(self, i):
                return self.token_array[self.doc_offsets[i]:self.doc_offsets[i] + self.lengths[i]]
        return Flat()

    plan = pack([2, 2], 4)
    with pytest.raises(InputError, match="doc_offsets make document 0 1 ids long where its lengths say 2"):
        next(plan.batches(flat(np.arange(1, 7), [0, 1, 4], [2, 2]), batch_size=1, pad_id=0))
    with pytest.raises(InputError, match="token_array holds id -100 at position 1"):
        next(plan.batches(flat([1, -100, 3, 4], [0, 2, 4], [2, 2]), batch_size=1, pad_id=0))
    ok = flat([1, 2, 3, 4], [0, 2, 4], [2, 2])
    assert sorted(next(plan.batches(ok, batch_size=1, pad_id=0)).input_ids.ravel().tolist()) == [1, 2, 3, 4]


def test_from_windows_refuses_evaluation_plans_and_templates():
    """A plan of score='new' or with a bos/eos template packed through a slice had been packed as if neither
    were set: every token a target (71 scored became 119), no template tokens. Refused, as the loader does."""
    from tokenmill import SlidingWindows
    from tokenmill.errors import ConfigError

    docs = [np.arange(1, 30), np.arange(1, 12)]
    lengths = np.array([len(d) for d in docs])
    with pytest.raises(ConfigError, match="score='new'"):
        SliceSource.from_windows(SlidingWindows(8, 4, score="new").plan(lengths), docs)
    with pytest.raises(ConfigError, match="template"):
        SliceSource.from_windows(SlidingWindows(8, 4, template=(1, 2)).plan(lengths), docs)
    with pytest.raises(ConfigError, match="positions='absolute'"):
        SliceSource.from_windows(SlidingWindows(8, 4, positions="absolute").plan(lengths), docs)
    assert len(SliceSource.from_windows(SlidingWindows(8, 4).plan(lengths), docs)) > 0


def test_from_windows_and_multiplicity_refuse_documents_the_plan_was_not_made_for():
    """A source with longer documents, or more of them, than the plan's had its extra tokens never sliced (never
    trained on), silently, and `multiplicity` showed them as never covered; `materialize` and `coverage_report`
    already refused such a source."""
    from tokenmill import SlidingWindows

    plan = SlidingWindows(4, 2).plan([10, 6])
    assert len(SliceSource.from_windows(plan, [np.arange(10), np.arange(6)])) == len(plan)
    for docs in ([np.arange(12), np.arange(6)], [np.arange(10), np.arange(6), np.arange(5)]):
        with pytest.raises(InputError, match="the plan was made for 2 documents of 16 tokens, but the source holds "
                                             r"\d of \d+: plan and source disagree; plan the source you slice"):
            SliceSource.from_windows(plan, docs)
        with pytest.raises(InputError, match="plan and doc_lengths disagree; pass the lengths the plan was made for"):
            plan.multiplicity([len(d) for d in docs])
    assert plan.multiplicity([10, 6]).sum() == plan.length.sum()
