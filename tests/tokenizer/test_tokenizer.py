"""Tokenizer: round trips, special-token safety, files, and exact parity with tiktoken."""

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import corpus_sample
from tokenmill import ConfigError, FormatError, SpecialTokenError, Tokenizer, train_bpe

TEXTS = [
    "The quick brown fox jumps over the lazy dog. It's 2024; isn't it?\r\n\tTabs   and  spaces.",
    "滑动窗口的数字采样：低低低，常用字。Ünïcödé façade — naïve café 123456 ١٢٣ 🙂👩‍👩‍👧",
    "def f(x):\n    return x ** 2  # comment\n\n\nclass A: pass\n",
]


@pytest.fixture(scope="module")
def tok():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_bpe(TEXTS * 3, 400, special_tokens=["<|endoftext|>", "<|pad|>"])


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=200))
def test_round_trip_any_text(tok, text):
    assert tok.decode(tok.encode_ordinary(text)) == text
    assert tok.decode_bytes(tok.encode_ordinary(text)) == text.encode()


def test_encode_batch_equals_encode(tok):
    texts = TEXTS + ["", "x"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=2) == [tok.encode(t) for t in texts]


def test_special_tokens_refused_unless_allowed(tok):
    text = "hello<|endoftext|>world"
    with pytest.raises(SpecialTokenError, match=r"'<\|endoftext\|>' at character 5.*allowed_special"):
        tok.encode(text)
    eot = tok.special_tokens["<|endoftext|>"]
    assert tok.encode(text, allowed_special="all") == tok.encode_ordinary("hello") + [eot] + tok.encode_ordinary("world")
    assert tok.encode(text, allowed_special={"<|endoftext|>"}).count(eot) == 1
    assert eot not in tok.encode_ordinary(text)
    assert tok.decode(tok.encode_ordinary(text)) == text
    assert tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text)
    assert tok.decode([eot]) == "<|endoftext|>"
    # the first in the text is named (it was the first by name), and a disallowed string that is no special
    # token is not called one (the advice to allow it then failed: "not special tokens of this tokenizer")
    both = "a <|pad|> b <|endoftext|>"
    for text_ in (both, [both]):
        with pytest.raises(SpecialTokenError, match=r"'<\|pad\|>' at character 2"):
            tok.encode(text_) if isinstance(text_, str) else tok.encode_batch(text_)
    # a disallowed name that is no special token of this tokenizer is refused, as an allowed one is (tiktoken
    # searches the text for it: a misspelt name there made every special token's text plain text, silently)
    with pytest.raises(ConfigError, match=r"disallowed_special names \['ell'\], which are not special tokens"):
        tok.encode("hello", disallowed_special={"ell"})


def test_token_bytes_and_vocab(tok):
    assert tok.vocab_size == 400
    assert tok.token_bytes(65) == b"A"
    assert all(tok.token_bytes(256 + i) == tok.token_bytes(a) + tok.token_bytes(b)
               for i, (a, b) in enumerate(tok.merges.tolist()))
    rows = list(tok.trace.rows())
    assert rows[0][0] == 0 and rows[0][2] == 256 and rows[0][3] >= rows[-1][3]


