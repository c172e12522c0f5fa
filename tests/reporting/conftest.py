"""A small tokenizer and token store for the report's tests: English, Chinese (characters split
across byte tokens: partial UTF-8), code, and an EOS special token."""

from __future__ import annotations

import pytest

import tokenmill
from tokenmill.data import texts

TEXTS = [
    "The quick brown fox jumps over the lazy dog.\nPack my box with five dozen liquor jugs.\n",
    "def f(x):\n\treturn x * 2  # doubled\n\n\nprint(f(21))\n",
    "世界你好，今天天气很好。我们去公园散步吧！\n",
    "Sliding windows cover every token; packing fills blocks of 64 positions with whole documents.\n" * 6,
    "short",
    "A longer document. " * 60,
    "Ünïcödé äccents, emoji 🙂 and math ∑ x² — dashes \u2028 and a tab\tend",
]


@pytest.fixture(scope="session")
def tok():
    return tokenmill.train_bpe(TEXTS * 3, 300, pattern="gpt4", special_tokens=["<|endoftext|>"])


@pytest.fixture(scope="session")
def store(tok, tmp_path_factory):
    docs = [t for k in range(12) for t in TEXTS[k % len(TEXTS):] + TEXTS[: k % len(TEXTS)]][:60]
    return tokenmill.TokenStore.build(tmp_path_factory.mktemp("report") / "store", texts(docs), tok, workers=1)
