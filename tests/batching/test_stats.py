"""Accounting: positions, non-pad tokens and targets per step (padded vs packed), summing, duplicates."""

import numpy as np

from tokenmill.batching import BatchStats, pack, pad_batch, stats_of

A, B = [1, 10, 11, 2], [1, 12, 2]


def test_padded_vs_packed_counts():
    padded = pad_batch([A, B], pad_id=0).stats()
    packed = next(pack([4, 3], 7).batches([A, B], batch_size=1, pad_id=0)).stats()
    # Padded: 2 rows x 4 = 8 positions, 7 non-pad, 5 targets. Packed: 7 positions, 7 non-pad, 5 targets.
    assert (padded.positions, padded.non_pad, padded.targets) == (8, 7, 5)
    assert (packed.positions, packed.non_pad, packed.targets) == (7, 7, 5)
    assert packed.documents == padded.documents == 2
    assert packed.targets_per_document == 2.5


def test_step_token_counts_over_ranks_and_accumulation():
    # One rank's micro-batch: 2 sequences x 512 positions with 3/4 of positions scored (384 per row).
    labels = np.full((2, 512), -100)
    labels[:, 1:385] = 7
    micro = stats_of(labels, np.zeros((2, 512), np.int64), np.tile(np.arange(512), (2, 1)))
    assert (micro.positions, micro.targets) == (1024, 768)
    # 4 devices x 8 accumulation steps: 4 * 2 * 512 * 8 = 32,768 positions; 3/4 -> 24,576 targets.
    step = sum(micro for _rank in range(4) for _accum in range(8))
    assert step.positions == 32_768
    assert step.targets == 24_576
    assert step.target_rate == 0.75
    assert step.sequences == 64


def test_duplicate_targets_from_overlapping_windows():
    doc = np.arange(10)
    # Two windows of doc 0 overlapping on tokens 4..5: [0..5] and [4..9]. Window 2's first label is
    # ignored (token 4), so token 5 is scored twice: 5 + 5 = 10 targets, 9 distinct, 1 duplicate.
    batch = pad_batch([doc[0:6], doc[4:10]], pad_id=0, doc_ids=[0, 0], starts=[0, 4])
    s = batch.stats()
    assert (s.targets, s.duplicate_targets, s.documents) == (10, 1, 1)
    assert abs(s.target_multiplicity - 10 / 9) < 1e-12


def test_sum_and_str():
    s = BatchStats(sequences=1, positions=4, non_pad=3, targets=2, documents=1)
    total = s + s
    assert total == BatchStats(sequences=2, positions=8, non_pad=6, targets=4, documents=2)
    assert sum([s, s, s]).positions == 12
    assert "4 effective targets" in str(total) and "75.0%" in str(total)
