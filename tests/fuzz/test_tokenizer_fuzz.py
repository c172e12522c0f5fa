"""Hostile patterns, texts, vocab sizes and files against the tokenizer."""

from __future__ import annotations

import base64
import json

from hypothesis import given
from hypothesis import strategies as st

from .conftest import budget, expect_ok_or_refused

# pieces of the tokenizer-regex family (gpt2 / cl100k / o200k / llama3 / qwen splits), and hostile ones
ATOMS = [r"\p{L}", r"\p{N}", r"\s", r"[^\s\p{L}\p{N}]", r"'(?i:[sdmt]|ll|ve|re)", r" ?", r"[\r\n]",
         r"[^\r\n\p{L}\p{N}]", r"\p{Lu}", r"\p{Ll}", r"a", r"\w", r"\d", r"."]
QUANT = ["", "+", "*", "?", "++", "*+", "?+", "{1,3}", "{2}"]
TAILS = ["", r"(?!\S)", "$", r"(?=\s)"]
HOSTILE = [r"(?r)\w+", r"(a+)+$", r"(a|a)+$", r"(\w+\s?)+$", r"", r"(", r"[", r"\p{Nope}", r"(?<=a)b", r"\b",
           r"(?:)", r"x*", r"(?i)", r"\X", r"(a)|(b)"]


@st.composite
def patterns(draw):
    if draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(HOSTILE))
    alts = []
    for _ in range(draw(st.integers(1, 4))):
        seq = "".join(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANT))
                      for _ in range(draw(st.integers(1, 3))))
        alts.append(seq + draw(st.sampled_from(TAILS)))
    return "|".join(alts)


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40) | st.sampled_from(
    ["a" * 30 + "!", "abc abd\r\n\r\n  x", "你好。再见 123 it's", "\x00\x85\u2028 \t"])


@budget(30, 1000)
@given(patterns(), texts)
def test_custom_patterns_round_trip_or_refuse(worker, pattern, text):
    expect_ok_or_refused(worker, "tokenizer_pattern", pattern, text)


_ITEMS = st.one_of(texts, st.sampled_from(["a<eos>b", "<pad>", "x\ud800y", "\udc00", "\ud83d\ude42", "", None, b"ab",
                                             3, 1.5, ["a"], "<eos" * 3]))
_SPECIALS = st.sampled_from(["all", (), "<eos>", ["<eos>"], {"<pad>"}, "nope", ["nope"], 5, None, [1], [b"<eos>"],
                             "<", ("<eos>", "<eos>")])


@budget(40, 2000)
@given(st.one_of(st.lists(_ITEMS, max_size=6), st.tuples(_ITEMS, _ITEMS), texts, st.sampled_from([None, 7, b"abc"])),
       _SPECIALS, _SPECIALS, st.sampled_from([1, 2, None, 0, -1, 1.5, True, "2", 2**40]), st.booleans())
def test_encode_batch_arguments(worker, texts_, allowed, disallowed, threads, as_arrays):
    """Batches of hostile items (one str, None, bytes, numbers, surrogates, special-token text), special-token
    arguments and thread counts: the ids ``encode`` gives each text, or a TokenmillError with a message."""
    expect_ok_or_refused(worker, "encode_args", texts_, allowed, disallowed, threads, as_arrays)


@budget(12, 300)
@given(st.lists(texts, min_size=1, max_size=3),
       st.one_of(st.integers(250, 300), st.sampled_from([10**9, 2**63, -5, 1.5, True, "300"])),
       st.one_of(st.sampled_from(["gpt2", "gpt4", None]), patterns()),
       st.one_of(st.sampled_from([(), ["<eos>"], "<eos>", ["<\ud800>"], ["", "x"], ["a", "a"]]),
                 st.lists(st.text(min_size=1, max_size=4), max_size=2)))
def test_train(worker, texts_, vocab_size, pattern, special):
    expect_ok_or_refused(worker, "train", texts_, vocab_size, pattern, special)


def _valid_file() -> bytes:
    from tokenmill.tokenizer.model import Tokenizer

    tok = Tokenizer.from_merges([(104, 105), (256, 33)], pattern="gpt2", special_tokens=["<eos>"], merge_counts=[5, 3])
    return json.dumps(tok.to_dict()).encode()


VALID = _valid_file()


@st.composite
def damaged_files(draw):
    how = draw(st.sampled_from(["truncate", "flip", "random", "rehash"]))
    if how == "truncate":
        return VALID[: draw(st.integers(0, len(VALID)))]
    if how == "flip":
        i = draw(st.integers(0, len(VALID) - 1))
        return VALID[:i] + bytes([draw(st.integers(0, 255))]) + VALID[i + 1:]
    if how == "random":
        return draw(st.binary(max_size=200))
    from tokenmill._io import canonical_hash

    body = json.loads(VALID)
    key = draw(st.sampled_from(["merges", "merge_counts", "special", "version", "pattern"]))
    value = draw(st.sampled_from([1.5, True, "398", 2**64, -1, None, [], [[1, 2, 3]], [[1.5, 10]], 10**30, "(?r)\\w+",
                                  "(a|a)+$", {"x": 1}]))
    if key in ("merges", "merge_counts"):
        body["model"][key] = value if isinstance(value, list) else [[104, value], [256, 33]]
    elif key == "special":
        body["special_tokens"] = {"<eos>": value}
    else:
        body[key] = value
    body.pop("hash")
    body["hash"] = canonical_hash(body)
    return json.dumps(body).encode()


@budget(30)
@given(damaged_files())
def test_damaged_tokenizer_files(worker, tmp_path_factory, data):
    path = str(tmp_path_factory.mktemp("tok") / "tok.json")
    expect_ok_or_refused(worker, "load_tokenizer_bytes", path, data)


@st.composite
def rank_files(draw):
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    extra = draw(st.lists(st.tuples(st.binary(min_size=1, max_size=3),
                                    st.sampled_from(["256", "257", "-1", "1_0", "99999999999", "x", "0", "2.5"])),
                          max_size=3))
    lines += [f"{base64.b64encode(b).decode()} {r}" for b, r in extra]
    data = "\n".join(lines).encode()
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return data


@budget(20)
@given(rank_files())
def test_damaged_rank_files(worker, tmp_path_factory, data):
    path = str(tmp_path_factory.mktemp("ranks") / "r.tiktoken")
    expect_ok_or_refused(worker, "load_rank_bytes", path, data)
