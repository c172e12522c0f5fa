"""The general compiled splitter (regex_compile + _regex_vm) equals the regex module: on the presets
and the model family, on patterns generated from the tokenizer-regex grammar, on generated text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmill.tokenizer.pretokenize.patterns import GPT2, GPT4, O200K, split_with_gaps
from tokenmill.tokenizer.pretokenize.regex_compile import Unsupported, compile_pattern
from tokenmill.tokenizer.pretokenize.splitter import LLAMA3, QWEN2, QWEN3_5, split_text_compiled

ALPHABET = list("abcXYZ  \n\r\t'sSlLdD.,;!?0123/-_") + ["é", "e\u0301", "\u0301", "低", "🙂", "\u00a0", "ſ", "K", "٣"]
TEXT = st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)


def vm(pattern: str, text: str) -> list[str]:
    return split_text_compiled(text, pattern, allow_general=True)


@pytest.mark.parametrize("pattern", [GPT2, GPT4, O200K, LLAMA3, QWEN2, QWEN3_5, r"\w+|[^\w\s]+", r"a+?b|\d{2,4}?|\s+"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_known_patterns(pattern, text):
    from tokenmill.tokenizer.pretokenize import splitter

    prog = compile_pattern(pattern)
    from tokenmill.tokenizer.pretokenize.presets import as_readonly_bytes, single_document
    from tokenmill.tokenizer.pretokenize.splitter import regex_offsets

    data = text.encode()
    offs = regex_offsets(as_readonly_bytes(data), prog, single_document(len(data)), use_dfa=False).tolist()
    assert [data[x:y].decode() for x, y in zip(offs, offs[1:])] == split_with_gaps(pattern, text)
    assert splitter.general(pattern) is not None


ATOMS = [r"\p{L}", r"\p{N}", r"\s", r"\S", r"[^\s\p{L}\p{N}]", r"[\r\n]", "a", "'", " ", r"\p{Lu}", r"\p{Ll}",
         r"\p{M}", r"[^\r\n\p{L}\p{N}]", r"\d", r"\w", "[a-c]", "(?i:s)", "(?i:l)", "."]
QUANT = ["", "", "?", "*", "+", "{1,3}", "{2}", "??", "*?", "+?", "{1,3}?", "{,2}"]
POSSESSIVE = ["++", "*+", "?+", "{1,3}+"]


def test_counted_repeat_without_a_minimum_is_zero_to_n():
    """``{,n}`` is ``{0,n}`` to the regex module, tiktoken's engine and Oniguruma; the compiler read it as
    the text "{,n}", so encode disagreed with its own twin and with tiktoken, silently."""
    for pattern, text in ((r"x{,2}y|[a-z]|\s", "xxxy xy y"), (r"\p{L}{,2}\.|\p{L}|\s+", "abc. wö. x")):
        assert vm(pattern, text) == split_with_gaps(pattern, text), pattern


@st.composite
def patterns(draw):
    def piece():
        atom = draw(st.sampled_from(ATOMS))
        if draw(st.integers(0, 5)) == 0:
            return atom + draw(st.sampled_from(POSSESSIVE))
        if draw(st.integers(0, 6)) == 0:
            inner = "|".join(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANT[:6]))
                             for _ in range(draw(st.integers(1, 3))))
            return f"(?:{inner})" + draw(st.sampled_from(["", "?", "+", "*"]))
        return atom + draw(st.sampled_from(QUANT))

    branches = []
    for _ in range(draw(st.integers(1, 5))):
        seq = "".join(piece() for _ in range(draw(st.integers(1, 3))))
        tail = draw(st.sampled_from(["", "", "", r"(?!\S)", r"(?=\s)", "$", r"(?!a)"]))
        branches.append(seq + tail)
    return "|".join(branches)


@settings(max_examples=150, deadline=None)  # each example compiles a new pattern (~0.05 s)
@given(pattern=patterns(), text=TEXT)
def test_generated_patterns(pattern, text):
    try:
        compile_pattern(pattern)
    except Unsupported as e:
        assert "empty" in str(e)  # the grammar only produces patterns of the family, save nullable ones
        return
    want = split_with_gaps(pattern, text)
    assert vm(pattern, text) == want, pattern  # the DFA, with the VM where no match starts
    prog = compile_pattern(pattern)
    from tokenmill.tokenizer.pretokenize.presets import as_readonly_bytes, single_document
    from tokenmill.tokenizer.pretokenize.splitter import regex_offsets

    data = text.encode()
    offs = regex_offsets(as_readonly_bytes(data), prog, single_document(len(data)), use_dfa=False).tolist()
    assert [data[x:y].decode() for x, y in zip(offs, offs[1:])] == want, pattern  # the VM alone


@pytest.mark.parametrize("pattern, named", [
    (r"(a)\1", "capturing group"), (r"(?:a)\1", "escape \\1"), (r"^a", "'^'"), (r"(?<=a)b", "group syntax"), (r"(?:ab)++", "possessive"),
    (r"a(?!bc)", "lookahead"), (r"a*", "empty string"), (r"\bx", "escape \\b"),
])
def test_outside_the_family_is_named(pattern, named):
    with pytest.raises(Unsupported) as e:
        compile_pattern(pattern)
    assert named in str(e.value)


def test_unsupported_falls_back_with_one_warning():
    from tokenmill import Tokenizer
    from tokenmill.tokenizer.pretokenize import splitter

    splitter.general.cache_clear()
    with pytest.warns(UserWarning, match="regex module"):
        tok = Tokenizer.from_merges([], pattern=r"\w+\b|\s+")
        assert tok.decode(tok.encode("ab cd")) == "ab cd"
    tok = Tokenizer.from_merges([(97, 98)], pattern=r"\w+|\s+")  # accepted: runs compiled
    assert tok._compiled().compiled_split and not tok._compiled().preset
    assert tok.encode("ab cd, ab") == [256, 32, 99, 100, 44, 32, 256]


@pytest.mark.corpus
def test_dfa_on_corpora(corpora):
    from tests.conftest import corpus_sample

    patterns = [GPT2, GPT4, O200K, LLAMA3, QWEN3_5, r"\w+|[^\w\s]+|\s+(?!\S)|\s+", r"\p{Han}+|\p{L}+|\p{N}{1,2}"]
    for script in ("en", "zh", "multi", "code"):
        for text in corpus_sample(corpora, script, 40_000, stride=23):
            for p in patterns:
                assert vm(p, text) == split_with_gaps(p, text), (p, script)


def test_catastrophic_pattern_is_linear():
    # (a|a)+$ backtracks exponentially in a backtracking engine; the VM visits each state once per character
    text = "a" * 5000 + "b"
    out = vm(r"(?:a|a)+$|b", text)
    assert out == ["a" * 5000, "b"]


def test_a_pattern_that_reads_far_ahead_runs_under_the_time_budget(monkeypatch):
    """``a+b|a`` over a run of ``a``: the match at each chunk start reads the whole run and ends after one
    character, so the compiled splitter read the run again from every place in it (quadratic: 16 K characters
    1 s, a MB of them hours, with no way out). It counts its steps against the ``regex`` path's time budget
    (``TOKENMILL_REGEX_TIMEOUT``) and stops with the error that path gives; the same text splits under a larger
    budget, or with none."""
    from tokenmill import ConfigError
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    p = r"a+b|a|[^a]+"
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0.001")  # (100,000 steps, and 200 a byte)
    assert compiled_offsets(b"a" * 300 + b"b" + b"a" * 200, p).tolist() == [0, 301] + list(range(302, 502))
    with pytest.raises(ConfigError, match=r"pattern 'a\+b\|a\|\[\^a\]\+' ran out of its time budget \(0.0 s for "
                                          r"5,000 bytes\): .* reads far ahead and ends short"):
        compiled_offsets(b"a" * 5000, p)
    monkeypatch.setenv("TOKENMILL_REGEX_TIMEOUT", "0")  # (no limit)
    assert compiled_offsets(b"a" * 5000, p).tolist() == list(range(5001))


def test_case_insensitive_set_syntax_folds_simply_on_every_path(gpt2_ranks_path):
    """A set-syntax pattern is compiled by the regex module in V1, where (?i) turned full case folding on ("ss"
    matched "ß"); the compiled splitter folds simply, as tiktoken's engine: the two paths of one tokenizer gave
    other ids. Both fold simply now. A POSIX class, ASCII to tiktoken's engine, is said when a rank file is read."""
    import warnings

    from tokenmill import Tokenizer
    from tokenmill.tokenizer.pretokenize.patterns import split_with_gaps

    p = r"(?i)ssen|[\p{L}&&\p{Greek}]|.|\n"
    assert split_with_gaps(p, "ßen SSEN") == ["ß", "e", "n", " ", "SSEN"]
    tok = Tokenizer.from_tiktoken(gpt2_ranks_path, pattern=p)
    assert tok.encode("ßen") == tok.encode_python("ßen")
    with pytest.warns(UserWarning, match=r"holds \[:alpha:\], which tiktoken's engine reads otherwise"):
        Tokenizer.from_tiktoken(gpt2_ranks_path, pattern=r"[[:alpha:]]+|\s+|.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Tokenizer.from_tiktoken(gpt2_ranks_path, pattern=r"\p{L}+|\s+|.")
