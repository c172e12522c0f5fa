"""Nothing a user has is lost or silently wrong: a build over a store is transactional, a resumed
build proves each reused shard was made from the same input, only files tokenmill made are removed,
outputs never land on the store being read, and every store file is checked by its schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tokenmill import TokenStore
from tokenmill._io import canonical_hash
from tokenmill.data import texts
from tokenmill.data.store import staging_dir
from tokenmill.errors import ConfigError, FormatError, InputError

from .conftest import make_corpus


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def build(out, src, tok, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("workers", 1)
    return TokenStore.build(out, src, tok, **kw)


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tokenmill", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


@pytest.fixture
def good_store(tmp_path, tok):
    make_corpus(tmp_path / "in")
    st = build(tmp_path / "st", tmp_path / "in", tok, shard_bytes=400, split_lines=True)
    return tmp_path / "st", snapshot(tmp_path / "st"), st


# ---- 1. a failed or killed build over a store leaves it byte-identical --------------------------
def test_failed_overwrite_keeps_the_old_store(tmp_path, tok, good_store):
    out, before, _ = good_store
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "fine"}\n{"text": "bro\xffken"}\n')
    tok.save(tmp_path / "tok.json")
    r = cli("store", "build", "--input", bad, "--out", out, "--tokenizer", tmp_path / "tok.json", "--overwrite",
            "--quiet")
    assert r.returncode == 1 and "invalid UTF-8" in r.stderr and "bad.jsonl" in r.stderr
    assert snapshot(out) == before
    TokenStore.open(out).verify()
    with pytest.raises(InputError, match="invalid UTF-8"):
        build(out, bad, tok, overwrite=True)
    assert snapshot(out) == before
    # the corrected input replaces it; no staging folder is left behind
    bad.write_bytes(b'{"text": "fine"}\n{"text": "mended"}\n')
    new = build(out, bad, tok, overwrite=True)
    assert len(new) == 2 and new.get(1).tolist()[:-1] == tok.encode("mended")
    assert not staging_dir(out).exists() and new.verify()["documents"] == 2


KILL_OVER = """
import sys
from tokenmill import Tokenizer, TokenStore
tok = Tokenizer.load(sys.argv[1])
TokenStore.build(sys.argv[2], sys.argv[3], tok, workers=1, shard_bytes=300, split_lines=True, overwrite=True,
                 progress=False, append_eos=False)
"""


@pytest.mark.parametrize("point", ["before-meta:0", "recorded:1", "manifest:0", "swap:0", "swapped:0"])
def test_build_over_a_store_killed_anywhere_keeps_one_whole_store(tmp_path, tok, good_store, point):
    out, before, _ = good_store
    tok.save(tmp_path / "tok.json")
    ref = build(tmp_path / "ref", tmp_path / "in", tok, shard_bytes=300, split_lines=True, append_eos=False)
    cmd = [sys.executable, "-c", KILL_OVER, str(tmp_path / "tok.json"), str(out), str(tmp_path / "in")]
    r = subprocess.run(cmd, env={**os.environ, "TOKENMILL_STORE_KILL": point}, capture_output=True, timeout=300)
    assert r.returncode == -9, r.stderr.decode()
    if point == "swapped:0":  # the new store is in place: whole and verified
        assert snapshot(out) == snapshot(tmp_path / "ref")
    else:  # the old store, byte for byte
        assert snapshot(out) == before
        TokenStore.open(out).verify()
    r = subprocess.run(cmd, capture_output=True, timeout=300)  # the rerun finishes the replacement
    assert r.returncode == 0, r.stderr.decode()
    assert snapshot(out) == snapshot(tmp_path / "ref") and not staging_dir(out).exists()
    assert TokenStore.open(out).fingerprint == ref.fingerprint


# ---- 2. a resumed build proves each finished shard came from the same input ----------------------
KILL_TEXTS = """
import sys
from tokenmill import Tokenizer, TokenStore
from tokenmill.data import texts
tok = Tokenizer.load(sys.argv[1])
docs = [f"document {i} the theme " * 3 for i in range(200)]
if sys.argv[3] == "upper":
    docs = [d.upper() for d in docs]
TokenStore.build(sys.argv[2], texts(docs), tok, workers=int(sys.argv[4]), engine=sys.argv[5], shard_bytes=600,
                 progress=False)
