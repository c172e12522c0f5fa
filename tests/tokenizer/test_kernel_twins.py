"""Kernels with a readable Python twin, tested equal directly (not only through the encoder):
the hashing helpers, the code point offsets of the custom-pattern splitter, the encoder's pair and
byte-pair tables and its pinned-token cache; and the naive ``encode_naive`` as the encoder's oracle."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill.tokenizer.bpe import _encode_kernels as EK
from tokenmill.tokenizer.bpe import _hashing as H
from tokenmill.tokenizer.bpe import reference
from tokenmill.tokenizer.pretokenize import _pretok_kernels as PK

M64 = (1 << 64) - 1
BIG = int(EK._BIG)


# The bounds-checked run (`make test-boundscheck`, NUMBA_BOUNDSCHECK=1) is for the kernels tokenmill runs. There
# the splitters' compiled twins (a machine alone, a matcher) are not compiled (2 minutes of CI's CPU for code
# no user runs): the splitter tests run the splitters on every text they draw and check what needs no twin (the
# offsets against ``regex``'s chunks, or that they are whole); `make test` compares them with their twins.
TWINS = os.environ.get("NUMBA_BOUNDSCHECK", "0") != "1"


def _whole(offsets, docs, bad, n: int) -> bool:
    """Split offsets that cover ``n`` bytes in order, every document boundary among them."""
    got = offsets.tolist()
    return got[0] == 0 and got[-1] == n and got == sorted(got) and set(docs.tolist()) <= set(got) and bad < n


def _stale(n: int) -> np.ndarray:
    """A split kernel's output buffer for ``n`` bytes, a few slots larger than it needs and full of stale
    values (as the encoder's, reused from call to call): the offsets must not depend on what it held."""
    return np.full(n + 5, -7, np.int64)


def mix64_py(x: int) -> int:
    x &= M64
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & M64
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & M64
    return x ^ (x >> 33)


def fnv1a_py(data: bytes) -> int:
    """FNV-1a, then murmur3's finalizer (the kernels index tables by the low bits)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return mix64_py(h)


def words_hash_py(data: bytes) -> int:
    """8 bytes at a time (little-endian words, the last one zero-extended), the length seeding the state,
    then murmur3's finalizer: the twin of ``words_hash``."""
    h = (len(data) * 0x9E3779B97F4A7C15) & M64
    for i in range(0, max(len(data), 1), 8):
        h = ((h ^ int.from_bytes(data[i : i + 8], "little")) * 0x9E3779B97F4A7C15) & M64
    return mix64_py(h)


def probe_table_py(keys_hashes: list[int], size: int) -> list[int]:
    """Linear probing, entries inserted in order: the twin of ``reindex``."""
    table = [-1] * size
    for e, h in enumerate(keys_hashes):
        i = h & (size - 1)
        while table[i] != -1:
            i = (i + 1) & (size - 1)
        table[i] = e
    return table


@given(st.lists(st.integers(0, M64), min_size=1, max_size=50))
@settings(deadline=None)
def test_mix64_equals_murmur3_finalizer(keys):
    for k in keys:
        assert int(H.mix64(np.uint64(k))) == mix64_py(k)


@given(st.binary(max_size=64), st.data())
@settings(deadline=None)
def test_fnv1a_equals_twin_on_any_range(data, d):
    a = d.draw(st.integers(0, len(data)))
    b = d.draw(st.integers(a, len(data)))
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    assert int(H.fnv1a(buf, a, b)) == fnv1a_py(data[a:b])


@given(st.binary(max_size=64), st.data())
@settings(deadline=None)
def test_words_hash_equals_twin_on_any_range(data, d):
    """Read in words, the last one ending at the range's end: no byte outside the range counts (the same
    bytes anywhere hash the same)."""
    a = d.draw(st.integers(0, len(data)))
    b = d.draw(st.integers(a, len(data)))
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    assert int(H.words_hash(buf, a, b)) == words_hash_py(data[a:b])


@given(st.binary(min_size=1, max_size=40), st.data())
@settings(deadline=None)
def test_same_bytes_compares_the_ranges_exactly(data, d):
    n = d.draw(st.integers(0, len(data)))
    i, j = d.draw(st.integers(0, len(data) - n)), d.draw(st.integers(0, len(data) - n))
    other = bytearray(data)
    if n and d.draw(st.booleans()):
        other[j + d.draw(st.integers(0, n - 1))] ^= 1 << d.draw(st.integers(0, 7))
    x, y = np.frombuffer(data, np.uint8), np.frombuffer(bytes(other), np.uint8)
    assert bool(EK._same_bytes(x, i, y, j, n)) == (data[i : i + n] == bytes(other[j : j + n]))


@given(st.lists(st.integers(0, M64), max_size=40), st.integers(6, 8))
@settings(deadline=None)
def test_reindex_equals_linear_probing_twin(hashes, log_size):
    size = 1 << log_size
    table = np.zeros(size, np.int64)
    H.reindex(table, np.array(hashes, np.uint64), len(hashes))
    assert table.tolist() == probe_table_py(hashes, size)


@given(st.text(max_size=40), st.data())
@settings(deadline=None)
def test_char_offsets_count_code_points(text, d):
    data = text.encode("utf-8")
    starts = sorted({len(text[:i].encode("utf-8")) for i in range(len(text) + 1)})
    offs = sorted(d.draw(st.lists(st.sampled_from(starts), max_size=10)))
    got = PK.char_offsets(np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8), np.array(offs, np.int64))
    assert got.tolist() == [len(data[:o].decode("utf-8")) for o in offs]


def _pairs(draw_pairs):
    seen, out = set(), []
    for p in draw_pairs:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _table(lefts, rights, prio, res=None):
    table = EK.build_pair_table(np.array(lefts, np.int64), np.array(rights, np.int64), np.array(prio, np.int64),
                                np.zeros(0, np.int64) if res is None else np.array(res, np.int64))
    return table, EK.build_pair_filter(table)


@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), max_size=60), st.booleans())
@settings(deadline=None)
def test_pair_table_lookups_equal_a_dict(raw, imported):
    """Rank files: priority = merged id; imported merge lists: priority = index, id = res[index]."""
    pairs = _pairs(raw)
    prio = list(range(len(pairs))) if imported else [256 + k for k in range(len(pairs))]
    res = [5000 + 3 * k for k in range(len(pairs))] if imported else None
    made = {p: (q, res[q] if imported else q) for p, q in zip(pairs, prio)}
    table, filt = _table([p[0] for p in pairs], [p[1] for p in pairs], prio, res)
    # the twin: linear probing from the Fibonacci hash's high half, one (key, prio << 32 | id) row per slot
    size = table.shape[0]
    assert size & (size - 1) == 0 and 2 * size >= 3 * len(pairs) + 2
    flat = EK._flat_pairs(table, filt)
    for (l, r), (q, i) in made.items():
        assert int(EK._rank_at(*flat, l, r)) == (q << 32) | i
    for l, r in [(1, 2), (3000, 3000), (0, 0), (2999, 1)]:
        if (l, r) not in made:
            assert int(EK._rank_at(*flat, l, r)) == BIG
    rows = {int(k): int(v) for k, v in table if k != -1}
    assert rows == {(l << 32) | r: (q << 32) | i for (l, r), (q, i) in made.items()}
    # the filter holds every key (no false negatives), two bits in one word from the hash's high half
    for l, r in made:
        h = (((l << 32) | r) * 0x9E3779B97F4A7C15) & M64
        w = int(filt[(h >> 32) & (filt.size - 1)])
        assert (w >> (h >> 58)) & (w >> ((h >> 52) & 63)) & 1


@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), max_size=40), st.permutations(list(range(256))))
@settings(max_examples=20, deadline=None)
def test_byte_pairs_table_equals_twin(raw, perm):
    """Byte tokens may sit anywhere in the id space (imported tokenizer.json): a permutation of ids."""
    byte_ids = np.array(perm, np.int64)
    pairs = _pairs([(int(byte_ids[a]), int(byte_ids[b])) for a, b in raw])
    table, filt = _table([p[0] for p in pairs], [p[1] for p in pairs], list(range(300, 300 + len(pairs))))
    out = EK.build_byte_pairs(byte_ids, table, filt)
    want = np.full(65536, BIG, np.int64)
    for k, (l, r) in enumerate(pairs):
        x, y = perm.index(l), perm.index(r)
        want[(x << 8) | y] = ((300 + k) << 32) | (300 + k)
    assert np.array_equal(out, want)


