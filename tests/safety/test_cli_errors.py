"""The CLI on bad input: one line ``tokenmill <cmd>: error: ...``, exit status 1;
argparse usage errors exit 2; the traceback only with ``--debug``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tokenmill.cli import main
from tokenmill.tokenizer.bpe.train import train_bpe


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    train_bpe(["the cat sat on the mat " * 20], 270, pattern="gpt2", progress=False).save(path)
    return str(path)


def fails(capsys, argv, *needles, code=1):
    """Run the CLI, expect ``code`` and a one-line error holding every needle."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokenmill {argv[0]}: error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_encode_inputs(capsys, tmp_path, tok_file):
    fails(capsys, ["encode", "--tokenizer", tok_file, "--input", str(tmp_path)], "is a directory")
    fails(capsys, ["encode", "--tokenizer", tok_file, "--input", str(tmp_path / "nope.txt")], "does not exist")
    fails(capsys, ["encode", "--tokenizer", tok_file, "--input", "/dev/zero"], "not a regular file")
    fails(capsys, ["encode", "--tokenizer", "/dev/zero", "hi"], "not a regular file")
    fails(capsys, ["encode", "--tokenizer", str(tmp_path), "hi"], "folder without tokenizer.json")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ab\xffcd")
    fails(capsys, ["encode", "--tokenizer", tok_file, "--input", str(bad)], "byte offset 2", "--errors replace")
    assert main(["encode", "--tokenizer", tok_file, "--input", str(bad), "--errors", "replace"]) == 0
    assert capsys.readouterr().out.strip()


