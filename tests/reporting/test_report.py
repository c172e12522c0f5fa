"""`tokenmill report`'s data against the library (counts, ids, plans), the page's escaping of hostile
text, its bounds on big stores, determinism, and the CLI's errors."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tokenmill
from tokenmill.cli import main
from tokenmill.data.stats import token_histogram, weighted_percentiles
from tokenmill.errors import ConfigError, InputError
from tokenmill.reporting import ReportOptions, collect, render_html
from tokenmill.reporting.collect import _Vocab, token_pieces

from .conftest import TEXTS

HOSTILE = ('</script><script>alert("x")</script><!-- <\x00> & "quotes" \'single\' \ud800 lone, '
           "\u2028\u2029 \x1b[31m <|endoftext|> ]]> </style>")


def _json_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="tokenmill-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def test_text_samples_count_and_decode_as_the_tokenizer_does(tok):
    data = collect(tok, texts=TEXTS, options=ReportOptions(samples=len(TEXTS), sample_tokens=10_000))
    samples = data.tokens["samples"]
    assert len(samples) == len(TEXTS)
    for text, s in zip(TEXTS, samples):
        ids = tok.encode(text)
        assert s["ids"] == ids and s["tokens"] == len(ids)
        assert "".join(s["pieces"]) == tok.decode(ids) == text
        assert s["chars"] == len(text) and s["bytes"] == len(text.encode())
        assert s["bytes_per_token"] == round(len(text.encode()) / len(ids), 4)
    assert data.tokens["totals"]["tokens"] == sum(len(tok.encode(t)) for t in TEXTS)


def test_partial_utf8_and_special_tokens_are_marked(tok):
    data = collect(tok, texts=["世界 ok"], options=ReportOptions())
    s, table = data.tokens["samples"][0], {r[0]: r for r in data.tokens["table"]}
    assert s["pieces"][:6] == ["", "", "世", "", "", "界"]  # the token completing a character holds it
    assert all("p" in table[i][2] for i in s["ids"][:6]) and table[s["ids"][0]][1] == "e4"
    special = collect(tok, texts=["a<|endoftext|>b"], options=ReportOptions(allow_special=True)).tokens
    eos = tok.special_tokens["<|endoftext|>"]
    assert eos in special["samples"][0]["ids"] and "s" in {r[0]: r for r in special["table"]}[eos][2]
    plain = collect(tok, texts=["a<|endoftext|>b"]).tokens["samples"][0]  # default: plain text
    assert eos not in plain["ids"] and "".join(plain["pieces"]) == "a<|endoftext|>b"


@given(st.lists(st.integers(0, 255), max_size=40))
def test_token_pieces_join_to_the_replacing_decoder(ids):
    vocab = _VOCAB_256
    assert "".join(token_pieces(ids, vocab)) == bytes(ids).decode("utf-8", "replace")


_VOCAB_256 = _Vocab(tokenmill.Tokenizer.from_merges([], pattern="gpt4"))


def test_store_samples_are_the_store_documents(tok, store):
    opts = ReportOptions(samples=5, sample_tokens=30, window=32, block_size=64, blocks=6)
    data = collect(tok, store=store, options=opts)
    samples = data.tokens["samples"]
    assert len(samples) == 5 and len({s["doc"] for s in samples}) == 5
    for s in samples:
        ids = store.get(s["doc"])[:30].tolist()
        assert s["ids"] == ids and "".join(s["pieces"]) == tok.decode(ids)
        assert s["tokens"] == len(ids) <= 30 and s["special_tokens"] == ids.count(tok.special_tokens["<|endoftext|>"])
    st_ = data.store
    assert st_["documents"] == len(store) and st_["tokens"] == store.num_tokens
    assert sum(st_["histogram"]["documents"]) == len(store) and sum(st_["histogram"]["tokens"]) == store.num_tokens
    assert st_["files"]["exact"] and sum(r["tokens"] for r in st_["files"]["rows"]) == store.num_tokens
    v = data.vocabulary
    assert sum(r["bytes"] for r in v["by_script"]) == sum(r["bytes"] for r in v["by_source"])
    assert abs(sum(r["tokens"] for r in v["by_script"]) - sum(r["tokens"] for r in v["by_source"])) < 0.1
    assert v["merges"]["kind"] == "merges" and v["merges"]["rows"][0]["id"] == 256


def test_windows_and_packing_match_the_library(tok, store):
    opts = ReportOptions(window=32, stride=16, block_size=64, blocks=6)
    data = collect(tok, store=store, options=opts)
    lengths = store.lengths
    w = {(o["window"], o["stride"]): o for o in data.windows["options"]}
    plan = tokenmill.SlidingWindows(32, 16).plan(lengths)
    assert w[32, 16]["windows"] == len(plan) and w[32, 16]["coverage_percent"] == round(plan.stats.coverage_percent, 4)
    assert {(16, 4), (16, 8), (16, 16), (64, 64)} <= set(w)
    for pic, drawn in zip(data.windows["pictures"], w[32, 16]["drawn"]):
        p = tokenmill.SlidingWindows(32, 16).plan([pic["length"]])
        assert drawn == [p.start.tolist(), p.length.tolist()]
    pk = data.packing
    pplan = tokenmill.pack(lengths, 64, seed=0)
    assert (pk["blocks"], pk["fill"]) == (pplan.num_blocks, round(pplan.fill, 6))
    assert len(pk["drawn_blocks"]) == 6
    batch = next(pplan.select(np.arange(6)).batches(store, batch_size=6, pad_id=0))
    for b, row in enumerate(pk["drawn_blocks"]):
        assert [s[:3] for s in row["segments"]] == [list(s) for s in pplan.segments(b)]
        assert row["targets"] == int((batch.labels[b] != -100).sum())
    # padded side: the same segments, one per row; each loses only its first label
    assert [r["segments"][0][:3] for r in pk["drawn_rows"]] == [list(s) for b in range(6) for s in pplan.segments(b)]
    assert all(r["targets"] == r["tokens"] - 1 for r in pk["drawn_rows"])


def test_percentile_helpers_against_brute_force():
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 300, 500)
    tokens = np.repeat(lengths, lengths)  # one entry per token: the length of its document
    ps = [0, 1, 5, 25, 50, 75, 95, 99, 100]
    want = [int(np.percentile(tokens, p, method="inverted_cdf")) for p in ps]
    assert weighted_percentiles(lengths, ps) == want
    edges = np.array([0, 1, 3, 10, 100, 301])
    assert token_histogram(lengths, edges) == np.histogram(lengths, edges, weights=lengths)[0].astype(int).tolist()


def test_hostile_text_is_escaped_and_the_page_is_self_contained(tok, tmp_path):
    r = tokenmill.report(tok, texts=[HOSTILE], out=tmp_path / "r.html")
    raw = r.path.read_bytes()
    page = raw.decode("utf-8")  # strict: lone surrogates became U+FFFD
    assert b"\x00" not in raw and page.count("<script") == 2 and page.count("</script") == 2
    assert page.count("<style") == 1 and "alert(" not in page.split("<script>")[0]
    data = _json_of(page)
    assert data == json.loads(json.dumps(r.data.to_dict()).replace("\\ud800", "\\ufffd"))
    sample = data["tokens"]["samples"][0]
    assert "".join(sample["pieces"]) == HOSTILE.replace("\ud800", "\ufffd")
    for banned in ("http://", "https://", "//fonts", "src=", "@import", "url(http"):
        assert banned not in page.replace("http://www.w3.org/2000/svg", ""), banned
    assert "default-src 'none'" in page


def test_bounded_on_a_large_store(tok, tmp_path, monkeypatch):
    """Samples, statistics and plans stay within their caps; documents are read only for samples."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 400, 30_000)
    ids = rng.integers(0, 256, int(lengths.sum()))
    big = tokenmill.TokenStore.from_token_arrays(tmp_path / "big", [(lengths, ids)], vocab_size=tok.vocab_size,
                                                 tokenizer_hash=tok.content_hash)
    reads = []
    get = big.get
    monkeypatch.setattr(big, "get", lambda i: reads.append(i) or get(i))
    opts = dict(samples=3, sample_tokens=40, stat_tokens=5_000, stat_docs=100, plan_docs=2_000, blocks=4,
                window=64, block_size=256)
    r = tokenmill.report(tok, store=big, out=tmp_path / "r.html", **opts)
    d = r.data
    drawn = d.packing["segments_in_drawn_blocks"] + len(d.packing["drawn_rows"])
    assert len(reads) <= 100 + drawn < 150  # the sampled documents and those of the blocks drawn, nothing else
    assert [len(s["ids"]) for s in d.tokens["samples"]] == [40, 40, 40]
    assert d.vocabulary["sample_tokens"] <= 5_000 and d.vocabulary["sample_documents"] <= 100
    assert d.windows["sampled"] and d.windows["documents"] == 2_000 and d.windows["of"] == 30_000
    assert d.packing["sampled"] and d.packing["documents"] == 2_000 and len(d.packing["drawn_blocks"]) == 4
    assert d.store["documents"] == 30_000 and d.store["tokens"] == int(lengths.sum())
    assert r.bytes < 200_000
    again = tokenmill.report(tok, store=big, out=tmp_path / "r2.html", **opts)  # deterministic
    assert again.path.read_bytes() == r.path.read_bytes()


