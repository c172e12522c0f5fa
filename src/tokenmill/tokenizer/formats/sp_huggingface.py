"""Hugging Face ``tokenizer.json`` files of the SentencePiece family (Llama 2, Mistral v1-v3, Gemma-style):
BPE over characters with ``byte_fallback``, ``▁`` for spaces, exactly as HF ``tokenizers`` runs them.

HF's conversion of a SentencePiece model differs from ``sentencepiece`` in places (merges by their
place in a merge list instead of by score, a character outside the vocabulary falls back to bytes at
once, the dummy ``▁`` of the legacy ``Prepend`` normalizer before every piece between added tokens,
Metaspace's prefix skipped when the text starts with a space); each format is the reference for
itself, so this file is run as HF runs it. What is honoured (anything else is refused by name, and
``as_tokenizer`` runs the file through HF ``tokenizers`` instead):

* ``normalizer``: none, ``Prepend("▁")``, ``Replace(" " -> "▁")`` (a string pattern), or a ``Sequence``
  of them;
* ``pre_tokenizer``: none or ``Metaspace`` (replacement ``▁``, ``prepend_scheme`` always / first /
  never or the older ``add_prefix_space``, ``split`` on or off), alone or in a ``Sequence``; a ``Split`` on
  the string ``" "`` after a ``Replace(" " -> "▁")`` normalizer (transformers' Gemma form: no space is left
  to split on);
* ``model``: ``BPE`` with ``byte_fallback`` (all 256 ``<0xNN>`` tokens), ``unk_token``, ``fuse_unk``,
  ``ignore_merges`` (not with a split Metaspace), merges as ``"a b"`` or pairs, applied by their place
  in the list (a pair listed twice keeps its last place); no dropout, word prefix or suffix;
* ``added_tokens`` not normalized (the usual ``<s>``, ``</s>``, ``[INST]`` ...), found as HF finds them;
* ``decoder``: a ``Sequence`` of ``Replace``, ``ByteFallback``, ``Fuse``, ``Strip``, or ``Metaspace``.

``encode(text, allowed_special="all")`` equals ``tokenizers.Tokenizer.encode(text,
add_special_tokens=False).ids`` and ``decode(ids)`` its ``decode(ids, skip_special_tokens=False)``.
The BPE runs on the kernels of ``.model`` files (``sp_encoder.CompiledSentencePiece.from_merges``).
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Any, Literal, Union

import numpy as np
from msgspec import UNSET, UnsetType

from ...errors import ConfigError, FormatError, SpecialTokenError, UnknownTokenError, UnsupportedTokenizerError
from ..groups import batch_args, encode_flat_by_batch, in_groups
from ..sentencepiece import WS, encode_group, first_of, utf8_of
from ..special import names_batch_text, rule_of, union_of
from ..vocab_names import VocabNames
from .pretrained import PretrainedExport
from .schemas import ID_RULE, HFAddedToken, Lenient, check_merge_forms, decode_file, is_id

_MARKERS = (b'"Metaspace"', b'"Prepend"', b'"byte_fallback": true', b'"byte_fallback":true', b'"ByteFallback"',
            '"\u2581"'.encode(), b'"\\u2581"')


def looks_sentencepiece_json(raw: bytes) -> bool:
    """A tokenizer.json that names a component of this family (a Metaspace pre-tokenizer, a Prepend
    normalizer, ``byte_fallback`` on, a ByteFallback decoder, the string "▁" alone: a Replace of " "
    with it, what a model without dummy prefix or byte fallback keeps) and none that is byte-level: read
    here, not as byte-level BPE (which refuses those components by name)."""
    return any(m in raw for m in _MARKERS) and b'"ByteLevel"' not in raw


# ---------------------------------------------------------------------------------- the schema
class _Pattern(Lenient):
    String: Union[str, UnsetType] = UNSET
    Regex: Union[str, UnsetType] = UNSET


class _Prepend(Lenient, tag_field="type", tag="Prepend"):
    prepend: str


class _Replace(Lenient, tag_field="type", tag="Replace"):
    pattern: _Pattern
    content: str


class _NormSequence(Lenient, tag_field="type", tag="Sequence"):
    normalizers: list[Union[_Prepend, _Replace]] = []


class _Metaspace(Lenient, tag_field="type", tag="Metaspace"):
    replacement: str  # (required, as HF's reader has it: a file without one is not taken for one with '▁')
    prepend_scheme: Union[Literal["always", "first", "never"], UnsetType] = UNSET
    add_prefix_space: Union[bool, UnsetType] = UNSET
    split: bool = True


class _Split(Lenient, tag_field="type", tag="Split"):
    pattern: _Pattern
    behavior: str
    invert: bool = False


class _PreSequence(Lenient, tag_field="type", tag="Sequence"):
    pretokenizers: list[Union[_Metaspace, _Split]] = []


class _BPE(Lenient):
    vocab: dict[str, int]  # (both required, as HF's reader has them: a file without merges is not an empty list's)
    merges: list[Union[str, tuple[str, str]]]
    type: Union[Literal["BPE"], UnsetType] = UNSET
    dropout: Union[float, None] = None
    unk_token: Union[str, None] = None
    continuing_subword_prefix: Union[str, None] = None
    end_of_word_suffix: Union[str, None] = None
    fuse_unk: Union[bool, None] = False  # null reads as false, as in HF
    byte_fallback: Union[bool, None] = False
    ignore_merges: Union[bool, None] = False


class _DReplace(Lenient, tag_field="type", tag="Replace"):
    pattern: _Pattern
    content: str


class _DByteFallback(Lenient, tag_field="type", tag="ByteFallback"):
    pass


class _DFuse(Lenient, tag_field="type", tag="Fuse"):
    pass


class _DStrip(Lenient, tag_field="type", tag="Strip"):
    content: str
    start: int = 0
    stop: int = 0


class _DMetaspace(Lenient, tag_field="type", tag="Metaspace"):
    replacement: str
    prepend_scheme: Union[Literal["always", "first", "never"], UnsetType] = UNSET
    add_prefix_space: Union[bool, UnsetType] = UNSET
    split: bool = True


_DPiece = Union[_DReplace, _DByteFallback, _DFuse, _DStrip, _DMetaspace]


class _DSequence(Lenient, tag_field="type", tag="Sequence"):
    decoders: list[_DPiece] = []


class _File(Lenient):
    model: _BPE
    added_tokens: Union[list[HFAddedToken], None] = None
    normalizer: Union[_Prepend, _Replace, _NormSequence, None] = None
    pre_tokenizer: Union[_Metaspace, _Split, _PreSequence, None] = None
    decoder: Union[_DReplace, _DByteFallback, _DFuse, _DStrip, _DMetaspace, _DSequence, None] = None
    truncation: Any = None  # (not applied: said on load, huggingface.warn_not_applied)
    padding: Any = None


_KNOWN = {"normalizer": {"Prepend", "Replace", "Sequence"}, "pre_tokenizer": {"Metaspace", "Split", "Sequence"},
          "decoder": {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace", "Sequence"}}


def _refuse(source: str, what: str) -> UnsupportedTokenizerError:
    return UnsupportedTokenizerError(
        f"{source}: {what} cannot be reproduced exactly by tokenmill's SentencePiece-family reader (Prepend/"
        "Replace normalizers, a Metaspace pre-tokenizer, BPE with byte_fallback); tokenmill.as_tokenizer(path) "
        "(and --tokenizer) run such a file through HF tokenizers")


def _refuse_components(body, source: str) -> None:
    """Before the schema check: a component of another kind is refused by its name."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), dict):
        raise FormatError(f"{source}: not a Hugging Face tokenizer.json (no 'model' object)")
    mtype = body["model"].get("type", "BPE")
    if mtype != "BPE":
        raise _refuse(source, f"the {mtype!r} model")
    for key, known in _KNOWN.items():
        stack = [body.get(key)]
        while stack:
            spec = stack.pop()
            if not isinstance(spec, dict):
                continue
            kind = spec.get("type")
            if isinstance(kind, str) and kind not in known:
                raise _refuse(source, f"the {kind!r} {key.replace('_', '-')}")
            for sub in ("normalizers", "pretokenizers", "decoders"):
                if isinstance(spec.get(sub), list):
                    stack.extend(spec[sub])


