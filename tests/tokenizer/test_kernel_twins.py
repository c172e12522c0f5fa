"""Kernels with a readable Python twin, tested equal directly (not only through the encoder):
the hashing helpers, the code point offsets of the custom-pattern splitter, the encoder's pair and
byte-pair tables and its pinned-token cache; and the seed's ``encode_naive`` as the encoder's oracle."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import reference
from tokenmill.tokenizer import _encode_kernels as EK
from tokenmill.tokenizer import _hashing as H
from tokenmill.tokenizer import _pretok_kernels as PK

M64 = (1 << 64) - 1
BIG = int(EK._BIG)


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
    for (l, r), (q, i) in made.items():
        assert int(EK._rank(table, filt, l, r)) == (q << 32) | i
    for l, r in [(1, 2), (3000, 3000), (0, 0), (2999, 1)]:
        if (l, r) not in made:
            assert int(EK._rank(table, filt, l, r)) == BIG
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
    want = [fnv1a_py(t) for t in tokens]
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
def test_compiled_encoder_equals_seed_encode_naive(text):
    """The seed's rank-order rule (always merge the lowest-ranked adjacent pair), chunk by chunk."""
    from tokenmill.tokenizer.patterns import resolve_pattern, split_with_gaps

    tok = _TOK[0] if _TOK else _TOK.append(_trained()) or _TOK[0]
    ranks = {(int(a), int(b)): 256 + k for k, (a, b) in enumerate(tok.merges)}
    want = [i for chunk in split_with_gaps(resolve_pattern(tok.pattern), text)
            for i in reference.encode_naive(chunk.encode("utf-8"), ranks)]
    assert tok.encode_ordinary(text) == want


_TOK: list = []