def test_save_load_round_trip(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    again = Tokenizer.load(path)
    assert again == tok
    assert again.special_tokens == tok.special_tokens
    assert again.encode(TEXTS[1]) == tok.encode(TEXTS[1])
    assert again.trace.counts.tolist() == tok.trace.counts.tolist()
    assert not list(tmp_path.glob(".*tmp"))  # atomic write left nothing behind


def test_content_hash_is_the_files_hash(tok, tmp_path, gpt2_pair):
    """``content_hash`` writes the body's large lists with numpy: the same sha256 of the same canonical
    JSON as ``to_dict()`` makes, for every body: ranks (with ids no token holds), merges with and
    without training counts, and version 2 (an HF import: tokens, merges, merge ids, added tokens)."""
    from tokenmill.tokenizer.formats import tokenmill as fmt

    tok.save_huggingface(tmp_path / "tokenizer.json")
    imported = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
    plain = Tokenizer.from_merges(tok.merges[:50])
    ranks = Tokenizer.from_ranks({bytes([b]): b for b in range(256)} | {b"ab": 300, b"abc": 301},
                                 special_tokens={"<|x|>": 302})
    for t in (tok, plain, imported, ranks, gpt2_pair[1]):
        body = t.to_dict()
        assert fmt.content_hash(t._spec, t._merge_counts) == body["hash"] == t.content_hash
    assert {plain.to_dict()["version"], imported.to_dict()["version"]} == {1, 2}
    assert imported.to_dict()["model"]["merge_ids"] and imported.to_dict()["added_tokens"]


def test_a_pattern_preset_that_is_not_the_pattern_is_refused(tok, tmp_path):
    """``pattern_preset`` was written and never read: a file edited (its hash made again) to name another preset,
    or none tokenmill knows, or whose pattern was edited under its preset's name, loaded without a word."""
    from tokenmill._io import canonical_hash
    from tokenmill.errors import FormatError

    body = tok.to_dict()
    assert body["pattern_preset"] is not None
    for edit, says in (({"pattern_preset": "o200k"}, "is not the file's pattern"),
                       ({"pattern_preset": "nope"}, "is no preset this tokenmill knows"),
                       ({"pattern": r"\w+"}, "is not the file's pattern"), ({"pattern_preset": None}, None)):
        edited = {k: v for k, v in body.items() if k != "hash"} | edit
        edited["hash"] = canonical_hash(edited)
        (tmp_path / "t.json").write_text(json.dumps(edited))
        if says is None:
            assert Tokenizer.load(tmp_path / "t.json").encode("hi there") == tok.encode("hi there")
        else:
            with pytest.raises(FormatError, match=f"t.json: pattern_preset .*{says}; the file was edited"):
                Tokenizer.load(tmp_path / "t.json")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=9), max_size=40),
       st.lists(st.integers(0, 2**63 - 1) | st.sampled_from([0, 9, 10, 99, 100, 2**32 - 1, 2**32, 10**18]),
                max_size=40))
def test_large_lists_written_as_json_writes_them(vocab, ints):
    from tokenmill.tokenizer.formats import tokenmill as fmt

    compact = {"separators": (",", ":")}
    arr = np.array(ints, np.int64)
    pairs = arr[: arr.size // 2 * 2].reshape(-1, 2)
    default = fmt._PIECE
    try:
        for fmt._PIECE in (default, 1, 3):  # whole, and rendered in pieces joined
            assert fmt._b64_json(vocab) == json.dumps(fmt._b64(vocab), **compact)
            assert fmt._ints_json(arr, pairs=False) == json.dumps(ints, **compact)
            assert fmt._ints_json(pairs, pairs=True) == json.dumps(pairs.tolist(), **compact)
    finally:
        fmt._PIECE = default
    if ints:
        assert fmt._ints_json(-arr - 1, pairs=False) is None  # negative: the caller's plain way


def test_corrupted_files_fail_clearly(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    body = json.loads(path.read_text())

    path.write_text(path.read_text()[:100])
    with pytest.raises(FormatError, match=r"tok.json.*not valid JSON"):
        Tokenizer.load(path)

    tampered = dict(body, pattern="x")
    path.write_text(json.dumps(tampered))
    with pytest.raises(FormatError, match="hash mismatch"):
        Tokenizer.load(path)

    newer = dict(body, version=99)
    path.write_text(json.dumps(newer))
    with pytest.raises(FormatError, match="version 99 is newer"):
        Tokenizer.load(path)

    path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(FormatError, match="not a tokenmill tokenizer"):
        Tokenizer.load(path)

    with pytest.raises(FormatError, match="does not exist"):
        Tokenizer.load(tmp_path / "missing.json")


def test_pathological_long_runs_are_fast_enough(tok):
    # One chunk of 200k identical letters: the heap-based merge is O(n log n), not O(n^2).
    text = "a" * 200_000
    assert tok.decode(tok.encode_ordinary(text)) == text
    emoji = "🙂" * 20_000
    assert tok.decode(tok.encode_ordinary(emoji)) == emoji


# -- tiktoken parity with GPT-2's real ranks ---------------------------------------------------------
@pytest.fixture(scope="module")
def gpt2_pair(gpt2_ranks_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from tokenmill.tokenizer.pretokenize.patterns import GPT2

    special = {"<|endoftext|>": 50256}
    enc = tiktoken.Encoding("gpt2-local", pat_str=GPT2, mergeable_ranks=load_tiktoken_bpe(str(gpt2_ranks_path)),
                            special_tokens=special)
    ours = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens=special)
    return enc, ours


def test_gpt2_parity_on_generated_text(gpt2_pair):
    enc, ours = gpt2_pair
    import random

    rng = random.Random(0)
    alphabet = list("abcdefghij XYZ  \n\r\t'sll've.,;!?0123456789") + ["é", "低", "🙂", "\u00a0", "\u3000", "ſ", "K"]
    texts = TEXTS + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300))) for _ in range(300)]
    for t in texts:
        assert ours.encode_ordinary(t) == enc.encode_ordinary(t), t
    t = "a<|endoftext|>b"
    assert ours.encode(t, allowed_special="all") == enc.encode(t, allowed_special="all")
    assert ours.vocab_size == enc.n_vocab


