"""``train_bpe``: stream documents, count distinct chunks, learn merges incrementally.

    documents ──(optional sample)──► split at special tokens ──► pattern split ──► distinct chunks
    with 64-bit counts ──► incremental merge loop (merges.learn_merges) ──► Tokenizer

Memory grows with the number of distinct chunks, not with the corpus. The result is exactly
``reference.train_bpe_naive`` applied to the same chunks (tested), and identical across runs,
processes and ``PYTHONHASHSEED`` values: every tie is broken by the pair itself, never by hash order.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..._validate import check_int, check_offsets, check_texts
from ...errors import ConfigError, InputError, interruptible, warn
from ..model import Tokenizer
from ..pretokenize.patterns import resolve_pattern, split_with_gaps
from ..special import special_token_names
from .merges import learn_merges_arrays


@dataclass(frozen=True)
class TrainReport:
    """What training saw and did, in counts."""

    documents_seen: int
    documents_used: int  # after sampling
    bytes_seen: int
    bytes_used: int
    chunks: int  # pre-tokens counted (with repetition)
    distinct_chunks: int
    merges: int
    merges_requested: int
    stop_reason: str  # "vocab_size", "no_pairs", "min_frequency", "max_token_bytes"
    special_tokens_in_text: int  # occurrences of special-token text, excluded from merges

    @property
    def sampled_share(self) -> float:
        return self.bytes_used / self.bytes_seen if self.bytes_seen else 1.0


@interruptible
def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    pattern: str | None = "gpt4",
    special_tokens: Sequence[str] = (),
    min_frequency: int = 1,
    max_token_bytes: int | None = None,
    sample: float | int | str | None = None,
    seed: int = 0,
    progress: bool | None = None,
    num_threads: int | None = None,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer with ``vocab_size`` ids in all (256 bytes + merges + specials).

    ``texts``: any iterable of documents (streamed). ``pattern``: ``"gpt2"``, ``"gpt4"``, ``"o200k"``,
    a regex, or ``None`` (each document is one chunk); a custom regex runs under a time budget
    (``patterns.regex_budget``). ``special_tokens``: a list of strings (a single ``str`` is one
    token, not one per character); their text inside documents is a boundary and never part of a
    merge. ``vocab_size`` larger than the input can fill stops early, with a warning giving the
    counts: merges are capped at what the input holds, so memory follows the input. ``sample``: a fraction of documents (``0.1``) or a byte
    budget (``50_000_000`` or ``"50MB"``), chosen deterministically from ``seed``. ``num_threads``:
    threads that split and count (default: all cores); the result does not depend on it.

    >>> tok = train_bpe(["低" * 30], 258)
    >>> tok.decode([257]), len(tok.encode("低" * 30))
    ('低', 30)
    """
    check_texts(texts, "train_bpe", "documents")  # (one str was one document per character, in silence)
    if isinstance(special_tokens, str):  # one token, not one per character
        special_tokens = [special_tokens]
    if isinstance(special_tokens, Mapping):  # (its ids had been dropped in silence)
        raise ConfigError("special_tokens is a dict, but training gives special tokens the ids after the learned "
                          "vocabulary (in list order), not ids of your choosing; pass a list of names")
    names = special_token_names(special_tokens, takes_ids=False)
    vocab_size = check_int(vocab_size, "vocab_size")
    min_frequency = check_int(min_frequency, "min_frequency", min=1)
    max_token_bytes = check_int(max_token_bytes, "max_token_bytes", none=True)
    seed = check_int(seed, "seed", min=0)
    if num_threads is not None:
        num_threads = check_int(num_threads, "num_threads", min=1, max=1024)
    num_merges = vocab_size - 256 - len(names)
    if num_merges < 0:
        raise ConfigError(
            f"vocab_size={vocab_size:,d} is smaller than 256 byte tokens + {len(names)} special tokens; "
            f"pass vocab_size >= {256 + len(names)}"
        )
    if min_frequency < 1:
        raise ConfigError(f"min_frequency={min_frequency}; it must be >= 1")
    if max_token_bytes is not None and max_token_bytes < 2:
        raise ConfigError(f"max_token_bytes={max_token_bytes} (CLI: --max-token-bytes); it must be >= 2 (or left out "
                          "for no limit)")
    regex_str = resolve_pattern(pattern)
    show = sys.stderr.isatty() if progress is None else progress

    docs = _sampled(texts, sample, seed)
    counts, stats = count_chunks(docs, regex_str, names, progress=show, num_threads=num_threads)
    if stats["documents_used"] == 0 or stats["bytes_used"] == 0:
        fraction, budget = _parse_sample(sample) if sample is not None else (None, None)
        said = (f"a byte budget of {budget:,d} byte{'s' if budget != 1 else ''} (an integer is a byte count; 1.0 "
                "is every document)" if budget is not None else
                f"a fraction of {fraction:g} of the documents" if fraction is not None else "")
        n = stats['documents_seen']
        raise InputError(
            f"the training corpus is empty ({n:,d} document{'s' if n != 1 else ''}, {stats['bytes_seen']:,d} bytes"
            + (" before sampling" if sample is not None else "")
            + (f"); sample={sample!r}, {said}, kept none of them: raise it (a fraction such as 0.5, or a byte budget "
               "such as '50MB')" if sample is not None and stats["bytes_seen"] else
               "); pass at least one non-empty document")
        )
    # The merges do not depend on the order of the chunks (ties are broken by the pair itself), so
    # the table's order, which depends on the thread count, never reaches the result.
    result = _learn(counts, num_merges, min_frequency, max_token_bytes, show)
    stop = result.stop_reason
    if stop == "no_pairs" and max_token_bytes is not None and len(counts) and counts.lengths.max() > max_token_bytes:
        # a chunk longer than the limit is two tokens or more: pairs were left, each making a token past it (this
        # had read "no pairs left to merge", sending the user to the corpus rather than the option)
        stop = "max_token_bytes"
    if len(result.counts) < num_merges:
        why = {"min_frequency": f"no pair reaches min_frequency={min_frequency}",
               "max_token_bytes": f"every pair left would make a token longer than max_token_bytes={max_token_bytes}",
               }.get(stop, "no pairs left to merge")
        warn(f"training stopped early: learned {len(result.counts):,d} of {num_merges:,d} merges ({why}); "
             f"vocab_size is {256 + len(result.counts) + len(names):,d}, not {vocab_size:,d}")
    tok = Tokenizer.from_merges(result.pairs, pattern=regex_str, special_tokens=names, merge_counts=result.counts)
    tok.train_report = TrainReport(
        chunks=int(counts.counts.sum()), distinct_chunks=len(counts), merges=len(result.counts),
        merges_requested=num_merges, stop_reason=stop, **stats,
    )
    return tok


