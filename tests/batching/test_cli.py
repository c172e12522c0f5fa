"""`tokenmill pack` and `tokenmill verify-packing`."""

import numpy as np
import pytest

from tokenmill.cli import main


def test_pack_command_reports_fill(capsys, tmp_path):
    path = tmp_path / "lengths.txt"
    path.write_text("4\n3\n10\n")
    assert main(["pack", "--lengths", str(path), "--block-size", "7"]) == 0
    out = capsys.readouterr().out
    assert "3 documents -> 3 blocks, 17 tokens" in out and "split 1 document," in out
    np.save(tmp_path / "l.npy", np.array([4, 3]))
    assert main(["pack", "--lengths", str(tmp_path / "l.npy"), "--block-size", "7", "--compare"]) == 0
    assert capsys.readouterr().out.count("fill 100.00%") == 4
    # options the run would have ignored: refused
    for extra, said in ((["--compare", "--method", "greedy"], "--compare runs every method"),
                        (["--method", "concat", "--long-docs", "error"], "--long-docs error is for the document methods")):
        assert main(["pack", "--lengths", str(path), "--block-size", "7", *extra]) == 1
        assert said in capsys.readouterr().err


def test_pack_command_bad_file(capsys, tmp_path):
    assert main(["pack", "--lengths", str(tmp_path / "missing.txt"), "--block-size", "7"]) == 1
    assert "cannot read lengths" in capsys.readouterr().err
    # --mu and --sigma shape the synthetic lengths only (they had been ignored beside --lengths)
    (tmp_path / "l.txt").write_text("5\n7\n")
    assert main(["pack", "--lengths", str(tmp_path / "l.txt"), "--block-size", "7", "--mu", "3"]) == 1
    assert "--mu and --sigma shape the synthetic --lognormal lengths" in capsys.readouterr().err
    assert main(["pack", "--lognormal", "50", "--block-size", "64", "--mu", "3", "--json"]) == 0


def test_verify_packing_command(capsys):
    pytest.importorskip("torch")
    assert main(["verify-packing", "--docs", "6", "--block-size", "24"]) == 0
    assert capsys.readouterr().out.count("PASS") == 2
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--layout", "stream"]) == 1
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--layout", "stream",
                 "--expect", "fail", "--positions", "rope"]) == 0


def test_verify_packing_shows_progress(capsys):
    """Thousands of documents run for minutes: ``--progress`` shows a bar counting the model's runs (each
    document alone, the packed blocks twice), ``--quiet`` none (it had shown none either way)."""
    pytest.importorskip("torch")
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--positions", "rope", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "verify packing" in err
    totals = {int(m) for m in __import__("re").findall(r"verify packing:[^\r\n]*? \d+/(\d+) ", err)}
    assert len(totals) == 1 and totals.pop() > 6  # the 6 documents alone and the blocks
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--positions", "rope", "--quiet"]) == 0
    assert "verify packing" not in capsys.readouterr().err


def test_verify_packing_json_and_quiet(capsys):
    """``verify-packing --json`` prints each report's counts (it had no --json), and both commands take
    ``--quiet`` (argparse had refused it, exit 2)."""
    import json

    pytest.importorskip("torch")
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["positions"] for r in got] == ["learned", "rope"] and all(r["passed"] for r in got)
    assert all(r["targets_compared"] > 0 and r["mismatched_targets"] == 0 for r in got)
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--layout", "stream", "--json"]) == 1
    assert not any(r["passed"] for r in json.loads(capsys.readouterr().out))
    assert main(["pack", "--lognormal", "20", "--block-size", "64", "--quiet"]) == 0
    assert "20 documents" in capsys.readouterr().out
    assert main(["pack", "--lognormal", "0", "--block-size", "64"]) == 1  # (0 documents "at 100% fill")
    assert "--lognormal" in capsys.readouterr().err


def test_pack_lengths_may_hold_comments(capsys, tmp_path):
    """np.loadtxt skips '#' comments; the checks for blank lines and several numbers a line had refused them."""
    (tmp_path / "c.txt").write_text("# lengths of my documents\n3  # the first\n# a note\n5\n")
    assert main(["pack", "--lengths", str(tmp_path / "c.txt"), "--block-size", "8"]) == 0
    assert "2 documents -> 1 block, 8 tokens" in capsys.readouterr().out
    (tmp_path / "crlf.txt").write_bytes(b"+3\r\n5\r\n")  # (Windows line ends, a sign)
    assert main(["pack", "--lengths", str(tmp_path / "crlf.txt"), "--block-size", "8"]) == 0
    assert "2 documents -> 1 block, 8 tokens" in capsys.readouterr().out


