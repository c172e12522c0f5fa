"""TokenStore: build, open, verify; same bytes for any worker count; resumable after SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tokenmill import TokenStore
from tokenmill._io import TMP_SUFFIX
from tokenmill.data import texts
from tokenmill.data.store import staging_dir
from tokenmill.errors import ConfigError, FormatError, InputError, TokenmillError

from .conftest import make_corpus


def store_bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def build(out, src, tok, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("workers", 1)
    return TokenStore.build(out, src, tok, **kw)


def test_documents_equal_encoding_plus_eos_and_provenance(tmp_path, tok):
    paths = make_corpus(tmp_path / "in")
    store = build(tmp_path / "s", [str(p) for p in paths], tok, split_lines=True, shard_bytes=300)
    want = [t for p in paths for t in p.read_text(encoding="utf-8").splitlines() if t.strip()]
    eos = tok.special_tokens["<|endoftext|>"]
    assert len(store) == len(want) and store.num_shards > 3
    for i, t in enumerate(want):
        assert store.get(i).tolist() == tok.encode(t) + [eos]
    assert store.lengths.tolist() == [len(tok.encode(t)) + 1 for t in want]
    assert store.dtype == np.uint16 and store.eos_id == eos and store.bos_id is None
    assert isinstance(store.get(0), np.ndarray) and not store.get(0).flags.owndata  # a view of the map
    src, name, row = store.provenance(len(store) - 1)
    assert (src, Path(name).name) == (5, "part-05.txt") and row == 4
    assert store.decode(1, tok) == want[1] + "<|endoftext|>"
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert m["documents"] == len(want) and m["tokens"] == int(store.lengths.sum())
    assert m["tokenizer"]["hash"] == tok.to_dict()["hash"] and m["dtype"] == "uint16"
    assert store.verify()["documents"] == len(want)
    assert sorted(os.listdir(tmp_path / "s")) == sorted(
        ["manifest.json"] + [f"shard-{k:05d}.{p}" for k in range(store.num_shards) for p in ("tokens", "offsets", "meta")])


def test_bos_eos_options_and_uint32(tmp_path, tok, wide_tok):
    s = build(tmp_path / "a", texts(["the", ""]), tok, prepend_bos=True, append_eos=False)
    assert [s.get(i).tolist() for i in range(2)] == [[tok.special_tokens["<s>"]] + tok.encode("the"),
                                                    [tok.special_tokens["<s>"]]]
    w = build(tmp_path / "w", texts(["ab", "c"]), wide_tok)
    assert w.dtype == np.uint32 and w.get(0).tolist() == [70_097, 70_098, 70_299]
    with pytest.raises(ConfigError, match="no BOS special token"):
        build(tmp_path / "b", texts(["x"]), wide_tok, prepend_bos=True)


def test_same_bytes_for_any_worker_count_and_engine(tmp_path, tok):
    paths = make_corpus(tmp_path / "in", n_files=8)
    ref = build(tmp_path / "w1", tmp_path / "in", tok, shard_bytes=500, split_lines=True)
    assert ref.num_shards > 4
    for name, kw in {"w2": dict(workers=2), "w3": dict(workers=3), "p2": dict(workers=2, engine="process")}.items():
        build(tmp_path / name, tmp_path / "in", tok, shard_bytes=500, split_lines=True, **kw)
        assert store_bytes(tmp_path / name) == store_bytes(tmp_path / "w1"), name
    assert TokenStore.open(tmp_path / "w2").fingerprint == ref.fingerprint
    assert len(paths) == 8


def test_documents_utf8_read_in_batches_hashes_as_before(tmp_path, tok):
    """A batch's UTF-8 is read in one pass (CPython's own copy of each str, made and kept with a non-ASCII
    one, which the encoding thread then finds made): the same bytes as ``str.encode``, so the same input
    hash as ``input_digest`` defines (a store built before resumes), handed to the encoder as those bytes
    (``Utf8Docs``); a batch with a lone surrogate is encoded document by document, as 'surrogatepass'
    writes it, and handed to the encoder as its strs."""
    from tokenmill.data import store as S
    from tokenmill.data.readers import Utf8Docs

    docs = ["é" + "x" * 5000, "plain ascii " * 200, "滑动窗口" * 400, "short é", "", "x"]
    before = [sys.getsizeof(t) for t in docs]
    for batch in (docs, docs + ["a\ud800b" * 600]):
        sizes, data, offs, utf8 = S._batch_bytes(batch, None, 0, range(len(batch)))
        want = [t.encode("utf-8", "surrogatepass") for t in batch]
        assert utf8 == (batch is docs)
        assert sizes.tolist() == [len(w) for w in want] and offs.tolist() == np.cumsum([0] + sizes.tolist()).tolist()
        assert [bytes(data[offs[i]:offs[i + 1]]) for i in range(len(batch))] == want
        shard = S._ShardInput()
        shard.add(batch[:2], 0, np.arange(2), sizes[:2], data[:offs[2]], utf8)
        shard.add(batch[2:], 0, np.arange(2, len(batch)), sizes[2:], data[offs[2]:], utf8)
        first, got, meta, size, digest = shard.done()
        assert first == 0 and size == len(b"".join(want)) and digest == S.input_digest(want)
        if utf8:
            assert isinstance(got, Utf8Docs) and got.texts() == batch and bytes(got.data) == b"".join(want)
            assert not got.data.flags.writeable
        else:
            assert got == batch
        assert meta.tolist() == [[0, i] for i in range(len(batch))]
    grew = [sys.getsizeof(t) > b for t, b in zip(docs, before)]  # the UTF-8 now kept with a non-ASCII str
    assert grew == [True, False, True, True, False, False]
    # a build on threads and one on processes (which never read this process's strs) store the same bytes
    a = build(tmp_path / "t", texts(docs[:3] * 4), tok, workers=2, shard_bytes=5000)
    b = build(tmp_path / "p", texts(docs[:3] * 4), tok, workers=2, shard_bytes=5000, engine="process")
    assert [r["input_sha256"] for r in a.manifest["shards"]] == [r["input_sha256"] for r in b.manifest["shards"]]
    assert all(np.array_equal(a.get(i), b.get(i)) for i in range(len(a)))


def _strs(docs) -> list[str]:
    """A job's documents as strs (a job of well-formed UTF-8 comes as ``Utf8Docs``)."""
    from tokenmill.data.readers import Utf8Docs

    return docs.texts() if isinstance(docs, Utf8Docs) else docs


