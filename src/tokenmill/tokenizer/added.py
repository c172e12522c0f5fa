"""Added tokens of a tokenizer (tokenizer.json's ``added_tokens``): what each is, and how they are
found in a text exactly as HF ``tokenizers``' AddedVocabulary finds them. Used by the tokenizer
itself and by the formats that carry added tokens."""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import asdict, dataclass

from .pretokenize.unicode import as_unicode16
from .special import Prefixes, any_of, holds_any


@dataclass(frozen=True)
class AddedToken:
    """One entry of tokenizer.json's ``added_tokens`` with the id HF gives it."""

    id: int
    content: str
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d, *, what: str = "added token") -> "AddedToken":
        """From ``to_dict``'s form, checked exactly (``"special": "false"`` is a FormatError, not True)."""
        from .._schema import check
        from .formats.schemas import AddedTokenEntry

        return cls.from_entry(check(d, AddedTokenEntry, what=what))

    @classmethod
    def from_entry(cls, e) -> "AddedToken":
        """From a checked ``schemas.AddedTokenEntry``."""
        return cls(e.id, e.content, e.special, e.single_word, e.lstrip, e.rstrip, e.normalized)


# The code points HF tokenizers' NFC (its Rust normalization tables, of an older Unicode) reads otherwise than
# Python's ``unicodedata`` 14.0 (Python 3.11): marks it gives no combining class (so it never reorders them:
# U+07FD, U+0898-U+089F, U+08CA-U+08D3 Arabic Quranic marks, ...) and U+11938's composition, with its parts.
# Found by normalizing every code point both ways (``tests/tokenizer/test_huggingface_import.py`` recomputes it
# against HF); HF reads each of them as a character of its own, so the text is normalized around them.
_NFC_AS_IS = (
    (0x7FD, 0x7FD), (0x898, 0x89F), (0x8CA, 0x8D3), (0x9FE, 0x9FE), (0xC3C, 0xC3C), (0xD3B, 0xD3C),
    (0xEBA, 0xEBA), (0x1715, 0x1715), (0x1ABF, 0x1ACE), (0x1DF6, 0x1DFA), (0xA82C, 0xA82C), (0x10D24, 0x10D27),
    (0x10EAB, 0x10EAC), (0x10F46, 0x10F50), (0x10F82, 0x10F85), (0x11070, 0x11070), (0x1133B, 0x1133B),
    (0x1145E, 0x1145E), (0x11839, 0x1183A), (0x11930, 0x11930), (0x11935, 0x11935), (0x11938, 0x11938),
    (0x1193D, 0x1193E), (0x11943, 0x11943), (0x119E0, 0x119E0), (0x11A34, 0x11A34), (0x11A47, 0x11A47),
    (0x11A99, 0x11A99), (0x11D42, 0x11D42), (0x11D44, 0x11D45), (0x11D97, 0x11D97), (0x16FF0, 0x16FF1),
    (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF),
)


@functools.cache
def _nfc_as_is():
    import regex

    return regex.compile("[" + "".join(f"\\U{a:08X}-\\U{b:08X}" for a, b in _NFC_AS_IS) + "]")


def nfc_as_hf(text: str) -> str:
    """``text`` in NFC as HF tokenizers' ``NFC`` normalizer gives it: Python's NFC, but around each
    :data:`_NFC_AS_IS` code point, which HF keeps as it is (Qwen 2's tokenizer.json normalizes with NFC:
    Arabic with U+08D3 gave other ids than HF's)."""
    find = _nfc_as_is()
    if find.search(text) is None:
        return unicodedata.normalize("NFC", text)
    out, at = [], 0
    for m in find.finditer(text):
        out.append(unicodedata.normalize("NFC", text[at : m.start()]))
        out.append(m.group())
        at = m.end()
    out.append(unicodedata.normalize("NFC", text[at:]))
    return "".join(out)


def _white_space() -> frozenset:
    import regex

    return frozenset(regex.findall(r"\s", "".join(map(chr, range(0x3100)))))


