"""Outputs: atomic writes never replace what they must not, keep modes, follow
never write through symlinks, and clean up after killed runs."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import ConfigError, FormatError, Tokenizer
from tokenmill._io import TMP_SUFFIX, atomic_path, protect_inputs, remove_stale_temporaries, write_json_atomic
from tokenmill._schema import read_json


def test_refuses_devices_fifos_directories_and_empty_paths(tmp_path):
    for bad in ("/dev/null", tmp_path, ""):
        with pytest.raises(ConfigError):
            write_json_atomic(bad, {"a": 1})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        write_json_atomic(fifo, {})
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_refuses_the_commands_own_inputs(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("precious")
    link = tmp_path / "alias.txt"
    os.link(corpus, link)
    with pytest.raises(ConfigError, match="input"):
        write_json_atomic(corpus, {}, inputs=[corpus])
    with protect_inputs([corpus]):
        with pytest.raises(ConfigError, match="input"):
            write_json_atomic(link, {})  # a hard link is the same file
    assert corpus.read_text() == "precious"
    write_json_atomic(link, {"ok": 1})  # outside the protected region: allowed


def test_keeps_mode_of_replaced_file_and_honours_umask(tmp_path):
    old = os.umask(0o027)
    try:
        new = tmp_path / "new.json"
        write_json_atomic(new, {})
        assert stat.S_IMODE(os.stat(new).st_mode) == 0o640
    finally:
        os.umask(old)
    kept = tmp_path / "kept.json"
    kept.write_text("{}")
    os.chmod(kept, 0o644)
    write_json_atomic(kept, {"v": 2})
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o644
    os.chmod(kept, 0o444)
    write_json_atomic(kept, {"v": 3})  # a read-only file is still replaced atomically, and stays 0444
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o444 and json.loads(kept.read_text()) == {"v": 3}


def test_never_writes_through_symlinks(tmp_path):
    # a link to a file elsewhere (a store's manifest, say) must not get that file replaced
    real = tmp_path / "data" / "manifest.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "plot.png"
    link.symlink_to(real)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_json_atomic(link, {"v": 1})
    dangling = tmp_path / "new.json"
    dangling.symlink_to(tmp_path / "nowhere" / "x.json")
    with pytest.raises(ConfigError, match="symbolic link"):
        write_json_atomic(dangling, {"v": 1})
    assert link.is_symlink() and real.read_text() == "{}" and not (tmp_path / "nowhere").exists()


def test_stale_temporaries_of_killed_runs_are_removed(tmp_path):
    target = tmp_path / "tok.json"
    code = textwrap.dedent(f"""
        import os, signal
        from tokenmill._io import atomic_path
        with atomic_path({str(target)!r}) as tmp:
            tmp.write_text("partial")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert r.returncode == -signal.SIGKILL
    left = list(tmp_path.glob(f"*{TMP_SUFFIX}"))
    assert len(left) == 1 and not target.exists()
    write_json_atomic(target, {"v": 1})  # the next write to the same target removes the leftover
    assert list(tmp_path.glob(f"*{TMP_SUFFIX}")) == [] and json.loads(target.read_text()) == {"v": 1}
    with atomic_path(tmp_path / "other.json") as tmp:  # a live process's temporary is kept
        tmp.write_text("x")
        assert remove_stale_temporaries(tmp_path) == 0 and tmp.exists()