def test_shards_cut_where_one_document_at_a_time_cut_them(tmp_path, tok):
    """The batch cut (a binary search over a batch's running sizes) ends each shard with the document that
    brings it to ``shard_bytes``, as a walk over the documents one by one does: the same shards, documents,
    sizes and input hashes, batches crossing shards either way, empty documents included."""
    from tokenmill.data import readers as R
    from tokenmill.data import store as S

    rng = np.random.default_rng(5)
    docs = ["".join(rng.choice(list("ab é滑\n"), size=int(n))) for n in rng.integers(0, 300, 700)]
    for shard_bytes, batch in ((1, 7), (500, 7), (1500, 64), (10**6, 4096)):
        src = R.texts(docs)
        src.batches = lambda b=batch: R._grouped(((t, 0, i) for i, t in enumerate(docs)), b)
        got = list(S._Builder(tmp_path, [src], tok, None, shard_bytes, False)._cut())
        want, cur, size = [], [], 0
        for i, t in enumerate(docs):  # the definition: one document at a time
            cur.append(i)
            size += len(t.encode())
            if size >= shard_bytes:
                want.append((cur, size))
                cur, size = [], 0
        if cur:
            want.append((cur, size))
        assert [k for k, *_ in got] == list(range(len(want)))
        for (_, first, texts_, meta, size, digest), (idx, wsize) in zip(got, want):
            assert first == 0 and _strs(texts_) == [docs[i] for i in idx] and meta[:, 1].tolist() == idx and size == wsize
            assert digest == S.input_digest([docs[i].encode() for i in idx])
        # in parts (each part_bytes of a shard handed out as it is read): the same shards, their documents
        # in order across the parts and the rest, each part starting at the document ``first`` says
        for part_bytes in (1, 300, 2000):
            cut = list(S._Builder(tmp_path, [src], tok, None, shard_bytes, False)._cut(part_bytes))
            shards, sofar = [], []
            for k, first, texts_, meta, size, digest in cut:
                texts_ = _strs(texts_)
                assert first == len(sofar) and k == len(shards) and (texts_ or meta is not None)
                sofar += texts_
                if meta is not None:
                    shards.append((sofar, meta, size, digest))
                    sofar = []
                else:
                    assert size == 0 and sum(len(t.encode()) for t in texts_) >= min(part_bytes, 1)
            assert [(t, m.tolist(), z, d) for t, m, z, d in shards] == [
                (_strs(t), m.tolist(), z, d) for _, _, t, m, z, d in got]


@pytest.mark.parametrize("engine", ["local", "process"])
def test_text_files_reach_the_encoder_as_their_bytes(tmp_path, tok, wide_tok, monkeypatch, engine):
    """A whole text file of well-formed UTF-8 is read as its bytes (``Utf8Docs``: checked by a compiled pass,
    never decoded to a str) and encoded from them: the same tokens, input hashes and errors as the same
    documents given as strs, in one job or split across jobs (parts of a few bytes), empty files, a file
    spelling a special token, a byte-order mark and CRLF included; a file that is not well-formed UTF-8 is
    decoded as before (its error names the file and offset, or ``errors="replace"`` replaces it)."""
    from tokenmill.data import readers as R

    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")  # the compiled check, whatever the suite compiled
    d = tmp_path / "in"
    d.mkdir()
    bodies = {"a.txt": "plain ascii words " * 40, "b.txt": "", "c.txt": "ünïcode 其数据 🙂\r\nthe end\r\n" * 30,
              "d.txt": "\ufeffbom first, then <|endoftext|> spelled", "e.txt": "x", "f.txt": "滑动窗口" * 500}
    for name, body in bodies.items():
        (d / name).write_text(body, encoding="utf-8", newline="")
    got = [(type(docs).__name__, f) for docs, f, _ in R.files(d).utf8_batches()]
    assert got == [("Utf8Docs", i) for i in range(6)]
    strs = texts(list(bodies.values()), name="strs")
    for shard_bytes in (1, 700, 10**6):
        for special in ("plain", "error"):
            kw = dict(tok=tok, shard_bytes=shard_bytes, special_text=special, engine=engine, workers=2)
            if special == "error":
                with pytest.raises(InputError, match=r"d.txt: document at row 0 .*special token '<\|endoftext\|>'"):
                    build(tmp_path / f"x{shard_bytes}", d, **kw)
                continue
            a = build(tmp_path / f"f{shard_bytes}", d, **kw)
            b = build(tmp_path / f"s{shard_bytes}", strs, **kw)
            assert [r["input_sha256"] for r in a.manifest["shards"]] == [r["input_sha256"] for r in b.manifest["shards"]]
            assert [a.get(i).tolist() for i in range(6)] == [b.get(i).tolist() for i in range(6)]
            assert a.get(2).tolist()[:-1] == tok.encode(bodies["c.txt"])
    # an adapter tokenizer (the store's protocol only) is given the documents as strs, read as before
    from tokenmill.data import store as S

    jobs = [docs for _, _, docs, *_ in S._Builder(tmp_path, [R.files(d)], wide_tok, None, 700, False)._cut(300)]
    assert jobs and all(isinstance(docs, list) for docs in jobs)
    names = [n for n in bodies if n != "d.txt"]
    w = build(tmp_path / "w", [d / n for n in names], tok=wide_tok, shard_bytes=700, engine=engine)
    assert [w.get(i).tolist()[:-1] for i in range(5)] == [[x + 70_000 for x in bodies[n].encode()] for n in names]
    (d / "g.txt").write_bytes(b"caf\xe9 " * 3)  # Latin-1, not UTF-8
    with pytest.raises(InputError, match=r"g.txt: invalid UTF-8 at byte offset 3"):
        build(tmp_path / "bad", d, tok=tok, engine=engine, special_text="plain")
    r = build(tmp_path / "rep", d, tok=tok, engine=engine, errors="replace", special_text="plain")
    assert r.get(6).tolist()[:-1] == tok.encode("caf\ufffd " * 3)


