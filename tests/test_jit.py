"""The kernel loader: first-run notice, compile seconds kept apart, and `tokenmill warmup`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import numpy as np, tokenmill\n"
         "from tokenmill import _jit\n"
         "from tokenmill.batching import _kernels as K\n"
         "before = _jit.is_cached(K.best_fit)\n"
         "tokenmill.pack([3, 2, 4], 5)\n"
         "print(before, _jit.is_cached(K.best_fit), round(_jit.compile_seconds(), 3))\n")


def _run(code: str, cache: str, **env):
    # the twins of small first runs off: these probes are about compiling
    e = dict(os.environ, NUMBA_CACHE_DIR=cache, TOKENMILL_PYTHON_FIRST="0", **env)
    e.pop("TOKENMILL_QUIET", None)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, check=True)


@pytest.mark.slow
def test_first_run_says_it_compiles_and_later_runs_load_from_cache(tmp_path):
    cold = _run(PROBE, str(tmp_path))
    before, after, seconds = cold.stdout.split()
    assert before == "False" and after == "True" and float(seconds) > 0
    assert "compiling kernels (first run only" in cold.stderr
    warm = _run(PROBE, str(tmp_path))
    assert warm.stdout.split() == ["True", "True", "0.0"]
    assert "compiling" not in warm.stderr
    quiet = _run(PROBE.replace("tokenmill.pack([3, 2, 4], 5)", "tokenmill.pack([3, 2, 4], 5, method='greedy')"),
                 str(tmp_path / "other"), TOKENMILL_QUIET="1")
    assert "compiling" not in quiet.stderr
    # the command line's --quiet says nothing either (it set no TOKENMILL_QUIET: every command printed it)
    cli = "from tokenmill.cli import main; raise SystemExit(main(['pack', '--lognormal', '50', '--block-size', '64', {}]))"
    loud = _run(cli.format("'--json'"), str(tmp_path / "cli"))
    assert "compiling kernels" in loud.stderr
    hushed = _run(cli.format("'--quiet'"), str(tmp_path / "cli2"))
    assert "compiling" not in hushed.stderr and "PackPlan(best_fit" in hushed.stdout


def test_the_custom_pattern_job_warms_the_compiled_splitter():
    """The warm-up job named for custom patterns called ``split_text``, which runs the ``regex`` module: it
    compiled nothing, and a tokenizer with a pattern of its own compiled the general splitter (~13 s) on its
    first encode after `tokenmill warmup`. The job now reaches that kernel (loaded from the suite's cache)."""
    from tokenmill import _jit

    code = (_jit.JOBS["split custom patterns (general DFA / VM)"] +
            "\nfrom tokenmill.tokenizer.pretokenize._regex_vm import split\nprint(len(split.signatures))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TOKENMILL_PYTHON_FIRST="0"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.split()[-1] != "0", out.stderr


def test_compile_time_is_kept_out_of_progress_bars():
    """A bar running while a kernel compiles has its clock moved past the compile."""
    from numba.core import event
    from tqdm import tqdm

    from tokenmill import _jit

    _jit._listen()
    bar = tqdm(total=10, file=open(os.devnull, "w"))
    start = bar.start_t

    class Disp:  # what the compile event carries
        class py_func:
            __module__ = "tokenmill.fake"

    ev = event.Event("numba:compile", event.EventStatus.START, data={"dispatcher": Disp})
    event.broadcast(ev)
    import time

    time.sleep(0.05)
    event.broadcast(event.Event("numba:compile", event.EventStatus.END, data={"dispatcher": Disp}))
    assert bar.start_t - start >= 0.05
    bar.close()


def test_warmup_cli_json_lists_every_family(monkeypatch):
    """`tokenmill warmup --json` runs every job (fast here: the suite's caches are warm)."""
    from tokenmill import _jit
    from tokenmill.cli import main

    ran = []
    monkeypatch.setattr(_jit, "_run", lambda n, c, env: ran.append(n) or _jit.JobResult(n, 0.1, True))
    assert main(["warmup", "--json", "--quiet", "--jobs", "2"]) == 0
    assert ran == list(_jit.JOBS)


def test_warmup_jobs_are_valid_python_that_runs():
    """Each job's code compiles as Python (the jobs themselves run in `make test`'s warm-up step)."""
    from tokenmill import _jit

    for name, code in _jit.JOBS.items():
        compile(code, name, "exec")


def test_the_encode_job_reaches_the_compiled_list_builder(monkeypatch):
    """The warm-up's lists-out line encoded a few ids, which ``tolist`` takes (up to 3,072): the compiled
    list builder (``_cpython._build``) was left to compile on a user's first large encode."""
    from tokenmill import _jit
    from tokenmill.tokenizer import _cpython

    calls = []
    real = _cpython._build
    monkeypatch.setattr(_cpython, "_build", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")  # (as warmup runs its jobs: the kernels, not the twins)
    code = next(c for n, c in _jit.JOBS.items() if n.startswith("encode"))
    exec(compile(code, "encode job", "exec"), {})
    assert calls


def test_refcount_free_kernels_make_no_reference_counting_calls():
    """``njit(refcount=False)``: the loop binds an array anew in every pass (an inlined helper's
    argument), which with reference counting costs two NRT calls per pass; without, none."""
    import numpy as np

    from tokenmill._jit import njit

    def build(refcount: bool):
        @njit(inline="always", refcount=refcount)
        def char_at(data, i, end):  # (length, code point) of a 1- or 3-byte UTF-8 character
            b0 = np.int64(data[i])
            if b0 < 0x80:
                return 1, b0
            if end - i >= 3 and (b0 & 0xF0) == 0xE0:
                b1 = np.int64(data[i + 1])
                b2 = np.int64(data[i + 2])
                if (b1 & 0xC0) == 0x80 and (b2 & 0xC0) == 0x80:
                    return 3, ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
            return 1, np.int64(0xFFFD)

        @njit(refcount=refcount)
        def total(data):
            s = 0
            i = 0
            while i < data.size:
                n, cp = char_at(data, i, data.size)
                s += cp
                i += n
            return s

        return total

    data = np.frombuffer("a中b文".encode() * 10, np.uint8)
    counted, free = build(True), build(False)
    assert counted(data) == free(data) == sum(map(ord, "a中b文" * 10))
    nrt = [f.inspect_asm(f.signatures[0]).count("NRT_incref") for f in (counted, free)]
    assert nrt[0] > 0 and nrt[1] == 0, nrt


def test_kernel_caches_are_keyed_on_every_kernel_module(tmp_path):
    """A kernel's disk cache is invalid once any kernel module changes, not only its own file: a kernel
    holds the code of the helpers it inlines from other modules (numba alone would load it stale)."""
    from tokenmill import _jit
    from tokenmill.tokenizer.pretokenize import _family_kernels

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a_kernels.py").write_text("@njit(cache=True)\ndef f(x):\n    return x\n")
    (pkg / "sub" / "_wide.py").write_text("@intrinsic\ndef g(typingctx, x):\n    pass\n")
    (pkg / "cli.py").write_text("print('not a kernel module')\n")
    first = _jit._digest(str(pkg.resolve()))
    _jit._digest.cache_clear()
    (pkg / "cli.py").write_text("print('edited, still not a kernel module')\n")
    assert _jit._digest(str(pkg.resolve())) == first
    _jit._digest.cache_clear()
    (pkg / "sub" / "_wide.py").write_text("@intrinsic\ndef g(typingctx, x):\n    pass  # edited\n")
    assert _jit._digest(str(pkg.resolve())) != first
    # tokenmill's own kernels carry the digest in their cache's source stamp
    loc = _family_kernels.split_family_k3._cache._impl._locator
    assert type(loc).__name__.startswith("Kernel")
    assert loc.get_source_stamp()[1] == _jit.kernel_sources_digest()


@pytest.mark.slow
def test_a_damaged_kernel_cache_is_compiled_again_not_a_crash(tmp_path):
    """An emptied or cut index or data file of a kernel's cache (a power loss; the cache is numba's pickle
    format) raised numba's unpickling error at the kernel's first call, on every run: now a miss, compiled
    again and saved over the damaged file."""
    _run(PROBE, str(tmp_path))
    files = sorted(p for p in tmp_path.rglob("*best_fit*") if p.suffix in (".nbi", ".nbc"))
    assert {p.suffix for p in files} == {".nbi", ".nbc"}
    for damage in (lambda b: b"", lambda b: b[: len(b) // 2]):
        for p in files:
            p.write_bytes(damage(p.read_bytes()))
        run = _run(PROBE, str(tmp_path))
        assert run.stdout.split()[1] == "True" and float(run.stdout.split()[2]) > 0  # compiled again
        assert _run(PROBE, str(tmp_path)).stdout.split() == ["True", "True", "0.0"]  # and saved: a hit


def test_exact_overload_is_the_machine_code_for_exactly_those_types():
    """``exact_overload`` finds the compiled code for exactly the argument types of a call already made
    (and gives the same result as the dispatcher), and None for types nothing was compiled for: it never
    compiles, and never hands out code compiled for other types."""
    import numpy as np

    from tokenmill._jit import exact_overload, njit

    @njit(cache=False)
    def total(a, k):
        return a.sum() + k

    ints = np.arange(5, dtype=np.int64)
    assert exact_overload(total, (ints, 2)) is None  # nothing compiled yet
    assert total(ints, 2) == 12
    call = exact_overload(total, (ints, 2))
    assert call is not None and call is not total and call(ints, 7) == total(ints, 7) == 17
    assert exact_overload(total, (ints.astype(np.float64), 2)) is None  # another dtype
    assert exact_overload(total, (ints[::2], 2)) is None  # another layout
    assert exact_overload(total, (ints, 2.0)) is None
    ro = ints.copy()
    ro.flags.writeable = False
    assert exact_overload(total, (ro, 2)) is None  # read-only is another type


def test_a_fork_waits_while_another_thread_holds_numbas_compiler_lock():
    """A child forked while another thread compiled (or loaded a kernel from the cache) inherited numba's
    compiler lock held by a thread it does not have, and hung at its first kernel: the fork now waits for
    the lock, and the child can take it."""
    import threading
    import time

    from numba.core.compiler_lock import global_compiler_lock

    from tokenmill import _jit

    _jit._listen()  # (what every kernel module's njit does first: installs the fork handler once)
    held, release = threading.Event(), threading.Event()

    def hold():
        with global_compiler_lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait()
    threading.Timer(0.5, release.set).start()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: the lock is free for it (it waited forever before)
        os._exit(0 if global_compiler_lock._lock.acquire(timeout=5) else 1)
    waited = time.monotonic() - t0
    _, status = os.waitpid(pid, 0)
    t.join()
    assert os.waitstatus_to_exitcode(status) == 0 and waited >= 0.4


# A kernel with helpers inlined into helpers (``inline="always"``, as the splitters' and encoders' are), loops and
# branches: numba copies each helper's IR at every call it inlines.
_INLINED = '''
import hashlib, json, sys
import numpy as np
from tokenmill._jit import njit

@njit(inline="always")
def cls(b):
    return 0 if b < 48 else (1 if b < 58 else (2 if b < 97 else 3))

@njit(inline="always")
def run_end(data, i, c):
    j = i + 1
    while j < data.size and cls(data[j]) == c:
        j += 1
    return j

@njit(inline="always")
def runs(data, out):
    i = k = 0
    while i < data.size:
        j = run_end(data, i, cls(data[i]))
        out[k] = j
        k += 1
        i = j
    return k

@njit
def kernel(data):
    out = np.empty(data.size, np.int64)
    k = runs(data, out)
    n = runs(data[::-1], out[k:])
    return out[:k + n].copy()

data = np.frombuffer(b"abc  12 xyz..9", np.uint8)
got = kernel(data).tolist()
from numba.core import inline_closurecall
print(json.dumps({"ids": got, "asm": hashlib.sha256(kernel.inspect_asm(kernel.signatures[0]).encode()).hexdigest(),
                  "patched": type(inline_closurecall.copy).__name__}))
'''


def test_inlined_helpers_compile_to_the_same_machine_code_with_one_memo_per_copy(tmp_path):
    """tokenmill's inliner copies (one memo per function copy, ``_jit._one_memo_per_inlined_copy``) give the
    very assembly numba's own per-block copies give, and the same results; ``TOKENMILL_NUMBA_INLINE_COPY=numba``
    leaves numba's inliner as it is."""
    import json

    # (one hash seed: numba names a constant byte string of the code after its Python hash)
    ours = json.loads(_run(_INLINED, str(tmp_path / "a"), PYTHONHASHSEED="0").stdout)
    theirs = json.loads(_run(_INLINED, str(tmp_path / "b"), PYTHONHASHSEED="0", TOKENMILL_NUMBA_INLINE_COPY="numba").stdout)
    assert ours["patched"] == "_InlineCopier" and theirs["patched"] == "module"
    assert ours["ids"] == theirs["ids"] == [3, 5, 7, 8, 11, 13, 14, 1, 3, 6, 7, 9, 11, 14]
    assert ours["asm"] == theirs["asm"]


def test_one_memo_per_copy_shares_the_scope_and_never_an_earlier_copy():
    """Copied as numba's inliner copies a function (block by block): every copied block refers to one new scope
    and one copy of each variable (numba's own per-block memos gave each block a copy of the whole scope); a
    second copy of the same function, or a copy of the copy, shares nothing with the first."""
    import copy

    from numba.core import ir
    from numba.core.compiler import run_frontend

    from tokenmill._jit import _InlineCopier

    def f(n):
        s = 0
        for i in range(n):
            if i % 3:
                s += i
        return s

    func_ir = run_frontend(f)
    assert len(func_ir.blocks) > 3
    copier = _InlineCopier(copy)

    def copy_blocks(blocks):
        return {label: copier.deepcopy(block) for label, block in blocks.items()}

    def variables(blocks):
        return {a.target.name: a.target for b in blocks.values() for a in b.find_insts(ir.Assign)}

    first, second = copy_blocks(func_ir.blocks), copy_blocks(func_ir.blocks)
    for blocks in (first, second):
        assert len({id(b.scope) for b in blocks.values()}) == 1
        assert next(iter(blocks.values())).scope is not func_ir.blocks[0].scope
        assert [str(b) for b in blocks.values()] == [str(b) for b in func_ir.blocks.values()]
        assert not {id(b) for b in blocks.values()} & {id(b) for b in func_ir.blocks.values()}
    assert not {id(v) for v in variables(first).values()} & {id(v) for v in variables(second).values()}
    assert next(iter(first.values())).scope is not next(iter(second.values())).scope
    third = copy_blocks(first)  # a copy of the copy
    assert not {id(v) for v in variables(third).values()} & {id(v) for v in variables(first).values()}
    assert copier.deepcopy([1, [2]]) == [1, [2]] and copier.copy is copy.copy  # the rest is the copy module's


def test_the_batch_kernels_get_one_type_whatever_the_callers_arrays_flags(monkeypatch):
    """`assemble` with a user's writable segment arrays, a padded batch and a plan's batches (read-only
    arrays) hand the layout kernel the same argument types: each combination of writable flags was a type
    of its own, compiled on a user's first `report` or `demo` although `tokenmill warmup` had run."""
    import numpy as np

    import tokenmill
    from tokenmill.batching import _kernels
    from tokenmill.batching.layout import assemble

    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")
    docs = [np.arange(1, 9), np.arange(3), np.arange(2)]
    seg = [np.array(a, np.int64) for a in ([0, 1, 1], [0, 1, 2], [0, 0, 0], [8, 3, 2])]
    assert all(a.flags.writeable for a in seg)
    assemble((np.concatenate(docs), np.array([0, 8, 11])), *seg, num_rows=2, row_length=8, pad_id=0)
    assemble(lambda out, dst: None, *seg[:3], np.zeros(3, np.int64), num_rows=2, row_length=8, pad_id=0)
    tokenmill.pad_batch(docs, pad_id=0)
    for b in tokenmill.pack([8, 3, 2], 8).batches(docs, batch_size=2, pad_id=0):
        assert b.doc_ids.shape == (2, 8)  # (derived by the provenance kernel)
    for kernel in (_kernels.layout, _kernels.segments_ok, _kernels.provenance):
        assert kernel.signatures, kernel  # (the kernels ran, not their twins)
        for sig in kernel.signatures:
            inputs = [t for t in sig[:4] if hasattr(t, "mutable")]
            assert inputs and not any(t.mutable for t in inputs), (kernel, sig)


def test_the_planners_and_the_encoder_hand_their_kernels_read_only_inputs(monkeypatch):
    """A store's lengths are read-only, a list's are not: each flag was a kernel type of its own (`items`,
    the window planner's `count`/`fill`, the encoder's `build_pair_table`), compiled on a user's first plan over
    a store although `tokenmill warmup` had compiled the other."""
    import numpy as np

    import tokenmill
    from tokenmill.batching import _kernels as PK
    from tokenmill.tokenizer.bpe import _encode_kernels as EK
    from tokenmill.tokenizer.model import Tokenizer
    from tokenmill.windows import _plan_kernels as WK

    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")
    seen = []

    def spy(module, name, inputs):  # (the positions of the kernel's input arrays)
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a: seen.append((name, [a[i].flags.writeable for i in inputs]))
                            or real(*a))

    for module, name, inputs in ((PK, "items", [0]), (WK, "count", [0, 1]), (WK, "fill", [0, 1]),
                                 (EK, "build_pair_table", [0, 1, 2, 3])):
        spy(module, name, inputs)
    writable, sealed = np.array([20, 5, 9]), tokenmill.ArraySource([np.arange(20), np.arange(5)]).lengths
    for lengths in (writable, sealed, [20, 5]):
        tokenmill.pack(lengths, 8)
        tokenmill.SlidingWindows(8, 4).plan(lengths)
    Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b"ab": 256}, pattern="gpt2").encode("ab")
    assert {name for name, _ in seen} == {"items", "count", "fill", "build_pair_table"}
    assert all(not any(flags) for _, flags in seen), seen


def test_an_interrupted_warmup_starts_no_job_and_ends_the_running_ones():
    """Ctrl-C during `tokenmill warmup` printed "interrupted" and went on for 100 s: the pool started every queued
    job before exiting. The queued ones are cancelled now, the running ones killed."""
    import signal
    import subprocess
    import sys
    import time

    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # (a terminal's: xdist's workers ignore it)
              "from tokenmill import _jit\n"
              "_jit.JOBS = {f'sleep{i}': 'import time; time.sleep(60)' for i in range(4)}\n"
              "print('started', flush=True)\n"
              "try:\n"
              "    _jit.warmup(1, progress=False)\n"
              "except KeyboardInterrupt:\n"
              "    print('interrupted', len(_jit._running), flush=True)\n"
              "    sys.exit(130)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    time.sleep(1.5)  # (the first job running, three queued)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - t0 < 10, out
    assert out.strip().startswith("interrupted")


def test_with_no_writable_cache_folder_the_kernels_cache_in_a_private_temporary_one():
    """A read-only install with no writable NUMBA_CACHE_DIR or home: every tokenmill command had failed with numba's
    "cannot cache function: no locator available" (reported as a bug in tokenmill). The kernels now cache in a
    folder of the process's own, said once. (Every other locator refused here, as a read-only file system does.)"""
    import subprocess
    import sys

    script = ("import os, warnings\n"
              "os.environ.pop('NUMBA_CACHE_DIR', None)\n"
              "from numba.core import caching\n"
              "orig = caching._CacheLocator.ensure_cache_path\n"
              "def ensure(self):\n"
              "    if 'tokenmill-numba-' not in self.get_cache_path():\n"
              "        raise OSError('read-only file system')\n"
              "    return orig(self)\n"
              "caching._CacheLocator.ensure_cache_path = ensure\n"
              "with warnings.catch_warnings(record=True) as w:\n"
              "    warnings.simplefilter('always')\n"
              "    from tokenmill.tokenizer import _wide\n"
              "print(_wide.ix._cache._cache_path)\n"
              "print([str(x.message) for x in w if 'no writable folder' in str(x.message)])\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    path, said = out.stdout.strip().splitlines()[-2:]
    assert "tokenmill-numba-" in path and os.path.isdir(path.rsplit("tokenmill-numba-", 1)[0])
    assert "set NUMBA_CACHE_DIR to a writable folder" in said and said.count("no writable folder") == 1