@given(st.lists(st.binary(min_size=1, max_size=12), min_size=1, max_size=30, unique=True))
@settings(deadline=None)
def test_pin_tokens_hashes_and_table(tokens):
    lens = np.array([len(t) for t in tokens], np.int64)
    c_bytes = np.frombuffer(b"".join(tokens), np.uint8).copy()
    c_start = np.cumsum(lens) - lens
    ctab = np.zeros(128, np.int64)
    c_hash = np.zeros(len(tokens), np.uint64)
    EK.pin_tokens(c_bytes, c_start, lens, ctab, c_hash)
    want = [words_hash_py(t) for t in tokens]
    assert c_hash.tolist() == want
    # slots hold tag << 32 | entry, the tag being bits 32-62 of the entry's hash
    tagged = [-1 if e == -1 else (((want[e] >> 32) & 0x7FFFFFFF) << 32) | e for e in probe_table_py(want, 128)]
    assert ctab.tolist() == tagged


_CORPUS = ["the quick brown fox jumps over the lazy dog. " * 3, "滑动窗口，滑动窗口。窗口大小 512。", "def f(x):\n    return x ** 2\n",
           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]


def _trained():
    import tokenmill

    return tokenmill.train_bpe(_CORPUS * 4, 330, pattern="gpt4")


@given(st.text(max_size=200))
@settings(max_examples=60, deadline=None)
def test_compiled_encoder_equals_encode_naive(text):
    """The naive rank-order rule (always merge the lowest-ranked adjacent pair), chunk by chunk."""
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    want = [i for chunk in split_with_gaps(resolve_pattern(tok.pattern), text)
            for i in reference.encode_naive(chunk.encode("utf-8"), ranks)]
    assert tok.encode_ordinary(text) == want


_TOK: list = []

# chunks of 8 to 15 bytes that are several tokens (the small-chunk table's two-word keys), some at the very
# end of the text (fewer than 16 bytes left: no wide load), and shorter ones
_WIDE = ["quickbrown", "jumpsoverthe", "lazydogfox", "ninebytes", "fifteenbytes123", "xxxxxxxx", "滑动窗口", "return",
         "x", "ab", "fox.", "\n", "aaaaaaaaaaaaaa"]


@given(st.lists(st.sampled_from(_WIDE), min_size=1, max_size=30).map(" ".join))
@settings(max_examples=40, deadline=None)
def test_repeated_chunks_from_the_small_chunk_table_keep_their_ids(text):
    """A chunk seen before comes from the per-thread small-chunk table (1-7 bytes: one key word; 8-15
    bytes: two): the ids of the first sighting, and of the naive rule, every time."""
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    want = [i for chunk in split_with_gaps(resolve_pattern(tok.pattern), text)
            for i in reference.encode_naive(chunk.encode("utf-8"), ranks)]
    enc = tok._compiled()
    for _ in range(3):  # the second and third times from the table
        assert enc.encode(text).tolist() == want


def test_has_lead3_finds_exactly_the_lead_bytes_of_3_byte_characters_at_every_position():
    """``_has_lead3`` (whether a 64-bit word holds a byte E0-EF) against a byte loop, for every byte value at
    every position among bytes that are not leads (and among ones that are)."""
    from numba import njit

    f = njit(lambda w: EK._has_lead3(w))
    for fill in (0x00, 0x41, 0xDF, 0xF0, 0xFF, 0x0F, 0xE5):
        for pos in range(8):
            for v in range(256):
                word = bytearray([fill] * 8)
                word[pos] = v
                want = any(0xE0 <= x <= 0xEF for x in word)
                assert f(np.uint64(int.from_bytes(word, "little"))) == want, (fill, pos, v)


def _small_key(chunk: str) -> tuple[int, int]:
    """The small-chunk table's two key words of a chunk, as ``encode_chunks`` packs them."""
    c = chunk.encode()
    if len(c) <= 7:
        return int.from_bytes(c, "little") | len(c) << 56, 0
    return int.from_bytes(c[:8], "little"), int.from_bytes(c[8:], "little") | len(c) << 56


def test_chunks_sharing_a_small_table_bucket_keep_their_ids():
    """More chunks than a bucket of the small-chunk table holds (1-7 bytes of 4-7 tokens each, which the
    word table sends there, and 8-15 bytes of several), seen in turn, on a table of one bucket: a miss puts the chunk first, the rows move down one and the
    last leaves. Every sighting keeps the naive rule's ids, and the bucket ends as its twin does."""
    import random

    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    ways = int(EK._WAYS)
    pieces = sorted(b.decode() for b in tok._vocab[256:] if b and b.isalpha() and b.islower() and 2 <= len(b) <= 4)
    rng = random.Random(5)
    short: list[str] = []
    wide: list[str] = []
    while len(short) < ways or len(wide) < ways:
        word = " " + "".join(rng.choice(pieces) for _ in range(rng.choice((2, 3, 4))))
        if len(short) < ways and rng.random() < 0.5:  # 1-7 bytes of more ids than the word table holds
            word = " " + "".join(rng.choice("qzxjvkwy") for _ in range(rng.choice((4, 5, 6))))
        group = short if len(word) <= 7 else wide if len(word) <= 15 else None
        fewest = 3 if group is short else 1
        got = len(reference.encode_naive(word.encode(), ranks))
        # at most the 7 ids a row holds, and a merge among them (a chunk BPE leaves as its bytes is written
        # from its key instead: test_chunks_bpe_leaves_as_bytes)
        if group is not None and len(group) < ways and word not in group and fewest < got <= 7 and got < len(word):
            group.append(word)
    # and a chunk of 8-15 bytes of more ids than a row holds: its row only points to the byte-keyed cache
    many = " *!@#$%^&~()_+"  # (" *" merges)
    assert len(many) > len(reference.encode_naive(many.encode(), ranks)) > 7
    words = short + wide + [many]
    order = [words[i % len(words)] for i in (0, 4, 8, 1, 5, 2, 6, 8, 3, 7, 7, 0, 0, 5, 1, 8, 6, 2, 3, 4)]
    text = "".join(order) + "\n" * 16  # 16 bytes after the last word: it is keyed by two wide loads too
    chunks = split_with_gaps(resolve_pattern(tok.pattern), text)
    assert chunks[: len(order)] == order
    want = [i for chunk in chunks for i in reference.encode_naive(chunk.encode("utf-8"), ranks)]
    enc = tok._compiled()
    state = list(enc._state())
    state[9] = np.zeros((ways, 2), np.uint64)  # one bucket: every chunk lands in it
    state[10] = np.zeros((ways, 8), np.int32)
    enc._local.state = tuple(state)
    entries = []
    for _ in range(3):
        assert enc.encode(text).tolist() == want
        entries.append(int(enc._local.state[8][0]))  # the byte-keyed cache's entry count
    # the many-id chunk entered it on its first sighting and once only (the 16 newlines on their second)
    assert entries[1] == entries[0] + 1 == entries[2]
    held: list[str] = []  # the bucket's twin
    for w in order * 3:
        if w not in held:
            held = [w, *held][:ways]
    skeys = enc._local.state[9]
    for j, w in enumerate(held):
        assert (int(skeys[j, 0]), int(skeys[j, 1])) == _small_key(w)
        if w == many:
            assert int(enc._local.state[10][j, 0]) == int(EK._IN_CTAB)
    # the byte-keyed cache reset to its pinned part (as when it fills): the row points to nothing there,
    # so the chunk is merged again and put back in that cache, its row kept (no second row for it)
    alone = many + " " + "a" * 20  # then a chunk of 21 bytes (a punctuation run would take newlines)
    want_alone = [i for c in split_with_gaps(resolve_pattern(tok.pattern), alone)
                  for i in reference.encode_naive(c.encode("utf-8"), ranks)]
    assert enc.encode(alone).tolist() == want_alone  # its row first in the bucket now
    st = enc._local.state
    EK._reset(st[0], st[3], st[8])
    sizes = []
    for _ in range(3):
        assert enc.encode(alone).tolist() == want_alone
        sizes.append(int(enc._local.state[8][0]))
    rows = [(int(a), int(b)) for a, b in enc._local.state[9]]
    assert rows.count(_small_key(many)) == 1  # merged and cached again, its row kept: no second row
    assert sizes[0] == sizes[1] == sizes[2]  # cached again on that first sighting, and only then
    enc._local.state = None


