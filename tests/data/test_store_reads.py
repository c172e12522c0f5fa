"""Reading a store: what each read checks, and what it costs (no path resolved per document).

A read checks the files it reads through their memory maps (the size of the very file mapped), so a
shard truncated under an open store is still a FormatError, never SIGBUS, while a store moved, or
built again over, keeps reading the files it opened; a file replaced at its path before it was mapped
is refused, never mixed with the others.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from tokenmill import TokenStore, pack
from tokenmill.errors import ConfigError, FormatError


def _store(path, lengths=((3, 0, 5, 2), (), (4, 1, 0, 6, 2)), seed=0) -> TokenStore:
    """A store of several shards (one without documents), empty documents included."""
    rng = np.random.default_rng(seed)
    shards = [(np.array(ls, np.int64), rng.integers(0, 1000, int(sum(ls)))) for ls in lengths]
    return TokenStore.from_token_arrays(path, shards, vocab_size=1000)


def test_iteration_and_views_read_what_get_reads_with_no_path_resolved_per_document(tmp_path, monkeypatch):
    """``get``, ``store[i]``, iteration (also reversed, of a view, of a slice) and ``provenance`` made two
    ``os.stat`` calls of a path built by pathlib per document (13 us a document on 500K documents, 4.5x
    megatron's reader): the files are now checked through their kept memory maps."""
    st = _store(tmp_path / "s")
    want = [st.get(i).tolist() for i in range(len(st))]
    want_prov = [st.provenance(i) for i in range(len(st))]
    view = st.view(np.array([8, 0, 4, 4, 7]), {"picked": "by hand"})
    calls = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: calls.append(a[0]) or real_stat(*a, **k))
    for _ in range(3):
        assert [st.get(i).tolist() for i in range(len(st))] == want
        assert [st[i].tolist() for i in range(-len(st), 0)] == want
        assert [d.tolist() for d in st] == want and [d.tolist() for d in reversed(st)] == want[::-1]
        assert [d.tolist() for d in view] == [want[i] for i in (8, 0, 4, 4, 7)]
        assert [d.tolist() for d in reversed(view)] == [want[i] for i in (7, 4, 4, 0, 8)]
        assert [d.tolist() for d in st[::-2]] == want[::-2]
        assert [st.provenance(i) for i in range(len(st))] == want_prov
    assert calls == []
    with pytest.raises(ConfigError, match=f"index entry 1 is {len(st)}; index must be in 0 .."):  # (when made)
        st.view(np.array([0, len(st)]), {"picked": "past the end"})


_TRUNCATE = """
import os, sys
import numpy as np
from tokenmill import TokenStore, pack
from tokenmill.errors import FormatError
st = TokenStore.open(sys.argv[1])
docs = [st.get(i).tolist() for i in range(len(st))]
first = st.provenance(0)
plan = pack(st.lengths, 8)
ids = [b.input_ids.tolist() for b in plan.batches(st, batch_size=2, pad_id=0)]
moved = sys.argv[1] + "-moved"
os.rename(sys.argv[1], moved)  # the paths are gone: what was mapped is still read, and checked
print("moved", [st[i].tolist() for i in range(len(st))] == docs, [d.tolist() for d in st] == docs,
      st.provenance(0) == first, [b.input_ids.tolist() for b in plan.batches(st, batch_size=2, pad_id=0)] == ids)
os.truncate(os.path.join(moved, "shard-00000.tokens"), 2)
os.truncate(os.path.join(moved, "shard-00000.meta"), 8)
for read in (lambda: st.get(0).sum(), lambda: st[1].sum(), lambda: next(iter(st)).sum(),
             lambda: [d.sum() for d in st[::-1]], lambda: st.provenance(1),
             lambda: [b.input_ids.sum() for b in plan.batches(st, batch_size=2, pad_id=0)]):
    try:
        read()
        print("no error")
    except FormatError as e:
        print("FormatError", "truncated" in str(e))
"""


