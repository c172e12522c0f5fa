"""The CLI against the API: same merges, same ids, clear errors, --help with an example."""

import json
import shlex
import subprocess
import sys

import numpy as np
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
    assert "--special-text special (or --allow-special)" in capsys.readouterr().err  # (the CLI's options, not Python's)
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
    capsys.readouterr()
    # --errors replace: replaced, and counted on stderr, by every command that reads --input
    (tmp_path / "ok.txt").write_text("fine \ufffd spelled", encoding="utf-8")  # a real U+FFFD: not counted
    tok = tmp_path / "t.json"
    commands = {"train": lambda *i: ["train", "--input", *i, "--vocab-size", "258", "--out", str(tok), "-q"],
                "encode": lambda *i: ["encode", "--tokenizer", str(tok), "--input", i[0], "-q"],
                "windows": lambda *i: ["windows", "--tokenizer", str(tok), "--input", *i, "--window", "4", "-q"]}
    for name, argv in commands.items():
        assert main([*argv(str(bad), str(tmp_path / "ok.txt")), "--errors", "replace"]) == 0, name
        err = capsys.readouterr().err
        assert "replaced 1 invalid UTF-8 sequence with U+FFFD" in err and "bad.txt at byte offset 6" in err, name
        assert main([*argv(str(tmp_path / "ok.txt")), "--errors", "replace"]) == 0, name
        assert "replaced" not in capsys.readouterr().err, name


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
        # every command takes --quiet (a script adds -q to each call: decode, inspect, store stats and loader had
        # refused it as a usage error)
        inner = next((a for a in p._actions if a.dest == "store_command" or a.choices and a.nargs == "A..."), None)
        leaves = inner.choices.items() if inner is not None else [(name, p)]
        for leaf, q in leaves:
            assert "--quiet" in q.format_help(), leaf


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


def test_first_run_rule(monkeypatch, first_run):
    """python_first: the twin while the kernels are not cached and the process's budget lasts, then
    the compiled path; never once the kernels are cached, nor with TOKENMILL_PYTHON_FIRST=0."""
    from tokenmill import _jit

    assert _jit.python_first("f", None, 10, 25) and _jit.python_first("f", None, 15, 25)
    assert not _jit.python_first("f", None, 1, 25)  # the budget is spent: compile, then fast
    assert _jit.twins_used == {"f"}
    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")
    assert not _jit.python_first("g", None, 1, 25)
    monkeypatch.delenv("TOKENMILL_PYTHON_FIRST")
    monkeypatch.setattr(_jit, "is_cached", lambda k: True)
    assert not _jit.python_first("g", None, 1, 25)
    monkeypatch.setattr(_jit, "is_cached", lambda k: False)
    assert not _jit.python_first("g", None, 1, 25)  # known compiled: stays compiled


def test_first_run_asks_the_disk_cache_again_only_after_a_while(monkeypatch, first_run):
    """Each small call of a first run read numba's index file again (~170 us: pad_batch of 8 short sequences took
    twice its time); "not cached" is now believed for ``UNCACHED_RECHECK_S``, then asked again."""
    from tokenmill import _jit

    asked, now = [], [100.0]
    monkeypatch.setattr(_jit, "is_cached", lambda k: asked.append(k) or False)
    monkeypatch.setattr(_jit.time, "monotonic", lambda: now[0])
    assert all(_jit.python_first("h", "kernel", 1, 1000) for _ in range(50)) and len(asked) == 1
    now[0] += _jit.UNCACHED_RECHECK_S + 1
    monkeypatch.setattr(_jit, "is_cached", lambda k: asked.append(k) or True)  # compiled by another process
    assert not _jit.python_first("h", "kernel", 1, 1000) and len(asked) == 2
    assert not _jit.python_first("h", "kernel", 1, 1000) and len(asked) == 2  # known compiled


