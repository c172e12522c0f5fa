"""Pre-tokenization split patterns: presets and resolution.

The presets are the split regexes of OpenAI's encodings (as tiktoken ships them): ``gpt2``
(r50k/p50k), ``gpt4`` (cl100k) and ``o200k``. ``None`` means no split: each document is one chunk.
Any other string is used as a regex (``regex`` module syntax). No merge ever crosses a chunk.
"""

from __future__ import annotations

import functools

from ..errors import ConfigError

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


def resolve_pattern(pattern: str | None) -> str | None:
    """Map a preset name to its regex; pass regex strings and ``None`` through (validated).

    >>> resolve_pattern("gpt2") == GPT2, resolve_pattern(None)
    (True, None)
    """
    if pattern is None:
        return None
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(f"pattern={pattern!r}; use a preset ({', '.join(PRESETS)}), None, or a regex string")
    regex_str = PRESETS.get(pattern, pattern)
    compiled(regex_str)  # fail early on a bad regex
    return regex_str


def preset_name(regex_str: str | None) -> str | None:
    """The preset name of a resolved pattern, or None for a custom regex."""
    for name, value in PRESETS.items():
        if value == regex_str:
            return name
    return None


@functools.lru_cache(maxsize=32)
def compiled(regex_str: str):
    import regex

    try:
        return regex.compile(regex_str)
    except regex.error as e:
        raise ConfigError(f"pattern {regex_str!r} is not a valid regex: {e}") from e


def split_with_gaps(regex_str: str, text: str) -> list[str]:
    r"""The matches of ``regex_str`` in ``text`` and, as chunks of their own, any text between them.

    ``regex.findall`` drops text no alternative matches; for the presets nothing is ever dropped, but a
    custom pattern such as ``\w+`` would lose the spaces, and ``decode(encode(s)) == s`` would fail.

    >>> split_with_gaps(r"\w+", "ab, cd")
    ['ab', ', ', 'cd']
    """
    out: list[str] = []
    pos = 0
    for m in compiled(regex_str).finditer(text):
        if m.start() > pos:
            out.append(text[pos : m.start()])
        if m.end() > m.start():
            out.append(m.group())
        pos = max(pos, m.end())
    if pos < len(text):
        out.append(text[pos:])
    return out