"""


@pytest.mark.parametrize("engine,workers", [("local", 1), ("process", 2)])
def test_resume_with_changed_input_of_the_same_length_reencodes(tmp_path, tok, engine, workers):
    tok.save(tmp_path / "tok.json")
    out = tmp_path / "s"
    cmd = [sys.executable, "-c", KILL_TEXTS, str(tmp_path / "tok.json"), str(out)]
    r = subprocess.run(cmd + ["lower", str(workers), engine], env={**os.environ, "TOKENMILL_STORE_KILL": "recorded:3"},
                       capture_output=True, timeout=300)
    assert r.returncode == -9 and (out / "shard-00003.json").exists()
    r = subprocess.run(cmd + ["upper", str(workers), engine], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "shard 0 of the interrupted build was made from other input" in r.stderr
    st = TokenStore.open(out)
    docs = [f"document {i} the theme " * 3 for i in range(200)]
    eos = tok.special_tokens["<|endoftext|>"]
    assert [st.get(i).tolist() for i in (0, 50, 199)] == [tok.encode(docs[i].upper()) + [eos] for i in (0, 50, 199)]
    st.verify()
    ref = build(tmp_path / "ref", texts([d.upper() for d in docs]), tok, shard_bytes=600)
    assert snapshot(out) == snapshot(tmp_path / "ref") and ref.fingerprint == st.fingerprint


def test_resume_with_the_same_input_reuses_shards_without_encoding(tmp_path, tok, monkeypatch, capfd):
    tok.save(tmp_path / "tok.json")
    out = tmp_path / "s"
    cmd = [sys.executable, "-c", KILL_TEXTS, str(tmp_path / "tok.json"), str(out), "lower", "1", "local"]
    r = subprocess.run(cmd, env={**os.environ, "TOKENMILL_STORE_KILL": "recorded:3"}, capture_output=True, timeout=300)
    assert r.returncode == -9
    import tokenmill.data.engines as E

    encoded = []
    real = E.encode_job
    monkeypatch.setattr(E, "encode_job", lambda t, o, texts: encoded.append(len(texts)) or real(t, o, texts))
    docs = [f"document {i} the theme " * 3 for i in range(200)]
    damaged = out / "shard-00001.tokens"  # a finished shard of the interrupted build, damaged since
    damaged.write_bytes(b"\7" + damaged.read_bytes()[1:])
    st = TokenStore.build(out, texts(docs), tok, shard_bytes=600, workers=1, progress=False)
    rec = st.manifest["shards"]
    assert len(encoded) == len(rec) - 3  # shards 0, 2 and 3 were reused, not encoded
    kept = [rec[0], rec[2], rec[3]]  # and the rerun says so, with their counts, without progress bars too
    err = capfd.readouterr().err
    assert (f"resumed an interrupted build: 3 of {len(rec)} shards ({sum(r['documents'] for r in kept)} documents, "
            f"{sum(r['tokens'] for r in kept):,d} tokens) were finished by the earlier run and kept, their input "
            f"checked; {len(rec) - 3} encoded now") in err
    # (the damaged shard had been encoded again without a word)
    assert "shard 1 of the interrupted build: its shard-00001.tokens is damaged" in err
    assert all(r["input_sha256"].startswith("sha256:") for r in rec)
    st.verify()
    assert snapshot(out) == snapshot(build(tmp_path / "ref", texts(docs), tok, shard_bytes=600).path)


@pytest.mark.parametrize("engine,workers", [("local", 1), ("local", 2), ("process", 2)])
def test_shards_encoded_in_parts_are_the_same_bytes_and_resume_from_whole_shards(tmp_path, tok, monkeypatch,
                                                                                 engine, workers):
    """A shard larger than a job is encoded in parts, the first one starting as its bytes are read: the same
    store as whole-shard jobs; a build stopped after four shards resumes without encoding their parts again
    (held back until their input is proven the same), encodes them again when it changed, and a failing
    document in a later part is named by its own row."""
    from tokenmill.data import engines as E
    from tokenmill.data import store as S

    docs = [f"document {i} the theme " * 3 for i in range(200)]
    upper = [d.upper() for d in docs]
    kw = {"shard_bytes": 600, "engine": engine, "workers": workers}
    monkeypatch.setattr(S, "_PART_BYTES", 0)  # whole shards: the reference
    ref = build(tmp_path / "ref", texts(docs), tok, **kw)
    build(tmp_path / "ru", texts(upper), tok, **kw)
    monkeypatch.setattr(S, "_PART_BYTES", 130)
    jobs = []
    real = E.encode_job
    monkeypatch.setattr(E, "encode_job", lambda t, o, x: jobs.append(len(x)) or real(t, o, x))
    build(tmp_path / "a", texts(docs), tok, **kw)
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "ref")
    if engine == "local":  # (worker processes do not report their jobs here)
        assert len(jobs) >= 4 * ref.num_shards and sum(jobs) == len(docs)
    write = S._Builder._write_shard

    def stop_at_4(self, k, parts):
        if k == 4:
            raise RuntimeError("stopped")
        return write(self, k, parts)

    for again, want in ((docs, "ref"), (upper, "ru")):
        out = tmp_path / f"stopped-{want}"
        monkeypatch.setattr(S._Builder, "_write_shard", stop_at_4)
        with pytest.raises(RuntimeError, match="stopped"):
            build(out, texts(docs), tok, **kw)
        monkeypatch.setattr(S._Builder, "_write_shard", write)
        jobs.clear()
        st = build(out, texts(again), tok, **kw)
        assert snapshot(out) == snapshot(tmp_path / want)
        if engine == "local":
            done = sum(r["documents"] for r in ref.manifest["shards"][:4])
            assert sum(jobs) == len(docs) - (done if again is docs else 0)
        st.verify()
    bad = [f"doc {i} " * 20 for i in range(30)]
    bad[17] = "a <|endoftext|> b"
    with pytest.raises(InputError, match=r"<iterable>: document at row 17 \(shard 0\).*special token"):
        build(tmp_path / "bad", texts(bad), tok, shard_bytes=10_000, engine=engine, workers=workers)


def test_finished_store_with_changed_input_is_rebuilt_beside_it(tmp_path, tok, capfd):
    docs = [f"doc {i} the" for i in range(50)]
    a = build(tmp_path / "s", texts(docs), tok, shard_bytes=100)
    same = build(tmp_path / "s", texts(docs), tok, shard_bytes=100)  # same input: nothing to do
    assert same.fingerprint == a.fingerprint
    b = build(tmp_path / "s", texts([d.upper() for d in docs]), tok, shard_bytes=100)
    assert "changed since it was built" in capfd.readouterr().err
    assert b.get(0).tolist()[:-1] == tok.encode(docs[0].upper()) and b.fingerprint != a.fingerprint
    assert not staging_dir(tmp_path / "s").exists()


def test_finished_store_whose_documents_moved_between_files_or_rows_is_rebuilt(tmp_path, tok, capfd):
    # the same documents' bytes in the same order (so the input hashes agree), from other lines and files:
    # the store handed back must record where each document is now, as a fresh build does
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text('{"text":"one"}\n{"text":"two"}\n{"text":"three"}\n')
    (src / "b.jsonl").write_text('{"text":"four"}\n')
    build(tmp_path / "s", str(src), tok)
    (src / "a.jsonl").write_text('\n\n{"text":"one","id":1}\n\n{"text":"two"}\n')
    (src / "b.jsonl").write_text('{"text":"three"}\n{"text":"four"}\n')
    again = build(tmp_path / "s", str(src), tok)
    assert "its documents come from other files or rows now" in capfd.readouterr().err
    fresh = build(tmp_path / "fresh", str(src), tok)
    where = [again.provenance(i)[1:] for i in range(len(again))]
    assert where == [fresh.provenance(i)[1:] for i in range(len(fresh))]
    assert [Path(f).name for f, _ in where] == ["a.jsonl", "a.jsonl", "b.jsonl", "b.jsonl"]
    assert [row for _, row in where] == [2, 4, 0, 1]
    assert snapshot(tmp_path / "s") == snapshot(tmp_path / "fresh")


# ---- 3. only files tokenmill made and recorded are removed ---------------------------------------
def test_user_files_in_the_output_folder_are_never_removed(tmp_path, tok):
    out = tmp_path / "mine"
    out.mkdir()
    (out / ".edits.tmp").write_text("my notes")
    (out / "shard-00000.tokens").write_text("not a store of ours")  # no journal or manifest records it
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match="not part of a token store"):
            build(out, texts(["x"]), tok, overwrite=overwrite)
    assert (out / ".edits.tmp").read_text() == "my notes" and (out / "shard-00000.tokens").exists()


def test_a_users_manifest_or_build_json_is_not_taken_for_a_store(tmp_path, tok):
    """Files of the user's that merely share a store's names (a web app's manifest.json, a build tool's build.json,
    a folder named build.json) had been read as a damaged store or a build's journal: replaced, or removed without a
    word. A record is tokenmill's where its first bytes name its format; these are refused by name and kept, with or
    without overwrite, and a real store's damaged manifest is still rebuilt."""
    cases = {"web": {"manifest.json": '{"name": "my web app", "icons": []}'},
             "tool": {"build.json": '{"target": "release"}'},
             "both": {"build.json": '{"target": "release"}', "shard-00000.tokens": "my own tokens"},
             "format-later": {"manifest.json": '{"name": "x", "note": "format: tokenmill.store"}'}}
    for name, files in cases.items():
        out = tmp_path / name
        out.mkdir()
        for f, text in files.items():
            (out / f).write_text(text)
        for overwrite in (False, True):
            with pytest.raises(ConfigError, match=r"not part of a token store \((build|manifest)\.json"):
                build(out, texts(["x"]), tok, overwrite=overwrite)
        assert {p.name: p.read_text() for p in out.iterdir()} == files
    (tmp_path / "dir" / "build.json").mkdir(parents=True)
    (tmp_path / "dir" / "build.json" / "inner.txt").write_text("keep")
    with pytest.raises(ConfigError, match=r"not part of a token store \(build\.json\)"):
        build(tmp_path / "dir", texts(["x"]), tok)
    assert (tmp_path / "dir" / "build.json" / "inner.txt").read_text() == "keep"
    st = build(tmp_path / "real", texts(["x y", "z"]), tok)
    # a build tool's build.json beside a finished store's shards is no journal (one makes every shard-named file
    # tokenmill's: a user's shard-named copy had been removed with it)
    (tmp_path / "real" / "build.json").write_text('{"targets": ["app"]}')
    (tmp_path / "real" / "shard-00099.tokens").write_text("my own copy")
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match="shard-00099.tokens"):
            build(tmp_path / "real", texts(["x y", "z"]), tok, overwrite=overwrite)
    assert (tmp_path / "real" / "build.json").read_text() == '{"targets": ["app"]}'
    assert (tmp_path / "real" / "shard-00099.tokens").read_text() == "my own copy"
    (tmp_path / "real" / "build.json").unlink()
    (tmp_path / "real" / "shard-00099.tokens").unlink()
    raw = (tmp_path / "real" / "manifest.json").read_bytes()
    (tmp_path / "real" / "manifest.json").write_bytes(raw[:300] + b"#" + raw[301:])  # (a damaged manifest of ours)
    again = build(tmp_path / "real", texts(["x y", "z"]), tok)
    assert again.fingerprint == st.fingerprint


