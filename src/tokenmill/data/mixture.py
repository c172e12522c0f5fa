"""Mixtures: several token sources drawn in fixed proportions of tokens, deterministically.

::

    Mixture({web: 0.7, code: 0.3}, seed=0)

    web   (2.0 M tokens)   0.7 of every global batch's tokens    0.35 epochs per 1 M training tokens
    code  (0.2 M tokens)   0.3 of every global batch's tokens    1.50 epochs per 1 M training tokens

A mixture is a token source (``len``, ``lengths``, ``get``) over its parts' documents concatenated
(part 0's documents first); what makes it a mixture is how
:class:`tokenmill.torch.TrainingLoader` draws from it: every part is planned on its own (windows,
packs), and every global batch takes from part ``i`` a number of samples within one of its share,
where the share is the weight converted from tokens to samples with the part's mean tokens per
sample. A part that runs out starts its next epoch (reshuffled, window jitter of that epoch): that is
upsampling, and :meth:`Mixture.report` makes it visible.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._arrays import seal
from .._validate import check_int
from ..errors import ConfigError, InputError
from .source import KnownLengths, TokenSource, as_source, check_memory_ids, doc_index, ids_checked


def source_fingerprint(source) -> str:
    """What identifies a token source's content, independent of where it lives on disk.

    A source with a ``fingerprint`` attribute (a token store, a store view, a :class:`Mixture`)
    gives its own; otherwise a sha256 of its document lengths and ids (ids hashed as int64, so the
    same documents give the same fingerprint whatever their dtype).

    >>> source_fingerprint([[1, 2], [3]]) == source_fingerprint([[1, 2], [3]])
    True
    >>> source_fingerprint([[1, 2], [3]]) == source_fingerprint([[1, 2, 3]])
    False
    """
    fp = getattr(source, "fingerprint", None)
    if fp is not None:
        return str(fp)
    src = as_source(source)
    base = src  # a slice of a loss-masked source (data.masked): the flags beneath are part of what it is
    while getattr(base, "origin_doc", None) is not None:
        base = base.base
    if base is not src and getattr(base, "mask_offsets", None) is not None:
        h = hashlib.sha256(b"tokenmill.source.v1.masked\x00" + str(base.fingerprint).encode() + b"\x00")
        return _ids_digest(h, src)
    return _ids_digest(hashlib.sha256(b"tokenmill.source.v1\x00"), src)


def _ids_digest(h, src) -> str:
    """``h`` over ``src``'s lengths and ids (as int64): the fingerprint of a source without one of its own."""
    lengths = np.ascontiguousarray(np.asarray(src.lengths, np.int64))
    h.update(lengths.tobytes())
    tokens, offsets = getattr(src, "token_array", None), getattr(src, "doc_offsets", None)
    if tokens is not None and offsets is not None and len(src):
        offsets = np.asarray(offsets, np.int64)
        lo, hi = int(offsets[0]), int(offsets[len(src)])
        contiguous = np.array_equal(np.diff(offsets[: len(src) + 1]), lengths)
        if contiguous:  # documents back to back: hash the flat array in chunks
            tokens = np.asarray(tokens)
            for a in range(lo, hi, 1 << 24):
                h.update(np.ascontiguousarray(tokens[a : min(a + (1 << 24), hi)], np.int64).tobytes())
            return "sha256:" + h.hexdigest()
    for i in range(len(src)):
        h.update(np.ascontiguousarray(np.asarray(src.get(i)), np.int64).tobytes())
    return "sha256:" + h.hexdigest()


@dataclass(frozen=True)
class PartReport:
    name: str
    weight: float
    documents: int
    tokens: int  # tokens in one epoch of the part
    drawn_tokens: int  # training tokens taken from this part
    epochs: float  # drawn_tokens / tokens

    @property
    def upsampled(self) -> bool:
        return self.epochs > 1.0


@dataclass(frozen=True)
class MixtureReport:
    """How many epochs of each part ``training_tokens`` consume (upsampling made visible).

    ``str(report)`` is a table; ``report.parts`` one :class:`PartReport` per part.
    """

    training_tokens: int
    parts: tuple[PartReport, ...]

    def __str__(self) -> str:
        w = max(4, *(len(p.name) for p in self.parts))
        lines = [f"{self.training_tokens:,d} training tokens:",
                 f"  {'part':<{w}}  weight  {'tokens/epoch':>14}  {'drawn':>14}  epochs"]
        for p in self.parts:
            flag = "  (upsampled: repeats)" if p.upsampled else ""
            lines.append(f"  {p.name:<{w}}  {p.weight:6.3f}  {p.tokens:>14,d}  {p.drawn_tokens:>14,d}  "
                         f"{p.epochs:6.2f}{flag}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"training_tokens": self.training_tokens,
                "parts": [{**p.__dict__, "upsampled": p.upsampled} for p in self.parts]}