def test_train_options(capsys, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world, hello there\n" * 20)
    base = ["train", "--input", str(corpus), "--vocab-size", "260", "-q"]
    fails(capsys, [*base, "--out", str(tmp_path)], "is a directory")
    fails(capsys, [*base, "--out", ""], "empty")
    fails(capsys, [*base, "--out", str(corpus)], "input of this command")
    assert corpus.read_text().startswith("hello")
    fails(capsys, [*base, "--out", "/dev/null"], "not a regular file")
    fails(capsys, [*base, "--separator", "\\x", "--out", str(tmp_path / "t.json")], "--separator", "escape")
    fails(capsys, [*base, "--vocab-size", str(10**20), "--out", str(tmp_path / "t.json")], "--vocab-size=")
    fails(capsys, ["train", "--input", str(tmp_path / "missing"), "--vocab-size", "260", "--out", "x.json"],
          "does not exist")
    assert main([*base, "--separator", "\\n", "--out", str(tmp_path / "t.json")]) == 0


def test_huge_and_negative_numbers(capsys, tmp_path, tok_file):
    lengths = tmp_path / "l.txt"
    lengths.write_text("3\n4\n")
    with pytest.raises(SystemExit) as e:  # not an integer at all: argparse's usage error
        main(["pack", "--lengths", str(lengths), "--block-size", "1e20"])
    assert e.value.code == 2
    capsys.readouterr()
    fails(capsys, ["pack", "--lengths", str(lengths), "--block-size", str(10**20)], "--block-size=")
    fails(capsys, ["pack", "--lognormal", "-3", "--block-size", "8"], "--lognormal")
    fails(capsys, ["pack", "--lognormal", "10", "--sigma", "-1", "--block-size", "8"], "--sigma")
    fails(capsys, ["pack", "--lognormal", "10", "--mu", "800", "--block-size", "8"], "--mu")
    fails(capsys, ["pack", "--lognormal", "100", "--mu", "30", "--sigma", "5", "--block-size", "8"], "lower --mu")
    fails(capsys, ["windows", "--tokenizer", tok_file, "--input", str(lengths), "--window", str(10**20)], "window")
    fails(capsys, ["verify-packing", "--docs", "-3"], "--docs")
    fails(capsys, ["verify-packing", "--atol", "nan"], "--atol")
    fails(capsys, ["decode", "--tokenizer", tok_file, str(2**70)], "out of range")


def test_bad_tokenizer_files(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    fails(capsys, ["inspect", str(deep)], "deep")
    fails(capsys, ["inspect", "/dev/zero"], "not a regular file")


def test_unexpected_errors_are_one_line_with_a_debug_hint(capsys, monkeypatch, tmp_path, tok_file):
    from tokenmill.cli import tokenizer_cmds

    def boom(args):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(tokenizer_cmds, "cmd_inspect", boom)
    fails(capsys, ["inspect", tok_file], "ZeroDivisionError", "--debug")
    with pytest.raises(ZeroDivisionError):
        main(["--debug", "inspect", tok_file])
    with pytest.raises(ZeroDivisionError):
        main(["inspect", "--debug", tok_file])


def test_a_library_connection_error_is_not_called_a_stream_failure(capsys, monkeypatch, tok_file):
    """Ray's "Could not find any running Ray instance" (a ConnectionError, so an OSError) read "cannot read
    or write the standard streams (or a file)"."""
    from tokenmill.cli import tokenizer_cmds

    def no_cluster(args):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.")

    monkeypatch.setattr(tokenizer_cmds, "cmd_inspect", no_cluster)
    err = fails(capsys, ["inspect", tok_file], "cannot connect: Could not find any running Ray instance")
    assert "standard streams" not in err


def test_debug_shows_the_traceback(tmp_path):
    env = {**os.environ, "TOKENMILL_DEBUG": ""}
    cmd = [sys.executable, "-m", "tokenmill", "encode", "--tokenizer", str(tmp_path / "none.json"), "x"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    r = subprocess.run([cmd[0], "-m", "tokenmill", "--debug", *cmd[3:]], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 1 and "Traceback" in r.stderr and "does not exist" in r.stderr


def test_a_full_disk_names_the_output_not_the_standard_streams(capsys, monkeypatch, tmp_path):
    """A write that fails for space (ENOSPC names no file) had read "cannot read or write the standard streams
    (or a file): No space left on device", naming neither the output nor what to do; an error naming the
    temporary file named a file the user never gave. Both name the output now, and the temporary is gone."""
    import errno
    import pathlib

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "in.txt").write_text("the cat sat on the mat\n" * 20)
    monkeypatch.setattr(pathlib.Path, "write_text", full)
    out = tmp_path / "x.json"
    fails(capsys, ["train", "--input", str(tmp_path / "in.txt"), "--vocab-size", "260", "--out", str(out), "-q"],
          f"cannot write {str(out)!r}: No space left on device; free some space or pass a path on another disk")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]

    def too_large(self, *a, **k):  # (a `ulimit -f` limit: not a full disk, and no space to free)
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.setattr(pathlib.Path, "write_text", too_large)
    fails(capsys, ["train", "--input", str(tmp_path / "in.txt"), "--vocab-size", "260", "--out", str(out), "-q"],
          f"cannot write {str(out)!r}: File too large; the file is larger than this process or file system allows")

    def denied(self, *a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))  # (names the temporary)

    monkeypatch.setattr(pathlib.Path, "write_text", denied)
    err = fails(capsys, ["train", "--input", str(tmp_path / "in.txt"), "--vocab-size", "260", "--out", str(out), "-q"],
                f"cannot access {str(out)!r}: Permission denied")
    assert "tokenmill-tmp" not in err


def test_ctrl_c_exits_130_and_an_interrupted_build_says_it_resumes(capsys, monkeypatch, tok_file, tmp_path):
    """Ctrl-C: exit status 130, one line, no traceback; a store build's says that the same command takes it up
    again (it had said "interrupted" alone, the partial folder left unexplained)."""
    from tokenmill import TokenStore
    from tokenmill.cli import tokenizer_cmds

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(TokenStore, "build", ctrl_c)
    (tmp_path / "a.txt").write_text("the cat")
    assert main(["store", "build", "--tokenizer", tok_file, "--input", str(tmp_path / "a.txt"), "--no-eos",
                 "--out", str(tmp_path / "s"), "-q"]) == 130
    assert capsys.readouterr().err == ("tokenmill store build: interrupted; the same command resumes the build from "
                                       "the shards it finished\n")
    monkeypatch.setattr(tokenizer_cmds, "cmd_inspect", ctrl_c)
    assert main(["inspect", tok_file]) == 130
    assert capsys.readouterr().err == "tokenmill inspect: interrupted\n"
