"""Compiled kernels: one way to load them lazily, to say when a first run compiles, and to warm up.

numba compiles a kernel the first time it is called and caches the machine code on disk
(``cache=True``), so only a machine's first run pays for compilation (tens of seconds for the
tokenizer kernels on 2 cores). This module

* is what every kernel module takes ``njit`` from; kernel modules are imported inside the functions
  that call them (``from . import _encode_kernels as K``), so importing tokenmill never loads numba;
* tells the user, once per process, when a kernel compiles instead of loading from the cache (a
  numba compile-event listener installed by :func:`njit`), and keeps compile seconds out of progress
  bars' throughput and apart in :func:`compile_seconds`;
* compiles every family ahead of time, in parallel processes (:func:`warmup`, ``tokenmill warmup``),
  which ``make demo``/``make test`` and the install instructions run.

``TOKENMILL_QUIET=1`` (or ``--quiet`` on the command line) silences the notice.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

_lock = threading.Lock()
_announced: set[str] = set()
_state = {"listening": False, "depth": 0, "t0": 0.0, "seconds": 0.0, "count": 0, "bars": []}


def njit(*args, refcount: bool = True, **kwargs):
    """numba's ``njit``, for every tokenmill kernel module: it also installs the compile listener
    (first-run notice, compile seconds kept apart from progress-bar throughput).

    ``refcount=False`` compiles without numba's reference counting of arrays. With it, every array a
    function binds anew (each array argument of an inlined helper, in every pass of a loop) costs a
    call and an atomic increment and decrement that numba's pruning pass mostly leaves in place:
    about 40 cycles per helper call per array, most of the time of a character loop. Without it the
    function may not make arrays (``np.empty``, ``np.concatenate``...) nor call a function that does
    without passing it buffers it owns; the arrays it reads and writes are its caller's, kept alive by
    the caller. The SentencePiece kernels use it; the BPE encoder and the splitters, which make arrays,
    hand their hot helpers ``_wide.raw`` pointers instead (no reference to count); the set-up code
    that builds tables keeps the default."""
    from numba import njit as _njit

    _listen()
    _key_caches_on_every_kernel_source()
    _one_memo_per_inlined_copy()
    if not refcount:
        kwargs["_nrt"] = False
    return _njit(*args, **kwargs)


def kernel_sources_digest(root: str | os.PathLike | None = None) -> str:
    """sha256 of the source of every kernel module of the package at ``root`` (tokenmill's by default):
    each ``.py`` file that holds ``njit(`` or ``@intrinsic``, by relative path and content. Computed once
    per root and process (~20 ms, when the first kernel module is imported)."""
    from pathlib import Path

    return _digest(str(Path(root or Path(__file__).parent).resolve()))


@functools.lru_cache(maxsize=None)
def _digest(root: str) -> str:
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for path in sorted(Path(root).rglob("*.py")):
        text = path.read_bytes()
        if b"njit(" in text or b"@intrinsic" in text:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + text + b"\0")
    return h.hexdigest()


def _temporary_cache_root() -> str:
    """A private folder for this process's kernel cache (made once, with a warning saying why and what to set)."""
    with _lock:
        root = _state.get("temporary_cache")
        if root is None:
            import tempfile

            root = _state["temporary_cache"] = tempfile.mkdtemp(prefix="tokenmill-numba-")
            fresh = True
        else:
            fresh = False
    if fresh:
        from .errors import warn

        warn(f"no writable folder for the compiled kernels (NUMBA_CACHE_DIR unset or not writable, the package's "
             f"folder and the user cache read-only): they are cached in {root} for this process only and compiled "
             "again by the next one; set NUMBA_CACHE_DIR to a writable folder to keep them")
    return root


def _key_caches_on_every_kernel_source() -> None:
    """numba keys a kernel's disk cache on its own source file alone, but a kernel holds the machine
    code of every helper it inlines from other modules (the Llama 3 / Qwen splitter inlines
    ``_pretok_kernels._scan``; the encoders inline ``_wide`` and ``_hashing``): after such a helper
    changes (an editable install after ``git pull``, a developer's edit), the kernel would load code
    built from the old helper, silently. tokenmill's kernels are keyed on every kernel module's source
    instead (``kernel_sources_digest``): numba's cache locators, each with that digest added to its
    source stamp, put first for files of this package."""
    with _lock:
        if _state.get("locators"):
            return
        _state["locators"] = True
    from numba.core import caching

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep

    class _Keyed:
        @classmethod
        def from_function(cls, py_func, py_file):
            if not os.path.abspath(py_file).startswith(package):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), kernel_sources_digest()

    made = [type(f"Kernel{base.__name__}", (_Keyed, base), {})
            for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator, caching.UserWideCacheLocator)]
    caching.CacheImpl._locator_classes[:0] = made

    class _Temporary(_Keyed, caching.UserWideCacheLocator):
        """The last resort, after every other locator: no writable NUMBA_CACHE_DIR, package folder or user cache
        (a read-only container with no writable home) made every tokenmill command fail with numba's "cannot
        cache function: no locator available", reported as a bug. The kernels then cache in a folder of this
        process's own (made private by ``mkdtemp``: compiled again by every process), said once."""

        def __init__(self, py_func, py_file):
            super().__init__(py_func, py_file)
            self._cache_path = os.path.join(_temporary_cache_root(), self.get_suitable_cache_subpath(py_file))

    caching.CacheImpl._locator_classes.append(_Temporary)

    # A damaged cache file of a tokenmill kernel (an index or data file emptied by a power loss, cut short, or
    # edited) raised numba's unpickling error at the kernel's first call, on every run, the file never
    # rewritten: read as a miss (compiled again), and a save over such an index starts a new one.
    load, save = caching.Cache.load_overload, caching.Cache.save_overload

    def ours(cache) -> bool:
        return isinstance(getattr(getattr(cache, "_impl", None), "locator", None), _Keyed)

    def load_overload(self, sig, target_context):
        if not ours(self):
            return load(self, sig, target_context)
        try:
            return load(self, sig, target_context)
        except Exception:  # noqa: BLE001 -- whatever a damaged file raises: a miss
            return None

    def save_overload(self, sig, data):
        if not ours(self):
            return save(self, sig, data)
        try:
            return save(self, sig, data)
        except Exception:  # noqa: BLE001 -- the index it adds to is damaged: a new one, else no cache
            with contextlib.suppress(Exception):
                os.unlink(self._cache_file._index_path)
                return save(self, sig, data)

    caching.Cache.load_overload, caching.Cache.save_overload = load_overload, save_overload


