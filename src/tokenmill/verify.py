"""Proof that packing is what it claims: packed logits equal unpacked ones, document by document.

:func:`packing_equivalence` checks it in four steps:

1. run every document alone (positions 0..L-1, plain causal mask) and keep its logits;
2. pack the documents (document layout: block-diagonal mask, positions reset per document) and run
   the blocks; compare, for every scored target, the logits that predict it, and check every label of
   the blocks: a document's own next token, ignored at its first token and on padding (a label that
   crosses into the next document, A's EOS predicting B's BOS, is what stream packing trains);
3. replace one document that shares a block with others by different ids of the same length, run
   the blocks again, and check that no other document's logits moved;
4. all in eval mode (no dropout), with a stated tolerance.

Plain stream packing (``layout="stream"``: one causal triangle per block, positions 0..T-1) lets a
document read its neighbours, so it fails steps 2 and 3 -- the check can fail, and that is the
point. With RoPE only the mask matters; with learned absolute positions both do.

The model is any callable ``model(input_ids, position_ids=..., attention_mask=...)`` returning
``(B, T, V)`` logits (or an object with ``.logits``), where ``attention_mask`` is a ``(B, 1, T, T)``
bool tensor, True = may attend (a FlexAttention ``BlockMask`` with ``attention="flex"``; a tuple
``(cu_seqlens, max_seqlen)`` for variable-length flash attention with ``attention="varlen"``);
:class:`tokenmill.torch.TinyCausalLM` is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from ._validate import check_array, check_float, check_int
from ._words import counted
from .conventions import IGNORE_INDEX
from .errors import ConfigError, require


@dataclass(frozen=True)
class EquivalenceReport:
    """What :func:`packing_equivalence` compared and found. ``passed`` needs both checks."""

    layout: str
    documents: int
    blocks: int
    targets_compared: int
    mismatched_targets: int  # targets whose packed logits differ from the unpacked ones
    max_abs_diff: float  # largest |packed - alone| logit difference over compared targets
    replaced_doc: int | None  # the document replaced in the isolation check (None: no shared block)
    moved_targets: int  # other documents' targets whose logits moved when it was replaced
    isolation_max_diff: float
    atol: float
    rtol: float
    label_errors: int = 0  # block positions whose label is not their document's own next token (or ignored)

    @property
    def equivalent(self) -> bool:
        return self.mismatched_targets == 0

    @property
    def isolated(self) -> bool:
        return self.moved_targets == 0

    @property
    def labels_ok(self) -> bool:
        return self.label_errors == 0

    @property
    def passed(self) -> bool:
        return self.equivalent and self.isolated and self.labels_ok

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        iso = ("no block holds two documents" if self.replaced_doc is None else
               f"replacing document {self.replaced_doc} moved {counted(self.moved_targets, 'other target')} "
               f"(max {self.isolation_max_diff:.2e})")
        return (f"{verdict} ({self.layout} layout): {counted(self.documents, 'document')} in "
                f"{counted(self.blocks, 'block')}; "
                f"{self.mismatched_targets:,d} of {self.targets_compared:,d} targets differ from the "
                f"documents run alone (max |diff| {self.max_abs_diff:.2e}, atol {self.atol:g}, "
                f"rtol {self.rtol:g}); {iso}; "
                + (f"{counted(self.label_errors, 'label is', 'labels are')} not their document's own next token"
                   if self.label_errors
                   else "every label is its document's own"))


def packing_equivalence(model, docs: Sequence, block_size: int, *, method: str = "best_fit",
                        layout: Literal["documents", "stream"] = "documents",
                        attention: Literal["dense", "flex", "varlen"] = "dense", atol: float = 1e-5,
                        rtol: float = 1e-5, batch_size: int = 8, vocab_size: int | None = None,
                        seed: int = 0, progress: bool = False) -> EquivalenceReport:
    """Compare a model's logits on packed blocks with its logits on each document alone.

    ``docs``: id sequences, each at most ``block_size`` long (a split document cannot match: its
    later pieces lose their prefix). ``layout="stream"`` packs the same blocks as a plain stream
    (the failing baseline). ``vocab_size`` (default: ``model.config.vocab_size`` or the largest
    id + 1) bounds the replacement ids. Runs under ``torch.no_grad()`` in eval mode, on the device
    of the model's parameters; the model's train/eval mode is restored afterwards. ``progress``: a
    bar on stderr counting the model's runs (each document alone, then every packed block, twice:
    thousands of documents take minutes on a CPU).

    >>> from tokenmill.torch import TinyCausalLM, TinyConfig
    >>> model = TinyCausalLM(TinyConfig(positions="learned"), seed=0)
    >>> docs = [[1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 10, 2]]
    >>> packing_equivalence(model, docs, 8).passed
    True
    >>> packing_equivalence(model, docs, 8, layout="stream").passed
    False
    """
    torch = require("torch", "torch")
    from .batching import pack

    if layout not in ("documents", "stream"):
        raise ConfigError(f"layout={layout!r} is not 'documents' or 'stream'")
    if attention not in ("dense", "flex", "varlen"):
        raise ConfigError(f"attention={attention!r} is not 'dense', 'flex' or 'varlen'")
    # tolerances compare as diff > atol + rtol * |ref|: NaN there would make every check pass
    atol = check_float(atol, "atol", min=0.0)
    rtol = check_float(rtol, "rtol", min=0.0)
    block_size = check_int(block_size, "block_size", min=1)
    if method == "concat":  # (it cuts documents at block edges: their later pieces lose their prefix)
        raise ConfigError("method='concat' cuts documents at block boundaries, and a cut document cannot match "
                          "itself alone; compare a method that keeps documents whole: 'best_fit', "
                          "'first_fit_decreasing' or 'greedy'")
    arrays = [check_array(d, f"document {i}", min=0) for i, d in enumerate(docs)]
    lengths = np.array([a.size for a in arrays], np.int64)
    if not lengths.size or lengths.min() == 0:
        raise ConfigError("packing_equivalence compares documents of one token or more: " + (
            "docs is empty" if not lengths.size else f"document {int(np.argmin(lengths))} is empty") +
            "; leave empty documents out")
    if lengths.max() > block_size:
        i = int(np.argmax(lengths > block_size))
        raise ConfigError(f"document {i} has {int(lengths[i]):,d} tokens, more than block_size={block_size:,d}; "
                          "equivalence needs whole documents: raise block_size or drop long documents")
    top = int(max(a.max() for a in arrays))
    vocab = check_int(vocab_size, "vocab_size", min=1, none=True) or \
        getattr(getattr(model, "config", None), "vocab_size", None) or top + 1
    if top >= vocab:
        raise ConfigError(f"the documents hold id {top:,d}, outside the model's vocabulary of {vocab:,d}; pass ids "
                          "below it (or the vocab_size the model was built with)")
    device = next((p.device for p in getattr(model, "parameters", lambda: iter(()))()), torch.device("cpu"))
    plan = pack(lengths, block_size, method=method, long_docs="error", seed=seed)
    runner = _Runner(model, torch, device, attention, layout == "stream")
    if progress:
        import sys

        from tqdm.auto import tqdm

        shared = _doc_to_replace(plan) is not None  # (the isolation check runs the blocks a second time)
        runner.bar = tqdm(total=len(arrays) + plan.num_blocks * (1 + shared), desc="verify packing", unit="run",
                          file=sys.stderr, leave=False)

    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.no_grad():
            alone = [runner.alone(a) for a in arrays]
            packed = runner.packed(plan, arrays, batch_size)
            label_errors = runner.label_errors
            diff, bad = _compare(alone, packed, atol, rtol)
            replaced, iso_diff, moved = _isolation(runner, plan, arrays, packed, vocab, seed, batch_size, atol, rtol)
    finally:
        if runner.bar is not None:
            runner.bar.close()
        if hasattr(model, "train"):
            model.train(was_training)
    return EquivalenceReport(layout, len(arrays), plan.num_blocks, int(sum(max(n - 1, 0) for n in lengths)),
                             bad, diff, replaced, moved, iso_diff, atol, rtol, label_errors)


def _isolation(runner, plan, arrays, packed, vocab, seed, batch_size, atol, rtol):
    """Replace one document that shares a block; return (its index, max diff, targets of others moved)."""
    replaced = _doc_to_replace(plan)
    if replaced is None:
        return None, 0.0, 0
    other = list(arrays)
    other[replaced] = _different_ids(arrays[replaced], vocab, seed)
    again = runner.packed(plan, other, batch_size)
    keep = [i for i in range(len(arrays)) if i != replaced]
    diff, moved = _compare([packed[i] for i in keep], [again[i] for i in keep], atol, rtol)
    return replaced, diff, moved


class _Runner:
    """Runs the model on one document alone or on a plan's blocks; returns per-document logits that
    predict the document's own next tokens: ``(L - 1, V)`` for a document of ``L`` tokens."""

    def __init__(self, model, torch, device, attention: str, stream: bool):
        self.model, self.torch, self.device = model, torch, device
        self.attention, self.stream = attention, stream
        self.label_errors = 0  # of the last packed()
        self.bar = None  # a progress bar counting runs (documents alone, blocks packed), or None

    def _logits(self, input_ids, position_ids, mask):
        out = self.model(input_ids, position_ids=position_ids, attention_mask=mask)
        return getattr(out, "logits", out)

    def alone(self, ids: np.ndarray):
        t = self.torch
        L = ids.size
        x = t.as_tensor(ids, device=self.device)[None]
        pos = t.arange(L, device=self.device)[None]
        if self.attention == "varlen":
            mask = (t.tensor([0, L], dtype=t.int32, device=self.device), L)
        else:
            mask = t.ones(L, L, dtype=t.bool, device=self.device).tril()[None, None]
        if self.bar is not None:
            self.bar.update(1)
        return self._logits(x, pos, mask)[0, : max(L - 1, 0)]

    def packed(self, plan, arrays, batch_size: int):
        from .torch.masks import flex_block_mask, sdpa_mask

        t = self.torch
        out = [None] * len(arrays)
        self.label_errors = 0
        flat = np.concatenate(arrays)
        starts = np.concatenate([[0], np.cumsum([a.size for a in arrays])[:-1]]).astype(np.int64)
        for batch in plan.batches(arrays, batch_size=batch_size, pad_id=0, stream=self.stream):
            # every label: the document's token at that position, ignored at its first token and on padding
            d, off = batch.doc_ids, batch.token_offsets
            own = np.where((d >= 0) & (off >= 1), flat[np.where(d >= 0, starts[np.maximum(d, 0)] + off, 0)],
                           IGNORE_INDEX)
            self.label_errors += int((np.asarray(batch.labels) != own).sum())
            if self.attention == "flex":
                mask = flex_block_mask(batch, device=self.device)
            elif self.attention == "varlen":
                mask = (t.as_tensor(batch.cu_seqlens, device=self.device), batch.max_seqlen)
            else:
                mask = sdpa_mask(batch, device=self.device)
            logits = self._logits(t.as_tensor(batch.input_ids, device=self.device),
                                  t.as_tensor(batch.position_ids, device=self.device), mask)
            if self.bar is not None:
                self.bar.update(len(batch.input_ids))
            for d in np.unique(batch.doc_ids[batch.doc_ids >= 0]).tolist():
                rows, cols = np.nonzero(batch.doc_ids == d)
                order = np.argsort(batch.token_offsets[rows, cols])
                rows, cols = rows[order][:-1], cols[order][:-1]  # the last token predicts nothing of d
                out[d] = logits[t.as_tensor(rows, device=self.device), t.as_tensor(cols, device=self.device)]
        return out


