"""tokenizer.json import on variants built to exercise every component HF honours, against HF itself:
ids in any order (byte tokens not at 0-255, a special token at id 0), merges as strings or pairs,
ignore_merges, added tokens (special or not, lstrip/rstrip/single_word/normalized), NFC, Split,
Digits, ByteLevel with its own regex and add_prefix_space; and clear refusals of the rest."""

from __future__ import annotations

import copy
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmill import Tokenizer, train_bpe
from tokenmill.errors import FormatError
from tokenmill.tokenizer.formats.export import onig_pattern, to_huggingface_dict
from tokenmill.tokenizer.pretokenize.patterns import GPT2, GPT4

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def base() -> dict:
    from tokenmill.corpus import default_corpus

    tok = train_bpe(default_corpus(docstrings=False), 700, pattern="gpt4")
    return to_huggingface_dict(tok)


def _permuted(body: dict, seed: int) -> dict:
    """Ids shuffled (byte tokens anywhere), "<s>" at id 0 in the model vocabulary."""
    body = copy.deepcopy(body)
    vocab = body["model"]["vocab"]
    order = list(vocab)
    random.Random(seed).shuffle(order)
    body["model"]["vocab"] = {"<s>": 0, **{s: i + 1 for i, s in enumerate(order)}}
    return body


ADDED = [
    {"content": "<s>", "special": True, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False},
    {"content": "<|x|>", "special": True, "single_word": False, "lstrip": True, "rstrip": True, "normalized": False},
    {"content": "hello", "special": False, "single_word": True, "lstrip": False, "rstrip": False, "normalized": False},
    {"content": "é", "special": False, "single_word": False, "lstrip": False, "rstrip": False, "normalized": True},
    {"content": "[MASK]", "special": True, "single_word": False, "lstrip": True, "rstrip": False, "normalized": True},
    {"content": "ab", "special": False, "single_word": False, "lstrip": False, "rstrip": True, "normalized": False},
]


def _variant(base: dict, kind: str) -> dict:
    body = _permuted(base, KINDS.index(kind))
    body["added_tokens"] = [dict(t, id=99_999) for t in ADDED]  # HF re-derives the ids; so does the import
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if kind == "split":
        body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": onig_pattern(GPT4)}, "behavior": "Isolated", "invert": False}, bl]}
        body["model"]["merges"] = [" ".join(m) for m in body["model"]["merges"]]  # "a b" strings
    elif kind == "bytelevel_prefix":
        body["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                 "use_regex": True}
        body["normalizer"] = {"type": "NFC"}
    elif kind == "digits_sequence":
        body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"Regex": GPT2}, "behavior": "Isolated", "invert": False}, bl]}
        body["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    elif kind == "deepseek":  # DeepSeek-V3's pre-tokenizer: three Splits in a Sequence, then ByteLevel
        body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[一-龥\u3040-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": DEEPSEEK}, "behavior": "Isolated", "invert": False},
            dict(bl)]}
    elif kind == "bloom":  # BLOOM's: Oniguruma reads '[' inside a class as a nested class (a union)
        body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": " ?[^(\\s|[.,!?…。，、।۔،])]+"}, "behavior": "Isolated",
             "invert": False}, dict(bl)]}
    elif kind == "ignore_merges":
        body["model"]["ignore_merges"] = True
        body["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated", "invert": False}, bl]}
    return body


KINDS = ["split", "bytelevel_prefix", "digits_sequence", "ignore_merges", "deepseek", "bloom"]
DEEPSEEK = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
            r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@pytest.fixture(scope="module")
def pairs(base, tmp_path_factory):
    out = {}
    for kind in KINDS:
        path = tmp_path_factory.mktemp(kind) / "tokenizer.json"
        path.write_text(json.dumps(_variant(base, kind), ensure_ascii=False))
        out[kind] = Tokenizer.from_huggingface(path.parent), tokenizers.Tokenizer.from_file(str(path))
    return out


