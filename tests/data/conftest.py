"""Small tokenizers and corpora for the store tests."""

from __future__ import annotations

import numpy as np
import pytest

from tokenmill import Tokenizer


@pytest.fixture(scope="session")
def tok() -> Tokenizer:
    """A small byte-level tokenizer with a few merges and an EOS special token."""
    merges = [(116, 104), (256, 101), (32, 97), (105, 110), (101, 114), (32, 256), (111, 110)]
    return Tokenizer.from_merges(merges, pattern="gpt4", special_tokens=["<|endoftext|>", "<s>"])


class WideTokenizer:
    """An adapter-style tokenizer (the store's protocol only) whose ids need uint32: byte + 70,000."""

    vocab_size = 70_300
    special_tokens = {"<|endoftext|>": 70_299}
    content_hash = "sha256:wide-test-tokenizer"

    def encode_batch(self, texts, *, as_arrays=False, num_threads=None):
        out = [np.frombuffer(t.encode("utf-8"), np.uint8).astype(np.int64) + 70_000 for t in texts]
        return out if as_arrays else [a.tolist() for a in out]


@pytest.fixture
def wide_tok():
    return WideTokenizer()


def make_corpus(root, n_files=6, docs_per_file=5, seed=0):
    """Text files with varied lengths, scripts and a trailing newline, sorted names."""
    rng = np.random.default_rng(seed)
    words = ["the", "token", "store", "其", "数据", "ünïcode", "in", "there", "\t", "on", "er", "🙂"]
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(n_files):
        lines = []
        for _ in range(docs_per_file):
            n = int(rng.integers(0, 60))
            lines.append(" ".join(words[int(i)] for i in rng.integers(0, len(words), n)))
        p = root / f"part-{f:02d}.txt"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(p)
    return paths
