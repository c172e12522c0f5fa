"""Padding: a worked example (two documents, two rows), pad id == EOS id, truncation, length grouping."""

import numpy as np
import pytest

from tokenmill.batching import LengthGroupedBatches, pad_batch
from tokenmill.errors import ConfigError, InputError

BOS, EOS, PAD = 1, 2, 0
JIA, YI, BING = 10, 11, 12  # 甲 乙 丙
A = [BOS, JIA, YI, EOS]
B = [BOS, BING, EOS]


def test_padded_worked_example():
    # A has 4 input positions, B 3; padded to two rows of 4 -> 8 positions, 7 non-pad (87.5%).
    # Targets: A scores 甲 乙 EOS (3), B scores 丙 EOS (2): 5, not 8 "training tokens".
    batch = pad_batch([A, B], pad_id=PAD)
    assert batch.input_ids.tolist() == [[BOS, JIA, YI, EOS], [BOS, BING, EOS, PAD]]
    assert batch.labels.tolist() == [[-100, JIA, YI, EOS], [-100, BING, EOS, -100]]
    assert batch.attention_mask.tolist() == [[True] * 4, [True, True, True, False]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3], [0, 1, 2, 0]]
    s = batch.stats()
    assert (s.positions, s.non_pad, s.targets, s.documents) == (8, 7, 5, 2)
    assert s.fill_rate == 0.875


def test_pad_id_equal_to_eos_keeps_real_eos_label():
    batch = pad_batch([A, B], pad_id=EOS)
    assert batch.input_ids[1].tolist() == [BOS, BING, EOS, EOS]
    # The real EOS at row 1 position 2 is a target; the padding EOS at position 3 is not.
    assert batch.labels[1].tolist() == [-100, BING, EOS, -100]
    assert batch.stats().targets == 5


def test_cu_seqlens_and_mask_of_padded_rows():
    batch = pad_batch([A, B], pad_id=PAD)
    # Row 0: one segment of 4; row 1: 3 tokens then 1 padding position (its own segment).
    assert batch.cu_seqlens.tolist() == [0, 4, 7, 8]
    assert batch.cu_seqlens.dtype == np.int32
    expected_row1 = np.array([
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 1, 1, 0],
        [0, 0, 0, 1],  # padding attends only to itself: no empty row, no NaN in softmax
    ], dtype=bool)
    assert (batch.dense_mask()[1] == expected_row1).all()


def test_shifted_labels():
    batch = pad_batch([A, B], pad_id=PAD)
    assert batch.shifted_labels().tolist() == [[JIA, YI, EOS, -100], [BING, EOS, -100, -100]]


def test_max_length_truncation_is_counted_or_refused():
    with pytest.raises(ConfigError, match=r"sequence 0 has 4 tokens, more than max_length=3.*truncation=True"):
        pad_batch([A, B], pad_id=PAD, max_length=3)
    batch = pad_batch([A, B], pad_id=PAD, max_length=3, truncation=True)
    assert batch.input_ids.tolist() == [[BOS, JIA, YI], [BOS, BING, EOS]]
    assert batch.truncated_tokens == 1
    assert batch.stats().truncated_tokens == 1


def test_pad_to_multiple_and_empty_sequence():
    batch = pad_batch([A, [], B], pad_id=PAD, pad_to_multiple_of=8)
    assert batch.shape == (3, 8)
    assert batch.labels[1].tolist() == [-100] * 8
    assert batch.doc_ids[1].tolist() == [-1] * 8
    assert batch.stats().targets == 5
    assert batch.cu_seqlens.tolist() == [0, 4, 8, 16, 19, 24]


def test_batch_block_roundtrip():
    batch = pad_batch([A, B], pad_id=PAD)
    block = batch.block(1)
    assert block.cu_seqlens.tolist() == [0, 3, 4]
    assert block.max_seqlen == 3
    again = type(batch).from_blocks(batch.blocks())
    for name in ("input_ids", "labels", "position_ids", "doc_ids", "cu_seqlens", "attention_mask"):
        assert np.array_equal(getattr(again, name), getattr(batch, name)), name


def test_length_grouping_pads_less_and_is_deterministic():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 1000, 2000)
    g = LengthGroupedBatches(lengths, batch_size=16, seed=3)
    batches = [b.tolist() for b in g]
    assert [b.tolist() for b in LengthGroupedBatches(lengths, batch_size=16, seed=3)] == batches
    assert sorted(i for b in batches for i in b) == list(range(2000))  # every document once
    assert g.padding_fraction < 0.05 < 0.3 < g.ungrouped_padding_fraction
    g.set_epoch(1)
    assert [b.tolist() for b in g] != batches


def test_length_grouping_by_token_budget():
    lengths = np.array([5, 50, 7, 48, 6, 51, 40, 3])
    g = LengthGroupedBatches(lengths, max_tokens=100, seed=0)
    for b in g:
        assert lengths[b].max() * b.size <= 100
    assert sorted(i for b in g for i in b.tolist()) == list(range(8))
    with pytest.raises(ConfigError, match="document 5 has 51 tokens, more than max_tokens=50"):
        LengthGroupedBatches(lengths, max_tokens=50)