class Mixture(KnownLengths):
    """Token sources drawn in proportions of tokens (see the module docstring).

    ``parts``: a dict ``{source: weight}`` or a list of ``(source, weight)`` pairs; weights are
    positive finite real numbers (not bool, not str, not NaN or infinity), normalized to sum to 1.
    In-memory parts (lists, arrays) must hold ids ``>= 0`` (an InputError names part and document). ``names``: one per part (default ``part0``,
    ``part1``, ... or a source's ``name``). ``seed`` shuffles each part's samples per part epoch, together
    with the loader's seed (a ``TrainingLoader`` over the mixture: either seed changes the order).

    >>> a, b = [[1, 2, 3]] * 6, [[7, 8]] * 2
    >>> m = Mixture([(a, 3), (b, 1)], seed=0, names=["a", "b"])
    >>> m.weights.tolist(), len(m), m.lengths.tolist()[-3:], m.get(7).tolist()
    ([0.75, 0.25], 8, [3, 2, 2], [7, 8])
    >>> print(m.report(40))
    40 training tokens:
      part  weight    tokens/epoch           drawn  epochs
      a      0.750              18              30    1.67  (upsampled: repeats)
      b      0.250               4              10    2.50  (upsampled: repeats)
    """

    def __init__(self, parts, *, seed: int = 0, names=None):
        items = list(parts.items()) if isinstance(parts, dict) else list(parts)
        if not items:
            raise ConfigError("a Mixture needs at least one part; pass {source: weight, ...}")
        sources, weights = [], []
        for i, item in enumerate(items):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ConfigError(f"mixture part {i} is {item!r}; pass (source, weight) pairs or a dict")
            src, w = item
            if isinstance(src, Mixture):
                raise ConfigError(f"mixture part {i} is itself a Mixture; list its parts with combined weights")
            if isinstance(w, (bool, np.bool_)) or not isinstance(w, (numbers.Real, np.floating, np.integer)):
                raise ConfigError(f"mixture part {i} has weight {w!r} (a {type(w).__name__}); weights must be "
                                  "positive finite numbers such as 0.7 (not bool, not str)")
            try:
                wf = float(w)
            except OverflowError:  # an int beyond the float range
                wf = math.inf
            if not math.isfinite(wf) or wf <= 0:
                raise ConfigError(f"mixture part {i} has weight {w!r}; weights must be positive and finite "
                                  "(leave a part out instead of giving it weight 0)")
            sources.append(as_source(src))
            weights.append(wf)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError(f"seed={seed!r} must be an integer >= 0")
        self.seed = int(seed)
        if names is None:
            names = [str(getattr(s, "name", None) or f"part{i}") for i, s in enumerate(sources)]
        names = [str(n) for n in names]
        if len(names) != len(sources) or len(set(names)) != len(names):
            raise ConfigError(f"names={names!r}: pass one distinct name per part ({len(sources)} parts)")
        self.names = tuple(names)
        _no_part_twice(sources, items)
        for i, (name, src) in enumerate(zip(self.names, sources)):
            check_memory_ids(src, what=f"mixture part {i} ({name!r}): ")  # in memory, never validated
        _one_vocabulary(sources, self.names)
        self.parts: tuple[TokenSource, ...] = tuple(sources)
        w = np.asarray(weights, np.float64)
        with np.errstate(over="ignore"):
            total = float(w.sum())
        if not math.isfinite(total):  # weights near the float limit: scale them down before the sum
            w = w / w.max()
        self.weights = w / w.sum()
        if not (np.isfinite(self.weights).all() and (self.weights > 0).all()):
            raise ConfigError(f"mixture weights {weights!r} are too far apart to normalize; keep their ratios "
                              "within the float range")
        self._part_lengths = [np.asarray(s.lengths, np.int64) for s in sources]
        for i, (name, lengths) in enumerate(zip(self.names, self._part_lengths)):
            if lengths.size == 0 or int(lengths.sum()) == 0:
                raise InputError(f"mixture part {i} ({name!r}) has {lengths.size:,d} documents and no tokens; "
                                 "remove it or give it data")
        self.doc_base = seal(np.concatenate([[0], np.cumsum([lg.size for lg in self._part_lengths])]).astype(np.int64))
        self._lengths = seal(np.concatenate(self._part_lengths))  # (read-only, as every source's lengths)
        self._fingerprint = None

    # ---- token source over the concatenated parts ------------------------------------------------
    @property
    def ids_checked(self) -> bool:
        return all(ids_checked(p) for p in self.parts)

    def get(self, i: int) -> np.ndarray:
        i = doc_index(i, len(self))
        p = int(np.searchsorted(self.doc_base, i, side="right") - 1)
        return self.parts[p].get(i - int(self.doc_base[p]))

    @property
    def fingerprint(self) -> str:
        """Hash of the parts' fingerprints, names, weights and seed."""
        if self._fingerprint is None:
            # v2 where the seed is not 0: before, a loader ignored a mixture's seed (its order was seed 0's),
            # so a state saved then is refused as other data instead of resumed on another order
            blob = "\x00".join(["tokenmill.mixture.v2" if self.seed else "tokenmill.mixture.v1", str(self.seed)] +
                               [f"{n}\x01{w!r}\x01{source_fingerprint(s)}"
                                for n, w, s in zip(self.names, self.weights.tolist(), self.parts)])
            self._fingerprint = "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
        return self._fingerprint

    def part_of(self, doc_ids) -> np.ndarray:
        """The part of every document id of the concatenated numbering (-1 stays -1: padding)."""
        from .._validate import check_array

        # (any shape, as a batch's doc_ids; an id past the last document had been given a part that is none)
        d = check_array(doc_ids, "doc_ids", ndim=None, min=-1, max=len(self) - 1)
        return np.where(d >= 0, np.searchsorted(self.doc_base, d, side="right") - 1, -1)

    def report(self, training_tokens: int, *, part_tokens=None, drawn=None) -> MixtureReport:
        """Epochs of each part that ``training_tokens`` tokens consume. ``part_tokens``: the tokens of one
        epoch of each part as the loader's plan holds them (a ``TrainingLoader``'s
        ``schedule.stream(i, 0).tokens``), in the units ``training_tokens`` counts; default: the tokens of the
        documents, right for documents packed whole. Overlapping windows hold a token as often as it is
        covered (stride half the window: twice), so their epochs are ``part_tokens``' (``tokenmill loader``
        passes them): against the documents' tokens a part read 0.8 times read as 1.6, "upsampled". ``drawn``: the
        tokens each part gives (``schedule.epoch_counts(e)["part_tokens"]``, which add up to ``training_tokens``),
        where they are known; default: ``training_tokens`` split by the weights, what a long run tends to (an
        epoch draws whole samples: a part's share there is a sample or so off)."""
        if isinstance(training_tokens, bool) or int(training_tokens) != training_tokens or training_tokens < 0:
            raise ConfigError(f"training_tokens={training_tokens!r} must be an integer >= 0")
        n = int(training_tokens)
        if part_tokens is None:
            part_tokens = [int(lengths.sum()) for lengths in self._part_lengths]
        else:
            part_tokens = [check_int(t, "part_tokens", min=0) for t in part_tokens]
            if len(part_tokens) != len(self.names):
                raise ConfigError(f"part_tokens has {len(part_tokens)} entries for {len(self.names)} parts")
        if drawn is None:
            drawn = _apportion(self.weights, n)
        else:
            drawn = np.asarray([check_int(t, "drawn", min=0) for t in drawn], np.int64)
            if drawn.size != len(self.names) or int(drawn.sum()) != n:
                raise ConfigError(f"drawn holds {drawn.size} entries adding up to {int(drawn.sum()):,d}; pass one per "
                                  f"part ({len(self.names)}), adding up to training_tokens={n:,d}")
        parts = []
        for name, w, lengths, tokens, d in zip(self.names, self.weights.tolist(), self._part_lengths, part_tokens,
                                               drawn.tolist()):
            parts.append(PartReport(name, w, int(lengths.size), tokens, int(d), d / tokens if tokens else 0.0))
        return MixtureReport(n, tuple(parts))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}: {w:.3f} ({len(s):,d} docs)" for n, w, s in zip(self.names, self.weights, self.parts))
        return f"Mixture({inner}; seed={self.seed})"