def test_a_file_put_in_a_stores_folder_is_named_to_move_out(tmp_path, tok):
    build(tmp_path / "s", texts(["x y", "z"]), tok)
    (tmp_path / "s" / "lengths.png").write_bytes(b"a plot")
    with pytest.raises(ConfigError, match=r"is a token store holding files that are not part of it \(lengths\.png\); "
                                          "move them out of the store's folder"):
        build(tmp_path / "s", texts(["x y", "z"]), tok)


def test_files_named_like_shards_that_the_manifest_does_not_record_are_never_removed(tmp_path, tok):
    """A finished store's folder holding a user's shard-named files (a copy of a shard, notes in shard-00042.json):
    a rebuild of the damaged store, ``overwrite=True`` and ``remove_store`` had deleted them (every shard-named
    file counted as tokenmill's once a manifest was there) or written over them; now they are refused by name and
    kept. A manifest that cannot be read at all still lets its store be built again, its shards being the run
    0, 1, ... a build leaves; a shard-named file past that run is a user's there too."""
    from tokenmill.data.store import remove_store

    def add_user_files(d):
        (d / "shard-00007.tokens").write_bytes(b"MY DATA")
        (d / "shard-00042.json").write_text("my notes")

    def kept(d):
        return (d / "shard-00007.tokens").read_bytes() == b"MY DATA" and (d / "shard-00042.json").exists()

    refusal = "named like a token store's shards that its manifest.json does not record"
    arrays = tmp_path / "arrays"
    TokenStore.from_token_arrays(arrays, [([2, 1], [5, 6, 7])], vocab_size=10)
    add_user_files(arrays)
    with pytest.raises(ConfigError, match=refusal):
        TokenStore.from_token_arrays(arrays, [([1], [3])] * 9, vocab_size=10, overwrite=True)
    with pytest.raises(ConfigError, match=refusal):
        remove_store(arrays)
    assert kept(arrays) and TokenStore.open(arrays).verify()["documents"] == 2

    out = tmp_path / "s"
    build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100)
    shards = sorted(p.name for p in out.iterdir())
    tokens = out / "shard-00001.tokens"
    tokens.write_bytes(b"\1" + tokens.read_bytes()[1:])  # damaged: a rerun builds it again
    add_user_files(out)
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match=refusal + r" \(shard-00007.tokens, shard-00042.json\)"):
            build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100, overwrite=overwrite)
    assert kept(out)
    good_manifest = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text("{broken")  # unreadable: the run of whole shards is the store's
    with pytest.raises(ConfigError, match="its damaged manifest.json cannot tell from a user's"):
        build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100)
    assert kept(out)
    (out / "shard-00007.tokens").unlink()
    (out / "shard-00042.json").unlink()
    st = build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100)
    assert st.verify()["documents"] == 30 and sorted(p.name for p in out.iterdir()) == shards
    # a manifest damaged but still JSON that lost a shard's name: its shards in a row are still the store's
    body = json.loads(good_manifest)
    del body["shards"][1]["name"]
    (out / "manifest.json").write_text(json.dumps(body))
    st = build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100)
    assert st.verify()["documents"] == 30 and sorted(p.name for p in out.iterdir()) == shards
    # a shard name that is a link: said as such, not as a file the manifest does not record
    n = len(st.manifest["shards"])
    (out / f"shard-{n:05d}.tokens").symlink_to(out / "shard-00000.tokens")
    with pytest.raises(ConfigError, match=rf"shard names that are not regular files \(shard-{n:05d}.tokens: a link"):
        build(out, texts(["other"]), tok, overwrite=True)
    (out / f"shard-{n:05d}.tokens").unlink()
    # shards past the manifest's last (an earlier tokenmill killed while tidying): said so
    (out / f"shard-{n:05d}.tokens").write_bytes(b"\0\0")
    with pytest.raises(ConfigError, match="shards past the last one the manifest records"):
        build(out, texts([f"doc {i} of the store" for i in range(30)]), tok, shard_bytes=100)


