"""`tokenmill pack` and `tokenmill verify-packing`."""

import numpy as np
import pytest

from tokenmill.cli import main


def test_pack_command_reports_fill(capsys, tmp_path):
    path = tmp_path / "lengths.txt"
    path.write_text("4\n3\n10\n")
    assert main(["pack", "--lengths", str(path), "--block-size", "7"]) == 0
    out = capsys.readouterr().out
    assert "3 documents -> 3 blocks, 17 tokens" in out and "split 1 documents" in out
    np.save(tmp_path / "l.npy", np.array([4, 3]))
    assert main(["pack", "--lengths", str(tmp_path / "l.npy"), "--block-size", "7", "--compare"]) == 0
    assert capsys.readouterr().out.count("fill 100.00%") == 4


def test_pack_command_bad_file(capsys, tmp_path):
    assert main(["pack", "--lengths", str(tmp_path / "missing.txt"), "--block-size", "7"]) == 1
    assert "cannot read lengths" in capsys.readouterr().err


def test_verify_packing_command(capsys):
    pytest.importorskip("torch")
    assert main(["verify-packing", "--docs", "6", "--block-size", "24"]) == 0
    assert capsys.readouterr().out.count("PASS") == 2
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--layout", "stream"]) == 1
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--layout", "stream",
                 "--expect", "fail", "--positions", "rope"]) == 0
