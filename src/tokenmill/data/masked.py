"""Loss masks: which tokens of a document are training targets (supervised fine-tuning: the answer, not the
prompt).

::

    example       prompt "Q: 2+2?"           completion " 4" + EOS
    tokens        [  48   25  362   10 ]     [  604    2 ]
    loss_mask     [   0    0    0    0 ]     [    1    1 ]
    labels        [-100 -100 -100 -100 ]     [  604    2 ]    (at the input positions, as every label here)

A :class:`MaskedSource` is a token source (its documents are the tokens: lengths, ``get``, plans, packing,
windows all read them as before) that also holds one flag per token: 1 (True) = the token is a target,
0 = it is context only. Wherever tokenmill turns a source into labels (:meth:`PackPlan.batches`, the loader,
:meth:`WindowPlan.materialize`, :func:`pad_batch`'s ``loss_mask``) it makes them as for any source, then sets
the label of every token whose flag is 0 to ``-100``. Nothing else changes: document boundaries, positions
and attention are the same, and every count of targets (``Batch.stats``, ``num_targets``, the loss
normalization across accumulation and ranks) counts the targets that are left.

Polarity: 1 = target, as Megatron's ``loss_mask``, OLMo-core's ``label_mask`` and transformers'
``assistant_masks`` (``apply_chat_template(..., return_assistant_tokens_mask=True)``); torchtune's ``mask`` is
the opposite (True there = *not* a target): pass ``[not m for m in mask]``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from typing import Iterable, Sequence

import numpy as np

from .._arrays import offsets_of, ranks_in_groups, seal
from .._validate import check_array, check_bool
from ..errors import ConfigError, FormatError, InputError, LoneSurrogateError, SpecialTokenError
from .source import TokenSource, as_source, doc_index

# what a MaskedSource hands on from the source it wraps, where that source has it (the flat fast paths of
# packing and the loader, a store's checks and its tokenizer facts)
_PASSED_ON = frozenset({"token_array", "doc_offsets", "segment_filler", "check_mapped", "vocab_size", "eos_id",
                        "bos_id", "tokenizer_hash", "num_tokens", "check_tokenizer", "provenance", "decode",
                        "name", "path"})
# what encode_sft records of its tokenizer (``facts``), said before the base's (ids in memory say none of it: a
# Mixture had not seen the vocabulary of such a source, and mixed GPT-2 examples with a Llama 3 store in silence)
_FACTS = ("vocab_size", "tokenizer_hash", "eos_id", "bos_id")

TOKENS_DIR, MASK_DIR = "tokens", "loss_mask"
MASK_HASH = "loss-mask"  # the tokenizer hash of a store of flags (then ':' and its ids' store's fingerprint)


def is_masked_folder(path) -> bool:
    """Whether ``path`` is a folder :meth:`MaskedSource.save` wrote (its ``tokens/`` and ``loss_mask/`` stores)."""
    import os

    return os.path.isdir(os.path.join(path, TOKENS_DIR)) and os.path.isdir(os.path.join(path, MASK_DIR))


def is_flags_store(src) -> bool:
    """Whether ``src`` is a store of loss-mask flags (:meth:`MaskedSource.save`'s ``loss_mask/``), not of ids."""
    h = getattr(src, "tokenizer_hash", None)
    return isinstance(h, str) and (h == MASK_HASH or h.startswith(MASK_HASH + ":"))


def refuse_flags_as_ids(src, what: str = "the source") -> None:
    """A ConfigError where ``src`` (or the base of a slice of it) is a store of loss-mask flags: read as ids, its 0/1
    flags would train a model on two tokens."""
    while src is not None:
        if is_flags_store(src):
            raise ConfigError(f"{what} is a store of loss-mask flags (a MaskedSource's {MASK_DIR}/), not of token ids; "
                              f"open the folder above it with MaskedSource.open (CLI: pass that folder)")
        src = getattr(src, "base", None) if getattr(src, "origin_doc", None) is not None else None


class MaskedSource:
    """A token source whose tokens each say whether they are a training target.

    ``source``: the documents' ids (a token store, a list of id arrays, a tokenized ``datasets.Dataset``, any
    token source). ``loss_mask``: one flag per token of the same documents, 1/True = target: a list of
    per-document arrays of bools or 0/1 integers, a token source of them (a store written by :meth:`save`), or,
    with a Dataset, the name of its column of flags (TRL's ``"completion_mask"``, transformers'
    ``"assistant_masks"``). Checked here, once: as many
    documents, each as long as its document (an InputError names the first that is not), no value but 0 and
    1. The flags are held in memory, one byte a token.

    >>> src = MaskedSource([[5, 6, 7, 8], [9, 3]], [[0, 0, 1, 1], [0, 1]])
    >>> src.lengths.tolist(), src.get(0).tolist(), src.loss_mask(0).tolist()
    ([4, 2], [5, 6, 7, 8], [False, False, True, True])
    >>> src.num_targets
    3
    """

    def __init__(self, source, loss_mask):
        if isinstance(source, MaskedSource):
            raise ConfigError("source is already a MaskedSource; pass its documents (masked.base) with the new mask")
        if isinstance(loss_mask, str):  # a column of a tokenized datasets.Dataset (TRL's completion_mask, ...)
            loss_mask = _column(source, loss_mask)
        self.base: TokenSource = as_source(source)
        refuse_flags_as_ids(self.base)
        lengths = check_array(self.base.lengths, "the source's lengths", min=0)
        self.mask, self.mask_offsets = _flat_mask(loss_mask, lengths)
        self._fingerprint: str | None = None
        self.facts: dict = {}  # (encode_sft's tokenizer facts, for save: vocab_size, tokenizer_hash, eos_id, bos_id)

    @classmethod
    def _of_flags(cls, base, flags: np.ndarray, lengths: np.ndarray, facts: dict) -> "MaskedSource":
        """A source over ``base`` whose flags tokenmill gathered itself (checked already: ``flags`` holds ``lengths``'
        tokens), made read-only here."""
        if flags.size != int(np.sum(lengths)):  # (never: said, not assumed)
            raise InputError("the documents and their flags disagree in length")
        out = cls.__new__(cls)
        out.base, out._fingerprint, out.facts = base, None, dict(facts)
        out.mask, out.mask_offsets = flags, seal(offsets_of(lengths))
        out.mask.flags.writeable = False
        return out

    # ---- the token source: the documents' ids ---------------------------------------------------------
    @property
    def lengths(self) -> np.ndarray:
        return self.base.lengths

    def __len__(self) -> int:
        return len(self.base)

    def get(self, i: int) -> np.ndarray:
        return self.base.get(i)

    @property
    def ids_checked(self) -> bool:
        return getattr(self.base, "ids_checked", False) is True

    def __getattr__(self, name: str):
        facts = self.__dict__.get("facts") or {}
        if name in _FACTS and facts.get(name) is not None:
            return facts[name]
        if name in _PASSED_ON and "base" in self.__dict__:
            return getattr(self.__dict__["base"], name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- the mask ---------------------------------------------------------------------------------------
    def loss_mask(self, i: int) -> np.ndarray:
        """Document ``i``'s flags, bool (True = target), read-only."""
        i = doc_index(i, len(self))
        return self.mask[self.mask_offsets[i] : self.mask_offsets[i + 1]].view(bool)

    @property
    def num_targets(self) -> int:
        """Tokens whose flag is 1 (before any rule of a batch: a packed document's first token, cut windows)."""
        return int(np.count_nonzero(self.mask))

    def documents_without_targets(self) -> int:
        """How many documents hold no token flagged 1 (an SFT example with an empty completion and no EOS): counted
        a few million tokens at a time (a whole-source cast to int64 had taken 8 bytes a token)."""
        offsets, n, empty = self.mask_offsets, len(self), 0
        step = max(1, n * COUNT_TOKENS // max(int(self.mask.size), 1))  # (documents of ~COUNT_TOKENS tokens a time)
        for a in range(0, n, step):
            b = min(n, a + step)
            seen = np.cumsum(self.mask[offsets[a] : offsets[b]], dtype=np.int64)
            ends = np.asarray(offsets[a + 1 : b + 1], np.int64) - int(offsets[a])
            at_end = np.concatenate(([0], seen))[ends]  # (targets up to each document's end)
            empty += int(np.count_nonzero(np.diff(np.concatenate(([0], at_end))) == 0))
        return empty

    def flagged(self, doc: np.ndarray, begin: np.ndarray, end: np.ndarray) -> int:
        """How many tokens flagged 1 the spans ``[begin, end)`` of documents ``doc`` hold together (arrays of one entry
        per span; an empty span holds none). What a plan's targets are, counted without building its batches."""
        from .._validate import check_array

        doc = check_array(doc, "doc", min=0, max=len(self) - 1)  # (floats had been truncated, doc n an IndexError)
        begin = check_array(begin, "begin", shape=doc.shape)
        end = check_array(end, "end", shape=doc.shape)
        keep = end > begin
        if not keep.any():
            return 0
        at = self.mask_offsets[doc[keep]]
        if ((begin[keep] < 0) | (at + end[keep] > self.mask_offsets[doc[keep] + 1])).any():
            raise InputError("a span runs outside its document; count spans of this source's documents")
        idx = np.empty(2 * int(keep.sum()), np.int64)
        idx[0::2], idx[1::2] = at + begin[keep], at + end[keep]
        padded = np.append(self.mask, np.uint8(0))  # (reduceat takes indices below the array's size: the end of the last)
        return int(np.add.reduceat(padded, idx, dtype=np.int64)[0::2].sum())

    @property
    def fingerprint(self) -> str:
        """The documents' fingerprint and the flags' sha256, together: a loader state saved over one mask is
        refused over another."""
        if self._fingerprint is None:
            from .mixture import source_fingerprint

            h = hashlib.sha256(b"tokenmill.masked.v1\x00")
            h.update(source_fingerprint(self.base).encode())
            h.update(b"\x00")
            for a in range(0, self.mask.size, 1 << 24):
                h.update(self.mask[a : a + (1 << 24)].tobytes())
            self._fingerprint = "sha256:" + h.hexdigest()
        return self._fingerprint

    def __repr__(self) -> str:
        return (f"MaskedSource({len(self):,d} documents, {int(self.mask.size):,d} tokens, "
                f"{self.num_targets:,d} targets)")

    # ---- train / validation ----------------------------------------------------------------------------
    def split(self, val_fraction: float, *, seed: int = 0) -> tuple["MaskedSource", "MaskedSource"]:
        """``(train, val)``: the examples split by the one rule of :meth:`TokenStore.split` and
        :func:`~tokenmill.split_documents` (by document, a seeded hash of its index), each with its flags. Over a
        token store the documents are its views (no copy); over documents in memory, copies."""
        from .source import as_source

        split = getattr(self.base, "split", None)
        if split is not None and getattr(self.base, "index", None) is None:  # (a store: views in its numbering)
            parts = split(val_fraction, by="doc", seed=seed)
            pairs = [(view, np.asarray(view.index, np.int64)) for view in parts]
        else:  # (the store's rule: documents keyed by their index, assign_groups)
            from .._validate import check_float, check_int
            from .split import assign_groups

            if not 0 < check_float(val_fraction, "val_fraction") < 1:
                raise ConfigError(f"val_fraction={val_fraction!r} must be a number strictly between 0 and 1")
            val = assign_groups(np.arange(len(self), dtype=np.int64), val_fraction,
                                check_int(seed, "seed", min=0, max=2**63 - 1), what="the examples")[0]
            pairs = [(as_source([self.base.get(int(i)) for i in idx]), idx)
                     for idx in (np.flatnonzero(~val), np.flatnonzero(val))]
        return tuple(self._subset(base, idx) for base, idx in pairs)  # type: ignore[return-value]

    def _subset(self, base, index: np.ndarray) -> "MaskedSource":
        """The source of documents ``index`` (``base`` holds their ids, in that order), their flags gathered."""
        lengths = np.diff(self.mask_offsets)[index]
        if not np.array_equal(np.asarray(base.lengths, np.int64), lengths):  # (never: said, not assumed)
            raise InputError("the split's documents and flags disagree in length")
        return MaskedSource._of_flags(base, self.mask[_spans(self.mask_offsets[index], lengths)], lengths, self.facts)

    # ---- on disk: two token stores, the ids and the flags -----------------------------------------------
    def save(self, out_dir, *, vocab_size: int | None = None, overwrite: bool = False) -> "MaskedSource":
        """Write the documents and their flags as two token stores, ``out_dir/tokens`` and ``out_dir/loss_mask``
        (each written and verified as any store: shards, then the manifest, atomically), and return the source
        over them (:meth:`open`). A source that is already a store is copied into ``tokens``.

        The ids keep the store's facts where the source has them (``vocab_size``, tokenizer hash, EOS/BOS);
        a source of ids in memory is saved with ``vocab_size`` = its largest id + 1 and tokenizer hash
        ``external``: pass ``vocab_size`` (the tokenizer's) to record the size of the vocabulary the ids come from
        (a Mixture refuses parts of different sizes: GPT-2 examples saved without their largest id, 50256, had
        been refused beside a GPT-2 store).
        """
        from pathlib import Path

        overwrite = check_bool(overwrite, "overwrite")
        out = Path(os.fspath(out_dir))
        _refuse_saved_there(out, overwrite)
        lengths = np.asarray(self.lengths, np.int64)
        ids = _all_ids(self.base, lengths)
        facts = {k: self.facts.get(k, getattr(self.base, k, None))
                 for k in ("vocab_size", "tokenizer_hash", "eos_id", "bos_id")}
        vocab = facts["vocab_size"]
        if vocab_size is not None:
            from .._validate import check_int

            given = check_int(vocab_size, "vocab_size", min=1, max=2**31)
            if vocab is not None and int(vocab) != given:
                raise ConfigError(f"vocab_size={given:,d}, but the source's ids come from a vocabulary of {int(vocab):,d}; "
                                  "leave vocab_size out (it is recorded)")
            vocab = given
        facts["vocab_size"] = int(vocab) if vocab is not None else (int(ids.max()) + 1 if ids.size else 1)
        # (cut into shards by their ids, as save_sft cuts the same documents given a batch at a time)
        return _save_pair(out, _recut([(lengths, ids, self.mask)]), lambda: facts, overwrite)

    @classmethod
    def open(cls, path) -> "MaskedSource":
        """The source :meth:`save` wrote: the store of ids and the store of flags, checked to hold the same
        documents (an InputError says where they differ)."""
        import os
        from pathlib import Path

        from .store import TokenStore

        root = Path(os.fspath(path))
        if not is_masked_folder(root):
            raise ConfigError(f"{str(root)!r} holds no {TOKENS_DIR}/ and {MASK_DIR}/ stores; pass the folder "
                              "MaskedSource.save (or encode_sft(...).save) wrote")
        mask = TokenStore.open(root / MASK_DIR)
        if mask.vocab_size != 2 or not is_flags_store(mask):
            raise ConfigError(f"{str(root / MASK_DIR)!r} is a store of token ids (vocabulary {mask.vocab_size:,d}), "
                              "not of loss-mask flags; pass the folder MaskedSource.save wrote")
        tokens = TokenStore.open(root / TOKENS_DIR)
        paired = mask.tokenizer_hash.partition(":")[2]
        if paired and paired != tokens.fingerprint:
            raise FormatError(f"{str(root)!r}: its {MASK_DIR}/ was saved with other ids than its {TOKENS_DIR}/ (the two "
                              "stores come from different saves); save the source again")
        try:
            return cls(tokens, mask)
        except InputError as e:
            raise FormatError(f"{str(root)!r}: {e}; its {MASK_DIR}/ does not hold its {TOKENS_DIR}/'s flags: check both "
                              f"(tokenmill store verify {root / MASK_DIR}) and save the source again") from None


def _column(source, name: str):
    columns = getattr(source, "column_names", None)
    if not (isinstance(columns, list) and hasattr(source, "with_format")):
        raise InputError(f"loss_mask={name!r} names a column, but the source is a {type(source).__name__}, not a "
                         "datasets.Dataset; pass the flags themselves (one array of 0/1 per document)")
    if name not in columns:
        raise InputError(f"the Dataset has no column {name!r} (its columns: {', '.join(columns)}); name its column of "
                         "0/1 flags, 1 = a target (e.g. 'completion_mask', 'assistant_masks')")
    return source.with_format("numpy")[name]


def _flat_values(src, lengths: np.ndarray) -> np.ndarray | None:
    """All of a source's values back to back, where it holds them so (``token_array``, its documents contiguous from
    ``doc_offsets[0]``, as ``lengths`` says); else None."""
    tokens, offsets = getattr(src, "token_array", None), getattr(src, "doc_offsets", None)
    n = lengths.size
    if tokens is None or offsets is None or not n:
        return None
    offsets = np.asarray(offsets, np.int64)
    if offsets.size <= n or not np.array_equal(np.diff(offsets[: n + 1]), lengths):
        return None
    return np.asarray(tokens[int(offsets[0]) : int(offsets[n])])


def _value_runs(src, lengths: np.ndarray) -> list | None:
    """All of a source's values back to back as arrays to read in turn: its ``token_array`` (:func:`_flat_values`),
    or a whole store's shards in order (``shard_arrays``: its documents are ``lengths``); else None."""
    flat = _flat_values(src, lengths)
    if flat is not None:
        return [flat]
    shards = getattr(src, "shard_arrays", None)
    own = getattr(src, "lengths", None)
    if shards is None or own is None or not lengths.size or not np.array_equal(np.asarray(own), lengths):
        return None
    return list(shards())


def _all_ids(src, lengths: np.ndarray) -> np.ndarray:
    runs = _value_runs(src, lengths)
    if runs is not None:
        return runs[0] if len(runs) == 1 else np.concatenate(runs)
    return np.concatenate([np.asarray(src.get(i)) for i in range(lengths.size)]) if lengths.size else np.zeros(0, np.int64)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions of the spans ``[starts[i], starts[i] + lengths[i])``, back to back."""
    return np.repeat(np.asarray(starts, np.int64), lengths) + ranks_in_groups(lengths)


def _flat_mask(loss_mask, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The flags of every document back to back (uint8, 0/1, read-only) and their offsets (int64, sealed)."""
    if isinstance(loss_mask, (str, bytes)) or not (isinstance(loss_mask, Iterable) or hasattr(loss_mask, "get")):
        raise InputError(f"loss_mask is a {type(loss_mask).__name__}; pass one array of 0/1 (or bool) flags per "
                         "document, 1 = the token is a target")
    n = int(lengths.size)
    offsets = offsets_of(lengths)
    flat = np.empty(int(offsets[-1]), np.uint8)
    if hasattr(loss_mask, "get") and hasattr(loss_mask, "lengths") and not isinstance(loss_mask, (list, tuple)):
        got = check_array(loss_mask.lengths, "loss_mask's lengths", min=0)
        if got.size != n:
            raise InputError(f"loss_mask holds {got.size:,d} documents, the source {n:,d}; pass one flag per token of "
                             "the source's documents")
        runs = _value_runs(loss_mask, got) if np.array_equal(got, lengths) else None
        if runs is not None and all(r.dtype.kind == "u" for r in runs):  # (a store of flags: a pass a shard, no loop
            # over documents; a saved source's flags are shards of ~4M since they are saved a batch at a time)
            at = 0
            for whole in runs:
                if whole.size and int(whole.max()) > 1:
                    i = at + int(np.argmax(whole > 1))
                    d = int(np.searchsorted(offsets, i, side="right") - 1)
                    raise InputError(f"loss_mask of document {d} holds {int(whole[i - at])} at "
                                     f"position {i - int(offsets[d]):,d}; a flag is 0 (context) or 1 (target)")
                flat[at : at + whole.size] = whole
                at += whole.size
            flat.flags.writeable = False
            return flat, seal(offsets)
        docs: Iterable = (loss_mask.get(i) for i in range(n))
    else:
        docs = loss_mask if isinstance(loss_mask, Sequence) else list(loss_mask)
        if len(docs) != n:
            raise InputError(f"loss_mask holds {len(docs):,d} documents, the source {n:,d}; pass one flag per token "
                             "of the source's documents")
    for i, m in enumerate(docs):
        flat[offsets[i] : offsets[i + 1]] = document_mask(m, i, int(lengths[i]))
    flat.flags.writeable = False  # (the flags are the source's: written later, they would change its fingerprint)
    return flat, seal(offsets)


def document_mask(m, i: int, n: int, what: str = "document") -> np.ndarray:
    """The flags ``m`` of ``what`` ``i`` (``n`` tokens) as a 1-D uint8 array of 0/1, else an InputError naming it."""
    a = m if isinstance(m, np.ndarray) else np.asarray(m) if not isinstance(m, (str, bytes, dict)) else None
    if a is None:
        raise InputError(f"loss_mask of {what} {i} is a {type(m).__name__}; pass 0/1 (or bool) flags, one per token")
    if a.dtype == bool:
        a = a.view(np.uint8)
    elif a.dtype.kind not in "iu" or a.ndim != 1:
        a = check_array(a, f"loss_mask of {what} {i}")  # (names a float, a 2-D array, text ...)
    if a.ndim != 1:
        raise InputError(f"loss_mask of {what} {i} has shape {a.shape}; pass a 1-D array of flags, one per token")
    if a.size != n:
        raise InputError(f"loss_mask of {what} {i} holds {a.size:,d} flags but the {what} {n:,d} tokens; pass one "
                         "flag per token")
    if a.size and (int(a.min()) < 0 or int(a.max()) > 1):
        j = int(np.argmax((a < 0) | (a > 1)))
        raise InputError(f"loss_mask of {what} {i} holds {int(a[j])} at position {j:,d}; a flag is 0 (context) or 1 "
                         "(target)")
    return a.astype(np.uint8, copy=False)


def loss_mask_of(src):
    """The :class:`MaskedSource` whose flags a batch of ``src`` takes, or None: ``src`` itself, the base of a slice of
    it (a :class:`~tokenmill.batching.SliceSource`: batches name the base's documents), or, for a mixture with a
    masked part, the flags of all its parts back to back (1 for the tokens of an unmasked part)."""
    if isinstance(src, MaskedSource):
        return src
    if getattr(src, "origin_doc", None) is not None:
        return loss_mask_of(src.base)
    parts, doc_base = getattr(src, "parts", None), getattr(src, "doc_base", None)
    if parts is not None and doc_base is not None:
        masks = [loss_mask_of(p) for p in parts]
        if any(m is not None for m in masks):
            return _joined(src, parts, masks)
    return None


def item_loss_mask(src) -> "MaskedSource | None":
    """:func:`loss_mask_of` in ``src``'s own numbering: for a slice of a masked source (a
    :class:`~tokenmill.batching.SliceSource`) the flags of its items back to back (made here, one byte a token of
    the slices; keep the result), where :func:`loss_mask_of` gives its base's, in the base's numbering. What a
    mixture's part takes: its batches number a slice part's items, as the mixture does."""
    masked = loss_mask_of(src)
    if masked is None or masked is src or getattr(src, "origin_doc", None) is None:
        return masked
    return MaskedSource._of_flags(src, _own_flags(src, masked), np.asarray(src.lengths, np.int64), {})


def _joined(src, parts, masks) -> "MaskedSource":
    """The flags of a mixture's parts back to back, each part's in its own numbering (a slice part's: its items',
    as the mixture numbers them; its base's whole mask had been joined, and the flags had followed the base's
    documents); 1 for every token of an unmasked part."""
    cached = getattr(src, "_joined_mask", None)
    if cached is not None:
        return cached
    flags = [_own_flags(p, m) if m is not None else np.ones(int(np.sum(p.lengths)), np.uint8)
             for p, m in zip(parts, masks)]
    joined = MaskedSource._of_flags(src, np.concatenate(flags), np.asarray(src.lengths, np.int64), {})
    try:
        src._joined_mask = joined
    except AttributeError:
        pass
    return joined


def _own_flags(part, masked: "MaskedSource") -> np.ndarray:
    """The flags of ``part``'s items back to back, in its own numbering: a MaskedSource's own, a slice's gathered
    from its base's (a slice of a slice, from the base beneath)."""
    if part is masked:
        return masked.mask
    origin_doc = getattr(part, "origin_doc", None)
    if origin_doc is None:  # (a source whose loss_mask_of is itself in its own numbering)
        return masked.mask
    base_offsets = offsets_of(part.base.lengths)
    starts = base_offsets[np.asarray(origin_doc, np.int64)] + np.asarray(part.origin_start, np.int64)
    return _own_flags(part.base, masked)[_spans(starts, np.asarray(part.lengths, np.int64))]


def masked_labels(labels: np.ndarray, doc_ids: np.ndarray, token_offsets: np.ndarray, masked: MaskedSource) -> int:
    """Set to -100 the labels (in place) of every real position whose token's flag is 0; ``doc_ids`` and
    ``token_offsets`` say where each position comes from (``doc_ids < 0``: padding). Returns how many labels it
    turned off."""
    from ..conventions import IGNORE_INDEX

    flat_doc, flat_off = doc_ids.reshape(-1), token_offsets.reshape(-1)
    real = np.flatnonzero(flat_doc >= 0)
    at = masked.mask_offsets[flat_doc[real]] + flat_off[real]
    off = real[masked.mask[at] == 0]
    view = labels.reshape(-1)
    before = int(np.count_nonzero(view[off] != IGNORE_INDEX))
    view[off] = IGNORE_INDEX
    return before


def document_flags(src, d: int) -> np.ndarray | None:
    """The flags (bool, one per token) of item ``d`` of ``src``, or None where ``src`` carries no loss mask; a slice
    of a masked source (a :class:`~tokenmill.batching.SliceSource`) gives the flags of its slice."""
    if isinstance(src, MaskedSource):
        return src.loss_mask(d)
    origin_doc = getattr(src, "origin_doc", None)
    if origin_doc is not None:
        flags = document_flags(src.base, int(origin_doc[d]))
        if flags is None:
            return None
        s = int(src.origin_start[d])
        return flags[s : s + int(src.lengths[d])]
    masked = loss_mask_of(src)
    return None if masked is None else masked.loss_mask(d)


def encode_sft(tokenizer, examples, *, prompt: str = "prompt", completion: str = "completion",
               messages: str = "messages", chat_template: str | None = None, train_on=("assistant",),
               append_eos: bool | None = None, eos_id: int | None = None, prepend_bos: bool = False,
               bos_id: int | None = None, allowed_special=(), disallowed_special="all",
               num_threads: int | None = None) -> MaskedSource:
    """Encode supervised fine-tuning examples into a :class:`MaskedSource`: one document per example, its prompt
    context only, its completion the targets.

    ``examples``: an iterable of

    * records with a prompt and a completion (``{"prompt": ..., "completion": ...}``; other field names with
      ``prompt=``/``completion=``): the prompt-completion form of TRL and of most SFT sets;
    * ``(prompt, completion)`` pairs of str;
    * lists of ``(text, is_target)`` pairs, for several turns: a chat rendered by its template, the assistant's
      turns ``True``;
    * chats, records with a list of messages (``{"messages": [{"role": "user", "content": ...}, ...]}``; another
      field name with ``messages=``), rendered by ``chat_template`` (the model's Jinja template, as transformers'
      ``apply_chat_template`` renders it; by default the tokenizer's own: its model folder's, or the transformers
      tokenizer's it was made from) and cut by :func:`~tokenmill.tokenizer.chat.chat_segments`: the turns
      of a role in ``train_on`` (default the assistant's), from after their generation prompt to their end of
      turn, are the targets. The template's text is encoded with its special tokens read as such (as
      transformers tokenizes a rendered chat), so is the messages' text.

    Each text is encoded on its own (``tokenizer.encode_batch``) and the ids are joined, so no token spans the
    border between a prompt and its completion, and a flag is exact: the completion's ids are what encoding it
    alone gives (a SentencePiece tokenizer adds its prefix space to each text; end the prompt where the
    completion's first token should start). ``append_eos`` ends every example with EOS, a target (the model learns
    to stop): by default a prompt-completion example's, not a chat's (its template ends each turn itself);
    ``prepend_bos`` starts it with BOS (no target: nothing before it; a chat template often writes it itself). Their ids are the
    tokenizer's special tokens of a known name, or ``eos_id``/``bos_id``. ``allowed_special`` and
    ``disallowed_special``: as in ``encode`` (special-token text is an error by default); pass
    ``allowed_special="all"`` where the texts spell a chat template's special tokens on purpose.

    The source remembers the tokenizer's vocabulary size, hash and EOS/BOS ids, which :meth:`MaskedSource.save`
    writes into the store of ids.

    >>> from tokenmill import train_bpe
    >>> tok = train_bpe(["ab ab abc"] * 3, vocab_size=258, special_tokens=["<|endoftext|>"])
    >>> src = encode_sft(tok, [{"prompt": "ab ", "completion": "abc"}])
    >>> src.get(0).tolist(), src.loss_mask(0).astype(int).tolist()
    ([256, 32, 256, 99, 257], [0, 0, 1, 1, 1])
    """
    enc = SftEncoder(tokenizer, examples, prompt=prompt, completion=completion, messages=messages,
                     chat_template=chat_template, train_on=train_on, append_eos=append_eos, eos_id=eos_id,
                     prepend_bos=prepend_bos, bos_id=bos_id, allowed_special=allowed_special,
                     disallowed_special=disallowed_special, num_threads=num_threads)
    part = enc.encode(list(examples), 0)
    ends = np.cumsum(part.lengths)
    out = MaskedSource(np.split(part.ids, ends[:-1]) if ends.size else [],
                       np.split(part.mask, ends[:-1]) if ends.size else [])
    out.facts = enc.facts()
    return out


COUNT_TOKENS = 1 << 22  # tokens a count over the flags reads at a time (documents_without_targets)
SAVE_SHARD_IDS = 1 << 22  # ids a shard of a saved source holds (about; cut at the first document end past it)
SFT_BATCH = 4096  # examples save_sft encodes at a time


class SftPart:
    """Consecutive examples encoded by :class:`SftEncoder`: their ``lengths`` (int64), all their ``ids`` (int64) and
    ``mask`` (uint8 flags) back to back, and how many of them were chats (``chats``)."""

    __slots__ = ("lengths", "ids", "mask", "chats")

    def __init__(self, lengths: np.ndarray, ids: np.ndarray, mask: np.ndarray, chats: int):
        self.lengths, self.ids, self.mask, self.chats = lengths, ids, mask, chats


class SftEncoder:
    """:func:`encode_sft`'s arguments, checked once (the tokenizer's roles, chat template, BOS), and its encoding of
    consecutive runs of examples (:meth:`encode`): what :func:`encode_sft` does at once and :func:`save_sft` a batch
    at a time, with the same ids and flags."""

    def __init__(self, tokenizer, examples=(), *, prompt: str = "prompt", completion: str = "completion",
                 messages: str = "messages", chat_template: str | None = None, train_on=("assistant",),
                 append_eos: bool | None = None, eos_id: int | None = None, prepend_bos: bool = False,
                 bos_id: int | None = None, allowed_special=(), disallowed_special="all",
                 num_threads: int | None = None):
        from ..tokenizer.adapters import tokenizer_with
        from ..tokenizer.special import BOS_NAMES
        from .store import special_id

        # (what as_tokenizer takes: a path, a transformers tokenizer, whose roles and chat template come along)
        tokenizer = tokenizer_with(tokenizer, ("encode_batch", "vocab_size", "special_tokens"))
        if isinstance(examples, (str, bytes, dict)):
            raise InputError(f"examples is a {type(examples).__name__}; pass a list (or any iterable) of examples")
        if append_eos is not None:
            append_eos = check_bool(append_eos, "append_eos")
        prepend_bos = check_bool(prepend_bos, "prepend_bos")
        if isinstance(train_on, str):
            train_on = (train_on,)
        if not isinstance(train_on, (tuple, list)) or not train_on or not all(isinstance(r, str) for r in train_on):
            raise ConfigError(f"train_on={train_on!r}: pass the roles whose turns are targets, e.g. ('assistant',)")
        # the special tokens' roles as the model's folder declares them (Llama 3 Instruct's EOS is <|eot_id|>, Qwen's
        # Instruct <|im_end|>), else found by name: what the template's variables say and what EOS/BOS append
        from ..tokenizer.formats.pretrained import roles_of

        roles = roles_of(tokenizer)
        from ..tokenizer.formats.pretrained import own_chat_template

        unchosen = None  # (named templates and none the default: said at the first chat, where one is needed)
        if chat_template is None:
            try:
                chat_template = own_chat_template(tokenizer)
            except ConfigError as e:
                unchosen = e
        elif isinstance(chat_template, str):  # (one of its named templates, by its name; else the template's text)
            chat_template = own_chat_template(tokenizer, chat_template) or chat_template
        names = {k: v for k, v in roles.items() if v is not None}  # (an absent one is undefined: '' in a template)
        bos = special_id(tokenizer, _first(roles["bos_token"], BOS_NAMES), bos_id, "bos", prepend_bos)
        self.tokenizer, self.roles, self.names, self.bos = tokenizer, roles, names, bos
        self.chat_template, self.unchosen, self.train_on = chat_template, unchosen, train_on
        self.prompt, self.completion, self.messages = prompt, completion, messages
        self.append_eos, self.eos_id = append_eos, eos_id
        self.special = (allowed_special, disallowed_special)
        self.kwargs = {} if num_threads is None else {"num_threads": num_threads}
        if _takes(tokenizer.encode_batch, "as_arrays"):  # (arrays, not lists of ints: ~1/3 of encode_sft's time)
            self.kwargs["as_arrays"] = True
        self.eos = self.key = None

    def facts(self) -> dict:
        """What a saved source records of the tokenizer: vocabulary size, hash, EOS (once the examples that end with
        it are encoded) and BOS ids."""
        if self.key is None:
            from .engines import tokenizer_key

            try:
                self.key = tokenizer_key(self.tokenizer)
            except ConfigError:  # (a tokenizer with no content hash: the store of ids says "external", as from ids)
                self.key = "external"
        return {"vocab_size": int(self.tokenizer.vocab_size), "eos_id": self.eos, "bos_id": self.bos,
                "tokenizer_hash": self.key}

    def encode(self, examples: list, first: int) -> SftPart:
        """The examples ``examples`` (examples ``first``, ``first + 1``, ... of the whole set, as errors name them)."""
        from ..tokenizer.special import EOS_NAMES
        from .store import special_id

        tokenizer, messages, prompt = self.tokenizer, self.messages, self.prompt
        texts: list[str] = []
        flags: list[bool] = []
        chat_text: list[bool] = []  # (a chat's text: its template spells special tokens on purpose)
        bounds = [0]
        chats: list[bool] = []
        for i, ex in enumerate(examples, first):
            is_chat = is_chat_record(ex, messages, prompt)
            if is_chat:
                if self.unchosen is not None:
                    raise ConfigError(f"example {i} is a chat (its {messages!r} field), but {self.unchosen}")
                if self.chat_template is None:
                    raise InputError(f"example {i} is a chat (its {messages!r} field) but no chat_template is given "
                                     "and the tokenizer has none of its own; pass the model's Jinja chat template (the "
                                     "one of its tokenizer_config.json)")
                from ..tokenizer.chat import chat_segments

                pairs = chat_segments(self.chat_template, ex[messages], train_on=self.train_on, where=f"example {i}",
                                      **self.names)
            else:
                pairs = _segments(ex, i, prompt, self.completion)
            for text, target in pairs:
                texts.append(text)
                flags.append(target)
                chat_text.append(is_chat)
            bounds.append(len(texts))
            chats.append(is_chat)
        append_eos = self.append_eos
        # looked up at the first example that ends with it (a prompt-completion record, or any with append_eos=True):
        # a set of chats alone records none, as its examples end with none
        if self.eos is None and (append_eos if append_eos is not None else not all(chats)):
            self.eos = special_id(tokenizer, _first(self.roles["eos_token"], EOS_NAMES), self.eos_id, "eos", True)
        eos, bos = self.eos, self.bos
        encoded: list = [None] * len(texts)
        for is_chat in (False, True):  # (plain texts under the caller's special-token rules, chats' reading them)
            at = [k for k, c in enumerate(chat_text) if c == is_chat]
            if not at:
                continue
            part = [texts[k] for k in at]
            allowed, disallowed = ("all", ()) if is_chat else self.special
            try:
                got = tokenizer.encode_batch(part, allowed_special=allowed, disallowed_special=disallowed,
                                             **self.kwargs)
            except SpecialTokenError as e:
                raise _which_example(tokenizer, texts, at, bounds, allowed, disallowed, e, first) from None
            except LoneSurrogateError as e:  # (it named the text by its place in this batch, not the example)
                raise _surrogate_example(texts, at, bounds, e, first) from None
            for k, ids in zip(at, got):  # (arrays: a batch's ids as Python lists of ints had taken ~200 bytes an id)
                encoded[k] = np.asarray(ids, np.int64).reshape(-1)
        # each example: [BOS] + its texts' ids + [EOS], the flags a run per piece; joined in C, not id by id
        head = [] if bos is None else [np.array([bos], np.int64)]
        pieces: list = []
        piece_flags: list[int] = []
        lengths = np.zeros(len(chats), np.int64)
        for d, ((a, b), is_chat) in enumerate(zip(zip(bounds[:-1], bounds[1:]), chats)):
            tail = [] if eos is None or (append_eos is None and is_chat) else [np.array([eos], np.int64)]
            parts = head + encoded[a:b] + tail
            pieces += parts
            piece_flags += [0] * len(head) + [int(f) for f in flags[a:b]] + [1] * len(tail)
            lengths[d] = sum(p.size for p in parts)
        sizes = np.fromiter((p.size for p in pieces), np.int64, len(pieces))
        flat = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        flags8 = np.repeat(np.asarray(piece_flags, np.uint8), sizes)
        return SftPart(lengths, flat, flags8, sum(chats))


def _takes(fn, name: str) -> bool:
    """Whether the callable ``fn`` takes a keyword argument ``name``."""
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # (a builtin without a signature)
        return False


def save_sft(tokenizer, examples, out_dir, *, overwrite: bool = False, progress: bool = False,
             batch_examples: int | None = None, **options) -> MaskedSource:
    """``encode_sft(tokenizer, examples, **options).save(out_dir)``, a batch of ``batch_examples`` examples at a time
    (default :data:`SFT_BATCH`): the same stores, byte for byte (the shards are cut by their ids, whatever the
    batches), for sets too large to hold in memory. ``examples`` may be any iterable (a generator reading a file),
    read once; what is held is one batch, one shard of ids (:data:`SAVE_SHARD_IDS`) and the flags as bits (an
    eighth of a byte a token). A folder holding the stores already is refused before an example is read, unless
    ``overwrite``; bad input part-way leaves no store behind (errors name the example by its number in the set).
    ``progress``: a bar of the examples on stderr. Returns the source over the saved folder
    (:meth:`MaskedSource.open`).

    >>> import tempfile, os
    >>> from tokenmill import train_bpe
    >>> tok = train_bpe(["ab ab abc"] * 3, vocab_size=258, special_tokens=["<|endoftext|>"])
    >>> src = save_sft(tok, ({"prompt": "ab ", "completion": c} for c in ["abc", "b"]), tempfile.mkdtemp())
    >>> len(src), src.loss_mask(1).astype(int).tolist()
    (2, [0, 0, 1, 1])
    """
    from pathlib import Path

    from .._validate import check_int

    overwrite = check_bool(overwrite, "overwrite")
    progress = check_bool(progress, "progress")
    batch_examples = SFT_BATCH if batch_examples is None else check_int(batch_examples, "batch_examples", min=1)
    enc = SftEncoder(tokenizer, examples, **options)
    out = Path(os.fspath(out_dir))
    _refuse_saved_there(out, overwrite)

    def parts():
        batch: list = []
        done = 0
        with _examples_bar(progress) as shown:
            for ex in examples:
                batch.append(ex)
                if len(batch) == batch_examples:
                    got = enc.encode(batch, done)
                    yield got.lengths, got.ids, got.mask
                    done += len(batch)
                    shown.update(len(batch))
                    batch = []
            if batch:
                got = enc.encode(batch, done)
                yield got.lengths, got.ids, got.mask
                shown.update(len(batch))

    return _save_pair(out, _recut(parts()), enc.facts, overwrite)


def _examples_bar(shown: bool):
    """A bar counting examples on stderr (``shown``), else one that counts nothing."""
    from tqdm.auto import tqdm

    return tqdm(unit=" examples", desc="encoding", disable=not shown, file=sys.stderr, leave=False)


def _refuse_saved_there(out, overwrite: bool) -> None:
    """Before any work: a folder that cannot be written, or one holding the two stores already (unless
    ``overwrite``), is refused."""
    from .._io import check_writable_folder, nothing_aside

    check_writable_folder(out, "the SFT stores' folder")
    nothing_aside([out / TOKENS_DIR, out / MASK_DIR])  # (a swap killed part-way: said before the encode, not after)
    there = [d for d in (TOKENS_DIR, MASK_DIR) if (out / d).exists()]
    if there and not overwrite:
        raise ConfigError(f"{str(out)!r} already holds {' and '.join(d + '/' for d in there)}; pass overwrite=True "
                          "(CLI: --overwrite) to replace the stores there, or another folder")


def _recut(parts):
    """``(lengths, ids, mask)`` runs of consecutive documents, cut again into shards of whole documents: one ends at
    the first document end at or past :data:`SAVE_SHARD_IDS` ids (so a shard depends on the documents alone, not on
    the runs they came in); at least one shard, empty where there are no documents."""
    held: list = []
    ids_held = 0
    given = False
    for lengths, ids, mask in parts:
        at = 0  # (the first document of this run not yet in a shard)
        ends = np.cumsum(lengths)
        while at < lengths.size:
            base = int(ends[at - 1]) if at else 0
            need = SAVE_SHARD_IDS - ids_held  # (ids until the shard is full: it ends with the document reaching it)
            cut = int(np.searchsorted(ends, base + need, side="left")) + 1  # (documents up to the one reaching it)
            if cut > lengths.size:
                held.append((lengths[at:], ids[base:], mask[base:]))
                ids_held += ids.size - base
                break
            stop = int(ends[cut - 1])
            held.append((lengths[at:cut], ids[base:stop], mask[base:stop]))
            yield tuple(np.concatenate([h[k] for h in held]) for k in range(3))
            given = True
            held, ids_held, at = [], 0, cut
    if held or not given:
        yield tuple(np.concatenate([h[k] for h in held]) if held else np.zeros(0, dt)
                    for k, dt in enumerate((np.int64, np.int64, np.uint8)))


def _save_pair(out, shards, facts, overwrite: bool) -> MaskedSource:
    """Write the documents of ``shards`` (``(lengths, ids, flags)`` each) as the store of ids ``out/tokens``, keeping
    their flags as bits (an eighth of a byte a token), then the flags as ``out/loss_mask``; the source over the two.
    ``facts``: a function giving the tokenizer's facts (``vocab_size``, ``tokenizer_hash``, ``eos_id``, ``bos_id``),
    asked once every shard is written (``vocab_size`` before).

    Over stores already there (``overwrite``), the new pair is written in a staging folder inside ``out`` first and
    the two pairs swapped once it is whole (:func:`~tokenmill._io.moved_aside`): replacing ``tokens/`` first had
    left, on an error or interrupt before ``loss_mask/`` was written, the new ids beside the old flags (refused on
    open) and the old ids gone."""
    from .._io import moved_aside

    made = _missing_folders(out)
    out.mkdir(parents=True, exist_ok=True)
    there = [out / d for d in (TOKENS_DIR, MASK_DIR) if (out / d).exists()]
    stage = out / f".{TOKENS_DIR}-{MASK_DIR}.staging~{os.getpid()}" if there else out
    try:
        if stage is not out:
            if stage.exists():  # (a run of this process that failed before its cleanup)
                shutil.rmtree(stage)
            stage.mkdir()
        got = _save_stores(stage, shards, facts)
        if stage is out:
            return got
        with moved_aside([out / TOKENS_DIR, out / MASK_DIR]) as aside:
            aside()
            for d in (TOKENS_DIR, MASK_DIR):
                os.replace(stage / d, out / d)
        stage.rmdir()
        return MaskedSource.open(out)
    except BaseException:  # (bad input found part-way: what was made here is not left behind)
        for d in [stage] if stage is not out else [out / TOKENS_DIR, out / MASK_DIR]:  # (none was there before)
            shutil.rmtree(d, ignore_errors=True)
        for d in made:  # (the folders made for the stores, innermost first, where still empty)
            with contextlib.suppress(OSError):
                d.rmdir()
        raise


def _missing_folders(out) -> list:
    """The folders of ``out`` (it included) that do not exist yet, innermost first."""
    missing = []
    p = out.absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    return missing


def _save_stores(out, shards, facts) -> MaskedSource:
    from .store import TokenStore

    bits: list = []

    def ids():
        for lengths, got, flags in shards:
            bits.append((lengths, np.packbits(flags), flags.size))
            yield lengths, got

    known: dict = {}

    def roles():
        known.update(facts())
        return known["eos_id"], known["bos_id"]

    tokens = TokenStore.from_token_arrays(out / TOKENS_DIR, ids(), vocab_size=int(facts()["vocab_size"]),
                                          tokenizer_hash=str(facts()["tokenizer_hash"] or "external"), roles=roles)
    # the flags name the ids they were saved with (their store's fingerprint): open() pairs the two
    TokenStore.from_token_arrays(out / MASK_DIR, ((lengths, np.unpackbits(packed, count=n))
                                                  for lengths, packed, n in bits),
                                 vocab_size=2, tokenizer_hash=f"{MASK_HASH}:{tokens.fingerprint}")
    return MaskedSource.open(out)


def is_chat_record(ex, messages: str = "messages", prompt: str = "prompt") -> bool:
    """Whether ``encode_sft`` reads example ``ex`` as a chat: a record with the messages field and no prompt."""
    return isinstance(ex, dict) and messages in ex and prompt not in ex


def _first(name: str | None, names) -> tuple:
    return tuple(names) if name is None else (name, *names)


def _which_example(tokenizer, texts: list[str], at: list[int], bounds: list[int], allowed, disallowed, error,
                   first: int = 0):
    """The SpecialTokenError of a batch of examples' texts (``texts[k]`` for ``k`` in ``at``), naming the example
    (the batch's first is example ``first``) and part that spells the token."""
    import bisect

    for k in at:
        try:
            tokenizer.encode(texts[k], allowed_special=allowed, disallowed_special=disallowed)
        except SpecialTokenError as e:
            i = bisect.bisect_right(bounds, k) - 1
            out = SpecialTokenError(f"example {first + i:,d}, part {k - bounds[i]:,d}: {e.found}; pass "
                                    "allowed_special='all' where the texts spell special tokens on purpose (a chat "
                                    "template's), or disallowed_special=() to encode them as plain text", e.found)
            out.example, out.part = first + i, k - bounds[i]
            return out
    return error


def _surrogate_example(texts: list[str], at: list[int], bounds: list[int], error, first: int = 0):
    """The LoneSurrogateError of a batch of examples' texts (the first is example ``first``), naming the example
    and part that holds one."""
    import bisect

    from ..tokenizer.surrogates import batch_surrogate_error, lone_surrogate_error

    for k in at:
        if batch_surrogate_error([texts[k]]) is not None:
            i = bisect.bisect_right(bounds, k) - 1
            return lone_surrogate_error(texts[k], f"example {first + i:,d}, part {k - bounds[i]:,d}")
    return error


def _segments(ex, i: int, prompt: str, completion: str) -> list[tuple[str, bool]]:
    """Example ``i`` as ``(text, is_target)`` pairs, else an InputError naming it and the forms that are taken."""
    forms = ("pass records with the prompt and completion fields, (prompt, completion) pairs of str, or lists of "
             "(text, is_target) pairs")
    if isinstance(ex, dict):
        missing = [f for f in (prompt, completion) if f not in ex]
        if missing:
            have = ", ".join(map(repr, list(ex)[:8])) or "none"
            raise InputError(f"example {i} has no field {missing[0]!r} (its fields: {have}); name the fields with "
                             "prompt=... and completion=... (a chat's messages with messages=...)")
        pairs = [(ex[prompt], False), (ex[completion], True)]
    elif isinstance(ex, tuple) and len(ex) == 2 and all(isinstance(t, str) for t in ex):
        pairs = [(ex[0], False), (ex[1], True)]
    elif isinstance(ex, (list, tuple)) and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in ex):
        pairs = [tuple(p) for p in ex]
    else:
        raise InputError(f"example {i} is a {type(ex).__name__}; {forms}")
    for j, (text, target) in enumerate(pairs):
        if not isinstance(text, str):
            raise InputError(f"example {i}, part {j}: the text is a {type(text).__name__}, not a str; {forms}")
        if not isinstance(target, (bool, np.bool_)):
            raise InputError(f"example {i}, part {j}: is_target is {target!r}; pass True (a target) or False")
    return [(t, bool(f)) for t, f in pairs]