def test_a_journal_without_shards_does_not_block_the_corrected_build(tmp_path, tok):
    src = tmp_path / "a.jsonl"
    src.write_text('{"content": "hi"}\n')
    with pytest.raises(InputError, match="no field 'text'"):
        build(tmp_path / "s", src, tok)
    assert (tmp_path / "s" / "build.json").exists()
    st = build(tmp_path / "s", src, tok, field="content")  # no --overwrite needed
    assert len(st) == 1


# ---- 4. outputs never land on the store being read -------------------------------------------------
def test_stats_plot_and_megatron_export_never_overwrite_the_store(tmp_path, good_store):
    pytest.importorskip("matplotlib")
    out, before, st = good_store
    link = tmp_path / "p.png"
    link.symlink_to(out / "manifest.json")
    r = cli("store", "stats", out, "--plot", link)
    assert r.returncode == 1 and "symbolic link" in r.stderr
    os.link(out / "manifest.json", tmp_path / "hard.png")
    r = cli("store", "stats", out, "--plot", tmp_path / "hard.png")
    assert r.returncode == 1 and "input" in r.stderr
    r = cli("store", "stats", out, "--plot", tmp_path / "NAME")
    assert r.returncode == 1 and ".png" in r.stderr and not (tmp_path / "NAME.png").exists()
    r = cli("store", "stats", out, "--plot", tmp_path / "ok.svg")
    assert r.returncode == 0 and f"length histogram: {tmp_path / 'ok.svg'}" in r.stdout
    assert (tmp_path / "ok.svg").read_text().lstrip().startswith("<?xml")
    (tmp_path / "x.idx").symlink_to(out / "manifest.json")
    with pytest.raises(ConfigError, match="symbolic link"):
        st.export_megatron(tmp_path / "x")
    os.link(out / "shard-00000.tokens", tmp_path / "y.bin")
    with pytest.raises(ConfigError, match="input"):
        st.export_megatron(tmp_path / "y")
    assert snapshot(out) == before and not (tmp_path / "x.bin").exists()