def test_pack_command_empty_or_binary_lengths(capsys, tmp_path):
    """An empty file "packed" 0 documents at 100% fill after numpy's warning; a binary one raised a bare
    codec error."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bin.dat").write_bytes(bytes(range(128, 256)))
    np.save(tmp_path / "empty.npy", np.zeros(0, np.int64))  # (an empty array was taken: 0 documents, 100% fill)
    np.save(tmp_path / "bool.npy", np.array([True, False]))  # (refused later, without the file's name)
    # a header claiming 10**13 entries over 16 bytes of data: it had been read into memory ("out of memory")
    np.save(tmp_path / "huge.npy", np.array([4, 3]))
    raw = (tmp_path / "huge.npy").read_bytes()
    end = raw.index(b"\n")  # the header's end; its padding spaces before it make room for a longer shape
    header = raw[:end].replace(b"(2,)", b"(9999999999999,)", 1)
    (tmp_path / "huge.npy").write_bytes(header[: end] + raw[end:])
    # a blank line between lengths was skipped (every later document's index moved by one); a line of several
    # numbers was read as several documents, or failed as "shape (1, 2)" without the file's name
    (tmp_path / "blank.txt").write_text("3\n\n5\n")
    (tmp_path / "row.txt").write_text("5 6 7\n")
    (tmp_path / "rows.txt").write_text("5\n6 7\n8 9\n")
    (tmp_path / "commented.txt").write_text("# a long comment of many words\n5\n\n6\n")  # ('#' lines are no blank)
    (tmp_path / "comments.txt").write_text("# my lengths\n# none yet\n")  # (had packed 0 documents at 100% fill)
    # numpy's "at row 1, column 1" (rows from 0) for line 2; a negative length said by pack() as "document 3",
    # neither the file nor its line named
    (tmp_path / "frac.txt").write_text("5\n2.5\n")
    (tmp_path / "neg.txt").write_text("5\n6\n7\n-3\n")
    # a form feed inside a line had cut it in two (str.splitlines), the next line's number one off
    (tmp_path / "ff.txt").write_bytes(b"5\n6\x0c7\n-3\n")
    (tmp_path / "us.txt").write_text("1_000\n")  # (int() reads 1000; no length file spells one so)
    for name, says in (("frac.txt", "line 2 holds '2.5', not a whole number"), ("neg.txt", "line 4 holds -3"),
                       ("ff.txt", "line 2 holds '6\\x0c7'"), ("us.txt", "line 1 holds '1_000'"),("empty.txt", "it holds no lengths"), ("comments.txt", "it holds no lengths"), ("bin.dat", "not a text file (byte offset 0"),
                       ("blank.txt", "line 2 is blank"), ("row.txt", "line 1 holds more than one number"),
                       ("rows.txt", "line 2 holds more than one number"), ("commented.txt", "line 3 is blank"),
                       ("empty.npy", "it holds no lengths (an empty array)"),
                       ("bool.npy", "it holds a bool array of shape (2,)"), ("huge.npy", "mmap length is greater")):
        assert main(["pack", "--lengths", str(tmp_path / name), "--block-size", "7"]) == 1
        err = capsys.readouterr().err
        assert f"cannot read lengths from {tmp_path / name}: {says}" in err and "Warning" not in err


def test_verify_packing_with_flex_attention_shows_no_advice_of_torchs(capsys, monkeypatch):
    """The reference model runs flex_attention eagerly on CPU on purpose; torch's advice to compile it came out
    as a tokenmill warning a user of the command could do nothing about."""
    pytest.importorskip("torch")
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    monkeypatch.setattr(fa, "_WARNINGS_SHOWN", set())  # (torch says it once a process)
    assert main(["verify-packing", "--docs", "6", "--block-size", "24", "--attention", "flex",
                 "--positions", "rope"]) == 0
    out, err = capsys.readouterr()
    assert "PASS" in out and "torch.compile" not in err and "warning" not in err
