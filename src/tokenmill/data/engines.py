"""Where shard jobs run: inline, a local process or thread pool, or Ray tasks (one machine or a cluster).

A shard job is a list of texts; its result is ``(ids, lengths)``: the documents' ids, each followed
by EOS / preceded by BOS as asked, concatenated in the store's dtype, and the per-document lengths.
A job's result depends only on its texts and the options, never on where it ran, so the store's
bytes are the same for every engine and worker count. Results come back in job order; at most a
few jobs per worker are in flight, so memory stays bounded whatever the corpus size. A pool never
has more workers than there are jobs to run (``workers=200`` for one shard starts one), and its
workers die with the process that started them, even when it is killed (SIGKILL): pool workers
through ``PR_SET_PDEATHSIG`` (Linux), the Ray processes of a ``ray.init`` tokenmill made itself
through a small watchdog process (Linux; elsewhere Ray's own clean-up applies).

    engine   workers   runs on
    local    1         the calling thread
    local    n > 1     n threads (the compiled encoder releases the GIL; one shared tokenizer)
    process  n         n processes (fork; spawn where fork does not exist): for many tiny documents,
                       whose per-document Python work holds the GIL; 1-16% more CPU per MB than threads
                       in bench/store.py
    ray      n         Ray tasks, 2n in flight; ray.init(address=...) reaches a cluster
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ..errors import ConfigError, require

ENGINES = ("local", "process", "ray")


@dataclass(frozen=True)
class EncodeOptions:
    dtype: str
    vocab_size: int
    eos_id: int | None
    bos_id: int | None
    special_text: str = "error"  # "error" (the tokenizer's default), "plain" (encode it as text) or "special" (as
    # the special token: data whose documents spell their own separators)


@dataclass(frozen=True)
class JobError:
    """A job failed on one document: its index inside the job and the message (picklable)."""

    index: int
    message: str


def tokenizer_payload(tokenizer) -> Any:
    """What a worker process rebuilds the tokenizer from: a tokenmill Tokenizer travels as its
    versioned dict (its caches and compiled state hold thread-locals that do not pickle)."""
    from ..tokenizer.model import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return ("tokenmill.tokenizer", tokenizer.to_dict())
    return ("object", tokenizer)


def tokenizer_from_payload(payload):
    kind, body = payload
    if kind == "tokenmill.tokenizer":
        from ..tokenizer.model import Tokenizer

        return Tokenizer.from_dict(body, source="<worker payload>")
    return body


def encode_job(tokenizer, opts: EncodeOptions, texts):
    """``(ids, lengths)`` of one job, or a :class:`JobError` naming the document that failed. ``texts``: a list of
    strs, or :class:`~tokenmill.data.readers.Utf8Docs` (a tokenmill tokenizer encodes their bytes as they are;
    any other is given them as strs)."""
    kw = {"plain": {"disallowed_special": ()}, "special": {"allowed_special": "all"}}.get(opts.special_text, {})
    from ..tokenizer.model import Tokenizer
    from .readers import Utf8Docs

    utf8 = isinstance(texts, Utf8Docs)
    try:
        if isinstance(tokenizer, Tokenizer):
            # a kernel group at a time, its ids read from the encoding thread's own buffer and written into
            # the store's dtype at once: no int64 block per job (each one fresh pages to fault in)
            groups = (tokenizer._encode_flat_parts_utf8(texts.data, texts.offsets, **kw) if utf8
                      else tokenizer._encode_flat_parts(texts, **kw))
            parts = []
            for lo, _hi, ids, bounds in groups:
                got = assemble_flat(ids, bounds, opts)
                if isinstance(got, JobError):
                    return JobError(lo + got.index, got.message)
                parts.append(got)
            if len(parts) == 1:
                return parts[0]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        if utf8:
            texts = texts.texts()
        arrays = tokenizer.encode_batch(texts, as_arrays=True, num_threads=1, **kw)
    except Exception:  # find the document, so the caller can name its file and row
        # one text at a time: ``encode`` where the tokenizer has it (its message speaks of "the text"), else
        # the store protocol's ``encode_batch`` of one
        one = getattr(tokenizer, "encode", None) or (
            lambda t, **k: tokenizer.encode_batch([t], as_arrays=True, num_threads=1, **k))
        for i, t in enumerate(texts.texts() if isinstance(texts, Utf8Docs) else texts):
            try:
                one(t, **kw)
            except Exception as e:  # noqa: BLE001  (reported with the document's provenance)
                from ..errors import SpecialTokenError

                if isinstance(e, SpecialTokenError):  # (its advice, allowed_special=..., is no option of a build)
                    return JobError(i, f"{type(e).__name__}: {e.found}; pass special_text='plain' "
                                       "(CLI: --special-text plain) to encode such text as plain text, or "
                                       "special_text='special' (CLI: --special-text special) to encode it as the "
                                       "special token, or clean the data")
                return JobError(i, f"{type(e).__name__}: {e}")
        raise
    return assemble_ids(arrays, opts)


_PER_DOCUMENT_FROM = 1024  # ids a document on average: from there a job is copied document by document


def assemble_ids(arrays: list[np.ndarray], opts: EncodeOptions):
    """Concatenate per-document ids with BOS/EOS into the store's dtype, checking every id < vocab_size.

    ``(ids, lengths)``, or a :class:`JobError` naming the first document holding an id outside
    ``0 .. vocab_size - 1`` (or ids that are not a 1-D array of integers). Documents of
    ``_PER_DOCUMENT_FROM`` ids or more on average are range-checked and cast while copied, one by one (three
    vectorized numpy passes each); shorter ones are joined once and checked, cast and copied between their
    BOS/EOS by one compiled pass (``_assemble_kernels.interleave``): the numpy calls cost ~4 us a document,
    1.5x the encode itself for 10,000 documents of ~100 bytes, against ~0.4 us a document in one pass.
    """
    n = len(arrays)
    bos, eos = opts.bos_id, opts.eos_id
    extra = (bos is not None) + (eos is not None)
    try:
        raw = np.fromiter(map(len, arrays), np.int64, n)
    except TypeError:  # a document without a length (a bare number)
        bad = next((i for i, a in enumerate(arrays) if np.ndim(a) != 1), 0)
        return JobError(bad, f"the tokenizer returned {type(arrays[bad]).__name__}, not a 1-D array of ids")
    lengths = raw + extra
    ids = int(raw.sum())
    out = np.empty(ids + extra * n, opts.dtype)
    if n == 0:
        return out, lengths
    if ids >= _PER_DOCUMENT_FROM * n:
        return _assemble_each(arrays, raw, opts, out, lengths)
    try:
        flat = np.concatenate(arrays)
    except (TypeError, ValueError):  # documents of several dimensions, or not arrays of numbers
        flat = None
    # the kernel's boundary: a 1-D array of integers (any width, never floats) of the sizes it uses;
    # anything else (an empty float array among them too) goes document by document, which names the culprit
    if flat is None or flat.ndim != 1 or flat.dtype.kind not in "iu" or flat.size != ids:
        return _assemble_each(arrays, raw, opts, out, lengths)
    return _one_pass(flat, raw, opts, out, lambda d: arrays[d])


def assemble_flat(ids: np.ndarray, bounds: np.ndarray, opts: EncodeOptions):
    """``assemble_ids`` of the documents ``ids[bounds[i]:bounds[i + 1]]`` (``Tokenizer.encode_flat``'s
    output): the same ``(ids, lengths)`` or :class:`JobError`, without an array per document where they
    are short (one compiled pass over ``ids``)."""
    n = bounds.size - 1
    raw = np.diff(bounds)
    if (ids.ndim != 1 or ids.dtype.kind not in "iu" or bounds.ndim != 1 or n < 0 or bounds[0] != 0
            or bounds[-1] != ids.size or (raw < 0).any()):
        return JobError(0, f"the tokenizer's encode_flat returned ids of shape {ids.shape} ({ids.dtype}) and "
                           f"bounds of shape {bounds.shape} that do not cut them into documents")
    if ids.size >= _PER_DOCUMENT_FROM * n:
        b = bounds.tolist()
        return assemble_ids([ids[b[i] : b[i + 1]] for i in range(n)], opts)
    extra = (opts.bos_id is not None) + (opts.eos_id is not None)
    return _one_pass(ids, raw, opts, np.empty(ids.size + extra * n, opts.dtype), lambda d: ids[bounds[d] : bounds[d + 1]])


def _one_pass(flat: np.ndarray, raw: np.ndarray, opts: EncodeOptions, out: np.ndarray, document):
    """``(out, lengths)`` of documents of ``raw[d]`` ids each, back to back in ``flat`` (1-D integers, ``raw``'s
    sum of them; ``out``: their size plus BOS/EOS), checked, cast and placed by one compiled pass; or the
    :class:`JobError` of the first document (``document(d)``: its ids) holding an id outside the vocabulary."""
    from ._assemble_kernels import interleave

    bos, eos = opts.bos_id, opts.eos_id
    d = interleave(flat.astype(np.int64, copy=False), raw.astype(np.int64, copy=False), -1 if bos is None else int(bos),
                   -1 if eos is None else int(eos), int(opts.vocab_size), out)
    if d < 0:
        return out, raw + (bos is not None) + (eos is not None)
    return _outside(document(int(d)), int(d), opts)


def _assemble_each(arrays, raw, opts: EncodeOptions, out, lengths):
    """``assemble_ids`` document by document (long documents): ``(out, lengths)``, or a :class:`JobError`."""
    bos, eos = opts.bos_id, opts.eos_id
    pos = 0
    for i, a in enumerate(arrays):
        if bos is not None:
            out[pos] = bos
            pos += 1
        if raw[i]:
            a = np.asarray(a)
            if a.ndim != 1 or a.dtype.kind not in "iu":
                return _not_ids(arrays, i)
            lo, hi = int(a.min()), int(a.max())
            if lo < 0 or hi >= opts.vocab_size:
                return _outside(arrays[i], i, opts)
            out[pos:pos + a.shape[0]] = a
            pos += a.shape[0]
        if eos is not None:
            out[pos] = eos
            pos += 1
    return out, lengths


def _not_ids(arrays, i: int) -> JobError:
    a = np.asarray(arrays[i])
    return JobError(i, f"the tokenizer returned ids of type {a.dtype} and shape {a.shape}, not a 1-D array of integers")


def _outside(ids, i: int, opts: EncodeOptions) -> JobError:
    """The error of document ``i``, whose ``ids`` hold one outside the vocabulary."""
    a = np.asarray(ids)
    lo, hi = int(a.min()), int(a.max())
    return JobError(i, f"the tokenizer returned id {lo if lo < 0 else hi:,d}, outside 0 .. "
                       f"vocab_size-1 ({opts.vocab_size - 1:,d})")


# ---- local process pool: the tokenizer is set once per process ----------------------------------
_WORKER: tuple | None = None


def _init_worker(payload, opts, parent: int | None = None):
    global _WORKER
    if parent is not None:
        _die_with_parent(parent)
    _WORKER = (tokenizer_from_payload(payload) if isinstance(payload, tuple) else payload, opts)


def _die_with_parent(parent: int) -> None:
    """In a pool worker: be killed (SIGKILL) when the process that started the pool dies, however it
    dies (Linux: ``prctl(PR_SET_PDEATHSIG)``); exit now if it is already gone. Without this, the
    workers of a killed build wait on their task queue forever."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):  # pragma: no cover  (no libc prctl)
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _warm_up(tokenizer) -> None:
    """Encode two words on this pool thread, so that its first job does not make the thread's encoder state
    (~2 ms of a store's start, where the encoding thread waits for the first shard anyway). A warm-up that
    fails is ignored: the jobs meet the same failure and report it with the document's file and row."""
    try:
        tokenizer.encode_batch(["warm", " up"], as_arrays=True, num_threads=1)
    except Exception:  # noqa: BLE001  (see above)
        pass