def test_a_shard_truncated_under_an_open_store_is_an_error_for_every_read_also_after_a_move(tmp_path):
    """Checked through the maps: a store moved after it was read (its paths gone) kept raising "missing" on
    every read, though its maps were intact; the files truncated after the move are still a FormatError
    (in a child process: a read the check missed would be SIGBUS)."""
    _store(tmp_path / "s")
    r = subprocess.run([sys.executable, "-c", _TRUNCATE, str(tmp_path / "s")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0] == "moved True True True True"
    assert lines[1:7] == ["FormatError True"] * 6


def test_a_store_built_again_under_an_open_store_keeps_reading_the_files_it_read(tmp_path):
    """A shard file replaced at its path (a store built again over the open one) after the open store had
    read it made every later read of that shard a FormatError (its path now named a file of another
    size), though the file read was still mapped; the store now keeps reading, and checking, that file:
    ``get``, iteration and batches (the flat view of all shards is made of the files the shards mapped:
    here, one no longer at its path, the batches copy shard by shard instead, the same batches)."""
    st = _store(tmp_path / "s")
    want = [d.tolist() for d in st]
    plan = pack(st.lengths, 8)
    batches = [b.input_ids.tolist() for b in plan.batches(_store(tmp_path / "same"), batch_size=2, pad_id=0)]
    path = tmp_path / "s" / "shard-00002.tokens"
    other = tmp_path / "other"
    other.write_bytes(bytes(b ^ 1 for b in path.read_bytes()) + b"\0\0")
    os.replace(other, path)
    assert [st.get(i).tolist() for i in range(len(st))] == want and [d.tolist() for d in st] == want
    assert [b.input_ids.tolist() for b in plan.batches(st, batch_size=2, pad_id=0)] == batches
    with pytest.raises(FormatError, match=r"shard-00002.tokens has .* bytes, the manifest says .* \(too long\)"):
        TokenStore.open(tmp_path / "s")


def test_a_store_read_from_pickles_without_its_data(tmp_path):
    """A store pickled (spawned loader workers) after it was read carried its mapped ids (its whole
    flat view after a batch); the maps are now made again where it is unpickled."""
    lengths = [[500] * 40, [300] * 40]
    st = _store(tmp_path / "s", lengths)
    plan = pack(st.lengths, 64)
    want = [b.input_ids.tolist() for b in plan.batches(st, batch_size=4, pad_id=0)]
    docs = [d.tolist() for d in st]
    st.provenance(0)
    blob = pickle.dumps(st)
    assert len(blob) < st.num_tokens * st.dtype.itemsize // 4
    clone = pickle.loads(blob)
    assert [d.tolist() for d in clone] == docs and clone.provenance(0) == st.provenance(0)
    assert [b.input_ids.tolist() for b in plan.batches(clone, batch_size=4, pad_id=0)] == want


_FD_SCRIPT = """
import resource, sys
import numpy as np
from tokenmill import TokenStore
from tokenmill.errors import ConfigError
soft, hard = int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
st = TokenStore.open(sys.argv[1])
try:
    n = sum(int(d.sum()) for d in st)
    print("read", n, st.provenance(len(st) - 1)[2], resource.getrlimit(resource.RLIMIT_NOFILE)[0])
except ConfigError as e:
    print("refused", e)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX limits of open files")
def test_a_store_of_more_shards_than_the_open_file_limit_reads(tmp_path):
    """Each shard a store has read keeps its mapped files open: under the usual soft limit of open files
    (1,024) a store of ~500 shards stopped at its first pass ("Too many open files", a bare OSError). The
    soft limit is raised towards the hard one; past the hard one the error says what to do."""
    shards = ((np.full(2, 1), np.full(2, k % 7)) for k in range(300))
    TokenStore.from_token_arrays(tmp_path / "s", shards, vocab_size=10)
    want = sum(2 * (k % 7) for k in range(300))

    def run(soft, hard):
        r = subprocess.run([sys.executable, "-c", _FD_SCRIPT, str(tmp_path / "s"), str(soft), str(hard)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    out = run(256, 4096).split()
    assert out[:2] == ["read", str(want)] and int(out[3]) >= 3 * 300
    out = run(256, 256)
    assert out.startswith("refused") and "ulimit -n" in out and "shard_bytes" in out


_MID_ITERATION = """
import os, sys, numpy as np, tokenmill as tm
from tokenmill.errors import FormatError
from tokenmill.torch import TrainingLoader
d = sys.argv[1]
def store(name):
    return tm.TokenStore.from_token_arrays(os.path.join(d, name), [(np.full(50, 20), np.arange(1000) % 7)], vocab_size=10)
def mega(name):
    st = store(name + "-src")
    st.export_megatron(os.path.join(d, name))
    return tm.TokenStore.from_megatron(os.path.join(d, name)), os.path.join(d, name + ".bin")
cases = []
for threads in (1, 2):
    st = store(f"s{threads}")
    cases.append((f"store {threads}", lambda st=st, t=threads: iter(tm.pack(st, 64).batches(st, batch_size=1, pad_id=0,
                                                                                           num_threads=t)),
                  os.path.join(d, f"s{threads}", "shard-00000.tokens")))
    src, path = mega(f"m{threads}")
    cases.append((f"megatron {threads}", lambda src=src, t=threads: iter(tm.pack(src, 64).batches(
        src, batch_size=1, pad_id=0, num_threads=t)), path))
src, path = mega("ml")
cases.append(("megatron loader", lambda src=src: iter(TrainingLoader(src, batch_size=1, block_size=64, shuffle=False)),
              path))
src, path = mega("mw")
windows = tm.SlidingWindows(24, 12).plan(src.lengths)
from tokenmill.batching import SliceSource
sl = SliceSource.from_windows(windows, src)
cases.append(("megatron windows", lambda sl=sl: iter(tm.pack(sl, 64).batches(sl, batch_size=1, pad_id=0)), path))
for name, make, path in cases:
    it = make()
    next(it)
    os.truncate(path, 100)
    try:
        while True:
            next(it)
        print(name, "no error")
    except StopIteration:
        print(name, "no error")
    except FormatError:
        print(name, "FormatError")
"""


def test_a_file_truncated_mid_iteration_is_an_error_for_the_next_batch(tmp_path):
    """A store shard or a Megatron .bin truncated while batches were read from its memory map: checked once a
    chunk of ~8,000 blocks (or, for a Megatron file, once), the next batch read past the file's end (SIGBUS),
    or zeros where a part was left. Now every batch checks (in a child process: a read the check missed would
    be SIGBUS)."""
    r = subprocess.run([sys.executable, "-c", _MID_ITERATION, str(tmp_path)], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "TOKENMILL_PYTHON_FIRST": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:-1] == [f"{name} FormatError" for name in (
        "store 1", "megatron 1", "store 2", "megatron 2", "megatron loader", "megatron windows")]
