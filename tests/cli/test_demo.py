"""`tokenmill demo --quick`: the whole pipeline in seconds, with and without torch."""

from __future__ import annotations

import json

import pytest

from tokenmill.cli import main


@pytest.mark.slow
def test_demo_quick_trains_resumes_exactly_and_writes_its_outputs(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--json", "--quiet", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    tr = report["training"]
    assert tr["resumed_equals_uninterrupted"] and tr["resumed_max_param_diff"] == 0.0
    assert tr["packed_equals_unpacked"]["passed"] and tr["packed_equals_unpacked"]["targets_compared"] > 0
    assert tr["val_loss_after"] < tr["val_loss_before"]
    assert 0 < tr["effective_targets_per_step"] <= tr["positions_per_step"]
    assert report["packing"]["packing_fill"] >= report["packing"]["padding_fill"]
    assert report["store"]["bytes_per_token"] > 1
    assert str(out / "report.html") in report["plots"]
    for name in ("loss.png", "lengths.png", "coverage.png", "report.json", "tokenizer.json", "report.html"):
        assert (out / name).stat().st_size > 0
    assert (out / "checkpoint" / "state.json").exists() and (out / "store" / "manifest.json").exists()
    saved = json.loads((out / "report.json").read_text())
    assert len(saved["training"]["losses"]) == tr["steps"]


def test_demo_without_torch_runs_the_data_stages(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # `import torch` raises ImportError
    assert main(["demo", "--quick", "--quiet", "--no-plots", "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "torch is not installed" in text and "pip install 'tokenmill[torch]' adds" in text
    assert "token store" in text and "best-fit packing" in text
    assert f"report: {tmp_path / 'd' / 'report.html'}" in text and (tmp_path / "d" / "report.html").stat().st_size > 0


def test_demo_bad_steps_is_one_line_error(tmp_path, capsys):
    assert main(["demo", "--steps", "3", "--out", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--steps 3" in err


def test_demo_refuses_a_folder_it_did_not_write_and_blocks_too_small(tmp_path, capsys):
    """--out of a folder holding the user's tokenizer.json and report.html replaced them, rc 0; --block-size
    1-3 failed late (after training) naming stride= or empty documents."""
    mine = tmp_path / "proj"
    mine.mkdir()
    (mine / "tokenizer.json").write_text("my precious tokenizer")
    assert main(["demo", "--quick", "--no-plots", "--out", str(mine), "-q"]) == 1
    assert "holds files the demo did not write (tokenizer.json)" in capsys.readouterr().err
    assert (mine / "tokenizer.json").read_text() == "my precious tokenizer" and len(list(mine.iterdir())) == 1
    (mine / "report.json").write_text('{"accuracy": 0.93}')  # (names the demo writes, not the demo's report)
    assert main(["demo", "--quick", "--no-plots", "--out", str(mine), "-q"]) == 1
    assert "holds files the demo did not write (report.json, tokenizer.json)" in capsys.readouterr().err
    assert (mine / "tokenizer.json").read_text() == "my precious tokenizer"
    assert (mine / "report.json").read_text() == '{"accuracy": 0.93}'
    for b in ("1", "3"):
        assert main(["demo", "--quick", "--no-plots", "--out", str(tmp_path / "d"), "--block-size", b, "-q"]) == 1
        assert f"--block-size {b} must be an integer >= 4" in capsys.readouterr().err
    # a vocabulary with no room for the byte tokens and <|endoftext|>: refused before the corpus line was printed
    assert main(["demo", "--quick", "--no-plots", "--out", str(tmp_path / "d"), "--vocab-size", "10"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "--vocab-size 10 must be an integer >= 257 (256 byte tokens + <|endoftext|>)" in err
    assert not (tmp_path / "d").exists()  # refused before anything was written


def test_demo_reads_a_corpus_with_errors_replace_and_needs_two_documents(tmp_path, capsys):
    """The demo's UTF-8 error advised --errors replace, which the demo did not take; a corpus of one
    document failed after the store was built (a split into train and validation needs two)."""
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok text\n\xff byte\n")
    assert main(["demo", "--quick", "--no-plots", "--corpus", str(bad), "--out", str(tmp_path / "d"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "invalid UTF-8 at byte offset 8" in err and "--errors replace" in err
    assert main(["demo", "--quick", "--no-plots", "--corpus", str(bad), "--errors", "replace",
                 "--out", str(tmp_path / "d"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "replaced 1 invalid UTF-8 sequence" in err and "holds 1 document(s); the demo needs 2 or more" in err