@pytest.mark.slow
def test_gpt2_parity_on_adversarial_text(gpt2_pair):
    """Long runs, very long words, whitespace runs, mixed scripts; and surrogates, as tiktoken rewrites
    them (``replace_surrogates``), each refused as it is."""
    from tests.tokenizer.adversarial import assert_adversarial_equal

    enc, ours = gpt2_pair
    assert_adversarial_equal(ours, enc)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=100))
def test_gpt2_parity_random_unicode(gpt2_pair, text):
    enc, ours = gpt2_pair
    assert ours.encode_ordinary(text) == enc.encode_ordinary(text)


@pytest.mark.corpus
@pytest.mark.slow
def test_gpt2_parity_on_real_text_four_scripts(gpt2_pair, corpora):
    enc, ours = gpt2_pair
    total = 0
    for script, budget in (("en", 4_000_000), ("zh", 3_000_000), ("multi", 2_000_000), ("code", 2_000_000)):
        for text in corpus_sample(corpora, script, budget, stride=3):
            assert ours.encode_ordinary(text) == enc.encode_ordinary(text)
            total += len(text.encode())
    assert total >= 10_000_000


# -- the compiled encoder equals the pure-Python twin -------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=300), st.sampled_from(["gpt2", "gpt4", "o200k", None, r"\w+"]))
def test_compiled_encoder_equals_python_twin(text, pattern):
    tok = Tokenizer.from_merges(_MERGES, pattern=pattern)
    assert tok.encode_ordinary(text) == tok.encode_ordinary_python(text)
    assert tok.decode(tok.encode_ordinary(text)) == text


_MERGES = train_bpe(["aaaa bbbb abab 低低低 🙂🙂 the then there " * 3, "x" * 70], 289).merges


def test_long_chunks_and_cache_reset(monkeypatch):
    from tokenmill.tokenizer.bpe import encoder

    monkeypatch.setattr(encoder, "_CACHE_LIMIT", 3)  # force resets
    tok = Tokenizer.from_merges(_MERGES, pattern="gpt4")
    texts = ["a" * n for n in (1, 2, 47, 48, 49, 255, 256, 257, 5000)] + ["the then there " * 20, "低" * 100]
    for t in texts * 2:
        assert tok.encode_ordinary(t) == tok.encode_ordinary_python(t)