def _runnable_first(jobs: Iterable, want: int) -> tuple[int, Iterator]:
    """Pull jobs until ``want`` of them have texts (or the jobs end): ``(how many have texts, all the
    jobs in order)``; the rest stay unread until they are needed."""
    it = iter(jobs)
    head, n = [], 0
    if want > 0:
        for job in it:
            head.append(job)
            if job[1] is not None:
                n += 1
                if n >= want:
                    break
    return n, itertools.chain(head, it)


def _run_in_worker(texts):
    tok, opts = _WORKER
    return encode_job(tok, opts, texts)


def run_jobs(jobs: Iterable, tokenizer, opts: EncodeOptions, *, engine: str, workers: int,
             ray_address: str | None = None, ahead: int = 2, quiet: bool = False) -> Iterator[tuple[Any, Any]]:
    """Yield ``(job_key, result)`` in job order for ``jobs`` of ``(job_key, texts)``, up to ``ahead`` jobs a
    worker submitted ahead of the one whose result is next. ``quiet``: a Ray tokenmill starts logs its
    warnings and errors only (no "Started a local Ray instance", no worker output).

    A job whose texts are ``None`` is not run (a finished shard of a resumed build); it is yielded
    with result ``None`` in its place.
    """
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r} is not one of {', '.join(map(repr, ENGINES))}")
    if engine == "ray":
        ray = require("ray", "ray")
        started = not ray.is_initialized()
        watchdog = None
        if started:  # a local Ray of our own (or the cluster at ray_address), shut down at the end
            before = _children(os.getpid())
            logs = {"logging_level": "ERROR", "log_to_driver": False} if quiet else {}  # (and not its notices)
            if ray_address is not None:
                ray.init(address=ray_address, **logs)
            else:  # no more CPUs than jobs to run
                runnable, jobs = _runnable_first(jobs, workers)
                ray.init(num_cpus=max(1, min(workers, runnable)), **logs)
            watchdog = _start_watchdog(sorted(_children(os.getpid()) - before))
        try:
            yield from _ordered(jobs, *_ray_submitter(ray, tokenizer, opts), workers * ahead)
        finally:
            if started:
                try:
                    ray.shutdown()
                finally:
                    _stop_watchdog(watchdog)
        return
    runnable, jobs = _runnable_first(jobs, workers)
    if runnable == 0:  # nothing to run (every shard of a resumed build is done): no pool
        for key, _ in jobs:
            yield key, None
        return
    workers = min(workers, runnable)  # a pool no larger than the work
    if engine == "local":  # threads: the compiled encoder releases the GIL; one tokenizer, warm caches.
        # One worker is one encoding thread too: this thread reads and hashes the next shard and writes
        # the last one meanwhile (a single-threaded loop did them in turn: 0.72x the bare encode speed)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as ex:
            for _ in range(workers):  # each thread's encoder state made while this thread reads the first shard
                ex.submit(_warm_up, tokenizer)
            submit = lambda texts: ex.submit(encode_job, tokenizer, opts, texts)
            yield from _ordered(jobs, submit, lambda f: f.result(), workers * ahead)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    if "fork" in mp.get_all_start_methods():
        ctx, payload = mp.get_context("fork"), tokenizer  # inherited, nothing pickled
    else:  # pragma: no cover  (macOS/Windows)
        ctx, payload = mp.get_context("spawn"), tokenizer_payload(tokenizer)
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(payload, opts, os.getpid())) as ex:
        submit = lambda texts: ex.submit(_run_in_worker, texts)
        yield from _ordered(jobs, submit, lambda f: f.result(), workers * ahead)