def _compare(reference, candidate, atol: float, rtol: float) -> tuple[float, int]:
    """Largest absolute difference and number of targets (rows) outside the tolerance."""
    worst, bad = 0.0, 0
    for ref, got in zip(reference, candidate):
        if ref is None or ref.numel() == 0:
            continue
        diff = (got.double() - ref.double()).abs()
        m = float(diff.max())
        worst = m if m != m or worst != worst else max(worst, m)  # NaN stays NaN (never "within tolerance")
        # not (diff <= tol): a NaN difference is outside every tolerance
        bad += int((~(diff <= atol + rtol * ref.double().abs())).any(dim=-1).sum())
    return worst, bad


def _doc_to_replace(plan) -> int | None:
    """The first document of the first block that holds two or more documents."""
    sizes = np.diff(plan.block_ptr)
    shared = np.flatnonzero(sizes >= 2)
    return int(plan.doc[plan.block_ptr[shared[0]]]) if shared.size else None


def _different_ids(ids: np.ndarray, vocab: int, seed: int) -> np.ndarray:
    """Same length, different ids (every id shifted by a seeded nonzero amount modulo the vocabulary)."""
    if vocab < 2:
        raise ConfigError(f"vocab_size={vocab} leaves no different ids to replace a document with")
    shift = 1 + np.random.default_rng(seed).integers(0, vocab - 1)
    return (ids + shift) % vocab
