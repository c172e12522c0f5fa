"""encode_batch encodes groups of texts in one kernel call each: the result must be exactly
``[encode(t) for t in texts]`` whatever the grouping, thread count and output kind, for texts that
take the grouped path (plain text) and those that do not (special tokens allowed and present, HF added
tokens, a prefix space, empty texts), and it must raise as ``encode`` does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import train_bpe
from tokenmill.errors import SpecialTokenError
from tokenmill.tokenizer import groups as groups_mod

PIECES = ["hello", " world", "滑动窗口", "，", "<|end|>", "<|x|>", "", " ", "\n\n", "123", "é", "🙂", "don't", "  a"]


@pytest.fixture(scope="module")
def toks(tmp_path_factory):
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.formats.export import to_huggingface_dict

    texts = ["hello world, 滑动窗口 123 don't", "the cat sat on the mat"] * 20
    out = {
        "gpt4": train_bpe(texts, 300, pattern="gpt4", special_tokens=["<|end|>", "<|x|>"]),
        "none": train_bpe(texts, 280, pattern=None, special_tokens=["<|end|>"]),
        "regex": train_bpe(texts, 280, pattern=r"\w+|\s+|[^\w\s]+"),
    }
    body = to_huggingface_dict(out["gpt4"])  # an HF import: added tokens, ByteLevel with a prefix space
    body["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    import json

    path.write_text(json.dumps(body, ensure_ascii=False))
    out["hf"] = Tokenizer.from_huggingface(path)
    return out


@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), max_size=12),
       st.sampled_from([1, 2]), st.booleans(), st.sampled_from([(), "all"]))
@settings(max_examples=80, deadline=None)
def test_encode_batch_equals_encode(toks, texts, threads, as_arrays, allowed):
    for name, tok in toks.items():
        kw = {"allowed_special": allowed, "disallowed_special": ()}
        want = [tok.encode(t, **kw) for t in texts]
        for group_bytes, group_texts in [(1 << 20, 1024), (8, 3)]:  # one group; many small ones
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(groups_mod, "GROUP_BYTES", group_bytes)
                mp.setattr(groups_mod, "GROUP_TEXTS", group_texts)
                got = tok.encode_batch(texts, num_threads=threads, as_arrays=as_arrays, **kw)
            if as_arrays:
                assert all(isinstance(g, np.ndarray) and g.dtype == np.int64 for g in got), name
                got = [g.tolist() for g in got]
            assert got == want, (name, group_bytes)


def test_encode_batch_raises_as_encode_does(toks):
    tok = toks["gpt4"]
    with pytest.raises(SpecialTokenError, match="<\\|end\\|>"):
        tok.encode_batch(["fine", "a <|end|> b"] * 3)
    with pytest.raises(Exception, match="surrogate"):
        tok.encode_batch(["fine", "bad \ud800 text", "fine"])
    with pytest.raises(Exception, match="takes a str"):
        tok.encode_batch(["fine", b"bytes"])


def test_grouped_path_is_taken(toks, monkeypatch):
    """The plain texts of a batch go through one kernel call (encode_many), not one call per text."""
    tok = toks["gpt4"]
    tok.encode("warm")
    calls = []
    enc = tok._compiled()
    real = enc.encode_many
    monkeypatch.setattr(enc, "encode_many", lambda texts: calls.append(len(texts)) or real(texts))
    texts = ["hello world"] * 50 + ["滑动窗口"] * 50
    assert tok.encode_batch(texts, num_threads=1) == [tok.encode(t) for t in texts]
    assert calls == [100]


@given(st.text(alphabet="<|ab>é", max_size=30), st.lists(st.text(alphabet="<|ab>é", min_size=1, max_size=3), min_size=1,
                                                          max_size=4))
@settings(deadline=None)
def test_holds_any_equals_a_search_for_each_prefix(text, prefixes):
    """The first-character shortcut before the prefix search changes no answer."""
    from tokenmill.tokenizer.special import holds_any

    assert holds_any(text, tuple(prefixes)) == any(p in text for p in prefixes)