def test_replaced_utf8_is_counted_in_the_manifest(tmp_path, tok, capsys):
    """A build with ``errors="replace"`` counts what it replaced (``manifest["invalid_utf8_replaced"]``), says
    so on stderr naming the first place, and the CLI prints the count; a strict build records 0; a store
    whose manifest predates the count (no key) still opens and verifies; a count that is not a count is
    refused."""
    from tokenmill._io import canonical_hash
    from tokenmill.cli import main

    d = tmp_path / "in"
    d.mkdir()
    (d / "a.txt").write_bytes(b"fine text \xef\xbf\xbd\n")  # U+FFFD spelled in valid UTF-8: not counted
    (d / "b.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9 \xff"}\n')
    (d / "c.txt").write_bytes(b"lines\nwith \xc3 one\n")
    ok = build(tmp_path / "ok", [d / "a.txt"], tok, errors="replace", special_text="plain")
    assert ok.manifest["invalid_utf8_replaced"] == 0 and "replaced" not in capsys.readouterr().err
    s = build(tmp_path / "s", [d / "a.txt", d / "b.jsonl", d / "c.txt"], tok, errors="replace", split_lines=True)
    assert s.manifest["invalid_utf8_replaced"] == 3
    err = capsys.readouterr().err
    assert "replaced 3 invalid UTF-8 sequences with U+FFFD (errors='replace'); the first in " in err
    assert "b.jsonl:2 at byte offset 28" in err
    assert [s.get(i).tolist()[:-1] for i in (2, 4)] == [tok.encode("caf\ufffd \ufffd"), tok.encode("with \ufffd one")]
    # built again with the same arguments (the store reused), the count is the same
    assert build(tmp_path / "s", [d / "a.txt", d / "b.jsonl", d / "c.txt"], tok, errors="replace",
                 split_lines=True).manifest["invalid_utf8_replaced"] == 3
    tok.save(tmp_path / "tok.json")
    assert main(["store", "build", "--tokenizer", str(tmp_path / "tok.json"), "--input", str(d / "b.jsonl"),
                 "--out", str(tmp_path / "cli"), "--errors", "replace", "-q"]) == 0
    out = capsys.readouterr()
    assert "2 invalid UTF-8 sequences replaced with U+FFFD (--errors replace)" in out.out
    assert "b.jsonl:2 at byte offset 28" in out.err
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    for value, opens in ((None, True), (-1, False), ("3", False)):
        mm = {k: v for k, v in m.items() if k != "invalid_utf8_replaced"}
        if value is not None:
            mm["invalid_utf8_replaced"] = value
        mm["hash"] = canonical_hash({k: v for k, v in mm.items() if k != "hash"})
        (tmp_path / "s" / "manifest.json").write_text(json.dumps(mm))
        if opens:
            assert TokenStore.open(tmp_path / "s").verify()["documents"] == len(s)
        else:
            with pytest.raises(FormatError, match="invalid_utf8_replaced"):
                TokenStore.open(tmp_path / "s")


def test_rerun_same_arguments_reuses_different_arguments_refuse(tmp_path, tok):
    make_corpus(tmp_path / "in")
    a = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    a_lengths = a.lengths.copy()
    before = store_bytes(tmp_path / "s")
    b = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400, workers=2)
    assert b.fingerprint == a.fingerprint and store_bytes(tmp_path / "s") == before
    with pytest.raises(ConfigError, match=r"other arguments \(.*shard_bytes: 400 before, 999 now.*--overwrite"):
        build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=999)
    c = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=999, overwrite=True)
    assert c.fingerprint != a.fingerprint and np.array_equal(c.lengths, a_lengths)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not part of a token store"):
        build(tmp_path / "other", tmp_path / "in", tok)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names file descriptors through /proc (Linux)")
def test_new_and_replaced_stores_are_flushed_to_disk(tmp_path, tok, monkeypatch):
    """A power loss must find the old store or the new one: the new folder's entry, every file (each
    flushed before its rename, by the safe-output path) and the swap of a replacement reach the disk
    before the old store is removed."""
    from tokenmill.data import store as store_mod

    make_corpus(tmp_path / "in")
    calls = []
    real = store_mod.sync_folder
    real_clear = store_mod._clear

    def sync(path):
        calls.append(("sync", Path(path)))
        real(path)

    def clear(paths):
        calls.append(("clear", None))
        real_clear(paths)

    real_exchange = store_mod._exchange

    def exchange(a, b):
        calls.append(("swap", None))
        return real_exchange(a, b)

    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        import threading
        import time

        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.02)  # a slow disk: the build must wait for the background flushes
        real_fsync(fd)
        calls.append(("fsync", Path(os.readlink(f"/proc/self/fd/{fd}"))))

    def replace(a, b):
        calls.append(("rename", Path(b)))
        real_replace(a, b)

    monkeypatch.setattr(store_mod, "sync_folder", sync)
    monkeypatch.setattr(store_mod, "_clear", clear)
    monkeypatch.setattr(store_mod, "_exchange", exchange)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    st = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    assert ("sync", tmp_path) in calls  # the new store's folder entry
    # every shard file and the folder holding their names are on the disk before the manifest is renamed in
    commit = calls.index(("rename", tmp_path / "s" / "manifest.json"))
    flushed = {p for k, p in calls[:commit] if k == "fsync"}
    shard_files = {tmp_path / "s" / f"shard-{k:05d}.{part}" for k in range(st.num_shards)
                   for part in ("tokens", "offsets", "meta")}
    assert st.num_shards > 1 and shard_files | {tmp_path / "s"} <= flushed
    calls.clear()
    calls.clear()
    build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=999, overwrite=True)
    after = [c for c in calls[calls.index(("swap", None)) + 1:] if c[0] in ("sync", "clear")]
    assert after[:2] == [("sync", tmp_path), ("clear", None)]  # the old store goes after the swap is on disk
    assert TokenStore.open(tmp_path / "s").verify()["documents"] > 0


def test_fingerprint_ignores_the_folder(tmp_path, tok):
    make_corpus(tmp_path / "in")
    a = build(tmp_path / "x", tmp_path / "in", tok)
    os.rename(tmp_path / "x", tmp_path / "y")
    assert TokenStore.open(tmp_path / "y").fingerprint == a.fingerprint


def test_open_refuses_truncated_or_missing_shard_and_verify_finds_corruption(tmp_path, tok):
    make_corpus(tmp_path / "in")
    build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    d = tmp_path / "s"
    tokens = d / "shard-00001.tokens"
    data = tokens.read_bytes()
    tokens.write_bytes(data[:-2])
    with pytest.raises(FormatError, match=r"shard-00001.tokens has .* bytes, the manifest says .* \(truncated\)"):
        TokenStore.open(d)
    tokens.write_bytes(data[:2] + bytes([data[2] ^ 1]) + data[3:])  # same size, one bit flipped
    store = TokenStore.open(d)
    with pytest.raises(FormatError, match=r"shard-00001.tokens: sha256 differs"):
        store.verify()
    tokens.write_bytes(data)
    off = d / "shard-00002.offsets"
    o = np.fromfile(off, "<i8")
    o[1] = o[-1] + 1
    o.astype("<i8").tofile(off)
    with pytest.raises(FormatError, match="shard-00002.offsets: sha256 differs"):
        TokenStore.open(d).verify()
    with pytest.raises(FormatError, match="not monotone"):
        TokenStore.open(d).lengths  # noqa: B018  (reading the lengths validates the offsets)
    os.unlink(off)
    with pytest.raises(FormatError, match=r"shard-00002.offsets is missing"):
        TokenStore.open(d)
    os.unlink(d / "manifest.json")
    with pytest.raises(FormatError, match="not a finished token store"):
        TokenStore.open(d)
    (d.parent / "empty").mkdir()  # (what a build killed before its journal leaves: was "a folder of other files")
    with pytest.raises(FormatError, match=r"has no manifest.json: it is not a finished token store \(the folder is "
                                          "empty: a build killed"):
        TokenStore.open(d.parent / "empty")