def test_first_run_library_paths_equal_the_compiled_ones(monkeypatch, gpt2_ranks_path, first_run):
    """With the kernels taken as not compiled, encode / encode_ordinary / encode_batch (lists and
    arrays) and train_bpe run their twins, build no compiled encoder, and give the same results."""
    from tokenmill import _jit

    texts = ["Hello world, 你好世界 <|endoftext|> ok", "", "  spaces\n\nand 123 digits", "ünïcödé"]
    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")  # the kernels, even where they are not in the cache yet
    warm = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={"<|endoftext|>": 50256})
    want = [warm.encode(t, allowed_special="all") for t in texts]
    want_ordinary = [warm.encode_ordinary(t) for t in texts]
    trained = train_bpe(texts * 3, 300, special_tokens=["<|endoftext|>"])

    monkeypatch.delenv("TOKENMILL_PYTHON_FIRST")  # the twins from here on
    cold = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={"<|endoftext|>": 50256})
    assert [cold.encode(t, allowed_special="all") for t in texts] == want
    assert [cold.encode_ordinary(t) for t in texts] == want_ordinary
    assert cold.encode_batch(texts, allowed_special="all") == want
    arrays = cold.encode_batch(texts, allowed_special="all", as_arrays=True)
    assert [a.dtype for a in arrays] == [np.int64] * len(texts) and [a.tolist() for a in arrays] == want
    assert cold._encoder is None
    again = train_bpe(texts * 3, 300, special_tokens=["<|endoftext|>"])
    assert np.array_equal(again.merges, trained.merges) and again.train_report == trained.train_report
    assert _jit.twins_used == {"encode", "count", "merge"}




def test_pattern_and_special_of_a_non_rank_file_are_refused_and_warnings_are_one_line(tmp_path, capsys):
    """``--pattern`` / ``--special`` were ignored for a tokenizer file that carries its own; a warning came
    out as Python prints it (file, line, the calling source line), under ``--quiet`` too; ``--quiet`` silences
    progress, not warnings (a folder's files left out had gone unsaid)."""
    tok = train_bpe(["hello world " * 20], 270, pattern="gpt2")
    tok.save(tmp_path / "tok.json")
    assert main(["encode", "--tokenizer", str(tmp_path / "tok.json"), "--pattern", r"\w+", "hi"]) == 1
    assert "pattern (--pattern / --special) apply to rank files only" in capsys.readouterr().err
    assert main(["encode", "--tokenizer", str(tmp_path / "tok.json"), "--special", "foo=5", "hi"]) == 1
    assert "special_tokens (--pattern / --special) apply to rank files only" in capsys.readouterr().err
    (tmp_path / "h.txt").write_text("hello hello")
    for quiet in (False, True):
        assert main(["train", "--input", str(tmp_path / "h.txt"), "--vocab-size", "300", "--out",
                     str(tmp_path / "x.json")] + (["--quiet"] if quiet else [])) == 0
        err = capsys.readouterr().err
        assert err.startswith("tokenmill train: warning: training stopped early") and \
            err.count("\n") == 1 and "UserWarning" not in err


def test_inspect_takes_a_rank_file_with_its_pattern(gpt2_ranks_path, capsys, tmp_path):
    """``inspect`` of a rank file told the user to pass ``--pattern``, which ``inspect`` did not take. A rank
    file tokenmill knows (GPT-2's, by its SHA-256) takes its model's pattern; another one asks for it."""
    assert main(["inspect", str(gpt2_ranks_path), "--top", "1"]) == 0
    assert capsys.readouterr().out.startswith("Tokenizer(vocab_size=50,257, pattern=gpt2, special_tokens=1")
    part = tmp_path / "part.tiktoken"
    part.write_bytes(b"".join(gpt2_ranks_path.read_bytes().splitlines(keepends=True)[:300]))
    assert main(["inspect", str(part)]) == 1
    assert "no split pattern, and not one whose model tokenmill knows; give its split pattern, e.g. pattern=" in \
        capsys.readouterr().err
    assert main(["inspect", str(part), "--pattern", "gpt2", "--top", "1"]) == 0
    assert capsys.readouterr().out.startswith("Tokenizer(vocab_size=300, pattern=gpt2")


def test_encode_special_text_options(gpt2_ranks_path, capsys):
    """The error named Python's allowed_special= / disallowed_special=, and the CLI had no way to encode a
    special token's text as plain text."""
    base = ["encode", "--tokenizer", str(gpt2_ranks_path), "--pattern", "gpt2", "--special", "<|endoftext|>=50256"]
    assert main(base + ["a<|endoftext|>"]) == 1
    err = capsys.readouterr().err
    assert "--special-text special (or --allow-special)" in err and "allowed_special=" not in err
    for opts, want in ((["--special-text", "special"], "64 50256"), (["--allow-special"], "64 50256"),
                       (["--special-text", "plain"], "64 27 91 437 1659 5239 91 29")):
        assert main(base + opts + ["a<|endoftext|>"]) == 0
        assert capsys.readouterr().out.strip() == want