def test_statistics_of_texts_are_bounded_by_stat_tokens(tok, tmp_path):
    """A text's statistics took all its tokens (a 50 MB text: 40 s, 3 GB); ``stat_tokens`` bounds them as
    it bounds a store's, the windows and the samples still see the texts as they are."""
    texts = ["the cat sat on the mat. " * 400, "a dog ran. " * 400]
    d = tokenmill.report(tok, texts=texts, out=tmp_path / "r.html", stat_tokens=300, sample_tokens=50).data
    full = sum(len(tok.encode(t)) for t in texts)
    # (the first text holds the 300 tokens: the second is not in the statistics, nor counted as sampled)
    assert full > 2_000 and d.vocabulary["sample_tokens"] == 300 and d.vocabulary["sample_documents"] == 1
    assert d.windows["documents"] == 2 and sum(s["tokens"] for s in d.tokens["samples"]) == 100


def test_errors_name_the_input(tok, store, tmp_path):
    with pytest.raises(ConfigError, match="nothing to report"):
        tokenmill.report(tok, out=tmp_path / "r.html")
    with pytest.raises(ConfigError, match="unknown report option.*windw"):
        tokenmill.report(tok, texts=["x"], out=tmp_path / "r.html", windw=3)
    with pytest.raises(ConfigError, match="also an input"):
        tokenmill.report(tok, store=store, out=store.path / "manifest.json")
    folder = tmp_path / "tokdir"  # a tokenizer named by its folder: the file in it is an input too
    folder.mkdir()
    tok.save_huggingface(folder / "tokenizer.json")
    saved = (folder / "tokenizer.json").read_bytes()
    with pytest.raises(ConfigError, match="also an input"):
        tokenmill.report(str(folder), texts=["x"], out=folder / "tokenizer.json")
    assert (folder / "tokenizer.json").read_bytes() == saved
    assert tokenmill.report(str(folder), texts=["x"], out=folder / "new.html").path.exists()  # a new file: fine
    with pytest.raises(ConfigError, match="list"):
        tokenmill.report(tok, files="a.txt", out=tmp_path / "r.html")
    other = tokenmill.train_bpe(["something else entirely"] * 3, 260)
    with pytest.raises(ConfigError, match="does not match the store"):
        tokenmill.report(other, store=store, out=tmp_path / "r.html")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff no")
    with pytest.raises(InputError, match=r"bad\.txt.*byte offset 3"):
        tokenmill.report(tok, files=[bad], out=tmp_path / "r.html")
    r = tokenmill.report(tok, files=[bad], out=tmp_path / "r.html", errors="replace")
    assert "".join(r.data.tokens["samples"][0]["pieces"]) == "ok \ufffd no"
    assert "1 invalid UTF-8 sequence replaced with U+FFFD, the first at byte offset 3" in r.data.tokens["samples"][0]["note"]
    assert not (tmp_path / "r.html").with_suffix(".html.tmp").exists()
    with pytest.raises(ConfigError, match=r"is a directory; pass a file path \(e.g. '.*out.html'\)"):
        tokenmill.report(tok, texts=["x"], out=tmp_path)  # (it suggested a .json name)
    # a source that records no vocabulary (arrays, a Megatron pair) with ids past the tokenizer's, or below 0:
    # named (an IndexError inside the report, or another token read, before)
    for bad_id in (tok.vocab_size + 5, -3):
        with pytest.raises(ConfigError, match=f"document 0 of the store holds token id {bad_id:,d}, outside"):
            tokenmill.report(tok, store=[np.array([1, 2, bad_id])], out=tmp_path / "r.html")


