"""What users notice first: tokenizer.json files tokenmill cannot run natively still work (through
HF tokenizers, said once), --json on inspect and pack, counts in words, progress bars only on a
terminal unless asked, verify's message reads as one line, the stats plot shows percentiles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tokenmill
from tokenmill import TokenStore
from tokenmill.cli import main
from tokenmill.data import texts

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def nfkc_json(tmp_path_factory):
    """A byte-level BPE tokenizer.json with an NFKC normalizer (tokenmill runs NFC only)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator(["the theme of the thesis", "\ufb01ne \ufb01sh", "数据 data"] * 20, trainer)
    path = tmp_path_factory.mktemp("nfkc") / "tokenizer.json"
    t.save(str(path))
    return path, t


TEXTS = ["\ufb01ne the thesis", "数据 ① ｆｕｌｌ width", ""]


def run(*args):
    return subprocess.run([sys.executable, "-m", "tokenmill", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_as_tokenizer_runs_what_tokenmill_cannot_through_hf(nfkc_json, capfd):
    path, hf = nfkc_json
    from tokenmill.tokenizer import adapters

    adapters._WRAPPED_NOTICE.clear()
    tok = tokenmill.as_tokenizer(path)
    again = tokenmill.as_tokenizer(path.parent)  # the folder too; the notice is said once
    err = capfd.readouterr().err
    assert err.count("running it through HF tokenizers") == 1 and "'NFKC' normalizer" in err
    for t in TEXTS:
        assert tok.encode(t) == hf.encode(t, add_special_tokens=False).ids == again.encode(t)
    assert [a.tolist() for a in tok.encode_batch(TEXTS, as_arrays=True)] == [tok.encode(t) for t in TEXTS]


@pytest.mark.parametrize("engine,workers", [("local", 1), ("process", 2)])
def test_store_build_and_cli_accept_it(tmp_path, nfkc_json, engine, workers):
    path, hf = nfkc_json
    tok = tokenmill.as_tokenizer(path)
    st = TokenStore.build(tmp_path / "s", texts(TEXTS), tok, engine=engine, workers=workers, progress=False)
    eos = hf.token_to_id("<|endoftext|>")
    assert [st[i].tolist() for i in range(3)] == [hf.encode(t, add_special_tokens=False).ids + [eos] for t in TEXTS]
    r = run("encode", "--tokenizer", path, TEXTS[0])
    assert r.returncode == 0 and r.stdout.split() == [str(i) for i in hf.encode(TEXTS[0]).ids]
    assert r.stderr.count("running it through HF tokenizers") == 1
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    r = run("store", "build", "--tokenizer", path, "--input", src, "--out", tmp_path / "c")
    assert r.returncode == 0, r.stderr
    assert TokenStore.open(tmp_path / "c").fingerprint == st.fingerprint
    assert "1 shard," in r.stdout and "1 shards" not in r.stdout


def test_inspect_json_for_native_and_wrapped_tokenizers(tmp_path, nfkc_json, capsys):
    tok = tokenmill.train_bpe(["the theme of the thesis"] * 5, 264, pattern="gpt4", progress=False)
    tok.save(tmp_path / "t.json")
    assert main(["inspect", str(tmp_path / "t.json"), "--json", "--top", "3"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "Tokenizer" and info["merges"] == tok.vocab_size - 256 - len(tok.special_tokens)
    assert [bytes(t["bytes"]) for t in info["first_merges"]] == [tok.token_bytes(256 + i) for i in range(3)]
    assert main(["inspect", str(nfkc_json[0]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "ForeignTokenizer" and info["merges"] == 0 and len(info["longest_tokens"]) == 10


def test_pack_json(capsys):
    assert main(["pack", "--lognormal", "500", "--block-size", "256", "--compare", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["best_fit", "first_fit_decreasing", "greedy", "concat"]
    assert all(r["documents"] == 500 and 0 < r["fill"] <= 1 for r in rows)


def test_progress_only_on_a_terminal_unless_asked(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("the theme\n" * 50)
    tok = tmp_path / "t.json"
    tokenmill.train_bpe(["the theme"], 260, progress=False, special_tokens=["<|endoftext|>"]).save(tok)
    quiet = run("store", "build", "--tokenizer", tok, "--input", src, "--out", tmp_path / "a")
    loud = run("store", "build", "--tokenizer", tok, "--input", src, "--out", tmp_path / "b", "--progress")
    assert quiet.returncode == loud.returncode == 0
    assert "store build" not in quiet.stderr and "store build" in loud.stderr
    assert run("store", "build", "--quiet", "--progress", "--tokenizer", tok, "--input", src, "--out",
               tmp_path / "c").returncode == 2  # one or the other


def test_verify_message_is_one_readable_line(tmp_path):
    tok = tokenmill.train_bpe(["the theme"], 260, progress=False, special_tokens=["<|endoftext|>"])
    st = TokenStore.build(tmp_path / "s", texts(["the", "theme"] * 20), tok, shard_bytes=20, progress=False)
    for k in (0, 1):
        p = tmp_path / "s" / f"shard-{k:05d}.tokens"
        p.write_bytes(b"\xff" * p.stat().st_size)
    r = run("store", "verify", tmp_path / "s")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "modified or corrupted); " in r.stderr and "corrupted). Rebuild the store" in r.stderr
    assert st.num_shards > 2


def test_stats_plot_has_token_weighted_percentiles(tmp_path):
    pytest.importorskip("matplotlib")
    tok = tokenmill.train_bpe(["the theme"], 260, progress=False, special_tokens=["<|endoftext|>"])
    docs = ["the " * n for n in (1, 2, 3, 50, 400)]
    st = TokenStore.build(tmp_path / "s", texts(docs), tok, progress=False)
    s = st.stats()
    assert s.percentiles["p50"] == sorted(st.lengths.tolist())[2]
    assert s.token_percentiles["p50"] == max(st.lengths.tolist())  # most tokens sit in the longest document
    assert sum(s.histogram["tokens"]) == st.num_tokens
    r = run("store", "stats", tmp_path / "s", "--plot", tmp_path / "p.png")
    assert r.returncode == 0 and "token-weighted length percentiles" in r.stdout
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