def test_flags_are_true_or_false_not_truthy():
    """A flag given as a str ("no", "False") or a number was read by its truth value: "no" shuffled, cut or
    dropped. Every batching flag takes True or False, else a ConfigError naming it."""
    from tokenmill import pack

    plan = pack([5, 5, 5], 6)
    calls = {"truncation": lambda v: pad_batch([[1, 2, 3]], pad_id=0, max_length=2, truncation=v),
             "shuffle": lambda v: LengthGroupedBatches([3, 2, 1], batch_size=2, shuffle=v),
             "even": lambda v: plan.shard(0, 2, even=v),
             "drop_last": lambda v: next(plan.batches([[1] * 5] * 3, batch_size=2, pad_id=0, drop_last=v)),
             "stream": lambda v: next(plan.batches([[1] * 5] * 3, batch_size=2, pad_id=0, stream=v)),
             "reuse_memory": lambda v: next(plan.batches([[1] * 5] * 3, batch_size=2, pad_id=0, reuse_memory=v))}
    for name, call in calls.items():
        for bad in ("no", "False", 0, 1, None):
            if bad is None and name == "stream":
                continue  # None: the plan's own layout
            with pytest.raises(ConfigError, match=rf"^{name}={bad!r} must be True or False"):
                call(bad)
        call(True)
        call(np.bool_(True))


def test_negative_ids_doc_ids_and_starts_are_refused():
    """An id of -100 became an ignored label (a target dropped, silently); doc id -1 (padding's mark) made a
    real row padding in its blocks and stats while the batch's mask kept it."""
    from tokenmill.errors import InputError

    with pytest.raises(InputError, match=r"sequence 0 holds -100 \(at index 1\)"):
        pad_batch([[1, -100, 3]], pad_id=0)
    for kw in ({"doc_ids": [-1]}, {"starts": [-1]}):
        with pytest.raises(ConfigError, match="holds -1"):
            pad_batch([[1, 2, 3]], pad_id=0, **kw)
    b = pad_batch([[1, 2, 3]], pad_id=0, doc_ids=[7], starts=[5])
    assert b.block(0).attention_mask.tolist() == [True, True, True] and b.stats().non_pad == 3
    # a start near 2**63 had wrapped the row's token offsets to negative numbers
    with pytest.raises(ConfigError, match=r"starts holds 9,223,372,036,854,775,806 .* must be in 0 \.\. "):
        pad_batch([[1, 2, 3]], pad_id=0, starts=[2**63 - 2])
    assert pad_batch([[1, 2]], pad_id=0, starts=[2**62]).token_offsets.tolist() == [[2**62, 2**62 + 1]]


def test_block_takes_python_indices():
    """``block(-1)`` raised numpy's "zero-size array" ValueError and ``block(5)`` a bare IndexError."""
    b = pad_batch([[5, 6], [7]], pad_id=0)
    assert b.block(-1).input_ids.tolist() == b.block(1).input_ids.tolist() == [7, 0]
    for i in (2, -3):
        with pytest.raises(IndexError, match=r"outside this batch's 2 rows \(-2 .. 1\)"):
            b.block(i)
    with pytest.raises(TypeError, match="must be an integer"):
        b.block(1.0)


def test_messages_name_what_the_user_passed():
    """A huge max_tokens was refused as a group_size the user never passed; a token source as "lengths has
    shape ()" (pack takes one); np.float32 stride_ratio as "not a number"; a stride past 2**62 as a
    stride=... the user is told not to pass; a one-row block too large for int32 offsets said "use fewer
    rows per batch"."""
    from tokenmill import MultiScaleWindows, as_source, pack

    g = LengthGroupedBatches([1, 2, 3], max_tokens=2**62)
    assert sorted(int(i) for b in g for i in b) == [0, 1, 2]
    assert LengthGroupedBatches(as_source([[1], [2, 3]]), batch_size=1).lengths.tolist() == [1, 2]
    assert MultiScaleWindows([4], stride_ratio=np.float32(0.5)).scales[0].stride == 2
    assert MultiScaleWindows([2**53 + 1], stride_ratio=1.0).scales[0].stride == 2**53 + 1  # floor, exactly
    with pytest.raises(ConfigError, match="stride_ratio=2 makes window size .* beyond 2\\*\\*62"):
        MultiScaleWindows([2**62], stride_ratio=2.0)
    with pytest.raises(ConfigError, match=r"\(1 row of .*\) overflows int32 cu_seqlens .* shorter rows \(block_size, or pad_batch.s max_length\)"):
        next(pack([3], 2**31).batches([[1, 2, 3]], batch_size=1, pad_id=0))