def test_verify_finds_ids_beyond_the_vocabulary(tmp_path, tok):
    build(tmp_path / "s", texts(["the the"]), tok)
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    shard = tmp_path / "s" / "shard-00000.tokens"
    ids = np.fromfile(shard, "<u2")
    ids[0] = tok.vocab_size + 5
    ids.tofile(shard)
    import hashlib

    from tokenmill._io import canonical_hash

    m["shards"][0]["files"]["tokens"]["sha256"] = "sha256:" + hashlib.sha256(ids.tobytes()).hexdigest()
    m["hash"] = canonical_hash({k: v for k, v in m.items() if k != "hash"})
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(FormatError, match=f"id {tok.vocab_size + 5} at position 0 is not below the vocabulary"):
        TokenStore.open(tmp_path / "s").verify()


def test_tokenizer_mismatch_shows_both_hashes(tmp_path, tok):
    from tokenmill import Tokenizer

    store = build(tmp_path / "s", texts(["there"]), tok)
    other = Tokenizer.from_merges([(116, 104)], special_tokens=["<|endoftext|>"])
    with pytest.raises(ConfigError) as e:
        store.decode(0, other)
    assert other.to_dict()["hash"] in str(e.value) and tok.to_dict()["hash"] in str(e.value)
    # and what differs, where the manifest records it (the same rank file without its special token, say)
    assert f"it has 258 ids, the store's {tok.vocab_size:,d}" in str(e.value)
    plain = Tokenizer.from_merges([(116, 104)])  # (no special tokens)
    with pytest.raises(ConfigError, match=r"the store's EOS id [\d,]+ is none of its special tokens"):
        store.decode(0, plain)


def test_a_store_of_token_arrays_is_read_with_a_tokenizer_of_its_vocabulary(tmp_path, tok):
    """from_token_arrays without tokenizer_hash records "external", which no tokenizer's hash equals: decode and
    the report refused every tokenizer. One of the recorded vocabulary size is taken, with a warning."""
    ids = tok.encode("there there")
    store = TokenStore.from_token_arrays(tmp_path / "a", [([len(ids)], ids)], vocab_size=tok.vocab_size)
    with pytest.warns(UserWarning, match="records no tokenizer .* unchecked; write it with tokenizer_hash"):
        assert store.decode(0, tok) == "there there"
    small = TokenStore.from_token_arrays(tmp_path / "b", [([2], [1, 2])], vocab_size=100)
    with pytest.raises(ConfigError, match=f"only a vocabulary of 100 ids; this tokenizer has {tok.vocab_size:,d}: "
                                          "pass one of that vocabulary$"):
        small.decode(0, tok)
    # a model's padded vocabulary (nanoGPT's 50,304 for GPT-2's 50,257) written as the data's: said how to mend
    padded = TokenStore.from_token_arrays(tmp_path / "c", [([2], [1, 2])], vocab_size=tok.vocab_size + 47)
    with pytest.raises(ConfigError, match=r"embedding rows padded past them.*vocab_size=tok.vocab_size and "
                                          r"tokenizer_hash=tok.content_hash"):
        padded.decode(0, tok)
    other = TokenStore.from_token_arrays(tmp_path / "d", [([2], [1, 2])], vocab_size=tok.vocab_size + 5000)
    with pytest.raises(ConfigError, match="pass one of that vocabulary$"):  # (another tokenizer's store: no hint)
        other.decode(0, tok)


def test_bad_input_leaves_no_finished_store(tmp_path, tok):
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.txt").write_text("fine " * 100)
    (d / "b.txt").write_bytes(b"broken \xfe")
    with pytest.raises(InputError, match=r"b.txt: invalid UTF-8 at byte offset 7"):
        build(tmp_path / "s", d, tok, shard_bytes=100)
    assert not (tmp_path / "s" / "manifest.json").exists()
    assert not [p for p in os.listdir(tmp_path / "s") if p.endswith(TMP_SUFFIX)]
    with pytest.raises(FormatError, match="interrupted"):
        TokenStore.open(tmp_path / "s")
    with pytest.raises(InputError, match=r"source 1 \(<iterable>\) holds no documents"):
        build(tmp_path / "e", [d / "a.txt", texts([])], tok)
    with pytest.raises(InputError, match=r"<iterable>: document at row 1 .*special token '<\|endoftext\|>'"):
        build(tmp_path / "sp", texts(["ok", "a <|endoftext|> b"]), tok)
    # a JSONL record by its line, from 1, as the reader's own errors name it (it said "row 2" for line 3)
    (tmp_path / "r.jsonl").write_text('{"text": "a"}\n\n{"text": "x <|endoftext|> y"}\n')
    with pytest.raises(InputError, match=r"r.jsonl:3: document on line 3 \(shard 0\).*special token"):
        build(tmp_path / "spj", tmp_path / "r.jsonl", tok)
    # a job that fails after others of its shard were written: the shard's tokens, streamed, are removed
    with pytest.raises(InputError, match=r"<iterable>: document at row 3,000 .*special token"):
        build(tmp_path / "sp3", texts(["fine " * 100] * 3000 + ["<|endoftext|>"]), tok, shard_bytes=1 << 22)
    assert sorted(os.listdir(tmp_path / "sp3")) == ["build.json"]
    s = build(tmp_path / "sp2", texts(["ok", "a <|endoftext|> b"]), tok, special_text="plain")
    assert s.get(1).tolist() == tok.encode("a <|endoftext|> b", disallowed_special=()) + [tok.special_tokens["<|endoftext|>"]]


KILL_SCRIPT = """
import sys
from tokenmill import Tokenizer, TokenStore
tok = Tokenizer.load(sys.argv[1])
TokenStore.build(sys.argv[2], sys.argv[3], tok, workers=int(sys.argv[4]), shard_bytes=400, split_lines=True,
                 progress=False)
"""


@pytest.mark.parametrize("point", ["recorded:0", "renamed:2", "before-tokens:1", "before-offsets:3", "manifest:0"])
def test_sigkill_then_rerun_is_byte_identical(tmp_path, tok, point):
    make_corpus(tmp_path / "in")
    tok.save(tmp_path / "tok.json")
    ref = tmp_path / "ref"
    build(ref, tmp_path / "in", tok, shard_bytes=400, split_lines=True)
    out = tmp_path / "s"
    cmd = [sys.executable, "-c", KILL_SCRIPT, str(tmp_path / "tok.json"), str(out), str(tmp_path / "in"), "1"]
    r = subprocess.run(cmd, env={**os.environ, "TOKENMILL_STORE_KILL": point}, capture_output=True)
    assert r.returncode == -9, r.stderr.decode()
    assert (out / "build.json").exists()
    assert (out / "manifest.json").exists() == point.startswith("manifest")
    if point.startswith("recorded"):
        assert (out / "shard-00000.json").exists()
    r = subprocess.run(cmd[:-1] + ["2"], capture_output=True)  # resumed with another worker count
    assert r.returncode == 0, r.stderr.decode()
    assert store_bytes(out) == store_bytes(ref)