@dataclass(frozen=True)
class ChunkCounts:
    """Distinct chunks laid end to end: chunk ``k`` is ``data[offsets[k]:offsets[k+1]]``, seen ``counts[k]`` times."""

    data: np.ndarray  # uint8
    lengths: np.ndarray  # int64
    counts: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.lengths)

    def to_dict(self) -> dict[bytes, int]:
        ends = np.cumsum(self.lengths).tolist()
        raw = self.data.tobytes()
        return {raw[e - n : e]: c for e, n, c in zip(ends, self.lengths.tolist(), self.counts.tolist())}

    @classmethod
    def from_dict(cls, counts: dict[bytes, int]) -> "ChunkCounts":
        keys = list(counts)
        return cls(np.frombuffer(b"".join(keys), dtype=np.uint8),
                   np.fromiter((len(k) for k in keys), np.int64, len(keys)),
                   np.fromiter((counts[k] for k in keys), np.int64, len(keys)))


class ChunkCounter:
    """A compiled byte-keyed hash table of chunk counts (``_count_kernels``)."""

    def __init__(self):
        self.arena = np.empty(1 << 20, np.uint8)
        self.starts = np.empty(1 << 14, np.int64)
        self.lens = np.empty(1 << 14, np.int64)
        self.counts = np.empty(1 << 14, np.int64)
        self.hashes = np.empty(1 << 14, np.uint64)
        self.table = np.full(1 << 15, -1, np.int64)
        self.sizes = np.zeros(2, np.int64)

    def add(self, data: np.ndarray, offsets: np.ndarray, weight: int = 1) -> None:
        """Count the chunks ``data[offsets[k]:offsets[k+1]]`` (``data``: 1-D uint8; ``offsets``: int64,
        non-decreasing, from 0 to ``data.size``), each ``weight`` times. Checked: the kernel does not."""
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
            raise ConfigError("data must be a 1-D uint8 array (np.frombuffer(text.encode(), np.uint8))")
        offsets = check_offsets(offsets, "offsets", n=data.size, error=ConfigError)
        weight = check_int(weight, "weight", min=1, max=2**40)
        self._add(np.ascontiguousarray(data), offsets, weight)

    def _add(self, data: np.ndarray, offsets: np.ndarray, weight: int = 1) -> None:
        """``add`` for offsets straight from ``split_offsets`` (a kernel that guarantees the contract)."""
        from . import _count_kernels as K

        (self.arena, self.starts, self.lens, self.counts, self.hashes, self.table) = K.count_into(
            data, offsets, weight, self.arena, self.starts, self.lens, self.counts, self.hashes, self.table, self.sizes)

    def merge(self, other: "ChunkCounter") -> None:
        from . import _count_kernels as K

        n = int(other.sizes[0])
        (self.arena, self.starts, self.lens, self.counts, self.hashes, self.table) = K.merge_into(
            self.arena, self.starts, self.lens, self.counts, self.hashes, self.table, self.sizes,
            other.arena, other.starts, other.lens, other.counts, n)

    def result(self) -> ChunkCounts:
        n, size = int(self.sizes[0]), int(self.sizes[1])
        return ChunkCounts(self.arena[:size].copy(), self.lens[:n].copy(), self.counts[:n].copy())