def _ordered(jobs, submit: Callable, result: Callable, limit: int):
    """Submit ahead (at most ``limit`` jobs in flight: a job with no texts, never run, does not count) and yield
    results in job order."""
    pending: deque = deque()
    running = 0
    for key, texts in jobs:
        pending.append((key, None if texts is None else submit(texts)))
        running += texts is not None
        while running > limit or (pending and pending[0][1] is None):
            k, fut = pending.popleft()
            running -= fut is not None
            yield k, None if fut is None else result(fut)
    while pending:
        k, fut = pending.popleft()
        yield k, None if fut is None else result(fut)


# ---- Ray: a watchdog kills the Ray processes tokenmill started if tokenmill is killed -------------
def _proc_stat(pid) -> tuple[str, int, str] | None:
    """``(state, parent pid, start time)`` of a process from /proc (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2:].split()
        return fields[0].decode(), int(fields[1]), fields[19].decode()
    except (OSError, ValueError, IndexError):  # gone, or gone while read
        return None


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (Linux: from /proc; elsewhere the empty set)."""
    if not sys.platform.startswith("linux"):
        return set()
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    out = set()
    for name in names:
        if name.isdigit():
            st = _proc_stat(name)
            if st is not None and st[1] == pid and st[0] != "Z":
                out.add(int(name))
    return out


