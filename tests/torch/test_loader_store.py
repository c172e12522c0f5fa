"""TrainingLoader over a token store and its split views: the store's fast path, fingerprints, a moved folder."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tokenmill import ConfigError, Mixture, SlidingWindows, Tokenizer, TokenStore
from tokenmill.data.readers import texts
from tokenmill.torch import TrainingLoader


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    tok = Tokenizer.from_merges([(116, 104), (256, 101), (32, 97)], pattern="gpt4", special_tokens=["<|endoftext|>"])
    rng = np.random.default_rng(0)
    words = ["the", "loader", "resumes", "数据", "exactly", "on", "any", "rank", "\n"]
    docs = [" ".join(words[int(i)] for i in rng.integers(0, len(words), int(n))) for n in rng.integers(1, 60, 200)]
    out = tmp_path_factory.mktemp("store") / "s"
    TokenStore.build(out, texts(docs), tok, workers=1, shard_bytes=2000, progress=False)  # several shards
    return out


def test_store_batches_hold_the_store_ids_and_cover_the_view(store_dir):
    store = TokenStore.open(store_dir)
    assert store.num_shards > 1
    train, val = store.split(0.2, seed=0)
    seen = []
    for r in range(2):
        for b in TrainingLoader(train, batch_size=2, world_size=2, rank=r, block_size=48, drop_last=False):
            real = b["doc_ids"] >= 0
            d, o, ids = (b[k][real].numpy() for k in ("doc_ids", "token_offsets", "input_ids"))
            for doc in np.unique(d):  # the ids are the view's ids at those offsets
                m = d == doc
                assert np.array_equal(ids[m], np.asarray(train.get(int(doc)))[o[m]])
            seen.append(np.stack([d, o], 1))
    pairs = np.concatenate(seen)
    assert pairs.shape[0] == int(train.lengths.sum()) == np.unique(pairs, axis=0).shape[0]


def test_moved_store_resumes_other_split_is_refused(store_dir, tmp_path):
    train = TokenStore.open(store_dir).split(0.2, seed=0)[0]
    make = lambda src: TrainingLoader(src, batch_size=2, windows=SlidingWindows(16, 12, jitter="global"),
                                      block_size=32, seed=1)
    full = [b["input_ids"].numpy().tobytes() for b in make(train)]
    a = make(train)
    it = iter(a)
    got = [next(it)["input_ids"].numpy().tobytes() for _ in range(5)]
    state = a.state_dict()
    moved = tmp_path / "elsewhere"
    shutil.copytree(store_dir, moved)
    b = make(TokenStore.open(moved).split(0.2, seed=0)[0])
    b.load_state_dict(state)  # same content, other folder: accepted
    got += [x["input_ids"].numpy().tobytes() for x in b]
    assert got == full
    other = TokenStore.open(store_dir).split(0.2, seed=1)[0]
    with pytest.raises(ConfigError, match="other data"):
        make(other).load_state_dict(state)


def test_views_of_other_documents_have_other_fingerprints(store_dir):
    """A split by a callable recorded only the callable's name, and ``view(index, definition)`` never hashed
    its index: two splits by different lambdas (other documents) shared a fingerprint, and a loader state
    of one resumed on the other, silently. A view's fingerprint now hashes its documents' indices where
    its definition does not say which they are; a split by document, source or file, and a slice, keep
    the fingerprint their definition gives (loader states saved before stay valid)."""
    from tokenmill._io import canonical_hash
    from tokenmill.data.store import StoreView

    store = TokenStore.open(store_dir)
    a = store.split(0.3, by=lambda i: i % 7)[0]
    b = store.split(0.3, by=lambda i: i // 10)[0]
    assert not np.array_equal(a.index, b.index) and a.fingerprint != b.fingerprint
    again = store.split(0.3, by=lambda i: i % 7)[0]
    assert again.fingerprint == a.fingerprint  # the same documents: the same fingerprint
    x, y = store.view(np.arange(10), {"mine": 1}), store.view(np.arange(10, 20), {"mine": 1})
    assert x.fingerprint != y.fingerprint
    assert a.split(0.5)[0].fingerprint != b.split(0.5)[0].fingerprint  # a split of such a view, too
    for v in (store.split(0.3)[0], store.split(0.3, seed=2)[1], store[5:50], store.split(0.3)[0][2:9]):
        assert isinstance(v, StoreView) and v.fingerprint == canonical_hash({"store": store.fingerprint,
                                                                             "view": v.definition})
    mk = lambda src: TrainingLoader(src, batch_size=2, block_size=32, seed=1)
    la = mk(a)
    it = iter(la)
    next(it)
    with pytest.raises(ConfigError, match="other data"):
        mk(b).load_state_dict(la.state_dict())


def test_mixture_of_store_views(store_dir):
    train, val = TokenStore.open(store_dir).split(0.3, seed=0)
    mix = Mixture({train: 0.5, val: 0.5}, seed=0)
    ld = TrainingLoader(mix, batch_size=4, block_size=32)
    tokens = np.zeros(2)
    for b in ld:
        part = mix.part_of(b["doc_ids"].numpy())
        tokens += np.bincount(part[part >= 0], minlength=2)
    assert abs(tokens[0] / tokens.sum() - 0.5) < 0.05


@pytest.mark.parametrize("kw", [dict(block_size=48), dict(block_size=64, method="greedy", shuffle=False),
                                dict(windows=SlidingWindows(32, stride=24, positions="absolute"))])
def test_store_fast_path_equals_the_per_batch_checked_path(store_dir, kw):
    """Over a store the loader reads the memory map inside the compiled pass (one check per table);
    over the same documents as a list it copies them segment by segment and checks everything: same batches."""
    store = TokenStore.open(store_dir)
    docs = [np.asarray(store.get(i)) for i in range(len(store))]
    fast = list(TrainingLoader(store, batch_size=3, drop_last=False, seed=1, **kw))
    slow = list(TrainingLoader(docs, batch_size=3, drop_last=False, seed=1, **kw))
    assert len(fast) == len(slow) > 3
    for f, s in zip(fast, slow):
        assert f.keys() == s.keys()
        for k in f:
            assert (torch.equal(f[k], s[k]) if torch.is_tensor(f[k]) else f[k] == s[k]), k


def test_a_mixture_of_two_vocabularies_is_refused(store_dir, tmp_path):
    """A Mixture took a store of one tokenizer's ids and one of another's (or of another vocabulary size) and
    gave batches mixing them, silently. Parts that declare their tokenizer or vocabulary must agree."""
    store = TokenStore.open(store_dir)
    other_tok = Tokenizer.from_merges([(116, 104)], pattern="gpt4", special_tokens=["<|endoftext|>"])
    other = TokenStore.build(tmp_path / "o", texts(["the cat", "a dog"]), other_tok, workers=1, progress=False)
    rng = np.random.default_rng(0)
    lens = rng.integers(1, 20, 30)
    wide = TokenStore.from_token_arrays(tmp_path / "w", [(lens, rng.integers(0, 90_000, int(lens.sum())))],
                                        vocab_size=90_000)
    with pytest.raises(ConfigError, match=r"parts 0 \('a'\) and 1 \('b'\) have different tokenizers .*sha256:.* "
                                          "one vocabulary"):
        Mixture({store: 0.5, other: 0.5}, names=["a", "b"])
    with pytest.raises(ConfigError, match=r"different vocabulary sizes \(sizes .* and 90000\)"):
        Mixture({store: 0.5, wide: 0.5})
    train, val = store.split(0.3, seed=0)
    from tokenmill import ArraySource
    assert len(Mixture({train: 1, val: 2, ArraySource([[1, 2, 3]]): 1}).parts) == 3  # one vocabulary: as before
