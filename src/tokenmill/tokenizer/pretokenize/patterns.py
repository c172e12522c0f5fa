"""Pre-tokenization split patterns: presets and resolution.

The presets are the split regexes of OpenAI's encodings (as tiktoken ships them): ``gpt2``
(r50k/p50k), ``gpt4`` (cl100k) and ``o200k``. ``None`` means no split: each document is one chunk.
Any other string is used as a regex (``regex`` module syntax). No merge ever crosses a chunk.
"""

from __future__ import annotations

import functools
import os
import re

from ...errors import ConfigError

GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
GPT4 = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

PRESETS: dict[str, str] = {"gpt2": GPT2, "gpt4": GPT4, "cl100k": GPT4, "o200k": O200K}
# the family of today's open models, by the exact regex their files carry (compiled by ``splitter``'s kernels)
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN3_5 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
FAMILY_REGEX: dict[str, str] = {"llama3": LLAMA3, "qwen2": QWEN2, "qwen3.5": QWEN3_5}
NAMES = (*PRESETS, *FAMILY_REGEX)  # every name a pattern argument takes


def resolve_pattern(pattern: str | None) -> str | None:
    """Map a preset name to its regex; pass regex strings and ``None`` through (validated).

    >>> resolve_pattern("gpt2") == GPT2, resolve_pattern(None)
    (True, None)
    """
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"pattern={pattern!r}; use a preset ({', '.join(NAMES)}), None, or a regex string")
    regex_str = PRESETS.get(pattern) or FAMILY_REGEX.get(pattern) or pattern
    if regex_str == pattern and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", pattern):
        # a bare word is a misspelled name ("GPT4", "cl100k_base", "llama-3"), never a split a tokenizer means:
        # as a regex it matches only that word, and the rest of the text becomes whole gap chunks
        raise ConfigError(f"pattern={pattern!r} is not a preset name ({', '.join(NAMES)}); as a regex it would "
                          "match only that literal text. Pass one of those names or a regex")
    compiled(regex_str)  # fail early on a bad regex
    return regex_str


def preset_name(regex_str: str | None) -> str | None:
    """The preset name of a resolved pattern, or None for a custom regex."""
    for name, value in PRESETS.items():
        if value == regex_str:
            return name
    return None


def _posix_end(regex_str: str, i: int) -> int:
    """The index after a POSIX class (``[:alpha:]``) at ``i`` inside a class, or 0 where none is."""
    if regex_str.startswith("[:", i):
        end = regex_str.find(":]", i + 2)
        if end > 0:
            return end + 2
    return 0


def _class_body(regex_str: str, i: int) -> int:
    """The index after a class's opening ``[`` at ``i``, its ``^`` and a ``]`` first in it (a literal)."""
    i += 1
    if regex_str.startswith("^", i):
        i += 1
    if regex_str.startswith("]", i):
        i += 1
    return i