def test_arguments_of_the_wrong_kind_are_config_errors(tok, tmp_path):
    """They raised a bare TypeError (None, an int) or went on character by character (a str)."""
    from tokenmill import ConfigError

    for bad, kind in ((None, "NoneType"), ("abc", "str"), (5, "int"), (b"ab", "bytes")):
        with pytest.raises(ConfigError, match=rf"^ids must be an iterable of token ids \(ints\), not {kind}"):
            tok.decode(bad)
    ids = np.array([tok.encode("ab"), tok.encode("ab")])  # a batch: flattened, it read as one text "abab"
    with pytest.raises(ConfigError, match=r"^ids is a 2-D array of shape \(2, \d+\); decode one sequence at a time"):
        tok.decode(ids)
    assert tok.decode(ids[0]) == "ab" and tok.decode(np.array(ids[0], np.uint16)) == "ab"
    for bad in ("no", 0, None):  # as_arrays="no" returned arrays
        with pytest.raises(ConfigError, match=rf"^as_arrays={bad!r} must be True or False"):
            tok.encode_batch(["ab"], as_arrays=bad)
    for bad in ("bogus", None, 1):  # refused up front, not at the first byte that needed the handler
        with pytest.raises(ConfigError, match=rf"^errors={bad!r} is not a codec error handler"):
            tok.decode(ids[0], errors=bad)
    assert tok.decode([0xFF], errors="backslashreplace") == "\\xff" and tok.decode([0xFF], errors="ignore") == ""
    for bad, kind in ((None, "NoneType"), (3, "int")):
        with pytest.raises(ConfigError, match=rf"^the output path is {kind}, not a str or a path"):
            tok.save(bad)
    tok.save(str(tmp_path / "t.json").encode())  # a bytes path is a path
    assert Tokenizer.load(tmp_path / "t.json") == tok


def test_lone_surrogate_is_a_clear_error(tok):
    from tokenmill import InputError

    with pytest.raises(InputError, match="lone surrogate at character 1"):
        tok.encode("a\ud800b")


def test_encode_batch_arrays_and_threads():
    tok = Tokenizer.from_merges(_MERGES, pattern="gpt4")
    texts = TEXTS * 5 + ["", "低" * 300]
    expected = [tok.encode(t) for t in texts]
    for threads in (None, 1, 2, 3):
        assert tok.encode_batch(texts, num_threads=threads) == expected
        assert [a.tolist() for a in tok.encode_batch(texts, num_threads=threads, as_arrays=True)] == expected


def test_gpt2_parity_on_pathological_runs(gpt2_pair):
    # Long runs of one letter / emoji are one chunk each (slow in naive BPE). Equality on runs that
    # tiktoken itself handles quickly; the heap path makes 10 MB runs linear-ish (bench/tokenizer_speed.py).
    enc, ours = gpt2_pair
    for text in ["a" * 20_000, "🙂" * 5_000, " " * 5_000, "1" * 5_000, "\n" * 3_000, "ab" * 10_000]:
        assert ours.encode_ordinary(text) == enc.encode_ordinary(text)


def test_every_preset_name_splits_in_training_and_misspelled_names_are_refused(tmp_path):
    """``train_bpe(pattern="llama3")`` (also qwen2, qwen3.5: names ``Tokenizer`` knows) resolved the name as a
    literal regex that matches nothing: each document one chunk, merges across words, saved under the real
    Llama 3 regex that never uses them. A misspelled name ("GPT4", "cl100k_base") was compiled as a regex
    matching only that word, silently."""
    from tokenmill import ConfigError
    from tokenmill.tokenizer.pretokenize.patterns import FAMILY_REGEX

    text = "The cats, and the dogs; and 12345 more cats.\n" * 40
    for name, rx in FAMILY_REGEX.items():
        tok = train_bpe([text], 300, pattern=name)
        assert tok.pattern == rx and tok.train_report.chunks > 100, name
        assert all(b", and" not in tok.token_bytes(i) for i in range(256, tok.vocab_size))  # no merge across words
        tok.save(tmp_path / "t.json")
        assert Tokenizer.load(tmp_path / "t.json").encode(text) == tok.encode(text)
    for bad in ("GPT4", "cl100k_base", "o200k_base", "llama-3", "gpt5"):
        with pytest.raises(ConfigError, match=f"pattern='{bad}' is not a preset name .* llama3, qwen2, qwen3.5"):
            train_bpe([text], 300, pattern=bad)
        with pytest.raises(ConfigError, match="is not a preset name"):
            Tokenizer.from_merges([(104, 105)], pattern=bad)
    assert Tokenizer.from_merges([(104, 105)], pattern=r"\w+|\s+").encode("hi hi") == [256, 32, 256]  # a regex