def test_text_files_are_read_up_to_text_bytes(tok, tmp_path):
    f = tmp_path / "long.txt"
    f.write_text("世" * 100, encoding="utf-8")  # 300 bytes; a cut at 10 bytes keeps 3 whole characters
    d = collect(tok, files=[f], options=ReportOptions(text_bytes=10))
    s = d.tokens["samples"][0]
    assert "".join(s["pieces"]) == "世" * 3 and "first 9 bytes of 300" in s["note"]


def test_compressed_text_files_are_read_decompressed(tok, tmp_path):
    import gzip

    import zstandard

    text = "hello world. " * 40
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "b.txt.zst").write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    d = collect(tok, files=[tmp_path / "a.txt.gz", tmp_path / "b.txt.zst"], options=ReportOptions(text_bytes=26))
    for s in d.tokens["samples"]:
        assert "".join(s["pieces"]) == text[:26] and s["note"] == "first 26 bytes decompressed"
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress(text.encode())[:-30])  # cut short
    with pytest.raises(InputError, match="c.txt.gz.*corrupt or truncated"):
        collect(tok, files=[tmp_path / "c.txt.gz"])


def test_no_tokens_means_no_fill_not_a_full_one(tok):
    d = collect(tok, texts=[""])
    assert d.packing["blocks"] == 0 and d.packing["fill"] is None and d.packing["padding_fill"] is None
    assert _json_of(render_html(d))["packing"]["fill"] is None  # the page shows "none (no tokens)"