PIECES = ["!ab", "[x", "#1", "日本", "ひら", "€", "hello", " hello", "hellohello", "<s>", "<|x|>", "  <|x|>  ", "[MASK]", " [MASK]", "é", "e\u0301", "ab",
          "ab  ", "a", "b", " ", "  ", "\n", "12345", "٣", "The", " cat's", "低", "🙂", "\u00a0", "x", "_", ".", "Hello", "(", "|", ")", "…", "。", "]",
          # letters since Unicode 17 (the regex module's), not in 16 (HF's): beside "hello" (single_word) they are
          # no word characters
          "\u0558", "\U000323b0"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(PIECES), max_size=25))
def test_variants_equal_hf(pairs, parts):
    text = "".join(parts)
    for kind, (ours, hf) in pairs.items():
        want = hf.encode(text, add_special_tokens=False).ids
        assert ours.encode(text, allowed_special="all") == want, kind
        assert ours.encode_ordinary_python(text) == ours.encode_ordinary(text), kind
        assert ours.encode_python(text, allowed_special="all") == want, kind


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.lists(st.sampled_from(PIECES), max_size=12).map("".join), min_size=1, max_size=6))
def test_batch_equals_each_text_with_added_tokens(pairs, docs):
    """encode_batch finds added and disallowed special tokens in one pass over the batch (a text spelling
    none is plain); the ids, and the error for a text spelling a disallowed special token, are those of
    encoding each text."""
    from tokenmill.errors import SpecialTokenError

    for kind, (ours, _) in pairs.items():
        for kw in ({}, {"disallowed_special": ()}, {"allowed_special": "all"}):
            want = []
            try:
                for t in docs:
                    want.append(ours.encode(t, **kw))
            except SpecialTokenError as e:
                with pytest.raises(SpecialTokenError) as got:
                    ours.encode_batch(docs, num_threads=1, **kw)
                prefix = f"text {len(want)} of the batch: " if len(docs) > 1 else ""  # the batch names the text
                assert str(got.value) == prefix + str(e), kind
                continue
            assert ours.encode_batch(docs, num_threads=1, **kw) == want, (kind, kw)


def test_sequence_of_splits_runs_compiled(pairs):
    ours, _ = pairs["deepseek"]
    enc = ours._compiled()
    assert len(enc.split_patterns) == 2
    from tokenmill.tokenizer.pretokenize.splitter import has_compiled

    assert all(has_compiled(p) for p in (enc.pattern, *enc.split_patterns))
    # a batch splits in one pass too (each pattern once over all texts; it was text by text: ~8x slower on lines)
    texts = ["x hello 12345 ab", "  é\n\n123", "abc", "1 2 3  "]
    ids, bounds = enc.encode_many(texts)
    assert [ids[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])] == [enc.encode(t).tolist() for t in texts]


def test_variant_ids_and_round_trip(pairs, tmp_path):
    ours, hf = pairs["split"]
    assert ours.special_tokens["<s>"] == 0 == hf.token_to_id("<s>")
    assert ours.added_tokens["hello"] == hf.token_to_id("hello")
    assert ours.vocab_size == hf.get_vocab_size()
    assert sorted(ours.token_bytes(hf.token_to_id(c)) for c in "ab") == [b"a", b"b"]
    text = "x hello <|x|>  é ab  12"
    ids = ours.encode(text, allowed_special="all")
    assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
    for kind, (tok, _) in pairs.items():
        tok.save(tmp_path / f"{kind}.json")
        again = Tokenizer.load(tmp_path / f"{kind}.json")
        assert again.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all"), kind
        tok.save_huggingface(tmp_path / f"{kind}-hf.json")
        hf2 = tokenizers.Tokenizer.from_file(str(tmp_path / f"{kind}-hf.json"))
        assert hf2.encode(text, add_special_tokens=False).ids == tok.encode(text, allowed_special="all"), kind


def test_encode_special_tokens_as_text(pairs):
    ours, hf = pairs["split"]
    text = "a <|x|> b<s>c hello"
    hf.encode_special_tokens = True
    try:
        assert ours.encode(text, disallowed_special=()) == hf.encode(text, add_special_tokens=False).ids
    finally:
        hf.encode_special_tokens = False


def _other_form(merge):
    return merge.split(" ") if isinstance(merge, str) else " ".join(merge)