class _InlineCopier:
    """``copy`` as numba's inliner sees it (``inline_closurecall.copy``), with ``deepcopy`` of an IR
    block taking one memo for all the blocks of one function copy. See :func:`_one_memo_per_inlined_copy`."""

    def __init__(self, module) -> None:
        from numba.core import ir

        self._copy, self._block, self._memo, self._scope = module, ir.Block, None, None

    def deepcopy(self, x, memo=None):
        if memo is not None or not isinstance(x, self._block):
            return self._copy.deepcopy(x, memo)
        # a new function copy starts at a block of another scope, or at a block this memo copied already (the
        # same function copied again); the memo keeps the blocks it copied alive, so an id is never reused
        if self._memo is None or x.scope is not self._scope or id(x) in self._memo:
            self._memo, self._scope = {}, x.scope
        return self._copy.deepcopy(x, self._memo)

    def __getattr__(self, name):
        return getattr(self._copy, name)


def _one_memo_per_inlined_copy() -> None:
    """Most of the time numba took to compile tokenmill's kernels went into copying IR, not into making
    code: its inliner (``inline="always"``, which the kernels' hot helpers use) deep-copies the callee's
    IR block by block, each block with a memo of its own, so each block copies the callee's whole scope
    (every variable of the function, with its own new scope). That is blocks x variables copies per
    inlined call, and a helper inlined into a helper is copied again at every level: the tests' twin
    splitter of cl100k's machine compiled in 12.2 s (under cProfile, 38 of its 48 s in ``copy.deepcopy``).

    One memo for all the blocks of one copy makes each variable and the scope once (the blocks then share
    one scope, as the IR numba builds from bytecode does) and gives the same machine code: byte-identical
    assembly for every kernel ``tokenmill warmup`` compiles (``bench/inline_copies.py`` compares them).
    That kernel then compiles in 4.9 s; the warm-up jobs 1.39x faster in all (docs/benchmarks.md, "Cold
    start"). numba's other uses of ``copy`` and every copy that passes its
    own memo are untouched. Installed once per process, for every numba function (a user's own inlined
    functions compile faster too); ``TOKENMILL_NUMBA_INLINE_COPY=numba`` leaves numba as it is."""
    with _lock:
        if _state.get("inline_copies"):
            return
        _state["inline_copies"] = True
    if os.environ.get("TOKENMILL_NUMBA_INLINE_COPY", "") == "numba":
        return
    import copy

    from numba.core import inline_closurecall

    if getattr(inline_closurecall, "copy", None) is copy:  # a numba whose inliner is laid out as 0.59-0.68's
        inline_closurecall.copy = _InlineCopier(copy)