def has_set_syntax(regex_str: str) -> bool:
    r"""Whether a character class of ``regex_str`` nests a class or uses ``&&``, as Kimi K2's
    ``[\p{Lu}\p{M}&&[^\p{Han}]]`` does, or ``--`` / ``~~``. tiktoken's engine (Rust) reads these as set
    operations (intersection, difference, symmetric difference; HF's, Oniguruma, has ``&&`` and nesting only:
    :func:`engine_differences` flags the other two there); the ``regex`` module does only in its version 1
    mode, which tokenmill then uses (in version 0 ``&&`` is two ampersands and the first ``]`` ends the
    class, and ``[a-z--b]`` is a range to ``b``: a union).

    >>> has_set_syntax(r"[\p{L}&&[^\p{Han}]]+"), has_set_syntax(r"[[:alpha:]]+|[a&]"), has_set_syntax(r"[\w--\d]")
    (True, False, True)
    """
    depth, i, n = 0, 0, len(regex_str)
    while i < n:
        c = regex_str[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            if depth and _posix_end(regex_str, i):
                i = _posix_end(regex_str, i)
                continue
            if depth:
                return True
            depth = 1
            i = _class_body(regex_str, i)
            continue
        if depth and c in "&-~" and regex_str.startswith(c + c, i):  # intersection, difference, symmetric difference
            return True
        if depth and c == "]":
            depth = 0
        i += 1
    return False


_ANCHOR_ESCAPES = frozenset("AZzG")  # \A \Z \z \G outside a class: see engine_differences
_ONIG_ONLY = frozenset("hHRXKOyY")  # escapes Oniguruma reads otherwise (\h: a hex digit) or the regex module lacks


def engine_differences(regex_str: str, *, oniguruma: bool = False, tiktoken: bool = False) -> list[str]:
    r"""The constructs of ``regex_str`` that the engines tokenmill meets read differently, so that a split
    carried across them would cut other chunks: anchors (``^`` and ``$`` are line anchors in Oniguruma,
    HF's engine, and text anchors in the ``regex`` module and tiktoken's; ``$`` and ``\Z`` also match
    before a final newline in some of them and not in others; and a segment between special tokens
    starts and ends where each engine is asked to), inline flags other than ``i`` (``m`` is dot-all in
    Oniguruma), and, for a pattern in Oniguruma's syntax (``oniguruma=True``: a tokenizer.json's Split
    regex), its escapes the ``regex`` module reads otherwise or not at all (``\h``, ``\x{41}``,
    ``\o{101}``, ``\pL`` without braces: the letters "pL" there; ``x{n}?``: ``(?:x{n})?`` there, ``x{n}``
    here, ...). ``tiktoken=True`` (a pattern tiktoken's engine runs: a rank file's export, an
    ``Encoding``, a tekken file): also its POSIX classes (``[[:alpha:]]``: ASCII there, Unicode in the
    ``regex`` module and Oniguruma) and named characters (``\N{...}``); those are flagged for Oniguruma
    too. Empty when the pattern reads alike everywhere. Classes nest, as in tiktoken's and HF's engines
    and in tokenmill's reading of a set-syntax pattern.

    >>> engine_differences(r"^\w+|\s+$"), engine_differences(r"[\^$]+|\p{^L}|(?i:ab)|\s++$")
    (['^', '$'], [])
    >>> print(*engine_differences(r"\h+|\x{41}", oniguruma=True), *engine_differences(r"(?m:a.)|\Z"))
    \h \x{41} (?m: \Z
    >>> print(*engine_differences(r"\pL+|\PN|\p{L}|\d{2}?|\d{2,}?", oniguruma=True))
    \pL \PN {2}?
    """
    out: list[str] = []
    depth, i, n = 0, 0, len(regex_str)
    while i < n:
        c = regex_str[i]
        if c == "\\":
            e = regex_str[i + 1 : i + 2]
            end = i + 2
            if e in ("p", "P", "x", "N", "o", "u", "U") and regex_str.startswith("{", end):
                close = regex_str.find("}", end)
                end = n if close < 0 else close + 1
                if (oniguruma and e in ("x", "o", "N")) or (tiktoken and e == "N"):
                    out.append(regex_str[i:end])
            elif (e in _ANCHOR_ESCAPES and not depth) or (oniguruma and e in _ONIG_ONLY | {"w", "W"}):
                out.append("\\" + e)  # (\w: ZWJ and ZWNJ are word characters in the regex module, ²³¹¼½¾ not;
                # in Oniguruma the other way round)
            elif oniguruma and e in ("p", "P"):  # \pL: a letter class in the regex module, the letters "pL" in
                end = min(end + 1, n)  # Oniguruma's Ruby syntax (which takes a property in braces only)
                out.append(regex_str[i:end])
            i = end
            continue
        if c == "[":
            if depth and _posix_end(regex_str, i):
                if tiktoken or oniguruma:  # (ASCII in tiktoken's engine; Oniguruma's [[:punct:]] and [[:alnum:]]
                    # hold other characters than the regex module's)
                    out.append(regex_str[i:_posix_end(regex_str, i)])
                i = _posix_end(regex_str, i)
                continue
            depth += 1
            i = _class_body(regex_str, i)
            continue
        if depth:
            if c == "]":
                depth -= 1
            elif oniguruma and c in "-~" and regex_str.startswith(c + c, i):
                out.append(c + c)  # a set operation in tiktoken's engine and here, a range or two characters there
                i += 2
                continue
        elif oniguruma and c == "{" and (lazy := re.match(r"\{\d+\}\?", regex_str[i:])):
            out.append(lazy.group(0))  # Ruby syntax: x{n}? is (?:x{n})?, not a lazy x{n} (which is x{n})
        elif c == "^" or c == "$" and not regex_str.endswith(r"\s++", 0, i):
            out.append(c)  # (after a possessive run of white space, as tiktoken's presets have it, "$" can
            # only be the end: the run took every line break)
        elif regex_str.startswith("(?", i):
            m = re.match(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?[:)]", regex_str[i:])
            if m and set((m.group(1) or "") + (m.group(2) or "")) - {"i"}:
                out.append(m.group(0))
        i += 1
    if oniguruma:
        out += _case_differences(regex_str)
    return list(dict.fromkeys(out))


_FULL_FOLDS = ("ff", "fi", "fl", "ss", "st")  # ASCII text a character folds to in full case folding (ß: ss, ﬁ: fi)


def _case_differences(regex_str: str) -> list[str]:
    r"""What a case-insensitive part (``(?i:...)``, or ``(?i)`` to the end) of an Oniguruma pattern matches otherwise
    in the ``regex`` module: a property or class escape (Oniguruma does not fold ``\p{Lu}`` into lowercase
    letters), a range or ``i`` (İ is ``i`` to the regex module, not to Oniguruma), and text that full case folding
    reaches (ß for ``ss``, ﬁ for ``fi``; non-ASCII letters), which Oniguruma applies and tokenmill's reading does
    not. Other ASCII letters, alone or in a class, read alike (checked letter by letter against HF's Oniguruma):
    GPT-4's ``(?i:'s|'t|'re|'ve|'m|'ll|'d)`` and cl100k's ``(?i:[sdmt]|ll|ve|re)`` are kept."""
    out = []
    for m in re.finditer(r"\(\?i(:|\))", regex_str):
        lo = m.end()
        if m.group(1) == ")":
            scope = regex_str[lo:]
        else:
            depth, i = 1, lo
            while i < len(regex_str) and depth:
                c = regex_str[i]
                if c == "\\":
                    i += 2
                    continue
                if c == "[":
                    i = _class_body(regex_str, i)
                    continue
                depth += {"(": 1, ")": -1}.get(c, 0)
                i += 1
            scope = regex_str[lo:i - 1]
        letters = re.sub(r"\\.", "", scope).lower()
        ranged = re.search(r"\[[^\]]*[^\\\[]-[^\]]", scope)  # (a class with a range: [a-z] holds i)
        if ranged or re.search(r"\\[pPwWdDsShH]", scope) or not letters.isascii() or "i" in letters \
                or any(f in letters for f in _FULL_FOLDS):  # (İ is i to the regex module, not to Oniguruma)
            out.append(m.group(0) + scope[:12])
    return out


def v1_source(regex_str: str) -> str:
    r"""``regex_str`` for the ``regex`` module's version 1 mode: a ``|`` inside a class escaped (``||``
    is a union operator there, two pipes for tiktoken's and HF's engines).

    >>> print(v1_source(r"a|[x||[^y]&&\w]"))
    a|[x\|\|[^y]&&\w]
    """
    out, depth, i, n = [], 0, 0, len(regex_str)
    while i < n:
        c = regex_str[i]
        if c == "\\":
            out.append(regex_str[i : i + 2])
            i += 2
            continue
        if c == "[":
            end = regex_str.find(":]", i + 2) if depth and regex_str.startswith("[:", i) else -1
            if end > 0:
                out.append(regex_str[i : end + 2])
                i = end + 2
                continue
            depth += 1
            out.append(c)
            i += 1
            for lead in "^]":
                if regex_str.startswith(lead, i):
                    out.append(lead)
                    i += 1
            continue
        if c == "]" and depth:
            depth -= 1
        out.append("\\|" if c == "|" and depth else c)
        i += 1
    return "".join(out)


_EMPTY_PROBE = "ab AB 12 \n\t\r\n.,!?'s é中🙂 x  y\u3000z"


def matches_empty(regex_str: str) -> bool:
    """Whether ``regex_str`` can match the empty string (at the start of an empty text, or anywhere in a
    probe text of letters, digits, spaces, punctuation and three scripts). After an empty match the
    engines part ways (Oniguruma, HF's, steps one character on; the ``regex`` module tries a longer match
    at the same place; tiktoken's panics), so a split with one cannot be carried between them."""
    rx = compiled(regex_str)
    return rx.match("") is not None or any(m.start() == m.end() for m in rx.finditer(_EMPTY_PROBE))


@functools.lru_cache(maxsize=32)
def compiled(regex_str: str):
    import regex

    try:
        if has_set_syntax(regex_str):  # ((?-f): simple case folding, as V0 and tiktoken's engine and the compiled
            # splitter read (?i); V1 turns full folding on with it, where "ss" matches "ß")
            return regex.compile("(?-f)" + v1_source(regex_str), flags=regex.V1)
        return regex.compile(regex_str)
    except regex.error as e:
        raise ConfigError(f"pattern {regex_str!r} is not a valid regex: {e}") from e


def split_with_gaps(regex_str: str, text: str) -> list[str]:
    r"""The matches of ``regex_str`` in ``text`` and, as chunks of their own, any text between them.

    ``regex.findall`` drops text no alternative matches; for the presets nothing is ever dropped, but a
    custom pattern such as ``\w+`` would lose the spaces, and ``decode(encode(s)) == s`` would fail.
    The chunks always cover ``text`` exactly, in order: a pattern whose matches run backwards or
    overlap (the ``(?r)`` reverse flag) is refused, and a pattern runs under a time budget
    (:func:`regex_budget`) so that catastrophic backtracking ends with an error naming it.

    >>> split_with_gaps(r"\w+", "ab, cd")
    ['ab', ', ', 'cd']
    """
    out: list[str] = []
    pos = 0
    for m in finditer_bounded(regex_str, text):
        if m.start() < pos:
            raise ConfigError(
                f"pattern {regex_str!r} matched text[{m.start():,d}:{m.end():,d}], which starts before the end "
                f"of the previous match ({pos:,d}); a split pattern must match left to right without overlap "
                "(drop the (?r) reverse flag)"
            )
        if m.start() > pos:
            out.append(text[pos : m.start()])
        if m.end() > m.start():
            out.append(text[m.start() : m.end()])  # (the original's: the engine saw its Unicode-16 copy)
        pos = max(pos, m.end())
    if pos < len(text):
        out.append(text[pos:])
    return out


def regex_budget(n_chars: int) -> float | None:
    """Seconds a custom pattern may run over ``n_chars`` characters before it is stopped.

    ``$TOKENMILL_REGEX_TIMEOUT`` seconds (default 5) plus 2 microseconds per character: 10-100 times
    what a linear-time pattern needs. ``TOKENMILL_REGEX_TIMEOUT=0`` (or ``inf``) turns the budget off.
    """
    raw = os.environ.get("TOKENMILL_REGEX_TIMEOUT", "5")
    try:
        base = float(raw)
    except ValueError:
        raise ConfigError(f"TOKENMILL_REGEX_TIMEOUT={raw!r} is not a number of seconds") from None
    if base != base:
        raise ConfigError("TOKENMILL_REGEX_TIMEOUT=nan is not a number of seconds")
    if base <= 0 or base == float("inf"):  # 0, negative or infinite: no limit
        return None
    return base + 2e-6 * n_chars


def finditer_bounded(regex_str: str, text: str):
    """``compiled(regex_str).finditer(text)`` under :func:`regex_budget`; a pattern that runs out of
    time (nested quantifiers such as ``(a|a)+$`` backtrack exponentially) raises a ConfigError. The engine
    matches ``text`` as Unicode 16 reads it (``unicode.as_unicode16``): take spans, and cut ``text``."""
    from .unicode import as_unicode16

    budget = regex_budget(len(text))
    it = compiled(regex_str).finditer(as_unicode16(text), timeout=budget)
    try:
        yield from it
    except TimeoutError:
        raise timed_out(regex_str, budget, len(text)) from None


def findall_bounded(regex_str: str, text: str) -> list:
    """``regex.findall(regex_str, text)`` under the same time budget, ``text`` read as Unicode 16 reads it
    (``unicode.as_unicode16``; the chunks are ``text``'s own)."""
    from .unicode import as_unicode16

    budget = regex_budget(len(text))
    seen = as_unicode16(text)
    try:
        if seen is text:
            return compiled(regex_str).findall(text, timeout=budget)
        return [text[m.start() : m.end()] for m in compiled(regex_str).finditer(seen, timeout=budget)]
    except TimeoutError:
        raise timed_out(regex_str, budget, len(text)) from None


def timed_out(regex_str: str, budget: float, n: int, unit: str = "characters") -> ConfigError:
    """The error of a pattern that ran out of its time budget (:func:`regex_budget`) over ``n`` ``unit``."""
    return ConfigError(
        f"pattern {regex_str!r} ran out of its time budget ({budget:.1f} s for {n:,d} {unit}): it backtracks "
        "catastrophically (nested quantifiers such as (a+)+ or (a|a)+), or its match at each place reads far "
        "ahead and ends short (a+b|a over a long run of a); rewrite it, or raise TOKENMILL_REGEX_TIMEOUT "
        "(seconds; 0 = no limit)"
    )