def test_truncation_cuts_at_max_length_before_the_rows_round_up():
    """With pad_to_multiple_of, rows kept the tokens past max_length up to the rounded width (trained on)
    while truncated_tokens counted them as cut."""
    b = pad_batch([[1, 2, 3, 4, 5, 6, 7], [8, 9]], pad_id=0, max_length=5, truncation=True, pad_to_multiple_of=4)
    assert b.input_ids.tolist() == [[1, 2, 3, 4, 5, 0, 0, 0], [8, 9, 0, 0, 0, 0, 0, 0]]
    assert b.labels.tolist()[0] == [-100, 2, 3, 4, 5, -100, -100, -100]
    s = b.stats()
    assert b.truncated_tokens == s.truncated_tokens == 2 and s.non_pad == 7


def test_a_negative_pad_id_and_block_are_refused():
    """pad_id=-100 went into input_ids (an embedding IndexError in the model, later); segments(-1) read
    an empty block."""
    from tokenmill import pack

    with pytest.raises(ConfigError, match="pad_id=-100 is out of range"):
        pad_batch([[1, 2]], pad_id=-100)
    plan = pack([3, 4, 5], 8)
    with pytest.raises(ConfigError, match="pad_id=-1 is out of range"):
        next(plan.batches([np.arange(n) for n in (3, 4, 5)], batch_size=1, pad_id=-1))
    for b in (-1, plan.num_blocks):
        with pytest.raises(ConfigError, match=f"block={b} is out of range"):
            plan.segments(b)
    assert sum(n for blk in range(plan.num_blocks) for _, _, n in plan.segments(blk)) == 12


@pytest.mark.parametrize("cu", [[0, 4, 9, 8], [0, -1, 8], [0, 4, 4, 8], [0.0, 4.0, 8.0], [0, 8, 9], [[0, 8]]])
def test_segment_ids_of_a_hand_made_batch_check_its_cu_seqlens(cu):
    import dataclasses

    from tokenmill.errors import InputError

    b = pad_batch([[1, 10, 11, 2], [1, 12, 2]], pad_id=0)
    assert b.segment_ids.tolist() == [[0, 0, 0, 0], [1, 1, 1, 2]]
    bad = dataclasses.replace(b, cu_seqlens=np.asarray(cu))
    with pytest.raises(InputError, match="cu_seqlens must be a 1-D integer array rising strictly from 0 to rows x "
                                         "positions = 8"):
        bad.segment_ids  # noqa: B018 (negative entries had wrapped to wrong segments, too large ones IndexError)
    with pytest.raises(InputError, match="cu_seqlens"):
        bad.dense_mask()


def test_pad_batch_keeps_the_labels_a_window_plan_made():
    """Windows of score='new' (strided evaluation) or with a template carry their own labels; pad_batch rebuilt
    them from the ids (999 targets became 1,953, the template's EOS a target in every window): labels= keeps them."""
    from tokenmill import SlidingWindows

    plan = SlidingWindows(64, 32, score="new").plan([1000])
    ws = list(plan.materialize([np.arange(3, 1003)]))
    b = pad_batch([w.input_ids for w in ws], pad_id=0, doc_ids=[w.doc for w in ws], starts=[w.offset for w in ws],
                  labels=[w.labels for w in ws])
    assert b.stats().targets == plan.stats.target_tokens == 999 and b.stats().duplicate_targets == 0
    for row, w in zip(b.labels, ws):
        assert row[: w.labels.size].tolist() == w.labels.tolist() and (row[w.labels.size :] == -100).all()
    ws = list(SlidingWindows(8, 4, template=(1, 2)).windows(np.arange(10, 30)))
    assert pad_batch([w.input_ids for w in ws], pad_id=0, labels=[w.labels for w in ws]).labels[:, -1].tolist() == \
        [w.labels[-1] for w in ws] == [-100, -100, -100, -100, 2]
    with pytest.raises(ConfigError, match="labels 0 holds 5 at position 1, where sequence 0 holds id 2"):
        pad_batch([[1, 2, 3]], pad_id=0, labels=[[-100, 5, 3]])
    with pytest.raises(ConfigError, match="labels 0 has 2 entries but sequence 0 3 ids"):
        pad_batch([[1, 2, 3]], pad_id=0, labels=[[-100, 2]])
    with pytest.raises(ConfigError, match="labels has 2 entries for 1 sequences"):
        pad_batch([[1, 2, 3]], pad_id=0, labels=[[-100, 2, 3], [1]])


def test_text_where_ids_go_says_to_encode_it_first():
    """Text passed as ids said "has shape (); it must be 1-D" or "must hold integers", not what to do."""
    from tokenmill import SlidingWindows

    for call, name in ((lambda: pad_batch(["hello"], pad_id=0), "sequence 0"),
                       (lambda: list(SlidingWindows(4, 2).windows("hello")), "token_ids"),
                       (lambda: SlidingWindows(4, 2).plan(["abc", "de"]), "doc_lengths")):
        with pytest.raises(InputError, match=rf"^{name} is text \((str|list)\), not integers; where token ids are "
                                             r"expected, encode the text with a tokenizer first \(tok.encode\(text\)\)$"):
            call()