# ---------------------------------------------------------------------------------- loading
def load(path) -> "SentencePieceJsonTokenizer":
    """Read a tokenizer.json of this family (a file or its folder); see the module docstring."""
    from pathlib import Path

    from ..._io import read_bytes_limited

    p = Path(path)
    p = p / "tokenizer.json" if p.is_dir() else p
    raw = read_bytes_limited(p, what="tokenizer.json")
    return SentencePieceJsonTokenizer(raw, source=str(p))


def _from_raw(raw: bytes, source: str) -> "SentencePieceJsonTokenizer":
    return SentencePieceJsonTokenizer(raw, source=source)


class SentencePieceJsonTokenizer(VocabNames, PretrainedExport):
    """A tokenizer.json of the SentencePiece family, run as HF ``tokenizers`` runs it, with tokenmill's
    tokenizer protocol. Special added tokens follow tiktoken's safety model (text spelling one raises
    unless allowed); non-special ones are always matched, as in HF."""

    def __init__(self, raw: bytes, *, source: str = "<tokenizer.json>"):
        from ..added import AddedTokenMatcher
        from .huggingface import added_tokens_of

        self._raw, self._source = bytes(raw), source
        where = f"tokenizer.json file {source!r}"
        spec = decode_file(self._raw, _File, where=where, pre=lambda body: _refuse_components(body, source),
                           maps=lambda body: [("model.vocab", body["model"].get("vocab"), is_id, ID_RULE)])
        model = spec.model
        from .huggingface import not_applied_of, warn_not_applied

        warn_not_applied(source, not_applied_of(spec))
        if model.dropout not in (None, 0.0):
            raise _refuse(source, f"BPE dropout={model.dropout}")
        for key in ("continuing_subword_prefix", "end_of_word_suffix"):
            if getattr(model, key):
                raise _refuse(source, f"BPE {key}={getattr(model, key)!r}")
        vocab = model.vocab
        bad = [(t, i) for t, i in vocab.items() if not is_id(i)]
        if bad:
            raise FormatError(f"{where}: field model.vocab[{bad[0][0]!r}] = {bad[0][1]!r}: expected {ID_RULE}")
        from .schemas import check_ids_below

        check_ids_below(len(self._raw), ((f"model.vocab[{t!r}]", i) for t, i in vocab.items()), where=where,
                        what="id")
        self._id_to_token: dict[int, str] = {}
        for t, i in vocab.items():
            if i in self._id_to_token:
                raise FormatError(f"{where}: model.vocab gives id {i:,d} to both {self._id_to_token[i]!r} and {t!r}")
            self._id_to_token[i] = t
        merges = []
        check_merge_forms(model.merges, where)
        for k, m in enumerate(model.merges):
            if isinstance(m, str) and (m.count(" ") != 1 or m.startswith(" ") or m.endswith(" ")):
                raise FormatError(f"{where}: merge {k} {m!r} is not two tokens separated by one space")
            a, b = m.split(" ") if isinstance(m, str) else m
            for t in (a, b, a + b):
                if t not in vocab:
                    raise FormatError(f"{where}: merge {k} ({a!r}, {b!r}) needs {t!r}, which is not in the vocabulary")
            merges.append((a, b))
        byte_fallback = bool(model.byte_fallback)
        if byte_fallback:
            missing = [b for b in range(256) if f"<0x{b:02X}>" not in vocab]
            # with none of them, HF's byte fallback finds no byte token and falls back to unk, as without it:
            # what transformers' conversion writes for a model trained without byte fallback
            byte_fallback = len(missing) < 256
            if missing and byte_fallback:
                raise _refuse(source, f"byte_fallback with {len(missing)} of the 256 <0xNN> tokens missing")
            bytes_ = {f"<0x{b:02X}>" for b in range(256)}
            used = [m for m in merges if m[0] in bytes_ or m[1] in bytes_]
            if used:
                raise _refuse(source, f"a merge of byte tokens ({used[0][0]!r}, {used[0][1]!r})")
        if model.unk_token is not None and model.unk_token not in vocab:
            raise FormatError(f"{where}: unk_token {model.unk_token!r} is not in the vocabulary")
        self._unk = vocab[model.unk_token] if model.unk_token is not None else -1
        self._vocab = vocab
        # normalizer and pre-tokenizer: where a ``▁`` is put before a piece, and whether spaces are ``▁``
        norms = [] if spec.normalizer is None else (
            spec.normalizer.normalizers if isinstance(spec.normalizer, _NormSequence) else [spec.normalizer])
        self._prepend_norm = False
        spaces = False  # a space became ``▁`` before the pre-tokenizer
        for n in norms:
            if isinstance(n, _Prepend):
                if n.prepend != WS or spaces:
                    raise _refuse(source, f"a Prepend of {n.prepend!r}" + (" after a Replace" if spaces else ""))
                self._prepend_norm = True
            elif n.pattern.String is not UNSET and n.pattern.String == " " and n.content == WS:
                spaces = True
            else:
                raise _refuse(source, f"a Replace of {n.pattern.String if n.pattern.String is not UNSET else n.pattern.Regex!r}"
                                      f" by {n.content!r}")
        pres = [] if spec.pre_tokenizer is None else (
            spec.pre_tokenizer.pretokenizers if isinstance(spec.pre_tokenizer, _PreSequence) else [spec.pre_tokenizer])
        for pre in [p for p in pres if isinstance(p, _Split)]:
            # transformers' Gemma form: Split(" ") after a normalizer that made every space a ``▁``: no space is
            # left to split on, so it changes nothing (anything else splits: refused)
            if not (spaces and pre.pattern.String == " " and not pre.invert):
                raise _refuse(source, "a Split pre-tokenizer" + ("" if spaces else " (spaces not replaced by \u2581 "
                                                                 "before it)"))
        pres = [p for p in pres if not isinstance(p, _Split)]
        if len(pres) > 1:
            raise _refuse(source, "a pre-tokenizer Sequence of several Metaspace")
        self._scheme, split = "never", False
        if pres:
            ms = pres[0]
            if ms.replacement != WS:
                raise _refuse(source, f"a Metaspace replacement {ms.replacement!r}")
            scheme = ms.prepend_scheme if ms.prepend_scheme is not UNSET else (
                "always" if ms.add_prefix_space is UNSET or ms.add_prefix_space else "never")
            self._scheme, split = scheme, ms.split
            spaces = True
        if self._prepend_norm and not spaces:
            raise _refuse(source, "a Prepend normalizer without spaces written as \u2581")
        self._spaces = spaces
        self._ignore_merges = bool(model.ignore_merges)
        if model.ignore_merges and split:
            raise _refuse(source, "ignore_merges with a Metaspace that splits words")
        self._split = split
        self._merges = merges
        self._byte_fallback = byte_fallback
        self._fuse_unk = bool(model.fuse_unk)
        self._decoders = self._decoder_chain(spec.decoder)
        self._joiner = " " if spec.decoder is None else ""  # HF joins the tokens by a space where there is no decoder
        # added tokens, as HF derives them on load
        added = added_tokens_of(spec.added_tokens or [], vocab, source)
        if any(t.normalized for t in added):
            t = next(t for t in added if t.normalized)
            raise _refuse(source, f"the normalized added token {t.content!r}")
        self._added = added
        self._matcher = AddedTokenMatcher(added, None) if added else None
        self._special = {t.content: t.id for t in added if t.special}
        self._added_by_id = {t.id: t.content for t in added}
        self._n = max([i + 1 for i in self._id_to_token] + [t.id + 1 for t in added] + [1])
        self._encoder = None
        self._int_lists = None
        self._special_re: dict = {}
        self._rules: dict = {}  # (allowed_special, disallowed_special) -> special.requested's rule
        # added tokens that are always cut out (not special): a text holding one is more than one plain piece
        self._always = frozenset(t.content for t in added if not t.special)
        import threading

        self._lock = threading.Lock()

    def _decoder_chain(self, d) -> list:
        if d is None:
            return []
        items = d.decoders if isinstance(d, _DSequence) else [d]
        for x in items:
            if isinstance(x, _DReplace) and x.pattern.String is UNSET:
                raise _refuse(self._source, "a Replace decoder with a regex")
            if isinstance(x, _DStrip) and (len(x.content) != 1 or not 0 <= x.start <= 1 << 20 or not 0 <= x.stop <= 1 << 20):
                raise _refuse(self._source, f"a Strip decoder of {x.content!r}")
        return list(items)

    def __reduce__(self):
        return _from_raw, (self._raw, self._source)

    # ----------------------------------------------------------------- properties
    @property
    def vocab_size(self) -> int:
        return self._n

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def added_tokens(self) -> dict[str, int]:
        return {t.content: t.id for t in self._added}

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(b"tokenmill.sentencepiece-json\0" + self._raw).hexdigest()

    def __eq__(self, other) -> bool:  # by content, as the byte-level Tokenizer (it had compared by identity)
        return type(other) is type(self) and other.content_hash == self.content_hash

    def __hash__(self) -> int:
        return hash(self.content_hash)

    @property
    def pattern(self):
        return None

    def _token(self, i: int) -> str:
        from ..._validate import check_token_id

        i = check_token_id(i)
        t = self._added_by_id.get(i, self._id_to_token.get(i))
        if t is None:
            raise UnknownTokenError(f"token id {i} is out of range for vocab_size={self._n:,d} (or holds no token)")
        return t

    def token_bytes(self, token_id: int) -> bytes:
        """A token's bytes: the vocabulary token with ``▁`` as a space, a ``<0xNN>`` token's byte, an
        added token's text."""
        t = self._token(token_id)
        if token_id in self._added_by_id:
            return t.encode("utf-8")
        if self._byte_fallback and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            return bytes([int(t[3:5], 16)])
        return t.replace(WS, " ").encode("utf-8")

    def vocab_items(self):
        return ((i, self.token_bytes(i)) for i in sorted(self._id_to_token) if i not in self._added_by_id)

    def _hf_tokens(self) -> tuple[dict[int, str], dict[str, int]]:
        """``VocabNames``' strings: the file's own (its model's vocabulary, its added tokens)."""
        return dict(sorted(self._id_to_token.items())), self.added_tokens

    def _unk_id(self) -> int | None:
        return self._unk if self._unk >= 0 else None

    def __repr__(self) -> str:
        return (f"SentencePieceJsonTokenizer(vocab_size={self._n:,d}, byte_fallback={self._byte_fallback}, "
                f"special_tokens={len(self._special)}, source={os.path.basename(self._source)!r})")

    # ----------------------------------------------------------------- encoding
    def _rule(self, allowed_special, disallowed_special) -> tuple[frozenset, frozenset, frozenset]:
        """(allowed, to check, to look for): ``special.requested``'s rule of these arguments (kept for hashable
        ones, ``special.rule_of``) and the tokens whose presence makes a text more than one plain piece (a
        special token not allowed is matched by HF's scan and then skipped: alone, it leaves the text whole)."""
        allowed, check = rule_of(self._rules, self._special, allowed_special, disallowed_special)
        return allowed, check, union_of(allowed, check, self._always)

    def _allowed(self, text: str, allowed_special, disallowed_special, rule=None) -> frozenset:
        if not isinstance(text, str):
            utf8_of(text)
        allowed, check = (rule_of(self._rules, self._special, allowed_special, disallowed_special) if rule is None
                          else rule[:2])
        if check:
            m = first_of(self._special_re, check, text)
            if m is not None:
                found = f"the text contains the special token {m.group()!r} at character {m.start():,d}"
                raise SpecialTokenError(
                    f"{found}; pass allowed_special={{{m.group()!r}}} (or 'all') to encode it as a special token, "
                    "disallowed_special=() to encode it as plain text, or use encode_ordinary()", found)
        return allowed

    def _lists(self):
        """One Python int per id, for lists out (``_cpython.IntLists``, made on first use)."""
        if self._int_lists is None:
            from .._cpython import IntLists

            self._int_lists = IntLists(self._n)
        return self._int_lists

    def _compiled(self):
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    from ..bpe.sp_encoder import CompiledSentencePiece

                    self._encoder = CompiledSentencePiece.from_merges(
                        self._vocab, max(self._id_to_token, default=0) + 1, self._merges,
                        byte_fallback=self._byte_fallback, unk=self._unk, fuse_unk=self._fuse_unk,
                        ws_split=self._split, escape=self._spaces)
        return self._encoder

    def _pieces(self, text: str, allowed) -> list:
        """(text the kernel reads, None) or (None, id): HF's added-token split, each text piece normalized
        and pre-tokenized (``▁`` written as a space; the kernel reads it as ``▁``)."""
        if self._matcher is None:
            parts = [(text, None)] if text else []
        else:
            parts = self._matcher.pieces(text, allowed)
        return self._read(parts)

    def _plain(self, text: str) -> list:
        """:meth:`_pieces` of a text that holds no added token to cut out (a batch's scan found none)."""
        return self._read([(text, None)] if text else [])

    @property
    def _plain_utf8(self):
        """:meth:`_plain` of non-empty texts as a function of their UTF-8 (the ``▁`` its normalizer or
        pre-tokenizer puts first), or None where it is not one (characters dropped, whole words looked up)."""
        if (self._unk < 0 and not self._byte_fallback) or self._ignore_merges:
            return None
        if self._prepend_norm:
            return lambda datas: [b" " + d for d in datas]
        if self._spaces and self._scheme != "never":  # (always or first: the text's start is a piece's)
            ws = WS.encode("utf-8")
            return lambda datas: [d if d[:1] == b" " or d.startswith(ws) else b" " + d for d in datas]
        return lambda datas: datas

    def _read(self, parts: list) -> list:
        """The pieces ``parts`` (HF's added-token split of a text) as the kernel reads them."""
        out, at = [], 0
        for piece, tid in parts:
            start = at
            at += len(piece)
            if tid is not None:
                out.append((None, tid))
                continue
            if self._prepend_norm:  # Prepend("▁"), every piece (HF normalizes each piece alone)
                piece = " " + piece
            if self._spaces and self._scheme != "never":
                first = piece[:1]
                if first not in (" ", WS) and (self._scheme == "always" or start == 0):
                    piece = " " + piece
            if self._unk < 0 and not self._byte_fallback:
                # no unknown token: HF drops a character outside the vocabulary, so its neighbours meet
                piece = "".join(c for c in piece if (WS if c == " " and self._spaces else c) in self._vocab)
                if not piece:
                    continue
            if self._ignore_merges:
                word = piece.replace(" ", WS) if self._spaces else piece
                tid = self._vocab.get(word)
                if tid is not None:
                    out.append((None, tid))
                    continue
            out.append((piece, None))
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encode(text, disallowed_special=())

    def encode(self, text: str, *, allowed_special=(), disallowed_special="all") -> list[int]:
        from ...errors import LoneSurrogateError
        from ..surrogates import lone_surrogate_error

        if not isinstance(text, str):
            utf8_of(text)  # raises: names what it is
        # one text: its pieces, each through the kernel on its own (the batch's groups, joins and pieces'
        # bookkeeping took ~90 us of a sentence's ~100, where HF's encode takes ~14)
        enc = self._compiled()
        out: list[int] = []
        try:
            for piece, tid in self._pieces(text, self._allowed(text, allowed_special, disallowed_special)):
                if tid is not None:
                    out.append(tid)
                    continue
                data = utf8_of(piece)
                if data:
                    out.extend(self._lists().one(enc.encode_one(data, normalized=True)[0]))
        except LoneSurrogateError:  # "the text", not a piece of it
            raise lone_surrogate_error(text) from None
        return out

    @names_batch_text
    def encode_batch(self, texts, *, num_threads=None, as_arrays: bool = False, allowed_special=(),
                     disallowed_special="all") -> list:
        """``[encode(t) for t in texts]``, the kernel run once per group of texts (``num_threads`` groups
        at a time; the kernels release the GIL)."""
        texts, threads, as_arrays = batch_args(texts, num_threads, as_arrays)
        enc = self._compiled()
        rule = self._rule(allowed_special, disallowed_special) if texts else None  # once a call, not a text

        def encode(datas: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
            return enc.encode_many(datas, normalized=True)[:2]

        def pieces(t: str) -> list:
            return self._pieces(t, self._allowed(t, allowed_special, disallowed_special, rule))

        def group(lo: int, hi: int) -> list:
            return encode_group(texts[lo:hi], pieces, encode, lo, rule[2], as_arrays, self._lists, self._plain,
                                self._plain_utf8)

        return in_groups(texts, threads, group)

    # ----------------------------------------------------------------- decoding
    def decode(self, ids, errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        """HF's ``decode(ids, skip_special_tokens=...)``: the tokens through the file's decoder chain (with
        ``"decoder": null`` none, and the tokens joined by a space, as HF joins them), where
        the bytes of byte-fallback pieces that form no character become U+FFFD (``errors="replace"``, HF's
        only rule: another handler is refused, not ignored); ``skip_special_tokens=True`` leaves out the ids
        of :attr:`special_tokens` first."""
        from ..._validate import check_decode_errors
        from ..special import without_special_ids

        check_decode_errors(errors)
        ids = without_special_ids(ids, self._special, skip_special_tokens)
        if errors != "replace":
            raise ConfigError(f"errors={errors!r}: this tokenizer decodes as HF tokenizers does, whose byte "
                              "fallback makes invalid bytes U+FFFD; pass errors='replace' (the default), or "
                              "decode_bytes(ids) for the bytes themselves")
        return self._decoded(ids, raw=False)

    def _decoded(self, ids, *, raw: bool) -> str:
        """The text of ``decode``; ``raw``: byte-fallback bytes that form no character kept as surrogate escapes
        (``"surrogateescape"``), not U+FFFD, so that the text's ``encode("utf-8", "surrogateescape")`` is the
        tokens' bytes (``decode_bytes``)."""
        tokens, decoders, runs = self._tokens_of(ids)
        for k, d in enumerate(decoders):
            if k == 0 and runs is not None:  # (a ByteFallback on the table's tokens: its runs found already)
                tokens = _byte_runs(tokens, *runs, raw=raw)
            elif isinstance(d, _DReplace):
                tokens = [t.replace(d.pattern.String, d.content) for t in tokens]
            elif isinstance(d, _DByteFallback):
                tokens = _byte_fallback(tokens, raw=raw)
            elif isinstance(d, _DFuse):
                tokens = ["".join(tokens)]
            elif isinstance(d, _DStrip):
                tokens = [_strip(t, d.content, d.start, d.stop) for t in tokens]
            else:  # Metaspace
                scheme = d.prepend_scheme if d.prepend_scheme is not UNSET else (
                    "always" if d.add_prefix_space is UNSET or d.add_prefix_space else "never")
                tokens = ["".join(("" if i == 0 and scheme != "never" else " ") if c == d.replacement else c
                                  for c in t) for i, t in enumerate(tokens)]
        return self._joiner.join(tokens)

    def _tokens_of(self, ids) -> tuple[list[str], list, tuple | None]:
        """``ids``' tokens through the decoder chain's leading per-token decoders (Replace and Strip, worked out
        once for the whole vocabulary: ``_decode_table``), the decoders left to run, and where the first of
        those is a ByteFallback, the runs of ``<0xNN>`` tokens it joins (``(starts, ends, bytes)``: found by
        their ids, not token by token; an empty list where there are none). ``decode`` ran every decoder
        token by token: ~2.3 us an id, HF ~0.2."""
        from .._cpython import ids_array

        table, missing, byte_of, rest = self._decode_table
        arr = ids_array(ids)
        if arr.size < 16:  # (a few ids: Python, token by token, costs less than the array operations)
            n = len(table)
            tokens = [table[i] if 0 <= i < n else None for i in arr.tolist()]
            if None in tokens:
                self._token(int(arr[tokens.index(None)]))  # names it
        else:
            if int(arr.min()) < 0 or int(arr.max()) >= len(table) or bool(missing[arr].any()):
                for i in arr.tolist():
                    self._token(i)  # names the first id that holds no token
            tokens = list(map(table.__getitem__, arr.tolist()))
        runs = _runs(byte_of[arr]) if rest and isinstance(rest[0], _DByteFallback) else None
        return tokens, rest, runs

    @functools.cached_property
    def _decode_table(self) -> tuple:
        """``(tokens, missing, byte_of, rest)``: each id's token after the decoder chain's leading Replace and
        Strip decoders (those work token by token, whatever the tokens around), which ids hold no token, the
        byte ByteFallback reads each of those tokens as (-1: none), and the decoders after them."""
        k = 0
        while k < len(self._decoders) and isinstance(self._decoders[k], (_DReplace, _DStrip)):
            k += 1
        table = [self._added_by_id.get(i, self._id_to_token.get(i)) for i in range(self._n)]
        missing = np.array([t is None for t in table], np.bool_)
        for d in self._decoders[:k]:
            if isinstance(d, _DReplace):
                table = [None if t is None else t.replace(d.pattern.String, d.content) for t in table]
            else:
                table = [None if t is None else _strip(t, d.content, d.start, d.stop) for t in table]
        byte_of = np.array([_byte_value(t) if t is not None else -1 for t in table], np.int16)
        return table, missing, byte_of, self._decoders[k:]

    def decode_bytes(self, ids) -> bytes:
        """The bytes of ``decode``'s text, but for byte-fallback pieces that form no character: their own bytes,
        where ``decode`` has U+FFFD (so that the bytes of ids decoded a few at a time join into the text's, as
        every tokenmill tokenizer's do; the ``.model`` form of a model gives the same bytes)."""
        from ..special import without_special_ids

        return self._decoded(without_special_ids(ids, self._special, False), raw=True).encode("utf-8",
                                                                                              "surrogateescape")

    def save_huggingface(self, path) -> None:
        """Write the tokenizer.json this tokenizer was read from (its exact bytes), atomically; never over that
        file itself."""
        from ..._io import protect_inputs, write_bytes_atomic

        with protect_inputs([self._source] if not self._source.startswith("<") else []):
            write_bytes_atomic(path, self._raw)

    encode_flat = encode_flat_by_batch  # (one flat array of encode_batch's ids, as Tokenizer.encode_flat)

    def to_tiktoken(self, name=None):
        """Refused, as ``save_tiktoken``: tiktoken runs byte-level BPE over regex splits, not this family's merges
        over characters (an AttributeError had said nothing of why)."""
        raise ConfigError("a SentencePiece-family tokenizer.json has no tiktoken form (tiktoken runs byte-level BPE "
                          "over regex splits); keep the tokenizer.json (save_huggingface writes it)")

    save_tiktoken = to_tiktoken

    def save(self, path) -> None:
        """Refused: a SentencePiece-family tokenizer.json has no tokenmill file form (it is run as the file
        says); ``save_huggingface`` writes the file itself."""
        raise ConfigError("a SentencePiece-family tokenizer.json has no tokenmill file form; save it with "
                          "save_huggingface(path) (its exact bytes), which every tokenmill loader reads")


def _byte_value(t: str) -> int:
    """The byte of a ``<0xNN>`` token (HF's ByteFallback reads it so), else -1."""
    if len(t) == 6 and t.startswith("<0x") and t.endswith(">") and all(c in "0123456789abcdefABCDEF" for c in t[3:5]):
        return int(t[3:5], 16)
    return -1


def _byte_fallback(tokens: list[str], *, raw: bool = False) -> list[str]:
    """HF's ByteFallback decoder: a run of ``<0xNN>`` tokens becomes its UTF-8 text, or one U+FFFD per
    token when it is not valid UTF-8 (``raw``: see ``_byte_runs``)."""
    return _byte_runs(tokens, *_runs(np.array([_byte_value(t) for t in tokens], np.int16)), raw=raw)


def _runs(values: np.ndarray) -> tuple[list, list, bytes]:
    """``(starts, ends, bytes)`` of the runs of byte tokens, ``values`` each token's byte (-1: not a byte token)."""
    at = np.flatnonzero(values >= 0)
    if not at.size:
        return [], [], b""
    new_run = np.flatnonzero(np.diff(at) != 1) + 1  # (positions in ``at``)
    firsts = np.concatenate(([0], new_run))
    lasts = np.concatenate((new_run - 1, [at.size - 1]))
    return at[firsts].tolist(), (at[lasts] + 1).tolist(), values[at].astype(np.uint8).tobytes()


def _byte_runs(tokens: list[str], starts: list, ends: list, data: bytes, *, raw: bool = False) -> list[str]:
    """``tokens`` with each run ``tokens[starts[r]:ends[r]]`` of byte tokens replaced by its bytes (``data``: all
    runs' bytes in order) as UTF-8 text, or one U+FFFD a token where they are not valid UTF-8 (``raw``: its bytes
    that form no character as surrogate escapes instead, ``decode_bytes``' text)."""
    if not starts:
        return tokens
    out, prev, at = [], 0, 0
    for a, b in zip(starts, ends):
        out += tokens[prev:a]
        if raw:
            out.append(data[at:at + b - a].decode("utf-8", "surrogateescape"))
            prev, at = b, at + b - a
            continue
        try:
            out.append(data[at:at + b - a].decode("utf-8"))
        except UnicodeDecodeError:
            out += ["\ufffd"] * (b - a)
        prev, at = b, at + b - a
    out += tokens[prev:]
    return out


def _strip(t: str, content: str, start: int, stop: int) -> str:
    a = 0
    for c in t[:start]:
        if c != content:
            break
        a += 1
    b = len(t)
    for _ in range(stop):
        if b > a and t[b - 1] == content:
            b -= 1
        else:
            break
    return t[a:b]