def test_a_long_legal_name_is_written_and_its_leftovers_found(tmp_path):
    """A name of ~220 bytes is legal, but its temporary (~75 bytes more) was not: the write failed after the
    work, naming the hidden temporary. Such a name's temporaries are spelled shorter, and still found as its."""
    target = tmp_path / ("t" * 225 + ".json")
    write_json_atomic(target, {"v": 1})
    assert json.loads(target.read_text()) == {"v": 1}
    code = textwrap.dedent(f"""
        import os, signal
        from tokenmill._io import atomic_path
        with atomic_path({str(target)!r}) as tmp:
            tmp.write_text("partial")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(f"*{TMP_SUFFIX}"))) == 1
    write_json_atomic(target, {"v": 2})  # the leftover of this target removed, as for any name
    assert list(tmp_path.glob(f"*{TMP_SUFFIX}")) == [] and json.loads(target.read_text()) == {"v": 2}


def test_a_folder_that_cannot_be_written_is_said_before_the_work(tmp_path, monkeypatch):
    """A read-only folder (or file system) was found at the rename, after the work, the error naming the
    temporary. (The folder's state is what ``os.access`` says: root passes mode bits, so it stands in here.)"""
    import tokenmill._io as io
    from tokenmill._io import resolve_output

    (tmp_path / "ro").mkdir()
    access = os.access
    monkeypatch.setattr(io.os, "access", lambda p, mode: False if str(p).endswith("ro") else access(p, mode))
    with pytest.raises(ConfigError, match="the folder .*ro' is not writable .*read-only file system"):
        resolve_output(tmp_path / "ro" / "x.json")
    assert resolve_output(tmp_path / "x.json") == tmp_path / "x.json"


def test_store_build_demo_and_nested_outputs_say_an_unwritable_folder_before_the_work(tmp_path, monkeypatch,
                                                                                      capsys):
    """``store build`` and ``demo`` into a folder that cannot be written gave the OS's words ("cannot access
    '...': Permission denied"), the demo's after reading its corpus; a file output under missing folders was not
    checked at all. Each now names the output and the folder, before the work. A complete store in a read-only
    folder still opens (a build of it writes nothing)."""
    import tokenmill._io as io
    from tokenmill._io import resolve_output
    from tokenmill.cli import main
    from tokenmill.data import texts
    from tokenmill.data.store import build

    ro = tmp_path / "ro"
    ro.mkdir()
    tok = tmp_path / "tok.json"
    Tokenizer.from_merges([(104, 105)], pattern="gpt4", special_tokens=["<|endoftext|>"]).save(tok)
    done = build(ro / "done", texts(["hi there", "again"]), tok, workers=1, progress=False)
    access = os.access
    monkeypatch.setattr(io.os, "access", lambda p, mode: False if Path(p).parts[-1:] in (("ro",), ("done",))
                        else access(p, mode))
    for out in (ro / "store", ro / "a" / "b" / "store"):
        with pytest.raises(ConfigError, match=f"cannot write the store '{out}': the folder '{ro}' is not writable"):
            build(out, texts(["hi"]), tok, workers=1, progress=False)
        assert not (ro / "store").exists() and not (ro / "a").exists()
    assert build(ro / "done", texts(["hi there", "again"]), tok, workers=1, progress=False).num_tokens == \
        done.num_tokens  # (built: nothing to write)
    with pytest.raises(ConfigError, match=f"cannot write the store .*'{tok}' is not a directory"):
        build(tok / "store", texts(["hi"]), tok, workers=1, progress=False)
    assert main(["demo", "--quick", "--no-plots", "-q", "--out", str(ro / "demo")]) == 1
    assert f"cannot write --out '{ro / 'demo'}': the folder '{ro}' is not writable" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=f"the folder '{ro}' is not writable"):
        resolve_output(ro / "x" / "y" / "out.json")  # (the folders a write would make, under ro)
    with pytest.raises(ConfigError, match=f"(?i)'{tok}/x/out.json': not a directory"):
        resolve_output(tok / "x" / "out.json")


def test_failure_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "tok.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("new")
            raise RuntimeError("boom")
    assert target.read_text() == "old" and list(tmp_path.glob(f"*{TMP_SUFFIX}")) == []


def _record_syncs(monkeypatch):
    """Log fsync calls (by what the descriptor names) and renames, in order."""
    log = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        log.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        log.append(("rename", os.fspath(b)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return log


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names file descriptors through /proc (Linux)")
def test_files_reach_the_disk_before_their_rename(tmp_path, monkeypatch):
    """A power loss after the rename must find the new data under the name, not an empty file: the
    temporary's data is flushed before the rename, the folder (holding the new name) after it. Streamed
    files (store shards) the same; caches are not flushed (they are checked on read and may be lost)."""
    from tokenmill._io import StreamedFile, write_bytes_atomic, write_cache

    log = _record_syncs(monkeypatch)
    target = tmp_path / "a.bin"
    write_bytes_atomic(target, b"new data")
    assert [k for k, _ in log] == ["fsync", "rename", "fsync"]
    assert log[0][1].endswith(TMP_SUFFIX) and log[1][1] == str(target) and log[2][1] == str(tmp_path)
    assert target.read_bytes() == b"new data"
    log.clear()
    f = StreamedFile(tmp_path / "s.bin")
    f.write(b"xyz")
    assert log == []
    f.close()
    assert [k for k, _ in log] == ["fsync", "rename", "fsync"] and log[2][1] == str(tmp_path)
    log.clear()
    assert write_cache(tmp_path / "c.npy", lambda fh: fh.write(b"c"))
    assert [k for k, _ in log] == ["rename"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names file descriptors through /proc (Linux)")
def test_later_flush_waits_for_files_then_folders_and_reports_errors(tmp_path, monkeypatch):
    import errno

    from tokenmill._io import LaterFlush, write_bytes_atomic

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"1")
    log = _record_syncs(monkeypatch)
    lf = LaterFlush()
    lf.add(tmp_path / "d" / "a")
    lf.wait()
    assert log == [("fsync", str(tmp_path / "d" / "a")), ("fsync", str(tmp_path / "d"))]
    lf.wait()  # nothing left: nothing done
    assert len(log) == 2

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    lf.add(tmp_path / "d" / "a")
    with pytest.raises(OSError, match="Input/output"):
        lf.wait()
    with pytest.raises(OSError, match="Input/output"):
        write_bytes_atomic(tmp_path / "d" / "b", b"x")  # a file that cannot be flushed is not renamed in
    assert not (tmp_path / "d" / "b").exists() and os.listdir(tmp_path / "d") == ["a"]


def test_streamed_file_appears_whole_or_not_at_all(tmp_path):
    """``StreamedFile``: pieces written over time to a temporary (hashed as written), renamed into place by
    ``close``; ``abort`` leaves the previous file and no temporary; the same target checks as atomic_path."""
    import hashlib

    import numpy as np

    from tokenmill._io import StreamedFile

    target = tmp_path / "t.bin"
    target.write_bytes(b"old")
    pieces = [b"abc", np.arange(5, dtype=np.uint16), b"", np.zeros(0, np.uint32), bytearray(b"xyz")]
    want = b"".join(bytes(memoryview(x).cast("B")) for x in pieces)
    f = StreamedFile(target)
    for x in pieces:
        f.write(x)
        assert target.read_bytes() == b"old"  # nothing visible until closed
    assert f.close() == (len(want), "sha256:" + hashlib.sha256(want).hexdigest())
    assert target.read_bytes() == want and os.listdir(tmp_path) == ["t.bin"]
    f.abort()  # after close: nothing to undo
    assert target.read_bytes() == want
    g = StreamedFile(target)
    g.write(b"partial")
    g.abort()
    g.abort()
    assert target.read_bytes() == want and os.listdir(tmp_path) == ["t.bin"]
    with pytest.raises(ConfigError):
        StreamedFile(tmp_path)  # a directory


def test_read_json_bounds_size_devices_and_nesting(tmp_path, monkeypatch):
    with pytest.raises(FormatError, match="not a regular file"):
        read_json("/dev/zero", what="tokenizer")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match="deep"):
        read_json(deep, what="tokenizer")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * 5000}))
    monkeypatch.setenv("TOKENMILL_MAX_FILE_BYTES", "1000")
    with pytest.raises(FormatError, match="TOKENMILL_MAX_FILE_BYTES"):
        read_json(big, what="tokenizer")
    huge = tmp_path / "huge.json"
    huge.write_text("[" + "9" * 5000 + "]")
    monkeypatch.setenv("TOKENMILL_MAX_FILE_BYTES", "100000")
    with pytest.raises(FormatError):
        read_json(huge, what="tokenizer")
    with pytest.raises(FormatError, match="directory"):
        read_json(tmp_path, what="tokenizer")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_json_files_are_written_as_json_writes_them(obj):
    """Every JSON file tokenmill writes (manifests, records, tokenizer files) is ``json.dumps(obj,
    ensure_ascii=False, indent=1)`` to the byte, made by json's C encoder and msgspec's indenting."""
    from tokenmill._io import json_text

    assert json_text(obj) == json.dumps(obj, ensure_ascii=False, indent=1)
    assert json_text([obj, float("nan")]) == json.dumps([obj, float("nan")], ensure_ascii=False, indent=1)


def test_a_cache_entry_that_is_a_fifo_reads_as_missing_never_waits(tmp_path):
    """A FIFO left in place of a conversion-cache file: ``np.load`` had waited for a writer forever (every
    tokenizer load through the cache hung); it reads as a missing entry, and the cache is rebuilt."""
    import threading

    import numpy as np

    from tokenmill._io import read_cache_arrays, write_cache_arrays

    good = tmp_path / "entry.npz"
    assert write_cache_arrays(good, {"a": np.arange(3)})
    assert read_cache_arrays(good, ["a"])["a"].tolist() == [0, 1, 2]
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)
    out: list = []
    t = threading.Thread(target=lambda: out.append(read_cache_arrays(fifo, ["a"])), daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive() and out == [None]
    assert read_cache_arrays(tmp_path, ["a"]) is None  # (a folder: missing too)