def test_interrupted_build_refuses_other_arguments_and_resumes_edited_input(tmp_path, tok, capfd):
    make_corpus(tmp_path / "in")
    tok.save(tmp_path / "tok.json")
    out = tmp_path / "s"
    cmd = [sys.executable, "-c", KILL_SCRIPT, str(tmp_path / "tok.json"), str(out), str(tmp_path / "in"), "1"]
    r = subprocess.run(cmd, env={**os.environ, "TOKENMILL_STORE_KILL": "recorded:1"}, capture_output=True)
    assert r.returncode == -9
    with pytest.raises(ConfigError, match=r"partial build made with other arguments \(eos_id: \d+ before, None now\)"):
        build(out, tmp_path / "in", tok, shard_bytes=400, split_lines=True, append_eos=False)
    first = tmp_path / "in" / "part-00.txt"
    first.write_text(first.read_text(encoding="utf-8").replace("the", "tha"), encoding="utf-8")  # same size
    capfd.readouterr()
    # an edited input file is no other argument: the build resumes, encoding again the shard it changed
    resumed = build(out, tmp_path / "in", tok, shard_bytes=400, split_lines=True)
    assert "shard 0 of the interrupted build was made from other input" in capfd.readouterr().err
    ref = build(tmp_path / "ref", tmp_path / "in", tok, shard_bytes=400, split_lines=True)
    assert store_bytes(out) == store_bytes(tmp_path / "ref") and resumed.verify()["documents"] == len(ref)


def test_finished_store_over_touched_or_edited_files(tmp_path, tok, capfd):
    """A touched input file (new time, same bytes) leaves the store as it is; an edited one (same size)
    rebuilds it beside the old one, as an iterable with other texts does: neither is another argument."""
    make_corpus(tmp_path / "in")
    first = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    before = store_bytes(tmp_path / "s")
    f = tmp_path / "in" / "part-00.txt"
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    capfd.readouterr()
    again = build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    assert store_bytes(tmp_path / "s") == before and again.fingerprint == first.fingerprint
    assert capfd.readouterr().err == ""
    f.write_text(f.read_text(encoding="utf-8").replace("the", "tha"), encoding="utf-8")
    build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    assert "the input of" in capfd.readouterr().err
    build(tmp_path / "ref", tmp_path / "in", tok, shard_bytes=400)
    assert store_bytes(tmp_path / "s") == store_bytes(tmp_path / "ref") != before
    assert not staging_dir(tmp_path / "s").exists()


def test_finished_store_over_a_changed_dataset_or_iterable_is_built_again(tmp_path, tok, capfd):
    """A dataset with other rows (a new fingerprint and length) or an iterable of another length is the same
    build over changed input, as an edited file is: rebuilt beside the old store (it was refused as "made
    with other arguments (sources[0].fingerprint: ...)")."""
    datasets = pytest.importorskip("datasets")
    for name, before, after in (
        ("ds", datasets.Dataset.from_dict({"text": ["one doc", "two docs"]}),
         datasets.Dataset.from_dict({"text": ["one doc", "two docs", "three"]})),
        ("it", texts(["one doc", "two docs"]), texts(["one doc", "two docs", "three"])),
    ):
        build(tmp_path / name, before, tok)
        capfd.readouterr()
        got = build(tmp_path / name, after, tok)
        assert "the input of" in capfd.readouterr().err
        assert [d.tolist() for d in got] == [tok.encode(t) + [tok.special_tokens["<|endoftext|>"]]
                                          for t in ["one doc", "two docs", "three"]]
        build(tmp_path / (name + "-ref"), after, tok)
        assert store_bytes(tmp_path / name) == store_bytes(tmp_path / (name + "-ref"))


def test_write_error_names_the_path_and_keeps_finished_shards(tmp_path, tok, monkeypatch):
    import contextlib

    import tokenmill._io as _io
    import tokenmill.data.store as S

    make_corpus(tmp_path / "in")
    ref = build(tmp_path / "ref", tmp_path / "in", tok, shard_bytes=400)
    real = S.atomic_path

    @contextlib.contextmanager
    def failing(path, **kw):
        if Path(path).name == "shard-00002.tokens":
            raise OSError(28, "No space left on device")
        with real(path, **kw) as tmp:
            yield tmp

    monkeypatch.setattr(S, "atomic_path", failing)
    monkeypatch.setattr(_io, "atomic_path", failing)  # (a shard's tokens are streamed: _io.StreamedFile)
    with pytest.raises(S.WriteError, match=r"cannot write .*shard-00002.tokens: No space left on device"):
        build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)
    assert (tmp_path / "s" / "shard-00001.json").exists() and not (tmp_path / "s" / "manifest.json").exists()
    assert not [p for p in os.listdir(tmp_path / "s") if p.endswith(_io.TMP_SUFFIX)]
    monkeypatch.setattr(S, "atomic_path", real)
    monkeypatch.setattr(_io, "atomic_path", real)
    build(tmp_path / "s", tmp_path / "in", tok, shard_bytes=400)  # resumes after the disk is freed
    assert store_bytes(tmp_path / "s") == store_bytes(tmp_path / "ref") and ref.num_shards > 2


def test_datasets_and_iterables_give_the_same_documents(tmp_path, tok):
    datasets = pytest.importorskip("datasets")
    docs = ["the theme", "", "there in 数据", "on"]
    a = build(tmp_path / "a", datasets.Dataset.from_dict({"text": docs}), tok)
    b = build(tmp_path / "b", texts(iter(docs)), tok, workers=2)
    assert [a.get(i).tolist() for i in range(4)] == [b.get(i).tolist() for i in range(4)]
    assert a.fingerprint == b.fingerprint  # same data, whatever the source kind


def test_a_tokenizer_path_or_foreign_object_is_converted(tmp_path, tok):
    """What ``as_tokenizer`` takes is taken by a build too: a tokenizer file's path (str or Path), an HF
    ``tokenizers.Tokenizer`` and a ``tiktoken.Encoding`` give the same store as the tokenmill Tokenizer;
    a path that is no tokenizer names the file."""
    tokenizers = pytest.importorskip("tokenizers")
    docs = ["the cat sat on the mat", "ünïcode 其数据", "the end <|endoftext|> spelled"]
    want = build(tmp_path / "want", texts(docs), tok, special_text="plain")
    tok.save(tmp_path / "tok.json")
    tok.save_huggingface(tmp_path / "hf.json")
    for name, given in (("str", str(tmp_path / "tok.json")), ("path", tmp_path / "tok.json"),
                        ("hf", tokenizers.Tokenizer.from_file(str(tmp_path / "hf.json"))),
                        ("tiktoken", tok.to_tiktoken())):
        got = build(tmp_path / name, texts(docs), given, special_text="plain")
        assert [got.get(i).tolist() for i in range(3)] == [want.get(i).tolist() for i in range(3)], name
    (tmp_path / "not.json").write_text("{}")
    with pytest.raises(TokenmillError, match="not.json"):
        build(tmp_path / "no", texts(docs), tmp_path / "not.json")