def compile_seconds() -> float:
    """Seconds this process has spent compiling tokenmill kernels (0 when all came from the cache);
    commands subtract it from throughput figures and report it apart."""
    return _state["seconds"]


def _listen() -> None:
    with _lock:
        if _state["listening"]:
            return
        _state["listening"] = True
    from numba.core import event

    class _CompileListener(event.Listener):
        def on_start(self, ev):
            disp = (ev.data or {}).get("dispatcher")
            if not getattr(getattr(disp, "py_func", None), "__module__", "").startswith("tokenmill."):
                return
            with _lock:
                _state["depth"] += 1
                if _state["depth"] > 1:
                    return
                _state["t0"] = time.perf_counter()
            _announce()
            _state["bars"] = _active_bars()
            for bar in _state["bars"]:
                bar.set_postfix_str("compiling kernels (first run only)", refresh=True)

        def on_end(self, ev):
            disp = (ev.data or {}).get("dispatcher")
            if not getattr(getattr(disp, "py_func", None), "__module__", "").startswith("tokenmill."):
                return
            with _lock:
                _state["depth"] -= 1
                if _state["depth"] > 0:
                    return
                dt = time.perf_counter() - _state["t0"]
                _state["seconds"] += dt
                _state["count"] += 1
            for bar in _state["bars"]:  # the bar's clock skips the compile: its rate stays real
                bar.start_t += dt
                bar.last_print_t += dt
                bar.set_postfix_str("", refresh=False)
            _state["bars"] = []

    event.register("numba:compile", _CompileListener())
    _fork_waits_for_compiles()


def _fork_waits_for_compiles() -> None:
    """A fork (a DataLoader's or a store build's worker, ``multiprocessing`` with fork) waits while another
    thread holds numba's compiler lock (compiling, or loading machine code from the disk cache): a child
    forked then inherited the lock held by a thread it does not have, and hung at its first kernel. The
    forking thread takes the lock before the fork and lets it go after, in both processes (it is the
    thread that continues in the child, so it owns the child's copy)."""
    try:
        from numba.core.compiler_lock import global_compiler_lock

        lock = global_compiler_lock._lock
        if not hasattr(os, "register_at_fork") or not callable(getattr(lock, "acquire", None)):
            return
    except (ImportError, AttributeError):  # numba internals changed: the fork hazard stays as it was
        return
    os.register_at_fork(before=lock.acquire, after_in_parent=lock.release, after_in_child=lock.release)


def _active_bars() -> list:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return []
    return [b for b in list(getattr(tqdm, "_instances", ())) if not getattr(b, "disable", True)]


def _announce() -> None:
    with _lock:
        if "any" in _announced:
            return
        _announced.add("any")
    if os.environ.get("TOKENMILL_QUIET", "") not in ("", "0"):
        return
    print("tokenmill: compiling kernels (first run only: later runs load them from the disk cache; "
          "`tokenmill warmup` compiles all of them ahead of time, in parallel)", file=sys.stderr, flush=True)


