"""Padding: one sequence per row, padded on the right, and length-grouped batching to waste less.

::

    A = [BOS 甲 乙 EOS], B = [BOS 丙 EOS]  ->  pad_batch([A, B], pad_id=PAD)

    input_ids   BOS 甲  乙  EOS        labels   -  甲  乙  EOS       (- = -100)
                BOS 丙  EOS PAD                 -  丙  EOS -

    8 positions, 7 non-pad (87.5%), 5 effective targets (3 + 2): not 8 "training tokens".

Each row's first label is ignored (nothing before it to predict from) and padding is found from
the lengths, so with ``pad_id == EOS`` the real EOS keeps its label.
"""

from __future__ import annotations

import itertools
from typing import Iterator, Sequence

import numpy as np

from .._validate import check_array, check_bool, check_int, document_lengths
from ..conventions import IGNORE_INDEX
from ..errors import ConfigError
from .batch import Batch
from .layout import assemble


def pad_batch(seqs: Sequence[Sequence[int] | np.ndarray], *, pad_id: int, max_length: int | None = None,
              pad_to_multiple_of: int | None = None, truncation: bool = False,
              doc_ids: Sequence[int] | np.ndarray | None = None,
              starts: Sequence[int] | np.ndarray | None = None,
              labels: Sequence[Sequence[int] | np.ndarray] | None = None,
              loss_mask: Sequence[Sequence[int] | np.ndarray] | None = None) -> Batch:
    """Pad sequences of ids on the right into a :class:`Batch` of shape ``(len(seqs), T)``.

    ``T`` is ``max_length`` if given (sequences longer than it are an error unless
    ``truncation=True``, which cuts them and counts the cut tokens in ``batch.truncated_tokens``),
    else the longest sequence; then rounded up to ``pad_to_multiple_of``. ``doc_ids`` / ``starts``
    name where each sequence comes from (default: document ``i``, offset 0), e.g. for windows, so that
    :meth:`Batch.stats` can count targets scored more than once. ``labels``: each sequence's own labels (at the
    input positions, ``-100`` or the id there), kept instead of the rule above, e.g. the ``labels`` of windows a
    plan of ``score="new"`` or with a template made (padding stays ``-100``; cut with the sequence).
    ``loss_mask``: each sequence's flags, one per id, 1/True = a target (supervised fine-tuning: the answer, not the
    prompt; see :class:`~tokenmill.data.masked.MaskedSource`): the label of every id flagged 0 becomes ``-100``,
    after the rules above (a sequence's first label stays ignored).

    >>> b = pad_batch([[1, 10, 11, 2], [1, 12, 2]], pad_id=2)   # pad id == EOS id
    >>> b.labels.tolist()                                       # the real EOS keeps its label
    [[-100, 10, 11, 2], [-100, 12, 2, -100]]
    >>> s = b.stats(); (s.positions, s.non_pad, s.targets)
    (8, 7, 5)
    >>> pad_batch([[1, 2, 3]], pad_id=0, pad_to_multiple_of=4).input_ids.tolist()
    [[1, 2, 3, 0]]
    """
    truncation = check_bool(truncation, "truncation")
    arrays = _as_id_arrays(seqs)
    if not arrays:
        raise ConfigError("pad_batch got 0 sequences; pass at least one")
    lengths = np.fromiter((a.size for a in arrays), np.int64, len(arrays))
    T = int(lengths.max()) if max_length is None else _positive(max_length, "max_length")
    truncated = int(np.maximum(lengths - T, 0).sum())
    if truncated and not truncation:
        i = int(np.argmax(lengths > T))
        raise ConfigError(f"sequence {i} has {int(lengths[i]):,d} tokens, more than max_length={T:,d}; "
                          "pass truncation=True to cut (cut tokens are counted) or raise max_length")
    kept = np.minimum(lengths, T)  # (cut at max_length, before the rows round up: the room past it is padding)
    if pad_to_multiple_of is not None:
        m = _positive(pad_to_multiple_of, "pad_to_multiple_of")
        T = -(-T // m) * m
    n = len(arrays)
    doc = np.arange(n, dtype=np.int64) if doc_ids is None else _index_array(doc_ids, n, "doc_ids")
    start = np.zeros(n, np.int64) if starts is None else _index_array(starts, n, "starts")

    # Empty sequences become rows of padding only.
    nonempty = np.flatnonzero(kept > 0)
    pieces = [arrays[i] for i in nonempty.tolist()]

    def fill(out: np.ndarray, dst: np.ndarray) -> None:
        for a, d, k in zip(pieces, dst.tolist(), kept[nonempty].tolist()):
            out[d : d + k] = a[:k]

    given = None if labels is None else _given_labels(labels, arrays)
    flags = None if loss_mask is None else _given_flags(loss_mask, arrays)
    batch = assemble(fill, nonempty.astype(np.int64), doc[nonempty], start[nonempty], kept[nonempty],
                     num_rows=n, row_length=max(T, 1), pad_id=pad_id, truncated_tokens=truncated)
    if given is not None:
        for i, (g, k) in enumerate(zip(given, kept.tolist())):
            batch.labels[i, :k] = g[:k]
    if flags is not None:
        for i, (f, k) in enumerate(zip(flags, kept.tolist())):
            batch.labels[i, :k][~f[:k]] = IGNORE_INDEX
    return batch


def _given_flags(loss_mask, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """``pad_batch``'s ``loss_mask``: one array of 0/1 (or bool) flags per sequence, as long as it, as bools."""
    from ..data.masked import document_mask

    if isinstance(loss_mask, (str, bytes)):
        raise ConfigError("loss_mask is text; pass one array of 0/1 flags per sequence (1 = a target)")
    masks = list(loss_mask)
    if len(masks) != len(arrays):
        raise ConfigError(f"loss_mask has {len(masks):,d} entries for {len(arrays):,d} sequences; pass one per sequence")
    return [document_mask(m, i, a.size, "sequence").view(bool) for i, (m, a) in enumerate(zip(masks, arrays))]


def _given_labels(labels, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """``pad_batch``'s ``labels``: one per sequence, as long as it, each entry ``-100`` or the sequence's id there
    (labels sit at the input positions: any other value would train the model on a token the row does not hold)."""
    labels = list(labels)
    if len(labels) != len(arrays):
        raise ConfigError(f"labels has {len(labels):,d} entries for {len(arrays):,d} sequences; pass one per sequence")
    out = []
    for i, (lab, ids) in enumerate(zip(labels, arrays)):
        lab = check_array(lab, f"labels {i}", min=IGNORE_INDEX)
        if lab.shape != ids.shape:
            raise ConfigError(f"labels {i} has {lab.size:,d} entries but sequence {i} {ids.size:,d} ids; pass a label "
                              "for every position (-100 where it is no target)")
        bad = (lab != IGNORE_INDEX) & (lab != ids)
        if bad.any():
            j = int(np.argmax(bad))
            raise ConfigError(f"labels {i} holds {int(lab[j]):,d} at position {j:,d}, where sequence {i} holds id "
                              f"{int(ids[j]):,d}: a label is -100 or the id at its position (labels sit at the input "
                              "positions; the loss shifts them)")
        out.append(lab)
    return out


def _as_id_arrays(seqs) -> list[np.ndarray]:
    """Each sequence as a 1-D int64 array of ids (``_as_ids``), checked all at once where they are all lists or
    all 1-D arrays of integers (a ``check_array`` a sequence was half the time of a batch of 8 short ones),
    else, or where one is at fault, one by one: that names it."""
    seqs = list(seqs)
    flat = None
    try:
        if seqs and all(type(s) is list for s in seqs):
            items = list(itertools.chain.from_iterable(seqs))
            # (numpy reads [1, True] as [1, 1]: a list holding a bool goes one by one, where check_array names it)
            flat = None if bool in map(type, items) else np.asarray(items)
        elif seqs and all(type(s) is np.ndarray and s.ndim == 1 for s in seqs):
            flat = np.concatenate(seqs)
    except (ValueError, TypeError, OverflowError):  # ragged or nested items, no numbers: named below
        flat = None
    if (flat is not None and flat.ndim == 1 and flat.dtype.kind in "iu"
            and (flat.size == 0 or (int(flat.min()) >= 0 and int(flat.max()) < 2**63))):
        bounds = np.cumsum([0] + [len(s) for s in seqs]).tolist()
        flat = flat.astype(np.int64, copy=False)
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return [_as_ids(s, i) for i, s in enumerate(seqs)]


def _as_ids(seq, i: int) -> np.ndarray:
    # (a negative id is no token: -100 would become an ignored label, a target dropped silently)
    return check_array(seq, f"sequence {i}", min=0)


def _positive(value, name: str) -> int:
    return check_int(value, name, min=1, max=2**62)


def _index_array(values, n: int, name: str) -> np.ndarray:
    # (doc id -1 marks padding in a batch: a real row named so read as padding in its blocks and stats; a start
    # near 2**63 wrapped to negative token offsets once its row's positions were added)
    a = check_array(values, name, min=0, max=2**62, error=ConfigError)
    if a.shape != (n,):
        raise ConfigError(f"{name} has shape {a.shape}; it needs one entry per sequence, shape ({n},)")
    return a


class LengthGroupedBatches:
    """Batches of document indices in which lengths are similar, so padding wastes less.

    ``lengths``: the documents' lengths, or a token source (a store, a view, a list of arrays: its
    ``lengths``). Each epoch: shuffle the documents (``shuffle=True``), cut the order into mega-batches of
    ``group_size`` documents, sort each mega-batch by length (longest first), cut it into batches of
    at most ``batch_size`` documents and at most ``max_tokens`` padded positions
    (``rows * longest``), then shuffle the order of the batches. Deterministic for ``(seed, epoch)``.
    Grouping changes which documents are seen together (and, through the batch order, when);
    check that length does not correlate with something you care about, e.g. a domain.

    ``padding_fraction`` is the share of padded positions with grouping and
    ``ungrouped_padding_fraction`` the share for the same batch rule over the plain shuffled order.

    >>> lengths = [2, 100, 3, 98, 1, 101, 2, 99]
    >>> g = LengthGroupedBatches(lengths, batch_size=2, seed=0)
    >>> sorted(sorted(lengths[i] for i in b) for b in g)
    [[1, 2], [2, 3], [98, 99], [100, 101]]
    >>> round(g.padding_fraction, 3), round(g.ungrouped_padding_fraction, 3)
    (0.01, 0.328)
    """

    def __init__(self, lengths, *, batch_size: int | None = None, max_tokens: int | None = None,
                 shuffle: bool = True, seed: int = 0, group_size: int | None = None):
        self.lengths = document_lengths(lengths, error=ConfigError)  # (a token source, the documents: their lengths)
        if batch_size is None and max_tokens is None:
            raise ConfigError("pass batch_size (documents per batch), max_tokens (padded positions per "
                              "batch) or both")
        self.batch_size = None if batch_size is None else _positive(batch_size, "batch_size")
        self.max_tokens = None if max_tokens is None else _positive(max_tokens, "max_tokens")
        if self.max_tokens is not None and self.lengths.size and self.lengths.max() > self.max_tokens:
            i = int(np.argmax(self.lengths))
            raise ConfigError(f"document {i} has {int(self.lengths[i]):,d} tokens, more than "
                              f"max_tokens={self.max_tokens:,d}; split or truncate long documents first, "
                              "or raise max_tokens")
        self.shuffle, self.seed, self.epoch = check_bool(shuffle, "shuffle"), check_int(seed, "seed", min=0), 0
        if group_size is None:
            per_batch = self.batch_size or max(1, self.max_tokens // max(1, int(self.lengths.mean() if self.lengths.size else 1)))
            group_size = min(50 * per_batch, max(1, self.lengths.size))  # (the default: never more than the documents)
        self.group_size = _positive(group_size, "group_size")
        self._cache: tuple[int, list[np.ndarray], list[np.ndarray]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Use the shuffle of ``epoch`` (the same seed gives a different, reproducible order per epoch)."""
        self.epoch = check_int(epoch, "epoch", min=0)

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self._batches()[0])

    def __len__(self) -> int:
        return len(self._batches()[0])

    @property
    def padding_fraction(self) -> float:
        return self._padding(self._batches()[0])

    @property
    def ungrouped_padding_fraction(self) -> float:
        return self._padding(self._batches()[1])

    def _padding(self, batches: list[np.ndarray]) -> float:
        real = sum(int(self.lengths[b].sum()) for b in batches)
        padded = sum(int(self.lengths[b].max()) * b.size for b in batches if b.size)
        return 1.0 - real / padded if padded else 0.0

    def _batches(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1], self._cache[2]
        rng = np.random.default_rng([self.seed, self.epoch])
        n = self.lengths.size
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        grouped: list[np.ndarray] = []
        for lo in range(0, n, self.group_size):
            mega = order[lo : lo + self.group_size]
            mega = mega[np.argsort(-self.lengths[mega], kind="stable")]
            grouped += self._cut(mega)
        if self.shuffle:
            grouped = [grouped[i] for i in rng.permutation(len(grouped))]
        self._cache = (self.epoch, grouped, self._cut(order))
        return grouped, self._cache[2]

    def _cut(self, order: np.ndarray) -> list[np.ndarray]:
        """Cut ``order`` into consecutive batches obeying batch_size and max_tokens."""
        if self.max_tokens is None:
            return [order[i : i + self.batch_size] for i in range(0, order.size, self.batch_size)]
        lens = self.lengths[order]
        out, i = [], 0
        cap = self.batch_size or order.size
        while i < order.size:
            j, longest = i, 0
            while j < order.size and j - i < cap and max(longest, lens[j]) * (j - i + 1) <= self.max_tokens:
                longest = max(longest, int(lens[j]))
                j += 1
            out.append(order[i:j])
            i = j
        return out