def test_arguments_that_are_not_a_folder_or_a_tokenizer_are_named(tmp_path, tok):
    """They raised a bare TypeError (a None folder) or an AttributeError (a None tokenizer)."""
    for bad, kind in ((None, "NoneType"), (5, "int")):
        with pytest.raises(ConfigError, match=rf"^out_dir is {kind}; pass the store's folder"):
            build(bad, texts(["a b"]), tok)
        with pytest.raises(ConfigError, match=rf"^path is {kind}; pass the store's folder"):
            TokenStore.open(bad)
    with pytest.raises(ConfigError, match="^a NoneType is not a tokenizer .*as_tokenizer"):
        build(tmp_path / "s", texts(["a b"]), None)
    with pytest.raises(ConfigError, match="^cannot use a builtins.int as a tokenizer; pass a tokenmill Tokenizer, a path"):
        build(tmp_path / "s", texts(["a b"]), 5)
    assert len(build(str(tmp_path / "s").encode(), texts(["a b"] * 3), tok)) == 3  # a bytes folder is a folder
    assert len(TokenStore.open(str(tmp_path / "s").encode())) == 3


def test_a_rerun_builds_a_damaged_store_again(tmp_path, tok, capsys):
    """A rerun into a finished store with the same arguments handed back whatever the folder held: a shard
    flipped in place came back as the build's result (``overwrite=True`` too), a truncated or missing one
    failed with "rebuild the store", which the rerun was. Now the rerun checks every shard's sha256 and
    builds a damaged store again (beside it, then swapped in), byte-identical to the first build."""
    make_corpus(tmp_path / "in")
    d = tmp_path / "s"
    build(d, tmp_path / "in", tok, shard_bytes=400)
    good = store_bytes(d)
    tokens = d / "shard-00001.tokens"
    data = tokens.read_bytes()
    for damage, overwrite in [(lambda: tokens.write_bytes(data[:2] + bytes([data[2] ^ 1]) + data[3:]), False),
                              (lambda: tokens.write_bytes(data[:2] + bytes([data[2] ^ 1]) + data[3:]), True),
                              (lambda: tokens.write_bytes(data[:-2]), False),
                              (lambda: (d / "shard-00002.offsets").unlink(), False)]:
        damage()
        capsys.readouterr()
        store = build(d, tmp_path / "in", tok, shard_bytes=400, overwrite=overwrite)
        assert "is damaged" in capsys.readouterr().err
        assert store_bytes(d) == good and store.verify()["documents"] == len(store)
        assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging folder left
    build(d, tmp_path / "in", tok, shard_bytes=400)
    assert "damaged" not in capsys.readouterr().err  # an intact store is reused, as before


def test_a_changed_generator_is_refused_not_built_from_what_is_left(tmp_path, tok):
    """Checking a finished store's input reads it; a generator read that way was then built from what the
    check left of it: the rebuilt store lost its first thousands of documents, silently (or, for a short
    generator, failed with "holds no documents"). A changed one-shot input is now refused, the store left
    as it was; a list (read twice) is still built again."""
    docs = [f"document number {i} " + "word " * (i % 17) for i in range(3000)]
    new = ["CHANGED"] + docs[1:]
    d = tmp_path / "s"
    first = build(d, (t for t in docs), tok, shard_bytes=5000)
    before = store_bytes(d)
    assert build(d, (t for t in docs), tok, shard_bytes=5000).fingerprint == first.fingerprint  # unchanged: reused
    for short in (False, True):
        gen = (t for t in (new[:50] if short else new))
        with pytest.raises(InputError, match=r"changed since it was built .* an iterator .* partly consumed.*"
                                              r"Pass the documents as a list"):
            build(d, gen, tok, shard_bytes=5000)
        assert store_bytes(d) == before
    d2 = tmp_path / "t"
    build(d2, texts(docs), tok, shard_bytes=5000)
    again = build(d2, texts(new), tok, shard_bytes=5000)
    assert len(again) == len(new) and again.get(0).tolist() == tok.encode("CHANGED") + [tok.special_tokens["<|endoftext|>"]]


def test_provenance_of_a_rewritten_meta_file_is_a_format_error(tmp_path, tok):
    """A ``.meta`` file rewritten in place at its size (found by ``verify``) gave a bare IndexError from
    ``provenance``, or for a negative file index another file's name, silently; a split by file grouped by
    the damaged values."""
    make_corpus(tmp_path / "in")
    d = tmp_path / "s"
    build(d, tmp_path / "in", tok, shard_bytes=400)
    path = d / "shard-00000.meta"
    good = np.fromfile(path, "<i8").reshape(-1, 2)
    for f, row in ((5_000, 0), (-1, 0), (0, -7)):
        m = good.copy()
        m[0] = (f, row)
        m.tofile(path)
        store = TokenStore.open(d)
        with pytest.raises(FormatError, match=r"shard-00000.meta: document 0 names file .* modified or corrupted"):
            store.provenance(0)
        with pytest.raises(FormatError, match=r"shard-00000.meta: a document names a file outside"):
            store.split(0.3, by="file")
    good.tofile(path)
    assert TokenStore.open(d).provenance(0)[2] == int(good[0, 1])


def test_datasets_sources_follow_errors_and_any_format(tmp_path, tok):
    """A dataset's bytes values were decoded strictly whatever ``errors`` said (while the error advised
    ``errors='replace'``); a dataset in "arrow" format raised a bare TypeError."""
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_dict({"text": [b"ok", b"a\xffb"]})
    with pytest.raises(InputError, match=r"row 1 \(field 'text'\): invalid UTF-8 at byte offset 1"):
        build(tmp_path / "a", data, tok)
    s = build(tmp_path / "b", data, tok, errors="replace")
    assert [s.decode(i, tok) for i in range(2)] == ["ok<|endoftext|>", "a\ufffdb<|endoftext|>"]
    assert s.manifest["invalid_utf8_replaced"] == 1
    plain = datasets.Dataset.from_dict({"text": ["a", "b"]})
    want = [build(tmp_path / "p", plain, tok).get(i).tolist() for i in range(2)]
    for fmt in ("arrow", "numpy", "pandas"):
        s = build(tmp_path / fmt, plain.with_format(fmt), tok)
        assert [s.get(i).tolist() for i in range(2)] == want


