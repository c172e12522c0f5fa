"""Bounded work: cost follows the input, not a parameter's value."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import ConfigError, pack, train_bpe
from tokenmill.batching import _kernels


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=120), st.integers(40, 70), st.booleans())
def test_sparse_best_fit_equals_dense(lengths, capacity, sort):
    L = np.array(sorted(lengths, reverse=True) if sort else lengths, np.int64)
    dense = _kernels.best_fit(L, capacity)
    sparse = _kernels.best_fit_sparse(L, capacity)
    assert dense[1] == sparse[1] and dense[0].tolist() == sparse[0].tolist()


@pytest.mark.parametrize("block_size", [2**26, 2**40, 2**62])
def test_best_fit_with_huge_blocks_returns(block_size):
    # The dense kernel allocated 24 bytes x block_size (2**62 never returned); this finishing at all
    # (pytest-timeout) with the right plan is the test: the sparse kernel's memory follows the items.
    plan = pack([5, 3, 7], block_size)
    assert plan.num_blocks == 1 and plan.tokens == 15
    plan.validate()


def test_block_size_beyond_2_62_is_refused():
    with pytest.raises(ConfigError, match="block_size"):
        pack([5], 2**63)


def test_train_with_a_huge_vocab_stops_early_and_says_so():
    text = "the quick brown fox jumps over the lazy dog " * 40
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tok = train_bpe([text], 10**9, pattern="gpt2", progress=False)
    r = tok.train_report
    assert r.merges < 100 and r.merges_requested == 10**9 - 256 and r.stop_reason == "no_pairs"
    assert any(f"learned {r.merges:,d} of {10**9 - 256:,d} merges" in str(x.message) for x in w)


def test_catastrophic_pattern_ends_with_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0.5")
    text = "a" * 30 + "!"
    for pattern in (r"(a|a)+$",):  # 2**30 backtracking steps without the budget: it would not finish
        with pytest.raises(ConfigError, match=r"\(a\|a\)\+\$.*time budget"):
            train_bpe([text], 260, pattern=pattern, progress=False)
    from tokenmill.tokenizer.model import Tokenizer

    tok = Tokenizer.from_merges([], pattern=r"(a|a)+$")
    with pytest.raises(ConfigError, match="time budget"):
        tok.encode(text)


def test_limits_set_in_the_environment_are_checked(monkeypatch):
    """TOKENMILL_MAX_PLAN_ROWS and TOKENMILL_MAX_FILE_BYTES of 0 or -1 had been taken, and said as a fault of the
    data ("36 rows, more than the -1 allowed")."""
    from tokenmill._io import max_file_bytes
    from tokenmill._validate import max_plan_rows

    for name, read in (("TOKENMILL_MAX_PLAN_ROWS", max_plan_rows), ("TOKENMILL_MAX_FILE_BYTES", max_file_bytes)):
        for bad in ("-1", "0", "1e6", "lots"):
            monkeypatch.setenv(name, bad)
            with pytest.raises(ConfigError, match=f"{name}='{bad}' is not a whole number of .* >= 1"):
                read()
        monkeypatch.setenv(name, "123")
        assert read() == 123
        monkeypatch.delenv(name)
        assert read() > 1 << 20


def test_regex_timeout_setting_is_checked(monkeypatch):
    from tokenmill.tokenizer.pretokenize.patterns import regex_budget

    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="TOKENMILL_REGEX_TIMEOUT"):
        regex_budget(10)
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0")
    assert regex_budget(10) is None
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "inf")  # (had been an OverflowError on every custom pattern)
    assert regex_budget(10) is None
    from tokenmill import train_bpe

    assert len(train_bpe(["ab ab abc " * 5], vocab_size=258, pattern=r"\w+|\s+")) == 258


def test_devices_as_inputs_are_refused():
    from tokenmill import FormatError, InputError, Tokenizer
    from tokenmill.data.text import iter_documents

    with pytest.raises(InputError, match="not a regular file"):
        list(iter_documents(["/dev/zero"]))
    with pytest.raises(FormatError, match="not a regular file"):
        Tokenizer.load("/dev/zero")


@pytest.mark.parametrize("method", ["best_fit", "first_fit_decreasing", "greedy", "concat"])
def test_lengths_near_int64_limits_pack_exactly(method):
    # found by make fuzz: greedy compared used + length > capacity, which wrapped around at 2**63
    plan = pack([2**62], 2**62, method=method)
    plan.validate()
    assert plan.tokens == 2**62 and plan.num_blocks == 1
    plan = pack([2**61, 2**61 - 1, 1], 2**62 - 1, method=method)
    plan.validate()
    assert plan.tokens == 2**62 and plan.num_blocks == 2


# ---- bounded reads: files that must be small, documents, FIFOs -----------------------------------
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux /proc")

_PROBE = textwrap.dedent('''
    import os, resource, sys

    def cap(extra):
        """Limit the address space to what this process holds now plus ``extra`` bytes."""
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (vm + extra, vm + extra))
''')


def probe(code: str, *, timeout: float = 30, env: dict | None = None) -> str:
    """Run ``code`` in a fresh interpreter (a hang or an exhausted address space fails this test,
    not pytest); it must print "ok". Returns its stdout."""
    e = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", **(env or {}))
    r = subprocess.run([sys.executable, "-c", _PROBE + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=e)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout + r.stderr
    return r.stdout


@linux_only
def test_small_files_cost_their_size_not_the_limit(tmp_path):
    # read_bytes_limited reserved limit + 1 bytes (1 GiB) for every manifest and tokenizer file
    p = tmp_path / "manifest.json"
    p.write_text('{"a": 1}')
    probe(f"""
        from tokenmill import FormatError
        from tokenmill._io import read_bytes_limited
        from tokenmill._schema import read_json
        cap(128 << 20)
        assert read_json({str(p)!r}, what="manifest") == {{"a": 1}}
        # /proc files say 0 bytes: read past the size, up to the limit
        assert b"VmSize" in read_bytes_limited("/proc/self/status", what="status")
        try:
            read_bytes_limited("/proc/self/status", what="status", limit=16)
            raise SystemExit("no error")
        except FormatError as e:
            assert "holds more than the 16 bytes allowed" in str(e), e
        print("ok")
    """)


@linux_only
def test_fifos_and_devices_are_refused_where_a_small_file_is_read(tmp_path):
    # a FIFO was read up to the limit; without a writer, a FIFO in place of manifest.json hung
    # TokenStore.open forever
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    store = tmp_path / "store"
    store.mkdir()
    os.mkfifo(store / "manifest.json")
    probe(f"""
        from tokenmill import FormatError, TokenmillError, Tokenizer
        from tokenmill._io import read_bytes_limited
        from tokenmill._schema import read_json
        from tokenmill.data import TokenStore
        for call in (lambda: read_bytes_limited({str(fifo)!r}, what="manifest"),
                     lambda: read_json({str(fifo)!r}, what="manifest"), lambda: Tokenizer.load({str(fifo)!r})):
            try:
                call()
                raise SystemExit("no error")
            except FormatError as e:
                assert "pipe.json' is a FIFO (a pipe), not a regular file; write it to a regular file first" \\
                    in str(e), e
        try:
            read_json("/dev/zero", what="manifest")
            raise SystemExit("no error")
        except FormatError as e:
            assert "'/dev/zero' is a character device, not a regular file" in str(e), e
        try:
            TokenStore.open({str(store)!r})
            raise SystemExit("no error")
        except TokenmillError as e:
            assert "manifest.json" in str(e), e
        print("ok")
    """, timeout=30)


@linux_only
def test_huggingface_tokenizer_files_are_read_bounded(tmp_path):
    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    probe(f"""
        from tokenmill import FormatError, Tokenizer
        cap(256 << 20)
        for p in ("/dev/zero", {str(fifo)!r}):
            try:
                Tokenizer.from_huggingface(p)
                raise SystemExit("no error")
            except FormatError as e:
                assert "not a regular file" in str(e), e
        print("ok")
    """, timeout=5)


@linux_only
def test_a_long_line_is_read_in_linear_time(tmp_path):
    # the unfinished line was copied and searched again for every block: quadratic (a 400 MB line
    # took 26 s with 4 MiB blocks, 1 s now); here 48 MiB in 64 KiB blocks (768 blocks)
    p = tmp_path / "one-line.txt"
    with open(p, "wb") as f:
        for _ in range(48):
            f.write(b"a" * (1 << 20))
        f.write(b"\nb\n")
    probe(f"""
        import time
        from pathlib import Path
        import tokenmill.data.readers as R
        R._BLOCK = 1 << 16
        t = time.perf_counter()
        got = [(o, len(b)) for o, b in R._blocks(Path({str(p)!r}), b"\\n")]
        assert sum(n for _, n in got) == (48 << 20) + 3, got
        assert time.perf_counter() - t < 5, time.perf_counter() - t
        print("ok")
    """, timeout=20)


def _too_long(path, offset, line=None):
    which = f"line {line:,d}" if line is not None else r"the (document|document \(the whole file\))"
    return rf"{path.name}: {which} starting at byte offset {offset:,d} " \
           r"holds more than 1,000 bytes.*raise TOKENMILL_MAX_DOCUMENT_BYTES"


@pytest.mark.parametrize("mode", ["lines", "sep", "jsonl", "file", "gz"])
def test_documents_larger_than_the_limit_are_refused_where_they_start(tmp_path, monkeypatch, mode):
    from tokenmill import InputError
    from tokenmill.data import files
    from tokenmill.data.text import iter_documents

    monkeypatch.setenv("TOKENMILL_MAX_DOCUMENT_BYTES", "1000")
    long = "x" * 1001
    p = tmp_path / {"jsonl": "a.jsonl", "gz": "a.txt.gz"}.get(mode, "a.txt")
    body, opts, start, line = {  # (a line is named by its number too)
        "lines": ("short\n" + "y" * 1000 + "\n" + long + "\n", {"split_lines": True}, 6 + 1001, 3),
        "sep": ("short||" + "y" * 1000 + "||" + long, {"separator": "||"}, 7 + 1002, None),
        "jsonl": ('{"text": "a"}\n' + json.dumps({"text": long}) + "\n", {}, 14, 2),
        "file": (long, {}, 0, None),
        "gz": (long, {}, 0, None),
    }[mode]
    if mode == "gz":
        p.write_bytes(gzip.compress(body.encode()))
    else:
        p.write_text(body)
    import tokenmill.data.readers as R

    for block in (7, 64, 1 << 22):  # the record found inside a block, or as an unfinished one across blocks
        monkeypatch.setattr(R, "_BLOCK", block)
        with pytest.raises(InputError, match=_too_long(p, start, line)):
            list(files(p, **opts).documents())
    if mode in ("lines", "sep", "file"):  # tokenmill train's reader
        with pytest.raises(InputError, match=_too_long(p, start, line)):
            list(iter_documents([p], **opts))
    if mode != "jsonl":  # exactly the limit: read
        monkeypatch.setenv("TOKENMILL_MAX_DOCUMENT_BYTES", "1001")
        assert long in [t for t, _, _ in files(p, **opts).documents()]


@pytest.mark.parametrize("raw", ["", "0", "-5", "1e9", "12abc", " 12", "1_000", "١٢"])
def test_max_document_bytes_is_parsed_strictly(tmp_path, monkeypatch, raw):
    from tokenmill.data import files

    p = tmp_path / "a.txt"
    p.write_text("hi")
    monkeypatch.setenv("TOKENMILL_MAX_DOCUMENT_BYTES", raw)
    with pytest.raises(ConfigError, match="TOKENMILL_MAX_DOCUMENT_BYTES"):
        list(files(p).documents())


@linux_only
def test_a_compressed_stream_without_line_ends_is_refused_in_bounded_memory(tmp_path):
    # `head -c 10G /dev/zero | zstd` as a .jsonl.zst: 512 MiB of zeros, refused after the limit
    zstd = pytest.importorskip("zstandard")
    p = tmp_path / "zeros.jsonl.zst"
    with open(p, "wb") as f, zstd.ZstdCompressor(level=1).stream_writer(f) as w:
        zeros = bytes(1 << 20)
        for _ in range(512):
            w.write(zeros)
    probe(f"""
        from tokenmill import InputError
        from tokenmill.data import files
        cap(160 << 20)
        try:
            list(files({str(p)!r}).documents())
            raise SystemExit("no error")
        except InputError as e:
            assert "line 1 starting at byte offset 0 holds more than 16,777,216 bytes" in str(e), e
        print("ok")
    """, timeout=30, env={"TOKENMILL_MAX_DOCUMENT_BYTES": str(16 << 20)})


def test_overlapping_separators_split_as_str_split(tmp_path, monkeypatch):
    # "|||" with separator "||": the last occurrence (rfind) cut one byte late and lost a "|"
    import tokenmill.data.readers as R
    from tokenmill.data import files

    p = tmp_path / "a.txt"
    text = "a|||b||||c|||||d||"
    p.write_text(text)
    for block in (3, 5, 1 << 22):
        monkeypatch.setattr(R, "_BLOCK", block)
        assert [t for t, _, _ in files(p, separator="||").documents()] == text.split("||")


# ---- bounded work: worker pools follow the jobs, and die with their parent -----------------------
def _small_tokenizer():
    from tokenmill import Tokenizer

    return Tokenizer.from_merges([(116, 104), (256, 101)], pattern="gpt4", special_tokens=["<|endoftext|>"])


def test_jobs_ahead_count_only_jobs_that_run():
    """``_ordered`` keeps ``limit`` jobs in flight; a job with no texts (a shard's closing marker, never run)
    does not take a place: with one marker after each job (1 MiB shards), the worker still has the next
    jobs queued when it finishes one (counting them, a store build's one worker waited ~6 ms for its third
    job while the calling thread wrote the first shard)."""
    from tokenmill.data.engines import _ordered

    submitted = []

    def jobs():
        for k in range(6):
            yield ("job", k), [k]
            yield ("end", k), None

    def submit(texts):
        submitted.append(texts[0])
        return texts[0]

    seen = [(key, res, len(submitted)) for key, res in _ordered(jobs(), submit, lambda fut: fut, 2)]
    assert [key for key, _, _ in seen] == [(w, k) for k in range(6) for w in ("job", "end")]
    assert all(res == key[1] if key[0] == "job" else res is None for key, res, _ in seen)
    assert [n for key, _, n in seen if key[0] == "job"] == [min(6, k + 3) for k in range(6)]


@pytest.mark.parametrize("engine", ["process", "local"])
def test_pools_are_no_larger_than_the_work(monkeypatch, engine):
    import concurrent.futures as cf

    from tokenmill.data import engines

    sizes = []
    base = cf.ProcessPoolExecutor if engine == "process" else cf.ThreadPoolExecutor

    class Counted(base):
        def __init__(self, max_workers=None, *a, **kw):
            sizes.append(max_workers)
            super().__init__(max_workers, *a, **kw)

    monkeypatch.setattr(cf, base.__name__, Counted)
    tok = _small_tokenizer()
    opts = engines.EncodeOptions("uint16", tok.vocab_size, eos_id=None, bos_id=None)
    pulled = []

    def jobs(spec):
        for key, texts in spec:
            pulled.append(key)
            yield key, texts

    out = list(engines.run_jobs(jobs([("a", None), ("b", ["the there"]), ("c", None)]), tok, opts, engine=engine,
                                workers=200))
    assert sizes == [1] and [k for k, _ in out] == ["a", "b", "c"] and out[0][1] is None
    assert out[1][1][0].tolist() == tok.encode("the there")
    list(engines.run_jobs(jobs([("d", None)]), tok, opts, engine=engine, workers=200))
    assert sizes == [1]  # nothing to run: no pool
    pulled.clear()
    spec = [(k, [f"text {k}"]) for k in range(40)]
    it = engines.run_jobs(jobs(spec), tok, opts, engine=engine, workers=3)
    first = next(it)
    assert sizes == [1, 3] and first[0] == 0 and len(pulled) <= 3 * 3 + 1  # the rest read as needed
    assert [k for k, _ in [first, *it]] == list(range(40))


_KILLED_DRIVER = textwrap.dedent('''
    import json, os, signal, sys, time
    from tokenmill import Tokenizer
    from tokenmill.data import engines

    def stat(pid):
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2:].split()
        return int(fields[1]), fields[19].decode()

    def descendants(root):
        table = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    table[int(name)] = stat(name)
                except (OSError, ValueError):
                    pass
        out, todo = {}, [root]
        while todo:
            p = todo.pop()
            for q, (ppid, start) in table.items():
                if ppid == p and q not in out:
                    out[q] = start
                    todo.append(q)
        return out

    engine, workers, out, wait = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    tok = Tokenizer.from_merges([(116, 104)], pattern="gpt4", special_tokens=["<|endoftext|>"])
    opts = engines.EncodeOptions("uint16", tok.vocab_size, eos_id=None, bos_id=None)
    jobs = ((k, ["the token store"] * 10) for k in range(6))
    for key, res in engines.run_jobs(jobs, tok, opts, engine=engine, workers=workers):
        time.sleep(wait)  # Ray starts its agents in the background
        with open(out + ".tmp", "w") as f:
            json.dump(descendants(os.getpid()), f)
        os.replace(out + ".tmp", out)
        os.kill(os.getpid(), signal.SIGKILL)
''')


def _still_running(tree: dict) -> list[int]:
    out = []
    for pid, start in tree.items():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2:].split()
        if fields[0] != b"Z" and fields[19].decode() == start:  # a zombie is dead (and pid 1 may not reap it)
            out.append(int(pid))
    return out


def _kill_driver_and_check(tmp_path, engine: str, workers: int, wait: float, grace: float, timeout: float):
    out, log = tmp_path / "tree.json", tmp_path / "driver.log"
    with open(log, "wb") as f:  # a file, not a pipe: surviving workers would hold a pipe open
        r = subprocess.run([sys.executable, "-c", _KILLED_DRIVER, engine, str(workers), str(out), str(wait)],
                           stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1", RAY_USAGE_STATS_ENABLED="0"))
    assert r.returncode == -signal.SIGKILL, log.read_text(errors="replace")
    tree = json.loads(out.read_text())
    assert tree, "the driver started no process"
    end = time.monotonic() + grace
    while _still_running(tree) and time.monotonic() < end:
        time.sleep(0.1)
    left = _still_running(tree)
    for pid in left:  # clean up what the failed check left behind
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the killed driver still run: {left}"


@linux_only
def test_process_workers_die_with_their_parent(tmp_path):
    # the workers of a SIGKILLed --engine process build waited on their task queue forever
    _kill_driver_and_check(tmp_path, "process", 2, 0.0, grace=3, timeout=60)


@linux_only
@pytest.mark.slow
def test_ray_processes_started_by_tokenmill_die_with_it(tmp_path):
    # Ray's dashboard and runtime-env agents outlived a SIGKILLed driver
    pytest.importorskip("ray")
    _kill_driver_and_check(tmp_path, "ray", 1, 1.5, grace=10, timeout=120)
