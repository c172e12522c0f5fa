"""Adversarial text for every real tokenizer's parity tests, and the comparison they share."""

from __future__ import annotations

import random

from tokenmill import LoneSurrogateError, replace_surrogates


def adversarial_texts() -> list[str]:
    """Texts that stress the splitter and the merge loop: long runs of one character (letters, digits,
    spaces, newlines, CJK, emoji, combining marks), very long words, whitespace runs of every kind,
    digits glued to letters, mixed scripts with no spaces, contractions and their case variants."""
    rng = random.Random(2026)
    runs = ["a", "A", "z", "1", "9", " ", "\n", "\t", "\r\n", ".", "!", "-", "_", "'", "/", "低", "世", "あ", "한",
            "é", "\u0301", "🙂", "\u00a0", "\u3000", "ß", "ſ", "K", "٣", "Ⅻ", "\x85", "\u200d", "ab", "ab ", "1 ", "a1"]
    out = [c * n for c in runs for n in (2, 47, 48, 49, 255, 256, 257, 3000)]
    out += ["x" * 10_000, " " * 10_000, "低" * 5_000, "1" * 5_000, "\n" * 4_000 + "a", "a" + " " * 4_000]
    words = ["supercalifragilistic" * 30, "Donaudampfschifffahrtsgesellschaftskapitän" * 10,
             "pneumonoultramicroscopicsilicovolcanoconiosis", "ThisIsCamelCaseWithoutAnySpacesAtAll" * 20,
             "https://example.com/" + "path/" * 200, "0x" + "deadbeef" * 300, "中华人民共和国" * 400,
             "Приветмир" * 100, "مرحبابالعالم" * 100, "नमस्तेदुनिया" * 100, "こんにちは世界" * 100]
    out += words
    pieces = ["the", "The", "THE", " ", "  ", "\n", "\n\n", "\r\n", "\t", "'s", "'S", "'ll", "'LL", "'re", "'Ve",
              "123", "4567", "89", "3.14", "1,000", "中文", "日本語", "한국어", "Ελληνικά", "русский", "عربى",
              "e\u0301", "🙂", "🏳️‍🌈", "\u00a0", "\u3000", "...", "!!!", "{}", "();", "=>", "<|endoftext|>", "<|fim_prefix|>",
              "\u2028", "\x0b", "\x0c", "\x85", "ſ", "ǅ", "ʰ", "Ⅻ", "½", "٣"]
    for n in (5, 20, 100, 400, 2000):
        for _ in range(6):
            out.append("".join(rng.choice(pieces) for _ in range(n)))
    out += ["".join(rng.choice(pieces) + rng.choice(runs) * rng.randrange(1, 60) for _ in range(200)) for _ in range(10)]
    return out


def surrogate_texts() -> list[str]:
    """Strs UTF-8 cannot encode: lone halves (high, low, at either end, runs of them, beside letters,
    digits, spaces and emoji), surrogate pairs written as two code points (one character to tiktoken), a
    pair whose halves are reversed (two lone ones), and a half between the two of a pair."""
    rng = random.Random(7)
    halves = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude42"]
    out = ["\ud800", "\udc00", "a\ud800b", "\ud800abc", "abc\udfff", "\ud800" * 40, "x\udc00\udc00 y", "12\ud83d34",
           " \ud800 ", "\ud83d\ude42", "a\ud83d\ude42b", "\ude42\ud83d", "\ud83d\ud83d\ude42", "🙂\ud83d 🙂",
           "don't\ud800's", "\ud800" + "a" * 300 + "\udc00", "低\udc00低", "\u3000\ud800\u3000"]
    pieces = ["the", " ", "1", "低", "🙂", "'s", "\n", "é", *halves]
    out += ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 80))) for _ in range(40)]
    return out


def assert_adversarial_equal(tok, enc, surrogates: bool = True, python_twin: bool = True) -> None:
    """``tok`` (tokenmill) gives the ids of ``enc`` (a tiktoken ``Encoding``) on :func:`adversarial_texts`
    (``encode_ordinary``, a two-thread ``encode_batch``, and the pure-Python twin on the shorter ones), and,
    with ``surrogates``, on :func:`surrogate_texts` once :func:`replace_surrogates` has rewritten them as
    tiktoken does, each of which tokenmill refuses as it is (naming the character)."""
    texts = adversarial_texts()
    want = enc.encode_ordinary_batch(texts)
    for t, w in zip(texts, want):
        assert tok.encode_ordinary(t) == w, repr(t[:80])
    assert tok.encode_batch(texts, num_threads=2, disallowed_special=()) == want
    if python_twin:
        for t, w in zip(texts[::7], want[::7]):
            if len(t) <= 3000:
                assert tok.encode_ordinary_python(t) == w, repr(t[:80])
    if not surrogates:
        return
    texts = surrogate_texts()
    fixed = [replace_surrogates(t) for t in texts]
    want = [enc.encode_ordinary(t) for t in texts]  # tiktoken rewrites each itself
    assert tok.encode_batch(fixed, num_threads=2, disallowed_special=()) == want
    for t, f, w in zip(texts, fixed, want):
        assert tok.encode_ordinary(f) == w, repr(t)
        first = next(i for i, c in enumerate(t) if 0xD800 <= ord(c) <= 0xDFFF)
        try:
            tok.encode_ordinary(t)
        except LoneSurrogateError as e:
            assert f"at character {first:,d} (U+{ord(t[first]):04X})" in str(e), str(e)
        else:
            raise AssertionError(f"{t!r} was encoded as it is")
