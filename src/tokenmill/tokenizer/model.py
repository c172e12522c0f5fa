"""``Tokenizer``: a byte-level BPE tokenizer, its specification plus an encoder and a decoder.

A tokenizer is a split pattern, a vocabulary (id -> bytes), a pair table that says which adjacent
tokens merge into which (lower priority first) and special tokens; :class:`TokenizerSpec` holds it
as data. The files it is read from and written to live in ``formats/``, the splitting in
``pretokenize/``, the merging (compiled kernels and their Python twin) in ``bpe/``.

    text ──split──► chunks ──UTF-8──► byte ids ──merge by rank──► token ids

Special tokens follow tiktoken's safety model: ``encode`` refuses text that spells a special token
unless the caller allows it; ``encode_ordinary`` treats such text as plain text.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

import numpy as np

from .._validate import check_decode_errors, check_ids, check_ids_array, check_path, check_token_id
from ..errors import ConfigError, FormatError, UnknownTokenError, interruptible
from .bpe import tables
from .encoding import Encoding
from .formats import tokenmill as tokenmill_format
from .formats.pretrained import PretrainedExport
from .groups import batch_threads
from .spec import MergeTrace, TokenizerSpec
from .special import check_specials, special_token_names, without_special_ids
from .vocab_names import VocabNames

Specials = Literal["all"] | Collection[str]

# Fewer ids than this a decode joins in Python (a table lookup each, ~60 ns an id); more go to a compiled join
# (~8 ns an id after a fixed ~1.5-3 us: the kernel call, and for an array its checks)
DECODE_JOIN_IDS = 16


def _from_body(body: dict, read_from: tuple = (), own_form: bool = False, post_processor=None,
               pretrained_config=None) -> "Tokenizer":
    """A tokenizer sent to another process (``Tokenizer.__reduce__``): rebuilt from ``to_dict``'s form, with
    the file it was read from (its saves and exports still refuse to write over it: a copy had lost that),
    an imported tokenizer.json's post-processor (which its export writes back) and what a transformers object
    said of its roles (``pretrained_config``)."""
    tok = Tokenizer.from_dict(body, source="<a pickled tokenizer>")
    tok.read_from, tok.read_from_own_form = tuple(read_from), bool(own_form)
    if post_processor is not None:
        tok.hf_post_processor = post_processor
    if pretrained_config is not None:
        tok.pretrained_config = pretrained_config
    return tok


@functools.cache
def _join_list():
    """``_cpython.join_list``, imported on first use (it imports numba, which importing tokenmill does not)."""
    from ._cpython import join_list

    return join_list


class Tokenizer(VocabNames, PretrainedExport):
    """A byte-level BPE tokenizer.

    >>> tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4", special_tokens={"<|eos|>": 257})
    >>> tok.encode("hi hi")
    [256, 32, 256]
    >>> tok.decode([256, 32, 256, 257])
    'hi hi<|eos|>'
    """

    def __init__(self, vocab: Sequence[bytes], pair_table, *, pattern: str | None, special_tokens=None,
                 merges=None, merge_counts=None, whole_chunk_lookup: bool = False, merge_ids=None,
                 added_tokens=None, normalizer: str | None = None, add_prefix_space: bool = False,
                 split_patterns: Sequence[str] = ()):
        # ``vocab[id]``: the token's bytes, or None for an id only an added/special token holds.
        # ``pair_table``: (l, r) -> the merge's priority (lower first), a dict or (lefts, rights,
        # priorities) arrays; the merged id is the priority itself, or ``merge_ids[priority]``.
        from .pretokenize.splitter import resolve

        self._vocab = list(vocab)
        self._byte_ids = tables.byte_ids(self._vocab)
        if normalizer not in (None, "NFC"):
            raise ConfigError(f"normalizer={normalizer!r}; only None and 'NFC' are supported")
        # HF-style added tokens (tokenizer.json imports): matched as HF does; None = tiktoken's model
        added = None if added_tokens is None else tuple(added_tokens)
        if added is not None:
            special_tokens = {t.content: t.id for t in added if t.special}
        special = check_specials(special_tokens or {}, self._vocab, dense=added is None)
        self._spec = TokenizerSpec.of(
            vocab=self._vocab, merges=merges, merge_ids=merge_ids, pattern=resolve(pattern),
            split_patterns=tuple(resolve(p) for p in split_patterns), normalizer=normalizer,
            add_prefix_space=add_prefix_space, whole_chunk_lookup=whole_chunk_lookup, special_tokens=special,
            added_tokens=added)
        self._merge_counts = merge_counts
        self._extra_by_id = {i: s.encode("utf-8") for s, i in special.items()}
        for t in added or ():
            self._extra_by_id[t.id] = t.content.encode("utf-8")
        self._n_ids = max([len(self._vocab)] + [i + 1 for i in self._extra_by_id])
        self._encoding = Encoding(self._spec, pair_table, self._byte_ids, self._n_ids)
        self.train_report = None  # a TrainReport when this tokenizer came from train_bpe

    # ----------------------------------------------------------------- construction
    read_from: tuple = ()  # the file this tokenizer was read from (its saves and exports never write over it)
    read_from_own_form = False  # read from a tokenmill file (save() over it writes what it holds)
    # an imported tokenizer.json's post_processor (what HF's encode adds with add_special_tokens=True, a BOS): not
    # in tokenmill's ids, written back by save_huggingface (not kept by save())
    hf_post_processor = None
    # what a transformers tokenizer object said of its roles (EOS, BOS, PAD, UNK) and chat template, where this one
    # was made from it (``as_tokenizer``): read where a model folder's tokenizer_config.json would be
    pretrained_config = None

    @classmethod
    def from_merges(cls, merges, *, pattern="gpt4", special_tokens=None, merge_counts=None) -> "Tokenizer":
        """Build from merges in rank order: merge ``i`` joins ``merges[i]`` into id ``256 + i``.

        ``special_tokens``: a dict name -> id, or a sequence of names given the ids after the merges.
        """
        vocab, table, arr, counts = tables.from_merges(merges, merge_counts)
        if special_tokens is not None and not isinstance(special_tokens, dict):
            special_tokens = {s: len(vocab) + k for k, s in enumerate(special_token_names(special_tokens))}
        return cls(vocab, table, pattern=pattern, special_tokens=special_tokens, merges=arr, merge_counts=counts)

    @classmethod
    def from_ranks(cls, ranks: dict[bytes, int], *, pattern="gpt2", special_tokens=None) -> "Tokenizer":
        """Build from token bytes -> rank (id), merging by rank exactly as tiktoken does. Ids no token
        holds are allowed (tekken files put their special tokens first, at ids 0..999)."""
        from .formats.tiktoken import rank_model

        vocab, pairs = rank_model(ranks)
        return cls(vocab, pairs, pattern=pattern, special_tokens=special_tokens, whole_chunk_lookup=True)

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike, *, pattern=None, special_tokens=None) -> "Tokenizer":
        """Load a ``.tiktoken`` rank file (``base64-token rank`` per line); ids equal tiktoken's. The
        parsed file is cached on disk by its SHA-256: a 128k-token file loads in ~0.1 s the second time.
        A rank file holds no split pattern: ``pattern=None`` takes the one of its model where tokenmill
        knows the file (GPT-2, p50k, cl100k, o200k, Llama 3, Qwen, Qwen 3.5, by its SHA-256), and is a
        ConfigError asking for it otherwise (GPT-2's, the default before, gave cl100k and o200k ids that
        differ from tiktoken's); ``pattern="none"``: no split, as a tokenizer trained with ``pattern=None``
        (what ``tokenmill export --to tiktoken`` of one says to pass back). Nor special tokens: ``special_tokens=None`` takes those ``tiktoken.get_encoding``
        gives OpenAI's files (GPT-2/r50k, p50k, cl100k, o200k: ``<|endoftext|>`` and the others), and none for
        any other file; give them as ``special_tokens={"<|endoftext|>": 50256}``, or ``{}`` for none."""
        from .formats.tiktoken import load_rank_file

        path = check_path(path)
        vocab, pairs, pattern, special_tokens = load_rank_file(path, pattern, special_tokens)
        if isinstance(pattern, str):  # (a regex of the caller's that tiktoken's engine reads otherwise: said)
            from .pretokenize.patterns import engine_differences

            differ = [d for d in engine_differences(pattern, tiktoken=True) if d.startswith("[:") or d.startswith("\\N")]
            if differ:
                from ..errors import warn

                warn(f"the pattern holds {', '.join(differ)}, which tiktoken's engine reads otherwise (POSIX classes "
                     "are ASCII there, Unicode here): ids follow tokenmill's reading, not tiktoken's; write the class "
                     "out ([a-zA-Z] for tiktoken's [[:alpha:]]) where they must agree")
        try:
            return _read_from(cls(vocab, pairs, pattern=pattern, special_tokens=special_tokens,
                                  whole_chunk_lookup=True), path)
        except FormatError as e:  # (the vocabulary as a whole: a byte token missing)
            raise FormatError(f"{os.fspath(path)}: {e}") from None

    @classmethod
    def from_tekken(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load Mistral's ``tekken.json``; ids equal ``mistral_common``'s Tekkenizer (``formats.tekken``).
        Like mistral_common, special-token text is not parsed in ``encode`` unless allowed."""
        from .formats.tekken import load_tekken

        vocab, pairs, pattern, specials = load_tekken(check_path(path))
        try:
            return _read_from(cls(vocab, pairs, pattern=pattern, special_tokens=specials, whole_chunk_lookup=True),
                              path)
        except ConfigError as e:  # what the file asks of the tokenizer (two special tokens on one id...)
            raise FormatError(f"{os.fspath(path)}: {e}") from None

    @classmethod
    def from_merge_list(cls, vocab, merges, *, pattern, special_tokens=None, added_tokens=None,
                        ignore_merges=False, normalizer=None, add_prefix_space=False, split_patterns=(),
                        merge_ids=None, source="<merges>") -> "Tokenizer":
        """A merge-list BPE in any id space, applied as HF ``tokenizers`` applies it (see
        ``bpe.tables.from_merge_list``). ``ignore_merges``: a chunk that is a vocabulary token is that token."""
        table, arr, res = tables.from_merge_list(vocab, merges, merge_ids, source)
        return cls(vocab, table, pattern=pattern, special_tokens=special_tokens, added_tokens=added_tokens,
                   merges=arr, merge_ids=res, whole_chunk_lookup=ignore_merges, normalizer=normalizer,
                   add_prefix_space=add_prefix_space, split_patterns=split_patterns)

    @classmethod
    def from_sentencepiece(cls, path: str | os.PathLike):
        """Load a SentencePiece BPE ``.model`` file (Mistral v1-v3, Llama 2, Gemma-style), or its bytes (as
        ``sentencepiece``'s ``model_proto=``): a ``SentencePieceTokenizer`` (same protocol) whose ids equal
        ``sentencepiece``'s ``encode``."""
        from .sentencepiece import SentencePieceTokenizer

        if isinstance(path, (bytearray, memoryview)) or (isinstance(path, bytes) and (b"\0" in path or len(path) > 4096)):
            return SentencePieceTokenizer.from_bytes(path)  # (a model's bytes: no path holds a NUL byte)
        return SentencePieceTokenizer.load(check_path(path))

    @classmethod
    def from_huggingface(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load a BPE ``tokenizer.json`` (a file or the folder holding it); ids equal HF ``tokenizers``'
        ``encode(text, add_special_tokens=False)`` with special tokens allowed. Components that cannot
        be reproduced exactly are refused naming them (see ``formats.huggingface``)."""
        from .formats.huggingface import load_tokenizer_json, tokenizer_json_head
        from .formats.sp_huggingface import load, looks_sentencepiece_json

        if looks_sentencepiece_json(tokenizer_json_head(check_path(path))):  # Llama 2 / Mistral / Gemma: BPE over characters
            return load(path)
        from .formats.huggingface import tokenizer_json_path

        return _read_from(load_tokenizer_json(path, cls.from_merge_list), tokenizer_json_path(path))

    @classmethod
    def from_huggingface_str(cls, body: str | bytes, *, source: str = "<tokenizer.json text>") -> "Tokenizer":
        """:meth:`from_huggingface` of a tokenizer.json's text (HF ``Tokenizer.from_str``'s input, what an
        HF object's ``to_str()`` gives), ``source`` naming it in messages. Read from no file, the result
        has no ``read_from``: ``save_pretrained`` finds no model folder beside it to take a config from."""
        from .formats.huggingface import load_tokenizer_json_bytes
        from .formats.sp_huggingface import SentencePieceJsonTokenizer, looks_sentencepiece_json

        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
        if looks_sentencepiece_json(raw):
            return SentencePieceJsonTokenizer(raw, source=source)
        return load_tokenizer_json_bytes(raw, source, cls.from_merge_list)

    # ----------------------------------------------------------------- properties
    @property
    def spec(self) -> TokenizerSpec:
        """The tokenizer as data: a :class:`~tokenmill.tokenizer.spec.TokenizerSpec` (immutable)."""
        return self._spec

    @property
    def vocab_size(self) -> int:
        """The size of the id space (1 + the largest id): 256 bytes + merges + special tokens."""
        return self._n_ids

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._spec.special_tokens)

    @property
    def added_tokens(self) -> dict[str, int]:
        """Added tokens of an imported tokenizer.json, special or not (content -> id); else the specials."""
        added = self._spec.added_tokens
        return self.special_tokens if added is None else {t.content: t.id for t in added}

    @property
    def pattern(self) -> str | None:
        return self._spec.pattern

    @property
    def merges(self) -> np.ndarray | None:
        """(M, 2) merges (left id, right id) in rank order (trained or tokenizer.json tokenizers), or None
        for rank-file tokenizers (``formats.export.recover_merges`` derives them)."""
        return None if self._spec.merges is None else self._spec.merges.copy()

    @property
    def merge_ids(self) -> np.ndarray | None:
        """For imported merge lists (tokenizer.json): the id each merge produces, in merge order; None
        when merges are ranks (trained tokenizers: merge ``i`` makes id ``256 + i``; rank files)."""
        return None if self._spec.merge_ids is None else self._spec.merge_ids.copy()

    @property
    def trace(self) -> MergeTrace | None:
        """The training trace, when this tokenizer came from ``train_bpe``."""
        if self._spec.merges is None or self._merge_counts is None:
            return None
        return MergeTrace(self._spec.merges, self._merge_counts, tuple(self._vocab[256:]))

    @property
    def content_hash(self) -> str:
        """A hash of everything that decides the ids: the tokenizer's identity, what stores and plans record.
        It is the ``hash`` of a saved file of version 1 or 2; a version-3 file's ``hash`` also covers its
        ``pretrained`` entry (roles, chat template: they decide no id), so there it is the file's checksum and
        differs from this."""
        h = self.__dict__.get("_content_hash")
        if h is None:
            h = self._content_hash = tokenmill_format.content_hash(self._spec, self._merge_counts)
        return h

    def vocab_items(self):
        """``(id, bytes)`` of every vocabulary token (special and added tokens excluded), by id."""
        return ((i, b) for i, b in enumerate(self._vocab) if b is not None)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (special tokens: their UTF-8 text); an id that holds none is an
        :class:`~tokenmill.errors.UnknownTokenError` (a KeyError and a ConfigError) naming it."""
        token_id = check_token_id(token_id)
        if 0 <= token_id < len(self._vocab) and self._vocab[token_id] is not None:
            return self._vocab[token_id]
        if token_id in self._extra_by_id:
            return self._extra_by_id[token_id]
        if 0 <= token_id < self.vocab_size:  # (a gap: e.g. cl100k's 100256, between its ranks and specials)
            raise UnknownTokenError(f"token id {token_id} holds no token: this tokenizer's ids 0 .. "
                                    f"{self.vocab_size - 1:,d} leave it unassigned")
        raise UnknownTokenError(f"token id {token_id} is out of range for vocab_size={self.vocab_size:,d}")

    # ----------------------------------------------------------------- tiktoken's names
    # Code written for a ``tiktoken.Encoding`` runs on a Tokenizer as it is: these give what tiktoken's give.
    @property
    def n_vocab(self) -> int:
        """tiktoken's name of :attr:`vocab_size` (1 + the largest id)."""
        return self.vocab_size

    @property
    def max_token_value(self) -> int:
        """The largest id (tiktoken's name)."""
        return self.vocab_size - 1

    @property
    def eot_token(self) -> int:
        """The id of the special token ``<|endoftext|>`` (tiktoken's name); an AttributeError saying so where
        the tokenizer has none (``getattr(tok, "eot_token", None)`` gives None)."""
        eot = self._spec.special_tokens.get("<|endoftext|>")
        if eot is None:
            raise AttributeError("this tokenizer has no '<|endoftext|>' special token, so no eot_token; its special "
                                 f"tokens: {sorted(self._spec.special_tokens) or 'none'}")
        return int(eot)

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens' texts (tiktoken's name; :attr:`special_tokens` maps them to their ids)."""
        return set(self._spec.special_tokens)

    def encode_ordinary_batch(self, texts: Iterable[str], *, num_threads: int | None = None,
                              as_arrays: bool = False) -> list:
        """``encode_batch`` with special-token text as plain text (tiktoken's name)."""
        return self.encode_batch(texts, num_threads=num_threads, as_arrays=as_arrays, disallowed_special=())

    def decode_single_token_bytes(self, token: int) -> bytes:
        """tiktoken's name of :meth:`token_bytes`."""
        return self.token_bytes(token)

    def decode_tokens_bytes(self, tokens: Iterable[int]) -> list[bytes]:
        """The bytes of each token of ``tokens`` (tiktoken's name)."""
        return [self.token_bytes(t) for t in tokens]

    @interruptible
    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "replace", num_threads: int | None = None
                     ) -> list[str]:
        """``decode`` of each id sequence of ``batch`` (tiktoken's name). ``num_threads`` is taken for tiktoken's
        signature (checked as ``encode_batch`` checks it); the sequences are decoded in this thread (a long one at
        ~8 ns an id)."""
        batch_threads(num_threads)
        return [self.decode(ids, errors) for ids in batch]

    @interruptible
    def decode_bytes_batch(self, batch: Iterable[Iterable[int]], *, num_threads: int | None = None) -> list[bytes]:
        """``decode_bytes`` of each id sequence of ``batch`` (tiktoken's name; ``num_threads`` as in
        :meth:`decode_batch`)."""
        batch_threads(num_threads)
        return [self.decode_bytes(ids) for ids in batch]

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every vocabulary token, sorted, each once (tiktoken's name: its mergeable ranks' keys;
        special and added tokens excluded)."""
        return sorted({b for _, b in self.vocab_items()})

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the one token whose bytes (or special token's text) are ``text_or_bytes`` (tiktoken's name:
        special tokens included); an :class:`~tokenmill.errors.UnknownTokenError` (a KeyError, as tiktoken
        raises) where no token is."""
        if isinstance(text_or_bytes, str):
            raw = text_or_bytes.encode("utf-8", "surrogatepass")
        elif isinstance(text_or_bytes, (bytes, bytearray, memoryview)):
            raw = bytes(text_or_bytes)
        else:
            raise ConfigError(f"text_or_bytes is a {type(text_or_bytes).__name__}; pass a str or bytes")
        i = self._id_of_bytes.get(raw)
        if i is None:
            raise UnknownTokenError(f"{text_or_bytes!r} is not a single token of this tokenizer (encode() gives its "
                                    "ids)")
        return i

    @functools.cached_property
    def _id_of_bytes(self) -> dict[bytes, int]:
        """Each vocabulary token's bytes -> its id (the lower of two ids with the same bytes), then the special and
        added tokens' text, as tiktoken's ``encode_single_token`` looks them up."""
        out: dict[bytes, int] = {}
        for i, b in enumerate(self._vocab):
            if b is not None:
                out.setdefault(b, i)
        for i, b in sorted(self._extra_by_id.items()):
            out.setdefault(b, i)
        return out

    def decode_with_offsets(self, tokens: Iterable[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` and the character offset where each token starts (tiktoken's name and rule: a
        token that starts inside a character starts at that character). Like tiktoken's, strict: ids whose
        bytes are not whole UTF-8 raise UnicodeDecodeError. ``tokenmill.windows.encode_with_offsets`` gives the
        offsets of a text's tokens by the rule of chunking (a character belongs to the token holding its first
        byte).

        >>> tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4")
        >>> tok.decode_with_offsets(tok.encode("hi 中"))
        ('hi 中', [0, 2, 3, 3, 3])
        """
        pieces = self.decode_tokens_bytes(tokens)
        offsets, chars = [], 0
        for b in pieces:
            offsets.append(max(0, chars - (0x80 <= b[0] < 0xC0)))
            chars += len(b) - sum(0x80 <= c < 0xC0 for c in b)
        return b"".join(pieces).decode("utf-8", "strict"), offsets

    # ----------------------------------------------------------------- encoding
    @interruptible
    def encode(self, text: str, *, allowed_special: Specials = (), disallowed_special: Specials = "all") -> list[int]:
        """Encode ``text``; special-token text is an error unless allowed.

        ``allowed_special``: ``"all"`` or a set of special tokens encoded as their ids.
        ``disallowed_special``: special tokens that raise when they appear (default: all the others; a name that is
        no special token of this tokenizer is refused, in either); pass ``()`` to encode them as plain text instead.
        """
        return self._encoding.encode(text, allowed_special, disallowed_special)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` with special-token text treated as plain text."""
        return self._encoding.encode(text, (), ())

    @interruptible
    def encode_batch(self, texts: Iterable[str], *, num_threads: int | None = None, as_arrays: bool = False,
                     allowed_special: Specials = (), disallowed_special: Specials = "all") -> list:
        """Encode many texts on ``num_threads`` threads (default: all cores); the compiled kernels
        release the GIL. Same result as ``[encode(t) for t in texts]``, in order, whatever the
        thread count. ``as_arrays=True`` returns int64 numpy arrays, which skips building Python
        lists (the part of encoding that holds the GIL). The arrays of texts encoded in one kernel call
        (up to ~1 MB of text) are views of one buffer of their ids, as ``np.split`` gives: no copy per
        text, and the buffer is freed when the last of them is; ``.copy()`` the few to keep from a large
        batch.
        """
        return self._encoding.encode_batch(texts, num_threads, as_arrays, allowed_special, disallowed_special)

    @interruptible
    def encode_flat(self, texts: Iterable[str], *, num_threads: int | None = None, allowed_special: Specials = (),
                    disallowed_special: Specials = "all") -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch``'s ids in one flat int64 array, with ``bounds`` (int64, ``len(texts) + 1``): text
        ``i``'s ids are ``ids[bounds[i]:bounds[i + 1]]``. No array or list per text: for many short texts
        (SFT records, lines) that are written or packed together, about half the time of
        ``encode_batch(as_arrays=True)`` plus ``np.concatenate``.

        >>> tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4")
        >>> ids, bounds = tok.encode_flat(["hi", "", "yo!"], num_threads=1)
        >>> ids.tolist(), bounds.tolist()
        ([256, 121, 111, 33], [0, 1, 1, 4])
        """
        return self._encoding.encode_flat(texts, num_threads, allowed_special, disallowed_special)

    def _encode_flat_parts(self, texts: list[str], *, allowed_special: Specials = (),
                           disallowed_special: Specials = "all"):
        """``encode_flat`` on this thread a group of texts at a time, for a caller that writes the ids
        elsewhere at once (the token store): ``(lo, hi, ids, bounds)`` of ``texts[lo:hi]``, ``ids`` possibly
        a view of this thread's buffer, valid until the next item is asked for."""
        return self._encoding.encode_flat_parts(list(texts), allowed_special, disallowed_special)

    def _encode_flat_parts_utf8(self, data: np.ndarray, offsets: np.ndarray, *, allowed_special: Specials = (),
                                disallowed_special: Specials = "all"):
        """``_encode_flat_parts`` of the documents ``data[offsets[i]:offsets[i + 1]]``: their UTF-8 (a read-only
        uint8 array the caller checked well-formed, as the token store's readers do), encoded from those bytes,
        with no str made on the way where the compiled encoder takes them as they are."""
        return self._encoding.encode_flat_parts_utf8(data, offsets, allowed_special, disallowed_special)

    def encode_python(self, text: str, *, allowed_special: Specials = (), disallowed_special: Specials = "all") -> list[int]:
        """``encode`` in pure Python (``regex`` splitting, BPE in Python): the same ids, no compiled
        kernel. Slower per byte, but it starts at once: ``tokenmill encode`` uses it for a small text
        while the kernels are not compiled yet (a first run), and the tests use it as a twin."""
        return self._encoding.encode_python(text, allowed_special, disallowed_special)

    def encode_ordinary_python(self, text: str) -> list[int]:
        """The readable pure-Python twin of ``encode_ordinary`` (same result; used by the tests)."""
        return self._encoding.encode_python(text, (), ())

    def _encode(self, text: str, allowed_special=(), disallowed_special="all") -> np.ndarray:
        """``encode`` as an int64 array (possibly a view of a larger buffer)."""
        return self._encoding.encode_array(text, allowed_special, disallowed_special)

    def _compiled(self):
        """The compiled encoder (``bpe.encoder.CompiledEncoder``), built on first use."""
        return self._encoding.compiled_encoder()

    @property
    def _encoder(self):  # the compiled encoder if built; set to None to rebuild it (benchmarks)
        return self._encoding.compiled

    @_encoder.setter
    def _encoder(self, value) -> None:
        self._encoding.compiled = value

    # ----------------------------------------------------------------- decoding
    @functools.cached_property
    def _decode_table(self) -> list:
        """Every id's bytes, as ``token_bytes`` gives them (None: an id no token holds), made on first use."""
        table = [None] * self._n_ids
        table[: len(self._vocab)] = self._vocab
        for i, b in self._extra_by_id.items():
            if table[i] is None:
                table[i] = b
        return table

    @functools.cached_property
    def _decode_pieces(self):
        """``_decode_table`` in one buffer, for the compiled join of long id sequences (``_gather.Pieces``)."""
        from .._gather import Pieces

        return Pieces(self._decode_table)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of ``ids`` (no UTF-8 decoding)."""
        if type(ids) is list:
            if len(ids) < DECODE_JOIN_IDS:
                return self._joined(ids)
            done = _join_list()(ids, self._decode_pieces)  # exact ints read and joined in one compiled pass
            if done is not None:
                if done[1] >= 0:
                    self._no_token(ids[done[1]])
                return done[0]
        arr = check_ids_array(ids)  # (a bool, a numpy int, a float... in the list: named here)
        if arr.size < DECODE_JOIN_IDS and type(ids) is not list:
            return self._joined(arr.tolist())
        out, bad = self._decode_pieces.concat(arr)
        if bad >= 0:
            self._no_token(int(arr[bad]))
        return out

    def _no_token(self, token_id: int):
        """Raise the UnknownTokenError that says why ``token_id`` (out of range, or an id no token holds) has no
        bytes."""
        self.token_bytes(token_id)
        raise UnknownTokenError(f"token id {token_id} holds no token")

    def _joined(self, ids: list) -> bytes:
        """``decode_bytes`` of a few ids, joined in Python: a table lookup each."""
        if not (set(map(type, ids)) <= {int}):  # a bool, a float, a numpy int: checked one by one (named)
            ids = check_ids(ids)
        if ids and min(ids) >= 0:  # (a negative index would read from the end)
            try:
                return b"".join(map(self._decode_table.__getitem__, ids))
            except (TypeError, IndexError):  # out of range, or an id no token holds: token_bytes names it
                pass
        return b"".join(map(self.token_bytes, ids))

    def decode(self, ids: Iterable[int], errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        """Decode ids to text; bytes that are not valid UTF-8 become U+FFFD unless ``errors="strict"``.
        ``skip_special_tokens=True`` leaves out the special tokens' ids (EOS, BOS, chat markers), as HF's
        ``decode`` does; by default they are their names' text."""
        ids = without_special_ids(ids, self._spec.special_tokens, skip_special_tokens)
        return self.decode_bytes(ids).decode("utf-8", errors if errors == "replace" else check_decode_errors(errors))

    # ----------------------------------------------------------------- files
    def __reduce__(self):
        # multiprocessing, DataLoader workers and ``datasets.map(num_proc=...)`` send it to other processes: it is
        # rebuilt there from its file form (checked, hash included), as the store's workers get it; the caches
        # (compiled tables, per-thread state) are made again per process
        return _from_body, (self.to_dict(), tuple(self.read_from), bool(self.read_from_own_form), self.hf_post_processor,
                            self.pretrained_config)

    def to_dict(self) -> dict:
        """The body of tokenmill's tokenizer file (``formats.tokenmill``), hash included."""
        return tokenmill_format.to_dict(self._spec, self._merge_counts)

    def save(self, path: str | os.PathLike) -> None:
        """Write the versioned JSON file atomically (a temporary name, then rename); never over the file this
        tokenizer was read from (``read_from``: an imported model's own file had been overwritten). What the model
        it was read from says of its special tokens' roles, chat template and longest input goes along (format
        version 3), so that ``save_pretrained`` and ``encode_sft`` of the tokenizer loaded back find them."""
        from .._io import protect_inputs
        from .formats.pretrained import saved_roles

        body = tokenmill_format.with_pretrained(self.to_dict(), saved_roles(self))  # (the model's roles, template)
        with protect_inputs(() if self.read_from_own_form else self.read_from):
            tokenmill_format.save(body, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        """Read a file written by ``save``; a corrupted file, wrong hash or newer version fails clearly."""
        tok = _read_from(tokenmill_format.load(cls, check_path(path)), path)
        tok.read_from_own_form = True  # (saving it again over its file writes the same bytes: not refused)
        return tok

    @classmethod
    def from_dict(cls, body: dict, *, source: str = "<dict>", size: int | None = None) -> "Tokenizer":
        """From ``to_dict``'s form, checked (see ``formats.tokenmill.from_dict``)."""
        return tokenmill_format.from_dict(cls, body, source=source, size=size)

    def save_huggingface(self, path: str | os.PathLike) -> None:
        """Export to a Hugging Face ``tokenizer.json`` (same ids; see ``formats.export``)."""
        from .._io import protect_inputs
        from .formats.export import save_huggingface

        if self.read_from_own_form and self.spec.merge_ids is not None:  # (an imported tokenizer.json, saved)
            from ..errors import warn

            warn(f"{self.read_from[0]} keeps the imported tokenizer's ids, not its tokenizer.json's "
                 "post_processor (what HF's encode adds with add_special_tokens=True, a BOS say): the export "
                 "has none; export from the original tokenizer.json to keep it")
        with protect_inputs(self.read_from):
            save_huggingface(self, path)

    def to_tiktoken(self, name: str | None = None):
        """A ``tiktoken.Encoding`` with the same ranks, pattern and special tokens (``formats.export``)."""
        from .formats.export import to_tiktoken

        return to_tiktoken(self, name)

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Export the vocabulary as a tiktoken ``.tiktoken`` rank file (see ``formats.export``): the ranks alone, as
        tiktoken's files are. The split pattern and special tokens are not in it: give them when it is read
        (``Tokenizer.from_tiktoken(path, pattern=..., special_tokens=...)``, ``tiktoken.Encoding(pat_str=...,
        special_tokens=...)``); :meth:`save` writes one file holding all three."""
        from .._io import protect_inputs
        from .formats.export import save_tiktoken

        with protect_inputs(self.read_from):
            save_tiktoken(self, path)

    def __repr__(self) -> str:
        from .pretokenize.splitter import pattern_name

        p = pattern_name(self.pattern) or ("none" if self.pattern is None else "custom")
        return f"Tokenizer(vocab_size={self.vocab_size:,d}, pattern={p}, special_tokens={len(self._spec.special_tokens)})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Tokenizer) and self.content_hash == other.content_hash

    def __hash__(self) -> int:  # by content, as ``==`` compares: a key of a dict or of functools.cache
        return hash(self.content_hash)

    def _hf_tokens(self) -> tuple[dict[int, str], dict[str, int]]:
        """``VocabNames``' strings: each vocabulary token's bytes in GPT-2's byte-to-unicode alphabet, as a
        tokenizer.json spells them; the special and added tokens' text. An added token in a slot of the
        vocabulary's ids that holds no bytes (DeepSeek V3's ``<｜begin▁of▁sentence｜>`` at id 0, tekken's special
        ids) is a vocabulary token too, as its tokenizer.json has it and ``save_huggingface`` writes it."""
        from .formats.export import byte_level_string

        model = {i: byte_level_string(b) for i, b in enumerate(self._vocab) if b is not None}
        added = self.added_tokens
        model.update((i, s) for s, i in added.items() if i < len(self._vocab) and self._vocab[i] is None)
        return dict(sorted(model.items())), added


def _read_from(tok, path):
    """``tok``, remembering the file it was read from: its saves and exports refuse to write over that file
    (``save_huggingface`` onto a model's ``tokenizer.model`` had replaced it, the model's own file lost)."""
    tok.read_from = (os.fspath(path),)
    return tok

