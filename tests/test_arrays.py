"""tokenmill._arrays: the shared vectorized idioms, against plain loops."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tokenmill._arrays import ranks_in_groups


@given(st.lists(st.integers(0, 6), max_size=30))
def test_ranks_in_groups_counts_within_each_group(counts):
    want = [j for c in counts for j in range(c)]
    got = ranks_in_groups(np.array(counts, np.int64))
    assert got.dtype == np.int64 and got.tolist() == want
    assert ranks_in_groups(counts).tolist() == want  # lists too