# ---- wide loads and the vocabulary tables -----------------------------------------------------------
@functools.cache
def _load_u64():
    """The wide load, callable from Python (compiled once, not once per example)."""
    from numba import njit

    from tokenmill.tokenizer._wide import load_u64

    return njit(lambda b, i: load_u64(b, i))


@given(st.binary(min_size=8, max_size=40), st.data())
@settings(deadline=None)
def test_load_u64_equals_int_from_bytes(data, d):
    at = d.draw(st.integers(0, len(data) - 8))
    buf = np.frombuffer(data, np.uint8)
    assert int(_load_u64()(buf, at)) == int.from_bytes(data[at : at + 8], "little")
    # the kernel's key of a chunk of 2-7 bytes: its bytes little-endian, its length in the top byte
    n = d.draw(st.integers(2, 7))
    key = (int.from_bytes(data[at : at + 8], "little") & ((1 << 8 * n) - 1)) | n << 56
    assert key == int.from_bytes(data[at : at + n], "little") | n << 56


def test_runs_of_nul_bytes_and_a_token_of_8_of_them_equal_tiktoken(gpt2_ranks_path):
    """Chunks of 7, 8, 9 and 16 NUL bytes (keys of zero bytes: a one-word table row of key 0 is an empty one),
    with and without a vocabulary token of 8 NULs (tiktoken's rule: a chunk that is a token is that token), seen
    once and again, inside the hot loop and in the text's last 16 bytes: tiktoken's ids."""
    tiktoken = pytest.importorskip("tiktoken")
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.formats.tiktoken import read_tiktoken

    ranks = read_tiktoken(gpt2_ranks_path)
    texts = ["a" + "\0" * n + " b" for n in (7, 8, 9, 16)] + ["x" * 40 + "\0" * 8 + " y" * 20, "z" + "\0" * 8]
    for extra in ({}, {b"\0" * 8: len(ranks)}):
        r = dict(ranks) | extra
        ours = Tokenizer.from_ranks(r, pattern="gpt2", special_tokens={})
        ref = tiktoken.Encoding("t", pat_str=ours.pattern, mergeable_ranks=r, special_tokens={})
        for _ in range(3):
            assert ours.encode_batch(texts) == ref.encode_ordinary_batch(texts), extra
            assert [ours.encode(t) for t in texts] == [ref.encode_ordinary(t) for t in texts]
        if extra:
            assert len(ranks) in ours.encode("a" + "\0" * 8 + " b")


@functools.cache
def _raw_ops():
    """``raw`` pointers read and written, and the wide load through one, callable from Python."""
    from numba import njit

    from tokenmill.tokenizer._wide import load_u64, raw

    @njit
    def ops(data, at, words, i, v):
        p = raw(words)
        old = p[i]
        p[i] = v
        return load_u64(raw(data), at), old, p[i]

    return ops


@given(st.binary(min_size=8, max_size=40), st.lists(st.integers(0, M64), min_size=1, max_size=8), st.data())
@settings(deadline=None)
def test_raw_pointer_reads_and_writes_the_array(data, words, d):
    """``raw(arr)[i]`` is ``arr[i]`` (read and write) and ``load_u64`` reads the same through a pointer as
    through the array; under ``NUMBA_BOUNDSCHECK=1`` ``raw`` hands back the array itself, bounds checked."""
    at = d.draw(st.integers(0, len(data) - 8))
    i = d.draw(st.integers(0, len(words) - 1))
    w = np.array(words, np.uint64)
    before = int(w[i])
    got, old, new = _raw_ops()(np.frombuffer(data, np.uint8), at, w, i, np.uint64(12345))
    assert int(got) == int.from_bytes(data[at : at + 8], "little")
    assert (int(old), int(new), int(w[i])) == (before, 12345, 12345)