@pytest.mark.parametrize("edit, named", [
    (lambda b: b["model"].update(type="WordPiece"), "WordPiece"),
    (lambda b: b["model"].update(type="Unigram"), "Unigram"),
    (lambda b: b["model"].update(byte_fallback=True), "byte_fallback"),
    (lambda b: b["model"].update(dropout=0.1), "dropout"),
    (lambda b: b.update(normalizer={"type": "Lowercase"}), "Lowercase"),
    (lambda b: b.update(normalizer={"type": "NFKC"}), "NFKC"),
    (lambda b: b.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}), "Metaspace"),
    (lambda b: b.update(pre_tokenizer={"type": "Whitespace"}), "Whitespace"),
    (lambda b: b.update(pre_tokenizer=None), "ByteLevel"),
    (lambda b: b["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"), "Removed"),
    (lambda b: b["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "[]a]+"}), "first in a class"),
    (lambda b: b["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Punctuation", "behavior": "Contiguous"}),
     "Punctuation"),
    (lambda b: b["pre_tokenizer"]["pretokenizers"].append({"type": "Digits", "individual_digits": False}),
     "after ByteLevel"),  # Falcon's: splits of the byte-level string
    # what HF refuses too ("Missing vocab/merges", "invalid type: null"), read as no merges / no added tokens
    (lambda b: b["model"].pop("merges"), "the BPE model has no merges"),
    (lambda b: b["model"].pop("vocab"), "the BPE model has no vocab"),
    (lambda b: b.update(added_tokens=None), "added_tokens"),
    (lambda b: b.update(version="2.0"), "version = '2.0'"),  # HF: "Unknown tokenizer version"
    # after an empty match Oniguruma steps on, the regex module retries ('a*|b+' on "bb": HF b|b, tokenmill bb)
    (lambda b: b["pre_tokenizer"]["pretokenizers"][0].update(pattern={"Regex": "a*|b+"}), "match the empty string"),
    (lambda b: b.update(version=1), "version = 1"),
    # merges as 'a b' strings and [a, b] pairs in one list (HF: "did not match any variant of untagged enum
    # MergeType"): had loaded
    (lambda b: b["model"]["merges"].__setitem__(1, _other_form(b["model"]["merges"][1])),
     r"model.merges mixes forms: merge 0 is an .* merge 1 "),
])
def test_refuses_what_it_cannot_reproduce(base, tmp_path, edit, named):
    body = copy.deepcopy(base)
    edit(body)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(body))
    with pytest.raises(FormatError, match=named) as e:
        Tokenizer.from_huggingface(path)
    assert str(path) in str(e.value)