def test_cli_messages_say_what_to_change(tmp_path, capsys):
    """--sample that kept nothing read as an empty corpus; --separator '' was taken as none; demo --out of
    a file said "cannot access ...: File exists"; windows --preview -1 named preview's n=."""
    (tmp_path / "c.txt").write_text("a\nb\nc\n")
    out = str(tmp_path / "t.json")
    assert main(["train", "--input", str(tmp_path / "c.txt"), "--split-lines", "--vocab-size", "270", "--sample",
                 "0.01", "--out", out]) == 1
    assert "--sample 0.01, a fraction of 0.01 of the documents, kept none of them: raise it" in capsys.readouterr().err
    assert main(["train", "--input", str(tmp_path / "c.txt"), "--separator", "", "--vocab-size", "270",
                 "--out", out]) == 1
    assert "--separator '' is empty" in capsys.readouterr().err
    assert main(["demo", "--quick", "--out", str(tmp_path / "c.txt")]) == 1
    assert "is a file; the demo writes a folder" in capsys.readouterr().err
    train_bpe(["hello world " * 20], 270, pattern="gpt2").save(out)
    assert main(["windows", "--tokenizer", out, "--input", str(tmp_path / "c.txt"), "--window", "4",
                 "--preview", "-1"]) == 1
    assert "--preview=-1 is out of range" in capsys.readouterr().err
    # store build read --separator '' as none (each file one document), where train and windows refuse it
    assert main(["store", "build", "--tokenizer", out, "--input", str(tmp_path / "c.txt"), "--separator", "",
                 "--no-eos", "--out", str(tmp_path / "s")]) == 1
    assert "--separator '' is empty" in capsys.readouterr().err and not (tmp_path / "s").exists()
    # inspect --top 0 called a trained tokenizer's merges "imported" (it looked at the empty display list)
    assert main(["inspect", out, "--top", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "merges: 10" in lines and not any("imported" in x for x in lines)
    assert "longest tokens:" not in lines  # (no heading over nothing)
    # the library's names inside a message, not only before '=': said as the command line spells them
    assert main(["train", "--input", str(tmp_path / "c.txt"), "--vocab-size", "100", "--out", out]) == 1
    assert "; pass --vocab-size >= 256" in capsys.readouterr().err
    assert main(["windows", "--tokenizer", out, "--input", str(tmp_path / "c.txt"), "--window", "4",
                 "--reserve", "4"]) == 1
    assert "--reserve=4 leaves no room in --window=4; pass --reserve < --window" in capsys.readouterr().err


def test_windows_encodes_in_batches_as_encode_ordinary_does():
    """`tokenmill windows` encoded one document at a time (256 MiB of lines: 107 s, a store build 8 s); in
    batches now, with the same ids: special-token text plain, empty lines, batch edges, a tokenizer without
    encode_batch."""
    import numpy as np

    from tokenmill.cli.windows import _encoded

    tok = train_bpe(["hello world <|end|> " * 20], 280, pattern="gpt2", special_tokens=["<|end|>"])
    texts = [f"line {i} hello <|end|> world" if i % 3 else "" for i in range(50)]
    want = [np.asarray(tok.encode_ordinary(t), np.int64) for t in texts]

    class Plain:  # the protocol's minimum
        encode_ordinary = tok.encode_ordinary

    for got in (_encoded(tok, iter(texts), per_batch=7), _encoded(Plain(), iter(texts))):
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def test_encode_names_invalid_bytes_on_the_command_line(gpt2_ranks_path, capsys):
    """Bytes that are not UTF-8 in the text argument (Python gives them as lone surrogates) were reported as a
    "lone surrogate" pointing to the Python function replace_surrogates."""
    assert main(["encode", "--tokenizer", str(gpt2_ranks_path), "--pattern", "gpt2", "ab\udcffc"]) == 1
    err = capsys.readouterr().err
    assert "the text argument holds bytes that are not UTF-8 (at character 2)" in err and "--input FILE" in err


def test_encode_reads_stdin_and_decode_takes_what_encode_json_prints(corpus, tmp_path):
    """``encode --input -`` reads standard input ("input '-' does not exist" before); ``decode`` takes the
    JSON list ``encode --json`` prints, as an argument or on standard input (``-``), besides integers."""
    out = tmp_path / "tok.json"
    assert main(["train", "--input", str(corpus), "--vocab-size", "280", "--special", "<|eos|>", "--out", str(out),
                 "--quiet"]) == 0
    text = "the cat 低低"
    ids = Tokenizer.load(out).encode(text)
    enc = subprocess.run([sys.executable, "-m", "tokenmill", "encode", "--tokenizer", str(out), "--input", "-",
                          "--json"], input=text.encode(), capture_output=True)
    assert json.loads(enc.stdout) == ids
    dec = subprocess.run([sys.executable, "-m", "tokenmill", "decode", "--tokenizer", str(out), "-"],
                         input=enc.stdout, capture_output=True)
    assert dec.stdout.decode() == text + "\n"
    exact = subprocess.run([sys.executable, "-m", "tokenmill", "decode", "--tokenizer", str(out), "-n", "-"],
                           input=enc.stdout, capture_output=True)
    assert exact.stdout.decode() == text  # -n: the bytes encoded, no line break added
    both = run("decode", "--tokenizer", str(out), json.dumps(ids[:2]), *map(str, ids[2:]))
    assert both.stdout == text + "\n"
    bad = run("decode", "--tokenizer", str(out), "x1")
    assert bad.returncode == 1 and "ids: 'x1' is not an integer" in bad.stderr
    e = Tokenizer.load(out).special_tokens["<|eos|>"]  # --skip-special leaves the special tokens' ids out
    assert run("decode", "--tokenizer", str(out), "--skip-special", json.dumps(ids + [e])).stdout == text + "\n"
    assert run("decode", "--tokenizer", str(out), json.dumps(ids + [e])).stdout == text + "<|eos|>\n"
    twice = run("decode", "--tokenizer", str(out), "-", "-")  # (the second '-' had read nothing, silently)
    assert twice.returncode == 1 and "'-' is given more than once" in twice.stderr


def test_train_takes_format_as_the_refusal_of_a_json_file_says(tmp_path, capsys):
    """A .json file's refusal said "(CLI: --format jsonl)", which `tokenmill train` and `windows` did not take
    (usage error, exit status 2): it was `store build`'s only."""
    (tmp_path / "d.json").write_text('{"text": "hello world"}\n{"text": "second doc"}\n')
    out = str(tmp_path / "t.json")
    assert main(["train", "--input", str(tmp_path / "d.json"), "--vocab-size", "260", "--out", out, "-q"]) == 1
    assert "pass --format jsonl;" in capsys.readouterr().err  # (the command line's spelling alone, since)
    assert main(["train", "--input", str(tmp_path / "d.json"), "--format", "jsonl", "--vocab-size", "260",
                 "--out", out, "-q"]) == 0
    assert "documents 2 of 2 (100.0% of 21 bytes)" in capsys.readouterr().out  # the two texts, not the JSON


def test_an_empty_input_path_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    """--input '' was Path(''), the current folder: train, windows and store build read every known file under it
    (133 files of a working folder, logs included) and exited 0; encode and store verify named '.'. And '-' where
    standard input is not read was "does not exist"."""
    tok = tmp_path / "t.json"
    train_bpe(["hello world " * 20], 266, pattern="gpt2").save(tok)
    (tmp_path / "notes.txt").write_text("some text that must not be read\n")
    monkeypatch.chdir(tmp_path)
    for argv in (["train", "--input", "", "--vocab-size", "260", "--out", str(tmp_path / "o.json")],
                 ["windows", "--tokenizer", str(tok), "--input", "", "--window", "8"],
                 ["store", "build", "--tokenizer", str(tok), "--input", "", "--out", str(tmp_path / "s")],
                 ["encode", "--tokenizer", str(tok), "--input", ""],
                 ["store", "verify", ""]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert "path is empty ('')" in err and "'.' is" not in err, (argv, err)
    assert not (tmp_path / "o.json").exists() and not (tmp_path / "s").exists()
    for argv in (["store", "build", "--tokenizer", str(tok), "--input", "-", "--out", str(tmp_path / "s")],
                 ["pack", "--lengths", "-", "--block-size", "8"]):
        assert main(argv) == 1, argv
        assert "input '-' (standard input) is not read here" in capsys.readouterr().err


def test_allow_special_with_a_tokenizer_of_no_special_tokens_says_it_changes_nothing(gpt2_ranks_path, capsys,
                                                                                       tmp_path):
    """A rank file without --special has no special tokens (one tokenmill does not know: GPT-2's own takes
    tiktoken's <|endoftext|>): --allow-special had been taken in silence, the text's '<|endoftext|>' encoded
    as plain text (exit 0), where the user asked for the special id."""
    text = "hi<|endoftext|>"
    part = tmp_path / "part.tiktoken"
    part.write_bytes(b"".join(gpt2_ranks_path.read_bytes().splitlines(keepends=True)[:300]))
    plain = Tokenizer.from_tiktoken(part, pattern="gpt2").encode(text)
    for option in (["--allow-special"], ["--special-text", "special"]):
        assert main(["encode", "--tokenizer", str(part), "--pattern", "gpt2", *option, "--json", text]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out) == plain
        assert err.startswith(f"tokenmill encode: warning: the tokenizer has no special tokens, so {' '.join(option)} "
                              "changes nothing") and "--special NAME=ID" in err
    for args in (["--tokenizer", str(part), "--pattern", "gpt2", "--special", "<|endoftext|>=50256"],
                 ["--tokenizer", str(gpt2_ranks_path)]):  # (GPT-2's file: tiktoken's special token)
        assert main(["encode", *args, "--allow-special", "--json", text]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out)[-1] == 50256 and "warning" not in err


def test_a_tokenizer_without_split_exports_ranks_it_can_be_read_back_from(tmp_path, capsys):
    """A tokenizer trained with --pattern none exported --to tiktoken: the read-back command printed had no
    --pattern (refused: a rank file holds none), and --pattern none was refused on read."""
    tok = train_bpe(["hello world hello there " * 50, "abc abc"], vocab_size=280, pattern=None,
                    special_tokens=["<|endoftext|>"])
    tok.save(tmp_path / "none.json")
    assert main(["export", "--tokenizer", str(tmp_path / "none.json"), "--to", "tiktoken", "--out",
                 str(tmp_path / "none.tiktoken")]) == 0
    said = capsys.readouterr().out
    back = shlex.split(said.split("read it back with ")[1].split(", or export")[0])
    assert back[2:4] == ["--pattern", "none"]
    text = "hello world, abc there"
    assert main(["encode", *back, "--json", text]) == 0
    assert json.loads(capsys.readouterr().out) == tok.encode(text)
    again = Tokenizer.from_tiktoken(tmp_path / "none.tiktoken", pattern="none", special_tokens=tok.special_tokens)
    assert again.pattern is None and again.encode(text) == tok.encode(text)


def test_export_writes_each_form_equal_to_the_api(gpt2_ranks_path, tmp_path, capsys):
    """`tokenmill export`: a rank file and its --pattern / --special in one tokenmill file, and back to ranks
    byte for byte; a transformers folder with the roles given or found by name; a tokenizer.json."""
    rank = ["--tokenizer", str(gpt2_ranks_path), "--pattern", "gpt2", "--special", "<|endoftext|>=50256"]
    own = tmp_path / "gpt2.json"
    assert main(["export", *rank, "--to", "tokenmill", "--out", str(own)]) == 0
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    assert Tokenizer.load(own) == tok and "wrote" in capsys.readouterr().out
    assert main(["export", "--tokenizer", str(own), "--to", "tiktoken", "--out", str(tmp_path / "g.tiktoken")]) == 0
    assert (tmp_path / "g.tiktoken").read_bytes() == gpt2_ranks_path.read_bytes()
    # the ranks alone: what the rank file leaves out is said, as the options that read it back
    said = capsys.readouterr().out
    assert "a rank file holds no split pattern or special tokens, so read it back with --tokenizer" in said
    back = shlex.split(said.split("read it back with ")[1].split(", or export")[0])
    assert back == ["--tokenizer", str(tmp_path / "g.tiktoken"), "--pattern", "gpt2", "--special",
                    "<|endoftext|>=50256"]
    assert main(["encode", *back, "--json", "--allow-special", "hi<|endoftext|>"]) == 0
    assert json.loads(capsys.readouterr().out) == tok.encode("hi<|endoftext|>", allowed_special="all")
    assert main(["export", "--tokenizer", str(own), "--to", "huggingface", "--out", str(tmp_path / "t.json")]) == 0
    tokenizers = pytest.importorskip("tokenizers")
    text = "Hello world, 你好 — 2026\n\n\tdef f(): pass"
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "t.json")).encode(text).ids == tok.encode(text)
    folder = tmp_path / "hf"
    assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(folder), "--pad-token",
                 "<|endoftext|>", "--model-max-length", "1024"]) == 0
    assert "eos_token '<|endoftext|>', pad_token '<|endoftext|>'" in capsys.readouterr().out
    assert json.loads((folder / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 1024}
    assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(tmp_path / "hf2"),
                 "--eos-token", "none"]) == 0
    assert json.loads((tmp_path / "hf2" / "tokenizer_config.json").read_text()) == {
        "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}


def test_export_refusals_name_the_options(gpt2_ranks_path, tmp_path, capsys):
    own = tmp_path / "t.json"
    train_bpe(["the cat sat on the mat"] * 5, 262, special_tokens=["<|eos|>"]).save(own)
    assert main(["export", "--tokenizer", str(own), "--to", "huggingface", "--out", str(tmp_path / "x.json"),
                 "--eos-token", "<|eos|>"]) == 1
    assert "--eos-token only go into a transformers folder" in capsys.readouterr().err
    assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(tmp_path / "f"),
                 "--bos-token", "<s>"]) == 1
    err = capsys.readouterr().err
    assert "--bos-token='<s>' is not a special token of this tokenizer (it has: '<|eos|>')" in err
    assert err.rstrip().endswith("pass one of them, or none")  # (the command line's spelling of None)
    before = own.read_bytes()
    assert main(["export", "--tokenizer", str(own), "--to", "huggingface", "--out", str(own)]) == 1
    assert "also an input" in capsys.readouterr().err and own.read_bytes() == before  # (never over the file it reads)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_export_of_a_sentencepiece_model_says_which_forms_it_has(tmp_path, capsys):
    from tests.tokenizer.test_model_tokenizers import _dir

    model = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tokenizer.model.v1") / "tokenizer.model.v1"
    for to in ("tokenmill", "tiktoken"):
        assert main(["export", "--tokenizer", str(model), "--to", to, "--out", str(tmp_path / "x")]) == 1
        err = capsys.readouterr().err
        assert f"has no {to} form" in err and "pass --to huggingface or --to transformers" in err
    assert main(["export", "--tokenizer", str(model), "--to", "transformers", "--out", str(tmp_path / "m")]) == 0
    assert "eos_token '</s>', bos_token '<s>', unk_token '<unk>'" in capsys.readouterr().out


