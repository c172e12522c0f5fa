"""Schema-driven mutations of every file tokenmill reads: each field of a valid file (found by walking
it) gets a hostile value of another type, range, path shape, size or nesting, or is deleted; the
file is then read (opened, verified, resumed from, loaded) in the subprocess worker. The contract: a
correct result or a TokenmillError with a message, never another exception, a crash or a hang; and a
store that existed beforehand is byte-identical afterwards. ``make test`` runs a derandomized few per
file type, ``make fuzz`` thousands."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .conftest import budget, expect_ok_or_refused

NEST = [[[[[[[[[[[]]]]]]]]]]]
for _ in range(9):
    NEST = [NEST]  # 100 levels deep
MUTATIONS = st.sampled_from(["x", "", "../outside/x", "/etc/passwd", "shard-00000", "sha256:" + "0" * 64, True,
                             False, None, 1.5, -1, 0, 1, 2**31, 2**62, 2**63, 2**64, 10**40, [], {}, ["x"], NEST,
                             {"a": NEST}, "y" * 5000, "<delete>", "uint8", "int16", "float32"])


def leaf_paths(obj, prefix=()):
    """Every path into a JSON value (objects' keys, the first two items of arrays), inner ones too."""
    out = [list(prefix)] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += leaf_paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            out += leaf_paths(v, prefix + (i,))
    return out


def tok():
    from tokenmill import Tokenizer

    return Tokenizer.from_merges([(116, 104), (256, 101), (32, 256)], special_tokens=["<|endoftext|>"])


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    from tokenmill import TokenStore
    from tokenmill.data import texts

    d = tmp_path_factory.mktemp("pristine") / "st"
    TokenStore.build(d, texts([f"doc {i} the theme" for i in range(30)]), tok(), workers=1, shard_bytes=120,
                     progress=False)
    return d


@pytest.fixture(scope="module")
def manifest_paths(store_dir):
    return leaf_paths(json.loads((store_dir / "manifest.json").read_text()))


def snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@budget(60, 3000)
@given(st.data(), MUTATIONS, st.booleans())
def test_store_manifest_fields(worker, store_dir, manifest_paths, tmp_path_factory, data, mutation, rehash):
    path = data.draw(st.sampled_from(manifest_paths))
    before = snapshot(store_dir)
    work = tmp_path_factory.mktemp("mut") / "st"
    expect_ok_or_refused(worker, "open_mutated_store", str(store_dir), str(work), "manifest.json", path, mutation,
                         rehash)
    assert snapshot(store_dir) == before


KILL = """
import sys
from tokenmill import Tokenizer, TokenStore
from tokenmill.data import texts
tok = Tokenizer.load(sys.argv[1])
docs = [f"document {i} the theme " * 3 for i in range(60)]
TokenStore.build(sys.argv[2], texts(docs), tok, workers=1, shard_bytes=600, progress=False)
"""


@pytest.fixture(scope="module")
def partial_build(tmp_path_factory):
    """(a build killed after recording shard 2, an uninterrupted build of the same input)."""
    from tokenmill import TokenStore
    from tokenmill.data import texts

    root = tmp_path_factory.mktemp("partial")
    part, ref = root / "part", root / "ref"
    tok().save(f"{part}.tok.json")
    r = subprocess.run([sys.executable, "-c", KILL, f"{part}.tok.json", str(part)], capture_output=True,
                       env={**os.environ, "TOKENMILL_STORE_KILL": "recorded:2"}, timeout=300)
    assert r.returncode == -9, r.stderr.decode()
    TokenStore.build(ref, texts([f"document {i} the theme " * 3 for i in range(60)]), tok(), workers=1,
                     shard_bytes=600, progress=False)
    return part, ref


@budget(25, 1500)
@given(st.data(), MUTATIONS, st.sampled_from(["shard-00000.json", "shard-00002.json", "build.json"]))
def test_build_journal_and_shard_records(worker, partial_build, tmp_path_factory, data, mutation, name):
    part, ref = partial_build
    path = data.draw(st.sampled_from(leaf_paths(json.loads((part / name).read_text()))))
    work = tmp_path_factory.mktemp("resume") / "st"
    status, detail = expect_ok_or_refused(worker, "resume_with_mutated_record", str(part), str(ref), str(work),
                                          name, path, mutation)
    if name != "build.json":  # a damaged shard record is rebuilt, never a reason to refuse
        assert status == "ok", detail


@pytest.fixture(scope="module")
def loader_state():
    pytest.importorskip("torch")
    from tokenmill.torch import TrainingLoader

    docs = [[i % 50 + 1] * (i % 9 + 1) for i in range(40)]
    loader = TrainingLoader(docs, batch_size=2, block_size=8, seed=1)
    it = iter(loader)
    next(it)
    return loader.state_dict()


@budget(30, 2000)
@given(st.data(), MUTATIONS)
def test_loader_state_fields(worker, loader_state, data, mutation):
    path = data.draw(st.sampled_from(leaf_paths(loader_state)))
    expect_ok_or_refused(worker, "load_mutated_state", loader_state, path, mutation)


@pytest.fixture(scope="module")
def megatron_prefix(store_dir, tmp_path_factory):
    from tokenmill import TokenStore

    prefix = tmp_path_factory.mktemp("mega") / "m"
    TokenStore.open(store_dir).export_megatron(prefix)
    return prefix


@budget(30, 2000)
@given(st.sampled_from([9, 17, 18, 26, 34, 38, 42 + 30 * 4]),
       st.sampled_from([b"\xff", b"\x00", b"\x02", b"\x03", b"\x07", struct.pack("<Q", 2**63),
                        struct.pack("<Q", 2**40), struct.pack("<i", -1), struct.pack("<q", -8)]))
def test_megatron_index_fields(worker, megatron_prefix, tmp_path_factory, offset, value):
    work = tmp_path_factory.mktemp("megamut") / "m"
    expect_ok_or_refused(worker, "open_mutated_megatron", str(megatron_prefix), str(work), offset, value)