def count_chunks(
    docs: Iterable[str],
    regex_str: str | None,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
    num_threads: int | None = None,
) -> tuple[ChunkCounts, dict]:
    """Count distinct chunks (as UTF-8 bytes) over documents; returns (counts, stats).

    For every pattern a compiled matcher runs (the presets, the Llama 3 / Qwen family, and the regexes
    the general compiled splitter takes: ``pretokenize.splitter.has_compiled``) the split and the counting
    are compiled kernels that release the GIL, run on ``num_threads`` threads (default: all cores), each
    into its own table; the tables are merged at the end. Other patterns (and ``None``) are counted by
    ``regex`` and a Counter, on the calling thread. Counts do not depend on the number of threads, the
    document order or the path taken.
    """
    from ..pretokenize.splitter import has_compiled

    special_re = (re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True))))
                  if special_tokens else None)
    bar = _bar(progress, "counting chunks", "B", unit_scale=True)
    stats = dict(documents_used=0, bytes_used=0, special_tokens_in_text=0)

    def pieces():
        for doc in docs:
            data = doc_utf8(doc, stats["documents_used"])
            stats["documents_used"] += 1
            stats["bytes_used"] += len(data)
            if bar is not None:
                bar.update(len(data))
            if special_re is None:
                yield doc, data
                continue
            parts = special_re.split(doc)
            stats["special_tokens_in_text"] += len(parts) - 1
            for part in parts:
                if part:
                    yield part, part.encode("utf-8")

    try:
        if regex_str is not None and has_compiled(regex_str):
            counts = _count_compiled_first(pieces(), regex_str, num_threads)
        else:
            counts = _count_python(pieces(), regex_str)
    finally:
        if bar is not None:
            bar.close()
    seen = getattr(docs, "seen", None)
    stats.update(documents_seen=seen[0] if seen else stats["documents_used"],
                 bytes_seen=seen[1] if seen else stats["bytes_used"])
    return counts, stats


# A first run (counting kernels not compiled yet) counts up to this many bytes with the twin
# (``regex`` + Counter, ~1 MB/s) instead of compiling the splitter and counter (~20 s).
FIRST_RUN_PYTHON_BYTES = 1 << 21
# ... and learns merges over up to this many bytes of distinct chunks with the merge loop's twin.
FIRST_RUN_PYTHON_SYMBOLS = 1 << 19


