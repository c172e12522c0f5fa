"""SentencePiece ``.model`` files (Mistral v1-v3, Llama 2, Gemma-style BPE with byte fallback), exactly.

A ``.model`` file is a protobuf ``ModelProto``: pieces (text, score, type), a ``TrainerSpec`` (model
type, ``byte_fallback``, ``treat_whitespace_as_suffix``, the unknown-piece surface) and a
``NormalizerSpec`` (``add_dummy_prefix``, ``remove_extra_whitespaces``, ``escape_whitespaces``, a
precompiled character map). It is read here by a small hand-written decoder of protobuf's wire
format (no ``protobuf`` dependency): every length, count and value is bounded and validated, so a
corrupt or hostile file is a :class:`~tokenmill.errors.FormatError` naming the file and the field,
never a crash or a huge allocation. The load-time checks of ``sentencepiece`` 0.2.x are repeated
(duplicate pieces, byte pieces without ``byte_fallback``, a missing unknown piece, pieces of 8,000
bytes or more, a character map whose trie would read outside itself, ...).

Encoding is ``sentencepiece``'s (``SentencePieceProcessor.encode``, read from its 0.2.3 sources, not
copied):

* **normalize**: user-defined symbols are kept as they are; otherwise the longest rule of the
  precompiled character map (a Darts double-array trie) replaces a prefix, or one UTF-8 character
  is kept; leading, trailing and repeated spaces go (``remove_extra_whitespaces``); a space is
  written ``▁`` (U+2581; ``escape_whitespaces``); ``▁`` is put before the text
  (``add_dummy_prefix``; after it with ``treat_whitespace_as_suffix``);
* **BPE over characters**: the normalized text is cut into characters (a user-defined symbol is one
  frozen symbol); repeatedly the adjacent pair whose concatenation is a piece with the best score is
  merged, the leftmost on ties (scores compared as ``sentencepiece`` compares them: by their IEEE
  bits, so ``-0.0`` ranks below ``+0.0``); a pair making a control, unknown or byte piece is never
  merged;
* **output**: a symbol that is not a piece is unknown: its UTF-8 bytes as ``<0xNN>`` pieces with
  ``byte_fallback``, else the unknown id (a run of them is one id); an ``UNUSED`` piece is split
  back into the pair it was last made from.

``decode`` is ``sentencepiece``'s ``decode``: byte pieces are gathered and decoded as UTF-8 (each
invalid byte one U+FFFD), control pieces vanish, the unknown piece is `` ⁇ ``, ``▁`` is a space and
the first one of the text is dropped.

This module holds the readable pure-Python encoder (the twin the compiled one in
``bpe.sp_encoder`` is tested against, and what a first run uses while the kernels are not compiled)
and :class:`SentencePieceTokenizer`, which speaks tokenmill's tokenizer protocol. The file format is
read by ``formats.sentencepiece`` (its names are re-exported here).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import os

import numpy as np

from .._arrays import offsets_of
from .._validate import check_decode_errors, check_path, check_token_id
from ..errors import (
    ConfigError,
    FormatError,
    LoneSurrogateError,
    SpecialTokenError,
    UnknownTokenError,
    UnsupportedTokenizerError,
    interruptible,
)
from .formats.kind import file_head, reading
from .formats.pretrained import PretrainedExport
from .formats.sentencepiece import (
    MAX_RESEGMENT_DEPTH,
    MAX_TRIE_RESULTS,
    PIECE_TO_BYTE,
    WS_BYTES,
    Normalizer,
    SentencePieceModel,
    is_sentencepiece_model,
    parse_model,
    read_model,
    write_model_proto,
)
from .groups import batch_args, encode_flat_by_batch, flat_ids, in_groups
from .sp_types import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, WS
from .special import any_of, first_holding, names_batch_text, rule_of, union_of
from .surrogates import batch_surrogate_error, lone_surrogate_error
from .vocab_names import VocabNames

__all__ = ["SentencePieceModel", "SentencePieceTokenizer", "read_model", "parse_model", "write_model_proto",
           "is_sentencepiece_model", "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED", "UNUSED", "BYTE"]

# ============================================================================ the pure-Python encoder
def _one_char_len(b: int) -> int:
    return (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4)[b >> 4]


def _decode_utf8(data: bytes, i: int) -> tuple[bool, int]:
    """sentencepiece's ``IsValidDecodeUTF8`` at ``data[i:]``: (valid, bytes consumed; 1 when invalid).
    U+FFFD itself counts as valid."""
    n = len(data) - i
    b0 = data[i]
    if b0 < 0x80:
        return True, 1
    if n >= 2 and (b0 & 0xE0) == 0xC0:
        cp = ((b0 & 0x1F) << 6) | (data[i + 1] & 0x3F)
        if (data[i + 1] & 0xC0) == 0x80 and cp >= 0x80:
            return True, 2
    elif n >= 3 and (b0 & 0xF0) == 0xE0:
        cp = ((b0 & 0x0F) << 12) | ((data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
        if (data[i + 1] & 0xC0) == 0x80 and (data[i + 2] & 0xC0) == 0x80 and cp >= 0x800 and not 0xD800 <= cp < 0xE000:
            return True, 3
    elif n >= 4 and (b0 & 0xF8) == 0xF0:
        cp = ((b0 & 0x07) << 18) | ((data[i + 1] & 0x3F) << 12) | ((data[i + 2] & 0x3F) << 6) | (data[i + 3] & 0x3F)
        if ((data[i + 1] & 0xC0) == 0x80 and (data[i + 2] & 0xC0) == 0x80 and (data[i + 3] & 0xC0) == 0x80
                and 0x10000 <= cp <= 0x10FFFF):
            return True, 4
    return False, 1


def _longest_prefix(symbols: tuple, data: bytes, i: int) -> int:
    """Length of the longest of ``symbols`` (bytes) that ``data[i:]`` starts with, 0 if none."""
    best = 0
    for s in symbols:
        if len(s) > best and data.startswith(s, i):
            best = len(s)
    return best


def _trie_longest(trie: np.ndarray, data: bytes, i: int) -> tuple[int, int]:
    """Darts ``commonPrefixSearch`` from ``data[i:]``: (length, value) of the longest of the first 32
    matches, (0, 0) when none."""
    pos = 0
    unit = int(trie[0])
    pos ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
    found = 0
    best = (0, 0)
    for k in range(i, len(data)):
        c = data[k]
        pos ^= c
        unit = int(trie[pos])
        if (unit & ((1 << 31) | 0xFF)) != c:
            break
        pos ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        if (unit >> 8) & 1:
            if found < MAX_TRIE_RESULTS:
                best = (k - i + 1, int(trie[pos]) & 0x7FFFFFFF)
            found += 1
    return best


def _normalize_prefix(norm: Normalizer, user: tuple, data: bytes, i: int) -> tuple[bytes, int]:
    """``NormalizePrefix``: (normalized text, input bytes consumed) at ``data[i:]``."""
    n = _longest_prefix(user, data, i) if user else 0
    if n:
        return data[i:i + n], n
    if norm.trie is not None:
        length, value = _trie_longest(norm.trie, data, i)
        if length:
            end = norm.replacements.index(b"\0", value)
            return norm.replacements[value:end], length
    ok, n = _decode_utf8(data, i)
    return (data[i:i + n], n) if ok else (b"\xef\xbf\xbd", 1)


def normalize(norm: Normalizer, data: bytes, *, user: tuple = (), suffix: bool = False) -> bytes:
    """sentencepiece's ``Normalizer::Normalize`` of UTF-8 ``data`` (``user``: user-defined symbols,
    kept as they are; ``suffix``: ``treat_whitespace_as_suffix``)."""
    if not data:
        return b""
    i = 0
    if norm.remove_extra_whitespaces:
        while i < len(data):
            sp, n = _normalize_prefix(norm, user, data, i)
            if sp != b" ":
                break
            i += n
    if i >= len(data):
        return b""
    space = WS_BYTES if norm.escape_whitespaces else b" "
    out = bytearray()
    if not suffix and norm.add_dummy_prefix:
        out += space
    prev_space = norm.remove_extra_whitespaces
    while i < len(data):
        sp, n = _normalize_prefix(norm, user, data, i)
        if prev_space:
            sp = sp.lstrip(b" ")
        if sp:
            out += sp.replace(b" ", space)
            prev_space = sp.endswith(b" ")
        i += n
        if not norm.remove_extra_whitespaces:
            prev_space = False
    if norm.remove_extra_whitespaces:
        while out.endswith(space):
            del out[len(out) - len(space):]
    if suffix and norm.add_dummy_prefix:
        out += space
    return bytes(out)


def bpe_reference(model: SentencePieceModel, normalized: bytes) -> list[tuple[bytes, int]]:
    """``bpe::Model::Encode``: (piece bytes, id) of the normalized text, the id -1 where a symbol is
    no piece and the model has no unknown piece."""
    if not normalized:
        return []
    types = model.types
    keys = model.score_keys
    unk = model.unk_id
    user = model.user_defined
    # symbols: a user-defined symbol (frozen) or one character
    starts, ends, frozen = [], [], []
    i = 0
    while i < len(normalized):
        n = _longest_prefix(user, normalized, i) if user else 0
        if n:
            frozen.append(True)
        else:
            n = min(len(normalized) - i, _one_char_len(normalized[i]))
            frozen.append(False)
        starts.append(i)
        ends.append(i + n)
        i += n
    m = len(starts)
    prev = list(range(-1, m - 1))
    nxt = list(range(1, m + 1))
    nxt[-1] = -1
    agenda: list = []
    rev_merge: dict[bytes, tuple[bytes, bytes]] = {}

    def add(left: int, right: int) -> None:
        if left == -1 or right == -1 or frozen[left] or frozen[right]:
            return
        piece = normalized[starts[left]:ends[right]]
        pid = model.piece_id(piece)
        if pid == unk or types[pid] in (UNKNOWN, CONTROL, BYTE):
            return
        heapq.heappush(agenda, (-int(keys[pid]), left, right, len(piece)))
        if types[pid] == UNUSED:
            rev_merge[piece] = (normalized[starts[left]:ends[left]], normalized[starts[right]:ends[right]])

    for k in range(1, m):
        add(k - 1, k)
    while agenda:
        _, left, right, size = heapq.heappop(agenda)
        if ends[left] == starts[left] or ends[right] == starts[right] or (
                ends[left] - starts[left] + ends[right] - starts[right] != size):
            continue
        ends[left] = ends[right]
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prev[nxt[right]] = left
        ends[right] = starts[right]
        add(prev[left], left)
        add(left, nxt[left])

    out: list[tuple[bytes, int]] = []

    def resegment(w: bytes, depth: int) -> None:
        pid = model.piece_id(w)
        if depth > MAX_RESEGMENT_DEPTH:
            out.append((w, pid))
        elif pid == unk or types[pid] in (UNKNOWN, CONTROL, BYTE):
            out.append((w, unk))
        elif types[pid] != UNUSED:
            out.append((w, pid))
        elif w not in rev_merge:
            out.append((w, unk))
        else:
            a, b = rev_merge[w]
            resegment(a, depth + 1)
            resegment(b, depth + 1)

    k = 0
    while k != -1:
        resegment(normalized[starts[k]:ends[k]], 0)
        k = nxt[k]
    return out


def encode_reference(model: SentencePieceModel, text: str) -> list[int]:
    """``SentencePieceProcessor.encode(text)`` in pure Python (the readable twin of the compiled path)."""
    data = utf8_of(text)
    if not data:
        return []
    normalized = normalize(model.normalizer, data, user=model.user_defined, suffix=model.treat_whitespace_as_suffix)
    ids: list[int] = []
    prev_unk = False
    types = model.types
    for w, pid in bpe_reference(model, normalized):
        if pid >= 0 and types[pid] == CONTROL:
            ids.append(pid)
            prev_unk = False
            continue
        is_unk = pid == -1 or types[pid] == UNKNOWN
        if is_unk and model.byte_fallback:
            ids.extend(int(model.byte_ids[b]) for b in w)
        elif not (prev_unk and is_unk):
            ids.append(pid)
        prev_unk = is_unk
    return ids


def utf8_of(text: str) -> bytes:
    if not isinstance(text, str):
        raise ConfigError(f"text is a {type(text).__name__}; encode takes a str (decode bytes first: "
                          "data.decode('utf-8'))")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise lone_surrogate_error(text) from None


def ids_by_pieces(texts, pieces, encode, first: int = 0, plain: int = 0, plain_pieces=None) -> list[np.ndarray]:
    """The ids of each of ``texts`` (int64 arrays) where ``pieces(text)`` cuts a text into ``(piece, id)``
    pairs (an id for a special or added token, None for text to encode) and ``encode(datas)`` gives the ids
    of each UTF-8 piece of the whole group at once (a list of arrays): the compiled encoders' batch
    (one kernel call a group of texts, empty pieces skipped). ``first``: the batch's index of ``texts[0]``
    (a text UTF-8 cannot encode is named by it). ``plain``: the first texts known to hold no token
    (:func:`batch_flat`'s scan), cut by ``plain_pieces`` instead, with no search of their own."""
    rows, datas = [], []
    for j, t in enumerate(texts):
        row = []
        try:
            for piece, tid in (plain_pieces(t) if j < plain else pieces(t)):
                if tid is not None:
                    row.append(tid)
                else:
                    data = utf8_of(piece)
                    if data:
                        row.append(~len(datas))  # a piece to encode: ~its index
                        datas.append(data)
        except LoneSurrogateError:
            raise lone_surrogate_error(t, f"text {first + j:,d} of the batch") from None
        rows.append(row)
    parts = encode(datas)
    out = []
    for row in rows:
        if len(row) == 1 and row[0] < 0:
            out.append(parts[~row[0]])
        elif row:
            out.append(np.concatenate([np.array([x], np.int64) if x >= 0 else parts[~x] for x in row]))
        else:
            out.append(np.zeros(0, np.int64))
    return out


def batch_flat(texts, pieces, encode, first: int = 0, words: frozenset = frozenset(), plain=None, utf8=None
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, bounds)`` of a group of ``texts``, text ``i``'s ids ``ids[bounds[i]:bounds[i + 1]]``, where
    ``encode(datas)`` gives the ``(ids, bounds)`` of UTF-8 pieces (``ids`` possibly the encoder's scratch buffer:
    read it before this thread's next encode). The group's tokens are looked for in one pass: ``words`` are
    those that cut a text or refuse it (allowed, disallowed and added ones); the texts before the first that
    holds one (``special.first_holding`` of their UTF-8) are one piece of text each, ``plain(text)``'s pieces
    (default: the text itself); that text and the rest are cut by ``pieces`` (:func:`ids_by_pieces`), so a
    refused one raises as ``encode`` raises. When no text holds one, the group's UTF-8 goes to ``encode`` at
    once (no Python a text but its ``str.encode``): as it is, or ``utf8(datas)`` of the non-empty texts
    (what ``plain`` makes of them, as UTF-8; None where ``plain`` is not such a function of the bytes).
    Asked text by text (sets of Mistral v3's 751 control pieces built for each, a search of each), a batch
    of 100,000 short lines took 33 us a line on one thread, sentencepiece 10; this way ~3."""
    parts = _parts(encode)
    try:
        datas = [t.encode("utf-8") for t in texts]
    except UnicodeEncodeError:  # a lone surrogate: text by text, which names it (after a text before it refused)
        return flat_ids(ids_by_pieces(texts, pieces, parts, first))
    k = first_holding(datas, words)
    k = 0 if k is None else k
    if k < len(texts) or (plain is not None and utf8 is None):
        return flat_ids(ids_by_pieces(texts, pieces, parts, first, k, plain or _one_piece))
    # no token in any text: their UTF-8 is what to encode (an empty text has no ids, and no piece)
    full = [d for d in datas if d]
    ids, bounds = encode(utf8(full) if utf8 is not None else full)
    if len(full) < len(datas):
        sizes = np.zeros(len(datas), np.int64)
        sizes[[j for j, d in enumerate(datas) if d]] = np.diff(bounds)
        bounds = offsets_of(sizes)
    return ids, bounds


def _one_piece(text: str) -> list[tuple[str, None]]:
    return [(text, None)]


def _parts(encode):
    """``encode`` (UTF-8 pieces -> ``(ids, bounds)``) as :func:`ids_by_pieces` calls it: a list of arrays."""
    def parts(datas: list[bytes]) -> list[np.ndarray]:
        ids, bounds = encode(datas)
        b = bounds.tolist()
        return [ids[b[k]:b[k + 1]] for k in range(len(datas))]

    return parts


FEW_TEXTS = 8  # a group of fewer texts is asked text by text (one search each, ~0.3 us, is cheaper than the
# numpy set-up of one pass and of lists made in one pass, ~9 us each: an ``encode`` call is a group of one)


def encode_group(texts, pieces, encode, first: int, words: frozenset, as_arrays: bool, lists, plain=None,
                 utf8=None) -> list:
    """The results of ``encode_batch`` for a group of ``texts`` (``first``: the batch's index of ``texts[0]``):
    :func:`batch_flat` then :func:`split_ids`, or, for fewer than :data:`FEW_TEXTS`, each text cut by
    ``pieces`` (:func:`ids_by_pieces`) and its ids copied or made a list on its own."""
    if len(texts) < FEW_TEXTS:
        got = ids_by_pieces(texts, pieces, _parts(encode), first)
        return [a.copy() if as_arrays else lists().one(a) for a in got]
    ids, bounds = batch_flat(texts, pieces, encode, first, words, plain, utf8)
    return split_ids(ids, bounds, as_arrays, lists)


def split_ids(ids: np.ndarray, bounds: np.ndarray, as_arrays: bool, lists) -> list:
    """Each text's ids of a group's ``(ids, bounds)`` (``ids`` possibly the encoder's scratch buffer): int64
    arrays, views of one copy of the group's ids (no copy a text, as ``Tokenizer.encode_batch`` gives them),
    or lists made in one pass (``lists()``'s ``IntLists``: a call a text was ~1 us, a third of a short line)."""
    if not as_arrays:
        return lists().split(ids, bounds)
    b = bounds.tolist()
    ids = ids[b[0]:b[-1]].copy()
    return [ids[x - b[0]:y - b[0]] for x, y in zip(b, b[1:])]


# ============================================================================ decoding
def _valid_utf8(data: bytes) -> bytes:
    """Each byte that does not start a valid UTF-8 character becomes U+FFFD (sentencepiece's rule,
    which differs from Python's 'replace' on truncated sequences)."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        pass
    out = bytearray()
    i = 0
    while i < len(data):
        ok, n = _decode_utf8(data, i)
        out += data[i:i + n] if ok else b"\xef\xbf\xbd"
        i += n
    return bytes(out)


def decode_reference(model: SentencePieceModel, ids, *, replace: bool = True) -> bytes:
    """``SentencePieceProcessor.decode(ids)`` as UTF-8 bytes (``replace=False``: byte pieces as they
    are, without sentencepiece's U+FFFD per invalid byte)."""
    pieces, types = model.pieces, model.types
    n = len(pieces)
    strip_first = model.normalizer.add_dummy_prefix or model.normalizer.remove_extra_whitespaces
    rew = model.normalizer.remove_extra_whitespaces
    unk_surface = model.unk_surface.encode("utf-8")
    out = bytearray()
    queue = bytearray()
    bos_ws = True
    for i in ids:
        if not 0 <= i < n:
            raise UnknownTokenError(f"token id {i} is out of range for vocab_size={n:,d}")
        t = types[i]
        if t == BYTE:
            queue.append(PIECE_TO_BYTE[pieces[i]])
            continue
        if queue:
            out += _valid_utf8(bytes(queue)) if replace else queue
            queue.clear()
        if out:
            bos_ws = False
        if t == CONTROL:
            continue
        p = pieces[i].encode("utf-8")
        has_bos_ws = False
        if bos_ws and strip_first:
            if p.startswith(WS_BYTES):
                p = p[len(WS_BYTES):]
                has_bos_ws = not rew
        if t == UNKNOWN:
            out += unk_surface
        else:
            out += p.replace(WS_BYTES, b" ")
        if has_bos_ws or out:
            bos_ws = False
    if queue:
        out += _valid_utf8(bytes(queue)) if replace else queue
    if model.denormalizer is not None:
        out = bytearray(normalize(model.denormalizer, bytes(out)))
    return bytes(out)


# ============================================================================ the tokenizer


def search_first(pat, text: str):
    """``pat.search(text)``: where the words start with few distinct characters, their occurrences
    are found with ``str.find`` (memchr speed) and the pattern tried there only; a scan by ``re``
    itself was ~7 ns per character, a quarter of encoding English."""
    firsts = pat.firsts
    if len(firsts) > 4:
        return pat.search(text)
    best = None
    for c in firsts:
        i = text.find(c)
        while i >= 0 and (best is None or i < best.start()):
            m = pat.match(text, i)
            if m is not None:
                best = m
                break
            i = text.find(c, i + 1)
    return best


class _TriePattern:
    __slots__ = ("regex", "firsts")

    def __init__(self, regex, firsts):
        self.regex, self.firsts = regex, firsts

    def search(self, text):
        return self.regex.search(text)

    def match(self, text, i):
        return self.regex.match(text, i)


def first_of(cache: dict, words, text: str):
    """The first occurrence in ``text`` of any of ``words`` (a match object, or None), through their
    trie pattern (:func:`trie_of`)."""
    return search_first(trie_of(cache, words), text)


def trie_of(cache: dict, words) -> "_TriePattern":
    """The trie pattern of ``words``, kept in ``cache`` by the set (cleared past 64 sets; a frozenset is its
    own key, no copy of its words a call)."""
    key = words if isinstance(words, frozenset) else frozenset(words)
    pat = cache.get(key)
    if pat is None:
        if len(cache) > 64:
            cache.clear()
        pat = cache[key] = trie_pattern(sorted(words))
    return pat


def trie_pattern(words: list[str]):
    """A ``re`` pattern matching any of ``words`` (the longest at a position), written as a trie
    (``special.any_of``: ``\\[(?:INST\\]|/INST\\]|control_(?:1|...))``): one scan in C, a few comparisons
    per candidate position, where an alternation of Mistral v3's 750 control pieces tried each in turn."""
    import re

    return _TriePattern(re.compile(any_of(words)), sorted({w[0] for w in words}))


def _from_raw(raw: bytes, source: str) -> "SentencePieceTokenizer":
    return SentencePieceTokenizer(parse_model(raw, source=source))


class SentencePieceTokenizer(VocabNames, PretrainedExport):
    """A SentencePiece BPE model (``.model`` file) with tokenmill's tokenizer protocol.

    ``encode_ordinary(text)`` equals ``sentencepiece.SentencePieceProcessor(model_file=...).encode(text)``
    for every text, and ``decode(ids)`` equals its ``decode(ids)`` for every id sequence. Special
    tokens are the control and unknown pieces (``<s>``, ``</s>``, ``<unk>``, Mistral's ``[INST]``...):
    ``sentencepiece`` never reads them in text, tokenmill raises on them by default (tiktoken's safety
    model); ``disallowed_special=()`` encodes them as text, as ``sentencepiece`` does, and an allowed one
    becomes its id, the text around it encoded as separate texts (each its own ``▁`` prefix, as
    ``mistral_common`` builds prompts).

    >>> from tokenmill.tokenizer.sentencepiece import write_model_proto
    >>> pieces = [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3)] + [(p, -i, 1) for i, p in enumerate(
    ...     ["▁", "h", "i", "hi", "▁hi"])]
    >>> tok = SentencePieceTokenizer.from_bytes(write_model_proto(pieces))
    >>> tok.encode("hi hi"), tok.decode([7, 7])
    ([7, 7], 'hi hi')
    """

    def __init__(self, model: SentencePieceModel):
        self.model = model
        types = model.types.tolist()
        self._special = {p: i for i, (p, t) in enumerate(zip(model.pieces, types)) if t in (CONTROL, UNKNOWN)}
        self._special_re: dict[frozenset, object] = {}  # a set of special tokens -> its trie pattern
        self._rules: dict = {}  # (allowed_special, disallowed_special) -> special.requested's rule
        ws = WS.encode("utf-8")
        self._bytes = [bytes([PIECE_TO_BYTE[p]]) if t == BYTE else p.encode("utf-8") if t in (CONTROL, UNKNOWN)
                       else p.encode("utf-8").replace(ws, b" ") for p, t in zip(model.pieces, types)]
        self._encoder = None
        self._lock = __import__("threading").Lock()
        self._int_lists = None  # one Python int per id, for lists out (_cpython.IntLists)

    # ----------------------------------------------------------------- construction
    @classmethod
    def load(cls, path) -> "SentencePieceTokenizer":
        """Read a ``.model`` file (see :func:`read_model`)."""
        path = check_path(path)
        return cls(reading(os.fspath(path), lambda: file_head(path), "sentencepiece", lambda: read_model(path)))

    @classmethod
    def from_bytes(cls, raw: bytes, *, source: str = "<bytes>") -> "SentencePieceTokenizer":
        """From the bytes of a ``.model`` file (``SentencePieceProcessor.serialized_model_proto()``)."""
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raise ConfigError(f"raw is a {type(raw).__name__}; pass the bytes of a .model file (for a path: "
                              "Tokenizer.from_sentencepiece(path))")
        return cls(parse_model(bytes(raw), source=source))

    def __reduce__(self):  # worker processes rebuild it from the file's bytes (caches are per process)
        return _from_raw, (self.model.raw, self.model.source)

    # ----------------------------------------------------------------- properties
    @property
    def vocab_size(self) -> int:
        return len(self.model.pieces)

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def content_hash(self) -> str:
        """sha256 of the model file's bytes (all that decides the ids)."""
        h = getattr(self, "_hash", None)
        if h is None:
            h = self._hash = hashlib.sha256(b"tokenmill.sentencepiece\0" + self.model.raw).hexdigest()
        return h

    def __eq__(self, other) -> bool:  # by content, as the byte-level Tokenizer (it had compared by identity)
        return type(other) is type(self) and other.content_hash == self.content_hash

    def __hash__(self) -> int:  # a key of a dict or of functools.cache, as ``==`` compares
        return hash(self.content_hash)

    @property
    def pattern(self):  # no split regex: ``tokenmill inspect`` shows None
        return None

    @property
    def pieces(self) -> tuple:
        """Each id's piece as the file spells it (``▁hello``, ``<0x0A>``, ``<s>``)."""
        return self.model.pieces

    def piece_to_id(self, piece: str) -> int:
        """The id of ``piece`` (any type), else the unknown id (``sentencepiece``'s ``piece_to_id``)."""
        return self.model.piece_id(piece.encode("utf-8"))

    def id_to_piece(self, token_id: int) -> str:
        return self.model.pieces[self._id(token_id)]

    def token_bytes(self, token_id: int) -> bytes:
        """A token's bytes: the piece with ``▁`` as a space, a byte piece's byte, a control or unknown
        piece's text."""
        return self._bytes[self._id(token_id)]

    def _hf_tokens(self) -> tuple[dict[int, str], dict[str, int]]:
        """``VocabNames``' strings: every piece as the file spells it; the control and unknown pieces are the
        special tokens (as transformers' conversion adds them)."""
        return dict(enumerate(self.model.pieces)), dict(self._special)

    def _unk_id(self) -> int | None:
        unk = self.model.unk_id  # (what sentencepiece's piece_to_id gives a string no piece spells)
        return unk if 0 <= unk < self.vocab_size else None

    def vocab_items(self):
        """``(id, bytes)`` of every piece that is not a special token."""
        return ((i, b) for i, b in enumerate(self._bytes) if self.model.pieces[i] not in self._special
                or self._special[self.model.pieces[i]] != i)

    def _id(self, token_id) -> int:

        i = check_token_id(token_id)
        if not 0 <= i < len(self._bytes):
            raise UnknownTokenError(f"token id {i} is out of range for vocab_size={self.vocab_size:,d}")
        return i

    def __repr__(self) -> str:
        m = self.model
        return (f"SentencePieceTokenizer(vocab_size={self.vocab_size:,d}, byte_fallback={m.byte_fallback}, "
                f"special_tokens={len(self._special)}, source={os.path.basename(m.source)!r})")

    # ----------------------------------------------------------------- special tokens
    def _rule(self, allowed_special, disallowed_special) -> tuple[frozenset, frozenset, frozenset]:
        """(allowed, to check, to look for): ``special.requested``'s rule of these arguments (kept for hashable
        ones, ``special.rule_of``) and the tokens whose presence makes a text more than one plain piece."""
        allowed, check = rule_of(self._rules, self._special, allowed_special, disallowed_special)
        return allowed, check, union_of(allowed, check)

    def _allowed(self, text: str, allowed_special, disallowed_special, rule=None) -> frozenset[str]:
        """The allowed special tokens that ``text`` may hold; raises if it spells a disallowed one. ``rule``:
        :meth:`_rule` of these arguments, worked out once for a batch."""
        if not isinstance(text, str):
            utf8_of(text)
        allowed, check = (rule_of(self._rules, self._special, allowed_special, disallowed_special) if rule is None
                          else rule[:2])
        if check:
            m = first_of(self._special_re, check, text)
            if m is not None:
                s = m.group()
                found = f"the text contains the special token {s!r} at character {m.start():,d}"
                raise SpecialTokenError(
                    f"{found}; pass allowed_special={{{s!r}}} (or 'all') to encode it as a special token, "
                    "disallowed_special=() to encode it as plain text (as sentencepiece does), or use "
                    "encode_ordinary()", found)
        return allowed

    def _pieces(self, text: str, allowed) -> list[tuple[str, int | None]]:
        """``text`` cut at the allowed special tokens it holds (the longest at a place): (text, None) and
        (token, id). Their trie pattern is made once per set (an alternation of the set escaped and compiled
        a text, 751 names with ``allowed_special="all"``, was most of such a batch's time)."""
        if not allowed:
            return [(text, None)]
        pat = trie_of(self._special_re, allowed)
        first = search_first(pat, text)
        if first is None:
            return [(text, None)]
        out, at = [], 0
        for m in pat.regex.finditer(text, first.start()):
            if m.start() > at:
                out.append((text[at:m.start()], None))
            out.append((m.group(), self._special[m.group()]))
            at = m.end()
        if at < len(text):
            out.append((text[at:], None))
        return out

    # ----------------------------------------------------------------- encoding
    def encode_python(self, text: str, *, allowed_special=(), disallowed_special="all") -> list[int]:
        """``encode`` in pure Python (:func:`encode_reference`): the same ids, no compiled kernel."""
        allowed = self._allowed(text, allowed_special, disallowed_special)
        out: list[int] = []
        try:
            for piece, sid in self._pieces(text, allowed):
                out.extend([sid] if sid is not None else encode_reference(self.model, piece))
        except LoneSurrogateError:  # named in the whole text
            raise lone_surrogate_error(text) from None
        return out

    def encode_ordinary_python(self, text: str) -> list[int]:
        """``encode_ordinary`` in pure Python (the twin the tests compare the kernels with)."""
        return encode_reference(self.model, text)

    def encode_ordinary(self, text: str) -> list[int]:
        """``sentencepiece``'s ``encode(text)``: special-token text is plain text."""
        return self.encode(text, disallowed_special=())

    @interruptible
    def encode(self, text: str, *, allowed_special=(), disallowed_special="all") -> list[int]:
        """Token ids of ``text``; special-token text raises unless allowed (or ``disallowed_special=()``)."""
        if not isinstance(text, str):
            utf8_of(text)  # raises: names what it is
        if self._python_first(len(text)):
            return self.encode_python(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        pieces = self._pieces(text, self._allowed(text, allowed_special, disallowed_special))
        if len(pieces) == 1 and pieces[0][1] is None:  # no special token (the common call): the kernel on it
            return self._encode_one(utf8_of(text))
        try:  # (the batch's path: each piece, one kernel call)
            return self.encode_batch([text], num_threads=1, allowed_special=allowed_special,
                                     disallowed_special=disallowed_special)[0]
        except LoneSurrogateError:  # "the text", not "text 0 of the batch"
            raise lone_surrogate_error(text) from None

    def _encode_one(self, data: bytes) -> list[int]:
        """The ids of one text's UTF-8 ``data`` holding no special token: one kernel call, without the batch's
        groups, pieces and joins (~80 us a sentence through ``encode_batch([text])``, against ~12 for
        sentencepiece's own ``encode``)."""
        if not data:
            return []
        ids, slow = self._compiled().encode_one(data)
        if slow:  # an UNUSED piece left: sentencepiece's split-back, in Python (as the batch does)
            return encode_reference(self.model, data.decode("utf-8"))
        return self._lists().one(ids)

    def _python_first(self, size: int) -> bool:
        if self._encoder is not None:
            return False
        from .bpe.sp_encoder import python_first

        return python_first(size)

    def _compiled(self):
        enc = self._encoder
        if enc is None:
            with self._lock:
                if self._encoder is None:
                    from .bpe.sp_encoder import CompiledSentencePiece

                    self._encoder = CompiledSentencePiece(self.model)
                enc = self._encoder
        return enc

    def _lists(self):
        """One Python int per id, for lists out (``_cpython.IntLists``, made on first use)."""
        lists = self._int_lists
        if lists is None:
            from ._cpython import IntLists

            lists = self._int_lists = IntLists(self.vocab_size)
        return lists

    @names_batch_text
    @interruptible
    def encode_batch(self, texts, *, num_threads=None, as_arrays: bool = False, allowed_special=(),
                     disallowed_special="all") -> list:
        """Encode many texts on ``num_threads`` threads (default: all cores; the kernels release the GIL).
        Same result as ``[encode(t) for t in texts]``, in order; ``as_arrays=True``: int64 arrays."""
        texts, threads, as_arrays = batch_args(texts, num_threads, as_arrays)
        if self._encoder is None and self._python_first(sum(len(t) for t in texts if isinstance(t, str))):
            kw = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
            try:
                lists = [self.encode_python(t, **kw) for t in texts]
            except LoneSurrogateError:
                raise batch_surrogate_error(texts) from None
            return [np.array(ids, np.int64) for ids in lists] if as_arrays else lists
        enc = self._compiled()
        rule = self._rule(allowed_special, disallowed_special) if texts else None  # once a call, not a text

        def encode(datas: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
            ids, bounds, slow = enc.encode_many(datas)
            if not slow.any():
                return ids, bounds
            parts = [ids[bounds[k]:bounds[k + 1]] for k in range(len(datas))]
            for k in np.flatnonzero(slow).tolist():
                parts[k] = np.array(encode_reference(self.model, datas[k].decode("utf-8")), np.int64)
            return flat_ids(parts)

        def pieces(t: str) -> list:
            return self._pieces(t, self._allowed(t, allowed_special, disallowed_special, rule))

        def group(lo: int, hi: int) -> list:
            return encode_group(texts[lo:hi], pieces, encode, lo, rule[2], as_arrays, self._lists)

        return in_groups(texts, threads, group)

    encode_flat = encode_flat_by_batch  # (one flat array of encode_batch's ids, as Tokenizer.encode_flat)

    def save_huggingface(self, path) -> None:
        """Write a Hugging Face tokenizer.json (see :func:`save_huggingface`: HF then gives these ids on
        text, where the two formats agree); never over the ``.model`` file it was read from."""
        from .._io import protect_inputs

        source = self.model.source
        with protect_inputs([source] if not source.startswith("<") else []):
            save_huggingface(self, path)

    def to_tiktoken(self, name=None):
        """Refused: tiktoken runs byte-level BPE over regex splits, not SentencePiece's merges over characters
        (a bare AttributeError had said nothing of why)."""
        raise ConfigError("a SentencePiece model has no tiktoken form (tiktoken runs byte-level BPE over regex "
                          "splits); keep its .model file, or save_huggingface(path) for HF tokenizers")

    save_tiktoken = to_tiktoken

    def save(self, path) -> None:
        """Refused: a SentencePiece model has no tokenmill file form (it is run as the ``.model`` says);
        ``save_huggingface`` writes a tokenizer.json, or keep the ``.model`` file itself."""
        raise ConfigError("a SentencePiece model has no tokenmill file form; keep its .model file, or save a "
                          "tokenizer.json with save_huggingface(path): every tokenmill loader reads both")

    # ----------------------------------------------------------------- decoding
    def decode_bytes(self, ids) -> bytes:
        """The decoded text's bytes, byte pieces as they are (``decode`` makes each byte that starts no
        valid UTF-8 character U+FFFD, as sentencepiece does)."""
        return self._decoded(ids, replace=False)

    def decode(self, ids, errors: str = "replace", *, skip_special_tokens: bool = False) -> str:
        """``sentencepiece``'s ``decode(ids)``: byte pieces joined and decoded, control pieces dropped,
        ``▁`` a space, the text's first ``▁`` dropped. ``errors="replace"`` (the default) is
        sentencepiece's own rule (each byte that starts no valid UTF-8 character becomes U+FFFD); any
        other handler applies to :meth:`decode_bytes`' bytes as for every tokenizer (``"strict"`` raises
        on them, ``"ignore"`` drops them: it was ignored before, U+FFFD whatever was asked).
        ``skip_special_tokens=True`` also leaves out the ids of :attr:`special_tokens` (``<unk>`` among
        them, which sentencepiece shows as `` ⁇ ``), as HF's ``decode`` does."""
        from .special import without_special_ids

        ids = without_special_ids(ids, self._special, skip_special_tokens)
        if errors != "replace":
            return self.decode_bytes(ids).decode("utf-8", check_decode_errors(errors))
        return self._decoded(ids, replace=True).decode("utf-8")

    def _decoded(self, ids, replace: bool) -> bytes:
        """``decode_reference`` of ``ids``, compiled (``sp_encoder.DecodeTables``: ids checked, then one pass; a
        Python loop of ~2.4 us an id before, sentencepiece ~0.05)."""
        from ._cpython import ids_array

        arr = ids_array(ids)
        norm = self.model.normalizer
        out, bad = self._decode_tables.decode(arr, norm.add_dummy_prefix or norm.remove_extra_whitespaces,
                                              norm.remove_extra_whitespaces, replace)
        if bad >= 0:
            raise UnknownTokenError(f"token id {int(arr[bad])} is out of range for vocab_size={self.vocab_size:,d}")
        if self.model.denormalizer is not None:
            return normalize(self.model.denormalizer, out.tobytes())
        return out.tobytes()

    @functools.cached_property
    def _decode_tables(self):
        """The compiled decode's tables (``sp_encoder.DecodeTables``): each id's surface (an unknown piece's is
        the model's, a control piece's nothing), the piece types, whether a piece starts with ``▁``."""
        from .bpe.sp_encoder import DecodeTables

        unk = self.model.unk_surface.encode("utf-8")
        types = self.model.types.astype(np.uint8)
        surfaces = [unk if t == UNKNOWN else b"" if t == CONTROL else b for b, t in zip(self._bytes, types.tolist())]
        return DecodeTables(surfaces, types, np.array([p.startswith(WS) for p in self.model.pieces], np.bool_))


# ============================================================================ as_tokenizer
def load_or_wrap(path):
    """A ``.model`` file for every stage: a :class:`SentencePieceTokenizer` for BPE models; a Unigram
    (word, char) model run through the ``sentencepiece`` package itself when it is installed (same ids,
    its speed), said once on stderr."""
    try:
        return SentencePieceTokenizer.load(path)
    except UnsupportedTokenizerError as e:
        reason = str(e).split(";")[0]
    try:
        import sentencepiece as spm
    except ImportError:
        from ..errors import MissingExtraError

        raise MissingExtraError(f"{reason}; running it needs the sentencepiece package: pip install sentencepiece") \
            from None
    from .._io import read_bytes_limited

    raw = read_bytes_limited(path, what="SentencePiece model")
    try:
        proc = spm.SentencePieceProcessor(model_proto=raw)
    except Exception as e:  # noqa: BLE001  (sentencepiece's own load errors)
        raise FormatError(f"{reason}; sentencepiece cannot load it either ({e})") from None
    import sys

    print(f"tokenmill: {reason}; running it through sentencepiece {getattr(spm, '__version__', '')} instead "
          "(same ids, slower)", file=sys.stderr, flush=True)
    return _wrap(proc, raw)


def from_processor(proc):
    """``as_tokenizer`` of a ``sentencepiece.SentencePieceProcessor``: tokenmill's own encoder for a BPE
    model, else the processor wrapped (same ids). Either gives a text's ids alone: the processor's
    ``add_bos``/``add_eos``/``reverse``/sampling options are not applied (its ``encode(text)`` with them off), said
    in a warning where the processor has them on (a store adds BOS/EOS itself: ``append_eos``, ``bos_id``)."""
    on = [name for name in ("add_bos", "add_eos", "reverse", "emit_unk_piece", "enable_sampling")
          if getattr(proc, f"_{name}", False) is True]
    if on:
        from ..errors import warn

        warn(f"the SentencePieceProcessor's {', '.join(o + '=True' for o in on)} not applied: tokenmill encodes a "
             "text's ids alone (proc.encode(text) with those off); a store adds BOS/EOS itself (append_eos, bos_id), "
             "encode_sft its template's")
    raw = bytes(proc.serialized_model_proto())
    try:
        return SentencePieceTokenizer.from_bytes(raw, source="<SentencePieceProcessor>")
    except UnsupportedTokenizerError:
        return _wrap(proc, raw)


def _wrap(proc, raw: bytes):
    """A ``ForeignTokenizer`` calling the processor (its batch encode, control pieces as specials)."""
    from .foreign import ForeignTokenizer

    n = proc.get_piece_size()
    specials = {proc.id_to_piece(i): i for i in range(n) if proc.is_control(i) or proc.is_unknown(i)}

    def enc(texts, with_specials):
        if with_specials:
            raise ConfigError("a model run through sentencepiece never reads special tokens in text; pass "
                              "disallowed_special=() to encode their text as text, or add their ids yourself")
        # the text's ids alone, as from every tokenizer (a store adds BOS/EOS itself): the processor's own options
        # (add_bos, add_eos, reverse, sampling) had reached a wrapped model's ids and not a converted BPE one's
        return proc.encode(list(texts), add_bos=False, add_eos=False, reverse=False, enable_sampling=False,
                           emit_unk_piece=False)

    def token_bytes(i):
        if proc.is_byte(i):
            return bytes([PIECE_TO_BYTE[proc.id_to_piece(i)]])
        p = proc.id_to_piece(i)
        return p.encode("utf-8") if proc.is_control(i) or proc.is_unknown(i) else p.replace(WS, " ").encode("utf-8")

    return ForeignTokenizer("sentencepiece", proc, vocab_size=n, special_tokens=specials,
                            content_hash=hashlib.sha256(b"tokenmill.sentencepiece\0" + raw).hexdigest(),
                            encode_fn=enc, decode_fn=lambda ids: proc.decode(list(ids)), token_bytes_fn=token_bytes,
                            reads_specials=False)


# ============================================================================ export
def save_huggingface(tok: SentencePieceTokenizer, path) -> None:
    """Write ``tok`` as a Hugging Face ``tokenizer.json`` in the form Llama 2's and Mistral's files have
    (``Prepend``/``Replace`` normalizers, BPE with ``byte_fallback`` over the pieces, merges ranked by
    score, control and unknown pieces as special added tokens, user-defined ones as added tokens, the
    ``Replace``/``ByteFallback``/``Fuse``/``Strip`` decoder). HF ``tokenizers`` then gives
    ``sentencepiece``'s ids on text (tested on the corpora), except where the formats differ: a
    ``▁`` is put before the text after a user-defined symbol, and two merges whose pieces have equal
    scores go by their place in the list rather than leftmost first. What the format cannot hold is
    refused with the reason: a normalizer other than the identity, removing extra whitespace,
    whitespace as suffix, unescaped whitespace, UNUSED pieces, a character of a piece that is no piece, a
    user-defined piece spelling a space (``ing▁``: sentencepiece matches it in "sing it", HF would not)."""
    import json

    from .._io import write_bytes_atomic

    m = tok.model
    norm = m.normalizer
    why = ("a character map (normalizer {!r})".format(norm.name) if not norm.identity else
           "remove_extra_whitespaces" if norm.remove_extra_whitespaces else
           "treat_whitespace_as_suffix" if m.treat_whitespace_as_suffix else
           "escape_whitespaces off" if not norm.escape_whitespaces else
           "UNUSED pieces" if (m.types == UNUSED).any() else None)
    types = m.types.tolist()
    normal = {p: i for i, (p, t) in enumerate(zip(m.pieces, types)) if t == NORMAL}
    if why is None:
        lone = sorted({c for p in normal for c in p if c not in normal})
        if lone:
            why = f"the character {lone[0]!r}, part of a piece but no piece itself"
    if why is None:
        # sentencepiece finds a user-defined piece in the normalized text (spaces already '▁': 'ing▁' matches
        # "sing it"), HF an added token in the text as given
        spaced = next((p for p, t in zip(m.pieces, types) if t == USER_DEFINED and (WS in p or " " in p)), None)
        if spaced is not None:
            why = f"the user-defined piece {spaced!r}, which spells a space (HF matches added tokens before spaces become {WS!r})"
    if why is not None:
        raise ConfigError(f"cannot write {m.source!r} as a tokenizer.json that HF tokenizers runs with "
                          f"sentencepiece's ids: it uses {why}; keep the .model file")
    user = [p for p, t in zip(m.pieces, types) if t == USER_DEFINED]
    if user:  # (the format's own difference: said, not refused, as a model with them may still be wanted there)
        from ..errors import warn

        warn(f"{m.source!r} has {len(user):,d} user-defined piece{'s' if len(user) != 1 else ''} (such as "
             f"{user[0]!r}): in the tokenizer.json written, HF tokenizers puts a {WS!r} before the text "
             "that follows one, and the dummy prefix after one that starts the text, where sentencepiece "
             "does not, so HF's ids differ from the .model's on text that holds one")
    keys = m.score_keys
    ranked = []
    for p, i in normal.items():
        for k in range(1, len(p)):
            a, b = p[:k], p[k:]
            if a in normal and b in normal:
                ranked.append((-int(keys[i]), i, normal[a], normal[b], a, b))
    ranked.sort()
    spaced = any(" " in a or " " in b for *_, a, b in ranked)
    merges = [[a, b] if spaced else f"{a} {b}" for *_, a, b in ranked]
    added = [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": t != USER_DEFINED}
             for i, (p, t) in enumerate(zip(m.pieces, types)) if t in (CONTROL, UNKNOWN, USER_DEFINED)]
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": WS}
    normalizer = ({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": WS}, replace]}
                  if norm.add_dummy_prefix else replace)
    decoders = [{"type": "Replace", "pattern": {"String": WS}, "content": " "}]
    if m.byte_fallback:
        decoders.append({"type": "ByteFallback"})
    decoders.append({"type": "Fuse"})
    if norm.add_dummy_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    unk = m.pieces[m.unk_id] if m.unk_id >= 0 else None
    body = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer,
        "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": m.byte_fallback,
                  "ignore_merges": False, "vocab": {p: i for i, p in enumerate(m.pieces) if p != "\0" or
                                                    types[i] != UNUSED},
                  "merges": merges},
    }
    write_bytes_atomic(path, json.dumps(body, ensure_ascii=False, indent=1).encode("utf-8"))
