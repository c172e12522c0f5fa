"""tokenmill splits by Unicode 16's character classes, as tiktoken 0.14 and HF tokenizers 0.23 do, whatever
``regex`` release is installed (2025.11 and later read Unicode 17 and newer: a text holding a code point
assigned since, U+0558 or CJK Extension J, split and encoded differently from theirs)."""

from __future__ import annotations

import pytest

from tokenmill import Tokenizer
from tokenmill.tokenizer.pretokenize._unicode16 import ASSIGNED
from tokenmill.tokenizer.pretokenize.patterns import split_with_gaps
from tokenmill.tokenizer.pretokenize.unicode import STANDIN, as_unicode16, newer, recategorized

from .test_openai_ranks import openai_dir  # noqa: F401  (the fixture: .cache/openai's rank files)

# code points assigned after Unicode 16 (by Unicode 17 or 18), beside common text
TEXTS = ["\u058b's", "\u0558@m", "\U0003ea48\u8bc8", "x\U000323b0'd", "ab\u088f12 cd", "\u0c5c\u0cdc's ok",
         "plain text's fine", "\U000323b0" * 40 + " 12345 \u0558\u0558's"]


def test_the_table_of_unicode_16_and_the_copy_the_engine_reads():
    assert ASSIGNED[0] == (0, 0x377) and all(a <= b for a, b in ASSIGNED)
    assert all(b < c for (_, b), (c, _) in zip(ASSIGNED, ASSIGNED[1:]))  # sorted, disjoint
    assert sum(b - a + 1 for a, b in ASSIGNED) == 294_579  # Unicode 16.0's assigned code points (Cs, Co included)
    new = set(newer().tolist())
    assert STANDIN not in new and not any(a <= STANDIN <= b for a, b in ASSIGNED)
    for text in TEXTS:
        seen = as_unicode16(text)
        assert len(seen) == len(text)
        assert all((ord(c) in new or ord(c) in recategorized()) == (s != c) for c, s in zip(text, seen))
    assert as_unicode16("plain") == "plain"
    assert split_with_gaps(r"\p{L}+", "a\u0558b") in (["a", "\u0558", "b"], ["a\u0558b"])  # whichever regex: cut
    if 0x558 in new:  # a regex of Unicode 17 or newer: U+0558 is no letter to tokenmill either
        assert split_with_gaps(r"\p{L}+", "a\u0558b") == ["a", "\u0558", "b"]


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_ids_equal_tiktoken_on_code_points_assigned_after_unicode_16(name, gpt2_ranks_path, openai_dir):  # noqa: F811
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = gpt2_ranks_path if name == "gpt2" else openai_dir / f"{name}_base.tiktoken"
    for pattern in (name, None):  # the preset's kernel, and the same regex with one more alternative (compiled)
        tok = Tokenizer.from_tiktoken(path, pattern=name)
        if pattern is None:
            tok = Tokenizer.from_tiktoken(path, pattern=tok.pattern + r"|\p{Lo}+")
        ref = tiktoken.Encoding(f"{name}-ref", pat_str=tok.pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                special_tokens={})
        want = [ref.encode(t) for t in TEXTS]
        assert [tok.encode(t) for t in TEXTS] == want
        assert tok.encode_batch(TEXTS, num_threads=2) == want
        assert [tok.encode_python(t) for t in TEXTS] == want  # the pure-Python twin reads them alike


def test_a_code_point_a_later_unicode_moved_to_another_category_splits_as_in_unicode_16():
    """U+0295 ʕ is Ll in Unicode 16 (tiktoken's and HF's) and Lo in 17 (the installed regex): under the
    o200k pattern "ʕAb" was one chunk in tokenmill, two in tiktoken; a vocabulary trained on it then
    encoded otherwise than its own to_tiktoken()."""
    pytest.importorskip("tiktoken")
    from tokenmill import train_bpe
    from tokenmill.tokenizer.pretokenize.presets import O200K

    assert split_with_gaps(O200K, "ʕAb ʕ's") == ["ʕ", "Ab", " ʕ's"]  # (an Ll takes the contraction)
    tok = train_bpe(["ʕAb ʕAb ʕAb"] * 50, 262, pattern="o200k")
    enc = tok.to_tiktoken()
    for text in ("ʕAb", "xʕAb ʕab", "ʕ" * 10 + "AB"):
        assert tok.encode(text) == enc.encode(text) == tok.encode_batch([text])[0]