def test_not_json(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{nope")
    with pytest.raises(FormatError, match="not valid JSON"):
        Tokenizer.from_huggingface(tmp_path)


CLASS_ITEMS = ["a", "b", "(", "|", ")", r"\s", ".", ",", "[xy]", "[.,]", r"\d", "[(|]", r"\[", r"\]", "[[:digit:]z]"]


@settings(max_examples=80, deadline=None)  # each example compiles a new pattern (~0.12 s)
@given(items=st.lists(st.sampled_from(CLASS_ITEMS + ["[^xy]", "[^(a]"]), min_size=1, max_size=5),
       negated=st.booleans(), intersect=st.sampled_from(["", "&&[^a(]", "&&[a-z.]", "&&\\S"]),
       text=st.text(st.sampled_from("abxyz(|). ,19[]\n"), max_size=30))
def test_nested_classes_split_as_oniguruma(items, negated, intersect, text):
    """Split regexes are Oniguruma's: a class nested in a class is a union (BLOOM's pattern), not the
    end of the class as ``regex`` would read it, and ``&&`` intersects; compiled and through the
    ``regex`` module alike."""
    from tokenizers import Regex, pre_tokenizers

    from tokenmill.tokenizer.formats.huggingface import onig_classes
    from tokenmill.tokenizer.pretokenize.patterns import split_with_gaps
    from tokenmill.tokenizer.pretokenize.splitter import split_text_compiled

    rx = " ?[" + ("^" if negated else "") + "".join(items) + intersect + "]+"
    want = [p for p, _ in pre_tokenizers.Split(Regex(rx), "isolated").pre_tokenize_str(text)]
    assert split_with_gaps(onig_classes(rx), text) == want
    assert split_text_compiled(text, onig_classes(rx), allow_general=True) == want  # compiled (None if not)


@pytest.mark.parametrize("rx, text", [
    (r"^[a-z]+|.", "the\nthe\n"), (r"[a-z]+$|.", "the\nthe\n"), (r"[a-z]+\Z|.", "the\nthe\n"),
    (r"\h+|.", "a  b 09fF"), (r"\x{74}+|.", "the ttt"), (r"(?m:t.)|.", "t\nhe"), (r"\Athe|.", "the the"),
    # "pL" and "PL" as letters to Oniguruma (a property needs braces there); x{n}? is (?:x{n})? there
    (r"\pL+|\PL+", "the pL 12"), (r"\pN|\PN+", "x 1 pN"), (r"\d{2}?|\D+|\d", "x 12345"),
    # the regex module cannot compile these; Oniguruma can (\e: escape, \Q..\E: quoted, a repeat of a repeat)
    (r"\e|[^\x1b]+", "a\x1bb"), (r"\Q.\E|[^.]+", "a.b"), (r"t{1}{2}|[^t]+|t", "the ttt"),
    # '--' and '~~' in a class: set operations in tiktoken's engine (and tokenmill's reading of one), a range or two
    # characters in Oniguruma's
    (r"[a-z--h]+|.", "the -zeta"), (r"[a-z~~e]+|.", "the ~eta"),
    # \w (ZWJ a word character to the regex module only), POSIX classes, and under (?i): a property Oniguruma does
    # not fold, a range or an i (İ), text full case folding reaches (ß for ss)
    (r"\w+|\s+|[^\w\s]+", "क्\u200dष"), (r"(?i:\p{Lu})+|\s+|[^\s]", "abc"), (r"(?i:[a-z])+|\s+|[^\s]", "İstanbul ı"),
    (r"(?i:'s|'t|ss)|\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+", "ßen"), (r"[[:punct:]]+|[^[:punct:]]+", "a.b"),
])
def test_split_regexes_that_oniguruma_reads_otherwise_are_refused(tmp_path, rx, text):
    """HF compiles Split regexes with Oniguruma, where '^' and '$' are line anchors, '\\Z' also matches
    before a final newline, '\\h' is a hex digit and '(?m:' is dot-all: imported as they were, the ids
    differed from HF's with no error. Now refused by name, and as_tokenizer runs the file through HF."""
    from tokenizers import Regex, models
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    import tokenmill
    from tokenmill.errors import UnsupportedTokenizerError

    vocab = {c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))} | {"th": 256, "the": 257}
    hf = HFTokenizer(models.BPE(vocab=vocab, merges=[("t", "h"), ("th", "e")]))
    hf.pre_tokenizer = pt.Sequence([pt.Split(Regex(rx), behavior="isolated"),
                                    pt.ByteLevel(add_prefix_space=False, use_regex=False)])
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    with pytest.raises(UnsupportedTokenizerError, match="Oniguruma .HF's engine. reads|the regex module cannot "
                       "compile it") as e:
        Tokenizer.from_huggingface(path)
    assert str(path) in str(e.value)
    wrapped = tokenmill.as_tokenizer(path)
    assert not isinstance(wrapped, Tokenizer)
    assert wrapped.encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_files_the_tokenizer_cannot_take_are_refused_naming_them_and_run_through_hf(tmp_path):
    """A special added token whose text is a vocabulary token, or a Split on an empty string: a bare
    ConfigError without the file's name ("give it a free id", "pattern=''"), which as_tokenizer did not
    take as a reason to run the file through HF."""
    from tokenizers import AddedToken, models
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    import tokenmill
    from tokenmill.errors import UnsupportedTokenizerError

    alpha = {c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}
    a = HFTokenizer(models.BPE(vocab=alpha, merges=[]))
    a.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
    a.add_special_tokens([AddedToken("é", normalized=False)])
    b = HFTokenizer(models.BPE(vocab=alpha, merges=[]))
    b.pre_tokenizer = pt.Sequence([pt.Split("", behavior="isolated"), pt.ByteLevel(add_prefix_space=False, use_regex=False)])
    for name, hf, says in (("a.json", a, "special token 'é' has id 165, which .* holds; one id cannot stand for both"), ("b.json", b, "pattern=''")):
        path = tmp_path / name
        hf.save(str(path))
        with pytest.raises(UnsupportedTokenizerError, match=says) as e:
            Tokenizer.from_huggingface(path)
        assert str(e.value).startswith(f"{path}: ")
        for text in ("café", "xAy é"):
            assert tokenmill.as_tokenizer(path).encode(text, allowed_special="all") == \
                hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("tokens, text", [
    ([("<x>", dict(rstrip=True)), (" ", dict(lstrip=True))], "<x> a"),
    ([("<x>", dict(rstrip=True)), (" ", dict(lstrip=True))], "a<x> b <x>c <x>"),
    ([("<x>", dict(rstrip=True)), (" ", dict(lstrip=True, rstrip=True))], "<x> \n x <x>  y"),
])
def test_an_added_token_inside_the_previous_ones_stripped_space_is_dropped_as_hf_drops_it(tmp_path, tokens, text):
    """HF drops an added-token match whose text the previous token's rstrip already took (its split is
    empty); tokenmill emitted it: "<x> a" gave [256, 257, 64] where HF gives [256, 64]."""
    from tokenizers import AddedToken, models
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    hf = HFTokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}, merges=[]))
    hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
    hf.add_tokens([AddedToken(c, **kw) for c, kw in tokens])
    hf.save(str(tmp_path / "tokenizer.json"))
    assert Tokenizer.from_huggingface(tmp_path / "tokenizer.json").encode(text) == \
        hf.encode(text, add_special_tokens=False).ids


