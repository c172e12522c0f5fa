"""`tokenmill store build | verify | stats`: same store as the API, clear errors, --help examples."""

from __future__ import annotations

import json

import pytest

from tokenmill import TokenStore
from tokenmill.cli import build_parser, main

from .conftest import make_corpus


def test_build_verify_stats(tmp_path, tok, capsys):
    make_corpus(tmp_path / "in")
    tok.save(tmp_path / "tok.json")
    out = tmp_path / "s"
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "in"),
                 "--out", str(out), "--split-lines", "--workers", "1", "--shard-mb", "0.0005", "--quiet"]) == 0
    assert "documents" in capsys.readouterr().out
    api = TokenStore.build(tmp_path / "api", [tmp_path / "in"], tok, split_lines=True, workers=2,
                           shard_bytes=int(0.0005 * 2**20), progress=False)
    assert TokenStore.open(out).fingerprint == api.fingerprint
    assert main(["store", "verify", str(out), "-q"]) == 0
    assert capsys.readouterr().out.startswith("ok: ")
    assert main(["store", "verify", str(out), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "shards": api.num_shards, "documents": len(api),
                                                   "tokens": api.num_tokens,
                                                   "bytes": sum(f.stat().st_size for f in out.glob("shard-*"))}
    assert main(["store", "stats", str(out), "--json", "--plot", str(tmp_path / "len.png")]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["documents"] == len(api) and st["tokens"] == api.num_tokens
    assert st["percentiles"]["p100"] == int(api.lengths.max()) and sum(st["histogram"]["counts"]) == len(api)
    assert (tmp_path / "len.png").read_bytes()[:4] == b"\x89PNG"
    assert 1.0 < st["bytes_per_token"] < 4.0
    for ext in ("svg", "pdf"):  # (the same bytes every run: no date, no random element ids)
        plots = [tmp_path / f"{k}.{ext}" for k in (1, 2)]
        for p in plots:
            assert main(["store", "stats", str(out), "--json", "--plot", str(p)]) == 0
        assert plots[0].read_bytes() == plots[1].read_bytes()
    capsys.readouterr()
    # an output inside the store's folder is refused before the work (a build there again had stopped at it)
    assert main(["store", "stats", str(out), "--plot", str(out / "len.png")]) == 1
    assert "is inside the store's folder" in capsys.readouterr().err and not (out / "len.png").exists()
    (out / "sub").mkdir()  # (a link into the store, then '..': lexically outside, really inside)
    (tmp_path / "link").symlink_to(out / "sub")
    assert main(["store", "stats", str(out), "--plot", str(tmp_path / "link" / ".." / "len.png")]) == 1
    assert "is inside the store's folder" in capsys.readouterr().err and not (out / "len.png").exists()
    (out / "sub").rmdir()
    assert main(["report", "--tokenizer", str(tmp_path / "tok.json"), "--store", str(out), "--out",
                 str(out / "sub" / "r.html"), "-q"]) == 1
    assert "the report" in capsys.readouterr().err and not (out / "sub").exists()


def test_quiet_silences_progress_not_a_warning_about_the_data(tmp_path, tok, capsys):
    """``-q`` had hidden the warning that a folder's ``b.json`` was left out: the output said "from 1 file"."""
    tok.save(tmp_path / "tok.json")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"text": "kept"}\n')
    (tmp_path / "in" / "b.json").write_text('{"text": "left out"}\n')
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "in"),
                 "--out", str(tmp_path / "s"), "-q"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("tokenmill store build: warning: the folder") and "1 file of another type left out (b.json)" \
        in err and err.count("\n") == 1


def test_errors_are_reported_not_raised(tmp_path, tok, capsys):
    tok.save(tmp_path / "tok.json")
    (tmp_path / "bad.jsonl").write_text('{"body": 1}\n')
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input",
                 str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "s"), "-q"]) != 0
    err = capsys.readouterr().err
    assert "bad.jsonl:1: no field 'text'; the record's fields are: 'body'" in err
    assert err.startswith("tokenmill store build: error: ")  # the subcommand named (it said "tokenmill store:")
    assert main(["store", "verify", str(tmp_path / "s")]) != 0
    err = capsys.readouterr().err
    assert "not a finished token store" in err and err.startswith("tokenmill store verify: error: ")
    # a build that stopped on bad input is not called only "interrupted": it says to fix what stopped it
    assert "or stopped on an error such as bad input: rerun it with the same arguments to resume, once what " \
        "stopped it is fixed" in err
    assert main(["store", "verify", str(tmp_path / "bad.jsonl")]) != 0  # an input file given for the store
    assert "bad.jsonl is a file, not a token store" in capsys.readouterr().err
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.txt").write_text("hi")
    assert main(["store", "stats", str(tmp_path / "plain")]) != 0
    assert "a store is what `tokenmill store build --input FILES --out FOLDER` writes" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["build", "verify", "stats"])
