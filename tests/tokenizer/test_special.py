"""The special-token rule and its searches (``tokenizer.special``), worked out once and kept: the compiled
split pattern per set of allowed tokens, ``requested``'s rule per hashable pair of arguments (errors never
kept), and the one-pass search of a batch's UTF-8 (``first_holding``) against a search of each text."""

from __future__ import annotations

import random

import pytest

from tokenmill.errors import ConfigError
from tokenmill.tokenizer import special as S

NAMES = {"<s>": 1, "</s>": 2, "[INST]": 3, "[/INST]": 4, "<s>x": 5, "低<": 6}


def test_the_split_pattern_is_compiled_once_per_set_of_allowed_tokens():
    """It was escaped and compiled for every text (~8 us a text with Mistral v3's 751 control pieces)."""
    a = S.split_pattern(frozenset(["<s>", "</s>", "<s>x"]))
    assert S.split_pattern(frozenset(["<s>x", "</s>", "<s>"])) is a  # an equal set, another object
    assert S.split_pattern(frozenset(["<s>"])) is not a
    text = "a<s>xb</s><s>c<s"
    assert list(S.split_specials(text, {"<s>", "</s>", "<s>x"})) == [
        ("a", False), ("<s>x", True), ("b", False), ("</s>", True), ("<s>", True), ("c<s", False)]
    assert list(S.split_specials(text, frozenset({"<s>"}))) == [
        ("a", False), ("<s>", True), ("xb</s>", False), ("<s>", True), ("c<s", False)]


def test_a_rule_is_kept_per_hashable_arguments_and_errors_are_not():
    memo: dict = {}
    rule = S.rule_of(memo, NAMES, (), "all")
    assert rule == (frozenset(), frozenset(NAMES)) and all(isinstance(x, frozenset) for x in rule)
    assert S.rule_of(memo, NAMES, (), "all") is rule and len(memo) == 1
    assert S.rule_of(memo, NAMES, "all", "all") == (frozenset(NAMES), frozenset())
    assert S.rule_of(memo, NAMES, ("<s>",), "all") == (frozenset({"<s>"}), frozenset(NAMES) - {"<s>"})
    # a list or a set: worked out each time, the same rule
    assert S.rule_of(memo, NAMES, ["<s>"], {"</s>"}) == (frozenset({"<s>"}), frozenset({"</s>"})) and len(memo) == 3
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"^allowed_special names \['<nope>'\], which are not special tokens"):
            S.rule_of(memo, NAMES, ("<nope>",), "all")
        with pytest.raises(ConfigError, match=r"^disallowed_special holds 5 \(int\)"):
            S.rule_of(memo, NAMES, (), (5,))
        # (a misspelt disallowed name had made every special token's text plain text, silently)
        for bad in ("al", "none", ("</s>", "<nope>")):
            with pytest.raises(ConfigError, match=r"^disallowed_special names \['(al|none|<nope>)'\], which are not "
                                                  r"special tokens of this tokenizer; .* pass \(\) to disallow none"):
                S.rule_of(memo, NAMES, (), bad)
    assert len(memo) == 3
    import itertools

    for names in itertools.islice(itertools.permutations(NAMES, 3), 70):  # bounded (70 distinct keys)
        S.rule_of(memo, NAMES, (), names)
    assert len(memo) <= 64


def _first_holding_each(texts: list[str], words) -> int:
    return next((i for i, t in enumerate(texts) if any(w in t for w in words)), len(texts))


def test_first_holding_equals_a_search_of_each_text():
    rng = random.Random(7)
    alphabet = ["a", "b", " ", "<", "s", ">", "/", "[", "I", "N", "S", "T", "]", "低", "🙂", "é", "\n"]
    words_sets = [frozenset({"<s>"}), frozenset({"<s>", "</s>", "[INST]"}), frozenset({"低<", "🙂a"}),
                  frozenset({"é", "<s>x"})]
    for _ in range(400):
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(8))) for _ in range(rng.randrange(1, 12))]
        for words in words_sets:
            datas = [t.encode("utf-8") for t in texts]
            assert S.first_holding(datas, words) == _first_holding_each(texts, words), (texts, words)
    # a token across two texts is in neither
    assert S.first_holding([b"a<", b"s>b", b"<s"], frozenset({"<s>"})) == 3
    assert S.first_holding([b"x", b"", b"a<s>"], {"<s>"}) == 2
    assert S.first_holding([], frozenset({"<s>"})) == 0 and S.first_holding([b"<s>"], frozenset()) == 1


def test_first_holding_leaves_to_the_caller_what_one_pass_cannot_tell():
    nine = frozenset(chr(ord("a") + k) + "!" for k in range(9))  # 9 distinct first bytes
    assert S.first_holding([b"x"], nine) is None
    assert S.first_holding([b"x"], frozenset(list(nine)[:8])) == 1
    assert S.first_holding([b"x"], frozenset({""})) is None
    assert S.first_holding([b"x"], frozenset({"\ud800"})) is None


def test_special_token_arguments_of_the_wrong_kind_are_refused_by_name():
    """``from_ranks``/``from_tiktoken`` given a list, set or str of specials failed with an AttributeError;
    ``train_bpe`` given a dict dropped its ids in silence; repeated ids printed every id of the tokenizer."""
    import tokenmill
    from tokenmill.errors import ConfigError

    ranks = {bytes([i]): i for i in range(256)}
    for bad in (["<|eot|>"], {"<|eot|>"}, "<|eot|>"):
        with pytest.raises(ConfigError, match=f"special_tokens is a {type(bad).__name__}; pass a dict name -> id"):
            tokenmill.Tokenizer.from_ranks(ranks, pattern="gpt2", special_tokens=bad)
    with pytest.raises(ConfigError, match="training gives special tokens the ids after the learned vocabulary"):
        tokenmill.train_bpe(["hello"], 300, special_tokens={"<a>": 1000, "<b>": 5})
    with pytest.raises(ConfigError, match=r"pass a list \(its order gives the ids\)$"):
        tokenmill.train_bpe(["hello"], 300, special_tokens={"<a>", "<b>"})
    many = {f"<s{k}>": 300 + k for k in range(1000)} | {"<again>": 300}
    with pytest.raises(ConfigError) as e:
        tokenmill.Tokenizer.from_ranks(ranks, pattern="gpt2", special_tokens=many)
    assert str(e.value) == "special tokens '<s0>' and '<again>' both have id 300; each special token needs its own id"


def test_a_token_both_allowed_and_disallowed_is_refused_with_the_right_advice():
    """As tiktoken, a token both sets name is refused when the text spells it; the message had said "pass
    allowed_special={'<|endoftext|>'}", which the caller had done. Allowed alone it is a special token."""
    from tokenmill import train_bpe
    from tokenmill.errors import SpecialTokenError

    tok = train_bpe(["a b c " * 20], 270, pattern="gpt2", special_tokens=["<|endoftext|>"], progress=False)
    with pytest.raises(SpecialTokenError, match="which both allowed_special and disallowed_special name .*leave it "
                                                "out of disallowed_special"):
        tok.encode("a<|endoftext|>", allowed_special={"<|endoftext|>"}, disallowed_special={"<|endoftext|>"})
    with pytest.raises(SpecialTokenError, match=r"pass allowed_special=\{'<\|endoftext\|>'\}"):
        tok.encode("a<|endoftext|>")
    assert tok.encode("a<|endoftext|>", allowed_special={"<|endoftext|>"})[-1] == tok.special_tokens["<|endoftext|>"]
