"""Added tokens of a tokenizer (tokenizer.json's ``added_tokens``): what each is, and how they are
found in a text exactly as HF ``tokenizers``' AddedVocabulary finds them. Used by the tokenizer
itself and by the formats that carry added tokens."""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass

from .special import holds_any


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


def _white_space() -> frozenset:
    import regex

    return frozenset(regex.findall(r"\s", "".join(map(chr, range(0x3100)))))


class AddedTokenMatcher:
    """Splits text into pieces and added tokens as HF's ``AddedVocabulary.extract_and_normalize``."""

    def __init__(self, added, normalizer: str | None):
        import regex

        self._normalizer = normalizer
        self._raw = {t.content: t for t in added if not t.normalized}
        self._norm = {self._normalize(t.content): t for t in added if t.normalized}
        self._raw_re = self._alternation(self._raw)
        self._norm_re = self._alternation(self._norm)
        self._space = _white_space()
        self._word = regex.compile(r"\w")
        # a text holding none of these two-character prefixes holds no raw added token: skip the scan
        self._raw_prefixes = tuple({c[:2] for c in self._raw})

    def plain_unless_spelled(self) -> list[str] | None:
        """The strings whose absence from a text makes ``pieces`` return the text as it is, one plain piece
        (its raw added tokens), or None where that does not hold (a normalizer, or added tokens matched
        after normalizing: the text would be normalized first)."""
        if self._normalizer is not None or self._norm:
            return None
        return list(self._raw)

    def _normalize(self, s: str) -> str:
        return unicodedata.normalize("NFC", s) if self._normalizer == "NFC" else s

    @staticmethod
    def _alternation(tokens: dict):
        import regex

        if not tokens:
            return None
        # longest first: at the leftmost position where any token matches, the longest one wins
        return regex.compile("|".join(regex.escape(c) for c in sorted(tokens, key=lambda c: (-len(c), c))))

    def pieces(self, text: str, allowed) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        if not self._norm and not holds_any(text, self._raw_prefixes):
            text = self._normalize(text)
            return [(text, None)] if text else []
        for piece, tid in self._find(text, self._raw_re, self._raw, allowed):
            if tid is not None:
                out.append((piece, tid))
                continue
            piece = self._normalize(piece)
            for p2, t2 in self._find(piece, self._norm_re, self._norm, allowed):
                if p2 or t2 is not None:
                    out.append((p2, t2))
        return out

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
            if tok.single_word:
                start_space = start == 0 or not self._word.match(s[start - 1])
                stop_space = stop == n or not self._word.match(s[stop])
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