def test_replacing_a_store_through_a_link_or_from_inside_it(tmp_path, tok, monkeypatch, capsys):
    """A store reached through a symbolic link: the replacement swapped the link itself with the new store,
    deleted the old store's files through the link, then said "unchanged"; with out_dir "." the staging
    folder lay inside the store, the swap failed and every later build was refused for tokenmill's own
    staging folder. A store without its manifest, or with a damaged one, was refused as a user's folder or
    as "made with other arguments"; a folder that gained a file did not name it."""
    make_corpus(tmp_path / "in")
    (tmp_path / "disk").mkdir()
    real = tmp_path / "disk" / "s"
    build(real, tmp_path / "in", tok, shard_bytes=400)
    good = store_bytes(real)
    (tmp_path / "run").mkdir()
    link = tmp_path / "run" / "s"
    link.symlink_to(real)
    (tmp_path / "in" / "zz.txt").write_text("one more document here")
    store = build(link, tmp_path / "in", tok, shard_bytes=400, overwrite=True)
    assert link.is_symlink() and store.verify()["documents"] == len(store) and store_bytes(real) != good
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["s"]  # no staging folder beside the link
    tokens = real / "shard-00000.tokens"
    tokens.write_bytes(b"\0" + tokens.read_bytes()[1:])  # damaged: rebuilt where it is, through the link
    build(link, tmp_path / "in", tok, shard_bytes=400)
    assert link.is_symlink() and TokenStore.open(real).verify()
    monkeypatch.chdir(real)  # the store is the working folder: a replacement is refused before anything is built
    (tmp_path / "in" / "zz1.txt").write_text("changed input")
    with pytest.raises(ConfigError, match="it is the current folder"):
        build(".", tmp_path / "in", tok, shard_bytes=400, overwrite=True)
    assert TokenStore.open(real).verify() and not any(p.name.startswith(".") for p in real.iterdir())
    monkeypatch.chdir(tmp_path)
    bad = real / "manifest.json"
    bad.write_text("{broken")
    with pytest.raises(FormatError, match="rerun the store's build, which builds a damaged store again"):
        TokenStore.open(real)
    capsys.readouterr()
    build(real, tmp_path / "in", tok, shard_bytes=400)  # a damaged manifest: a damaged store, built again
    assert "is damaged (its manifest.json is not valid)" in capsys.readouterr().err and TokenStore.open(real).verify()
    bad.unlink()
    with pytest.raises(FormatError, match="holds shard files: a store whose manifest.json was removed"):
        TokenStore.open(real)
    with pytest.raises(ConfigError, match="holds the shard files of a token store but no manifest.json"):
        build(real, tmp_path / "in", tok, shard_bytes=400, overwrite=True)
    other = tmp_path / "o"
    build(other, tmp_path / "in", tok, shard_bytes=400)
    (tmp_path / "in" / "zz2.txt").write_text("and another")
    with pytest.raises(ConfigError, match=r"made with other arguments \(sources\[0\]\.files: 1 added \(.*zz2\.txt\)\);"):
        build(other, tmp_path / "in", tok, shard_bytes=400)
    from tokenmill.data.store import _describe_difference

    old = {"sources": [{"files": ["a.txt", "b.txt"], "sizes": [1, 2], "mtimes_ns": [5, 6]}]}
    new = {"sources": [{"files": ["a.txt", "b.txt", "zz.txt"], "sizes": [1, 2, 3], "mtimes_ns": [5, 6, 7]}]}
    assert _describe_difference(old, new) == "sources[0].files: 1 added (zz.txt)"
    # a source removed or added: named (its spec had been printed cut before any difference)
    two = {"sources": old["sources"] + [{"kind": "files", "files": ["extra.jsonl"]}]}
    assert _describe_difference(two, old) == "sources: 2 before, 1 now; removed: extra.jsonl"
    assert _describe_difference(old, two) == "sources: 1 before, 2 now; added: extra.jsonl"


def test_a_second_build_of_the_same_folder_waits_for_the_first(tmp_path, tok, capsys):
    """Two builds of one folder at once (every rank of a job calling build) had taken each other's journal
    and shards for their own: one failed, the other said it had built a store that did not open. A build
    holds the folder's lock; a second waits, saying so, then finds the store built and returns it."""
    import threading
    import time

    from tokenmill._io import exclusive
    from tokenmill.data import store as store_mod

    make_corpus(tmp_path / "corpus")
    src = str(tmp_path / "corpus")
    out = tmp_path / "s"
    got = {}
    with exclusive(os.path.realpath(out), store_mod._say):  # another writer holds the folder
        t = threading.Thread(target=lambda: got.setdefault("store", build(out, src, tok)))
        t.start()
        time.sleep(0.5)
        assert t.is_alive() and not out.exists()  # waiting, nothing written
    t.join(60)
    assert "is being written by process" in capsys.readouterr().err
    ref = build(tmp_path / "ref", src, tok)
    assert store_bytes(out) == store_bytes(tmp_path / "ref") and len(got["store"]) == len(ref)
    assert not (tmp_path / ".s.tokenmill-lock").exists()  # the holder removes its lock file
    # the two at once, in two processes, each with its own TMPDIR (a scheduler's job): both succeed, one store,
    # verified. The lock had been a file in the temporary folder: under two TMPDIRs, two locks, and the two
    # builds wrote into each other's shards (tokens files 2-3x their size, a manifest that did not open)
    out2 = tmp_path / "s2"
    code = ("import sys, tokenmill; from tokenmill import TokenStore; tok = tokenmill.Tokenizer.load(sys.argv[1]); "
            "TokenStore.build(sys.argv[2], sys.argv[3], tok, workers=1, progress=False, shard_bytes=512)")
    tok.save(tmp_path / "tok.json")
    make_corpus(tmp_path / "corpus2", n_files=40, docs_per_file=100)
    src = str(tmp_path / "corpus2")
    ref2 = TokenStore.build(tmp_path / "ref2", src, tok, workers=1, progress=False, shard_bytes=512)
    assert ref2.num_shards > 3
    for _ in range(2):
        shutil.rmtree(out2, ignore_errors=True)
        procs = []
        for k in range(2):
            (tmp_path / f"tmp{k}").mkdir(exist_ok=True)
            procs.append(subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "tok.json"), str(out2), str(src)],
                                          stderr=subprocess.PIPE, text=True,
                                          env={**os.environ, "TMPDIR": str(tmp_path / f"tmp{k}")}))
        assert [p.wait(120) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
        TokenStore.open(out2).verify()
        assert store_bytes(out2) == store_bytes(tmp_path / "ref2")
        assert not (tmp_path / ".s2.tokenmill-lock").exists()


def test_a_view_checks_its_index_and_definition(tmp_path, tok):
    """``store.view(index, definition)``: -1 (the padding document of batches) had been read as the last
    document by ``lengths`` (and trained on) but refused by ``get``; floats were truncated, a 2-D index
    flattened, bools read as 0 and 1, a document past the end an IndexError later, and a definition that
    is not JSON failed when the fingerprint was first asked for."""
    make_corpus(tmp_path / "in")
    store = build(tmp_path / "s", str(tmp_path / "in"), tok)
    n = len(store)
    v = store.view([2, 0], {"picked": "by hand"})
    assert v.lengths.tolist() == [int(store.lengths[2]), int(store.lengths[0])] and v.get(1).tolist() == store.get(0).tolist()
    for bad, match in (([-1, 0], "index entry 0 is -1; index must be in 0 .."), ([n], f"index entry 0 is {n}"),
                       ([1.5], "index has dtype float64"), ([[0, 1]], "index has shape"),
                       ([True], "index has dtype bool")):
        with pytest.raises(ConfigError, match=match):
            store.view(bad, {"picked": "by hand"})
    with pytest.raises(ConfigError, match="definition must be JSON"):
        store.view([0], {"picked": object()})


def test_a_shard_finished_by_another_writer_mid_build_stops_the_build(tmp_path, tok, monkeypatch):
    """Two writers without a shared lock (two machines): a shard's record written by the other while this build
    had sent the shard's first parts. The build had gone on writing the next shard's ids into that shard's
    open tokens file (tokens files 2-3x their size, renamed as the wrong shard's); it stops, saying why."""
    from tokenmill.data import store as store_mod

    make_corpus(tmp_path / "in", n_files=4, docs_per_file=30)
    real = store_mod._Builder._finished

    def finished_elsewhere(self, k, meta, size, digest):
        if k == 0:
            return {"name": "shard-00000", "documents": len(meta), "tokens": 1, "input_bytes": size}
        return real(self, k, meta, size, digest)

    monkeypatch.setattr(store_mod, "_PART_BYTES", 64)  # (shard 0 in several parts, the first sent at once)
    monkeypatch.setattr(store_mod._Builder, "_finished", finished_elsewhere)
    with pytest.raises(FormatError, match=r"shard-00000.json appeared while this build wrote that shard: another "
                                          "process is building the same store"):
        TokenStore.build(tmp_path / "s", str(tmp_path / "in"), tok, workers=1, progress=False, shard_bytes=4096)


def test_a_forked_child_does_not_keep_a_builds_lock():
    """An flock is shared by every copy of its descriptor: a worker process forked during a build (the process
    engine) that outlived it would have kept the folder locked, and the next build would have waited for it."""
    import multiprocessing
    import time

    from tokenmill._io import exclusive

    quiet = lambda msg: None  # noqa: E731
    with exclusive("/tmp/tokenmill-test-fork-lock", quiet):
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(5,))
        child.start()
    t0 = time.monotonic()
    with exclusive("/tmp/tokenmill-test-fork-lock", quiet):
        waited = time.monotonic() - t0
    assert child.is_alive() and waited < 2
    child.terminate()
    child.join()