def test_export_takes_a_chat_template_file(tmp_path, capsys):
    own = tmp_path / "t.json"
    train_bpe(["the cat sat on the mat"] * 5, 262, special_tokens=["<|eos|>"]).save(own)
    (tmp_path / "chat.jinja").write_text("{% for m in messages %}{{ m['content'] }}<|eos|>{% endfor %}")
    out = tmp_path / "hf"
    assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(out), "--chat-template",
                 str(tmp_path / "chat.jinja")]) == 0
    assert "; a chat template)" in capsys.readouterr().out
    conf = json.loads((out / "tokenizer_config.json").read_text())
    assert conf["chat_template"] == (tmp_path / "chat.jinja").read_text()
    (tmp_path / "bad.jinja").write_bytes(b"{{ x }}\xff")
    assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(tmp_path / "hf2"),
                 "--chat-template", str(tmp_path / "bad.jinja")]) == 1
    assert "--chat-template" in capsys.readouterr().err and not (tmp_path / "hf2").exists()
    assert main(["export", "--tokenizer", str(own), "--to", "huggingface", "--out", str(tmp_path / "x.json"),
                 "--chat-template", str(tmp_path / "chat.jinja")]) == 1
    assert "--chat-template only go into a transformers folder" in capsys.readouterr().err
    (tmp_path / "empty.jinja").write_text("\n")
    for bad, said in ((["--chat-template", str(tmp_path / "empty.jinja")], "empty.jinja' is empty; a chat template"),
                      (["--model-max-length", "0"], "--model-max-length 0: pass a positive number of tokens")):
        assert main(["export", "--tokenizer", str(own), "--to", "transformers", "--out", str(tmp_path / "hf3"),
                     *bad]) == 1
        assert said in capsys.readouterr().err and not (tmp_path / "hf3").exists()