def is_cached(obj) -> bool | None:
    """For a kernel (or every kernel of a kernel module): True when numba's disk cache holds machine
    code for the current source, False when a first call will compile, None when that cannot be told."""
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:  # pragma: no cover
        return None
    found = False
    for disp in ([obj] if isinstance(obj, CPUDispatcher) else vars(obj).values()):
        if not isinstance(disp, CPUDispatcher) or getattr(disp, "_cache", None) is None:
            continue
        found = True
        try:
            if not disp.overloads and not disp._cache._cache_file._load_index():
                return False
        except Exception:  # noqa: BLE001  (numba internals changed: say nothing rather than something wrong)
            return None
    return True if found else None


def exact_overload(dispatcher, args: tuple):
    """The machine code ``dispatcher`` already holds for exactly the types of ``args``, as a callable, or
    None (none compiled for those types yet, or numba's ``overloads`` changed: call the dispatcher).

    Calling it skips numba's per-call dispatch on the argument types (~30 ns an argument: ~1 us of a
    BPE kernel call of ~40 arrays, a tenth of a one-sentence ``encode``). The machine code then trusts
    its arguments unchecked, so it is only for a caller whose every later call passes arguments of the
    very same types (dtype, ndim, layout, writability), each made the same way every time; such a
    caller looks it up again whenever an argument may have been made another way."""
    try:
        from numba import typeof

        cres = dispatcher.overloads.get(tuple(typeof(a) for a in args))
        return None if cres is None else cres.entry_point
    except (AttributeError, TypeError, ValueError):  # numba internals changed: take the dispatcher
        return None


class ExactCall:
    """A kernel called again and again with arguments made the same way each time: the first call (and the
    first after ``key`` changes) through the dispatcher, the others through its machine code for those
    arguments' types (:func:`exact_overload`). ``key``: an object whose identity vouches that the
    arguments' types are those of the call that looked the code up (a thread's cache arrays, replaced
    when they grow; ``True`` where nothing changes). One per thread and call site (not thread-safe)."""

    __slots__ = ("kernel", "key", "call")

    def __init__(self, kernel):
        self.kernel, self.key, self.call = kernel, None, None

    def __call__(self, key, *args):
        if self.key is key:
            return self.call(*args)
        out = self.kernel(*args)
        self.call, self.key = exact_overload(self.kernel, args) or self.kernel, key
        return out


# ------------------------------------------------------------------------------------------------
# first runs: small work takes the exact pure-Python twin instead of waiting for a compile

_twin_spent: dict[str, int] = {}
_compiled_families: set[str] = set()
twins_used: set[str] = set()  # families whose twin ran in this process (commands say so on stderr)
_uncached_seen: dict[str, float] = {}  # family -> when its kernels were last found not in the disk cache
UNCACHED_RECHECK_S = 5.0


def python_first(family: str, kernels, size: int, limit: int) -> bool:
    """True when work of ``size`` (bytes, symbols...) should run on the family's pure-Python twin:
    some of ``kernels`` (the dispatchers that call would run; not modules, whose inlined helpers are
    never cached on their own) are not in numba's disk cache yet, so a compiled
    call would first compile for tens of seconds, and this process has given that twin less than
    ``limit`` in all, ``size`` included. The twins give the same results (each is tested against
    its kernels) at a fraction of the speed, so a first run on small input finishes in seconds and
    larger work still compiles once. ``TOKENMILL_PYTHON_FIRST=0`` turns this off (the bounds-checked
    test run sets it: it must exercise the kernels). Records the family in :data:`twins_used`."""
    if family in _compiled_families or os.environ.get("TOKENMILL_PYTHON_FIRST", "1") == "0":
        return False
    with _lock:
        if _twin_spent.get(family, 0) + size > limit:
            return False
        # "not in the disk cache" is asked again only after a while (another process may compile it): asking
        # reads numba's index file (~170 us), which every small call of a first run paid (pad_batch: 2x its time)
        recent = time.monotonic() - _uncached_seen.get(family, -1e9) < UNCACHED_RECHECK_S
    if not recent:
        if all(is_cached(k) is not False for k in (kernels if isinstance(kernels, (list, tuple)) else [kernels])):
            _compiled_families.add(family)
            return False
        with _lock:
            _uncached_seen[family] = time.monotonic()
    with _lock:
        _twin_spent[family] = _twin_spent.get(family, 0) + size
        twins_used.add(family)
    return True