def test_a_build_goes_on_unlocked_where_no_lock_file_can_be_made(tmp_path, tok, monkeypatch):
    """No lock file beside the output (a folder in its place) and no writable temporary folder (a read-only
    /tmp): the build runs as it did before the lock, unlocked, rather than failing. With the temporary folder
    writable, its lock file is taken instead."""
    import tempfile

    from tokenmill._io import exclusive

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")  # the lock folder would have to be made inside a file
    (tmp_path / ".s.tokenmill-lock").mkdir()  # and beside the output, a folder where the file would be
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(blocker))
    make_corpus(tmp_path / "in")
    assert len(build(tmp_path / "s", str(tmp_path / "in"), tok)) > 0
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    said = []
    with exclusive(tmp_path / "s", said.append):
        assert len(list((tmp_path / "tmp").rglob("*.lock"))) == 1
        with exclusive(tmp_path / "other", said.append):  # another output: its own lock, no wait
            pass
    assert said == []
    with exclusive(tmp_path / "new" / "parent" / "s", said.append):  # a folder not made yet: made, the lock in it
        assert (tmp_path / "new" / "parent" / ".s.tokenmill-lock").is_file()
    assert said == [] and not (tmp_path / "new" / "parent" / ".s.tokenmill-lock").exists()


def test_the_eos_a_model_declares_is_the_stores_and_a_stray_eos_id_is_said(tmp_path):
    """A store took its EOS by name only: a Llama 3 Instruct-like folder declaring ``<|eot_id|>`` got
    ``<|end_of_text|>`` after every document (encode_sft of the same tokenizer took ``<|eot_id|>``), and a folder
    declaring an EOS of no known name was refused. An eos_id that is no special token (a typo) is said."""
    import json

    from tokenmill import Tokenizer, encode_sft, train_bpe

    src = tmp_path / "model"
    train_bpe(["hello world"] * 10, 262, special_tokens=["<|end_of_text|>", "<|eot_id|>", "<|done|>"]).save_huggingface(
        src / "tokenizer.json")
    for eos in ("<|eot_id|>", "<|done|>"):
        (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos}))
        t = Tokenizer.from_huggingface(src)
        st = build(tmp_path / eos.strip("<|>"), texts(["hello"]), t)
        assert st.get(0).tolist()[-1] == t.special_tokens[eos] == st.eos_id
        assert encode_sft(t, [("hi", "yo")]).get(0).tolist()[-1] == t.special_tokens[eos]
    with pytest.warns(UserWarning, match=r"eos_id=104 \('h'\) is none of the tokenizer's special tokens"):
        st = build(tmp_path / "typo", texts(["hello"]), t, eos_id=104)
    assert st.get(0).tolist()[-1] == 104


def test_a_first_run_charges_a_build_to_the_twins_budget_once(tmp_path, tok, monkeypatch):
    """A store build asked whether to encode on the pure-Python twin at three layers, each charging the same texts
    to the first run's budget: a 710 KB corpus spent 2.1 MB of it and the demo compiled for a minute. Asked once
    per batch now: the bytes charged are the corpus', and the store is the same."""
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.bpe import encoder

    charged = []

    def first(size):
        charged.append(size)
        return True

    docs = [f"document {i} the then there, théâtre 漢字 " * (1 + i % 7) for i in range(300)]
    ref = build(tmp_path / "ref", texts(docs), tok)
    fresh = Tokenizer.from_dict(tok.to_dict())  # (no compiled encoder yet: python_first is asked)
    monkeypatch.setattr(encoder, "python_first", first)
    got = build(tmp_path / "twin", texts(docs), fresh, workers=1)
    assert store_bytes(tmp_path / "twin") == store_bytes(tmp_path / "ref") and len(got) == len(ref)
    total = sum(len(d.encode()) for d in docs)
    assert total in charged and sum(charged) <= total + 64, charged  # (once; 2-3 times the corpus had been charged)
