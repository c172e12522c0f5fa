"""OpenAI's real cl100k_base and o200k_base rank files: tokenmill's ids equal tiktoken's.

`make test` extracts both files from the ``bpe-openai==0.1.4`` wheel (checking the sha256 tiktoken
itself expects) into .cache/openai and points $TOKENMILL_OPENAI_DIR there. tiktoken is built from the
same files offline (``tiktoken.get_encoding`` would download them): the split regexes and special
tokens come from tiktoken's own ``tiktoken_ext.openai_public``, so the oracle is the encoding tiktoken
ships, not a copy of it. Compared: the corpora (1 and 2 threads, lists and arrays out, special tokens
allowed), adversarial text (long runs of one character, mixed scripts, digits, very long words,
whitespace runs, surrogates as tiktoken rewrites them) and hypothesis-generated text, including the
pure-Python twin.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, corpus_sample
from tests.tokenizer.adversarial import assert_adversarial_equal
from tokenmill import Tokenizer

SCRIPTS = ("en", "zh", "multi", "code")
SAMPLE = 150_000  # bytes of each corpus per encoding (the suite must stay fast on 2 cores)
NAMES = {"cl100k_base": "cl100k", "o200k_base": "o200k"}


@pytest.fixture(scope="session")
def openai_dir() -> Path:
    p = Path(os.environ.get("TOKENMILL_OPENAI_DIR", REPO / ".cache" / "openai"))
    missing = [n for n in NAMES if not (p / f"{n}.tiktoken").is_file()]
    if missing:
        pytest.skip(f"{p}/{missing[0]}.tiktoken not found; run `make test` (it extracts it from the "
                    "bpe-openai wheel on PyPI)")
    return p


def _encoding(path, name: str):
    """tiktoken's encoding ``name`` as ``tiktoken.get_encoding(name)`` builds it, from the file at ``path``."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import openai_public

    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: load_tiktoken_bpe(str(path))):
        spec = getattr(openai_public, name)()  # tiktoken's own pat_str and special tokens, no download
    return tiktoken.Encoding(name, pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


def _pair(openai_dir: Path, name: str):
    path = str(openai_dir / f"{name}.tiktoken")
    enc = _encoding(path, name)
    tok = Tokenizer.from_tiktoken(path, pattern=NAMES[name], special_tokens=enc._special_tokens)
    assert tok.pattern == enc._pat_str, "the preset is not tiktoken's regex character for character"
    return tok, enc


@pytest.fixture(scope="session")
def cl100k(openai_dir):
    return _pair(openai_dir, "cl100k_base")


@pytest.fixture(scope="session")
def o200k(openai_dir):
    return _pair(openai_dir, "o200k_base")


def test_vocabularies(cl100k, o200k):
    for tok, enc in (cl100k, o200k):
        assert tok.vocab_size == enc.n_vocab
        assert tok.special_tokens == enc._special_tokens
        last = max(enc._mergeable_ranks.values())  # cl100k's ids have gaps before its special tokens
        for i in (0, 255, 256, 1000, last - 1, last):
            assert tok.token_bytes(i) == enc.decode_single_token_bytes(i)


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("which", ["cl100k", "o200k"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_corpora_equal_tiktoken(request, which, corpora, script):
    tok, enc = request.getfixturevalue(which)
    texts = corpus_sample(corpora, script, SAMPLE, stride=11)
    want = enc.encode_ordinary_batch(texts)
    assert [tok.encode_ordinary(t) for t in texts] == want
    assert tok.encode_batch(texts, num_threads=2, disallowed_special=()) == want
    assert [a.tolist() for a in tok.encode_batch(texts, num_threads=1, as_arrays=True, disallowed_special=())] == want
    rng = random.Random(which + script)
    specials = sorted(tok.special_tokens)
    mixed = []
    for t in texts[:10]:
        t = t[:2000]
        for _ in range(3):
            k = rng.randrange(len(t) + 1)
            t = t[:k] + rng.choice(specials) + t[k:]
        mixed.append(t)
    assert tok.encode_batch(mixed, allowed_special="all") == enc.encode_batch(mixed, allowed_special="all")


@pytest.mark.slow
@pytest.mark.parametrize("which", ["cl100k", "o200k"])
def test_adversarial_text_equals_tiktoken(request, which):
    tok, enc = request.getfixturevalue(which)
    assert_adversarial_equal(tok, enc)


ALPHABET = list("abcXYZ  \n\r\t'sSlLvVeErRdDmMtT.,;!?0123/-_") + [
    "é", "e\u0301", "\u0301", "低", "世界", "🙂", "\u00a0", "\u3000", "ſ", "K", "٣", "Ⅻ", "½", "ǅ", "ʰ", "\u200d",
    "\x85", "ß", "İ", "Σ", "ς", "ﬁ", "\u2028",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_text_equals_tiktoken(cl100k, o200k, data):
    text = data.draw(st.lists(st.sampled_from(ALPHABET + ["<|endoftext|>"]), max_size=80).map("".join))
    for tok, enc in (cl100k, o200k):
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
        assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
        assert tok.encode_ordinary_python(text) == enc.encode_ordinary(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(codec="utf-8"), max_size=80))
def test_random_unicode_equals_tiktoken(cl100k, o200k, text):
    for tok, enc in (cl100k, o200k):
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_a_known_rank_file_loaded_without_a_pattern_takes_its_models(openai_dir, gpt2_ranks_path, name, tmp_path):
    """``from_tiktoken(path)`` had taken GPT-2's pattern whatever the file: every cl100k and o200k text of a
    probe (200 of 200) gave other ids than tiktoken's, without a word. A file tokenmill knows by its SHA-256
    takes its model's pattern; any other is refused, asking for one."""
    from tokenmill.errors import ConfigError

    tok, enc = _pair(openai_dir, name)
    plain = Tokenizer.from_tiktoken(openai_dir / f"{name}.tiktoken")
    assert plain.pattern == tok.pattern
    for text in ("hello\n\nworld", "It's 2024.", "  indented\r\n\tcode();  ", "数字 12345 and ÜBER"):
        assert plain.encode_ordinary(text) == enc.encode_ordinary(text), text
    assert Tokenizer.from_tiktoken(gpt2_ranks_path).pattern == Tokenizer.from_tiktoken(gpt2_ranks_path,
                                                                                      pattern="gpt2").pattern
    other = tmp_path / f"my_{name}.tiktoken"  # (a file of its own: the name only gives the guess)
    other.write_bytes(b"".join((openai_dir / f"{name}.tiktoken").read_bytes().splitlines(keepends=True)[:400]))
    with pytest.raises(ConfigError, match=f"not one whose model tokenmill knows; give its split pattern, e.g. "
                                          f"pattern='{NAMES[name]}'"):
        Tokenizer.from_tiktoken(other)


def test_a_known_rank_file_loaded_alone_is_the_encoding_tiktoken_gives(openai_dir, gpt2_ranks_path, tmp_path):
    """``from_tiktoken(path)`` of OpenAI's files had no special tokens: ``<|endoftext|>`` in a text was
    encoded as plain text where tiktoken refuses it, and its id (in ids tiktoken made) did not decode. With
    nothing else given, such a file is now the encoding ``tiktoken.get_encoding`` gives: pattern, special
    tokens, vocabulary size, refusals and ids; ``special_tokens={}`` still gives none."""
    from tokenmill import as_tokenizer
    from tokenmill.errors import SpecialTokenError

    text = "Hi<|endoftext|> there<|endofprompt|>\n\n<|fim_prefix|>x"
    files = {"r50k_base": gpt2_ranks_path, **{n: openai_dir / f"{n}.tiktoken" for n in NAMES}}
    for name, path in files.items():
        enc = _encoding(path, name)
        for tok in (Tokenizer.from_tiktoken(path), as_tokenizer(str(path))):
            assert tok.special_tokens == enc._special_tokens and tok.vocab_size == enc.n_vocab, name
            assert tok.pattern == enc._pat_str
            for special in enc.special_tokens_set:
                with pytest.raises(SpecialTokenError):
                    tok.encode(f"a {special} b")
                with pytest.raises(ValueError):
                    enc.encode(f"a {special} b")
            assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
            assert tok.encode(text, disallowed_special=()) == enc.encode(text, disallowed_special=())
            ids = enc.encode(text, allowed_special="all")
            assert tok.decode(ids) == enc.decode(ids)
        assert Tokenizer.from_tiktoken(path, special_tokens={}).special_tokens == {}
    # a store built with one takes its <|endoftext|> after each document, as it does for any tokenizer
    from tokenmill.data import texts
    from tokenmill.data.store import build

    enc = _encoding(files["cl100k_base"], "cl100k_base")
    store = build(tmp_path / "s", texts(["one", "two"]), files["cl100k_base"], workers=1, progress=False)
    assert [store.get(i).tolist() for i in range(2)] == [enc.encode("one") + [100257], enc.encode("two") + [100257]]


def test_tiktokens_names_give_what_tiktoken_gives(openai_dir, gpt2_ranks_path):
    """Code written for a ``tiktoken.Encoding`` runs on a Tokenizer: ``n_vocab``, ``max_token_value``,
    ``eot_token``, ``special_tokens_set``, ``encode_ordinary_batch``, ``decode_single_token_bytes``,
    ``decode_tokens_bytes``, ``encode_single_token``, ``decode_with_offsets``, ``decode_batch``,
    ``decode_bytes_batch`` and ``token_byte_values`` are there and give what tiktoken's give (they were
    missing: AttributeError)."""
    texts = ["Hello world<|endoftext|>", "", "数字 12345\n\n  x", "<|endofprompt|> ok"]
    files = {"r50k_base": gpt2_ranks_path, **{n: openai_dir / f"{n}.tiktoken" for n in NAMES}}
    inside = 0
    for name, path in files.items():
        enc, tok = _encoding(path, name), Tokenizer.from_tiktoken(path)
        for attr in ("n_vocab", "max_token_value", "eot_token", "special_tokens_set"):
            assert getattr(tok, attr) == getattr(enc, attr), (name, attr)
        assert tok.encode_ordinary_batch(texts) == enc.encode_ordinary_batch(texts)
        assert [a.tolist() for a in tok.encode_ordinary_batch(texts, num_threads=1, as_arrays=True)] == \
            enc.encode_ordinary_batch(texts)
        ids = enc.encode(texts[0] + texts[2], allowed_special="all")
        assert tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)
        assert [tok.decode_single_token_bytes(i) for i in ids] == [enc.decode_single_token_bytes(i) for i in ids]
        # encode_single_token: a token's text or bytes, special tokens included; else a KeyError from both
        for t in ["hello", b" the", "<|endoftext|>", b"\xe4", "!", b"\n\n", *enc.special_tokens_set]:
            assert tok.encode_single_token(t) == enc.encode_single_token(t), (name, t)
        for t in ["zzzzqqqq xx", b"\xff\xfe\xfd\xfc", "<|not special|>"]:
            with pytest.raises(KeyError):
                enc.encode_single_token(t)
            with pytest.raises(KeyError, match="not a single token"):
                tok.encode_single_token(t)
        # decode_batch, decode_bytes_batch (an id sequence per text) and token_byte_values
        batch = [enc.encode(t, allowed_special="all") for t in texts] + [[]]
        assert tok.decode_batch(batch) == enc.decode_batch(batch)
        assert tok.decode_bytes_batch(batch, num_threads=2) == enc.decode_bytes_batch(batch, num_threads=2)
        cut = [enc.encode("中文")[:1], enc.encode("中文")[1:]]  # (bytes that are not whole characters)
        assert tok.decode_batch(cut) == enc.decode_batch(cut)
        assert tok.decode_batch(cut, errors="ignore") == enc.decode_batch(cut, errors="ignore")
        assert tok.token_byte_values() == enc.token_byte_values()
        # decode_with_offsets: tiktoken's offsets, tokens that start inside a character included
        for text in ["hello world", "a中b héllo 中文字符 🙂🙂 naïve", "数字 12345\n\n  x" * 3, texts[0], ""]:
            ids = enc.encode(text, allowed_special="all")
            assert tok.decode_with_offsets(ids) == enc.decode_with_offsets(ids), (name, text)
            inside += sum(b[0] & 0xC0 == 0x80 for b in tok.decode_tokens_bytes(ids))
    assert inside > 0  # (tokens that start inside a character were among them)
    none = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={})
    assert getattr(none, "eot_token", None) is None
    with pytest.raises(AttributeError, match=re.escape("no '<|endoftext|>' special token, so no eot_token")):
        assert none.eot_token is None  # (raises)
