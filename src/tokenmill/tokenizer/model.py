"""``Tokenizer``: byte-level BPE encode/decode, special tokens, and the versioned file format.

A tokenizer is a split pattern, a vocabulary (id -> bytes), a pair table that says which adjacent
tokens merge into which (lower id merges first) and special tokens with ids after the vocabulary.

    text ──split──► chunks ──UTF-8──► byte ids ──merge by rank──► token ids

Special tokens follow tiktoken's safety model: ``encode`` refuses text that spells a special token
unless the caller allows it; ``encode_ordinary`` treats such text as plain text.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from msgspec import UNSET

from .._arrays import ranks_in_groups
from .._io import canonical_hash, read_bytes_limited, write_json_atomic
from .._schema import check, parse_json, show_value
from .._validate import check_array, check_int
from ..errors import ConfigError, FormatError, SpecialTokenError, TokenmillError
from . import bpe
from .groups import in_groups
from .patterns import preset_name, resolve_pattern, split_with_gaps
from .schemas import BpeModel, MergesModel, RankCacheConfig, TekkenFile, TokenizerFile, check_ids_below, decode_file

FORMAT_NAME = "tokenmill.tokenizer"
FORMAT_VERSION = 2  # 2 adds model type "bpe" (imported merge lists, ids anywhere, added tokens); 1 still read
_CACHE_LIMIT = 1 << 17  # chunk cache entries before it is cleared
# A process on a machine whose encoding kernels are not compiled yet encodes up to this many
# characters with the pure-Python encoder (same ids, ~1 MB/s) before it compiles them (~25-45 s).
FIRST_RUN_PYTHON_CHARS = 1 << 21


def _checked_str(text) -> str:
    if not isinstance(text, str):
        raise ConfigError(f"text is a {type(text).__name__}; encode takes a str (decode bytes first: "
                          "data.decode('utf-8'))")
    return text


@dataclass(frozen=True)
class MergeTrace:
    """The training trace: for each merge its rank, pair, new id, count and bytes."""

    pairs: np.ndarray  # (M, 2) int64
    counts: np.ndarray  # (M,) int64, weighted occurrences when merged
    token_bytes: tuple[bytes, ...]  # (M,) bytes of each new token

    @property
    def new_ids(self) -> np.ndarray:
        return np.arange(256, 256 + len(self.counts), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.counts)

    def rows(self):
        """Yield ``(rank, (left, right), new_id, count, bytes)`` per merge."""
        for i, ((a, b), c, tb) in enumerate(zip(self.pairs.tolist(), self.counts.tolist(), self.token_bytes)):
            yield i, (a, b), 256 + i, c, tb


class Tokenizer:
    """A byte-level BPE tokenizer.

    >>> tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4", special_tokens={"<|eos|>": 257})
    >>> tok.encode("hi hi")
    [256, 32, 256]
    >>> tok.decode([256, 32, 256, 257])
    'hi hi<|eos|>'
    """

    def __init__(
        self,
        vocab: Sequence[bytes],
        pair_table: dict[tuple[int, int], int],
        *,
        pattern: str | None,
        special_tokens: dict[str, int] | None = None,
        merges: np.ndarray | None = None,
        merge_counts: np.ndarray | None = None,
        whole_chunk_lookup: bool = False,
        merge_ids: np.ndarray | None = None,
        added_tokens=None,
        normalizer: str | None = None,
        add_prefix_space: bool = False,
        split_patterns: Sequence[str] = (),
    ):
        # ``vocab[id]`` is the token's bytes, or None for an id that only an added/special token holds.
        # ``pair_table[(l, r)]`` is the merge's priority (lower first); the merged id is the priority
        # itself, or ``merge_ids[priority]`` for imported merge lists (tokenizer.json).
        self._vocab = list(vocab)
        self._pairs_src = pair_table  # a dict, or (lefts, rights, priorities) int64 arrays
        self._merge_ids = None if merge_ids is None else np.asarray(merge_ids, np.int64)
        self._pattern = _resolve(pattern)
        self._split_patterns = tuple(_resolve(p) for p in split_patterns)
        self._merges = merges
        self._merge_counts = merge_counts
        self._whole_chunk_lookup = whole_chunk_lookup
        self._byte_ids = _byte_ids(self._vocab)
        self._bytes_to_id_map = None
        if normalizer not in (None, "NFC"):
            raise ConfigError(f"normalizer={normalizer!r}; only None and 'NFC' are supported")
        self._normalizer = normalizer
        self._add_prefix_space = bool(add_prefix_space)
        # HF-style added tokens (tokenizer.json imports): matched as HF does; None = tiktoken's model
        self._added = None if added_tokens is None else tuple(added_tokens)
        if self._added is not None:
            special_tokens = {t.content: t.id for t in self._added if t.special}
        self._special = _check_specials(special_tokens or {}, self._vocab, dense=self._added is None)
        self._special_by_id = {i: s.encode("utf-8") for s, i in self._special.items()}
        self._extra_by_id = dict(self._special_by_id)
        if self._added is not None:
            for t in self._added:
                self._extra_by_id[t.id] = t.content.encode("utf-8")
        self._n_ids = max([len(self._vocab)] + [i + 1 for i in self._extra_by_id])
        self._matcher = None  # the added-token matcher, built on first use
        self._special_re = None
        if len(self._special) > 4:
            import regex

            self._special_re = regex.compile("|".join(regex.escape(s) for s in sorted(self._special)))
            self._special_prefixes = tuple({s[:2] for s in self._special})
        self._cache: dict[bytes, tuple[int, ...]] = {}
        self._encoder = None  # the compiled encoder, built on first encode
        self._int_objects = None  # one Python int per id, for lists out (_list)
        self.train_report = None  # a TrainReport when this tokenizer came from train_bpe

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_merges(cls, merges, *, pattern="gpt4", special_tokens=None, merge_counts=None) -> "Tokenizer":
        """Build from merges in rank order: merge ``i`` joins ``merges[i]`` into id ``256 + i``.

        ``special_tokens``: a dict name -> id, or a sequence of names given the ids after the merges.
        """
        arr = _merge_array(merges)
        if merge_counts is not None:
            merge_counts = check_array(merge_counts, "merge_counts", min=0, error=FormatError)
            if merge_counts.shape != (len(arr),):
                raise FormatError(f"merge_counts has {merge_counts.size:,d} entries for {len(arr):,d} merges; "
                                  "it needs one count per merge")
        vocab = [bytes([i]) for i in range(256)]
        table: dict[tuple[int, int], int] = {}
        for i, (a, b) in enumerate(arr.tolist()):
            if not (0 <= a < len(vocab) and 0 <= b < len(vocab)):
                bad = a if not 0 <= a < len(vocab) else b
                raise FormatError(f"merge {i} = ({a}, {b}) refers to id {bad}, which is not an id before it "
                                  f"(0 .. {len(vocab) - 1:,d})")
            if (a, b) in table:
                raise FormatError(f"merge {i} repeats pair ({a}, {b}) of merge {table[(a, b)] - 256}")
            table[(a, b)] = 256 + i
            vocab.append(vocab[a] + vocab[b])
        if special_tokens is not None and not isinstance(special_tokens, dict):
            special_tokens = {s: len(vocab) + k for k, s in enumerate(special_token_names(special_tokens))}
        return cls(vocab, table, pattern=pattern, special_tokens=special_tokens,
                   merges=arr, merge_counts=merge_counts)

    @classmethod
    def from_tiktoken(cls, path: str | os.PathLike, *, pattern="gpt2", special_tokens=None) -> "Tokenizer":
        """Load a ``.tiktoken`` rank file (``base64-token rank`` per line); ids equal tiktoken's.

        The parsed file (tokens by id and the pair table) is cached on disk keyed by the file's
        SHA-256, as tokenizer.json imports are: a 128k-token file loads in ~0.1 s the second time."""
        raw = read_bytes_limited(path, what="tiktoken rank")
        return cls._from_rank_bytes(raw, "ranks", lambda: (_parse_tiktoken(raw, os.fspath(path)), {}),
                                    pattern=pattern, special_tokens=special_tokens)

    @classmethod
    def from_tekken(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load Mistral's ``tekken.json`` (a rank file in JSON: base64 tokens, split regex, special tokens
        first). Ids equal ``mistral_common``'s Tekkenizer: its ``default_num_special_tokens`` special
        tokens take ids 0..n-1 (named in the file, the rest ``<SPECIAL_i>``), the first
        ``default_vocab_size - n`` ranked tokens the ids after them. Like mistral_common, special-token
        text is not parsed in ``encode`` unless allowed (tokenmill raises on it by default). Cached on
        disk by the file's SHA-256, as rank files are."""
        raw = read_bytes_limited(path, what="tekken tokenizer")

        def parse():
            ranks, pattern, specials = _read_tekken(path, raw)
            return ranks, {"pattern": pattern, "specials": specials}

        return cls._from_rank_bytes(raw, "tekken", parse)

    @classmethod
    def _from_rank_bytes(cls, raw: bytes, kind: str, parse, *, pattern=None, special_tokens=None) -> "Tokenizer":
        """``from_ranks`` on a file's ranks, through an on-disk cache of its tokens and pair table keyed
        by ``kind`` and the bytes' SHA-256 (validated on read; a damaged entry is rebuilt). ``parse()``
        gives (ranks, config): the file's own pattern and special tokens, if it has them, which the
        cache keeps too."""
        import hashlib

        from .conversion_cache import load_cached, save_cached

        key = f"{kind}-" + hashlib.sha256(raw).hexdigest()[:32]
        cached = load_cached(key)
        if cached is not None:
            vocab, arr, config = cached
            try:
                conf = check(config, RankCacheConfig, what="cached rank file")
                if _pairs_consistent(vocab, arr):
                    return cls(vocab, (arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()),
                               pattern=pattern if conf.pattern is UNSET else conf.pattern,
                               special_tokens=special_tokens if conf.specials is UNSET else conf.specials,
                               whole_chunk_lookup=True)
            except TokenmillError:
                pass  # a damaged cache entry (or a bad argument, which parsing the file again reports)
        ranks, config = parse()
        tok = cls.from_ranks(ranks, pattern=config.get("pattern", pattern),
                             special_tokens=config.get("specials", special_tokens))
        save_cached(key, tok._vocab, np.stack(tok._pair_arrays(), axis=1), config)
        return tok

    @classmethod
    def from_ranks(cls, ranks: dict[bytes, int], *, pattern="gpt2", special_tokens=None) -> "Tokenizer":
        """Build from token bytes -> rank (id), merging by rank exactly as tiktoken does.

        Ranks are distinct ids, usually 0..n-1; ids no token holds are allowed (Mistral's tekken files
        put their special tokens first, at ids 0..999, and the ranked tokens after them).
        """
        values = list(ranks.values())
        if not all(type(r) is int for r in values):  # noqa: E721 (bool and other int subclasses are refused)
            bad = next((b, r) for b, r in ranks.items() if type(r) is not int)  # noqa: E721
            raise FormatError(f"token {bad[0]!r} has rank {bad[1]!r}; ranks must be distinct integers in [0, 2**31 - 1)")
        arr = np.array(values, np.int64) if values else np.zeros(0, np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= 2**31 - 1):
            b, r = next((b, r) for b, r in ranks.items() if not 0 <= r < 2**31 - 1)
            raise FormatError(f"token {b!r} has rank {r!r}; ranks must be distinct integers in [0, 2**31 - 1)")
        n = int(arr.max()) + 1 if arr.size else 0
        if n > 4 * len(ranks) + 65536:
            raise FormatError(f"ranks reach {n - 1:,d} for {len(ranks):,d} tokens; ids that sparse are not a "
                              "rank file (expected ranks 0..n-1, possibly after a block of special-token ids)")
        vocab: list[bytes | None] = [None] * n
        for b, r in ranks.items():
            vocab[r] = b
        if sum(b is not None for b in vocab) != len(ranks):
            seen: dict[int, bytes] = {}
            for b, r in ranks.items():
                if r in seen:
                    raise FormatError(f"rank {r:,d} is given to both {seen[r]!r} and {b!r}; each token needs its own rank")
                seen[r] = b
        return cls(vocab, _rank_pairs(vocab, ranks), pattern=pattern, special_tokens=special_tokens,
                   whole_chunk_lookup=True)

    @classmethod
    def from_merge_list(cls, vocab, merges, *, pattern, special_tokens=None, added_tokens=None,
                        ignore_merges=False, normalizer=None, add_prefix_space=False, split_patterns=(),
                        merge_ids=None, source="<merges>") -> "Tokenizer":
        """A merge-list BPE in any id space, applied as HF ``tokenizers`` applies it.

        ``vocab[id]``: token bytes (None where only an added token sits); ``merges``: (left id, right id)
        in priority order, merge ``k`` producing the id whose bytes are ``vocab[l] + vocab[r]``. A pair
        listed twice keeps its last priority (as HF's merge map does). ``ignore_merges``: a chunk that is
        a vocabulary token is that token. ``special_tokens``/``added_tokens`` as in ``Tokenizer``.
        """
        n = len(vocab)
        arr = np.asarray(merges, np.int64).reshape(-1, 2)
        present = np.fromiter((b is not None for b in vocab), np.bool_, n)
        bad = np.flatnonzero(((arr < 0) | (arr >= n)).any(axis=1))
        if bad.size == 0:
            bad = np.flatnonzero(~(present[arr[:, 0]] & present[arr[:, 1]]))
        if bad.size:
            k = int(bad[0])
            raise FormatError(f"{source}: merge {k} refers to id {arr[k].tolist()}, which is not a vocabulary token")
        if merge_ids is None:
            by_bytes: dict[bytes, int] = {}
            for i, b in enumerate(vocab):
                if b is not None:
                    by_bytes.setdefault(b, i)
            res = np.empty(len(arr), np.int64)
            for k, (a, b) in enumerate(arr.tolist()):
                m = by_bytes.get(vocab[a] + vocab[b])
                if m is None:
                    raise FormatError(f"{source}: merge {k} ({a}, {b}) produces bytes {vocab[a] + vocab[b]!r}, "
                                      "which are not in the vocabulary")
                res[k] = m
        else:  # the importer derived them from the token strings; check the lengths add up
            res = np.asarray(merge_ids, np.int64).reshape(-1)
            lens = np.fromiter((0 if b is None else len(b) for b in vocab), np.int64, n)
            if res.shape[0] != arr.shape[0] or ((res < 0) | (res >= n)).any() or (
                    lens[res] != lens[arr[:, 0]] + lens[arr[:, 1]]).any():
                raise FormatError(f"{source}: merge_ids do not match the merges")
        # a pair listed twice keeps its last priority (HF's merge map): drop the earlier entries
        keys = (arr[:, 0] << 32) | arr[:, 1]
        _, last_rev = np.unique(keys[::-1], return_index=True)
        keep = np.sort(len(keys) - 1 - last_rev)
        table = (arr[keep, 0].copy(), arr[keep, 1].copy(), keep.astype(np.int64))
        merges = arr
        return cls(vocab, table, pattern=pattern, special_tokens=special_tokens, added_tokens=added_tokens,
                   merges=merges, merge_ids=res,
                   whole_chunk_lookup=ignore_merges, normalizer=normalizer, add_prefix_space=add_prefix_space,
                   split_patterns=split_patterns)

    @classmethod
    def from_sentencepiece(cls, path: str | os.PathLike):
        """Load a SentencePiece BPE ``.model`` file (Mistral v1-v3, Llama 2, Gemma-style): a
        ``SentencePieceTokenizer`` (same protocol) whose ids equal ``sentencepiece``'s ``encode``
        (see ``tokenizer.sentencepiece``)."""
        from .sentencepiece import SentencePieceTokenizer

        return SentencePieceTokenizer.load(path)

    @classmethod
    def from_huggingface(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load a byte-level BPE ``tokenizer.json`` (a file or the folder holding it); ids equal HF
        ``tokenizers``' ``encode(text, add_special_tokens=False)`` with special tokens allowed
        (``encode(text, allowed_special="all")``). Components that cannot be reproduced exactly are
        refused with a FormatError naming them (see ``tokenizer.huggingface``)."""
        from .huggingface import load_tokenizer_json
        from .sp_huggingface import load, looks_sentencepiece_json

        if looks_sentencepiece_json(_head(path)):  # Llama 2 / Mistral / Gemma-style: BPE over characters
            return load(path)
        return load_tokenizer_json(path, cls.from_merge_list)

    @property
    def _pair_table(self) -> dict[tuple[int, int], int]:
        src = self._pairs_src
        if not isinstance(src, dict):
            lefts, rights, prios = src
            src = self._pairs_src = dict(zip(zip(lefts.tolist(), rights.tolist()), prios.tolist()))
        return src

    def _pair_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = self._pairs_src
        if isinstance(src, dict):
            n = len(src)
            return (np.fromiter((p[0] for p in src), np.int64, n), np.fromiter((p[1] for p in src), np.int64, n),
                    np.fromiter(src.values(), np.int64, n))
        return src

    @property
    def _bytes_to_id(self) -> dict[bytes, int] | None:
        if not self._whole_chunk_lookup:
            return None
        if self._bytes_to_id_map is None:
            self._bytes_to_id_map = {b: i for i, b in enumerate(self._vocab) if b is not None}
        return self._bytes_to_id_map

    # ----------------------------------------------------------------- properties
    @property
    def vocab_size(self) -> int:
        """The size of the id space (1 + the largest id): 256 bytes + merges + special tokens."""
        return self._n_ids

    @property
    def added_tokens(self) -> dict[str, int]:
        """Added tokens of an imported tokenizer.json, special or not (content -> id); else the specials."""
        if self._added is None:
            return dict(self._special)
        return {t.content: t.id for t in self._added}

    @property
    def content_hash(self) -> str:
        """A hash of everything that decides the ids (the saved file's ``hash``)."""
        h = getattr(self, "_content_hash", None)
        if h is None:
            h = self._content_hash = self.to_dict()["hash"]
        return h

    @property
    def spec(self):
        """The tokenizer as data: a :class:`~tokenmill.tokenizer.spec.TokenizerSpec` (immutable)."""
        from .spec import TokenizerSpec

        spec = self.__dict__.get("_spec")
        if spec is None:  # built once: the fields it describes never change after construction
            spec = self.__dict__["_spec"] = TokenizerSpec.of(
                vocab=self._vocab, merges=self._merges, merge_ids=self._merge_ids, pattern=self._pattern,
                split_patterns=self._split_patterns, normalizer=self._normalizer,
                add_prefix_space=self._add_prefix_space,
                whole_chunk_lookup=self._whole_chunk_lookup, special_tokens=self._special, added_tokens=self._added)
        return spec

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def pattern(self) -> str | None:
        return self._pattern

    @property
    def merges(self) -> np.ndarray | None:
        """(M, 2) merges (left id, right id) in rank order (trained or tokenizer.json tokenizers), or None
        for rank-file tokenizers (``export.recover_merges`` derives them)."""
        return None if self._merges is None else self._merges.copy()

    @property
    def merge_ids(self) -> np.ndarray | None:
        """For imported merge lists (tokenizer.json): the id each merge produces, in merge order; None
        when merges are ranks (trained tokenizers: merge ``i`` makes id ``256 + i``; rank files)."""
        return None if self._merge_ids is None else self._merge_ids.copy()

    def vocab_items(self):
        """``(id, bytes)`` of every vocabulary token (special and added tokens excluded), by id."""
        return ((i, b) for i, b in enumerate(self._vocab) if b is not None)

    @property
    def trace(self) -> MergeTrace | None:
        """The training trace, when this tokenizer came from ``train_bpe``."""
        if self._merges is None or self._merge_counts is None:
            return None
        return MergeTrace(self._merges, self._merge_counts, tuple(self._vocab[256:]))

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (special tokens: their UTF-8 text)."""
        token_id = check_int(token_id, "token id")
        if 0 <= token_id < len(self._vocab) and self._vocab[token_id] is not None:
            return self._vocab[token_id]
        if token_id in self._extra_by_id:
            return self._extra_by_id[token_id]
        raise ConfigError(f"token id {token_id} is out of range for vocab_size={self.vocab_size:,d}")

    # ----------------------------------------------------------------- encoding
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text`` with special-token text treated as plain text."""
        if isinstance(text, str) and self._python_first(len(text)):
            return self.encode_python(text, disallowed_special=())
        return self._list(self._encode(text, (), ()))

    def encode_ordinary_python(self, text: str) -> list[int]:
        """The readable pure-Python twin of ``encode_ordinary`` (same result; used by the tests)."""
        return self.encode_python(text, disallowed_special=())

    def encode_python(self, text: str, *, allowed_special: Literal["all"] | Collection[str] = (),
                      disallowed_special: Literal["all"] | Collection[str] = "all") -> list[int]:
        """``encode`` in pure Python (``regex`` splitting, BPE in Python): the same ids, no compiled
        kernel. Slower per byte, but it starts at once: ``tokenmill encode`` uses it for a small text
        while the kernels are not compiled yet (a first run), and the tests use it as a twin."""
        allowed = self._allowed_specials(_checked_str(text), allowed_special, disallowed_special)
        if self._added is not None:
            pieces = self._pieces(text, allowed)
        elif allowed:
            pieces = [(p, self._special[p] if special else None) for p, special in _split_specials(text, allowed)]
        else:
            pieces = [(text, None)] if text else []
        out: list[int] = []
        for piece, token_id in pieces:
            if token_id is not None:
                out.append(token_id)
                continue
            for chunk in self._split(piece):
                out.extend(self._encode_chunk(chunk.encode("utf-8")))
        return out

    def _compiled(self):
        enc = self._encoder
        if enc is None:
            from .encoder import CompiledEncoder

            enc = self._encoder = CompiledEncoder(self._vocab, self._pair_arrays(), self._byte_ids, self._pattern,
                                                  pin_vocab=self._whole_chunk_lookup, merge_ids=self._merge_ids,
                                                  split_patterns=self._split_patterns)
        return enc

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = (),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode ``text``; special-token text is an error unless allowed.

        ``allowed_special``: ``"all"`` or a set of special tokens encoded as their ids.
        ``disallowed_special``: special tokens that raise when they appear (default: all the others);
        pass ``()`` to encode them as plain text instead.
        """
        if isinstance(text, str) and self._python_first(len(text)):
            return self.encode_python(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        return self._list(self._encode(text, allowed_special, disallowed_special))

    def _python_first(self, size: int) -> bool:
        """True on a machine whose encoding kernels are not compiled yet, for the first
        :data:`FIRST_RUN_PYTHON_CHARS` characters this process encodes: ``encode_python`` gives the
        same ids at ~1 MB/s, where compiling the kernels first takes ~25-45 s (``_jit.python_first``)."""
        if self._encoder is not None:
            return False
        from .._jit import python_first
        from . import _encode_kernels

        return python_first("encode", _encode_kernels.encode_chunks, size, FIRST_RUN_PYTHON_CHARS)

    def _list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, from one Python int per id made once: ``tolist`` allocates an int object per
        token (~45-55 ns on this machine, a quarter of encoding English with lists out); taking them
        from an object array costs ~30% less (same ints, equal lists)."""
        objs = self._int_objects
        if objs is None:
            objs = self._int_objects = np.array(range(self._n_ids), dtype=object)
        return objs.take(ids).tolist()

    def _encode(self, text: str, allowed_special=(), disallowed_special="all") -> np.ndarray:
        """``encode`` as an int64 array (possibly a view of a larger buffer)."""
        allowed = self._allowed_specials(_checked_str(text), allowed_special, disallowed_special)
        if self._added is None:
            if not allowed:
                return self._compiled().encode(text)
            parts = [np.array([self._special[piece]], np.int64) if special else self._compiled().encode(piece)
                     for piece, special in _split_specials(text, allowed)]
        else:
            parts = [np.array([token_id], np.int64) if token_id is not None else self._encode_plain(piece)
                     for piece, token_id in self._pieces(text, allowed)]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def _pieces(self, text: str, allowed: set[str]) -> list[tuple[str, int | None]]:
        """(piece, id): added tokens matched as HF does (id), and the normalized text between (None)."""
        if self._added is None:
            return [(text, None)] if text else []
        if self._matcher is None:
            from .added import AddedTokenMatcher

            self._matcher = AddedTokenMatcher(self._added, self._normalizer)
        return self._matcher.pieces(text, allowed)

    def _encode_plain(self, piece: str) -> np.ndarray:
        """One piece between added tokens (already normalized): HF's ByteLevel prefix space, then split + BPE."""
        return self._compiled().encode(self._prefixed(piece))

    def _prefixed(self, piece: str) -> str:
        """HF ByteLevel's ``add_prefix_space``: a space before a piece that does not start with one."""
        return " " + piece if self._add_prefix_space and not piece.startswith(" ") else piece

    def _allowed_specials(self, text: str, allowed_special, disallowed_special) -> set[str]:
        """The allowed special tokens; raises if ``text`` spells a disallowed one."""
        # a str other than "all" is one special token, not a set of characters
        allowed = set(self._special) if allowed_special == "all" else (
            {allowed_special} if isinstance(allowed_special, str) else set(allowed_special))
        unknown = allowed - set(self._special)
        if unknown:
            raise ConfigError(f"allowed_special names {sorted(unknown)!r}, which are not special tokens of this tokenizer")
        disallowed = set(self._special) if disallowed_special == "all" else (
            {disallowed_special} if isinstance(disallowed_special, str) else set(disallowed_special))
        check = disallowed - allowed
        if not check or (self._special_re is not None and len(check) == len(self._special)
                         and not any(p in text for p in self._special_prefixes)):
            return allowed  # one scan for all special tokens instead of one per token
        for s in sorted(check):
            if s in text:
                raise SpecialTokenError(
                    f"the text contains the special token {s!r} at character {text.index(s):,d}; "
                    f"pass allowed_special={{{s!r}}} (or 'all') to encode it as a special token, "
                    "disallowed_special=() to encode it as plain text, or use encode_ordinary()"
                )
        return allowed

    def encode_batch(
        self,
        texts: Iterable[str],
        *,
        num_threads: int | None = None,
        as_arrays: bool = False,
        allowed_special: Literal["all"] | Collection[str] = (),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list:
        """Encode many texts on ``num_threads`` threads (default: all cores); the compiled kernels
        release the GIL. Same result as ``[encode(t) for t in texts]``, in order, whatever the
        thread count. ``as_arrays=True`` returns int64 numpy arrays, which skips building Python
        lists (the part of encoding that holds the GIL).
        """
        import os

        texts = list(texts)
        threads = max(1, os.cpu_count() or 1) if num_threads is None else check_int(num_threads, "num_threads",
                                                                                       min=1, max=1024)
        if self._python_first(sum(len(t) for t in texts if isinstance(t, str))):
            kw = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
            lists = [self.encode_python(t, **kw) for t in texts]
            return [np.array(ids, np.int64) for ids in lists] if as_arrays else lists

        def convert(ids):
            # copy: the kernel's buffer holds one slot per input byte, ~4x the ids it returns
            return ids.copy() if as_arrays else self._list(ids)

        def group(lo: int, hi: int) -> list:
            """texts[lo:hi]: those that are plain text for the compiled encoder in one kernel call, the
            others (special tokens allowed and present, added tokens) one by one."""
            plain = [self._plain_text(t, allowed_special, disallowed_special) for t in texts[lo:hi]]
            todo = [i for i, p in enumerate(plain) if p]
            got = self._compiled().encode_many([plain[i] for i in todo]) if len(todo) > 1 else None
            res: list = [None] * (hi - lo)
            if got is not None:
                ids, bounds = got
                for j, i in enumerate(todo):
                    res[i] = convert(ids[bounds[j] : bounds[j + 1]])
            for i, p in enumerate(plain):
                if res[i] is None:
                    res[i] = (np.zeros(0, np.int64) if as_arrays else []) if p == "" else convert(
                        self._encode(texts[lo + i], allowed_special, disallowed_special))
            return res

        return in_groups(texts, threads, group)

    def _plain_text(self, text: str, allowed_special, disallowed_special) -> str | None:
        """The text the compiled encoder alone encodes to ``encode(text)`` ("" for no ids), or None
        when special or added tokens need the full path. Raises as ``encode`` does."""
        allowed = self._allowed_specials(_checked_str(text), allowed_special, disallowed_special)
        if self._added is None:
            return None if allowed else text
        pieces = self._pieces(text, allowed)
        if not pieces:
            return ""
        if len(pieces) > 1 or pieces[0][1] is not None:
            return None
        return self._prefixed(pieces[0][0])

    def _split(self, text: str) -> list[str]:
        if not text:
            return []
        text = self._prefixed(text)
        if self._pattern is None:
            return [text]
        chunks = split_with_gaps(self._pattern, text)
        for p in self._split_patterns:
            chunks = [c for chunk in chunks for c in split_with_gaps(p, chunk)]
        return chunks

    def _encode_chunk(self, chunk: bytes) -> tuple[int, ...]:
        hit = self._cache.get(chunk)
        if hit is not None:
            return hit
        if self._bytes_to_id is not None and chunk in self._bytes_to_id:
            ids = (self._bytes_to_id[chunk],)  # tiktoken's whole-chunk shortcut
        else:
            ids = tuple(bpe.encode_chunk([self._byte_ids[c] for c in chunk], self._pair_table, self._merge_ids))
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[chunk] = ids
        return ids

    # ----------------------------------------------------------------- decoding
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenate the bytes of ``ids`` (no UTF-8 decoding)."""
        return b"".join(self.token_bytes(i) for i in _ids(ids))

    def decode(self, ids: Iterable[int], errors: str = "replace") -> str:
        """Decode ids to text; bytes that are not valid UTF-8 become U+FFFD unless ``errors="strict"``."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    # ----------------------------------------------------------------- files
    def to_dict(self) -> dict:
        if self._merge_ids is not None or self._added is not None:
            return self._to_dict_v2()
        body: dict = {
            "format": FORMAT_NAME,
            "version": 1,  # what version 1 holds is still written as version 1 (same files, same hashes)
            "pattern": self._pattern,
            "pattern_preset": preset_name(self._pattern),
            "special_tokens": self._special,
        }
        if self._merges is not None:
            body["model"] = {"type": "merges", "merges": self._merges.tolist()}
            if self._merge_counts is not None:
                body["model"]["merge_counts"] = self._merge_counts.tolist()
        else:
            # null where no token holds the id (a tekken file's special-token ids)
            body["model"] = {"type": "ranks", "tokens": [None if b is None else base64.b64encode(b).decode("ascii")
                                                         for b in self._vocab]}
        body["hash"] = canonical_hash(body)
        return body

    def _to_dict_v2(self) -> dict:
        """Version 2, model type "bpe": tokens by id (base64, null where only an added token sits), merges
        as id pairs in priority order, and HF's added tokens, normalizer and pre-tokenization."""
        body: dict = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "pattern": self._pattern,
            "pattern_preset": _pattern_name(self._pattern),
            "split_patterns": list(self._split_patterns),
            "add_prefix_space": self._add_prefix_space,
            "normalizer": self._normalizer,
            "special_tokens": self._special,
            "added_tokens": None if self._added is None else [t.to_dict() for t in self._added],
            "model": {
                "type": "bpe",
                "tokens": [None if b is None else base64.b64encode(b).decode("ascii") for b in self._vocab],
                "merges": [] if self._merges is None else self._merges.tolist(),
                "merge_ids": [] if self._merge_ids is None else self._merge_ids.tolist(),
                "ignore_merges": self._whole_chunk_lookup,
            },
        }
        body["hash"] = canonical_hash(body)
        return body

    def save(self, path: str | os.PathLike) -> None:
        """Write the versioned JSON file atomically (a temporary name, then rename)."""
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        """Read a file written by ``save``; a corrupted file, wrong hash or newer version fails clearly."""
        raw = read_bytes_limited(path, what="tokenizer")
        body = parse_json(raw, what=f"tokenizer file {os.fspath(path)!r}")
        return cls.from_dict(body, source=str(path), size=len(raw))

    @classmethod
    def from_dict(cls, body: dict, *, source: str = "<dict>", size: int | None = None) -> "Tokenizer":
        """From ``to_dict``'s form (``load`` gives a file's), checked against ``schemas.TokenizerFile``.
        ``size``: the size in bytes of the file ``body`` was read from; every id must lie below it
        (tokenmill sizes its tables by the largest id). None for a dict that is no file's (a worker's
        copy of a tokenizer already in memory): ids are then only bounded by 2**31."""
        if not isinstance(body, dict) or body.get("format") != FORMAT_NAME:
            raise FormatError(f"{source}: not a tokenmill tokenizer file (missing format={FORMAT_NAME!r})")
        version = body.get("version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FormatError(f"{source}: tokenizer format version {version!r} is not a format version "
                              "(a positive integer); the file is corrupted")
        if version > FORMAT_VERSION:
            raise FormatError(
                f"{source}: tokenizer format version {version!r} is newer than this tokenmill reads "
                f"(<= {FORMAT_VERSION}); upgrade tokenmill"
            )
        spec = check(body, TokenizerFile, what=source)
        unhashed = {k: v for k, v in body.items() if k != "hash"}
        try:
            expected = canonical_hash(unhashed)
        except (ValueError, RecursionError) as e:  # a number or a nesting JSON cannot write back
            raise FormatError(f"{source}: holds a value that cannot be hashed ({e}); the file is corrupted") from None
        if spec.hash != expected:
            raise FormatError(f"{source}: content hash mismatch (stored {spec.hash!r}); the file was modified or corrupted")
        try:
            model = spec.model
            specials = {k: _json_int(v, f"special token {k!r} id", source, hi=2**31 - 1)
                        for k, v in spec.special_tokens.items()}
            if size is not None:
                check_ids_below(size, ((f"special_tokens[{k!r}]", i) for k, i in specials.items()), where=source,
                                what="special token id")
            if isinstance(model, MergesModel):
                counts = model.merge_counts
                merges = _json_ints(model.merges, "merges", source, hi=2**31 - 1)
                return cls.from_merges(merges.reshape(-1, 2) if merges.size == 0 else merges,
                                       pattern=spec.pattern, special_tokens=specials,
                                       merge_counts=None if counts is None else _json_ints(counts, "merge_counts", source))
            vocab = _b64_tokens(model.tokens, source)
            if not isinstance(model, BpeModel):  # ranks
                ranks: dict[bytes, int] = {}
                for i, b in enumerate(vocab):
                    if b is not None:
                        if b in ranks:
                            raise FormatError(f"{source}: model.tokens[{i:,d}] repeats the token {b!r} of "
                                              f"model.tokens[{ranks[b]:,d}]; each token has one rank")
                        ranks[b] = i
                return cls.from_ranks(ranks, pattern=spec.pattern, special_tokens=specials)
            from .added import AddedToken

            added = spec.added_tokens
            if added is not None and size is not None:
                check_ids_below(size, ((f"added_tokens[{k}].id", t.id) for k, t in enumerate(added)), where=source,
                                what="added token id")
            merges = _json_ints(model.merges, "merges", source, hi=2**31 - 1)
            merge_ids = _json_ints(model.merge_ids, "merge_ids", source, hi=2**31 - 1) if model.merge_ids else None
            return cls.from_merge_list(
                vocab, merges.reshape(-1, 2), pattern=spec.pattern,
                special_tokens=None if added is not None else specials,
                added_tokens=None if added is None else [AddedToken.from_entry(t) for t in added],
                ignore_merges=model.ignore_merges, normalizer=spec.normalizer, merge_ids=merge_ids,
                add_prefix_space=spec.add_prefix_space, split_patterns=spec.split_patterns, source=source)
        except TokenmillError as e:
            if str(e).startswith(f"{source}:"):
                raise
            raise type(e)(f"{source}: {e}") from e  # name the file
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError) as e:
            raise FormatError(f"{source}: malformed tokenizer file ({type(e).__name__}: {e})") from e

    def save_huggingface(self, path: str | os.PathLike) -> None:
        """Export to a Hugging Face ``tokenizer.json`` (same ids; see ``tokenizer.export``)."""
        from .export import save_huggingface

        save_huggingface(self, path)

    def to_tiktoken(self, name: str | None = None):
        """A ``tiktoken.Encoding`` with the same ranks, pattern and special tokens (see ``export.to_tiktoken``)."""
        from .export import to_tiktoken

        return to_tiktoken(self, name)

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Export the vocabulary as a tiktoken ``.tiktoken`` rank file (see ``tokenizer.export``)."""
        from .export import save_tiktoken

        save_tiktoken(self, path)

    def __repr__(self) -> str:
        p = _pattern_name(self._pattern) or ("none" if self._pattern is None else "custom")
        return f"Tokenizer(vocab_size={self.vocab_size:,d}, pattern={p}, special_tokens={len(self._special)})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Tokenizer) and self.to_dict()["hash"] == other.to_dict()["hash"]

    __hash__ = None  # mutable cache inside; compare by content


def _resolve(pattern: str | None) -> str | None:
    """A preset name (gpt2, gpt4/cl100k, o200k, and the model family: llama3, qwen2, qwen3.5) or regex."""
    from .splitter import FAMILY

    if isinstance(pattern, str) and pattern in FAMILY:
        return FAMILY[pattern][0]
    return resolve_pattern(pattern)


def _pattern_name(regex_str: str | None) -> str | None:
    from .splitter import FAMILY

    for name, (rx, _, _) in FAMILY.items():
        if rx == regex_str:
            return name
    return preset_name(regex_str)


def special_token_names(special_tokens) -> list[str]:
    """Special token names: a str is one token (not one per character); each must be a non-empty,
    encodable (no lone surrogate) string, listed once."""
    names = [special_tokens] if isinstance(special_tokens, str) else list(special_tokens)
    seen = set()
    for s in names:
        if not isinstance(s, str) or not s:
            raise ConfigError(f"special token {s!r} must be a non-empty string")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ConfigError(f"special token {s!r} holds a lone surrogate at character {e.start:,d}, which UTF-8 "
                              "cannot encode; special tokens must be valid text") from None
        if s in seen:
            raise ConfigError(f"special token {s!r} is listed twice; special tokens must be distinct")
        seen.add(s)
    return names


def _check_specials(special: dict[str, int], vocab: Sequence, dense: bool = True) -> dict[str, int]:
    """Special tokens: distinct names and ids, anywhere an id is not held by other vocabulary bytes
    (after the vocabulary, in a gap, or, for tokenizer.json imports, on a token with the same bytes).
    ``dense`` is kept for callers; ids in the vocabulary's range are refused for tiktoken-style files."""
    special_token_names(special)
    for s, i in special.items():
        check_int(i, f"special token {s!r} id", min=0, max=2**31 - 1)
    ids = sorted(special.values())
    if len(set(ids)) != len(ids):
        raise ConfigError(f"special token ids {ids} repeat; each special token needs its own id")
    n_vocab = len(vocab)
    for s, i in special.items():
        if i < n_vocab and vocab[i] is not None and (dense or vocab[i] != s.encode("utf-8")):
            raise ConfigError(f"special token {s!r} has id {i:,d}, which the vocabulary token {vocab[i]!r} holds; "
                              "give it a free id")
    return dict(special)


def _byte_ids(vocab: Sequence[bytes | None]) -> list[int]:
    ids = [-1] * 256
    for i, b in enumerate(vocab):
        if b is not None and len(b) == 1 and ids[b[0]] < 0:
            ids[b[0]] = i
    missing = [b for b in range(256) if ids[b] < 0]
    if missing:
        raise FormatError(f"vocabulary lacks single-byte tokens for bytes {missing[:8]}...; a byte-level BPE needs all 256")
    return ids


def _split_specials(text: str, allowed: set[str]):
    """Yield (piece, is_special) splitting ``text`` at allowed special tokens (longest first)."""
    import regex

    alternation = "|".join(regex.escape(s) for s in sorted(allowed, key=len, reverse=True))
    pos = 0
    for m in regex.finditer(alternation, text):
        if m.start() > pos:
            yield text[pos : m.start()], False
        yield m.group(), True
        pos = m.end()
    if pos < len(text):
        yield text[pos:], False


_RANK_HASH_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64


def _rank_pairs(vocab: list, ranks: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tiktoken's merges as (lefts, rights, priorities): every (l, r) whose bytes joined are a token m,
    with priority m (its rank). Each token's split points are looked up by a polynomial hash of the
    prefix and of the suffix (numpy, ~20x a Python loop over 700k split points for a 128k vocabulary),
    then every pair found is checked byte for byte; on any hash collision it falls back to the loop."""
    ids = np.fromiter((i for i, b in enumerate(vocab) if b is not None), np.int64)
    toks = [vocab[i] for i in ids.tolist()]
    lens = np.fromiter(map(len, toks), np.int64, len(toks))
    if lens.size == 0 or lens.min() == 0:
        raise FormatError("a rank file token is empty; every token needs at least one byte")
    flat = np.frombuffer(b"".join(toks), np.uint8).astype(np.uint64) + np.uint64(1)
    starts = np.cumsum(lens) - lens
    maxlen = int(lens.max())
    base, mod = _RANK_HASH_BASE, 1 << 64
    inv = pow(base, -1, mod)
    pw = np.array([pow(base, j, mod) for j in range(maxlen + 1)], np.uint64)
    ipw = np.array([pow(inv, j, mod) for j in range(maxlen + 1)], np.uint64)
    within = np.arange(flat.size, dtype=np.int64) - np.repeat(starts, lens)
    with np.errstate(over="ignore"):
        cum = np.concatenate([np.zeros(1, np.uint64), np.cumsum(flat * pw[within], dtype=np.uint64)])
        full = cum[starts + lens] - cum[starts]
        # candidates: token t split after k bytes, 1 <= k < len(t)
        multi = np.flatnonzero(lens > 1)
        reps = lens[multi] - 1
        t = np.repeat(multi, reps)
        k = ranks_in_groups(reps) + 1
        s0 = starts[t]
        pre = cum[s0 + k] - cum[s0]
        suf = (cum[s0 + lens[t]] - cum[s0 + k]) * ipw[k]
    order = np.argsort(full, kind="stable")
    keys = full[order]
    if keys.size > 1 and (keys[1:] == keys[:-1]).any():
        return _rank_pairs_loop(vocab, ranks)

    def find(h, length):
        # queries in sorted order: searchsorted then walks the keys once instead of jumping around
        qo = np.argsort(h)
        j = np.empty_like(qo)
        j[qo] = np.minimum(np.searchsorted(keys, h[qo]), keys.size - 1)
        hit = (keys[j] == h) & (lens[order[j]] == length)
        return np.where(hit, order[j], -1)

    left = find(pre, k)
    right = find(suf, lens[t] - k)
    ok = np.flatnonzero((left >= 0) & (right >= 0))
    li, ri, mi, kk = left[ok], right[ok], t[ok], k[ok]
    # exact check, byte for byte: token m's bytes are l's bytes then r's
    ml = lens[mi]
    pos = ranks_in_groups(ml)
    cut = np.repeat(kk, ml)
    other = np.where(pos < cut, np.repeat(starts[li], ml) + pos, np.repeat(starts[ri], ml) + pos - cut)
    if not np.array_equal(flat[np.repeat(starts[mi], ml) + pos], flat[other]):
        return _rank_pairs_loop(vocab, ranks)
    return ids[li], ids[ri], ids[mi]


def _rank_pairs_loop(vocab: list, ranks: dict[bytes, int]) -> dict[tuple[int, int], int]:
    """``_rank_pairs`` as a plain loop (its twin in the tests, and its fallback)."""
    table: dict[tuple[int, int], int] = {}
    for m, tb in enumerate(vocab):
        for k in range(1, 0 if tb is None else len(tb)):
            left, right = ranks.get(tb[:k]), ranks.get(tb[k:])
            if left is not None and right is not None:
                table[(left, right)] = m
    return table


_TEKKEN_NEEDS = ("config.pattern, config.default_vocab_size, config.default_num_special_tokens and a vocab list")


def _tekken_shape(body, src: str) -> None:
    """Before the schema check of a parsed tekken.json: a JSON file that lacks its fields is not one."""
    missing = [k for k in ("config", "vocab") if not isinstance(body, dict) or k not in body]
    if not missing and isinstance(body["config"], dict):
        missing = [f"config.{k}" for k in ("pattern", "default_vocab_size", "default_num_special_tokens")
                   if k not in body["config"]]
    if missing:
        raise FormatError(f"{src}: not a tekken tokenizer (needs {_TEKKEN_NEEDS}; missing {', '.join(missing)})")


def _read_tekken(path, raw: bytes) -> tuple[dict[bytes, int], str, dict[str, int]]:
    """(ranks as ids, pattern, special tokens) of a tekken.json (its bytes ``raw``), checked against
    ``schemas.TekkenFile``, every id below the file's size."""
    src = os.fspath(path)
    where = f"tekken tokenizer file {src!r}"
    spec = decode_file(raw, TekkenFile, where=where, pre=lambda body: _tekken_shape(body, src))
    pattern, entries = spec.config.pattern, spec.vocab
    n_special, size = spec.config.default_num_special_tokens, spec.config.default_vocab_size
    check_ids_below(len(raw), [("config.default_num_special_tokens", n_special)], where=where,
                    what="the special tokens' id count")
    inner = size - n_special
    if not 256 <= inner <= len(entries):
        raise FormatError(f"{src}: default_vocab_size {size:,d} - {n_special:,d} special tokens = {inner:,d} ranked "
                          f"tokens, but the vocab holds {len(entries):,d} (at least 256 needed)")
    ranks: dict[bytes, int] = {}
    for i, e in enumerate(entries[:inner]):
        try:
            if e.rank != i:
                raise ValueError(f"rank {e.rank!r}")
            tb = binascii.a2b_base64(e.token_bytes, strict_mode=True)
        except ValueError as err:
            raise FormatError(f"{src}: vocab[{i:,d}] needs rank {i} and base64 token_bytes ({err})") from None
        if tb in ranks:
            raise FormatError(f"{src}: vocab[{i:,d}] repeats the token {tb!r} of vocab[{ranks[tb] - n_special:,d}]")
        ranks[tb] = i + n_special
    specials: dict[str, int] = {}
    for k, e in enumerate(spec.special_tokens or []):
        if not 0 <= e.rank < n_special or e.token_str in specials:
            raise FormatError(f"{src}: special_tokens[{k}] = {{rank: {e.rank}, token_str: {e.token_str!r}}}: rank "
                              f"must lie in 0..{n_special - 1} and the name be a new string")
        specials[e.token_str] = e.rank
    held = set(specials.values())
    for i in range(n_special):
        if i not in held:
            specials[f"<SPECIAL_{i}>"] = i  # mistral_common's filler names
    return ranks, pattern, specials


def _pairs_consistent(vocab: list, arr: np.ndarray) -> bool:
    """A cached pair table fits its vocabulary: ids in range, each merged token as long as its parts
    (the kernels index by these ids; a damaged cache file is rebuilt instead of trusted)."""
    n = len(vocab)
    if arr.ndim != 2 or arr.shape[1] != 3 or (arr.size and (arr.min() < 0 or arr.max() >= n)):
        return False
    lens = np.fromiter((-1 if b is None else len(b) for b in vocab), np.int64, n)
    sub = lens[arr]
    return bool(((sub >= 1).all() and (sub[:, 0] + sub[:, 1] == sub[:, 2]).all()))


def _read_tiktoken(path) -> dict[bytes, int]:
    return _parse_tiktoken(read_bytes_limited(path, what="tiktoken rank"), path)


def _parse_tiktoken(raw: bytes, path) -> dict[bytes, int]:
    """``token bytes -> rank`` of a rank file (``raw``, its bytes), every line checked: a base64 token,
    one space, a rank of digits below 2**31 - 1 and below the file's size (tokenmill allocates a table
    as long as the largest rank; each rank takes a line of the file). A repeated token or rank is an
    error naming both lines (a dict would keep the last and the ranks would then look out of range)."""
    ranks: dict[bytes, int] = {}
    line_of: dict[bytes, int] = {}
    rank_line: dict[int, int] = {}
    limit = min(2**31 - 1, len(raw))
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        token, _, rank = line.partition(b" ")
        try:
            if not token or not rank.isdigit() or len(rank) > 10:  # bytes.isdigit: ASCII digits only
                raise ValueError(rank)
            tb = binascii.a2b_base64(token, strict_mode=True)  # validates; ~3x base64.b64decode(validate=True)
        except ValueError as e:
            raise FormatError(f"{path}:{lineno}: expected '<base64 token> <rank>' (one space, the rank in digits), "
                              f"got {line[:60]!r}") from e
        r = int(rank)
        if r >= limit:
            why = ("ranks must be below 2**31 - 1" if r >= 2**31 - 1 else
                   f"it is not below the file's size ({len(raw):,d} bytes), and every rank takes a line of the file")
            raise FormatError(f"{path}:{lineno}: rank {r:,d}: {why}; the file is corrupted or not a rank file")
        if tb in ranks:
            raise FormatError(f"{path}:{lineno}: token {tb!r} repeats line {line_of[tb]:,d}; each token needs one rank")
        if r in rank_line:
            raise FormatError(f"{path}:{lineno}: rank {r:,d} repeats line {rank_line[r]:,d}; each token needs its own "
                              "rank")
        ranks[tb] = r
        line_of[tb] = lineno
        rank_line[r] = lineno
    return ranks


def _b64_tokens(tokens, source: str) -> list[bytes | None]:
    """A tokenmill file's ``model.tokens`` (base64 or null) as bytes, decoded strictly."""
    out: list[bytes | None] = []
    for i, t in enumerate(tokens):
        try:
            out.append(None if t is None else binascii.a2b_base64(t, strict_mode=True))
        except ValueError as e:
            raise FormatError(f"{source}: field model.tokens[{i:,d}] = {show_value(t)}: not base64 ({e})") from None
    return out


def _ids(ids) -> list[int]:
    """Token ids as exact ints: ``104.7``, ``True`` or ``"104"`` are refused, never truncated."""
    if isinstance(ids, np.ndarray):
        return check_array(ids, "ids", ndim=None).ravel().tolist()
    return [check_int(i, "token id") for i in ids]


def _json_int(v, what: str, source: str, hi: int = 2**63 - 1) -> int:
    """An integer as JSON holds it: not a bool, a float (1.5 or 2.0) or a string ("398")."""
    if type(v) is not int or not -(2**63) <= v <= hi:
        shown = f"{v:,d}" if type(v) is int else repr(v) if isinstance(v, (bool, float, str)) else show_value(v)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise FormatError(f"{source}: {what} is {shown}; it must be an integer no larger than {hi:,d}")
    return v


def _json_ints(value, what: str, source: str, hi: int = 2**63 - 1) -> np.ndarray:
    """A JSON list of integers, or of equal-length lists of integers, as an int64 array (each entry
    checked as :func:`_json_int`)."""
    if not isinstance(value, list):
        raise FormatError(f"{source}: {what} must be a list, got {type(value).__name__}")
    if not (value and isinstance(value[0], list)):
        return np.array([_json_int(v, f"{what}[{i:,d}]", source, hi) for i, v in enumerate(value)], np.int64)
    width = len(value[0])
    flat = []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != width:
            raise FormatError(f"{source}: {what}[{i:,d}] is {show_value(row)}; every entry must be a list of {width} "
                              "integers")
        flat.extend(_json_int(v, f"{what}[{i:,d}]", source, hi) for v in row)
    return np.array(flat, np.int64).reshape(len(value), width)


def _merge_array(merges) -> np.ndarray:
    """Merges as an exact int64 (M, 2) array (no float truncation, no wrap-around)."""
    arr = check_array(merges, "merges", ndim=None, error=FormatError)
    if arr.size == 0:
        return np.zeros((0, 2), np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise FormatError(f"merges has shape {arr.shape}; pass (left id, right id) pairs, shape (M, 2)")
    return arr


def _head(path) -> bytes:
    """The bytes of a tokenizer.json (or the one in a folder) for a format sniff; b"" if unreadable (the
    importer then reports the problem)."""
    from pathlib import Path

    p = Path(path)
    p = p / "tokenizer.json" if p.is_dir() else p
    try:
        return read_bytes_limited(p, what="tokenizer.json")
    except TokenmillError:
        return b""