def _no_part_twice(sources, items) -> None:
    """A ConfigError where two parts are one source: one object given twice, or two handles of one store folder (its
    documents would be drawn twice over, each copy with its own weight; `tokenmill loader` refuses it too)."""
    import os

    seen: dict = {}
    for i, (src, (given, _)) in enumerate(zip(sources, items)):
        path = getattr(src, "path", None)
        keys = [("object", id(given))] + ([("folder", os.path.realpath(path))] if path is not None else [])
        for key in keys:
            if key in seen:
                raise ConfigError(f"mixture parts {seen[key]} and {i} are one source ({'the same object' if key[0] == 'object' else 'the store ' + repr(str(path))}): "
                                  "its documents would be drawn twice over; give it once, with the sum of the weights")
            seen[key] = i


def _apportion(fractions: np.ndarray, total: int) -> np.ndarray:
    """Integers summing to ``total``, each the floor or ceil of ``fractions * total`` (largest remainder)."""
    exact = np.asarray(fractions, np.float64) * total
    base = np.floor(exact).astype(np.int64)
    short = int(total - base.sum())
    if short > 0:
        base[np.argsort(-(exact - base), kind="stable")[:short]] += 1
    return base


def allocate_counts(fractions, per_batch: int, num_batches: int) -> np.ndarray:
    """``(num_batches, k)`` samples of each part per global batch of ``per_batch`` samples.

    Every batch gives part ``i`` either ``floor(f_i * per_batch)`` or one more (within one sample of
    its share), every row sums to ``per_batch``, and the running totals stay within one sample of
    ``f_i * per_batch * batches`` (the extra samples go to the parts furthest behind, ties to the
    lower index). Deterministic.

    >>> allocate_counts([0.5, 0.3, 0.2], 4, 5).tolist()
    [[2, 1, 1], [2, 1, 1], [2, 2, 0], [2, 1, 1], [2, 1, 1]]
    """
    f = np.asarray(fractions, np.float64)
    exact = f * per_batch
    base = np.floor(exact).astype(np.int64)
    extra = int(per_batch - base.sum())
    out = np.tile(base, (int(num_batches), 1))
    if extra == 0 or num_batches == 0:
        return out
    frac = (exact - base).tolist()
    k = len(frac)
    debt = [0.0] * k
    order_cache = list(range(k))
    for g in range(int(num_batches)):
        for i in range(k):
            debt[i] += frac[i]
        order_cache.sort(key=lambda i: (-debt[i], i))
        for i in order_cache[:extra]:
            out[g, i] += 1
            debt[i] -= 1.0
    return out