def test_nfc_is_hf_tokenizers_nfc():
    """HF's NFC (Rust tables of an older Unicode) gives 98 marks no combining class and does not compose
    U+11938: Python's unicodedata NFC reordered "a\\u0345\\u07fd" and Arabic Quranic marks, and Qwen 2's
    tokenizer.json (NFC) gave other ids than HF. The table of those code points is recomputed here."""
    import random
    import unicodedata

    normalizers = pytest.importorskip("tokenizers.normalizers")
    from tokenmill.tokenizer.added import _NFC_AS_IS, nfc_as_hf

    hf = normalizers.NFC().normalize_str
    table = {cp for a, b in _NFC_AS_IS for cp in range(a, b + 1)}
    if unicodedata.unidata_version == "14.0.0":  # (Python 3.11's: the table's)
        differ = set()
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c, k = chr(cp), unicodedata.combining(chr(cp))
            probe = "a\u0345" + c if k < 240 else "a" + c + "\u0316"
            if k and hf(probe) != unicodedata.normalize("NFC", probe):
                differ.add(cp)
            d = unicodedata.normalize("NFD", c)
            if d != c and (hf(d) != unicodedata.normalize("NFC", d) or hf(c) != unicodedata.normalize("NFC", c)):
                differ.update([cp, *map(ord, d)])
        assert differ == table
    rng = random.Random(0)
    pool = [chr(c) for c in sorted(table)] + [chr(c) for c in range(0x300, 0x370)] + list("aeAب\u064b\u064e\u0650\u0651")
    for _ in range(20_000):
        t = "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
        assert nfc_as_hf(t) == hf(t), [hex(ord(x)) for x in t]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("ab<|", min_size=1, max_size=5), min_size=1, max_size=12, unique=True),
       st.text("ab<|x", max_size=40))
def test_added_tokens_found_as_the_longest_first_alternation(tokens, text):
    # the added tokens' matcher is a trie (one path a shared prefix; DeepSeek's 1,283 tokens all start with '<'):
    # the same matches as the alternation of the tokens longest first, HF's rule
    import regex

    from tokenmill.tokenizer.special import any_of

    alternation = regex.compile("|".join(regex.escape(c) for c in sorted(tokens, key=lambda c: (-len(c), c))))
    trie = regex.compile(any_of(tokens))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in alternation.finditer(text)]


