"""SentencePiece BPE ``.model`` files: ids equal ``sentencepiece``'s ``encode``, text its ``decode``.

Oracles: the ``sentencepiece`` package (0.2.x) itself, on

* Mistral's four SentencePiece models (v1, v2, v3, v7: byte fallback, identity normalizer, 750
  control pieces, user-defined symbols), fetched by ``make test`` from the mistral-common wheel into
  $TOKENMILL_MISTRAL_DIR (skipped with a message elsewhere);
* small BPE models trained here with ``sentencepiece`` (byte fallback on and off, digits split or not,
  NFKC and identity normalizers, extra whitespace kept or removed, whitespace as suffix, no dummy
  prefix with user-defined and control symbols, pieces across whitespace): these always run;
* random hand-made vocabularies (ties in score, -0.0 and +0.0, UNUSED pieces split back, control
  and user-defined pieces among the merges, a character map), written with ``write_model_proto``.

The compiled encoder and its pure-Python twin are compared with each other and with the oracle.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import corpus_sample
from tokenmill import as_tokenizer, replace_surrogates
from tokenmill.errors import ConfigError, FormatError, SpecialTokenError, UnsupportedTokenizerError
from tokenmill.tokenizer import sentencepiece as S
from tokenmill.tokenizer.model import Tokenizer

spm = pytest.importorskip("sentencepiece")

REPO = Path(__file__).resolve().parents[2]
MISTRAL = ("tokenizer.model.v1", "mistral_instruct_tokenizer_240216.model.v2",
           "mistral_instruct_tokenizer_240323.model.v3", "mistral_instruct_tokenizer_241114.model.v7")
EDGE = ["", " ", "  ", "\t", "\n", "\n\n", " \n ", "Hello world", "  Hello   world  ", "a\tb\nc\r\nd",
        "中文分词测试，标点。日本語のテキスト", "🙂👍🏽 e\u0301 ﬁ ① ａｂｃ \u3000x\u00a0y", "def f(x):\n    return x ** 2  # c\n",
        "12345 9.99% 2024-01-01", "ÿ\x00\x01\x7f", "▁x ▁ ▁▁", "x" * 300, " " * 70, "ab " * 100, "<unk>",
        "[INST] hi [/INST]", "<s>a</s>", "[REF] a[REFERENCE_DOC_1]b [/REF]", "foo bar <mask> x", "Ⅻ½ǅʰ\u200d\x85"]
ALPHABET = list("abcXYZ  \n\r\t'sS.,;!?0123/-_") + ["▁", "é", "e\u0301", "低", "世界", "🙂", "\u00a0", "\u3000",
                                                     "Ⅻ", "½", "\x85", "ａ", "ﬁ", "[REF]", "foo bar", "<mask>"]


def _texts(seed: int, n: int = 300) -> list[str]:
    rng = random.Random(seed)
    return EDGE + ["".join(rng.choice(ALPHABET) for _ in range(rng.randrange(60))) for _ in range(n)]


def _check(tok: S.SentencePieceTokenizer, sp, texts: list[str], *, twin: bool = True, ids_seed: int = 0) -> None:
    """Kernel, twin and sentencepiece agree on ``texts``; decode agrees on their ids and random ids."""
    want = [sp.encode(t) for t in texts]
    got = tok.encode_batch(texts, disallowed_special=(), num_threads=1)
    for t, a, b in zip(texts, got, want):
        assert a == b, repr(t[:200])
    for t, b in zip(texts[:300], want):  # one text a call: its own path (no batch), the same ids
        assert tok.encode(t, disallowed_special=()) == b, repr(t[:200])
    if twin:
        for t, b in zip(texts[:150], want):
            assert tok.encode_python(t, disallowed_special=()) == b, repr(t[:200])
    for ids in want[:200]:
        assert tok.decode(ids) == sp.decode(ids)
    rng = random.Random(ids_seed)
    for _ in range(200):
        ids = [rng.randrange(tok.vocab_size) if rng.random() < 0.6 else rng.randrange(min(tok.vocab_size, 300))
               for _ in range(rng.randrange(12))]
        assert tok.decode(ids) == sp.decode(ids), ids
        # the compiled decode and its readable twin, byte pieces as they are
        assert tok.decode_bytes(ids) == S.decode_reference(tok.model, ids, replace=False), ids


# ------------------------------------------------------------------------------- models trained here
TRAINED = {
    "bf": dict(byte_fallback=True),
    "nobf": dict(byte_fallback=False),
    "digits": dict(byte_fallback=True, split_digits=True),
    "nfkc": dict(byte_fallback=True, normalization_rule_name="nmt_nfkc"),
    "identity_keep_ws": dict(byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
                             allow_whitespace_only_pieces=True),
    "suffix": dict(byte_fallback=False, treat_whitespace_as_suffix=True, normalization_rule_name="identity",
                   remove_extra_whitespaces=False),
    "ud_no_dummy": dict(byte_fallback=True, add_dummy_prefix=False, normalization_rule_name="nfkc",
                        user_defined_symbols=["<mask>", "[REF]", "foo bar", "▁x"], control_symbols=["<ctl>"]),
    "across_ws": dict(byte_fallback=True, split_by_whitespace=False, normalization_rule_name="identity",
                      remove_extra_whitespaces=False),
}


def _training_lines() -> list[str]:
    """~400 kB every Python installation has (the interactive help topics, as the demo uses) and
    generated Chinese, digits and emoji: no download, so these tests always run."""
    import pydoc_data.topics

    lines = [ln for text in pydoc_data.topics.topics.values() for ln in text.splitlines()]
    rng = random.Random(0)
    han = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么"
    for _ in range(3000):
        words = ["".join(rng.choice(han) for _ in range(rng.randrange(1, 4))) for _ in range(rng.randrange(3, 12))]
        lines.append("，".join(words) + rng.choice("。！？") + str(rng.randrange(10 ** rng.randrange(1, 6))) +
                     rng.choice(["", " 🙂", " ok"]))
    return lines


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("spm")
    lines = _training_lines()
    out = {}
    for name, kw in TRAINED.items():
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(d / name), model_type="bpe",
                                       vocab_size=1200, character_coverage=0.9995, minloglevel=2, num_threads=1, **kw)
        out[name] = d / f"{name}.model"
    return out


@pytest.mark.parametrize("name", list(TRAINED))
def test_trained_models_equal_sentencepiece(trained, name):
    path = trained[name]
    tok = Tokenizer.from_sentencepiece(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert tok.vocab_size == sp.vocab_size() and tok.pieces == tuple(sp.id_to_piece(i) for i in range(tok.vocab_size))
    lines = _training_lines()[::37]
    # (the texts' seed: the model's place in TRAINED; hash(name) changed with every process's hash seed)
    _check(tok, sp, _texts(list(TRAINED).index(name)) + lines + ["\n".join(lines[:400])], ids_seed=len(name))


def test_trained_model_options_are_read(trained):
    m = S.read_model(trained["suffix"])
    assert m.treat_whitespace_as_suffix and not m.byte_fallback and not m.normalizer.remove_extra_whitespaces
    m = S.read_model(trained["digits"])
    assert m.split_digits and m.byte_fallback and m.normalizer.trie is not None
    m = S.read_model(trained["ud_no_dummy"])
    assert not m.normalizer.add_dummy_prefix and b"<mask>" in m.user_defined
    tok = S.SentencePieceTokenizer(m)
    assert "<ctl>" in tok.special_tokens and "<mask>" not in tok.special_tokens


# ------------------------------------------------------------------------------- Mistral's models
def _mistral(name: str) -> Path:
    d = Path(os.environ.get("TOKENMILL_MISTRAL_DIR", REPO / ".cache" / "mistral"))
    if not (d / name).is_file():
        pytest.skip(f"{d / name} not found; run `make test` (it extracts it from the mistral-common wheel)")
    return d / name


@pytest.mark.parametrize("name", MISTRAL)
def test_mistral_models_equal_sentencepiece(name):
    path = _mistral(name)
    tok = as_tokenizer(path)
    assert isinstance(tok, S.SentencePieceTokenizer)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    _check(tok, sp, _texts(7), ids_seed=3)
    assert tok.special_tokens["</s>"] == 2 and tok.special_tokens["<unk>"] == 0


@pytest.mark.corpus
@pytest.mark.parametrize("script", ["en", "zh", "code", "multi"])
def test_mistral_v3_and_v1_on_the_corpora(corpora, script):
    texts = corpus_sample(corpora, script, 300_000, stride=13)
    texts += [ln for t in texts[:3] for ln in t.splitlines()[:300]]
    for name in (MISTRAL[2], MISTRAL[0]):
        path = _mistral(name)
        tok = Tokenizer.from_sentencepiece(path)
        sp = spm.SentencePieceProcessor(model_file=str(path))
        got = tok.encode_batch(texts, disallowed_special=(), num_threads=2)
        want = sp.encode(texts)
        assert all(a == b for a, b in zip(got, want)) and len(got) == len(want)
        assert all(tok.decode(ids) == sp.decode(ids) for ids in want[:40])


def test_mistral_v7_generated_text_hypothesis():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    path = _mistral(MISTRAL[3])
    tok = Tokenizer.from_sentencepiece(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.sampled_from(ALPHABET + ["[INST]", "<s>", "\uffff", "\U0001f600"]), max_size=50).map("".join)
           | st.text(max_size=40))
    def run(text):
        if any(0xD800 <= ord(c) < 0xE000 for c in text):
            return
        assert tok.encode(text, disallowed_special=()) == sp.encode(text)
        assert tok.decode(sp.encode(text)) == sp.decode(sp.encode(text))

    run()


# ------------------------------------------------------------------------------- random vocabularies
FUZZ_ALPHABET = ["a", "b", "c", "d", "\u2581", "中", "é", "🙂", "ａ", "ﬁ", "①", "\u3000", "e\u0301", "\t", " "]


def _random_model(rng: random.Random, charsmap: bytes) -> bytes:
    bf = rng.random() < 0.5
    pieces = [("<unk>", 0.0, S.UNKNOWN), ("<s>", 0.0, S.CONTROL), ("</s>", 0.0, S.CONTROL)]
    if bf:
        pieces += [(f"<0x{b:02X}>", 0.0, S.BYTE) for b in range(256)]
    seen = {p for p, _, _ in pieces}
    scores = [-3.0, -2.0, -1.0, -0.0, 0.0, -0.5, -2.0, 1.0]  # ties, and -0.0 below +0.0
    for c in FUZZ_ALPHABET[:-1]:
        if rng.random() < 0.85 and c not in seen:
            pieces.append((c, rng.choice(scores), rng.choice([S.NORMAL] * 8 + [S.CONTROL, S.USER_DEFINED, S.UNUSED])))
            seen.add(c)
    for _ in range(rng.randrange(3, 40)):
        w = "".join(rng.choice(FUZZ_ALPHABET if rng.random() < 0.1 else FUZZ_ALPHABET[:-1])
                    for _ in range(rng.randrange(2, 6)))
        if w not in seen:
            pieces.append((w, rng.choice(scores), rng.choice([S.NORMAL] * 10 + [S.UNUSED, S.USER_DEFINED, S.CONTROL])))
            seen.add(w)
    rng.shuffle(pieces)
    norm = {"name": "identity", "add_dummy_prefix": rng.random() < 0.7, "remove_extra_whitespaces": rng.random() < 0.4,
            "escape_whitespaces": rng.random() < 0.85}
    if rng.random() < 0.3:
        norm["precompiled_charsmap"] = charsmap
    return S.write_model_proto(pieces, trainer={"model_type": 2, "byte_fallback": bf,
                                                "treat_whitespace_as_suffix": rng.random() < 0.2}, normalizer=norm)


def test_random_vocabularies_equal_sentencepiece(trained):
    charsmap = S.read_model(trained["nfkc"]).normalizer.charsmap
    rng = random.Random(12)
    for k in range(80):
        raw = _random_model(rng, charsmap)
        sp = spm.SentencePieceProcessor(model_proto=raw)
        tok = S.SentencePieceTokenizer.from_bytes(raw)
        texts = ["".join(rng.choice(FUZZ_ALPHABET + ["x", "  ", "\n"]) for _ in range(rng.randrange(40)))
                 for _ in range(25)]
        texts += ["".join(rng.choice(FUZZ_ALPHABET[:6]) for _ in range(rng.randrange(30, 300))) for _ in range(2)]
        _check(tok, sp, texts, ids_seed=k)


def test_unused_piece_is_split_back_as_sentencepiece_does():
    # "ab" is UNUSED: merged (it is the best pair), then split back into the pair it was made from
    pieces = [("<unk>", 0, S.UNKNOWN), ("▁", -5, S.NORMAL), ("a", -4, S.NORMAL), ("b", -4, S.NORMAL),
              ("ab", 0, S.UNUSED), ("abc", -1, S.NORMAL), ("c", -4, S.NORMAL)]
    raw = S.write_model_proto(pieces)
    sp = spm.SentencePieceProcessor(model_proto=raw)
    tok = S.SentencePieceTokenizer.from_bytes(raw)
    for t in ["ab", "abc", "ab ab abc", "cab", "abab"]:
        assert tok.encode(t) == sp.encode(t) == tok.encode_python(t), t


def test_long_segments_take_the_heap_and_stay_exact():
    path = _mistral(MISTRAL[0])
    tok = Tokenizer.from_sentencepiece(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    rng = random.Random(5)
    texts = ["x" * 5000, "ab" * 3000, "中文" * 2000, "\u2581" * 3000, " " * 5000,
             "".join(rng.choice("aeiou") for _ in range(4000))]
    _check(tok, sp, texts, twin=False)


# ------------------------------------------------------------------------------- the normalizer's fast paths
def _kernel_normalize(enc, data: bytes, *, fast: bool) -> bytes:
    """The normalizer kernel on ``data``, with its fast paths (runs of plain bytes, the per-character
    table) or without them (every character not plain through the trie walk)."""
    norm = enc.model.normalizer
    run = enc.run if fast else np.zeros(256, np.uint8)
    follow = enc.follow if fast else np.zeros(256, np.bool_)
    cmap = enc.cmap if fast else np.zeros(0, np.int32)
    src = np.frombuffer(data, np.uint8)
    out = np.empty(enc.grow * len(data) + 16, np.uint8)
    n = enc._K.normalize(src, enc.trie, enc.repl, enc.plain, enc.cont, run, follow, cmap, enc.ud_ptr, enc.ud_start,
                         enc.ud_len, enc.ud_bytes, norm.add_dummy_prefix, norm.remove_extra_whitespaces,
                         enc.escape_mode, enc.model.treat_whitespace_as_suffix, out)
    assert n >= 0
    return out[:n].tobytes()


def _map_edge_texts(enc, rng: random.Random) -> list[str]:
    """Characters the map changes and their neighbours (the edges of its ranges), characters that
    start longer rules (a letter and a combining mark), whitespace rules, plain text around them."""
    cm = enc.cmap
    mapped = np.flatnonzero(cm >= 0)
    longer = np.flatnonzero(cm == -1)
    longer = longer[(longer < 0xD800) | (longer >= 0xE000)]  # (surrogates: -1, never in text)
    edges = set()
    for cps in (mapped, longer):
        starts = cps[np.r_[True, np.diff(cps) > 1]]
        ends = cps[np.r_[np.diff(cps) > 1, True]]
        for cp in np.concatenate((starts, ends)).tolist():
            edges.update((cp - 1, cp, cp + 1))
    edges.update((0x7F, 0x80, 0x7FF, 0x800, 0xFFFD, 0xFFFF, 0x10000, 0x1D400, 0x1F100, 0x10FFFF))
    pool = [chr(cp) for cp in sorted(edges) if 0 <= cp < 0x110000 and not 0xD800 <= cp < 0xE000]
    pool += [chr(cp) for cp in rng.sample(mapped.tolist(), min(300, mapped.size))]
    pool += [chr(cp) + m for cp in rng.sample(longer.tolist(), min(100, longer.size)) for m in ("\u0301", "\u0308", "")]
    pool += ["a\u0301", "e\u0308", "A\u030a", "n\u0303x", "\u1100\u1161", " ", "  ", "\n", "\r\n", "\t", "\u3000",
             "\u00a0", "\u200b", "中文", "。", "，", "x", "▁", "ﬁ", "①", "ａｂ", "Ⅻ", "½", "<mask>", "[REF]", "foo bar"]
    texts = ["".join(pool[i:i + 40]) for i in range(0, len(pool), 40)]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 60))) for _ in range(400)]
    return texts


@pytest.mark.parametrize("name", ["nfkc", "ud_no_dummy", "digits"])
def test_normalizer_fast_paths_equal_the_trie_walk(trained, name):
    """The per-character table and the runs of plain bytes give what the trie walk gives, on the
    characters at the edges of the map's ranges, combining sequences the map holds as longer rules,
    and whitespace; and both equal the pure-Python normalizer."""
    tok = Tokenizer.from_sentencepiece(trained[name])
    enc = tok._compiled()
    m = enc.model
    assert enc.cmap.size == 0x10000 and (enc.cmap >= 0).any() and (enc.cmap == -1).any()
    ws = S.WS_BYTES if m.normalizer.escape_whitespaces else b" "
    for text in _map_edge_texts(enc, random.Random(len(name))) + EDGE:
        data = text.encode()
        fast = _kernel_normalize(enc, data, fast=True)
        assert fast == _kernel_normalize(enc, data, fast=False), repr(text)
        want = S.normalize(m.normalizer, data, user=m.user_defined, suffix=m.treat_whitespace_as_suffix)
        assert (fast.replace(b" ", ws) if enc.escape_mode == 2 else fast) == want, repr(text)


def test_char_map_agrees_with_the_trie(trained):
    """Each table entry is what the trie says of the character alone: its rule (-> the rule's
    string), none (-2: the character is itself), or a longer rule starting with it (-1)."""
    enc = Tokenizer.from_sentencepiece(trained["nfkc"])._compiled()
    norm = enc.model.normalizer
    rng = random.Random(3)
    cps = [cp for cp in rng.sample(range(0x10000), 6000) if not 0xD800 <= cp < 0xE000]
    cps += np.flatnonzero(enc.cmap != -2).tolist()
    for cp in cps:
        v = int(enc.cmap[cp])
        if 0xD800 <= cp < 0xE000:
            assert v == -1
            continue
        c = chr(cp).encode()
        length, value = S._trie_longest(norm.trie, c, 0)
        if v == -2:
            assert length == 0, hex(cp)
        elif v >= 0:
            assert length == len(c), hex(cp)
            got = enc.repl[v >> 7:(v >> 7) + (v & 63)].tobytes()
            assert got == norm.replacements[value:norm.replacements.index(b"\0", value)], hex(cp)
            assert bool((v >> 6) & 1) == (got != b"" and b" " not in got), hex(cp)


# ------------------------------------------------------------------------------- the protocol
@pytest.fixture(scope="session")
def small(trained):
    return Tokenizer.from_sentencepiece(trained["ud_no_dummy"]), spm.SentencePieceProcessor(
        model_file=str(trained["ud_no_dummy"]))


def test_special_tokens_follow_tiktokens_safety_model(small):
    tok, sp = small
    text = "a</s>b<ctl>"
    with pytest.raises(SpecialTokenError, match="'</s>' at character 1"):
        tok.encode(text)
    with pytest.raises(SpecialTokenError, match="^text 1 of the batch: the text contains the special token '</s>'"):
        tok.encode_batch(["ok", text])
    assert tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text) == sp.encode(text)
    eos, ctl = tok.special_tokens["</s>"], tok.special_tokens["<ctl>"]
    assert tok.encode(text, allowed_special="all") == sp.encode("a") + [eos] + sp.encode("b") + [ctl]
    assert tok.encode(text, allowed_special={"</s>"}, disallowed_special=()) == (
        sp.encode("a") + [eos] + sp.encode("b<ctl>"))
    with pytest.raises(ConfigError, match="not special tokens"):
        tok.encode("x", allowed_special={"<nope>"})


def _sprinkled(tokens: list[str], seed: int, n: int = 300, share: float = 0.1) -> list[str]:
    """``_texts`` with one of ``tokens`` put into about ``share`` of them (empty texts and edge cases among them)."""
    rng = random.Random(seed)
    out = []
    for t in _texts(seed, n):
        if rng.random() < share:
            k = rng.randrange(len(t) + 1)
            t = t[:k] + rng.choice(tokens) + t[k:]
        out.append(t)
    return out


@pytest.mark.parametrize("which", ["small", "mistral-v3"])
def test_a_batch_mixing_texts_with_and_without_special_tokens_equals_each_text_alone(small, which):
    """A batch's special tokens are looked for in one pass over its UTF-8: the texts before the first that holds
    one are encoded as plain text, that one and the rest cut one by one; the ids are the pure-Python twin's of
    each text, whatever the grouping, threads or output kind."""
    tok = small[0] if which == "small" else Tokenizer.from_sentencepiece(_mistral(MISTRAL[2]))
    names = sorted(tok.special_tokens)
    texts = _sprinkled(names[:4] + names[-4:], 11) + ["", "plain", ""]
    some = names[-1]
    for kw in ({"disallowed_special": ()}, {"allowed_special": "all"}, {"allowed_special": {some}, "disallowed_special": ()},
               {"allowed_special": (some,), "disallowed_special": ()}):
        want = [tok.encode_python(t, **kw) for t in texts]
        assert sum(some in t for t in texts) > 3
        for threads in (1, 2):
            assert tok.encode_batch(texts, num_threads=threads, **kw) == want, kw
            got = tok.encode_batch(texts, num_threads=threads, as_arrays=True, **kw)
            assert all(a.dtype == np.int64 for a in got) and [a.tolist() for a in got] == want
            for lo in (0, 150, 290):  # the first text holding a token at other places of the group
                assert tok.encode_batch(texts[lo:], num_threads=threads, **kw) == want[lo:]
        assert [tok.encode(t, **kw) for t in texts[:60]] == want[:60]
    plain = [t for t in texts if not any(s in t for s in names)]
    assert tok.encode_batch(plain, num_threads=1) == [tok.encode_python(t) for t in plain]


def test_a_batch_is_not_asked_text_by_text_when_no_text_holds_a_token(small, monkeypatch):
    """The special-token rule is worked out once a call (kept between calls) and the texts are searched in one
    pass: each text was asked on its own (sets of a model's control pieces built, a search), ~20 us a short
    line with Mistral v3's 751 of them, where sentencepiece takes ~11 us to encode it."""
    from tokenmill.tokenizer import special

    tok = S.SentencePieceTokenizer(small[0].model)  # nothing kept from other tests
    asked, rules = [], []
    real_allowed, real_requested = S.SentencePieceTokenizer._allowed, special.requested
    monkeypatch.setattr(S.SentencePieceTokenizer, "_allowed", lambda self, t, *a, **k: (
        asked.append(t), real_allowed(self, t, *a, **k))[1])
    monkeypatch.setattr(special, "requested", lambda *a: (rules.append(a[1:]), real_requested(*a))[1])
    names = sorted(tok.special_tokens)
    plain = [t for t in _texts(12, 400) if not any(s in t for s in names)]
    want = [small[0].encode_python(t) for t in plain]
    asked.clear()
    rules.clear()
    assert tok.encode_batch(plain, num_threads=1) == want and asked == [] and rules == [((), "all")]
    assert tok.encode_batch(plain, num_threads=2, disallowed_special=()) == want and asked == []
    assert tok.encode_batch(plain, num_threads=1) == want and rules == [((), "all"), ((), ())]  # kept
    mixed = plain[:100] + ["x </s> y"] + plain[100:]
    assert tok.encode_batch(mixed, allowed_special="all", num_threads=1)[:100] == want[:100]
    assert asked == mixed[100:]  # the texts from the first that holds one


def test_a_batch_names_the_first_text_that_fails_whatever_the_error(small):
    """A lone surrogate or a refused special token: the batch names the first text that holds either, as
    ``encode`` of each text in turn would fail first."""
    from tokenmill.errors import LoneSurrogateError

    tok, _ = small
    plain = [t for t in _texts(13, 60) if "<" not in t]
    for threads in (1, 2):
        with pytest.raises(SpecialTokenError, match=r"^text 40 of the batch: the text contains the special token "
                                                    r"'</s>' at character 2;"):
            tok.encode_batch(plain[:40] + ["ab</s><ctl>", "x\ud800"] + plain[40:], num_threads=threads)
        with pytest.raises(LoneSurrogateError, match=r"^text 40 of the batch holds a lone surrogate at character 1"):
            tok.encode_batch(plain[:40] + ["x\ud800", "ab</s>"] + plain[40:], num_threads=threads)
        with pytest.raises(SpecialTokenError, match=r"^the text contains the special token '<ctl>' at character 1;"):
            tok.encode_batch(["a<ctl>b</s>"], num_threads=threads)


def test_encode_batch_arrays_threads_and_order(small):
    tok, sp = small
    texts = _texts(3, 200) * 3
    want = [sp.encode(t) for t in texts]
    for threads in (1, 2):
        got = tok.encode_batch(texts, num_threads=threads, as_arrays=True, disallowed_special=())
        assert all(a.dtype == np.int64 and a.tolist() == b for a, b in zip(got, want))


def test_encode_flat_and_save_as_the_tokenizer_protocol_has_them(small, tmp_path):
    """``encode_flat`` and ``save`` were missing (AttributeError) where ``Tokenizer`` has them."""
    tok, sp = small
    texts = _texts(4, 50) + [""]
    for threads in (1, 2):
        ids, bounds = tok.encode_flat(texts, num_threads=threads, disallowed_special=())
        assert ids.dtype == bounds.dtype == np.int64 and bounds.size == len(texts) + 1
        assert [ids[bounds[i]:bounds[i + 1]].tolist() for i in range(len(texts))] == [sp.encode(t) for t in texts]
    assert [a.tolist() for a in tok.encode_flat([])] == [[], [0]]
    with pytest.raises(ConfigError, match="save_huggingface"):
        tok.save(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    Tokenizer.from_sentencepiece(_mistral("tokenizer.model.v1")).save_huggingface(tmp_path / "tokenizer.json")
    back = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")  # the tokenizer.json form has encode_flat too
    ids, bounds = back.encode_flat(texts[:20], disallowed_special=())
    assert [ids[bounds[i]:bounds[i + 1]].tolist() for i in range(20)] == back.encode_batch(texts[:20],
                                                                                         disallowed_special=())


def test_an_export_without_dummy_prefix_or_byte_fallback_reads_back(tmp_path):
    """Such a model's tokenizer.json (only a Replace of " " with "▁", no Metaspace, no byte fallback) was
    taken for a byte-level file and refused ("tokenmill imports byte-level BPE tokenizers")."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import Tokenizer as HFTokenizer

    m = pb.ModelProto()
    m.ParseFromString(_mistral("tokenizer.model.v1").read_bytes())
    m.normalizer_spec.add_dummy_prefix = False
    m.trainer_spec.byte_fallback = False
    keep = [p for p in m.pieces if p.type != 6]  # no <0xNN> pieces
    del m.pieces[:]
    m.pieces.extend(keep)
    (tmp_path / "m.model").write_bytes(m.SerializeToString())
    tok = Tokenizer.from_sentencepiece(tmp_path / "m.model")
    tok.save_huggingface(tmp_path / "tokenizer.json")
    back, hf = Tokenizer.from_huggingface(tmp_path / "tokenizer.json"), HFTokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for t in ["Hello world", "  two  spaces ", "中文 text", "x\ny", ""] + _texts(5, 40):
        got = [x.encode(t, allowed_special="all") for x in (back, tok)]
        assert got[0] == got[1] == hf.encode(t, add_special_tokens=False).ids, t
    # transformers' conversion of such a model writes byte_fallback: true with none of the <0xNN> tokens: HF
    # then falls back to unk as without it (it was refused: "byte_fallback with 256 of the 256 ... missing")
    body = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    body["model"]["byte_fallback"] = True
    (tmp_path / "bf.json").write_text(json.dumps(body), encoding="utf-8")
    back, hf = Tokenizer.from_huggingface(tmp_path / "bf.json"), HFTokenizer.from_file(str(tmp_path / "bf.json"))
    for t in ["Hello world ☃ 𝔘 ǅ", "中文 🙂 text"] + _texts(6, 40):
        ids = hf.encode(t, add_special_tokens=False).ids
        assert back.encode(t, allowed_special="all") == ids and back.decode(ids) == hf.decode(ids, skip_special_tokens=False)
    body["model"]["vocab"]["<0x41>"] = len(body["model"]["vocab"])  # one byte token of 256: still refused
    (tmp_path / "bf1.json").write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(UnsupportedTokenizerError, match="255 of the 256"):
        Tokenizer.from_huggingface(tmp_path / "bf1.json")


def test_decode_bytes_token_bytes_and_pieces(small):
    tok, sp = small
    ids = sp.encode("héllo wörld 🙂")
    assert tok.decode_bytes(ids).decode() == tok.decode(ids) == sp.decode(ids)
    byte = tok.piece_to_id("<0xF0>")
    assert tok.decode([byte]) == "\ufffd" and tok.decode_bytes([byte]) == b"\xf0"  # one U+FFFD per invalid byte
    assert tok.decode([byte, byte]) == sp.decode([byte, byte]) == "\ufffd\ufffd"
    assert tok.token_bytes(tok.piece_to_id("</s>")) == b"</s>"
    assert all(tok.token_bytes(i) == sp.id_to_piece(i).replace("▁", " ").encode() for i in range(300, 320))
    assert tok.id_to_piece(5) == sp.id_to_piece(5) and tok.piece_to_id("zzzz-none") == sp.piece_to_id("zzzz-none")
    with pytest.raises(ConfigError, match="out of range"):
        tok.decode([tok.vocab_size])
    with pytest.raises(ConfigError):
        tok.token_bytes(-1)
    assert "SentencePieceTokenizer(vocab_size=1,200" in repr(tok)


def test_lone_surrogate_and_non_str_are_refused(small):
    from tokenmill.errors import InputError

    tok, _ = small
    with pytest.raises(InputError, match=r"^the text holds a lone surrogate at character 1 \(U\+D800\)"):
        tok.encode("a\ud800b", disallowed_special=())
    with pytest.raises(InputError, match=r"^the text holds a lone surrogate at character 3 \(U\+DC00\)"):
        tok.encode_python("abc\udc00")
    for threads in (1, 2):
        with pytest.raises(InputError, match=r"^text 2 of the batch holds a lone surrogate at character 0"):
            tok.encode_batch(["fine", "", "\udfffx", "ok"], num_threads=threads)
    assert tok.encode(replace_surrogates("a\ud800b")) == tok.encode("a\ufffdb")
    with pytest.raises(ConfigError, match="takes a str"):
        tok.encode(b"bytes")
    with pytest.raises(ConfigError, match="^encode_batch takes an iterable of texts, not one str"):
        tok.encode_batch("abc")
    with pytest.raises(ConfigError, match="^text 1 of the batch is not a str but bytes"):
        tok.encode_batch(["a", b"b"])
    with pytest.raises(ConfigError, match="^as_arrays='no' must be True or False"):
        tok.encode_batch(["a"], as_arrays="no")
    ids = tok.encode("ab cd")
    assert tok.decode(np.array(ids)) == tok.decode(ids) and tok.decode_bytes(np.array(ids)) == tok.decode_bytes(ids)
    for bad, message in ((np.array([ids, ids]), r"^ids is a 2-D array of shape \(2, \d+\); decode one sequence"),
                         ("abc", "^ids must be an iterable of token ids"), (5, "^ids must be an iterable")):
        for fn in (tok.decode, tok.decode_bytes):
            with pytest.raises(ConfigError, match=message):
                fn(bad)


def test_pickles_and_hash(small, trained):
    tok, sp = small
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode("foo bar x", disallowed_special=()) == sp.encode("foo bar x")
    assert again.content_hash == tok.content_hash != Tokenizer.from_sentencepiece(trained["bf"]).content_hash


def test_first_run_uses_the_python_twin(first_run, trained):
    tok = Tokenizer.from_sentencepiece(trained["nfkc"])
    sp = spm.SentencePieceProcessor(model_file=str(trained["nfkc"]))
    assert tok.encode("Hello ｗｏｒｌｄ") == sp.encode("Hello ｗｏｒｌｄ")
    assert "sentencepiece" in first_run.twins_used and tok._encoder is None


# ------------------------------------------------------------------------------- paths, CLI, store
def test_as_tokenizer_recognizes_model_files_and_processors(tmp_path, trained):
    p = tmp_path / "m" / "tokenizer.model"
    p.parent.mkdir()
    p.write_bytes(trained["bf"].read_bytes())
    sp = spm.SentencePieceProcessor(model_file=str(trained["bf"]))
    with_bos = spm.SentencePieceProcessor(model_file=str(trained["bf"]), add_bos=True, add_eos=True)
    for obj in (p, p.parent, str(p), sp, with_bos):  # (a processor's add_bos/add_eos: not applied, as when wrapped)
        tok = as_tokenizer(obj)
        assert isinstance(tok, S.SentencePieceTokenizer) and tok.encode("hi there") == sp.encode("hi there")


def test_unigram_models_are_refused_or_run_through_sentencepiece(tmp_path, capsys):
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_training_lines()[:3000]), model_prefix=str(tmp_path / "u"),
                                   model_type="unigram", vocab_size=300, minloglevel=2, num_threads=1)
    path = tmp_path / "u.model"
    with pytest.raises(UnsupportedTokenizerError, match="Unigram model"):
        Tokenizer.from_sentencepiece(path)
    tok = as_tokenizer(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert type(tok).__name__ == "ForeignTokenizer" and tok.encode("hello world") == sp.encode("hello world")
    assert "running it through sentencepiece" in capsys.readouterr().err
    # a processor's own options never reach the ids, wrapped as converted (the test above): the text's ids alone
    # (a wrapped processor with add_bos/add_eos had given them, a converted one not; a store then added a second)
    opts = spm.SentencePieceProcessor(model_file=str(path), add_bos=True, add_eos=True)
    assert opts.encode("hello world") == [opts.bos_id()] + sp.encode("hello world") + [opts.eos_id()]
    with pytest.warns(UserWarning, match="add_bos=True, add_eos=True not applied"):  # (said: it had been silent)
        assert as_tokenizer(opts).encode("hello world") == sp.encode("hello world")
    # decode's errors: sentencepiece makes the text (invalid bytes U+FFFD), so another handler is refused, not
    # ignored (U+FFFD had come back for errors='strict'); a lone surrogate is the LoneSurrogateError of every encode
    # (sentencepiece's own TypeError before), bytes a ConfigError (encode_ordinary had encoded them)
    ids = tok.encode("hello world")
    assert tok.decode(ids) == sp.decode(ids)
    for errors in ("strict", "ignore"):
        with pytest.raises(ConfigError, match=f"errors='{errors}'.*pass errors='replace'"):
            tok.decode(ids, errors=errors)
    from tokenmill.errors import LoneSurrogateError

    for fn in (tok.encode, tok.encode_ordinary):
        with pytest.raises(LoneSurrogateError, match="U\\+D800"):
            fn("a\ud800b")
    with pytest.raises(ConfigError, match="takes a str"):
        tok.encode_ordinary(b"ab")
    # special-token text: the advice names the one option that works (allowing them is refused where a text spells
    # one: sentencepiece cannot read them), and allowing them where no text spells one is no error (it had been)
    with pytest.raises(SpecialTokenError, match=r"pass disallowed_special=\(\) to encode it as text \(sentencepiece"):
        tok.encode("hello <s>")
    assert tok.encode("hello world", allowed_special="all") == sp.encode("hello world")
    with pytest.raises(ConfigError, match="never reads special tokens in text"):
        tok.encode("hello <s>", allowed_special="all")
    assert tok.encode("hello <s>", disallowed_special=()) == sp.encode("hello <s>")


def test_cli_encode_and_decode(tmp_path, trained, capsys):
    from tokenmill.cli import main

    sp = spm.SentencePieceProcessor(model_file=str(trained["bf"]))
    assert main(["encode", "--tokenizer", str(trained["bf"]), "Hello world 中文"]) == 0
    ids = [int(x) for x in capsys.readouterr().out.split()]
    assert ids == sp.encode("Hello world 中文")
    assert main(["decode", "--tokenizer", str(trained["bf"]), *map(str, ids)]) == 0
    assert capsys.readouterr().out == "Hello world 中文\n"


def test_store_build_with_a_model_file(tmp_path, trained):
    from tokenmill import TokenStore
    from tokenmill.data import texts

    tok = as_tokenizer(trained["digits"])
    sp = spm.SentencePieceProcessor(model_file=str(trained["digits"]))
    docs = _texts(9, 120)[1:]
    stores = {}
    for name, kw in {"local": dict(workers=1), "threads": dict(workers=2), "process": dict(workers=2, engine="process")}.items():
        stores[name] = TokenStore.build(tmp_path / name, texts(docs), tok, shard_bytes=2000, progress=False,
                                        special_text="plain", **kw)
    eos = tok.special_tokens["</s>"]
    ref = stores["local"]
    assert ref.dtype == np.uint16 and len(ref) == len(docs)
    assert all(ref.get(i).tolist() == sp.encode(d) + [eos] for i, d in enumerate(docs))
    for name, st in stores.items():
        assert st.fingerprint == ref.fingerprint, name
    assert ref.decode(3, tok) == sp.decode(sp.encode(docs[3]))


# ------------------------------------------------------------------------------- hostile files
def _model(**kw) -> bytes:
    pieces = kw.pop("pieces", [("<unk>", 0, S.UNKNOWN), ("▁", -1, S.NORMAL), ("a", -2, S.NORMAL)])
    return S.write_model_proto(pieces, **kw)


@pytest.mark.parametrize("raw, match", [
    (b"", "is empty"),
    (b"\x0a\xff\xff\xff\xff\x0f", "claims"),
    (b"\x0a\x05\x0a\x03ab", "claims"),
    (b"\x0a" + b"\xff" * 11, "longer than 10 bytes"),
    (b"\x0a\x02\x0b\x00", "wire type 3"),
    (b"\x0a\x02\x00\x00", "field number 0"),
    # not a model at all: said so from its first byte (a text file had read as "field 13 has wire type 4")
    (b"hello world\nthis is text\n", r"does not start as a SentencePiece model does .*begins b'hello world'"),
    (b"\x0b\x00", "not 0x0b"),
    (b"\x0a\x02\x10\x01", "wire type 0, expected 5"),
    (b"\x0a\x03\x0a\x01\xff", "not UTF-8"),
    (_model(pieces=[("<unk>", 0, 2), ("a", 0, 1), ("a", 0, 1)]), r"pieces\[2\].piece = 'a' is already piece 1"),
    (_model(pieces=[("<unk>", 0, 2), ("<0x41>", 0, 6)]), "byte_fallback is false"),
    (_model(pieces=[("a", 0, 1)]), "no unknown piece"),
    (_model(pieces=[("<unk>", 0, 2), ("<u2>", 0, 2)]), "a second unknown piece"),
    (_model(pieces=[("<unk>", 0, 2), ("", 0, 1)]), "is empty"),
    (_model(pieces=[("<unk>", 0, 2), ("a\0b", 0, 1)]), "NUL"),
    (_model(pieces=[("<unk>", 0, 2), ("x" * 8000, 0, 1)]), "8,000 bytes or more"),
    (_model(pieces=[("<unk>", 0, 2), ("a", 0, 9)]), r"pieces\[1\].type = 9"),
    (_model(trainer={"model_type": 2, "byte_fallback": True}), "not 256"),
    (_model(trainer={"model_type": 7}), "not a model type"),
    (_model(normalizer={"precompiled_charsmap": b"\x01\x02"}), "too short"),
    (_model(normalizer={"precompiled_charsmap": (4096).to_bytes(4, "little") + b"\0" * 100}), "claims 4,096"),
    (_model(normalizer={"precompiled_charsmap": (1000).to_bytes(4, "little") + b"\0" * 1100}), "multiple of 1024"),
    (_model(normalizer={"precompiled_charsmap": (1024).to_bytes(4, "little") + b"\xff" * 1024 + b"x\0"}),
     "invalid at unit|root is invalid"),
    (_model(normalizer={"precompiled_charsmap": (1024).to_bytes(4, "little") + b"\0" * 1024 + b"x"}), "NUL"),
])
def test_hostile_files_are_format_errors_naming_the_file(tmp_path, raw, match):
    p = tmp_path / "bad.model"
    p.write_bytes(raw)
    with pytest.raises(FormatError, match=match) as e:
        Tokenizer.from_sentencepiece(p)
    assert "bad.model" in str(e.value)


def test_a_model_cut_after_a_piece_is_refused_not_read_as_unigram(tmp_path, trained):
    """A .model cut between two pieces has no trainer_spec, whose model_type then defaulted to Unigram: a cut
    BPE model was refused as a Unigram model, or (through as_tokenizer) run as one, other ids and no error."""
    raw = Path(trained[next(iter(TRAINED))]).read_bytes()

    def varint(i):
        n, shift = 0, 0
        while True:
            n |= (raw[i] & 0x7F) << shift
            shift += 7
            i += 1
            if raw[i - 1] < 0x80:
                return n, i

    cut = 0
    for _ in range(200):  # the pieces (field 1, each a tag 0x0A, a length, the piece) come first
        assert raw[cut] == 0x0A
        n, at = varint(cut + 1)
        cut = at + n
    p = tmp_path / "cut.model"
    p.write_bytes(raw[:cut])
    for load in (Tokenizer.from_sentencepiece, as_tokenizer):
        with pytest.raises(FormatError, match="cut.model' holds .* pieces and no trainer_spec .* cut short"):
            load(p)
    p.write_bytes(raw[:10])  # cut inside its first piece: not sniffed as a model; said to be one, maybe
    with pytest.raises(FormatError, match="starts as a SentencePiece .model does, so it may be one cut short"):
        as_tokenizer(p)


def test_a_valid_charsmap_with_a_hostile_trie_is_refused(trained):
    m = S.read_model(trained["nfkc"])
    blob = bytearray(m.normalizer.charsmap)
    rng = random.Random(0)
    refused = 0
    for _ in range(200):  # flip random trie units: refused, or (rarely) still a trie that stays inside itself
        b = bytearray(blob)
        k = 4 + 4 * rng.randrange(int.from_bytes(blob[:4], "little") // 4)
        b[k:k + 4] = rng.randrange(2 ** 32).to_bytes(4, "little")
        raw = _model(normalizer={"precompiled_charsmap": bytes(b)})
        try:
            tok = S.SentencePieceTokenizer.from_bytes(raw)
        except FormatError:
            refused += 1
            continue
        tok.encode("Hello ｗｏｒｌｄ ﬁ ① 中文", disallowed_special=())  # must not crash
    assert refused > 100


def test_random_bytes_never_crash(tmp_path):
    rng = random.Random(1)
    good = _model()
    for _ in range(300):
        raw = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        raw = bytes(raw[:rng.randrange(len(raw) + 1)])
        try:
            tok = S.SentencePieceTokenizer.from_bytes(raw)
        except FormatError:
            continue
        tok.encode("a a▁b", disallowed_special=())


def test_rank_files_named_tokenizer_model_still_load(gpt2_ranks_path, tmp_path):
    p = tmp_path / "tokenizer.model"
    p.write_bytes(gpt2_ranks_path.read_bytes())  # a tiktoken rank file under SentencePiece's name (as Llama 3)
    assert not S.is_sentencepiece_model(p.read_bytes()[:4096])
    tok = as_tokenizer(p, pattern="gpt2")
    assert isinstance(tok, Tokenizer) and tok.encode("hello world") == [31373, 995]


# ------------------------------------------------------------------------------- tokenizer.json of the family
WS = "\u2581"


def _variant(base: dict, name: str) -> dict:
    """The forms tokenizer.json files of this family take: Llama 2 / Mistral's legacy Prepend + Replace,
    transformers' Metaspace (each prepend scheme, split or not, the older add_prefix_space), Gemma's
    Replace without a dummy prefix, no byte fallback with or without fused or any unknown token,
    ignore_merges, a Metaspace decoder."""
    import copy

    j = copy.deepcopy(base)
    meta = lambda scheme, split: {"type": "Metaspace", "replacement": WS, "prepend_scheme": scheme, "split": split}
    if name.startswith("metaspace-"):
        _, scheme, split = name.split("-")
        j["normalizer"], j["pre_tokenizer"] = None, meta(scheme, split == "split")
    elif name == "old-metaspace":
        old = {"type": "Metaspace", "replacement": WS, "add_prefix_space": True, "str_rep": WS}
        j["normalizer"], j["pre_tokenizer"], j["decoder"] = None, old, dict(old)
    elif name.startswith("gemma"):
        j["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": WS}
        j["decoder"]["decoders"] = j["decoder"]["decoders"][:3]
        if name == "gemma-split":  # what transformers' GemmaConverter writes: a Split no space is left for
            j["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                                  "invert": False}
    elif name.startswith("nobf"):
        j["model"]["byte_fallback"] = False
        j["model"]["fuse_unk"] = name != "nobf-nofuse"
        if name == "nobf-nounk":
            j["model"]["unk_token"] = None
    elif name == "ignore-merges":
        j["model"]["ignore_merges"] = True
    elif name == "sequence-metaspace-decoder":
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [meta("first", False)]}
        j["decoder"] = meta("always", True)
    elif name == "no-decoder":  # HF joins the tokens by a space (tokenmill had joined them by nothing)
        j["decoder"] = None
    return j


HF_FORMS = ["legacy", "metaspace-first-nosplit", "metaspace-always-split", "metaspace-never-nosplit",
            "metaspace-first-split", "old-metaspace", "gemma", "gemma-split", "nobf-fuse", "nobf-nofuse", "nobf-nounk",
            "ignore-merges", "sequence-metaspace-decoder", "no-decoder"]


@pytest.fixture(scope="session")
def exported(tmp_path_factory, trained):
    """Mistral v1 (when present) and a trained identity model written by ``save_huggingface``."""
    import json

    d = tmp_path_factory.mktemp("hf")
    out = {}
    paths = {"trained": trained["identity_keep_ws"]}
    mistral = Path(os.environ.get("TOKENMILL_MISTRAL_DIR", REPO / ".cache" / "mistral")) / MISTRAL[0]
    if mistral.is_file():
        paths["mistral"] = mistral
    for name, path in paths.items():
        Tokenizer.from_sentencepiece(path).save_huggingface(d / f"{name}.json")
        out[name] = (path, json.loads((d / f"{name}.json").read_text(encoding="utf-8")))
    return out


@pytest.mark.parametrize("form", HF_FORMS)
def test_tokenizer_json_of_the_family_equals_hf(exported, tmp_path, form):
    import json

    tokenizers = pytest.importorskip("tokenizers")
    texts = _texts(4, 250) + ["a</s>b", "<s> hi", " <s>x", "x<s> ", "  ", "ÿ ÿÿ ÿ", " \n "]
    rng = random.Random(form)
    for name, (_, base) in exported.items():
        path = tmp_path / f"{name}-{form}.json"
        path.write_text(json.dumps(_variant(base, form), ensure_ascii=False), encoding="utf-8")
        hf = tokenizers.Tokenizer.from_file(str(path))
        tok = Tokenizer.from_huggingface(path)
        assert type(tok).__name__ == "SentencePieceJsonTokenizer"
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        got = tok.encode_batch(texts, allowed_special="all", num_threads=1)
        for t, a, b in zip(texts, got, want):
            assert a == b, (form, name, repr(t[:100]))
            assert tok.encode(t, allowed_special="all") == b, (form, name, repr(t[:100]))  # (one text's own path)
        for ids in want[:150] + [[rng.randrange(tok.vocab_size) for _ in range(rng.randrange(10))] for _ in range(150)]:
            assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), (form, ids)
            assert tok.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True), (form, ids)


@pytest.mark.parametrize("form", HF_FORMS)
def test_tokenizer_json_batches_with_and_without_added_tokens_equal_hf(exported, tmp_path, form, monkeypatch):
    """A batch that holds no added token goes to the kernel as its UTF-8 (the ``▁`` each form puts first added to
    the bytes), no text asked on its own; one that holds some (special or not, allowed or refused) is cut from
    the first text holding one, as HF cuts it."""
    import json

    from tokenmill.tokenizer.formats import sp_huggingface as H

    tokenizers = pytest.importorskip("tokenizers")
    asked = []
    real = H.SentencePieceJsonTokenizer._allowed
    monkeypatch.setattr(H.SentencePieceJsonTokenizer, "_allowed", lambda self, t, *a, **k: (
        asked.append(t), real(self, t, *a, **k))[1])
    for name, (_, base) in exported.items():
        body = _variant(base, form)
        free = max(body["model"]["vocab"].values()) + 1  # a non-special added token: always cut out, as in HF
        body["added_tokens"].append({"id": free, "content": "zq!", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": False})
        path = tmp_path / f"{name}-{form}.json"
        path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
        hf = tokenizers.Tokenizer.from_file(str(path))
        tok = Tokenizer.from_huggingface(path)
        added = sorted(tok.added_tokens)
        plain = [t for t in _texts(8, 250) + [" lead", "▁lead", "", "  "] if not any(a in t for a in added)]
        want = [e.ids for e in hf.encode_batch(plain, add_special_tokens=False)]
        asked.clear()
        for kw in ({}, {"disallowed_special": ()}, {"allowed_special": "all"}):
            for threads in (1, 2):
                assert tok.encode_batch(plain, num_threads=threads, **kw) == want, (form, name, kw)
        assert asked == []
        mixed = _sprinkled(["zq!", "zq!", "</s>", "<s>"], 9)
        want = [e.ids for e in hf.encode_batch(mixed, add_special_tokens=False)]
        first = next(i for i, t in enumerate(mixed) if any(a in t for a in added))
        asked.clear()
        got = tok.encode_batch(mixed, allowed_special="all", num_threads=1)
        assert got == want and asked == mixed[first:], (form, name)
        cut = [t for t in mixed if "zq!" in t and not any(s in t for s in tok.special_tokens)]  # only the plain added one
        assert tok.encode_batch(cut, num_threads=2) == [e.ids for e in hf.encode_batch(cut, add_special_tokens=False)]
        bad = next(i for i, t in enumerate(mixed) if any(s in t for s in tok.special_tokens))
        assert bad > first  # (a text holding only the plain added token before it)
        with pytest.raises(SpecialTokenError, match=f"^text {bad:,d} of the batch: the text contains the special token"):
            tok.encode_batch(mixed, num_threads=2)


def test_tokenizer_json_of_the_family_names_a_surrogate(exported, tmp_path):
    from tokenmill.errors import LoneSurrogateError

    path, _ = exported["trained"]
    Tokenizer.from_sentencepiece(path).save_huggingface(tmp_path / "t.json")
    tok = Tokenizer.from_huggingface(tmp_path / "t.json")
    assert type(tok).__name__ == "SentencePieceJsonTokenizer"
    with pytest.raises(LoneSurrogateError, match=r"^the text holds a lone surrogate at character 2 \(U\+D800\)"):
        tok.encode("ab\ud800")
    with pytest.raises(LoneSurrogateError, match=r"^text 1 of the batch holds a lone surrogate at character 0"):
        tok.encode_batch(["fine", "\udc00 x"], num_threads=2)


def test_exported_tokenizer_json_gives_sentencepieces_ids(exported):
    """HF tokenizers on the export equals sentencepiece on text without special or user-defined text."""
    tokenizers = pytest.importorskip("tokenizers")
    texts = [t for t in _texts(6, 300) if not any(s in t for s in ("<", "[", "foo bar"))]
    for name, (path, _) in exported.items():
        sp = spm.SentencePieceProcessor(model_file=str(path))
        d = Path(str(path) + ".json")
        Tokenizer.from_sentencepiece(path).save_huggingface(d)
        hf = tokenizers.Tokenizer.from_file(str(d))
        for t in texts:
            assert hf.encode(t, add_special_tokens=False).ids == sp.encode(t), (name, repr(t))
        d.unlink()


@pytest.mark.corpus
def test_exported_mistral_v1_on_the_corpora(corpora, exported, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    if "mistral" not in exported:
        pytest.skip("Mistral v1 not found; run `make test`")
    path, _ = exported["mistral"]
    Tokenizer.from_sentencepiece(path).save_huggingface(tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    sp = spm.SentencePieceProcessor(model_file=str(path))
    tok = as_tokenizer(tmp_path / "t.json")
    for script in ("en", "zh", "code"):
        texts = corpus_sample(corpora, script, 150_000, stride=17)
        want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
        assert tok.encode_batch(texts, allowed_special="all") == want
        plain = [t for t in texts if "<s>" not in t and "</s>" not in t and "<unk>" not in t]
        assert [sp.encode(t) for t in plain] == [e.ids for e in hf.encode_batch(plain, add_special_tokens=False)]


def test_export_refuses_what_the_format_cannot_hold(trained, tmp_path):
    for name in ("nfkc", "suffix"):
        with pytest.raises(ConfigError, match="keep the .model file"):
            Tokenizer.from_sentencepiece(trained[name]).save_huggingface(tmp_path / "x.json")
    # a user-defined piece spelling a space: sentencepiece matches 'ing▁' in "sing it" (spaces are '▁' by then),
    # HF's added token would not; refused (it was written, and HF gave other ids on ~4% of texts)
    pieces = [("<unk>", 0, S.UNKNOWN), ("▁", -1, S.NORMAL), ("s", -2, S.NORMAL), ("i", -2, S.NORMAL),
              ("n", -2, S.NORMAL), ("g", -2, S.NORMAL), ("t", -2, S.NORMAL), ("ing▁", 0, S.USER_DEFINED)]
    (tmp_path / "ud.model").write_bytes(_model(pieces=pieces, normalizer={"name": "identity", "add_dummy_prefix": True,
                                                                          "remove_extra_whitespaces": False}))
    tok = Tokenizer.from_sentencepiece(tmp_path / "ud.model")
    assert tok.id_to_piece(7) in [tok.id_to_piece(i) for i in tok.encode("sing it")]
    with pytest.raises(ConfigError, match="user-defined piece 'ing▁'.*keep the .model file"):
        tok.save_huggingface(tmp_path / "x.json")
    # user-defined pieces the format holds, with the one difference it has there: said when written
    pieces[-1] = ("<x>", 0, S.USER_DEFINED)
    (tmp_path / "ud2.model").write_bytes(_model(pieces=pieces, normalizer={"name": "identity", "add_dummy_prefix": True,
                                                                           "remove_extra_whitespaces": False}))
    with pytest.warns(UserWarning, match=r"has 1 user-defined piece \(such as '<x>'\).*puts a '▁' before the text"):
        Tokenizer.from_sentencepiece(tmp_path / "ud2.model").save_huggingface(tmp_path / "x.json")
    import warnings

    with warnings.catch_warnings():  # (a model without them: nothing said)
        warnings.simplefilter("error")
        Tokenizer.from_sentencepiece(trained["identity_keep_ws"]).save_huggingface(tmp_path / "y.json")


def test_tokenizer_json_refusals_are_wrapped_by_as_tokenizer(exported, tmp_path, capsys):
    import json

    tokenizers = pytest.importorskip("tokenizers")
    _, base = exported["trained"]
    j = _variant(base, "legacy")
    j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}] + j["normalizer"]["normalizers"]}
    path = tmp_path / "nfkc.json"
    path.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(UnsupportedTokenizerError, match="'NFKC' normalizer"):
        Tokenizer.from_huggingface(path)
    tok = as_tokenizer(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert type(tok).__name__ == "ForeignTokenizer" and tok.encode("ｈｉ there") == hf.encode("ｈｉ there").ids
    assert "running it through HF tokenizers" in capsys.readouterr().err


@pytest.mark.parametrize("edit, match", [
    (lambda j: j["model"].update(merges=["x y"]), "not in the vocabulary"),
    (lambda j: j["model"].update(unk_token="<nope>"), "unk_token '<nope>'"),
    (lambda j: j["model"]["vocab"].update({"zz": "3"}), r"model.vocab\['zz'\]"),
    (lambda j: j["model"]["vocab"].update({"zz": 3}), "gives id 3 to both"),
    (lambda j: j["model"].update(dropout=0.1), "dropout"),
    (lambda j: j["model"]["vocab"].pop("<0x41>"), "256 <0xNN> tokens"),
    (lambda j: j.update(normalizer={"type": "Replace", "pattern": {"Regex": " +"}, "content": WS}), "Replace"),
    (lambda j: j.update(pre_tokenizer={"type": "Metaspace", "replacement": "_", "prepend_scheme": "first"}),
     "replacement"),
    # HF refuses these; they had loaded as a tokenizer without merges (every text its characters), or without
    # anything (every text []), or as one with the replacement '▁'
    (lambda j: j["model"].pop("merges"), "missing required field merges"),
    (lambda j: [j["model"].pop("merges"), j["model"].pop("vocab")], "missing required field vocab"),
    (lambda j: j["model"]["merges"].insert(0, "abc"), "merge 0 'abc' is not two tokens separated by one space"),
    (lambda j: j["model"]["merges"].insert(1, ["a", "b"]) if isinstance(j["model"]["merges"][0], str)
     else j["model"]["merges"].insert(1, "a b"), "model.merges mixes forms"),
    (lambda j: j.update(pre_tokenizer={"type": "Metaspace", "prepend_scheme": "first"}),
     "missing required field replacement"),
    # a Split that splits (on another string, or with no Replace of spaces before it) is no no-op: refused
    (lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"String": ","}, "behavior": "Isolated"}),
     "a Split pre-tokenizer"),
    (lambda j: j.update(normalizer=None, pre_tokenizer={"type": "Split", "pattern": {"String": " "},
                                                        "behavior": "MergedWithPrevious"}), "spaces not replaced"),
])
def test_hostile_tokenizer_json(exported, tmp_path, edit, match):
    import json

    _, base = exported["trained"]
    j = _variant(base, "legacy")
    edit(j)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(FormatError, match=match):
        Tokenizer.from_huggingface(path)


def test_batches_whose_text_grows_past_the_buffer_bound_and_reused_scratch(trained):
    """The batch is normalized into one per-thread buffer sized 3 bytes per input byte; a text whose
    rules write more (U+FDFA becomes 33 bytes under NFKC) takes the per-text path for its batch. The
    id and text buffers are reused across batches and encoders: earlier results stay intact."""
    path = trained["nfkc"]
    tok = Tokenizer.from_sentencepiece(path)
    other = Tokenizer.from_sentencepiece(trained["bf"])
    sp = spm.SentencePieceProcessor(model_file=str(path))
    sp_other = spm.SentencePieceProcessor(model_file=str(trained["bf"]))
    texts = ["\ufdfa" * 50, "ab", "\ufdfa x \ufdfa" * 7, "", "plain text\n\nwith  lines"]
    first = tok.encode_batch(texts, num_threads=1, as_arrays=True, disallowed_special=())
    assert [a.tolist() for a in first] == [sp.encode(t) for t in texts]
    snapshot = [a.copy() for a in first]
    again = tok.encode_batch(texts[1:] * 40, num_threads=1, as_arrays=True, disallowed_special=())
    mixed = other.encode_batch(texts[1:], num_threads=1, disallowed_special=())
    assert [a.tolist() for a in again] == [sp.encode(t) for t in texts[1:] * 40]
    assert mixed == [sp_other.encode(t) for t in texts[1:]]
    assert all(np.array_equal(a, b) for a, b in zip(first, snapshot))


def test_decode_follows_errors_as_every_tokenizer_does():
    """``errors`` was accepted and ignored: "strict" and "ignore" gave U+FFFD as "replace" does."""
    pieces = [("<unk>", 0, S.UNKNOWN), ("▁", -5, S.NORMAL), ("o", -4, S.NORMAL), ("k", -4, S.NORMAL)]
    pieces += [(f"<0x{b:02X}>", 0, S.BYTE) for b in range(256)]
    tok = S.SentencePieceTokenizer.from_bytes(S.write_model_proto(pieces, trainer={"model_type": 2, "byte_fallback": True}))
    ids = [tok.piece_to_id("<0xE6>")] + tok.encode("ok")
    assert tok.decode(ids) == tok.decode(ids, errors="replace") == "\ufffd ok"
    assert tok.decode(ids, errors="ignore") == " ok"
    with pytest.raises(UnicodeDecodeError):
        tok.decode(ids, errors="strict")
    assert tok.decode(tok.encode("ok ok"), errors="strict") == "ok ok"


def test_tokenizer_json_of_the_family_saves_itself_and_checks_decode(exported, tmp_path):
    """``from_huggingface`` returned an object without ``save``/``save_huggingface`` (bare AttributeError);
    its ``decode`` ignored ``errors`` and took ids unchecked."""
    from tokenmill.errors import ConfigError

    path, _ = exported["trained"]
    Tokenizer.from_sentencepiece(path).save_huggingface(tmp_path / "t.json")
    tok = Tokenizer.from_huggingface(tmp_path / "t.json")
    tok.save_huggingface(tmp_path / "copy.json")
    assert (tmp_path / "copy.json").read_bytes() == (tmp_path / "t.json").read_bytes()
    again = Tokenizer.from_huggingface(tmp_path / "copy.json")
    assert again.encode("hello world") == tok.encode("hello world")
    with pytest.raises(ConfigError, match="save_huggingface"):
        tok.save(tmp_path / "x.json")
    ids = tok.encode("hello world")
    assert tok.decode(ids) == tok.decode(ids, errors="replace")
    with pytest.raises(ConfigError, match="errors='strict'"):
        tok.decode(ids, errors="strict")
    with pytest.raises(ConfigError):
        tok.decode(np.array([[1, 2], [3, 4]]))  # a batch: one sequence at a time


@pytest.mark.parametrize("dummy, rew", [(True, False), (False, False), (True, True), (False, True)])
def test_compiled_decode_equals_its_twin_and_sentencepiece(dummy, rew):
    """The compiled decode (``_sp_kernels.decode_pieces``) against ``decode_reference`` and sentencepiece itself: runs of byte
    pieces split by control pieces (each run checked on its own), a character's bytes across them, leading
    pieces that are only ``▁`` (all dropped under ``remove_extra_whitespaces``), unknown pieces."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = [("<unk>", 0, S.UNKNOWN), ("<s>", 0, S.CONTROL), ("</s>", 0, S.CONTROL), ("▁", -1, S.NORMAL),
              ("▁▁", -2, S.NORMAL), ("a", -3, S.NORMAL), ("▁a", -4, S.NORMAL), ("b▁", -5, S.NORMAL),
              ("<x>", 0, S.USER_DEFINED), ("é", -6, S.NORMAL)]
    pieces += [(f"<0x{b:02X}>", 0, S.BYTE) for b in range(256)]
    raw = S.write_model_proto(pieces, trainer={"model_type": 2, "byte_fallback": True},
                              normalizer={"name": "identity", "add_dummy_prefix": dummy,
                                          "remove_extra_whitespaces": rew})
    tok = S.SentencePieceTokenizer.from_bytes(raw)
    sp = spm.SentencePieceProcessor(model_proto=raw)
    byte = {b: tok.piece_to_id(f"<0x{b:02X}>") for b in (0x41, 0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9,
                                                         0xED, 0xA0, 0xFF, 0xC0)}
    choices = list(range(10)) + list(byte.values())

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(st.sampled_from(choices), max_size=24))
    def check(ids):
        assert tok.decode(ids) == sp.decode(ids) == S.decode_reference(tok.model, ids).decode(), ids
        assert tok.decode_bytes(ids) == S.decode_reference(tok.model, ids, replace=False), ids
        assert tok.decode(np.array(ids, np.int64)) == tok.decode(ids)

    check()
    run = [byte[0xE4], tok.piece_to_id("<s>"), byte[0xB8], byte[0xAD]]  # one character's bytes, split by a control
    assert tok.decode(run) == sp.decode(run) == "\ufffd\ufffd\ufffd"
    assert tok.decode([byte[0xE4], byte[0xB8], byte[0xAD]]) == "中"