def test_export_of_a_wrapped_tokenizer_is_refused_in_every_form(tmp_path, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer(tokenizers.models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    hf.save(str(tmp_path / "wp.json"))
    for to in ("tiktoken", "tokenmill", "huggingface", "transformers"):
        assert main(["export", "--tokenizer", str(tmp_path / "wp.json"), "--to", to, "--out",
                     str(tmp_path / f"out-{to}"), "-q"]) == 1
        err = capsys.readouterr().err
        assert "is run through tokenizers (tokenmill cannot reproduce it exactly)" in err and "Error" not in err, to
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wp.json"]


def test_train_special_repeated_keeps_every_token(corpus, tmp_path, capsys):
    """`train --special A --special B` had kept B alone (the option replaced, where encode's --special repeats)."""
    out = tmp_path / "tok.json"
    assert main(["train", "--input", str(corpus), "--vocab-size", "270", "--special", "<|endoftext|>", "--special",
                 "<pad>", "<|im_end|>", "--out", str(out), "-q"]) == 0
    assert list(Tokenizer.load(out).special_tokens) == ["<|endoftext|>", "<pad>", "<|im_end|>"]
    assert main(["train", "--input", str(corpus), "--vocab-size", "270", "--special", "<pad>", "--special", "<pad>",
                 "--out", str(out), "-q"]) == 1
    assert "special token '<pad>' is listed twice" in capsys.readouterr().err


def test_export_to_tiktoken_of_many_special_tokens_says_a_command_that_runs(tmp_path, capsys):
    """Tekken's 1,000 special tokens: the message listed 8 --special options and "and 992 more --special", a
    command that could not be run as printed; it now points to the one-file export."""
    tok = Tokenizer.from_merges([(104, 105)], special_tokens=[f"<s{i}>" for i in range(9)])
    tok.save(tmp_path / "t.json")
    assert main(["export", "--tokenizer", str(tmp_path / "t.json"), "--to", "tiktoken",
                 "--out", str(tmp_path / "t.tiktoken")]) == 0
    said = capsys.readouterr().out
    assert "9 special tokens: export --to tokenmill for one file that holds them all" in said
    assert "more --special" not in said


def test_train_refuses_options_that_would_be_ignored_and_reads_stdin(tmp_path, capsys):
    """From a probe: `--special NAME=ID` (the other commands' form, which `export --to tiktoken` prints) had made a
    special token named '<|endoftext|>=1998' and trained over the text's own '<|endoftext|>'; --field on text files
    and --split-lines on JSONL files were ignored without a word; '-' was "does not exist"."""
    (tmp_path / "a.txt").write_text("hello<|endoftext|>world hello world\n")
    (tmp_path / "r.jsonl").write_text('{"text": "x y"}\n')
    out = str(tmp_path / "t.json")
    base = ["train", "--vocab-size", "300", "--out", out, "-q"]
    for extra, said in (
            (["--input", str(tmp_path / "a.txt"), "--special", "<|endoftext|>=1998"],
             "pass the token's text alone, --special '<|endoftext|>'"),
            (["--input", str(tmp_path / "a.txt"), "--field", "body"], "--field 'body' names a JSONL"),
            (["--input", str(tmp_path / "r.jsonl"), "--split-lines"], "cuts text files into documents, but the input")):
        assert main(base + extra) == 1, extra
        assert said in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()
    # a mix: each option applies to the files it is for
    assert main(base + ["--input", str(tmp_path / "a.txt"), str(tmp_path / "r.jsonl"), "--split-lines"]) == 0
    assert "documents 2 of 2" in capsys.readouterr().out
    assert main(base + ["--input", str(tmp_path / "a.txt"), "--special", "<|endoftext|>"]) == 0
    assert "1 special token spelled in the text" in capsys.readouterr().out
    got = subprocess.run([sys.executable, "-m", "tokenmill", *base, "--input", "-"], input="x y x y",
                         capture_output=True, text=True)
    assert got.returncode == 0 and "documents 1 of 1 (100.0% of 7 bytes)" in got.stdout, got.stderr
