"""The CLI against the API: same merges, same ids, clear errors, --help with an example."""

import json
import subprocess
import sys

import pytest

from tokenmill import Tokenizer, train_bpe
from tokenmill.cli import build_parser, main


def run(*argv):
    return subprocess.run([sys.executable, "-m", "tokenmill", *argv], capture_output=True, text=True)


@pytest.fixture()
def corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.txt").write_text("the cat sat on the mat\nthe hat\n", encoding="utf-8")
    (d / "b.txt").write_text("低低低 低低 常用字\n", encoding="utf-8")
    return d


def test_train_cli_equals_api(corpus, tmp_path, capsys):
    out = tmp_path / "tok.json"
    assert main(["train", "--input", str(corpus), "--vocab-size", "280", "--out", str(out), "--quiet"]) == 0
    docs = [p.read_text(encoding="utf-8") for p in sorted(corpus.glob("*.txt"))]
    api = train_bpe(docs, 280)
    assert Tokenizer.load(out).merges.tolist() == api.merges.tolist()
    assert "merges" in capsys.readouterr().out


def test_split_lines_and_separator(corpus, tmp_path):
    for extra in (["--split-lines"], ["--separator", "\\n"]):
        out = tmp_path / "t.json"
        assert main(["train", "--input", str(corpus / "a.txt"), "--vocab-size", "260", "--out", str(out), "-q", *extra]) == 0
        assert Tokenizer.load(out).train_report is None  # not persisted, but the file loads


def test_encode_decode_inspect(corpus, tmp_path, capsys):
    out = tmp_path / "tok.json"
    main(["train", "--input", str(corpus), "--vocab-size", "270", "--special", "<|eos|>", "--out", str(out), "-q"])
    tok = Tokenizer.load(out)
    capsys.readouterr()
    main(["encode", "--tokenizer", str(out), "--json", "the cat 低"])
    ids = json.loads(capsys.readouterr().out)
    assert ids == tok.encode("the cat 低")
    main(["decode", "--tokenizer", str(out), *map(str, ids)])
    assert capsys.readouterr().out == "the cat 低\n"
    assert main(["encode", "--tokenizer", str(out), "x<|eos|>"]) == 1
    assert "allowed_special" in capsys.readouterr().err
    main(["encode", "--tokenizer", str(out), "--allow-special", "x<|eos|>"])
    assert capsys.readouterr().out.split()[-1] == str(tok.special_tokens["<|eos|>"])
    main(["inspect", str(out)])
    text = capsys.readouterr().out
    assert "first merges" in text and "longest tokens" in text and "<|eos|>" in text


def test_invalid_utf8_names_file_and_offset(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello \xff world")
    assert main(["train", "--input", str(bad), "--vocab-size", "260", "--out", str(tmp_path / "t.json"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "bad.txt" in err and "byte offset 6" in err and "--errors replace" in err
    assert main(["train", "--input", str(bad), "--vocab-size", "258", "--out", str(tmp_path / "t.json"), "-q",
                 "--errors", "replace"]) == 0


def test_bad_tokenizer_file(tmp_path, capsys):
    p = tmp_path / "broken.json"
    p.write_text("{not json")
    assert main(["inspect", str(p)]) == 1
    assert "broken.json" in capsys.readouterr().err


def test_every_command_has_help_with_example():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices
    for name, p in sub.choices.items():
        assert "example:" in p.format_help() and "tokenmill" in p.epilog, name


def test_module_entry_point():
    r = run("--help")
    assert r.returncode == 0 and "train" in r.stdout


def test_first_run_encode_is_pure_python_and_exact(gpt2_ranks_path, tmp_path):
    """With numba's cache empty (a new machine), `tokenmill encode` on a small text does not wait ~30 s
    for the kernels: the pure-Python encoder gives the same ids, and says so on stderr."""
    import os

    text = "Hello world, 你好世界 <|endoftext|> ok"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), TOKENMILL_CACHE_DIR=str(tmp_path / "tm"))
    argv = [sys.executable, "-m", "tokenmill", "encode", "--tokenizer", str(gpt2_ranks_path), "--pattern", "gpt2",
            "--special", "<|endoftext|>=50256", "--allow-special", "--json", text]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pure Python" in out.stderr
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={"<|endoftext|>": 50256})
    assert json.loads(out.stdout) == tok.encode(text, allowed_special="all")
    assert not list((tmp_path / "numba").rglob("*.nbi"))  # nothing was compiled
    quiet = subprocess.run([*argv[:-1], "--quiet", text], capture_output=True, text=True, env=env, timeout=60)
    assert quiet.stdout == out.stdout and quiet.stderr == ""


def test_first_run_rule(monkeypatch):
    from tokenmill.cli import tokenizer_cmds as C
    from tokenmill.tokenizer import encoder

    tok = Tokenizer.from_merges([(104, 105)])
    monkeypatch.setattr(encoder, "kernels_cached", lambda: False)
    assert C._before_first_compile(tok, "hi")
    assert not C._before_first_compile(tok, "x" * (C.FIRST_RUN_PYTHON_CHARS + 1))  # big: compile, then fast
    monkeypatch.setattr(encoder, "kernels_cached", lambda: True)
    assert not C._before_first_compile(tok, "hi")