def test_help_has_an_example(cmd, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["store", cmd, "--help"])
    assert "example:\n  tokenmill store " + cmd in capsys.readouterr().out


def test_blank_lines_split_lines_skips_are_counted_and_said(tmp_path, tok, capsys):
    """``--split-lines`` skips blank and whitespace-only lines (a JSONL record of whitespace stays a document):
    the store build and ``tokenmill train`` say how many, where they had said nothing (3 of 6 lines gone, the
    summary read "3 documents")."""
    from tokenmill.data.readers import FileSource
    from tokenmill.data.text import iter_documents

    path = tmp_path / "lines.txt"
    path.write_bytes(b"hello world\n   \n\nfoo bar\r\n\t\r\nbaz\n")
    blank = [0]
    assert list(iter_documents([path], split_lines=True, blank=blank)) == ["hello world", "foo bar", "baz"]
    assert blank == [3]
    src = FileSource([path], split_lines=True)
    for _ in range(2):  # (a second read counts its own)
        assert [t for texts, _, _ in src.batches() for t in texts] == ["hello world", "foo bar", "baz"]
        assert src.blank_lines == [3]
    tok.save(tmp_path / "tok.json")
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(path), "--out",
                 str(tmp_path / "s"), "--split-lines", "--no-eos", "--quiet"]) == 0
    assert "3 blank lines skipped" in capsys.readouterr().err
    assert len(TokenStore.open(tmp_path / "s")) == 3
    assert main(["train", "--input", str(path), "--split-lines", "--vocab-size", "260", "--out",
                 str(tmp_path / "t.json"), "--quiet"]) == 0
    assert "3 blank lines skipped" in capsys.readouterr().out
    assert main(["windows", "--tokenizer", str(tmp_path / "t.json"), "--input", str(path), "--split-lines",
                 "--window", "4"]) == 0
    assert "3 blank lines skipped" in capsys.readouterr().err