def test_hot_loop_stops_exactly_at_the_chunks_the_tables_do_not_hold():
    """``_hot`` (the loop for chunks seen before) writes the ids of the chunks the word tables (the seeds and
    the thread's merged tables, 1-7 and 8-15 bytes), the small-chunk table or the long table (16-31 bytes)
    hold, and stops at the first one they do not:
    what it wrote plus, for each chunk it stopped at, that chunk's own ids, is the whole encoding; it
    stops at no chunk of one token."""
    from numba import njit

    from tokenmill.tokenizer._wide import raw
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    @njit
    def hot(data, offs, k, end, out, nout, vt, imask, vt2, mt, mt2, sk, si, byte_ids, lt):
        return EK._hot(raw(data), raw(offs), k, end, end, raw(out), nout, raw(vt), np.uint64(vt.size // 2 - 1),
                       imask, raw(vt2), np.uint64(vt2.size // 4 - 1), raw(mt), np.uint64(mt.size // 2 - 1), raw(mt2),
                       np.uint64(mt2.size // 4 - 1), raw(sk.reshape(-1)), raw(si.reshape(-1)),
                       np.uint64(sk.shape[0] - 1) & ~np.uint64(EK._WAYS - 1), raw(byte_ids), raw(lt),
                       np.uint64(lt.size // 8 - 1), offs[offs.size - 1] - 32)

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    # a chunk of 20 bytes, one of 40 (too long for the long table), then enough text for the long
    # table's 32-byte reads
    text = (" ".join(_WIDE * 3) + " the quick brown fox " + "y" * 20 + " and " + "x" * 40
            + " tail end of the text here, and some more words to read")
    chunks = split_with_gaps(resolve_pattern(tok.pattern), text)
    data = np.frombuffer(text.encode(), np.uint8)
    offs = np.cumsum([0] + [len(c.encode()) for c in chunks]).astype(np.int64)
    enc._local.state = None
    # the chunks of several ids are in the merged tables or the small-chunk table now; the one of 20 bytes,
    # found in the byte-keyed cache on its third sighting, in the long table
    for _ in range(3):
        enc.encode(text)
    sk, si, mt, mt2, lt = (enc._state()[i] for i in (9, 10, 12, 13, 14))
    end = int(np.searchsorted(offs, data.size - 16, side="right"))  # chunks starting 16+ bytes before the end
    out = np.zeros(data.size, np.int64)
    k, nout, stops = 0, 0, []
    while True:
        k, nout = hot(data, offs, k, end, out, nout, enc.vtab, enc.imask, enc.vtab2, mt, mt2, sk, si, enc.byte_ids, lt)
        if k >= end:
            break
        ids = tok.encode_ordinary_python(chunks[k])
        assert len(ids) > 1 or len(chunks[k].encode()) > 15, chunks[k]  # a token is in the vocabulary tables
        stops.append(k)
        out[nout : nout + len(ids)] = ids
        nout += len(ids)
        k += 1
    assert out[:nout].tolist() == tok.encode_ordinary_python("".join(chunks[:end]))
    assert [chunks[s] for s in stops if len(chunks[s].encode()) > 15] == [" " + "x" * 40]  # too long for the tables
    assert " " + "y" * 20 in chunks[:end] and len(tok.encode_ordinary_python(" " + "y" * 20)) > 1  # (long table)
    enc._local.state = None


_LONG_PIECES = [" " * 16, " " * 23, " " * 31, "\n" + " " * 20, "a" * 17, "x" * 31, " " + "ab" * 11, "_" * 24,
                "滑动窗口滑动", " 滑动窗口滑动窗口", "\U0001f600" * 5, " superlongidentifiername", " internationalization",
                "0123456789" * 2, "!" * 18, " 🙂" * 4, "x" * 32, "é" * 9, " " * 40, "return"]


@pytest.mark.parametrize("rows", [8, 1 << 13])  # 8: the long table emptied every 4 chunks
@settings(deadline=None, max_examples=15)
@given(st.lists(st.sampled_from(_LONG_PIECES), min_size=1, max_size=30).map(" ".join))
def test_chunks_of_16_to_31_bytes_seen_again_give_their_ids(gpt2_ranks_path, rows, text):
    """The long table (chunks of 16-31 bytes, found in the byte-keyed cache and so kept for ``_hot``): text
    whose long chunks (indentation, identifiers, runs of one byte, 3- and 4-byte characters, each byte its
    own id, more ids than a row holds) are seen over and over encodes to the reference's ids every time,
    with the table emptied as it fills, near the end of the text too."""
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.bpe import encoder as E

    toks = (Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2"), _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(E, "_LONG_ROWS", rows)
        for tok in toks:
            enc = tok._compiled()
            enc._local.state = None
            assert enc._state()[14].size == 8 * rows
            want = tok.encode_ordinary_python(text)
            for _ in range(4):  # first sighting, admitted, found (into the long table), found there
                assert enc.encode(text).tolist() == want
            assert enc.encode_many([text, text + " tail", text])[0].tolist() == want + tok.encode_ordinary_python(
                text + " tail") + want
            enc._local.state = None


@pytest.mark.parametrize("n", [49, 64, 65, 4_096, 4_097, 300_000])
def test_long_chunks_merge_as_the_reference(gpt2_ranks_path, n):
    """Chunks over 48 ids take the heap loop (``_bpe_long``): one unique run of letters, of digits and of Han
    characters of ``n`` bytes each (GPT-2's split: one chunk; up to 300,000 ids) gets the ids of the
    readable twin. (Sizes at the edges of a 64-wide tree of minima, tried in its place at stop 54.)"""
    import random

    from tokenmill import Tokenizer

    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2")
    enc = tok._compiled()  # the kernels themselves (never the twin a first run may take)
    rng = random.Random(n)
    for alphabet in ("abcdefghij", "0123456789", "滑动窗口大小"):
        text = "".join(rng.choice(alphabet) for _ in range(n // len(alphabet[0].encode())))
        assert enc.encode(text).tolist() == tok.encode_ordinary_python(text), (alphabet, n)


def test_empty_chunks_of_a_custom_splitter_are_dropped_before_the_kernel(monkeypatch):
    """A splitter that is not a compiled preset may cut empty chunks (offsets repeat): they carry no ids,
    and an empty chunk's key (0) is the vocabulary tables' empty-slot key, so they are dropped at the
    boundary and the kernel sees only the others; the ids are those of the text."""
    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    text = "the quick brown fox jumps over the lazy dog"
    data = text.encode()
    offs = enc.offsets(data, text)
    empty = np.insert(offs, [0, 1, 1, 3, offs.size], [0, offs[1], offs[1], offs[3], offs[-1]])
    monkeypatch.setattr(enc, "preset", False)  # as a custom pattern's offsets are: checked
    got = enc._checked(empty, len(data))
    assert got.tolist() == offs.tolist()
    none = np.zeros(0, np.int64)
    out = enc._run(data, got, none, none)
    n = out.size
    assert out[:n].tolist() == tok.encode_ordinary_python(text)


def vocab_lookup_py(vt, key) -> int | None:
    """Linear probing from the slot of the key's Fibonacci hash (bits 32 and up), [key, value] pairs; a
    seed's value is one id: count 1 in the low 2 bits, the id above."""
    cap = vt.size // 2
    i = ((key * 0x9E3779B97F4A7C15) & M64) >> 32 & (cap - 1)
    while int(vt[2 * i]) != 0:
        if int(vt[2 * i]) == key:
            v = int(vt[2 * i + 1])
            assert v & 3 == 1
            return v >> 2
        i = (i + 1) % cap
    return None


@given(st.dictionaries(st.binary(min_size=2, max_size=7), st.integers(0, 2**31 - 1), max_size=60),
       st.lists(st.binary(min_size=2, max_size=7), max_size=20))
@settings(deadline=None)
def test_vocab_table_equals_a_dict(tokens, others):
    key = lambda b: int.from_bytes(b, "little") | len(b) << 56
    keys = np.array([key(b) for b in tokens], np.uint64)
    vt = EK.build_vocab_table(keys, np.array(list(tokens.values()), np.int64))
    cap = vt.size // 2
    assert cap & (cap - 1) == 0 and 4 * len(tokens) <= cap  # the seed fills a quarter at most
    for b in list(tokens) + others:
        assert vocab_lookup_py(vt, key(b)) == tokens.get(b)


def vocab_lookup2_py(vt2, k0: int, k1: int) -> int | None:
    """Linear probing from the row of the two-word hash (bits 32 and up), rows [k0, k1, value, 0]."""
    cap = vt2.size // 4
    h = ((k0 * 0x9E3779B97F4A7C15) ^ (k1 * 0xC2B2AE3D27D4EB4F)) & M64
    i = h >> 32 & (cap - 1)
    while int(vt2[4 * i + 1]) != 0:
        if (int(vt2[4 * i]), int(vt2[4 * i + 1])) == (k0, k1):
            v = int(vt2[4 * i + 2])
            assert v & 3 == 1
            return v >> 2
        i = (i + 1) % cap
    return None


@given(st.dictionaries(st.binary(min_size=8, max_size=15), st.integers(0, 2**31 - 1), max_size=60),
       st.lists(st.binary(min_size=8, max_size=15), max_size=20))
@settings(deadline=None)
def test_wide_vocab_table_equals_a_dict(tokens, others):
    words = lambda b: (int.from_bytes(b[:8], "little"), int.from_bytes(b[8:], "little") | len(b) << 56)
    vt2 = EK.build_vocab_table2(np.array([words(b)[0] for b in tokens], np.uint64),
                                np.array([words(b)[1] for b in tokens], np.uint64), np.array(list(tokens.values()), np.int64))
    cap = vt2.size // 4
    assert cap & (cap - 1) == 0 and 4 * len(tokens) <= cap
    for b in list(tokens) + others:
        assert vocab_lookup2_py(vt2, *words(b)) == tokens.get(b)


_PIECES = sorted({w for doc in _CORPUS for w in doc.replace("(", " ").split()} | {" ", "  ", "\n", "x", "é", "窗"})


@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=3), max_size=60).map(" ".join))
@settings(max_examples=40, deadline=None)
def test_vocabulary_tables_change_no_id(text):
    """A chunk found in the vocabulary tables gets the ids the kernel computes without them."""
    from tokenmill.tokenizer.bpe.encoder import _CACHE_LIMIT, _NO_VOCAB, _NO_VOCAB2
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    assert (enc.vtab[0::2] != 0).sum() > 0 and (enc.vtab2[1::4] != 0).sum() > 0
    data = text.encode("utf-8")
    chunks = split_with_gaps(resolve_pattern(tok.pattern), text)
    offs = np.cumsum([0] + [len(c.encode("utf-8")) for c in chunks]).astype(np.int64)
    buf = np.frombuffer(data, np.uint8)
    none = np.zeros(0, np.int64)
    got = []
    for tables in ((enc.vtab, enc.vtab2), (_NO_VOCAB, _NO_VOCAB2)):
        out = np.empty(len(data), np.int64)
        state = enc._pinned_state([])
        n, _ = EK.encode_chunks(buf, offs, none, none, enc.byte_ids, enc.byte_pairs, enc.pairs, enc.filt, enc.chars,
                                *tables, enc.imask, state, _CACHE_LIMIT, out)
        got.append(out[:n].tolist())
    assert got[0] == got[1] == tok.encode_ordinary_python(text)


def _word_entries(wt, width: int) -> dict[bytes, int]:
    """A word table's rows as {chunk bytes: value}: rows [key, value] (width 2, chunks of 1-7 bytes) or
    [k0, k1, value, 0] (width 4, 8-15 bytes); the length in the top byte of the last key word."""
    if width == 2:
        keys, vals = wt[0::2], wt[1::2]
        used = keys != 0
        return {int(k).to_bytes(8, "little")[: int(k) >> 56]: int(v) for k, v in zip(keys[used], vals[used])}
    k0, k1, vals = wt[0::4], wt[1::4], wt[2::4]
    used = k1 != 0
    return {(int(a).to_bytes(8, "little") + int(b).to_bytes(8, "little"))[: int(b) >> 56]: int(v)
            for a, b, v in zip(k0[used], k1[used], vals[used])}


def _word_ids(v: int, imask: int) -> list[int] | None:
    """A word-table value's ids (None: count 0, the ids are in the small-chunk table)."""
    c = v & 3
    if c == 0:
        return None
    return [(v >> 2) & imask] + [(v >> (2 + 20 * t)) & ((1 << 20) - 1) for t in range(1, c)]


@pytest.mark.parametrize("wide", [False, True], ids=["ids of 20 bits", "wider ids"])
@pytest.mark.parametrize("width", [2, 4], ids=["1-7 bytes", "8-15 bytes"])
def test_merged_table_holds_what_it_merged_and_is_emptied_when_half_full(width, wide):
    """Every chunk of 1-7 (8-15) bytes the kernel merges that is not in the seed goes in the thread's merged
    table (wide merged table) with its ids (up to three of 20 bits inline; more, or wider ids, a count of 0
    and the small-chunk table); at half full the table is emptied; the seeds are never written (every
    thread reads them). Thousands of distinct words, twice over, through a table of 1,024 rows: the ids
    are the naive rule's both times, every row's ids are its chunk's, no row holds a seed's chunk, and
    the table never holds more than half."""
    import itertools

    from tokenmill.tokenizer.bpe.encoder import _CACHE_LIMIT
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    naive = functools.cache(lambda b: reference.encode_naive(b, ranks))
    # 4,096 distinct chunks " theq" (5 bytes), or 3,000 of 8-15 bytes made of the vocabulary's pieces (some
    # of up to three ids, some of more)
    words = ["".join(w) for w in itertools.product("thequick", repeat=4)]
    if width == 4:
        pieces = sorted(b.decode() for b in tok._vocab[256:] if b and b.isalpha() and b.islower() and len(b) >= 2)
        pieces += list("xzq")
        words = [w for w in ("".join(p) for p in itertools.product(pieces, repeat=3)) if 7 <= len(w) <= 14]
        words = sorted(set(words))[:: max(1, len(set(words)) // 3000)][:3000]
    text = " ".join(words + words[:1500] + ["the fox"])
    chunks = split_with_gaps(resolve_pattern(tok.pattern), text)
    want = [i for c in chunks for i in naive(c.encode("utf-8"))]
    imask = np.uint64((1 << 62) - 1) if wide else enc.imask
    seed = enc.vtab if width == 2 else enc.vtab2
    seeded = _word_entries(seed, width)
    seeds = (enc.vtab.copy(), enc.vtab2.copy())
    at, used = (12, 6) if width == 2 else (13, 7)
    rows = 1024
    state = enc._pinned_state([], rows, rows)
    limit = rows // 2
    assert len(words) > limit  # it fills up at least once
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    offs = np.cumsum([0] + [len(c.encode("utf-8")) for c in chunks]).astype(np.int64)
    none = np.zeros(0, np.int64)
    merged = set()
    for _ in range(2):
        out = np.empty(data.size, np.int64)
        n, new = EK.encode_chunks(data, offs, none, none, enc.byte_ids, enc.byte_pairs, enc.pairs, enc.filt,
                                    enc.chars, enc.vtab, enc.vtab2, imask, state, _CACHE_LIMIT, out)
        state = state if new is None else new  # a new state only where the cache outgrew its arrays
        assert out[:n].tolist() == want
        assert np.array_equal(enc.vtab, seeds[0]) and np.array_equal(enc.vtab2, seeds[1])  # read only
        got = _word_entries(state[at], width)
        assert len(got) == int(state[8][used]) <= limit
        assert not set(got) & set(seeded)  # a seed's chunk is found in the seed, never merged
        inline = {b: v & 3 != 0 for b, v in got.items()}
        assert all(kept == (len(naive(b)) <= (1 if wide else 3)) for b, kept in inline.items())
        assert any(inline.values()) != wide and not all(inline.values())  # both kinds (wide: one id is a seed's)
        for b, v in got.items():
            ids = _word_ids(v, int(imask))
            assert ids is None or ids == naive(b)
        merged |= set(got)
    assert len(got) < len(merged)  # it was emptied on the way


@pytest.mark.parametrize("rows", [1, 2, 4])
def test_tiny_merged_tables_still_end_every_probe(rows):
    """Merged tables of 1, 2 and 4 rows (one row: nothing is put in, half of one row is none) fill and are
    emptied all the time, and every probe still ends at an empty row: the ids are the naive rule's."""
    from tokenmill.tokenizer.bpe.encoder import _CACHE_LIMIT
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    text = " ".join(_WIDE * 3) + " " + " ".join(f"qz{k}xq quzzicalxq{k}" for k in range(300)) + " end of text here"
    chunks = split_with_gaps(resolve_pattern(tok.pattern), text)
    want = [i for c in chunks for i in reference.encode_naive(c.encode("utf-8"), ranks)]
    data = np.frombuffer(text.encode("utf-8"), np.uint8)
    offs = np.cumsum([0] + [len(c.encode("utf-8")) for c in chunks]).astype(np.int64)
    none = np.zeros(0, np.int64)
    state = enc._pinned_state([], rows, rows)
    for _ in range(2):
        out = np.empty(data.size, np.int64)
        n, new = EK.encode_chunks(data, offs, none, none, enc.byte_ids, enc.byte_pairs, enc.pairs, enc.filt,
                                    enc.chars, enc.vtab, enc.vtab2, enc.imask, state, _CACHE_LIMIT, out)
        state = state if new is None else new  # a new state only where the cache outgrew its arrays
        assert out[:n].tolist() == want
        assert int(state[8][6]) <= rows // 2 and int(state[8][7]) <= rows // 2


def test_word_tables_of_rows_not_a_power_of_two_are_refused():
    """The kernel masks a hash by the row count: a table of 3 rows would send a probe past its end."""
    from tokenmill.tokenizer.bpe.encoder import _CACHE_LIMIT

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    enc = tok._compiled()
    data = np.frombuffer(b"hello world", np.uint8)
    offs = np.array([0, 5, 11], np.int64)
    none = np.zeros(0, np.int64)
    state = list(enc._pinned_state([]))
    state[12] = np.zeros(6, np.uint64)
    with pytest.raises(ValueError, match="power of two rows"):
        EK.encode_chunks(data, offs, none, none, enc.byte_ids, enc.byte_pairs, enc.pairs, enc.filt, enc.chars,
                         enc.vtab, enc.vtab2, enc.imask, tuple(state), _CACHE_LIMIT, np.empty(11, np.int64))


# ---- the wide helpers the splitters skip letter runs with -------------------------------------------
def _letters_py(word: bytes, which: int) -> int:
    kinds = ((b"abcdefghijklmnopqrstuvwxyz" if which & 1 else b"") + (b"ABCDEFGHIJKLMNOPQRSTUVWXYZ" if which & 2 else b"")
             + (b" " if which & 4 else b""))
    return sum(0x80 << (8 * t) for t, x in enumerate(word) if x in kinds)


def test_ascii_letters_marks_exactly_the_letters_and_spaces_for_every_byte_at_every_position():
    from numba import njit

    from tokenmill.tokenizer._wide import ascii_letters, ctz64

    @njit
    def marks(words, which):
        return np.array([ascii_letters(w, which) for w in words], np.uint64)

    @njit
    def trailing(words):
        return np.array([ctz64(w) for w in words], np.uint64)

    rng = np.random.default_rng(0)
    for pos in range(8):
        words = rng.integers(0, 256, (256, 8), dtype=np.uint8)
        words[:, pos] = np.arange(256)  # every byte value here, random neighbours (carries would show)
        packed = words.copy().view(np.uint64).ravel()
        for which in range(1, 8):
            assert marks(packed, which).tolist() == [_letters_py(bytes(w), which) for w in words]
    assert trailing(np.array([0, 1, 8, 1 << 63, M64], np.uint64)).tolist() == [64, 0, 3, 63, 0]


def test_popc64_counts_the_set_bits():
    from numba import njit

    from tokenmill.tokenizer._wide import popc64

    @njit
    def counts(words):
        return np.array([popc64(w) for w in words], np.uint64)

    words = np.random.default_rng(1).integers(0, 1 << 63, 200, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    words = np.concatenate([words, np.array([0, 1, 1 << 63, M64], np.uint64)])
    assert counts(words).tolist() == [bin(int(w)).count("1") for w in words]


def test_vector_classes_read_the_same_through_a_raw_pointer():
    """The splitters' windows read their 64 bytes through ``raw`` (no reference count a window): the masks
    must be the array's, at every offset."""
    from numba import njit

    from tokenmill.tokenizer._wide import byte_classes64, eq_mask64, punct3_starts64, raw

    @njit
    def both(buf, i):
        a = byte_classes64(buf, i)
        b = byte_classes64(raw(buf), i)
        same = True
        for t in range(9):
            same = same and a[t] == b[t]
        return (same and punct3_starts64(buf, i) == punct3_starts64(raw(buf), i)
                and eq_mask64(buf, i, 0x27) == eq_mask64(raw(buf), i, 0x27))

    text = ("Don't stop\t\r\n 42 “quoted” — it's 3/4 of ÿ x' " * 8).encode()
    buf = np.frombuffer(text, np.uint8)
    assert all(both(buf, i) for i in range(buf.size - 64))


@functools.cache
def _punct3_starts():
    from numba import njit

    from tokenmill.tokenizer._wide import punct3_starts64

    return njit(lambda buf, i: punct3_starts64(buf, i))


@given(st.lists(st.sampled_from([b"a", b" ", b"\xe2", b"\x80", b"\x90", b"\xa7", b"\xa8", b"\x8f", "\u2014".encode(),
                                 "\u201c".encode(), "\u2010".encode(), "\u2027".encode(), "\u2028".encode(),
                                 "\u2030".encode(), "\u20ac".encode()]), min_size=30, max_size=80).map(b"".join),
       st.data())
@settings(deadline=None)
def test_punct3_starts_marks_the_whole_characters_u2010_to_u2027(data, d):
    """Bit j: bytes j, j+1, j+2 of the 64 are E2 80 90-A7 (a character cut by the window's end is not marked)."""
    if len(data) < 64:
        data += b"x" * (64 - len(data))
    i = d.draw(st.integers(0, len(data) - 64))
    w = data[i : i + 64]
    want = sum(1 << j for j in range(62) if w[j] == 0xE2 and w[j + 1] == 0x80 and 0x90 <= w[j + 2] <= 0xA7)
    assert int(_punct3_starts()(np.frombuffer(data, np.uint8), i)) == want


@given(st.lists(st.sampled_from(["a", "<", "|", "<|", "<|end|>", "<|e", "nd|>", "\u00e9", "<|x|>", " "]), max_size=60)
       .map("".join), st.data())
@settings(deadline=None)
def test_first_special_is_the_first_needle_inside_one_document(text, d):
    """``_special_scan.find_special`` against ``bytes.find`` per document: the first occurrence in the data
    of any needle that lies inside one document (one cut across a document boundary is not one)."""
    from tokenmill.tokenizer._special_scan import check_needles, find_special

    data = text.encode("utf-8") * d.draw(st.integers(1, 3))  # past 64 bytes: the vector path
    cuts = sorted(d.draw(st.lists(st.integers(0, len(data)), max_size=4)))
    docs = np.array([0, *cuts, len(data)], np.int64)
    needles = d.draw(st.lists(st.sampled_from([b"<|end|>", b"<|x|>", b"|", "\u00e9".encode()]), min_size=1,
                              max_size=3, unique=True))
    want = []
    for a, b in zip(docs[:-1].tolist(), docs[1:].tolist()):
        hits = [data.find(x, a, b) for x in needles]
        hits = [h for h in hits if h >= 0]
        if hits:
            want.append(min(hits))
    assert find_special(data, docs, check_needles(needles)) == (min(want) if want else -1)


@functools.cache
def _letters_from():
    from numba import njit

    from tokenmill.tokenizer._wide import letters_from

    return njit(lambda buf, i, e, which: letters_from(buf, i, e, which))


@given(st.binary(max_size=40), st.data())
@settings(deadline=None)
def test_letters_from_stops_at_the_first_non_letter_or_short_tail(data, d):
    e = d.draw(st.integers(0, len(data)))
    i = d.draw(st.integers(0, e))
    which = d.draw(st.integers(1, 7))
    buf = np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8)
    j = int(_letters_from()(buf, i, e, which))
    is_letter = [bool(_letters_py(bytes([x]), which)) for x in data]
    assert i <= j <= e and all(is_letter[i:j])
    assert j == e or j + 8 > e or not is_letter[j]  # stopped at a non-letter, or fewer than 8 bytes were left


# ---- the gpt2 splitter: one pass over the characters, twin of the matcher ---------------------------
_GPT2_PIECES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "'", "''", " ", "  ", "\t", "\n", "\r\n", "\u00a0",
                "\u3000", "a", "Z", "é", "低", "世界", "1", "٣", "½", "!", "?!", "🙂", "\u0301", "don", "s", "ll", "re",
                "internationalization", "camelCaseWord", "ABCDEFGHIJKLMNOP", "          ", "\n        x", "\t   "]


@given(st.lists(st.sampled_from(_GPT2_PIECES) | st.text(max_size=3), max_size=80).map("".join), st.data())
@settings(max_examples=300, deadline=None)
def test_gpt2_scan_equals_matcher(text, d):
    from tokenmill.tokenizer.pretokenize.presets import class_table

    data = text.encode("utf-8")
    cuts = sorted(d.draw(st.lists(st.integers(0, len(data)), max_size=3)))
    docs = np.array([0, *cuts, len(data)], np.int64)
    buf = np.frombuffer(data, np.uint8)
    got, bad = PK.split_gpt2(buf, class_table(), docs, _stale(len(data)))
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = PK.split_gpt2_matcher(buf, class_table(), docs)
        assert got.tolist() == want.tolist() and bad == bad2


@given(st.binary(max_size=60))
@settings(max_examples=200, deadline=None)
def test_gpt2_scan_equals_matcher_on_ill_formed_utf8(data):
    from tokenmill.tokenizer.pretokenize.presets import class_table

    buf = np.frombuffer(data, np.uint8)
    docs = np.array([0, len(data) // 2, len(data)], np.int64)
    got, bad = PK.split_gpt2(buf, class_table(), docs, np.empty(0, np.int64))
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = PK.split_gpt2_matcher(buf, class_table(), docs)
        assert bad == bad2 and got.tolist() == want.tolist()  # an ill-formed byte: a one-byte character of class 0


# ---- the gpt4 (cl100k) and o200k splitters: state machines over the characters, twins of the matchers --
# Pieces that stress the patterns: case-insensitive contractions (and U+017F, which (?i:s) also
# matches), digit runs of 1-7 (\p{N}{1,3}), letters after punctuation and whitespace (the one-character
# prefix), whitespace runs of every kind (\s*[\r\n], \s+(?!\S), \s++$; U+0085, U+00A0, U+3000 are \s),
# CR/LF (and o200k's '/') after punctuation, combining marks (other characters, but in o200k's letter
# classes), o200k's case classes (Lu, Lt, Lm, Lo, Ll: "HTTPServer", "中A"), emoji, mixed scripts.
_SCAN_PIECES = ["'s", "'S", "'t", "'T", "'LL", "'ll", "'lL", "'Ve", "'RE", "'m", "'D", "'ſ", "'x", "'", "''", "'1",
                " ", "  ", "   ", "\t", "\n", "\n\n", "\r", "\r\n", " \n ", "\t\n\t", "\u00a0", "\u3000", "\u0085",
                "\u2028", "\x0b", "\x0c", "a", "Z", "é", "低", "世界", "中A", "ǅ", "ʰ", "AB", "Ab", "aB", "DON", "HTTPServer",
                "1", "12", "123", "1234", "12345", "1234567", "٣", "½", "²", "!", "?!", "...", "-", "/", "//", "\n/",
                "\"", "🙂", "👍🏽", "\u0301", "e\u0301", "A\u0301B", "don", "s", "ll", "re", "ve", "Привет", "مرحبا",
                "こんにちは", "\x00", "\x1c", "internationalization", "camelCaseWordsHere", "ABCDEFGHIJKLMNOP",
                "lowercaseletters", "          ", "\n        x", "\t   ", "            \n"]


def _scan_text():
    return st.lists(st.sampled_from(_SCAN_PIECES) | st.text(max_size=3), max_size=80).map("".join)


@pytest.mark.parametrize("preset", ["gpt4", "o200k"])
@given(text=_scan_text(), d=st.data())
@settings(max_examples=400, deadline=None)
def test_scan_equals_matcher_and_regex(preset, text, d):
    import regex

    from tokenmill.tokenizer.pretokenize.patterns import GPT4, O200K
    from tokenmill.tokenizer.pretokenize.presets import class_table

    kernel, matcher = getattr(PK, f"split_{preset}"), getattr(PK, f"split_{preset}_matcher")
    data = text.encode("utf-8")
    buf = np.frombuffer(data, np.uint8)
    scan = lambda b, t, docs: kernel(b, t, docs, _stale(b.size))  # noqa: E731
    got, bad = scan(buf, class_table(), np.array([0, len(data)], np.int64))
    from tokenmill.tokenizer.pretokenize.unicode import as_unicode16

    ends = [len(text[: m.end()].encode("utf-8"))
            for m in regex.finditer(GPT4 if preset == "gpt4" else O200K, as_unicode16(text))]
    assert got.tolist() == [0, *ends] and bad == -1
    cuts = sorted(d.draw(st.lists(st.integers(0, len(data)), max_size=3)))  # may cut a character: ill-formed
    docs = np.array([0, *cuts, len(data)], np.int64)
    got, bad = scan(buf, class_table(), docs)
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = matcher(buf, class_table(), docs)
        assert got.tolist() == want.tolist() and bad == bad2


@pytest.mark.parametrize("preset", ["gpt4", "o200k"])
@given(data=st.lists(st.binary(max_size=4) | st.sampled_from([s.encode() for s in _SCAN_PIECES]), max_size=30)
       .map(b"".join))
@settings(max_examples=300, deadline=None)
def test_scan_equals_matcher_on_ill_formed_utf8(preset, data):
    from tokenmill.tokenizer.pretokenize.presets import class_table

    scan, matcher = getattr(PK, f"split_{preset}"), getattr(PK, f"split_{preset}_matcher")
    buf = np.frombuffer(data, np.uint8)
    docs = np.array([0, len(data) // 3, len(data) // 2, len(data)], np.int64)
    got, bad = scan(buf, class_table(), docs, _stale(len(data)))
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = matcher(buf, class_table(), docs)
        assert bad == bad2 and got.tolist() == want.tolist()  # an ill-formed byte: a one-byte other character


# Mostly ASCII, long enough for several 64-byte windows of the cl100k-family splitters' fast path
# (``_ascii_window``): every class boundary its masks decide (contractions, also cut by a window's end,
# CR/LF after punctuation, whitespace runs with CR/LF inside, digit runs of 1-8), and a few non-ASCII
# characters (where a window stops and the machine takes over).
_ASCII_PIECES = ["'s", "'S", "'t", "'d", "'M", "'ll", "'LL", "'lx", "'ve", "'Re", "'rx", "'x", "''s", " 's", "'\n",
                 "don't", "It's", "we'll", "a", "b", "Z", "word", " word", "  word", "\tword", "(word", "((word",
                 " (word", ".", "...", " .", "-", "!\n", ".\r\n", ".\n\n", "\n", "\r\n", "\n\n", " \n", "\n ",
                 "\n  ", " \n \n ", "\n \n", "\t\n\t", "   ", "\t", "\x0b", "\x0c", "\x1c", "\x00", "1", "12",
                 "123", "1234", "12345678", " 1", "a1", "x.1", "\u2019", "\u201c", "\u00e9", "\u4e2d", "\u00a0",
                 "\u3000", "\x85", "\U0001f44d", "/", "//", "./", ".\n/", "\n//\n//", "a/\n/b", " \"//\":\n", "http://x",
                 "HTTPServer", "camelCase", "aB", "ABc", "IT'S", "o'clock", "aB's", "x'", "Word",
                 # characters U+2010-U+2027 (taken in the windows) and their neighbours (not)
                 "\u2014", "\u2018", "\u201d", "\u2010", "\u2027", "\u2026", "\u201cWord", "\u201c(a",
                 "x\u2019s", ".\u201d\n", " \u2014 ", "\u2019\u2019", "\u2028", "\u2029", "\u202f", "\u2000",
                 "\u200a", "\u200b", "\u2030", "\u203f", "\u2040", "\u2070", "\u2031A", "\u201c1"]


@pytest.mark.parametrize("name", ["gpt2", "gpt4", "o200k", "llama3", "qwen2", "qwen3.5"])
@given(text=st.lists(st.sampled_from(_ASCII_PIECES), min_size=20, max_size=300).map("".join), d=st.data())
@settings(max_examples=150, deadline=None)
def test_ascii_windows_equal_the_machine_and_regex(name, text, d):
    """The ASCII fast path (``_ascii_window.cl100k_window``, 64 bytes at a time) against the machine
    alone (``fast`` = 0) and ``regex``, on documents cut anywhere (a window stops at a document's end).
    o200k's words (upper/lower case, a contraction ends one) and its ``[\r\n/]*`` too, and GPT-2's
    (``_ascii_window.gpt2_window``)."""
    import regex

    from tokenmill.tokenizer.pretokenize import _family_kernels as FK
    from tokenmill.tokenizer.pretokenize.patterns import GPT2, GPT4, O200K
    from tokenmill.tokenizer.pretokenize.presets import class_table
    from tokenmill.tokenizer.pretokenize.splitter import FAMILY, family_table

    if name in ("gpt2", "gpt4", "o200k"):
        rx, tab = {"gpt2": GPT2, "gpt4": GPT4, "o200k": O200K}[name], class_table()
        kernel, slow = getattr(PK, f"split_{name}"), getattr(PK, f"split_{name}_machine")
        fast = lambda b, t, docs: kernel(b, t, docs, _stale(b.size))  # noqa: E731
    else:
        rx, dmax, marks = FAMILY[name]
        tab = family_table(marks)
        fast = lambda b, t, docs: FK.split_family(b, t, docs, FK.family_machine(dmax), dmax, _stale(b.size))  # noqa: E731
        slow = lambda b, t, docs: FK.split_family(b, t, docs, FK.family_machine(dmax), 0)  # noqa: E731
    data = text.encode("utf-8")
    buf = np.frombuffer(data, np.uint8)
    got, bad = fast(buf, tab, np.array([0, len(data)], np.int64))
    assert got.tolist() == [0, *(len(text[: m.end()].encode("utf-8")) for m in regex.finditer(rx, text))]
    cuts = sorted(d.draw(st.lists(st.integers(0, len(data)), max_size=4)))
    docs = np.array([0, *cuts, len(data)], np.int64)
    got, bad = fast(buf, tab, docs)
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = slow(buf, tab, docs)
        assert got.tolist() == want.tolist() and bad == bad2


def test_ascii_window_classes_are_the_class_tables():
    """The window's byte classes (computed on the bytes, not read from a table) are the machine's for
    every ASCII byte, under every class table the cl100k family runs with: each byte between letters,
    and after a space, gives the machine's chunks."""
    from tokenmill.tokenizer.pretokenize import _family_kernels as FK
    from tokenmill.tokenizer.pretokenize.presets import class_table
    from tokenmill.tokenizer.pretokenize.splitter import family_table

    for b in range(128):
        c = chr(b)
        text = "".join(f"ab{c}cd {c}x{c}{c}1{c}'{c}s {c}\n{c}" for _ in range(12)).encode()
        buf = np.frombuffer(text, np.uint8)
        docs = np.array([0, len(text)], np.int64)
        for name in ("gpt2", "gpt4", "o200k"):
            got, bad = getattr(PK, f"split_{name}")(buf, class_table(), docs, np.empty(0, np.int64))
            assert _whole(got, docs, bad, len(text))
            if TWINS:
                want = getattr(PK, f"split_{name}_machine")(buf, class_table(), docs)[0]
                assert got.tolist() == want.tolist(), (name, b)
        for marks in (False, True):
            tab = family_table(marks)
            a, bad = FK.split_family(buf, tab, docs, FK.family_machine(3), 3)
            assert _whole(a, docs, bad, len(text))
            if TWINS:
                assert a.tolist() == FK.split_family(buf, tab, docs, FK.family_machine(3), 0)[0].tolist(), (b, marks)


@pytest.mark.parametrize("machine, states", [(PK.cl100k_machine, 17), (PK.o200k_machine, 20)])
def test_scan_machines_are_closed(machine, states):
    """Every state the rules reach has its row, and every entry points at a row."""
    table = machine()
    assert table.size == states * PK._NCC
    nxt = table.astype(np.int64) >> PK._SHIFT
    assert np.all((nxt >= 0) & (nxt < table.size) & (nxt % PK._NCC == 0))


@pytest.mark.parametrize("name", ["llama3", "qwen2", "qwen3.5"])
@given(text=_scan_text(), d=st.data())
@settings(max_examples=200, deadline=None)
def test_family_scan_equals_matcher_and_regex(name, text, d):
    """Llama 3 / Qwen: cl100k's machine without \\s++$, K digits a chunk, Qwen 3.5's marks as letters."""
    import regex

    from tokenmill.tokenizer.pretokenize import _family_kernels as FK
    from tokenmill.tokenizer.pretokenize.splitter import FAMILY, family_table
    from tokenmill.tokenizer.pretokenize.unicode import as_unicode16

    rx, dmax, marks = FAMILY[name]
    tab = family_table(marks)
    data = text.encode("utf-8")
    buf = np.frombuffer(data, np.uint8)
    got, bad = FK.split_family(buf, tab, np.array([0, len(data)], np.int64), FK.family_machine(dmax), dmax)
    # (regex's classes as Unicode 16's, as tokenmill reads them: regex 2026.12 reads U+3D000 as a letter)
    ends = [len(text[: m.end()].encode("utf-8")) for m in regex.finditer(rx, as_unicode16(text))]
    assert got.tolist() == [0, *ends]
    cuts = sorted(d.draw(st.lists(st.integers(0, len(data)), max_size=3)))  # may cut a character: ill-formed
    docs = np.array([0, *cuts, len(data)], np.int64)
    got, bad = FK.split_family(buf, tab, docs, FK.family_machine(dmax), dmax)
    assert _whole(got, docs, bad, len(data))
    if TWINS:
        want, bad2 = FK.split_family_matcher(buf, tab, docs, dmax)
        assert got.tolist() == want.tolist() and bad == bad2


def test_a_cache_that_outgrows_its_arrays_is_kept():
    """The kernel updates the thread's cache in place and hands a state back only where the byte-keyed cache
    outgrew its arrays: the encoder keeps that new state (the chunks it admitted are found there on the
    next call, and the ids stay those of the pure-Python encoder)."""
    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    tok._encoder = None
    enc = tok._compiled()
    # 3,000 distinct chunks over 15 bytes (the byte-keyed cache's), each admitted on its second sighting
    words = [" " + "x" * (16 + i % 7) + "".join(chr(97 + (i // 26 ** t) % 26) for t in range(3)) for i in range(3000)]
    text = "".join(words)
    want = tok.encode_python(text, disallowed_special=())
    first = enc._state()
    cap = first[1].size
    for _ in range(3):
        assert enc.encode(text).tolist() == want
    kept = enc._state()
    assert kept[1].size > cap and kept[8][0] > cap  # grown, and the grown arrays are the thread's state
    assert enc.encode(text).tolist() == want
    # one text's path calls the kernel's machine code bound to the state it was looked up for: bound
    # again to the grown state (not the dispatcher: its types are those of the first state's arrays)
    one = enc._local.one
    assert one.bpe.key is enc._state() and one.bpe.call is not enc._K.encode_chunks and one.split.key is True


def test_chunks_bpe_leaves_as_bytes(tmp_path):
    """Chunks of 4-15 bytes in which no two adjacent bytes merge (GPT-2's indentation: a newline and spaces)
    are written as their bytes' ids from the merged tables' mark (``_BYTEWISE``: no row of the small-chunk
    table, no look at the byte-keyed cache). Seen once, again, and in the text's last 16 bytes (past the
    hot loop), the ids are BPE's; where a pinned token (HF ``ignore_merges``) is such a run, the run is
    that token, as HF tokenizers says."""
    import json

    tokenizers = pytest.importorskip("tokenizers")
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.formats.export import bytes_to_unicode, to_huggingface_dict
    from tokenmill.tokenizer.pretokenize.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    runs = ["\n" * 4, "\n" * 7, "\n" * 9, "\n" * 15, "\n" * 20, " ~!@#$%^", " ~!@#$%^&~!@#$"]
    for r in runs:  # each one chunk that BPE leaves as its bytes
        assert split_with_gaps(resolve_pattern(tok.pattern), r + "x") == [r, "x"]
        assert len(reference.encode_naive(r.encode(), ranks)) == len(r)
    text = "".join(r + "x" for r in runs * 3) + "".join(runs)
    want = [i for c in split_with_gaps(resolve_pattern(tok.pattern), text)
            for i in reference.encode_naive(c.encode("utf-8"), ranks)]
    enc = tok._compiled()
    enc._local.state = None
    entries = []
    for _ in range(3):
        assert enc.encode(text).tolist() == want
        entries.append(int(enc._local.state[8][0]))
    st = enc._local.state
    assert entries[1] == entries[2]  # (the runs in the last 16 bytes and the 20 newlines on their second sighting)
    keys = {_small_key(r) for r in runs if 4 <= len(r) <= 15}
    mt, mt2 = st[12].reshape(-1, 2), st[13].reshape(-1, 4)
    marked = {(int(k), 0) for k, v in mt if int(v) == int(EK._BYTEWISE)}
    marked |= {(int(a), int(b)) for a, b, v, _ in mt2 if int(v) == int(EK._BYTEWISE)}
    assert keys <= marked
    assert not keys & {(int(a), int(b)) for a, b in st[9]}  # no small-table row
    enc._local.state = None

    # a pinned token that is such a run: the whole-chunk rule gives it
    body = to_huggingface_dict(tok)
    run = "\n" * 20
    for r in (run, "\n" * 9):
        body["model"]["vocab"]["".join(bytes_to_unicode()[x] for x in r.encode())] = len(body["model"]["vocab"])
    body["model"]["ignore_merges"] = True
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(body, ensure_ascii=False))
    ours, hf = Tokenizer.from_huggingface(path), tokenizers.Tokenizer.from_file(str(path))
    for t in (text, run + "x", "x" + run, "\n" * 21 + "x" + run, "\n" * 9 + "x" + "\n" * 9 + "xy" * 9):
        assert ours.encode(t) == hf.encode(t, add_special_tokens=False).ids


_UTF8_PIECES = [bytes([b]) for b in range(256)] + [
    c.encode("utf-8", "surrogatepass") for c in ("é", "ß", "中", "€", "😀", "\U0010ffff", "\ud800", "\udfff")
] + [b"\xe0\x80\x80", b"\xe0\xa0\x80", b"\xc0\xaf", b"\xc1\xbf", b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xf0\x8f\xbf\xbf",
     b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"a" * 16, b"b" * 40]


def _decode_start(data: bytes) -> int:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return -1


@given(st.lists(st.sampled_from(_UTF8_PIECES), max_size=40), st.integers(0, 3))
@settings(deadline=None, max_examples=400)
def test_utf8_check_is_python_strict_decode(pieces, cut):
    """``_utf8_check.first_invalid`` accepts exactly what ``bytes.decode("utf-8")`` accepts and reports the
    offset its error starts at: overlong forms, surrogates, code points past U+10FFFF, stray continuation
    bytes and truncated sequences (``cut`` drops the last bytes), anywhere around the 16-byte ASCII steps."""
    from tokenmill.tokenizer._utf8_check import first_invalid

    data = b"".join(pieces)
    data = data[: max(0, len(data) - cut)]
    for pre in (b"", b"x" * 5, b"y" * 16):  # the same bytes at other offsets from the ASCII steps
        buf = np.frombuffer(pre + data, np.uint8)
        assert first_invalid(buf) == _decode_start(pre + data)
        assert first_invalid(buf[: buf.size - 1]) == _decode_start(pre + data[:-1]) if data else True


def test_well_formed_utf8_gives_the_bytes_or_none(monkeypatch):
    """The store's readers' check: the bytes as a read-only array when well-formed, None otherwise (and
    while the kernel is not compiled, the first megabyte is left to ``str.decode``)."""
    from tokenmill import _jit
    from tokenmill.tokenizer.encoding import well_formed_utf8

    monkeypatch.setenv("TOKENMILL_PYTHON_FIRST", "0")
    good = "plain ascii, é, 中文, 😀\n".encode() * 50
    buf = well_formed_utf8(good)
    assert bytes(buf) == good and not buf.flags.writeable
    for bad in (good + b"\xff", b"\xed\xa0\x80" + good, good[:-2]):
        assert well_formed_utf8(bad) is None
    monkeypatch.delenv("TOKENMILL_PYTHON_FIRST")
    monkeypatch.setattr(_jit, "_compiled_families", set())
    monkeypatch.setattr(_jit, "is_cached", lambda k: False)  # as on a machine that never compiled it
    monkeypatch.setattr(_jit, "_twin_spent", {})
    assert well_formed_utf8(good) is None  # (decoded by the caller)
    assert well_formed_utf8(b"x" * (1 << 20)) is not None  # past the first megabyte: compiled


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=6)), min_size=1, max_size=40),
       st.lists(st.integers(-3, 45), max_size=60))
def test_concat_pieces_equals_its_twin_and_checks_every_id(table, ids):
    """The decode join's kernel: the pieces' bytes joined, or the place of the first id that names none
    (out of range or None), found before any byte is read (bounds-checked in ``make test-boundscheck``)."""
    from tokenmill._gather import Pieces, concat_pieces_py

    pieces = Pieces(table)
    arr = np.array(ids, np.int64)
    bad = next((k for k, i in enumerate(ids) if not 0 <= i < len(table) or table[i] is None), -1)
    want = (b"", bad) if bad >= 0 else (b"".join(table[i] for i in ids), -1)
    assert pieces.concat(arr) == concat_pieces_py(pieces, arr) == want
