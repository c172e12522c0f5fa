"""Strs UTF-8 cannot encode (surrogate code points): every encode path refuses them with one error that
names the text (its place in a batch) and the character, and ``replace_surrogates`` is tiktoken's own
rewrite of them (the parity tests of the real tokenizers use it: ``tests/tokenizer/adversarial.py``)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenmill import ConfigError, InputError, LoneSurrogateError, Tokenizer, TokenStore, replace_surrogates
from tokenmill.data import files
from tokenmill.tokenizer.bpe.train import train_bpe

_HALVES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude42", "\ud83d\ude42"])


def _tiktoken_rewrite(text: str) -> str:
    """What tiktoken's ``Encoding.encode`` does to a str that UTF-8 cannot encode, before encoding it."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=4) | _HALVES, max_size=20).map("".join))
def test_replace_surrogates_is_tiktokens_rewrite(text):
    got = replace_surrogates(text)
    assert got == _tiktoken_rewrite(text)
    got.encode("utf-8")  # always UTF-8 now
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        assert got is text  # nothing to rewrite: the same object, no copy


def test_replace_surrogates_joins_pairs_and_replaces_the_rest():
    assert replace_surrogates("a\ud83d\ude42b") == "a\U0001f642b"
    assert replace_surrogates("\ude42\ud83d") == "\ufffd\ufffd"  # reversed halves are no pair
    assert replace_surrogates("\ud83d\ud83d\ude42") == "\ufffd\U0001f642"
    with pytest.raises(ConfigError, match="takes a str, not a bytes"):
        replace_surrogates(b"bytes")


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_bpe(["the cat sat on the mat <eos> " * 20], 265, special_tokens=["<eos>"], progress=False)


def _refused(call, where: str, at: int, code: int) -> None:
    with pytest.raises(LoneSurrogateError, match=rf"^{where} holds a lone surrogate at character {at} "
                                                 rf"\(U\+{code:04X}\).*tokenmill\.replace_surrogates"):
        call()


def test_every_encode_path_names_the_text_and_the_character(tok, monkeypatch):
    bad = "the cat \udc00 sat"
    _refused(lambda: tok.encode(bad), "the text", 8, 0xDC00)
    _refused(lambda: tok.encode_ordinary(bad), "the text", 8, 0xDC00)
    # after a special token: the index in the whole text, not in the piece after it
    _refused(lambda: tok.encode("a <eos> b \ud800", allowed_special="all"), "the text", 10, 0xD800)
    _refused(lambda: tok.encode_python(bad), "the text", 8, 0xDC00)
    _refused(lambda: tok.encode_ordinary_python("x\ud83d\ude42"), "the text", 1, 0xD83D)
    batch = ["the cat", "", "sat on the mat", "on \ud800 the mat", "\udfff"]
    for as_arrays in (False, True):
        for threads in (1, 2):
            _refused(lambda t=threads, a=as_arrays: tok.encode_batch(batch, num_threads=t, as_arrays=a),
                     "text 3 of the batch", 3, 0xD800)
    _refused(lambda: tok.encode_flat(batch, num_threads=1), "text 3 of the batch", 3, 0xD800)
    _refused(lambda: tok.encode_batch(["\ud800"]), "text 0 of the batch", 0, 0xD800)
    # a batch of more texts than one kernel group: the index in the whole batch
    big = ["the cat sat on the mat " * 50] * 2000 + [bad]  # 2.3 MB: three groups
    _refused(lambda: tok.encode_batch(big, num_threads=2), "text 2,000 of the batch", 8, 0xDC00)
    # while the kernels are not compiled (a first run), the pure-Python path says the same
    from tokenmill.tokenizer import encoding

    fresh = Tokenizer.from_merges(tok.merges, pattern=tok.pattern, special_tokens=tok.special_tokens)
    monkeypatch.setattr(encoding.compiled, "python_first", lambda size: True)
    _refused(lambda: fresh.encode(bad), "the text", 8, 0xDC00)
    _refused(lambda: fresh.encode_batch(batch), "text 3 of the batch", 3, 0xD800)
    _refused(lambda: fresh.encode_flat(batch), "text 3 of the batch", 3, 0xD800)
    # the error is an InputError, and the rewritten text encodes as tiktoken would have it
    assert issubclass(LoneSurrogateError, InputError)
    assert tok.encode(replace_surrogates(bad)) == tok.encode("the cat \ufffd sat")


def test_training_names_the_document():
    docs = ["fine text here"] * 3 + ["the \ud83d\ude42 cat"]
    _refused(lambda: train_bpe(docs, 260, progress=False), "document 3", 4, 0xD83D)
    assert train_bpe([replace_surrogates(d) for d in docs], 260, progress=False).vocab_size == 260


def test_a_store_build_names_the_file_and_row(tmp_path, tok):
    src = tmp_path / "docs.jsonl"
    # a JSON escape of one half of a pair: valid JSON and valid UTF-8, but not a text UTF-8 can hold
    src.write_text("\n".join(json.dumps({"text": t}) for t in ["the cat", "sat \ud800 on", "the mat"]) + "\n")
    # named when read, by its line, with the remedy (it was "document at row 1 (shard 0): LoneSurrogateError"
    # at encode time, advising a Python function)
    with pytest.raises(InputError, match=r"docs\.jsonl:2: field 'text' holds a lone surrogate escape \(U\+D800 at "
                                         r"character 4\).*pass errors='replace'"):
        TokenStore.build(tmp_path / "store", files([src]), tok, progress=False, workers=1)
    # errors="replace" makes each lone surrogate U+FFFD (as tiktoken does), counted with invalid UTF-8
    src.write_bytes(src.read_bytes() + b'{"text": "cut \\ud83d, reversed \\ude42\\ud83d, pair \\ud83d\\ude42"}\n'
                    + b'{"text": "bad \xff byte"}\n')
    store = TokenStore.build(tmp_path / "store", files([src], errors="replace"), tok, progress=False, workers=1)
    want = ["the cat", "sat \ufffd on", "the mat", "cut \ufffd, reversed \ufffd\ufffd, pair \U0001f642", "bad \ufffd byte"]
    assert [store.get(i).tolist()[:-1] for i in range(5)] == [tok.encode(t) for t in want]
    assert store.manifest["invalid_utf8_replaced"] == 5
    r = files([src], errors="replace")
    assert [t for t, _, _ in r.documents()] == want
    assert (r.replaced.count, r.replaced.surrogates, r.replaced.where.endswith("docs.jsonl:2")) == (5, 4, True)
    assert r.replaced.note().endswith("(4 of them lone surrogates of JSON escapes); the first in " + f"{src}:2")