# Run as ``python -I -c _WATCHDOG <parent pid> <pid>...``, in its own session. Every 0.5 s it checks
# that it is still the parent's child; now and then (0.5 s, growing to 10 s) it adds the descendants
# of the processes it watches (Ray's agents are children of the raylet, which dies with the driver
# but leaves them behind). Once the parent is gone it kills every watched process still alive
# (SIGTERM, then SIGKILL after 2 s), each only if its start time is still the one it saw (a pid used
# again by another process is left alone), and exits.
_WATCHDOG = r"""
import os, signal, sys, time

parent = int(sys.argv[1])

def stat(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read()
        fields = raw[raw.rindex(b")") + 2:].split()
        return fields[0], int(fields[1]), fields[19]
    except (OSError, ValueError, IndexError):
        return None

def alive(marks):
    out = {}
    for pid, start in marks.items():
        st = stat(pid)
        if st is not None and st[0] != b"Z" and st[2] == start:
            out[pid] = start
    return out

def grow(marks):
    now = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat(int(name))
            if st is not None and st[0] != b"Z":
                now[int(name)] = st
    kids = {}
    for pid, st in now.items():
        kids.setdefault(st[1], []).append(pid)
    todo = [p for p in alive(marks)]
    while todo:
        for kid in kids.get(todo.pop(), ()):
            if kid not in marks and kid != os.getpid():
                marks[kid] = now[kid][2]
                todo.append(kid)

def kill(marks, sig):
    for pid in marks:
        try:
            os.kill(pid, sig)
        except OSError:
            pass

marks = {}
for pid in map(int, sys.argv[2:]):
    st = stat(pid)
    if st is not None:
        marks[pid] = st[2]
interval, due = 0.5, 0.0
while os.getppid() == parent:
    if time.monotonic() >= due:
        grow(marks)
        interval = min(interval * 1.5, 10.0)
        due = time.monotonic() + interval
    time.sleep(0.5)
grow(marks)
kill(alive(marks), signal.SIGTERM)
end = time.monotonic() + 2.0
while time.monotonic() < end and alive(marks):
    time.sleep(0.1)
kill(alive(marks), signal.SIGKILL)
"""