def _count_compiled_first(pieces, regex_str, num_threads) -> ChunkCounts:
    """Compiled counting, or on a first run over a small corpus the twin (same counts): the pieces are
    read up to FIRST_RUN_PYTHON_BYTES; if the corpus ends there the twin counts them, else they are
    counted with the rest by the compiled kernels."""
    from ..._jit import python_first
    from ..pretokenize.splitter import split_kernel
    from . import _count_kernels

    head, size = [], 0
    for piece in pieces:
        head.append(piece)
        size += len(piece[1])
        if size > FIRST_RUN_PYTHON_BYTES:
            return _count_compiled(itertools.chain(head, pieces), regex_str, num_threads)
    if python_first("count", [split_kernel(regex_str), _count_kernels.count_into], size, FIRST_RUN_PYTHON_BYTES):
        return _count_python(head, regex_str)
    return _count_compiled(head, regex_str, num_threads)


def _count_python(pieces, regex_str) -> ChunkCounts:
    """The readable twin (and the path for custom regexes): a Counter over split strings."""
    str_counts: Counter = Counter()
    split = (lambda t: split_with_gaps(regex_str, t)) if regex_str is not None else (lambda t: [t])
    for text, _ in pieces:
        str_counts.update(split(text))
    counts: Counter = Counter()
    for s, c in str_counts.items():
        counts[s.encode("utf-8")] += c
    return ChunkCounts.from_dict(counts)


def _count_compiled(pieces, regex_str, num_threads) -> ChunkCounts:
    import os
    import queue
    import threading

    from ..pretokenize.splitter import compiled_offsets

    n = max(1, num_threads or os.cpu_count() or 1)
    counters = [ChunkCounter() for _ in range(n)]
    work: queue.Queue = queue.Queue(maxsize=4 * n)
    errors: list[BaseException] = []

    def worker(counter: ChunkCounter):
        while True:
            batch = work.get()
            if batch is None:
                return
            if errors:
                continue
            try:
                # one split and one count a batch: each document split on its own (``doc_offsets``: no
                # chunk crosses one), where a call per document cost ~10 us (334K lines of English: 4.5 s
                # against 1.1 s for the same text as one document)
                buf = np.frombuffer(batch[0] if len(batch) == 1 else b"".join(batch), dtype=np.uint8)
                docs = None if len(batch) == 1 else np.cumsum([0, *map(len, batch)], dtype=np.int64)
                counter._add(buf, compiled_offsets(buf, regex_str, doc_offsets=docs))
            except BaseException as e:  # noqa: BLE001  (re-raised in the main thread, whatever it is)
                errors.append(e)

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in counters]
    for t in threads:
        t.start()
    try:
        batch, size = [], 0
        for _, data in pieces:
            batch.append(data)
            size += len(data)
            if size >= 1 << 20:
                work.put(batch)
                batch, size = [], 0
        if batch:
            work.put(batch)
    finally:
        for _ in threads:
            work.put(None)
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    total = counters[0]
    for other in counters[1:]:
        total.merge(other)
    return total.result()


def _learn(counts: ChunkCounts, num_merges, min_frequency, max_token_bytes, show):
    bar = _bar(show, "merging", "merge", total=num_merges)
    try:
        from ..._jit import python_first
        from . import _train_kernels

        twin = python_first("merge", _train_kernels.learn_merges_kernel, int(counts.data.size),
                            FIRST_RUN_PYTHON_SYMBOLS)
        return learn_merges_arrays(counts.data, counts.lengths, counts.counts, num_merges, min_frequency=min_frequency,
                                   max_token_bytes=max_token_bytes, on_merge=bar.update if bar else None,
                                   backend="python" if twin else "numba")
    finally:
        if bar is not None:
            bar.close()


def _bar(show: bool, desc: str, unit: str, total=None, unit_scale=False):
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr, mininterval=0.5)


# --------------------------------------------------------------------------- sampling
class _Sampled:
    """Iterator over the sampled documents that remembers how much it saw (documents, bytes)."""

    def __init__(self, it):
        self._it = it
        self.seen = [0, 0]

    def __iter__(self):
        return self._it


