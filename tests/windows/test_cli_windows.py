"""`tokenmill windows`: summary, coverage and previews from text files, as text and JSON."""

from __future__ import annotations

import json

import tokenmill
from tokenmill.cli import main

TEXT = "滑动窗口把长文档切成一段一段。Sliding windows cut long documents into pieces. " * 6


def setup(tmp_path):
    tok = tokenmill.train_bpe([TEXT], 300)
    tok.save(tmp_path / "tok.json")
    (tmp_path / "a.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "b.txt").write_text("short", encoding="utf-8")
    return tok, [str(tmp_path / "tok.json"), str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]


def test_cli_text(tmp_path, capsys):
    tok, (t, a, b) = setup(tmp_path)
    rc = main(["windows", "--tokenizer", t, "--input", a, b, "--window", "32", "--stride", "16",
               "--jitter", "global", "--epoch", "3", "--preview", "2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "32-token windows, stride 16, epoch 3" in out and "coverage" in out and "jitter" in out
    assert out.count("window 0  doc 0") == 1 and "window 1  doc 0" in out and "[[" in out


def test_cli_json_matches_library(tmp_path, capsys):
    tok, (t, a, b) = setup(tmp_path)
    rc = main(["windows", "--tokenizer", t, "--input", a, b, "--window", "32", "--preview", "3", "--json"])
    assert rc == 0
    got = json.loads(capsys.readouterr().out)
    n = len(tok.encode_ordinary(TEXT))
    plan = tokenmill.SlidingWindows(32, 16).plan([n, len(tok.encode_ordinary("short"))])
    assert got["stats"]["num_windows"] == len(plan) and got["coverage"]["coverage"] == 1.0
    assert got["config"]["stride"] == 16 and len(got["previews"]) == 3
    assert got["coverage"]["windows_per_doc"]["min"] == 1


def test_cli_error(tmp_path, capsys):
    _, (t, a, _) = setup(tmp_path)
    assert main(["windows", "--tokenizer", t, "--input", a, "--window", "8", "--stride", "0"]) == 1
    assert "stride" in capsys.readouterr().err


def test_cli_default_stride_is_half_the_content_and_no_documents_is_an_error(tmp_path, capsys):
    """The default stride is half of what --reserve leaves of the window (it was half the window: with
    --window 8 --reserve 6, windows of 2 tokens every 4 left half the text uncovered); an input with no
    documents is an error naming it (it printed "coverage 100.00%" and exited 0)."""
    tok, (t, a, b) = setup(tmp_path)
    assert main(["windows", "--tokenizer", t, "--input", a, "--window", "8", "--reserve", "6", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["config"]["stride"] == 1 and got["coverage"]["coverage"] == 1.0
    (tmp_path / "blank.txt").write_text("\n\n", encoding="utf-8")
    assert main(["windows", "--tokenizer", t, "--input", str(tmp_path / "blank.txt"), "--split-lines",
                 "--window", "8"]) != 0
    err = capsys.readouterr().err
    assert "blank.txt holds no text" in err and "blank lines" in err
    # an empty file (one document of 0 tokens) had passed the guard: "coverage 100.00% of 0 tokens", exit 0
    (tmp_path / "empty.txt").write_bytes(b"")
    assert main(["windows", "--tokenizer", t, "--input", str(tmp_path / "empty.txt"), "--window", "8"]) == 1
    assert "empty.txt holds no text (every file is empty)" in capsys.readouterr().err
