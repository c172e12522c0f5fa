"""tiktoken rank files (``base64-token rank`` per line) and the BPE model they define.

A rank file lists each token's bytes and its rank, which is also its id; two tokens merge into a
third when their bytes joined are its bytes, the lowest rank first (tiktoken's rule). ``rank_model``
derives the pair table from the ranks; ``cached_rank_model`` keeps it on disk, keyed by the file's
SHA-256, so a 128k-token file loads in ~0.1 s the second time.
"""

from __future__ import annotations

import binascii
import hashlib
import os

import numpy as np
from msgspec import UNSET

from ..._arrays import ranks_in_groups
from ..._io import read_bytes_limited
from ..._schema import check
from ...errors import ConfigError, FormatError, TokenmillError
from ..bpe.tables import pair_arrays
from .conversion_cache import load_cached, save_cached
from .kind import reading
from .schemas import RankCacheConfig


def rank_model(ranks: dict[bytes, int]) -> tuple[list, object]:
    """(vocab, pair table) of ``token bytes -> rank``. Ranks are distinct ids, usually 0..n-1; ids no
    token holds are allowed (Mistral's tekken files put their special tokens first, at ids 0..999)."""
    if not isinstance(ranks, dict):
        raise ConfigError(f"ranks must be a dict of token bytes -> rank, not a {type(ranks).__name__}")
    bad_key = next((k for k in ranks if not isinstance(k, bytes)), None)
    if bad_key is not None:
        raise ConfigError(f"ranks holds the key {bad_key!r} (a {type(bad_key).__name__}); tokens are bytes, e.g. "
                          f"{str(bad_key).encode()!r}" if isinstance(bad_key, str) else
                          f"ranks holds the key {bad_key!r} (a {type(bad_key).__name__}); tokens are bytes")
    values = list(ranks.values())
    if not all(type(r) is int for r in values):  # noqa: E721 (bool and other int subclasses are refused)
        bad = next((b, r) for b, r in ranks.items() if type(r) is not int)  # noqa: E721 (exact type, as above)
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
    return vocab, rank_pairs(vocab, ranks)


# Rank files whose model's split pattern is known, by the SHA-256 of the file (OpenAI's as tiktoken checks
# them; the others as their PyPI packages ship them): loaded with no pattern given, they take it. A rank file
# holds no pattern, and GPT-2's taken for any other had given cl100k and o200k ids that differ from tiktoken's.
_R50K = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
_P50K = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_CL100K = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_O200K = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
KNOWN_RANK_FILES = {
    _R50K: "gpt2",  # GPT-2 (r50k_base)
    _P50K: "gpt2",  # p50k_base
    _CL100K: "cl100k",  # cl100k_base
    _O200K: "o200k",  # o200k_base
    "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55": "llama3",  # Llama 3's tokenizer.model
    "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186": "qwen2",  # Qwen's qwen.tiktoken
    "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd": "qwen3.5",  # Qwen 3.5/3.6's
}


def rank_file_pattern(path, digest: str) -> str:
    """The split pattern preset of the rank file ``path`` (the SHA-256 of its bytes ``digest``) where tokenmill
    knows it (:data:`KNOWN_RANK_FILES`), else a ConfigError asking for it (with a guess from the file's name)."""
    preset = KNOWN_RANK_FILES.get(digest)
    if preset is not None:
        return preset
    name = os.path.basename(os.fspath(path)).lower()
    guess = next((preset for key, preset in (("gpt2", "gpt2"), ("r50k", "gpt2"), ("p50k", "gpt2"),
                                             ("cl100k", "cl100k"), ("o200k", "o200k"), ("qwen", "qwen2"))
                  if key in name), "llama3")
    raise ConfigError(f"{os.fspath(path)} is a rank file, which holds no split pattern, and not one whose model "
                      f"tokenmill knows; give its split pattern, e.g. pattern={guess!r} (a preset: 'gpt2', 'cl100k', "
                      f"'o200k', 'llama3', 'qwen2', ... or a regex; CLI: --pattern {guess})")