def test_decode_skip_special_tokens(small):
    """``skip_special_tokens=True`` leaves out the control and unknown pieces' ids (as HF's decode of the
    model's tokenizer.json does: ``<unk>`` is a special token there; compared with HF in
    ``test_tokenizer_json_of_the_family_equals_hf``), where sentencepiece's decode drops the control pieces
    alone: sentencepiece's decode of the ids without them."""
    from tokenmill.errors import ConfigError

    tok, sp = small
    specials = sorted(tok.special_tokens.values())
    assert {tok.special_tokens[n] for n in ("<unk>", "<s>", "</s>", "<ctl>")} <= set(specials)
    rng = random.Random(5)
    for text in _texts(7, 40):
        ids = tok.encode(text, disallowed_special=())
        for _ in range(3):
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(specials))
        kept = [i for i in ids if i not in specials]
        assert tok.decode(ids, skip_special_tokens=True) == sp.decode(kept) == tok.decode(kept)
        assert tok.decode(ids) == sp.decode(ids)  # (the default: sentencepiece's own)
    with pytest.raises(ConfigError, match="skip_special_tokens"):
        tok.decode([5], skip_special_tokens="yes")


def test_decode_bytes_of_the_tokenizer_json_form_keeps_byte_fallback_bytes(exported, tmp_path):
    """``decode_bytes`` of the tokenizer.json form was ``decode(ids).encode()``: a byte-fallback piece decoded alone,
    or a run that forms no character, came back as U+FFFD (EF BF BD), so bytes decoded a few ids at a time and
    joined corrupted every character spelled by byte pieces. They are the pieces' bytes now, as the ``.model``
    form's."""
    import json

    path, body = exported["trained"]
    (tmp_path / "tokenizer.json").write_text(json.dumps(body), encoding="utf-8")
    js, model = Tokenizer.from_huggingface(tmp_path / "tokenizer.json"), Tokenizer.from_sentencepiece(path)
    text = "ab 𠀋 cd ☃ Ω"
    ids = js.encode(text)
    assert ids == model.encode(text)
    assert js.decode_bytes(ids) == model.decode_bytes(ids) == js.decode(ids).encode("utf-8")
    pieces = [i for i in ids if len(js.token_bytes(i)) == 1 and js.token_bytes(i)[0] >= 0x80]
    assert len(pieces) >= 4  # (𠀋 is spelled by byte pieces)
    streamed = b"".join(js.decode_bytes([i]) for i in pieces)
    assert streamed == b"".join(model.decode_bytes([i]) for i in pieces) == b"".join(js.token_bytes(i) for i in pieces)
    assert streamed.decode("utf-8")  # (the characters' own bytes)
    assert "\ufffd" in js.decode(pieces[:1])  # (decode itself keeps HF's U+FFFD)