def test_store_sft_writes_a_masked_source_the_loader_plans(tmp_path, tok, capsys):
    from tokenmill import MaskedSource, encode_sft

    tok.save(tmp_path / "tok.json")
    rows = [{"prompt": "the quick brown fox", "completion": " jumps over"}, {"prompt": "lazy", "completion": " dog"}]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    out = tmp_path / "sft"
    base = ["store", "sft", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "train.jsonl"),
            "--out", str(out), "--no-eos", "-q"]
    assert main(base + ["--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    want = encode_sft(tok, rows, append_eos=False)
    got = MaskedSource.open(out)
    assert said["examples"] == len(got) == 2 and said["targets"] == got.num_targets == want.num_targets
    assert [got.get(i).tolist() for i in range(2)] == [want.get(i).tolist() for i in range(2)]
    assert all((got.loss_mask(i) == want.loss_mask(i)).all() for i in range(2))
    got.check_tokenizer(tok)  # (the store of ids carries the tokenizer's hash)
    assert main(base) == 1
    assert "already holds tokens/ and loss_mask/" in capsys.readouterr().err
    assert main(["loader", str(out), "--batch-size", "1", "--block-size", "64", "--json", "-q"]) == 0
    plan = json.loads(capsys.readouterr().out)
    # the loader's planned targets are the completions' tokens (each example is a block's first document or not)
    assert plan["effective_targets_per_sample"] * plan["samples_per_epoch"] == want.num_targets
    assert main(["store", "stats", str(out)]) == 1
    assert "MaskedSource.open" in capsys.readouterr().err
    assert main(["loader", str(out), "--batch-size", "1", "--block-size", "64", "--split", "0.5", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 1  # (the training side of two examples)
    assert main(base[:-1] + ["--prompt-field", "question", "--overwrite"]) == 1
    assert "no field 'question'" in capsys.readouterr().err


def test_a_build_run_again_from_another_folder_is_the_same_build(tmp_path, tok, capsys, monkeypatch):
    """Inputs were recorded as typed: a build run from its folder with relative paths, then again from another with
    absolute ones, was "made with other arguments" (its --overwrite threw the finished shards away), and the
    store's provenance named a path no other folder finds."""
    import os

    from tokenmill.data.store import _comparable

    make_corpus(tmp_path / "work" / "in")
    tok.save(tmp_path / "tok.json")
    monkeypatch.chdir(tmp_path / "work")
    args = ["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--split-lines", "--workers", "1", "-q"]
    assert main(args + ["--input", "in", "--out", "st"]) == 0
    first = TokenStore.open(tmp_path / "work" / "st")
    monkeypatch.chdir(tmp_path)
    assert main(args + ["--input", str(tmp_path / "work" / "in"), "--out", str(tmp_path / "work" / "st")]) == 0
    again = TokenStore.open(tmp_path / "work" / "st")
    assert again.fingerprint == first.fingerprint and again.manifest["hash"] == first.manifest["hash"]  # (not rebuilt)
    assert os.path.isfile(again.provenance(0)[1])  # (an absolute path: found from here)
    # a build recorded before (its files as typed) compares as its files resolved from where it runs again
    rel = {"sources": [{"kind": "files", "files": ["in/a.txt"], "sizes": [1], "mtimes_ns": [2]}]}
    monkeypatch.chdir(tmp_path / "work")
    assert _comparable(rel) == _comparable({"sources": [{"kind": "files", "files": [str(tmp_path / "work/in/a.txt")],
                                                         "sizes": [3], "mtimes_ns": [4]}]})


def test_store_sft_of_chats_renders_them_with_the_template(tmp_path, tok, capsys):
    """Chats (a list of messages a record) rendered by --chat-template, the assistant's turns the targets; a record
    of a prompt and a completion beside them; errors name the record's line."""
    from tokenmill import MaskedSource, encode_sft

    tok.save(tmp_path / "tok.json")
    template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<s>{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    (tmp_path / "t.jinja").write_text(template)
    rows = [{"messages": [{"role": "user", "content": "the theme"}, {"role": "assistant", "content": "then there"}]},
            {"prompt": "the", "completion": " theme"}]
    (tmp_path / "chat.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    base = ["store", "sft", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "chat.jsonl"),
            "--chat-template", str(tmp_path / "t.jinja"), "-q"]
    assert main(base + ["--out", str(tmp_path / "sft")]) == 0
    assert ("the assistant turns of 1 chat and the completions and their EOS of 1 prompt-completion record; the rest "
            "is context") in capsys.readouterr().out
    got, want = MaskedSource.open(tmp_path / "sft"), encode_sft(tok, rows, chat_template=template)
    assert [got.get(i).tolist() for i in range(2)] == [want.get(i).tolist() for i in range(2)]
    assert [got.loss_mask(i).tolist() for i in range(2)] == [want.loss_mask(i).tolist() for i in range(2)]
    assert tok.decode(got.get(0)[got.loss_mask(0)].tolist()) == "then there<s>"
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps({"messages": rows[0]["messages"][:1]}))
    assert main(base[:5] + [str(tmp_path / "bad.jsonl")] + base[6:] + ["--out", str(tmp_path / "b")]) == 1
    assert f"{tmp_path / 'bad.jsonl'}:2 has no message of role 'assistant'" in capsys.readouterr().err
    (tmp_path / "p.jsonl").write_text("[1, 2]\n")
    assert main(base[:5] + [str(tmp_path / "p.jsonl")] + base[6:] + ["--out", str(tmp_path / "c")]) == 1
    assert f"{tmp_path / 'p.jsonl'}:1: the line is a JSON list, not an object" in capsys.readouterr().err


def test_store_sft_takes_a_named_template_by_its_name(tmp_path, tok, capsys):
    """A model folder whose config holds named chat templates: store sft renders chats with the 'default' one, or
    the one --chat-template NAME names; with none called 'default' it says which there are."""
    from tokenmill import MaskedSource

    one = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<s>{% endfor %}"
    two = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    folder = tok.save_pretrained(tmp_path / "model", eos_token="<s>")
    conf = json.loads((folder / "tokenizer_config.json").read_text())
    rows = [{"messages": [{"role": "user", "content": "the theme"}, {"role": "assistant", "content": "then there"}]}]
    (tmp_path / "chat.jsonl").write_text(json.dumps(rows[0]) + "\n")
    base = ["store", "sft", "--tokenizer", str(folder), "--input", str(tmp_path / "chat.jsonl"), "-q"]
    for names, extra, want in ((("default", "other"), [], one), (("default", "other"), ["--chat-template", "other"], two),
                               (("a", "b"), ["--chat-template", "b"], two)):
        conf["chat_template"] = [{"name": n, "template": t} for n, t in zip(names, (one, two))]
        (folder / "tokenizer_config.json").write_text(json.dumps(conf))
        out = tmp_path / f"sft-{len(list(tmp_path.iterdir()))}"
        assert main(base + extra + ["--out", str(out)]) == 0, capsys.readouterr().err
        assert tok.decode(MaskedSource.open(out).get(0).tolist()) == _rendered(want, rows[0]["messages"])
    assert main(base + ["--out", str(tmp_path / "none")]) == 1
    err = capsys.readouterr().err
    assert "2 named chat templates and none called 'default' ('a', 'b'); pass the one to use by its name " \
        "(--chat-template NAME)" in err


def test_store_sft_errors_name_the_record_and_offer_only_its_own_options(tmp_path, tok, capsys):
    """store sft's errors had advised --errors replace (an option it does not take) and added the chat-template
    hint to every reader error; a lone surrogate was "text 3 of the batch" (its place in a flattened list)."""
    from tokenmill import encode_sft
    from tokenmill.errors import LoneSurrogateError

    tok.save(tmp_path / "tok.json")
    (tmp_path / "bad.jsonl").write_bytes(b'{"prompt": "a ", "completion": "cat"}\n{"prompt": "x", "completion": "d\xffg"}\n')
    base = ["store", "sft", "--tokenizer", str(tmp_path / "tok.json"), "-q"]
    assert main(base + ["--input", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "bad.jsonl:2: invalid UTF-8" in err and "fix the input" in err
    assert "--errors" not in err and "chat template" not in err
    with pytest.raises(LoneSurrogateError, match=r"^example 1, part 1 holds a lone surrogate at character 1"):
        encode_sft(tok, [{"prompt": "a", "completion": "b"}, {"prompt": "a", "completion": "x\ud800"}])
    (tmp_path / "t.jinja").write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}")
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x\ud800"}]}
    (tmp_path / "s.jsonl").write_text(json.dumps({"prompt": "a", "completion": "b"}) + "\n" + json.dumps(chat) + "\n")
    assert main(base + ["--input", str(tmp_path / "s.jsonl"), "--chat-template", str(tmp_path / "t.jinja"),
                        "--out", str(tmp_path / "c")]) == 1
    assert f"{tmp_path / 's.jsonl'}:2, part 1 holds a lone surrogate" in capsys.readouterr().err


def test_library_messages_are_said_the_command_lines_way(tmp_path, tok, capsys):
    """A library message for both audiences ("pass append_eos=False (CLI: --no-eos)") is said with the option alone
    on the command line, in warnings as in errors."""
    tok.save(tmp_path / "tok.json")
    (tmp_path / "a.txt").write_text("the end<|endoftext|>")
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "a.txt"),
                 "--out", str(tmp_path / "s"), "--special-text", "special", "-q"]) == 0
    err = capsys.readouterr().err
    assert ": 1 document ends with two EOS" in err and "pass --no-eos where the texts end with their own EOS" in err
    assert "append_eos" not in err and "(CLI:" not in err
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "a.txt"),
                 "--out", str(tmp_path / "p"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "pass --special-text plain to encode such text as plain text, or --special-text special to" in err


def _rendered(template, messages):
    from tokenmill.tokenizer.chat import render_chat

    return render_chat(template, messages)


def test_options_and_paths_a_probe_found_said_or_refused(tmp_path, tok, capsys):
    """store sft of a text file had read its whole text as the prompt and again as the completion (every book
    stored twice, exit 0); an EOS of another name could be set by no option; --ray-address without --engine ray
    built locally; a Megatron pair written into the store's folder stopped its next build; a JSONL file or a store
    given as --tokenizer was "not valid JSON: write it again" / "a folder without tokenizer.json"."""
    from tokenmill import Tokenizer
    from tokenmill.errors import ConfigError

    tok.save(tmp_path / "tok.json")
    (tmp_path / "one.txt").write_text("PROMPTTEXT here")
    base = ["--tokenizer", str(tmp_path / "tok.json")]
    assert main(["store", "sft", *base, "--input", str(tmp_path / "one.txt"), "--out", str(tmp_path / "sft")]) == 1
    assert "one.txt: a text file, which holds no records" in capsys.readouterr().err
    assert not (tmp_path / "sft").exists()
    (tmp_path / "chat.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert main(["store", "sft", *base, "--input", str(tmp_path / "chat.jsonl"), "--out", str(tmp_path / "sft")]) == 1
    assert "need a chat template: --chat-template FILE" in capsys.readouterr().err
    # an EOS no name finds: --eos-id
    eot = Tokenizer.from_merges([(116, 104)], pattern="gpt4", special_tokens=["<|eot|>"])
    eot.save(tmp_path / "eot.json")
    build = ["store", "build", "--tokenizer", str(tmp_path / "eot.json"), "--input", str(tmp_path / "one.txt"), "-q"]
    assert main([*build, "--out", str(tmp_path / "e1")]) == 1
    assert "(CLI: --eos-id ID, or --no-eos)" in capsys.readouterr().err
    assert main([*build, "--out", str(tmp_path / "e2"), "--eos-id", str(eot.special_tokens["<|eot|>"])]) == 0
    st = TokenStore.open(tmp_path / "e2")
    assert st.eos_id == eot.special_tokens["<|eot|>"] and st.get(0)[-1] == st.eos_id
    assert main([*build, "--out", str(tmp_path / "e3"), "--no-eos", "--ray-address", "auto"]) == 1
    assert "--ray-address auto is for --engine ray, and" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="is inside the store's folder"):
        st.export_megatron(tmp_path / "e2" / "corpus")
    for path, said in ((tmp_path / "chat.jsonl", "is a JSONL file (data: a record a line), not a tokenizer"),
                       (tmp_path / "e2", "is a token store (data encoded by a tokenizer), not a tokenizer")):
        assert main(["encode", "--tokenizer", str(path), "hi"]) == 1
        assert said in capsys.readouterr().err


def test_build_and_train_print_json(tmp_path, tok, capsys):
    """--json on store build and train (the other commands had it): what the human lines say, as numbers."""
    make_corpus(tmp_path / "in")
    tok.save(tmp_path / "tok.json")
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(tmp_path / "in"),
                 "--out", str(tmp_path / "s"), "--split-lines", "--workers", "1", "-q", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    st = TokenStore.open(tmp_path / "s")
    assert (got["documents"], got["tokens"], got["shards"], got["fingerprint"]) == \
        (len(st), st.num_tokens, st.num_shards, st.fingerprint)
    assert main(["train", "--input", str(tmp_path / "in"), "--vocab-size", "270", "--out", str(tmp_path / "t.json"),
                 "-q", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    from tokenmill import Tokenizer

    assert got["vocab_size"] == Tokenizer.load(tmp_path / "t.json").vocab_size and got["merges"] == got["vocab_size"] - 256


def test_build_draws_bars_only_on_a_terminal_by_default(tmp_path, tok, capfd):
    """TokenStore.build's progress had defaulted to True: tqdm frames in a pipe or a log. It follows train_bpe now:
    bars where stderr is a terminal, unless progress= says otherwise."""
    make_corpus(tmp_path / "in")
    TokenStore.build(tmp_path / "s", tmp_path / "in", tok, split_lines=True, workers=1)
    assert capfd.readouterr().err == ""
    TokenStore.build(tmp_path / "s2", tmp_path / "in", tok, split_lines=True, workers=1, progress=True)
    assert "store build" in capfd.readouterr().err


def test_store_sft_streams_its_records_and_names_a_bad_one_far_in(tmp_path, tok, capsys, monkeypatch):
    """store sft encodes a batch of records at a time (save_sft): the stores are encode_sft's, and a record found bad
    after many batches is named by its file and line."""
    from tokenmill import MaskedSource, encode_sft
    from tokenmill.data import masked

    monkeypatch.setattr(masked, "SFT_BATCH", 2)  # (batches of 2 records: 15 batches, the names of old ones dropped)
    tok.save(tmp_path / "tok.json")
    rows = [{"prompt": f"the cat {i} ", "completion": "sat" * (i % 3)} for i in range(30)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["store", "sft", "--tokenizer", str(tmp_path / "tok.json"), "-q"]
    assert main(base + ["--input", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "s")]) == 0
    assert "30 examples" in capsys.readouterr().out
    got, want = MaskedSource.open(tmp_path / "s"), encode_sft(tok, rows)
    assert [got.get(i).tolist() for i in range(30)] == [want.get(i).tolist() for i in range(30)]
    assert got.num_targets == want.num_targets
    rows[24]["completion"] = "sat<|endoftext|>"
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(base + ["--input", str(tmp_path / "b.jsonl"), "--out", str(tmp_path / "t")]) == 1
    assert f"{tmp_path / 'b.jsonl'}:25: field 'completion'" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()
    rows = [{"prompt": "a ", "completion": "b"}] * 1300
    rows[1233] = {"prompt": "a "}  # (its message says "example 1233", no thousands comma: had been read as 123)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(base + ["--input", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "t")]) == 1
    assert f"{tmp_path / 'c.jsonl'}:1234" in capsys.readouterr().err