class AddedTokenMatcher:
    """Splits text into pieces and added tokens as HF's ``AddedVocabulary.extract_and_normalize``."""

    def __init__(self, added, normalizer: str | None):
        import regex

        self._normalizer = normalizer
        self._raw = {t.content: t for t in added if not t.normalized}
        self._raw_special = frozenset(c for c, t in self._raw.items() if t.special)
        self._norm = {self._normalize(t.content): t for t in added if t.normalized}
        self._raw_re = self._alternation(self._raw)
        self._norm_re = self._alternation(self._norm)
        self._space = _white_space()
        self._word = regex.compile(r"\w")
        # a text holding none of these two-character prefixes holds no raw added token: skip the scan
        self._raw_prefixes = Prefixes(sorted({c[:2] for c in self._raw}))

    def plain_unless_spelled(self) -> list[str] | None:
        """The strings whose absence from a text makes ``pieces`` return the text as it is, one plain piece
        (its raw added tokens), or None where that does not hold (a normalizer, or added tokens matched
        after normalizing: the text would be normalized first)."""
        if self._normalizer is not None or self._norm:
            return None
        return list(self._raw)

    def _normalize(self, s: str) -> str:
        return nfc_as_hf(s) if self._normalizer == "NFC" else s

    @staticmethod
    def _alternation(tokens: dict):
        import regex

        if not tokens:
            return None
        return regex.compile(any_of(tokens))

    def pieces(self, text: str, allowed) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        if not self._norm and not holds_any(text, self._raw_prefixes):
            text = self._normalize(text)
            return [(text, None)] if text else []
        raw_re = self._raw_re
        special = self._raw_special  # (worked out once, not per text)
        if special and allowed is not None and 0 < len(special & set(allowed)) < len(special):
            # some special tokens allowed, not all (tiktoken's model: HF allows all or none): matched among the
            # allowed ones and the non-special tokens only, as tiktoken's pattern holds only the allowed ones (an
            # allowed <M> inside a longer special <M>x not allowed had been left as text)
            raw_re = self._subset_re(frozenset(c for c in self._raw if c not in special or c in allowed))
        for piece, tid in self._find(text, raw_re, self._raw, allowed):
            if tid is not None:
                out.append((piece, tid))
                continue
            piece = self._normalize(piece)
            for p2, t2 in self._find(piece, self._norm_re, self._norm, allowed):
                if p2 or t2 is not None:
                    out.append((p2, t2))
        return out

    def _subset_re(self, contents: frozenset):
        """The alternation of the raw added tokens ``contents`` (kept for the last few subsets asked for)."""
        cache = self.__dict__.setdefault("_subsets", {})
        pattern = cache.get(contents)
        if pattern is None:
            if len(cache) >= 8:
                cache.pop(next(iter(cache)))
            pattern = cache[contents] = self._alternation({c: self._raw[c] for c in contents})
        return pattern

    def _find(self, s: str, pattern, tokens: dict, allowed) -> list[tuple[str, int | None]]:
        """HF's ``find_matches``: pieces in order, each (text, None) or (text, added token id)."""
        if not s:
            return []
        if pattern is None:
            return [(s, None)]
        out: list[tuple[str, int | None]] = []
        start_offset = 0
        n = len(s)
        for m in pattern.finditer(s):
            start, stop = m.span()
            tok = tokens[m.group()]
            if tok.special and tok.content not in allowed:
                continue  # a special token not allowed here is plain text (HF's encode_special_tokens)
            if tok.single_word:  # (a word character as Unicode 16 reads it, as HF's does; the regex module's
                # \w is a newer Unicode's, in which U+0558 and CJK Extension J are letters)
                start_space = start == 0 or not self._word.match(as_unicode16(s[start - 1]))
                stop_space = stop == n or not self._word.match(as_unicode16(s[stop]))
                if not (start_space and stop_space):
                    continue
            if tok.lstrip:
                k = start
                while k > 0 and s[k - 1] in self._space:
                    k -= 1
                start = max(k, start_offset)
            if tok.rstrip:
                while stop < n and s[stop] in self._space:
                    stop += 1
            if start >= stop:  # its text was all taken by the previous token's rstrip: HF drops the empty split
                start_offset = max(start_offset, stop)
                continue
            if start_offset < start:
                out.append((s[start_offset:start], None))
            out.append((s[start:stop], tok.id))
            start_offset = stop
        if start_offset < n:
            out.append((s[start_offset:], None))
        return out