# ------------------------------------------------------------------------------------------------
# warm-up: each job runs a public path on a tiny input in a fresh process, so the kernels compile
# with exactly the types the library passes them. Longest first: a pool of 2 finishes the split
# kernels that later jobs share before those jobs need them.

JOBS: dict[str, str] = {
    "train (split gpt4, chunk counting, merge loop)":
        "import tokenmill; tokenmill.train_bpe(['hello world, hello there 123'] * 4, 270, pattern='gpt4')",
    "encode (split gpt2 and llama3, BPE encoder, CJK characters merged ahead, UTF-8 in and lists out, UTF-8 check)":
        "from tokenmill.tokenizer.model import Tokenizer\n"
        "t = Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b'he': 256, b'll': 257}, pattern='gpt2')\n"
        "t.encode('hello world 世界'); t.encode_batch(['hello', 'x y'], num_threads=1, as_arrays=True)\n"
        "t.encode_batch(['hello', 'x y ' * 2000], num_threads=1)  # lists out (_cpython; past tolist's 3,072 ids)\n"
        "Tokenizer.from_ranks({bytes([i]): i for i in range(256)}, pattern='gpt2', special_tokens={'<|e|>': 256})"
        ".encode_batch(['a <|', 'b'], num_threads=1)  # a batch's special-token scan (_special_scan)\n"
        "r = {bytes([i]): i for i in range(256)}  # 1,280 CJK characters one token each: merged ahead\n"
        "for c in map(chr, range(0x4E00, 0x5300)): r.setdefault(c.encode()[:2], len(r)); r[c.encode()] = len(r)\n"
        "Tokenizer.from_ranks(r, pattern='llama3').encode('中文 hello 丁七')\n"
        "Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b'xyz': 256}, pattern='gpt2').encode('xyz')"
        "  # a token BPE does not reach from its bytes, pinned in the cache (Llama 3 has 588)\n"
        "from tokenmill.tokenizer.encoding import well_formed_utf8; well_formed_utf8('a file é'.encode())"
        "  # the store's UTF-8 check",
    "decode (a list of ids read through the C API, the ids' bytes joined)":
        "import numpy as np\nfrom tokenmill.tokenizer.model import Tokenizer\n"
        "t = Tokenizer.from_ranks({bytes([i]): i for i in range(256)}, pattern='gpt2')\n"
        "t.decode(list(range(64))); t.decode(np.arange(64))",
    "sentencepiece (normalizer, BPE over characters, decode)":
        "from tokenmill.tokenizer.sentencepiece import SentencePieceTokenizer as T, write_model_proto as w\n"
        "p = [('<unk>', 0, 2), ('<s>', 0, 3)] + [(c, -i, 1) for i, c in enumerate(['\u2581', 'h', 'i', 'hi', '\u2581hi'])]\n"
        "p += [('<0x%02X>' % b, 0, 6) for b in range(256)]\n"
        "for norm in ({'name': 'identity', 'remove_extra_whitespaces': False}, {}):  # text as it is / normalized\n"
        "    t = T.from_bytes(w(p, trainer={'model_type': 2, 'byte_fallback': True}, normalizer=norm))\n"
        "    t.encode_batch(['hi hi \u4e2d x ' * 40, 'hi'], num_threads=1, as_arrays=True); t.encode('hi')\n"
        "    t.decode(list(range(263)))  # the compiled decode (_sp_kernels.decode_pieces)",
    "split o200k":
        "from tokenmill.tokenizer.pretokenize.presets import split_offsets; split_offsets(b'Hello world 123', 'o200k')",
    "split llama3 / qwen family":
        "from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets\n"
        "compiled_offsets(b'Hello world 123', 'llama3'); compiled_offsets(b'Hello world 123', 'qwen3.5')",
    "split custom patterns (general DFA / VM)":  # (the compiled splitter: split_text itself runs `regex`)
        "from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets\n"
        "compiled_offsets(b'Hello world 123', r'\\w+|\\s+')",
    "packing":
        "import numpy as np, tokenmill\n"
        "docs = [list(range(1, 9)), [1, 2, 3], [4, 5]]\n"
        "class Flat:  # a token store's fast path: one read-only flat array + offsets, uint16 or uint32\n"
        "    def __init__(self, dt):\n"
        "        self.token_array = np.concatenate([np.array(d, dt) for d in docs]); self.doc_offsets = np.array([0, 8, 11, 13])\n"
        "        self.token_array.setflags(write=False)\n"
        "        self.lengths = np.array([8, 3, 2]); self.get = lambda i: self.token_array[self.doc_offsets[i]:self.doc_offsets[i + 1]]\n"
        "    def __len__(self): return 3\n"
        "for m in ('best_fit', 'first_fit_decreasing', 'greedy', 'concat'):\n"
        "    p = tokenmill.pack([8, 3, 2], 8, method=m)\n"
        "    for src in (docs, Flat(np.uint16), Flat(np.uint32)): next(iter(p.batches(src, batch_size=2, pad_id=0))).doc_ids\n"
        "tokenmill.SliceSource(docs, doc=[0, 1], start=[2, 0], length=[4, 3])",
    "windows":
        "import numpy as np, tokenmill\n"
        "p = tokenmill.SlidingWindows(8, 4).plan(np.array([20, 5]))\n"
        "for dt in (np.int64, np.uint16, np.uint32):\n"
        "    for writable in (True, False):  # a store's memory map is read-only\n"
        "        t = np.arange(25, dtype=dt); t.setflags(write=writable); p.gather(t, np.array([0, 20, 25]))",
}


