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
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ConfigError, InputError
from .merges import learn_merges
from .model import Tokenizer, _names
from .patterns import compiled, resolve_pattern


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
    stop_reason: str  # "vocab_size", "no_pairs", "min_frequency"
    special_tokens_in_text: int  # occurrences of special-token text, excluded from merges

    @property
    def sampled_share(self) -> float:
        return self.bytes_used / self.bytes_seen if self.bytes_seen else 1.0


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
) -> Tokenizer:
    """Train a byte-level BPE tokenizer with ``vocab_size`` ids in all (256 bytes + merges + specials).

    ``texts``: any iterable of documents (streamed). ``pattern``: ``"gpt2"``, ``"gpt4"``, ``"o200k"``,
    a regex, or ``None`` (each document is one chunk). Special-token text inside documents is a
    boundary and never part of a merge. ``sample``: a fraction of documents (``0.1``) or a byte
    budget (``50_000_000`` or ``"50MB"``), chosen deterministically from ``seed``.

    >>> tok = train_bpe(["低" * 30], 258)
    >>> tok.decode([257]), len(tok.encode("低" * 30))
    ('低', 30)
    """
    names = _names(special_tokens)
    num_merges = vocab_size - 256 - len(names)
    if num_merges < 0:
        raise ConfigError(
            f"vocab_size={vocab_size:,d} is smaller than 256 byte tokens + {len(names)} special tokens; "
            f"pass vocab_size >= {256 + len(names)}"
        )
    if min_frequency < 1:
        raise ConfigError(f"min_frequency={min_frequency}; it must be >= 1")
    if max_token_bytes is not None and max_token_bytes < 2:
        raise ConfigError(f"max_token_bytes={max_token_bytes}; it must be >= 2 (or None for no limit)")
    regex_str = resolve_pattern(pattern)
    show = sys.stderr.isatty() if progress is None else progress

    docs = _sampled(texts, sample, seed)
    counts, stats = count_chunks(docs, regex_str, names, progress=show)
    if stats["documents_used"] == 0 or stats["bytes_used"] == 0:
        raise InputError(
            f"the training corpus is empty ({stats['documents_seen']:,d} documents, {stats['bytes_seen']:,d} bytes"
            + (" before sampling" if sample is not None else "")
            + "); pass at least one non-empty document"
        )
    keys = sorted(counts)  # sorted: layout and result never depend on insertion or hash order
    result = _learn(keys, [counts[k] for k in keys], num_merges, min_frequency, max_token_bytes, show)
    if len(result.counts) < num_merges:
        warnings.warn(
            f"training stopped early: learned {len(result.counts):,d} of {num_merges:,d} merges "
            f"({'no pair reaches min_frequency=' + str(min_frequency) if result.stop_reason == 'min_frequency' else 'no pairs left to merge'}); "
            f"vocab_size is {256 + len(result.counts) + len(names):,d}, not {vocab_size:,d}",
            stacklevel=2,
        )
    tok = Tokenizer.from_merges(result.pairs, pattern=regex_str, special_tokens=names, merge_counts=result.counts)
    tok.train_report = TrainReport(
        chunks=sum(counts.values()), distinct_chunks=len(counts), merges=len(result.counts),
        merges_requested=num_merges, stop_reason=result.stop_reason, **stats,
    )
    return tok


def count_chunks(
    docs: Iterable[str], regex_str: str | None, special_tokens: Sequence[str] = (), *, progress: bool = False
) -> tuple[Counter, dict]:
    """Count distinct chunks (as UTF-8 bytes) over documents; returns (counts, stats)."""
    str_counts: Counter = Counter()
    split = compiled(regex_str).findall if regex_str is not None else (lambda t: [t])
    special_re = re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True)))) if special_tokens else None
    n_docs = n_bytes = n_special = 0
    bar = _bar(progress, "counting chunks", "doc")
    for doc in docs:
        if not isinstance(doc, str):
            raise InputError(f"document {n_docs:,d} is a {type(doc).__name__}, not str; pass text documents")
        n_docs += 1
        n_bytes += len(doc.encode("utf-8"))
        pieces = special_re.split(doc) if special_re is not None else [doc]
        n_special += len(pieces) - 1
        for piece in pieces:
            if piece:
                str_counts.update(split(piece))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    counts: Counter = Counter()
    for s, c in str_counts.items():
        counts[s.encode("utf-8")] += c
    stats = dict(documents_used=n_docs, bytes_used=n_bytes, special_tokens_in_text=n_special)
    seen = getattr(docs, "seen", None)
    stats.update(documents_seen=seen[0] if seen else n_docs, bytes_seen=seen[1] if seen else n_bytes)
    return counts, stats


def _learn(keys, weights, num_merges, min_frequency, max_token_bytes, show):
    bar = _bar(show, "merging", "merge", total=num_merges)
    try:
        return learn_merges(keys, weights, num_merges, min_frequency=min_frequency,
                            max_token_bytes=max_token_bytes, on_merge=bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()


def _bar(show: bool, desc: str, unit: str, total=None):
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.5)


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


def _parse_budget(sample) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(sample).lower())
    if not m:
        raise ConfigError(f"sample={sample!r}; pass a fraction in (0, 1], a byte count, or a size like '50MB'")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _sampled(texts: Iterable[str], sample, seed: int):
    """Deterministic document sampling: a fraction (independent per document) or a byte budget
    (the documents with the smallest priorities that fit, so the choice never depends on order)."""
    if sample is None:
        return texts
    out = _Sampled(None)
    if isinstance(sample, float):
        if not 0.0 < sample <= 1.0:
            raise ConfigError(f"sample={sample}; a fraction must be in (0, 1]")
        limit = int(sample * 2**64)

        def gen():
            for i, doc in enumerate(texts):
                out.seen[0] += 1
                out.seen[1] += len(doc.encode("utf-8")) if isinstance(doc, str) else 0
                if _priority(seed, i) < limit:
                    yield doc
        out._it = gen()
        return out
    budget = _parse_budget(sample)
    if budget <= 0:
        raise ConfigError(f"sample={sample!r}; a byte budget must be positive")

    def gen_budget():
        heap: list[tuple[int, int, str, int]] = []  # max-heap by priority: (-prio, index, doc, nbytes)
        total = 0
        for i, doc in enumerate(texts):
            nb = len(doc.encode("utf-8")) if isinstance(doc, str) else 0
            out.seen[0] += 1
            out.seen[1] += nb
            heapq.heappush(heap, (-_priority(seed, i), i, doc, nb))
            total += nb
            while total > budget and heap:
                total -= heapq.heappop(heap)[3]
        yield from (doc for _, _, doc, _ in sorted(heap, key=lambda e: e[1]))
    out._it = gen_budget()
    return out