def _start_watchdog(pids: list[int]):
    """A watchdog process (see ``_WATCHDOG``) for ``pids``, or None (nothing to watch, not Linux)."""
    if not pids or not sys.platform.startswith("linux") or not sys.executable:
        return None
    try:
        return subprocess.Popen([sys.executable, "-I", "-c", _WATCHDOG, str(os.getpid()), *map(str, pids)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except OSError:  # pragma: no cover  (cannot start a process: Ray's own clean-up still applies)
        return None


def _stop_watchdog(proc) -> None:
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover
        proc.kill()
        proc.wait()


def _ray_submitter(ray, tokenizer, opts: EncodeOptions):
    key = tokenizer_key(tokenizer)
    payload = ray.put(tokenizer_payload(tokenizer))
    task = ray.remote(num_cpus=1)(_ray_encode)
    return (lambda texts: task.remote(key, payload, opts, texts)), ray.get


_RAY_TOKENIZERS: dict = {}


def _ray_encode(key, payload, opts, texts):
    tok = _RAY_TOKENIZERS.get(key)
    if tok is None:  # once per worker process
        _RAY_TOKENIZERS.clear()
        tok = _RAY_TOKENIZERS[key] = tokenizer_from_payload(payload)
    return encode_job(tok, opts, texts)


_KEYS: dict = {}  # id(tokenizer) -> (weak reference, hash): to_dict() of a 50k vocabulary takes ~0.1 s


def tokenizer_key(tokenizer) -> str:
    """The tokenizer's content hash: ``content_hash`` (attribute or method) if it has one, else the
    ``hash`` of a tokenmill ``Tokenizer.to_dict()`` (sha256 of its canonical JSON), computed once per object."""
    import weakref

    hit = _KEYS.get(id(tokenizer))
    if hit is not None and hit[0]() is tokenizer:
        return hit[1]
    h = _content_hash(tokenizer)
    try:
        _KEYS[id(tokenizer)] = (weakref.ref(tokenizer), h)
    except TypeError:  # an object without weak references: not cached
        pass
    return h


def _content_hash(tokenizer) -> str:
    h = getattr(tokenizer, "content_hash", None)
    if callable(h):
        h = h()
    if isinstance(h, str) and h:
        return h
    to_dict = getattr(tokenizer, "to_dict", None)
    if to_dict is not None:
        h = to_dict().get("hash")
        if isinstance(h, str):
            return h
    raise ConfigError(f"cannot tell the content hash of a {type(tokenizer).__name__}; a tokenizer for the store "
                      "needs a 'content_hash' (str) or a tokenmill-style to_dict() with a 'hash'")


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)