def _priority(seed: int, index: int) -> int:
    """A 64-bit pseudo-random priority for document ``index``, a pure function of (seed, index)."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _parse_sample(sample) -> tuple[float | None, int | None]:
    """``(fraction, None)`` or ``(None, byte budget)`` of ``train_bpe``'s ``sample``: a float (or numpy
    float, or a str such as ``"0.1"`` / ``"1e-1"``) in (0, 1] is a fraction of documents; an int, a str of
    digits (``"1e6"`` too) or a size (``"50MB"``) is a byte budget."""
    if isinstance(sample, (bool, np.bool_)):
        raise ConfigError(f"sample={sample!r}; pass a fraction in (0, 1], a byte count, or a size like '50MB'")
    text = str(sample).strip().lower()
    number = isinstance(sample, str) and re.fullmatch(r"(\d+\.\d*|\.\d+|\d+(\.\d*)?e[+-]?\d+)", text)
    if number and "." not in text and float(text).is_integer() and float(text) > 1:  # "1e6": a byte count
        return None, _positive_budget(int(float(text)), sample)  # ("2.0" is a float, as 2.0 is: refused below)
    if isinstance(sample, (float, np.floating)) or number:
        f = float(sample)
        if not 0.0 < f <= 1.0:
            raise ConfigError(f"sample={sample!r}; a fraction must be in (0, 1] (a byte budget is an int or a size "
                              "like '50MB')")
        return f, None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?", text)
    if not m:
        raise ConfigError(f"sample={sample!r}; pass a fraction in (0, 1], a byte count, or a size like '50MB'")
    power = "kmgt".index(m.group(2)) + 1 if m.group(2) else 0
    scale = (1024 if m.group(3) else 1000) ** power  # (MB: 10**6 bytes; MiB: 2**20)
    return None, _positive_budget(int(float(m.group(1)) * scale), sample)


def _positive_budget(budget: int, sample) -> int:
    if budget <= 0:
        raise ConfigError(f"sample={sample!r}; a byte budget must be positive")
    return budget


def doc_utf8(doc, index: int) -> bytes:
    """The UTF-8 of document ``index``, or an InputError naming it (not a str, a lone surrogate): the
    sampler checks every document by its index in the input, the counter the documents it counts."""
    if not isinstance(doc, str):
        raise InputError(f"document {index:,d} is a {type(doc).__name__}, not str; pass text documents")
    try:
        return doc.encode("utf-8")
    except UnicodeEncodeError:
        from ..surrogates import lone_surrogate_error

        raise lone_surrogate_error(doc, f"document {index:,d}") from None


def _sampled(texts: Iterable[str], sample, seed: int):
    """Deterministic document sampling: a fraction (independent per document) or a byte budget: the
    documents in order of a pseudo-random priority (of the seed and each document's index in ``texts``), up
    to the first that would overflow the budget, read in one pass. A document larger than the whole budget never
    takes part: it cannot fit, and it stopped the others (one of 50 KB first by priority in a 20 KB
    budget kept none; 5 MB of real text used 2.5 MB). Every document is checked here, sampled or not,
    and named by its index in ``texts``."""
    if sample is None:
        return texts
    out = _Sampled(None)
    fraction, budget = _parse_sample(sample)
    if fraction is not None:
        limit = int(fraction * 2**64)

        def gen():
            for i, doc in enumerate(texts):
                out.seen[0] += 1
                out.seen[1] += len(doc_utf8(doc, i))
                if _priority(seed, i) < limit:
                    yield doc
        out._it = gen()
        return out

    def gen_budget():
        heap: list[tuple[int, int, str, int]] = []  # max-heap by priority: (-prio, index, doc, nbytes)
        total = 0
        # the priority of the first document known to overflow: it and every later one are out, whenever they
        # come (a later-priority document that arrived after it and fitted had been kept)
        cutoff = 2**64
        for i, doc in enumerate(texts):
            nb = len(doc_utf8(doc, i))
            out.seen[0] += 1
            out.seen[1] += nb
            prio = _priority(seed, i)
            if nb > budget or prio >= cutoff:
                continue
            heapq.heappush(heap, (-prio, i, doc, nb))
            total += nb
            while total > budget:  # the last by priority leaves: the prefix up to it overflows
                neg, _, _, dropped = heapq.heappop(heap)
                total -= dropped
                cutoff = -neg
        yield from (doc for _, _, doc, _ in sorted(heap, key=lambda e: e[1]))
    out._it = gen_budget()
    return out
