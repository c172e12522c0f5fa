"""Pre-tokenization kernels: exact parity with ``regex.findall`` for the gpt2, gpt4 and o200k presets.

Three tiers: golden chunks for the subtle corners of the patterns (each with its derivation), the
class table against the regex engine code point by code point, and parity with ``regex.findall``
on hypothesis-generated text (arbitrary Unicode and targeted alphabets) and on real corpora.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CORPORA  # ../shared/corpora, or $TOKENMILL_CORPORA
from tokenmill.errors import ConfigError, InputError
from tokenmill.tokenizer.pretokenize import presets as pretokenize
from tokenmill.tokenizer.pretokenize.patterns import GPT2, GPT4, O200K
from tokenmill.tokenizer.pretokenize.presets import build_class_table, class_table, split_offsets, split_text
from tokenmill.tokenizer.pretokenize.unicode import STANDIN, as_unicode16, newer

PRESETS = {"gpt2": GPT2, "gpt4": GPT4, "o200k": O200K}
PRESET_IDS = {"gpt2": 0, "gpt4": 1, "o200k": 2}

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_parity(text: str) -> None:
    """split_text and split_offsets agree with regex.findall for every preset, the text read as Unicode 16
    reads it (``pretokenize.unicode``: the chunks are the text's own)."""
    data = text.encode("utf-8")
    seen = as_unicode16(text)
    for name, pattern in PRESETS.items():
        expected = [text[m.start() : m.end()] for m in regex.finditer(pattern, seen)]
        # The presets match at every position, so findall's chunks tile the text without gaps and
        # the kernels' boundaries can be successive match ends; check that claim as well.
        assert "".join(expected) == text, (name, text)
        assert split_text(text, name) == expected, (name, text)
        assert split_text(text, pattern) == expected, (name, text)
        offs = split_offsets(data, name)
        assert offs.dtype == np.int64 and offs[0] == 0 and offs[-1] == len(data)
        assert np.all(np.diff(offs) > 0)
        assert [data[a:b].decode() for a, b in zip(offs[:-1], offs[1:])] == expected, (name, text)


# ---------------------------------------------------------------------------------------------
# golden chunks


@pytest.mark.parametrize(
    "preset, text, chunks",
    [
        # \s+(?!\S) gives back the last space, which " ?\p{L}++" then takes with the word.
        ("gpt2", "a   b", ["a", "  ", " b"]),
        # \s++$: trailing whitespace is one chunk (and "$" never matches before the final "\n" here:
        # the possessive run has already eaten it).
        ("gpt2", "a \n", ["a", " \n"]),
        # gpt2's contractions are case-sensitive; "'S" is punctuation then a letter.
        ("gpt2", "IT'S it's", ["IT", "'", "S", " it", "'s"]),
        # a newline before a word is its own chunk in gpt2 (only U+0020 joins a word).
        ("gpt2", "\n\nx", ["\n", "\n", "x"]),
        # gpt4: any one non-letter, non-digit except CR/LF joins the next letters ("?+" possessive).
        ("gpt4", "\tx !y", ["\tx", " !", "y"]),
        # gpt4: (?i:...) contractions, also with U+017F LONG S (folds to s); KELVIN SIGN folds to k,
        # which is no contraction letter.
        ("gpt4", "IT'S A'\u017f B'\u212a", ["IT", "'S", " A", "'\u017f", " B", "'\u212a"]),
        # gpt4: \p{N}{1,3} groups digits in threes from the left, other scripts' digits included.
        ("gpt4", "1234567 \u0663\u0664\u0665\u0666", ["123", "456", "7", " ", "\u0663\u0664\u0665", "\u0666"]),
        # gpt4: \s*[\r\n] stops after the run's last newline; the rest is \s+(?!\S) then " ?..."
        ("gpt4", "a \r\n \n  b", ["a", " \r\n \n", " ", " b"]),
        # gpt4: punctuation takes the CR/LF that follow it.
        ("gpt4", "x.\r\n\r\ny", ["x", ".\r\n\r\n", "y"]),
        # o200k: an upper run followed by lowercase is one word; a lower word after upper letters
        # is split before the last capital (CamelCase).
        ("o200k", "HTTPServer isOK", ["HTTPServer", " is", "OK"]),
        # o200k: contractions hang on the word; punctuation takes the "/" and newlines after it.
        ("o200k", "DON'T we'll .//\n", ["DON'T", " we'll", " .//\n"]),
        # o200k: \s*[\r\n]+ has no \s++$ before it, so trailing spaces after the newline split off.
        ("o200k", "a\n  ", ["a", "\n", "  "]),
        # o200k: a combining mark after a space is the optional prefix of nothing: U* takes it
        # alone (marks are both "upper" and "lower" letters there).
        ("o200k", "e\u0301 \u0301", ["e\u0301", " \u0301"]),
    ],
)
def test_golden(preset, text, chunks):
    assert regex.findall(PRESETS[preset], text) == chunks  # the derivation above is right
    assert split_text(text, preset) == chunks


def test_empty_and_none():
    for name in PRESETS:
        assert split_offsets(b"", name).tolist() == [0]
        assert split_text("", name) == []
    assert split_text("", None) == [] and split_text("a b", None) == ["a b"]


def test_preset_names_and_regex_strings():
    text = "Hello,  world's 123!\n"
    assert split_text(text, "cl100k") == split_text(text, GPT4) == regex.findall(GPT4, text)
    assert split_offsets(text.encode(), GPT2).tolist() == split_offsets(text.encode(), "gpt2").tolist()
    assert split_offsets(bytearray(b"a b"), "gpt2").tolist() == [0, 1, 3]
    assert split_offsets(np.frombuffer(b"a b", np.uint8), "o200k").tolist() == [0, 1, 3]


@given(st.lists(st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "a\n", "\u00e9 ", "'s"])), max_size=6))
@SETTINGS
def test_doc_offsets_split_each_document_alone(docs):
    """One call over many documents = the per-document results, shifted and joined."""
    encoded = [d.encode() for d in docs]
    bounds = np.cumsum([0] + [len(e) for e in encoded])
    for name in PRESETS:
        expected = [0]
        for start, e in zip(bounds, encoded):
            expected += [start + x for x in split_offsets(e, name).tolist()[1:]]
        got = split_offsets(b"".join(encoded), name, doc_offsets=bounds)
        assert got.tolist() == expected
        assert set(bounds.tolist()) <= set(got.tolist())