def test_cli_writes_the_page_and_prints_its_path(tok, store, tmp_path, capsys):
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    text = tmp_path / "t.txt"
    text.write_text(TEXTS[0], encoding="utf-8")
    out = tmp_path / "report.html"
    assert main(["report", "--tokenizer", str(tok_path), "--store", str(store.path), "--text", str(text),
                 "--out", str(out), "--window", "32", "--block-size", "64", "--quiet"]) == 0
    printed = capsys.readouterr()
    assert str(out) in printed.out and printed.err == ""
    data = _json_of(out.read_text(encoding="utf-8"))
    assert data["tokens"]["samples"][0]["name"] == str(text) and data["store"]["documents"] == len(store)
    assert main(["report", "--tokenizer", str(tok_path), "--text", str(text), "--out", str(tok_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("tokenmill report: error:") and "also an input" in err and "\n" not in err
    assert main(["report", "--tokenizer", str(tok_path), "--input", str(tmp_path / "missing.txt"),
                 "--out", str(out), "-q"]) == 1  # (--input: --text as the other commands name it)
    assert "missing.txt" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"  # --errors replace says what it replaced on stderr, as every command does
    bad.write_bytes(b"ok \xff no \xfe")
    assert main(["report", "--tokenizer", str(tok_path), "--text", str(bad), "--out", str(out), "-q",
                 "--errors", "replace"]) == 0
    assert "2 invalid UTF-8 sequences" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"  # no tokens: no fill to print (a None format had failed after the page was written)
    empty.write_bytes(b"")
    assert main(["report", "--tokenizer", str(tok_path), "--text", str(empty), "--out", str(out), "-q"]) == 0
    assert "0 tokens shown; no tokens to pack" in capsys.readouterr().out


def test_report_options_given_as_numpy_scalars_are_checked_in_python_ints():
    """``samples x sample_tokens`` bounds the page: in int16 the product 1,000 x 2,000 wrapped below the bound
    (or raised OverflowError); kept as Python ints, it is refused with the options named."""
    with pytest.raises(ConfigError, match="samples=1,000 x sample_tokens=2,000"):
        ReportOptions(samples=np.int16(1000), sample_tokens=np.int16(2000))
    opts = ReportOptions(window=np.int8(64), stride=None, seed=np.uint8(3))
    assert (type(opts.window), opts.window_stride, type(opts.seed)) == (int, 32, int)


def test_importing_the_report_loads_no_optional_dependency():
    import subprocess

    code = ("import sys, tokenmill; tokenmill.report; import tokenmill.cli.report; "
            "print(sorted(m for m in ('torch', 'numba', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_render_is_a_pure_function_of_the_data(tok):
    data = collect(tok, texts=["abc"])
    assert render_html(data) == render_html(data)
    assert callable(tokenmill.report)


def test_store_stats_counting_percentiles_equal_numpys():
    """store_stats (which the report draws) takes percentiles and the histogram from the distinct
    lengths; they equal np.percentile(method="lower") and np.histogram, long documents included."""
    from tokenmill.data.stats import PERCENTILES, store_stats

    rng = np.random.default_rng(2)
    for lengths in (np.array([5]), np.array([0, 0, 0]), rng.integers(0, 10, 7), rng.integers(0, 100_000, 10_001),
                    np.array([1, 2**30, 7, 7])):
        st_ = store_stats(type("Src", (), {"lengths": lengths})())
        assert st_.percentiles == {f"p{p}": int(np.percentile(lengths, p, method="lower")) for p in PERCENTILES}
        edges = np.asarray(st_.histogram["edges"])
        assert st_.histogram["counts"] == np.histogram(lengths, bins=edges)[0].tolist()


def test_a_block_of_many_tiny_documents_is_drawn_bounded(tok):
    docs = [np.full(3, 100 + k % 50) for k in range(2_000)]  # any token source works, a list of arrays too
    pk = collect(tok, store=docs, options=ReportOptions(block_size=2048, blocks=2)).packing
    for b in pk["drawn_blocks"]:
        segs = b["segments"]
        assert len(segs) == 65 and segs[-1][0] == -1  # 64 drawn, the rest one grey piece: [-1, count, tokens, 0]
        assert sum(s[2] for s in segs) == b["tokens"] and segs[-1][1] == b["tokens"] // 3 - 64


def test_sentencepiece_samples_drop_the_dummy_prefix_as_decode_does(tmp_path):
    """A SentencePiece model writes "Hello" as the token "▁Hello" and decodes it "Hello": the first piece had
    kept the space, so the pieces did not join to decode(ids) and the sample counted one byte the text has not.
    A byte-level tokenizer keeps a real leading space."""
    import tokenmill
    from tokenmill.tokenizer.formats import sentencepiece as S

    raw = S.write_model_proto([("<unk>", 0, S.UNKNOWN), ("<s>", 0, S.CONTROL), ("</s>", 0, S.CONTROL),
                               ("▁", -1, S.NORMAL), ("a", -2, S.NORMAL), ("b", -3, S.NORMAL), ("▁a", -1.5, S.NORMAL)],
                              trainer={"model_type": 2})
    (tmp_path / "t.model").write_bytes(raw)
    sp = tokenmill.Tokenizer.from_sentencepiece(tmp_path / "t.model")
    for text, decoded in (("ab ba", "ab ba"), (" ab", "ab"), ("b", "b")):  # (its normalizer drops a leading space)
        s = tokenmill.report(sp, texts=[text], out=tmp_path / "r.html").data.tokens["samples"][0]
        assert "".join(s["pieces"]) == sp.decode(s["ids"]) == decoded
        assert (s["chars"], s["bytes"]) == (len(decoded), len(decoded.encode()))
    byte_level = tokenmill.train_bpe(["a b c"] * 3, 258)
    s = tokenmill.report(byte_level, texts=[" ab"], out=tmp_path / "r.html").data.tokens["samples"][0]
    assert "".join(s["pieces"]) == " ab" and s["bytes"] == 3


def test_statistics_count_only_the_texts_they_read(tok, tmp_path):
    """The token budget of the statistics is taken from the first texts on; the texts past it had still been
    counted: "1,000,000 tokens of 2,562 sampled documents" over 117 texts, the rest 0-token rows by source."""
    import tokenmill

    texts = ["hello world " * 50, "hello", "world", ""]
    v = tokenmill.report(tok, texts=texts, out=tmp_path / "r.html", stat_tokens=60).data.vocabulary
    assert (v["sample_tokens"], v["sample_documents"]) == (60, 1)
    assert [r["source"] for r in v["by_source"]] == ["text 1"]
    v = tokenmill.report(tok, texts=["hello", "", "world"], out=tmp_path / "r.html").data.vocabulary
    assert v["sample_documents"] == 3  # (an empty text inside the budget is a sampled document of 0 tokens)


def test_sample_characters_leave_special_tokens_out_as_bytes_do(tmp_path):
    """A sample counted a special token's text in its characters but not in its bytes (980 characters beside 977
    bytes of an ASCII text): both leave it out, as the page says."""
    import warnings

    import tokenmill

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a tiny corpus: training stops early)
        tok = tokenmill.train_bpe(["hello world " * 10] * 3, 266, special_tokens=["<|endoftext|>"])
    r = tokenmill.report(tok, texts=["hello<|endoftext|>world"], out=tmp_path / "r.html", allow_special=True)
    s = r.data.tokens["samples"][0]
    assert (s["chars"], s["bytes"], s["special_tokens"]) == (10, 10, 1)
    assert "characters, bytes and bytes per token leave special tokens out" in r.path.read_text(encoding="utf-8")



def test_a_block_of_one_position_is_refused_as_the_loader_refuses_it():
    """It was accepted and the page said "packing fill 100.0% vs padding 100.0%" for rows that hold no target."""
    with pytest.raises(tokenmill.ConfigError, match="block_size=1: a block of one position holds no target"):
        ReportOptions(block_size=1)
    assert ReportOptions(block_size=2).block_size == 2