def _one_vocabulary(sources, names) -> None:
    """A mixture's parts share one vocabulary: parts whose tokenizers are known (a store's content hash) must
    have the same one, and parts that declare a vocabulary size the same size (a store of GPT-2 ids mixed
    with one of another tokenizer's gave batches of ids from two vocabularies, silently). Sources that
    declare neither (arrays, Megatron files) are not compared."""
    seen: dict = {}
    for key, label in (("tokenizer_hash", "tokenizers (content hashes"), ("vocab_size", "vocabulary sizes (sizes")):
        for i, (name, src) in enumerate(zip(names, sources)):
            v = getattr(src, key, None)
            if v is None or (key == "tokenizer_hash" and v == "external"):  # (ids made outside: unknown)
                continue
            if key in seen and seen[key][2] != v:
                j, other, w = seen[key]
                guessed = [k for k in (j, i) if getattr(sources[k], "tokenizer_hash", None) == "external"]
                hint = ("" if key != "vocab_size" or not guessed else
                        f"; part {guessed[0]} holds ids made outside tokenmill, whose store records the vocabulary "
                        "size it was given, else its largest id + 1: if both parts come from one tokenizer, save that "
                        "part again with vocab_size=tokenizer.vocab_size (MaskedSource.save, "
                        "TokenStore.from_token_arrays)")
                raise ConfigError(f"mixture parts {j} ({other!r}) and {i} ({name!r}) have different {label} {w!r} "
                                  f"and {v!r}); a mixture's ids must come from one vocabulary: build every part with "
                                  f"the same tokenizer{hint}")
            seen.setdefault(key, (i, name, v))