def test_special_tokens_as_a_set_are_refused_and_a_disallowed_token_stays_disallowed(gpt2_ranks_path):
    """Special tokens given as a set got ids in the set's order, which changes with PYTHONHASHSEED (the
    ids and the content hash changed between runs); a token both allowed and explicitly disallowed was
    encoded, where tiktoken raises."""
    from tokenmill import ConfigError

    for make in (lambda s: Tokenizer.from_merges([(104, 105)], special_tokens=s),
                 lambda s: train_bpe(["hi hi"], 262, special_tokens=s)):
        with pytest.raises(ConfigError, match="special_tokens is a set, whose order Python does not keep"):
            make({"<s>", "</s>", "<pad>"})
        assert list(make(["<s>", "</s>"]).special_tokens) == ["<s>", "</s>"]
    assert train_bpe(["abc abc"], 260, special_tokens=None).special_tokens == {}
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern="gpt2", special_tokens={"<|endoftext|>": 50256})
    eot = {"<|endoftext|>"}
    for allowed in ("all", eot):
        with pytest.raises(SpecialTokenError):
            tok.encode("a<|endoftext|>", allowed_special=allowed, disallowed_special=eot)
    assert tok.encode("a<|endoftext|>", allowed_special=eot, disallowed_special="all") == [64, 50256]
    assert tok.encode("plain", allowed_special="all", disallowed_special=eot) == tok.encode("plain")


def test_constructor_arguments_are_checked_before_use():
    """A special id of 2**31 - 1 was accepted and took the process's memory at the first encode (a Python
    int per id); a bool in a merge became id 1; ranks that are not a dict of bytes, and a str vocabulary,
    raised bare AttributeError / TypeError."""
    from tokenmill import ConfigError

    with pytest.raises(ConfigError, match=r"special token '<s>' id=2,147,483,647 is out of range"):
        Tokenizer.from_merges([(104, 105)], special_tokens={"<s>": 2**31 - 1})
    assert Tokenizer.from_merges([(104, 105)], special_tokens={"<s>": 300}).encode("hi") == [256]
    with pytest.raises(FormatError, match=r"merge 0 = \(True, 105\) holds a bool"):
        Tokenizer.from_merges([(True, 105)])
    for ranks, match in ((None, "ranks must be a dict"), ([b"a"], "ranks must be a dict"),
                         ({**{bytes([i]): i for i in range(256)}, "hi": 256}, r"the key 'hi' \(a str\); tokens are bytes")):
        with pytest.raises(ConfigError, match=match):
            Tokenizer.from_ranks(ranks)
    with pytest.raises(ConfigError, match=r"vocab\[0\] is a str"):
        Tokenizer.from_merge_list(["a"] * 256, [], pattern="gpt2")


def test_decoding_an_unassigned_id_says_so():
    """An id inside the vocabulary's range that no token holds (cl100k's 100256, between its ranks and its
    special tokens) was called "out of range for vocab_size=100,258"."""
    from tokenmill import ConfigError

    tok = Tokenizer.from_merges([(104, 105)], special_tokens={"<s>": 260})
    with pytest.raises(ConfigError, match=r"token id 258 holds no token: this tokenizer's ids 0 .. 260 leave it"):
        tok.decode([258])
    with pytest.raises(ConfigError, match="token id 261 is out of range for vocab_size=261"):
        tok.decode([261])