def test_compact_offsets_own_their_memory():
    """``split_offsets`` gives an array of the offsets' own size (the kernel's buffer holds a slot per
    input byte); ``compact=False`` (the encoder's) the same offsets, possibly a view of that buffer; the
    family splitters (Llama 3, Qwen) through ``compiled_offsets`` alike."""
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    data = ("Hello world's  end, 123 and more words here. " * 40).encode()
    for name in PRESETS:
        got = split_offsets(data, name)
        assert got.flags.owndata and got.size > 100
        assert split_offsets(data, name, compact=False).tolist() == got.tolist()
    for pattern in ("llama3", "qwen3.5"):
        got = compiled_offsets(data, pattern)
        assert got.flags.owndata and got.size > 100
        assert compiled_offsets(data, pattern, compact=False).tolist() == got.tolist()


def test_offsets_into_a_buffer_of_the_callers():
    """``out_buf`` (the encoder's buffer, reused from split to split): the same offsets, written into it
    whatever it held; a buffer too small, of another dtype or read-only is refused with what it needs."""
    from tokenmill.tokenizer.pretokenize.splitter import compiled_offsets

    data = ("Hello world's  end, 123 and more words here. " * 40).encode()
    buf = np.full(len(data) + 9, -3, np.int64)
    for name in (*PRESETS, "llama3", "qwen3.5"):
        want = compiled_offsets(data, name)
        got = compiled_offsets(data, name, compact=False, out_buf=buf)
        assert got.tolist() == want.tolist() and np.shares_memory(got, buf)
        got = compiled_offsets(data[:50], name, compact=False, out_buf=buf)  # a shorter text after a longer one
        assert got.tolist() == compiled_offsets(data[:50], name).tolist()
    for bad in (np.empty(len(data) + 1, np.int64), np.empty(len(data) + 2, np.int32), buf[::2]):
        with pytest.raises(ValueError, match=f"at least {len(data) + 2:,d} slots"):
            split_offsets(data, "gpt2", compact=False, out_buf=bad)
    ro = np.empty(len(data) + 2, np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        compiled_offsets(data, "llama3", compact=False, out_buf=ro)


def test_doc_offsets_errors():
    with pytest.raises(ConfigError, match="doc_offsets"):
        split_offsets(b"abc", "gpt2", doc_offsets=[0, 2])
    with pytest.raises(ConfigError, match="doc_offsets"):
        split_offsets(b"abc", "gpt2", doc_offsets=[0, 2, 1, 3])
    # a character cut by a document boundary is ill-formed in both documents
    with pytest.raises(InputError, match="byte offset 1 "):
        split_offsets("a\u00e9".encode(), "gpt2", doc_offsets=[0, 2, 3])


def test_custom_pattern_uses_regex():
    assert split_text("ab12cd", r"\d+|\D+") == ["ab", "12", "cd"]
    assert split_text("a-b", r"-") == ["-"]  # findall semantics, gaps and all
    with pytest.raises(ConfigError, match="not a valid regex"):
        split_text("a", "(")


def test_lone_surrogates_fall_back_to_regex():
    text = "ab\ud800 cd"
    for name, pattern in PRESETS.items():
        assert split_text(text, name) == regex.findall(pattern, text)


def test_errors():
    with pytest.raises(ConfigError, match="preset='nope'"):
        split_offsets(b"x", "nope")
    with pytest.raises(InputError, match="byte offset 1 .invalid start byte"):
        split_offsets(b"a\xffb", "gpt2")
    with pytest.raises(ConfigError, match="text.encode"):
        split_offsets("text", "gpt2")
    with pytest.raises(ConfigError, match="dtype"):
        split_offsets(np.zeros(3, np.int32), "gpt2")


def _mangled_utf8(draw_text: str, edits: list[tuple[int, int]]) -> bytes:
    """UTF-8 of a text with some bytes overwritten: mostly ill-formed in interesting places."""
    data = bytearray(draw_text.encode())
    for pos, byte in edits:
        if data:
            data[pos % len(data)] = byte
    return bytes(data)


mangled_utf8 = st.builds(
    _mangled_utf8,
    st.text(max_size=30),
    st.lists(st.tuples(st.integers(0, 200), st.sampled_from([0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0x27])), max_size=3),
)


@given(st.one_of(st.binary(max_size=64), mangled_utf8))
@SETTINGS
def test_utf8_validation_is_pythons(data):
    """split_offsets accepts exactly what Python's strict decoder accepts, and names the same offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        for name in PRESETS:
            with pytest.raises(InputError, match=f"byte offset {e.start:,d} "):
                split_offsets(data, name)
            # whatever the bytes, the kernels stay in bounds and make progress
            offs, bad = pretokenize._split(pretokenize.as_readonly_bytes(data), PRESET_IDS[name], pretokenize.single_document(len(data)))
            assert bad == e.start and offs[0] == 0 and offs[-1] == len(data) and np.all(np.diff(offs) > 0)
    else:
        assert_parity(text)


@pytest.mark.parametrize(
    "data, offset",
    [
        (b"a\xc0\x80", 1),  # overlong NUL
        (b"\xe0\x80\x80", 0),  # overlong 3-byte form
        (b"ab\xed\xa0\x80", 2),  # UTF-8 of a surrogate
        (b"\xf4\x90\x80\x80", 0),  # above U+10FFFF
        (b"\xf5\x80\x80\x80", 0),
        (b"x \xe4\xb8", 2),  # truncated
        (b"\xe4\xb8\xad\x80", 3),  # stray continuation byte
    ],
)
def test_ill_formed_utf8(data, offset):
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    with pytest.raises(InputError, match=f"byte offset {offset} "):
        split_offsets(data, "gpt4")


@pytest.mark.parametrize(
    "text",
    [
        "a" * 100_000,
        "A" * 50_000 + "a",  # o200k: U* runs to the end, then backtracks to the last W
        "\u4e2dA" * 20_000,  # o200k: Lo (both classes) interleaved with Lu
        " " * 100_000 + "x",
        "\r\n" * 50_000 + " ",
        "\u0301" * 50_000,
        "1" * 100_001,
        "!" * 100_000 + "\n/",
        "\U0001f469\u200d\U0001f4bb" * 10_000,
    ],
)
def test_long_runs(text):
    assert_parity(text)


# ---------------------------------------------------------------------------------------------
# the class table


def test_class_table_is_what_regex_says():
    """Each bit against the regex engine for sampled code points, plus the notorious ones."""
    from tokenmill.tokenizer.pretokenize import _pretok_kernels as k

    tab = class_table()
    assert tab.dtype == np.uint16 and tab.shape == (0x110000,)
    rng = random.Random(0)
    cps = [rng.randrange(0x110000) for _ in range(3000)] + [rng.randrange(0x3000) for _ in range(3000)]
    cps += [0x9, 0xA, 0xB, 0xC, 0xD, 0x1C, 0x1F, 0x20, 0x27, 0x85, 0xA0, 0x17F, 0x1680, 0x180E, 0x200B]
    cps += [0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF, 0x212A, 0x130, 0x131, 0x1E9E, 0xDF, 0x1C5]
    cps += list(range(0x2000, 0x200E)) + list(range(0x80))
    checks = [(bit, regex.compile(cls)) for bit, cls in pretokenize._class_regexes()]
    new = set(newer().tolist())  # (read as Unicode 16 reads them: unassigned, as U+FDD0)
    cps += sorted(new)[:: max(1, len(new) // 500)]
    for cp in cps:
        c = chr(STANDIN if cp in new else cp)
        for bit, rx in checks:
            assert bool(tab[cp] & bit) == bool(rx.fullmatch(c)), (hex(cp), rx.pattern)
    # regex's \s is Unicode White_Space: NEL, NBSP, U+2000..U+200A, U+3000 in; U+001C..U+001F and
    # ZERO WIDTH SPACE out (str.isspace disagrees on U+001C..U+001F).
    spaces = {cp for cp in range(0x3001) if tab[cp] & k.S_}
    assert {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, *range(0x2000, 0x200B)} <= spaces
    assert not spaces & {0x1C, 0x1D, 0x1E, 0x1F, 0x200B}


def test_class_table_cache_round_trip(tmp_path):
    fresh = build_class_table()
    assert np.array_equal(fresh, class_table())
    path = tmp_path / "t.npz"
    pretokenize._save_table(path, fresh)
    assert np.array_equal(pretokenize._load_table(path), fresh)
    good = path.read_bytes()
    # every damage is a miss (rebuilt), never trusted nor an error: an entry edited under the same sha256 ('b'
    # classed as a space had split every text otherwise, silently), emptied (a power loss: EOFError had failed
    # every later run), cut short (BadZipFile), garbage, another array
    with np.load(path) as z:
        parts = dict(z)
    parts["table"][0x62] = parts["table"][0x20]
    np.savez(path, **parts)
    assert pretokenize._load_table(path) is None
    for bad in (b"", good[: len(good) // 2], b"garbage"):
        path.write_bytes(bad)
        assert pretokenize._load_table(path) is None
    np.savez(path, table=np.zeros(0x110000, np.uint16))
    assert pretokenize._load_table(path) is None


def test_no_numba_at_import():
    import subprocess
    import sys

    code = "import sys, tokenmill.tokenizer.pretokenize.presets; print('numba' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


# ---------------------------------------------------------------------------------------------
# parity on generated text

SPECIAL = [
    "'", "\u2019", "s", "S", "d", "D", "m", "M", "t", "T", "l", "L", "v", "V", "e", "E", "r", "R",
    "\u017f", "\u212a", "k", "K", "a", "x", "Z",  # contraction letters, long s, Kelvin sign
    " ", " ", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f",
    "\u00a0", "\u0085", "\u1680", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b",
    *map(chr, range(0x2000, 0x200B)),  # EN QUAD .. HAIR SPACE
    "\u0301", "\u0300", "\u0903", "\u20dd", "\u200d", "\ufe0f",  # marks (Mn, Mc, Me), ZWJ, VS16
    "0", "7", "\u0663", "\u0967", "\u09e8", "\uff11", "\u00b2", "\u2167", "\U0001d7d8",  # digits
    "\u4e2d", "\u6587", "\u3042", "\u30a2", "\uac00", "\u0e01", "\u0627", "\u05d0", "\u0416", "\u0436",
    "\u01c5", "\u02b0", "\u00c9", "\u00e9", "\u00df", "\u0130", "\ufb06",  # Lt, Lm, cased, folds
    "\U0001f468", "\U0001f469", "\U0001f467", "\U0001f3fd", "\U0001f44d", "\U0001f1fa",  # emoji
    ".", ",", "!", "?", "/", "-", "_", "(", '"', "#", "\u00ad", "\u2014", "\U0010ffff", "\x00",
]
PIECES = [
    "'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL",
    "'d", "'D", "'\u017f", "'\u212a", "'x", "''", " '", "don't", "WE'LL", "It's",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f44d\U0001f3fd", "\u2764\ufe0f",
    "e\u0301", "\u0915\u094d\u0937", "HTTPServer", "camelCase", "ABC", "abc", "123456", "\u0663\u0664",
    "\r\n", " \r\n", "\n\n", "   ", " \t ", "\u00a0\u00a0", "//", "./", "...", "\n/",
]

arbitrary_text = st.text(max_size=80)
targeted_text = st.text(alphabet=st.sampled_from(SPECIAL), max_size=60)
piece_text = st.lists(st.sampled_from(PIECES + SPECIAL), max_size=25).map("".join)


@given(arbitrary_text)
@SETTINGS
def test_parity_arbitrary_unicode(text):
    assert_parity(text)


@given(targeted_text)
@SETTINGS
def test_parity_targeted_alphabet(text):
    assert_parity(text)


@given(piece_text)
@SETTINGS
def test_parity_pieces(text):
    assert_parity(text)


@given(st.lists(st.sampled_from(["a", "A", "\u01c5", "\u02b0", "\u4e2d", "\u0301", " ", "!", "'", "s", "1"]), max_size=40).map("".join))
@SETTINGS
def test_parity_o200k_letter_classes(text):
    """o200k's two letter alternatives backtrack in Lu/Lt/Lm/Lo/Ll/M mixtures; stress them."""
    assert_parity(text)


# ---------------------------------------------------------------------------------------------
# parity on real text


@pytest.mark.corpus
def test_parity_on_corpora():
    """About 1.5 MB from each corpus folder (whole files, spread over the folder), all presets."""
    if not CORPORA.is_dir():
        pytest.skip(f"../shared/corpora not found at {CORPORA.resolve()} (real-text parity runs where it exists)")
    compared = 0
    for folder in ("en", "zh", "multi", "code"):
        files = sorted((CORPORA / folder).glob("*.txt"))
        assert files, f"no .txt files in {CORPORA / folder}"
        size = 0
        for f in files[:: max(1, len(files) // 40)]:
            if size > 1_500_000:
                break
            text = f.read_text(encoding="utf-8")
            data = text.encode()
            size += len(data)
            for name, pattern in PRESETS.items():
                expected = regex.findall(pattern, text)
                offs = split_offsets(data, name).tolist()
                lengths = [len(c.encode()) for c in expected]
                assert offs == [0, *np.cumsum(lengths).tolist()], (name, f.name)
                assert split_text(text, name) == expected, (name, f.name)
        compared += size
    assert compared > 4_000_000
