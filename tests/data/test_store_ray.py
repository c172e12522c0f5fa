"""engine="ray": the same shard jobs as Ray tasks give the same bytes as the local engine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tokenmill import TokenStore

from .conftest import make_corpus
from .test_store import store_bytes


@pytest.mark.slow
def test_ray_engine_is_byte_identical_to_local(tmp_path, tok):
    ray = pytest.importorskip("ray")
    make_corpus(tmp_path / "in", n_files=6)
    local = TokenStore.build(tmp_path / "local", tmp_path / "in", tok, split_lines=True, shard_bytes=400,
                             workers=1, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        on_ray = TokenStore.build(tmp_path / "ray", tmp_path / "in", tok, split_lines=True, shard_bytes=400,
                                  workers=2, engine="ray", progress=False)
        assert ray.is_initialized()  # the caller's Ray is left running
    finally:
        ray.shutdown()
    assert local.num_shards > 3
    assert store_bytes(tmp_path / "ray") == store_bytes(tmp_path / "local")
    assert on_ray.fingerprint == local.fingerprint
    # the command line's Ray of its own, under --quiet: no word of Ray's on stderr (its token-authentication
    # notice had come through), the same documents; a process of its own, as a user runs it (without the RAY_
    # variables the ray.init above left in this one's environment, which keep Ray from saying it)
    tok.save(tmp_path / "tok.json")
    out = subprocess.run([sys.executable, "-m", "tokenmill", "store", "build", "--tokenizer", str(tmp_path / "tok.json"),
                          "--input", str(tmp_path / "in"), "--split-lines", "--workers", "2", "--engine", "ray",
                          "--quiet", "--out", str(tmp_path / "cli")], capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if not k.startswith("RAY_")})
    assert out.returncode == 0 and out.stderr == "", out.stderr
    cli = TokenStore.open(tmp_path / "cli")
    assert [cli.get(i).tolist() for i in range(len(cli))] == [local.get(i).tolist() for i in range(len(local))]