def test_loaders_name_a_non_path_and_batch_errors_name_their_text():
    """A loader handed 123 or None raised Python's bare TypeError; a batch's SpecialTokenError did not
    say which text spelled the token (its surrogate and type errors did)."""
    from tokenmill.errors import ConfigError, SpecialTokenError
    from tokenmill.tokenizer.sentencepiece import SentencePieceTokenizer

    for load in (Tokenizer.load, Tokenizer.from_huggingface, Tokenizer.from_tekken, Tokenizer.from_sentencepiece,
                 Tokenizer.from_tiktoken):
        for bad in (123, None):
            with pytest.raises(ConfigError, match=f"path={bad!r} is a {type(bad).__name__}; pass a file path"):
                load(bad)
    with pytest.raises(ConfigError, match="raw is a str; pass the bytes of a .model file"):
        SentencePieceTokenizer.from_bytes("abc")
    tok = Tokenizer.from_merges([(104, 105)], pattern="gpt4", special_tokens=["<s>"])
    for encode in (tok.encode_batch, tok.encode_flat):
        for threads in (1, 2):
            with pytest.raises(SpecialTokenError, match="^text 2 of the batch: the text contains the special token '<s>'"):
                encode(["ok", "fine", "a<s>", "b<s>"] + ["x" * 3000] * 40, num_threads=threads)
    with pytest.raises(SpecialTokenError, match="^the text contains"):  # a batch of one: as encode says it
        tok.encode_batch(["a<s>"])


def test_decode_checks_every_id_at_once_and_names_the_one_at_fault(tok):
    # the ids are checked as a whole (exact ints within int64) and looked up in one table; anything else takes
    # the id-by-id path, which names the first at fault (decoding 322K ids took 0.5 s id by id)
    from tokenmill import ConfigError

    eot, ids = tok.special_tokens["<|endoftext|>"], tok.encode(TEXTS[1])
    assert tok.decode(ids + [eot] + ids) == TEXTS[1] + "<|endoftext|>" + TEXTS[1]
    assert tok.decode(iter(ids)) == tok.decode(np.array(ids)) == tok.decode(tuple(ids)) == TEXTS[1]
    assert tok.decode([]) == "" and tok.decode_bytes([np.int64(104)]) == tok.token_bytes(104)
    for bad, match in (([1, True], r"token id=True must be an integer \(got a bool\)"),
                       ([1, 2.0], r"token id=2.0 must be an integer"),
                       ([1, 2**63], r"token id=9,223,372,036,854,775,808 is out of range"),
                       ([1, -1], r"token id -1 is out of range for vocab_size=400"),
                       ([1, 400], r"token id 400 is out of range")):
        with pytest.raises(ConfigError, match=match):
            tok.decode(bad)