# The special tokens of OpenAI's encodings, as tiktoken's registry (``tiktoken_ext.openai_public``) gives them
# to ``tiktoken.get_encoding``, by the SHA-256 of the rank file. The other known files are left without: one
# rank file serves models whose special tokens differ (Llama 3 and 3.1 name ids 128004-128010 apart).
_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
KNOWN_SPECIAL_TOKENS = {
    _R50K: {_ENDOFTEXT: 50256},  # r50k_base
    _P50K: {_ENDOFTEXT: 50256},  # p50k_base
    _CL100K: {  # cl100k_base
        _ENDOFTEXT: 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259, "<|fim_suffix|>": 100260,
        _ENDOFPROMPT: 100276},
    _O200K: {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
}


def load_rank_file(path, pattern=None, special_tokens=None) -> tuple[list, object, object, object]:
    """(vocab, pair table, split pattern, special tokens) of a ``.tiktoken`` file, through the cache of
    parsed files. The pattern is ``pattern``, or where None the model's (:func:`rank_file_pattern`, asked
    once the file's ranks are read: a damaged file is said first), ``"none"`` for no split (the whole text one
    chunk, as a tokenizer trained with ``pattern=None``); the special tokens ``special_tokens``,
    or where None the model's for OpenAI's files (:data:`KNOWN_SPECIAL_TOKENS`), else None (none)."""
    raw = read_bytes_limited(path, what="tiktoken rank")
    parse = lambda: parse_tiktoken(raw, os.fspath(path))
    try:
        vocab, pairs, _ = cached_rank_model(raw, "ranks", lambda: (reading(os.fspath(path), raw, "tiktoken", parse),
                                                                   {}))
    except FormatError as e:  # (the checks of the ranks as a whole: the file named as its lines' errors name it)
        if str(e).startswith(os.fspath(path)):
            raise
        raise FormatError(f"{os.fspath(path)}: {e}") from None
    digest = hashlib.sha256(raw).hexdigest()
    if pattern is None:
        pattern = rank_file_pattern(path, digest)
    elif isinstance(pattern, str) and pattern.lower() == "none":  # no split (a tokenizer trained with pattern=None)
        pattern = None
    if special_tokens is None:
        known = KNOWN_SPECIAL_TOKENS.get(digest)
        special_tokens = dict(known) if known is not None else None
    return vocab, pairs, pattern, special_tokens


def cached_rank_model(raw: bytes, kind: str, parse) -> tuple[list, object, dict]:
    """(vocab, pair table, config) of a rank file's bytes ``raw``, through an on-disk cache keyed by
    ``kind`` and the bytes' SHA-256 (validated on read; a damaged entry is rebuilt). ``parse()`` gives
    (ranks, config): the file's own ``pattern`` and ``specials``, if it has them, which the cache keeps."""
    key = f"{kind}-" + hashlib.sha256(raw).hexdigest()[:32]
    cached = load_cached(key)
    if cached is not None:
        vocab, arr, config = cached
        try:
            conf = check(config, RankCacheConfig, what="cached rank file")
            if pairs_consistent(vocab, arr):
                config = {k: v for k, v in (("pattern", conf.pattern), ("specials", conf.specials)) if v is not UNSET}
                return vocab, (arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy()), config
        except TokenmillError:
            pass  # a damaged cache entry: parse the file again
    ranks, config = parse()
    vocab, pairs = rank_model(ranks)
    save_cached(key, vocab, np.stack(pair_arrays(pairs), axis=1), config)
    return vocab, pairs, config


_RANK_HASH_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64


def rank_pairs(vocab: list, ranks: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """tiktoken's merges as (lefts, rights, priorities): every (l, r) whose bytes joined are a token m,
    with priority m (its rank). Each token's split points are looked up by a polynomial hash of the
    prefix and of the suffix (numpy, ~20x a Python loop over 700k split points for a 128k vocabulary),
    then every pair found is checked byte for byte; on any hash collision it falls back to the loop."""
    ids = np.fromiter((i for i, b in enumerate(vocab) if b is not None), np.int64)
    toks = [vocab[i] for i in ids.tolist()]
    lens = np.fromiter(map(len, toks), np.int64, len(toks))
    if lens.size == 0:
        raise FormatError("the rank file holds no tokens (a byte-level BPE needs at least the 256 byte tokens)")
    if lens.min() == 0:
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
        return rank_pairs_loop(vocab, ranks)

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
        return rank_pairs_loop(vocab, ranks)
    return ids[li], ids[ri], ids[mi]


def rank_pairs_loop(vocab: list, ranks: dict[bytes, int]) -> dict[tuple[int, int], int]:
    """``rank_pairs`` as a plain loop (its twin in the tests, and its fallback)."""
    table: dict[tuple[int, int], int] = {}
    for m, tb in enumerate(vocab):
        for k in range(1, 0 if tb is None else len(tb)):
            left, right = ranks.get(tb[:k]), ranks.get(tb[k:])
            if left is not None and right is not None:
                table[(left, right)] = m
    return table


def pairs_consistent(vocab: list, arr: np.ndarray) -> bool:
    """A cached pair table fits its vocabulary: ids in range, each merged token as long as its parts
    (the kernels index by these ids; a damaged cache file is rebuilt instead of trusted)."""
    n = len(vocab)
    if arr.ndim != 2 or arr.shape[1] != 3 or (arr.size and (arr.min() < 0 or arr.max() >= n)):
        return False
    lens = np.fromiter((-1 if b is None else len(b) for b in vocab), np.int64, n)
    sub = lens[arr]
    return bool(((sub >= 1).all() and (sub[:, 0] + sub[:, 1] == sub[:, 2]).all()))


def read_tiktoken(path) -> dict[bytes, int]:
    return parse_tiktoken(read_bytes_limited(path, what="tiktoken rank"), path)


def parse_tiktoken(raw: bytes, path) -> dict[bytes, int]:
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

