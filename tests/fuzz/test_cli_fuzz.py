"""Hostile command lines: the CLI exits 0, 1 (one line ``tokenmill <cmd>: error: ...``) or 2
(argparse usage), never with a traceback, a signal or a hang. Each call is its own process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .conftest import budget

NUMBERS = st.sampled_from(["0", "-3", "1", "7", "1e20", "100000000000000000000", "9223372036854775808", "nan",
                           "inf", "-inf", "1.5", "", "0x10", "2048", "-0"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    (d / "a.txt").write_text("the cat sat on the mat. 你好。\n\nsecond paragraph\n" * 5)
    (d / "bad.txt").write_bytes(b"ok \xff\xfe bytes")
    (d / "lengths.txt").write_text("3\n4\n1.5\n")
    (d / "tok.json").write_text('{"format": "tokenmill.tokenizer", "version": 1')
    return d


def run(argv, tmp):
    env = {**os.environ, "TOKENMILL_QUIET": "1", "TOKENMILL_DEBUG": "", "TOKENMILL_MAX_PLAN_ROWS": "1000000",
           "TOKENMILL_REGEX_TIMEOUT": "2"}
    r = subprocess.run([sys.executable, "-m", "tokenmill", *argv], capture_output=True, text=True, env=env,
                       cwd=tmp, timeout=120)
    assert r.returncode in (0, 1, 2), (argv, r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, (argv, r.stderr[-2000:])
    if r.returncode == 1:
        lines = r.stderr.strip().splitlines()
        assert lines and lines[-1].startswith("tokenmill ") and ": error: " in lines[-1], (argv, r.stderr)
        assert "unexpected" not in lines[-1], (argv, lines[-1])  # an unexpected error is a bug
    return r


@budget(4, 150)
@given(NUMBERS, NUMBERS, NUMBERS, st.sampled_from(["best_fit", "greedy", "concat"]))
def test_pack(files, n, block, sigma, method):
    run(["pack", "--lognormal", n or "5", "--block-size", block or "8", "--sigma", sigma or "1", "--method", method],
        files)


@budget(3, 100)
@given(NUMBERS, NUMBERS, st.sampled_from(["a.txt", "bad.txt", "missing.txt", ".", "/dev/zero", "lengths.txt"]),
       st.sampled_from(["\\n", "\\x", "\\u12", "。", "\\\\", ""]))
def test_train_and_windows(files, vocab, window, inp, sep):
    extra = ["--separator", sep] if sep else []
    r = run(["train", "--input", inp, "--vocab-size", vocab or "260", "--out", "tok2.json", "-q", *extra], files)
    tok = "tok2.json" if r.returncode == 0 else "tok.json"
    run(["windows", "--tokenizer", tok, "--input", inp, "--window", window or "8", "--preview", "1"], files)


@budget(3, 100)
@given(st.sampled_from(["tok.json", "/dev/zero", ".", "missing.json", "a.txt"]), NUMBERS,
       st.sampled_from(["hello", "", "\udcff"]))
def test_encode_decode_inspect(files, tok, n, text):
    run(["encode", "--tokenizer", tok, text], files)
    run(["decode", "--tokenizer", tok, n or "1"], files)
    run(["inspect", tok, "--top", n or "3"], files)