def test_many_added_tokens_sharing_a_prefix_match_as_hf(tmp_path):
    # 302 added tokens starting with "<|", some prefixes of others, text with many '<': ids as HF's
    from tokenizers import AddedToken, models
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    hf = HFTokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}, merges=[]))
    hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
    hf.add_tokens([AddedToken(c) for c in [f"<|t{i}|>" for i in range(300)] + ["<|t1|>x", "<|"]])
    hf.save(str(tmp_path / "tokenizer.json"))
    text = "a <|t12|> b <|t1|>x <|t1|>y <| <|t299|><|t3 " * 20 + "< " * 500
    assert Tokenizer.from_huggingface(tmp_path / "tokenizer.json").encode(text) == \
        hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("key", ["byte_fallback", "ignore_merges", "fuse_unk"])
def test_a_null_model_flag_reads_as_false_as_in_hf(tmp_path, base, key):
    # HF's BPE reader takes null for these flags (unset: false); tokenmill refused "field model.byte_fallback = null"
    body = copy.deepcopy(base)
    body["model"][key] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(body))
    text = "Hello world, hello tokens 123"
    assert Tokenizer.from_huggingface(tmp_path).encode(text) == \
        tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text, add_special_tokens=False).ids


def test_a_decoder_other_than_byte_level_is_said_on_load(tmp_path):
    """The importer never read the decoder: a file whose decoder strips the leading space or replaces 'Ġ' (or
    has none, where HF's decode joins the raw pieces) decoded otherwise than HF's, without a word."""
    import warnings

    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models
    from tokenizers import pre_tokenizers as pt

    alpha = {c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}
    cases = [(decoders.ByteLevel(), None), (decoders.Sequence([decoders.ByteLevel()]), None),
             (None, "null"), (decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)]),
                              r"Sequence\[ByteLevel, Strip\]")]
    for k, (dec, says) in enumerate(cases):
        hf = HFTokenizer(models.BPE(vocab=alpha, merges=[]))
        hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
        if dec is not None:
            hf.decoder = dec
        path = tmp_path / f"t{k}.json"
        hf.save(str(path))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            ours = Tokenizer.from_huggingface(path)
        said = [str(w.message) for w in seen if "decoder" in str(w.message)]
        if says is None:
            assert said == []
            assert ours.decode(ours.encode(" Hi there")) == hf.decode(hf.encode(" Hi there").ids)
        else:
            assert len(said) == 1 and re.search(f"{re.escape(str(path))}'s decoder is {says}, not ByteLevel", said[0])
        assert ours.encode(" Hi there") == hf.encode(" Hi there", add_special_tokens=False).ids


def test_an_allowed_special_inside_a_longer_special_not_allowed_is_matched_as_tiktoken_matches(tmp_path):
    """Special tokens ``<M>`` and ``<M>x``, only ``<M>`` allowed: tiktoken's pattern holds the allowed ones only, so
    "a<M>x" is a, <M>, x. The tokenizer.json path matched the longer ``<M>x`` first, skipped it (not allowed) and
    left ``<M>`` as text. All or none allowed: HF's own rule, as before."""
    from tokenizers import AddedToken, models
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import pre_tokenizers as pt

    hf = HFTokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pt.ByteLevel.alphabet()))}, merges=[]))
    hf.pre_tokenizer = pt.ByteLevel(add_prefix_space=False)
    hf.add_special_tokens([AddedToken("<M>", normalized=False), AddedToken("<M>x", normalized=False)])
    hf.save(str(tmp_path / "tokenizer.json"))
    tok = Tokenizer.from_huggingface(tmp_path / "tokenizer.json")
    m, mx = tok.special_tokens["<M>"], tok.special_tokens["<M>x"]
    text = "a<M>x b<M>x"
    got = tok.encode(text, allowed_special={"<M>"}, disallowed_special=())
    assert got.count(m) == 2 and mx not in got
    assert tok.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, allowed_special="all").count(mx) == 2
    assert tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text)
    assert m not in tok.encode_ordinary(text) and mx not in tok.encode_ordinary(text)