@dataclass
class JobResult:
    name: str
    seconds: float
    ok: bool
    error: str = ""


_jobs_lock = threading.Lock()
_running: set = set()  # the warm-up's compiling processes, ended if the warm-up is interrupted


def _run(name: str, code: str, env: dict) -> JobResult:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    with _jobs_lock:
        _running.add(proc)
    try:
        _, stderr = proc.communicate()
    finally:
        with _jobs_lock:
            _running.discard(proc)
    dt = time.perf_counter() - t0
    err = (stderr.strip().splitlines() or [""])[-1]
    return JobResult(name, dt, proc.returncode == 0, err)


def warmup(jobs: int | None = None, *, only: list[str] | None = None, progress: bool = True) -> list[JobResult]:
    """Compile every kernel family ahead of time in ``jobs`` parallel processes (default: all cores).

    Kernels already in the disk cache load in about a second each. Returns one result per family,
    in the order of :data:`JOBS`; a failed job names its error (the others still run).
    """
    names = list(JOBS) if only is None else only
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        from .errors import ConfigError

        raise ConfigError(f"unknown warm-up job(s) {unknown}; known: {list(JOBS)}")
    workers = max(1, min(len(names), jobs or os.cpu_count() or 1))
    env = dict(os.environ, TOKENMILL_QUIET="1", TOKENMILL_PYTHON_FIRST="0")  # compile, even for tiny inputs
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(names), desc="compiling kernels (first run only)", unit="family", file=sys.stderr)
    results: dict[str, JobResult] = {}
    ex = ThreadPoolExecutor(workers)
    try:
        futures = {ex.submit(_run, n, JOBS[n], env): n for n in names}
        for fut in futures:
            r = fut.result()
            results[r.name] = r
            if bar is not None:
                bar.update(1)
    except BaseException:  # Ctrl-C: no job started after it, the running ones ended (the pool had started every
        ex.shutdown(wait=False, cancel_futures=True)  # queued job first: 100 s more after "interrupted")
        with _jobs_lock:
            procs = list(_running)
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.kill()
        raise
    finally:
        if bar is not None:
            bar.close()
    ex.shutdown()
    return [results[n] for n in names]