def test_long_id_sequences_decode_alike_in_every_form_and_fail_alike(tok):
    """16 ids or more go to a compiled join (a list read through the C API, an array as it is): the same
    bytes for lists, tuples, iterators, numpy arrays of any integer dtype, lists of numpy ints and torch
    tensors (which ``generate`` returns; they were refused id by id), and the same errors, naming the same
    id, as a short sequence."""
    import torch

    from tokenmill import ConfigError

    eot = tok.special_tokens["<|endoftext|>"]
    ids = tok.encode(TEXTS[1] * 4) + [eot] + tok.encode(TEXTS[2])
    for n in (0, 1, 15, 16, 17, len(ids)):
        part = ids[:n]
        want = b"".join(tok.token_bytes(i) for i in part)
        forms = (part, tuple(part), iter(part), [np.int64(i) for i in part], np.array(part, np.int64),
                 np.array(part, np.uint16), np.array(part, np.int32), np.array(part, np.uint64),
                 np.repeat(np.array(part, np.int64), 2)[::2], torch.tensor(part, dtype=torch.long), torch.tensor(part).int())
        for form in forms:
            assert tok.decode_bytes(form) == want, (n, type(form))
    assert tok.decode(torch.tensor(ids)) == tok.decode(ids)
    with pytest.raises(ConfigError, match=r"^ids is a 2-D array of shape \(2, 3\)"):
        tok.decode(torch.zeros((2, 3), dtype=torch.long))
    with pytest.raises(ConfigError, match=r"^ids is a Tensor that numpy cannot read .*\(a torch tensor: ids.cpu\(\)\)"):
        tok.decode(torch.tensor(ids, device="meta"))  # (as a tensor on a GPU)
    with pytest.raises(ConfigError, match="ids has dtype bool"):
        tok.decode(np.ones(40, bool))
    unassigned = Tokenizer.from_merges([(104, 105)], special_tokens={"<s>": 260})
    for head in ([], [104] * 40):  # a short and a long sequence: the same errors
        for bad, match in (([1, True], r"token id=True must be an integer \(got a bool\)"),
                           ([False, 1], r"token id=False must be an integer \(got a bool\)"),
                           ([1, 2.0], r"token id=2.0 must be an integer"),
                           ([1, "3"], r"token id='3' must be an integer"),
                           ([1, 2**63], r"token id=9,223,372,036,854,775,808 is out of range"),
                           ([1, -1], r"token id -1 is out of range for vocab_size=261"),
                           ([1, 261], r"token id 261 is out of range"),
                           ([1, 258], r"token id 258 holds no token")):
            for form in (head + bad, tuple(head + bad)):
                with pytest.raises(ConfigError, match=match):
                    unassigned.decode(form)
        for bad, match in (([1, -1], r"token id -1 is out of range"), ([1, 258], r"token id 258 holds no token")):
            with pytest.raises(ConfigError, match=match):
                unassigned.decode(np.array(head + bad))
    assert unassigned.decode([104, 105, 256, 260] * 10) == "hihi<s>" * 10


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["<|endoftext|>", "<|pad|>", "", " ", "a b", "低低", "\n", "x<|", "|>"]),
                         max_size=6).map("".join), max_size=8))
def test_a_batch_with_special_tokens_equals_each_text_alone(tok, texts):
    # the plain pieces of every text go through the kernel in one pass, the tokens' ids spliced in between
    want = [tok.encode(t, allowed_special="all") for t in texts]
    assert tok.encode_batch(texts, allowed_special="all") == want
    assert [a.tolist() for a in tok.encode_batch(texts, allowed_special="all", as_arrays=True)] == want
    ids, bounds = tok.encode_flat(texts, allowed_special={"<|pad|>"}, disallowed_special=())
    assert [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == \
        [tok.encode(t, allowed_special={"<|pad|>"}, disallowed_special=()) for t in texts]


def test_a_tokenizer_pickles_for_other_processes(tok, tmp_path):
    """A Tokenizer could not be pickled (its spec held a mappingproxy, its caches thread-locals): a
    multiprocessing pool, spawned DataLoader workers or ``datasets.map(num_proc=...)`` failed to send it.
    It goes as its checked file form; an HF import (added tokens) too."""
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    tok.save_huggingface(tmp_path / "tokenizer.json")
    imported = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
    text = TEXTS[1] + "<|endoftext|>" + TEXTS[2]
    for t in (tok, imported):
        want = t.encode(text, allowed_special="all")
        assert t.decode(want) == text  # (its caches made: they are not sent)
        back = pickle.loads(pickle.dumps(t))
        assert type(back) is type(t) and back.content_hash == t.content_hash
        assert back.encode(text, allowed_special="all") == want and back.decode(want) == text
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
        assert ex.submit(Tokenizer.encode, tok, text, allowed_special="all").result() == tok.encode(
            text, allowed_special="all")
    # a copy keeps the file it was read from: its saves and exports refuse to write over it, as the original's
    # do (an unpickled copy had written a tokenizer.json over the rank file it came from)
    import copy

    from tokenmill.errors import ConfigError

    tok.save_tiktoken(tmp_path / "r.tiktoken")
    ranks = Tokenizer.from_tiktoken(tmp_path / "r.tiktoken", pattern="gpt2")
    for t, own in ((ranks, tmp_path / "r.tiktoken"), (imported, tmp_path / "tokenizer.json")):
        for c in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
            assert c.read_from == t.read_from == (str(own),) and c.hf_post_processor == t.hf_post_processor
            with pytest.raises(ConfigError, match="is also an input"):
                c.save_huggingface(own)
