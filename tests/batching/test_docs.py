"""The examples in docs/batching.md run and print what the page says."""

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "batching.md"


def test_batching_guide_examples():
    result = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 15
    assert result.failed == 0