# ---- 5. every store file passes its schema ----------------------------------------------------------
def rewrite_manifest(d: Path, edit) -> None:
    m = json.loads((d / "manifest.json").read_text())
    edit(m)
    m.pop("hash", None)
    m["hash"] = canonical_hash(m)  # a consistent hash: the schema must catch it, not the hash check
    (d / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("edit,field", [
    (lambda m: m.update(shards="x"), "shards"),
    (lambda m: m["shards"][0].update(name="../outside/x"), "shards[0].name"),
    (lambda m: m["shards"][1].update(name="/etc/shard-00001"), "shards[1].name"),
    (lambda m: m.update(dtype="int16"), "dtype"),
    (lambda m: m.update(dtype="int8"), "dtype"),
    (lambda m: m["shards"].append(m["shards"][0]), "shards"),
    (lambda m: m["shards"][0].update(documents=True), "shards[0].documents"),
    (lambda m: m["shards"][0].update(tokens=2**70), "shards[0].tokens"),
    (lambda m: m["tokenizer"].update(eos_id="3"), "tokenizer.eos_id"),
    (lambda m: m["tokenizer"].update(vocab_size=10), "vocab_size"),
    (lambda m: m.update(version=1.0), "version"),
    (lambda m: m.update(extra=1), "extra"),
    (lambda m: m["shards"][0]["files"]["tokens"].update(bytes=-1), "shards[0].files.tokens.bytes"),
])
def test_manifest_schema_names_the_field(tmp_path, tok, edit, field):
    build(tmp_path / "s", texts([f"doc {i} the" for i in range(40)]), tok, shard_bytes=100)
    rewrite_manifest(tmp_path / "s", edit)
    with pytest.raises(FormatError, match="manifest") as e:
        TokenStore.open(tmp_path / "s")
    assert field in str(e.value)


def test_a_key_twice_in_the_manifest_is_a_format_error(tmp_path, tok):
    """JSON parsers keep the last copy of a key: a manifest edited to carry ``"documents"`` twice had opened and
    verified (its hash is over what was kept), while a reader keeping the first copy saw other values."""
    build(tmp_path / "s", texts([f"doc {i} the" for i in range(40)]), tok, shard_bytes=100)
    path = tmp_path / "s" / "manifest.json"
    good = path.read_text()
    for edited in (good.replace("{", '{"documents": 999999, ', 1),
                   good.replace('"name": "shard-00000"', '"tokens": 1, "name": "shard-00000"', 1)):
        assert edited != good
        path.write_text(edited)
        with pytest.raises(FormatError, match="holds the key '(documents|tokens)' twice"):
            TokenStore.open(tmp_path / "s")
    path.write_text(good)
    assert len(TokenStore.open(tmp_path / "s")) == 40


def test_newer_versions_and_nesting_are_format_errors(tmp_path, tok):
    build(tmp_path / "s", texts(["a"]), tok)
    rewrite_manifest(tmp_path / "s", lambda m: m.update(version=2))
    with pytest.raises(FormatError, match="newer than this tokenmill reads"):
        TokenStore.open(tmp_path / "s")
    (tmp_path / "s" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match="deep"):
        TokenStore.open(tmp_path / "s")


def test_store_build_arguments_are_exact(tmp_path, tok):
    for kw, name in [({"eos_id": 5.9}, "eos_id"), ({"eos_id": True}, "eos_id"), ({"eos_id": "7"}, "eos_id"),
                     ({"append_eos": "no"}, "append_eos"), ({"shard_bytes": 1.5}, "shard_bytes"),
                     ({"workers": True}, "workers"), ({"overwrite": "yes"}, "overwrite")]:
        with pytest.raises(ConfigError, match=name):
            build(tmp_path / "s", texts(["x"]), tok, **kw)
    assert not (tmp_path / "s").exists()


# ---- 6. a shard truncated under the memory map is an error, not SIGBUS ------------------------------
def test_truncated_shard_while_open_raises_instead_of_sigbus(tmp_path, tok):
    st = build(tmp_path / "s", texts(["the theme " * 2000, "x"]), tok, shard_bytes=10)
    code = f"""
import os
from tokenmill import TokenStore
from tokenmill.errors import FormatError
st = TokenStore.open({str(tmp_path / 's')!r})
st.get(0).sum()  # mapped and read once
os.truncate({str(tmp_path / 's' / 'shard-00000.tokens')!r}, 0)
for f in (lambda: st.get(0).sum(), lambda: st[-2]):
    try:
        f()
        print("no error")
    except FormatError as e:
        print("FormatError", "truncated" in str(e))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["FormatError True", "FormatError True"]
    assert st.num_shards == 2


# ---- 7. Megatron files: only the dtypes ids are written in, never a negative id -------------------------
def test_megatron_index_schema_and_negative_ids(tmp_path, tok):
    import struct

    st = build(tmp_path / "s", texts(["the theme", "on"]), tok)
    bin_, idx = st.export_megatron(tmp_path / "m")
    assert len(TokenStore.from_megatron(tmp_path / "m")) == 2
    raw = bytearray(idx.read_bytes())
    for code in (2, 3, 6):  # int8, int16, float64: tokenmill and Megatron write ids as uint16 or int32
        raw[17] = code
        idx.write_bytes(bytes(raw))
        with pytest.raises(FormatError, match=f"ids \\(dtype code {code}\\); tokenmill reads uint16 or int32 ids"):
            TokenStore.from_megatron(tmp_path / "m")
    raw[17] = 9  # no dtype Megatron has: the schema's refusal
    idx.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="dtype_code"):
        TokenStore.from_megatron(tmp_path / "m")
    raw[17] = 4  # int32, with a negative id in the data
    lengths = np.frombuffer(bytes(raw[34:42]), "<i4")
    n = int(lengths.sum())
    raw[42:58] = struct.pack("<qq", 0, int(lengths[0]) * 4)  # the pointers of int32 ids
    idx.write_bytes(bytes(raw))
    bin_.write_bytes(np.full(n, -1, "<i4").tobytes())
    with pytest.raises(FormatError, match="negative"):
        TokenStore.from_megatron(tmp_path / "m")
    idx.write_bytes(bytes(raw) + b"\0")
    with pytest.raises(FormatError, match="trailing"):
        TokenStore.from_megatron(tmp_path / "m")


def test_a_store_replaced_while_open_is_said_never_read_under_the_old_offsets(tmp_path, monkeypatch):
    """A store built again over (overwrite=True) while another handle had it open: its shards not mapped yet, and
    every shard a DataLoader worker (a pickled handle) maps, had been read from the new store's files under the
    old offsets and fingerprint (a loader's batches half from each store; with other lengths, documents of
    neither). Now such a read says the store was replaced; a new open reads the new store."""
    import pickle

    from tokenmill.data.store import Shard
    from tokenmill.torch import TrainingLoader

    d = tmp_path / "s"

    def write(v0, v1, lengths=(5, 5), overwrite=False):
        shards = [(np.array(lengths), np.full(sum(lengths), v)) for v in (v0, v1)]
        TokenStore.from_token_arrays(d, shards, vocab_size=100, overwrite=overwrite)

    write(1, 2)
    old = TokenStore.open(d)
    worker_copy = pickle.loads(pickle.dumps(old))  # what a DataLoader worker holds: no maps, files by path
    loader = TrainingLoader(old, batch_size=1, block_size=10, seed=0, shuffle=False)
    assert old.get(0).tolist() == [1] * 5  # shard 0 mapped: it keeps reading its own files
    write(7, 8, lengths=(4, 6), overwrite=True)  # same shard sizes, other documents
    replaced = "is no longer the file the store had when it was opened: the store at .* was built again or replaced"
    assert old.get(1).tolist() == [1] * 5
    for read in (lambda: old.get(2), lambda: worker_copy.get(0), lambda: [b for b in loader], old.verify):
        with pytest.raises(FormatError, match=replaced):
            read()
    assert TokenStore.open(d).get(0).tolist() == [7] * 4
    # built again with fewer shards: the old one's last shard is gone, not "missing: the store is incomplete,
    # rebuild it" (the store on disk is whole); a shard file removed from a store that was not replaced is that
    old, worker_copy = TokenStore.open(d), pickle.loads(pickle.dumps(TokenStore.open(d)))
    TokenStore.from_token_arrays(d, [(np.array([3]), np.full(3, 9))], vocab_size=100, overwrite=True)
    gone = r"shard-00001\.(tokens|offsets) is gone: the store at .* was built again, replaced or removed since it was opened"
    for read in (lambda: old.get(3), lambda: worker_copy.get(3)):
        with pytest.raises(FormatError, match=gone):
            read()
    with pytest.raises(FormatError, match="shard-00000.tokens is no longer the file .* was built again or replaced"):
        old.verify()  # (its first shard, there under the new store, said first)
    write(7, 8, lengths=(4, 6), overwrite=True)
    st = TokenStore.open(d)
    (d / "shard-00001.tokens").unlink()
    with pytest.raises(FormatError, match="shard-00001.tokens is missing; the store is incomplete"):
        st.get(3)

    # replaced between reading the manifest and checking the files: opened again (it had been "damaged: rebuild")
    real, swapped = Shard.check_files, []

    def replace_once(self, parts=("tokens", "offsets")):
        if not swapped:
            swapped.append(1)
            write(3, 4, lengths=(2, 2, 2), overwrite=True)  # other sizes: the old manifest's sizes fail
        return real(self, parts)

    monkeypatch.setattr(Shard, "check_files", replace_once)
    st = TokenStore.open(d)
    assert swapped and len(st) == 6 and st.get(0).tolist() == [3, 3]
    # ... and when the new files have the old sizes (nothing fails): the manifest read again all the same (its
    # files had been taken under the old manifest, its fingerprint and lengths)
    swapped.clear()

    def same_sizes(self, parts=("tokens", "offsets")):
        if not swapped:
            swapped.append(1)
            write(5, 6, lengths=(1, 2, 3), overwrite=True)  # 6 ids a shard, 3 documents: the sizes of (2, 2, 2)
        return real(self, parts)

    monkeypatch.setattr(Shard, "check_files", same_sizes)
    st = TokenStore.open(d)
    assert swapped and st.lengths.tolist() == [1, 2, 3] * 2 and st.get(0).tolist() == [5]
    assert st.verify()["documents"] == 6
    monkeypatch.setattr(Shard, "check_files", real)

    # a file of the open store modified in place is not called replaced: touched, it is said modified (open it
    # again); damaged in place, verify lists it; truncated, the read says truncated
    st = TokenStore.open(d)
    tokens = d / "shard-00001.tokens"
    os.utime(tokens, ns=(tokens.stat().st_atime_ns, tokens.stat().st_mtime_ns + 10**9))
    with pytest.raises(FormatError, match="shard-00001.tokens was modified since the store was opened"):
        st.get(3)
    st = TokenStore.open(d)
    with open(tokens, "r+b") as f:
        f.write(b"\x09")
    with pytest.raises(FormatError, match="shard-00001.tokens: sha256 differs from the manifest"):
        st.verify()
    with open(tokens, "r+b") as f:
        f.truncate(4)
    with pytest.raises(FormatError, match=r"shard-00001.tokens has 4 bytes, the manifest says .* \(truncated\)"):
        st.get(3)


def test_a_sources_lengths_and_a_views_documents_cannot_be_edited_in_place(tmp_path, tok):
    """`store.lengths[0] = 100` had changed what every plan and loader made from the store afterwards read (doc 0
    100 tokens long: its row ran into the next documents, all labelled doc 0), the fingerprint unchanged; a
    split's `index` edited in place gave a validation document to the training side. Read-only now, each, and a
    view keeps its own copy of the index it was given."""
    from tokenmill import Mixture

    make_corpus(tmp_path / "in", n_files=3)
    store = build(tmp_path / "s", tmp_path / "in", tok, split_lines=True, shard_bytes=400)
    assert store.num_shards > 1
    train, val = store.split(0.25, seed=0)
    mega = TokenStore.from_megatron(store.export_megatron(tmp_path / "mega")[0].with_suffix(""))
    mixture = Mixture([(train, 1), (val, 1)], seed=0)
    for what, a in (("store", store.lengths), ("split", train.index), ("megatron", mega.lengths),
                    ("megatron offsets", mega.doc_offsets), ("mixture", mixture.lengths)):
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 100
        assert not a.flags.writeable, what
    first = store.get(int(val.index[0])).tolist()
    assert train.get(0).tolist() != first and store.lengths[0] == len(store.get(0))
    chosen = np.array([3, 1, 2])
    view = store.view(chosen, {"picked": "by hand"})
    chosen[0] = 0  # (the caller's array, changed after the view was made)
    assert view.index.tolist() == [3, 1, 2] and view.get(0).tolist() == store.get(3).tolist()


def test_a_failed_write_into_a_replacements_staging_folder_names_it(tmp_path):
    """A full disk during ``--overwrite`` left the hidden staging folder (what holds the space) unnamed: a user giving
    the replacement up had no word of it. Its error names it now; a first build's does not speak of one."""
    import errno

    from tokenmill.data.store import _write_error, staging_dir

    full = OSError(errno.ENOSPC, "No space left on device")
    stage = staging_dir(tmp_path / "st")
    said = str(_write_error(stage / "shard-00001.tokens", full))
    assert f"the new store is staged in {stage} beside the old one, which is whole" in said
    assert "staged" not in str(_write_error(tmp_path / "st" / "shard-00001.tokens", full))
