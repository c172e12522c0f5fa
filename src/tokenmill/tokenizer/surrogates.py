"""Text that UTF-8 cannot encode: lone surrogates.

A Python str may hold code points U+D800-U+DFFF (UTF-16 halves: ``"\\ud83d\\ude42"`` written in source, a
file decoded with ``surrogateescape``, one half of a pair cut off). UTF-8 has no bytes for them, so no
byte-level tokenizer can encode them as they are. tokenmill's encoders refuse such a text with a
:class:`~tokenmill.errors.LoneSurrogateError` that names the text (its place in a batch) and the
character; tiktoken's ``encode`` instead rewrites the text silently (a surrogate pair becomes its
character, a lone surrogate U+FFFD) and HF tokenizers refuse it. :func:`replace_surrogates` is tiktoken's
rewrite as an explicit step: ``tok.encode(replace_surrogates(text))`` gives tiktoken's ids for any str.
"""

from __future__ import annotations

import re

from ..errors import LoneSurrogateError

_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """``text`` as tiktoken encodes it: each surrogate pair (a high half U+D800-U+DBFF, then a low half
    U+DC00-U+DFFF) joined into its character, each other surrogate replaced by U+FFFD; a text without
    surrogates is returned as it is. Encoding the result gives the ids tiktoken's ``encode`` gives for
    ``text`` (tested on its GPT-2, cl100k and o200k rank files).

    >>> replace_surrogates("a\\ud83d\\ude42b\\ud800c") == "a\\U0001f642b\\ufffdc"
    True
    """
    if not isinstance(text, str):
        from ..errors import ConfigError

        raise ConfigError(f"replace_surrogates takes a str, not a {type(text).__name__}")
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def lone_surrogate_error(text: str, what: str = "the text") -> LoneSurrogateError:
    """The error for ``text``, which holds a surrogate: its first one's character index and code point."""
    m = _SURROGATE.search(text)
    at = f" at character {m.start():,d} (U+{ord(m.group()):04X})" if m else ""
    return LoneSurrogateError(
        f"{what} holds a lone surrogate{at}, which UTF-8 cannot encode; tokenmill.replace_surrogates(text) "
        "makes it the text tiktoken encodes (a surrogate pair its character, any other surrogate U+FFFD), "
        "or fix the text where it comes from")


def batch_surrogate_error(texts, first: int = 0) -> LoneSurrogateError | None:
    """:func:`lone_surrogate_error` of the first of ``texts`` (a batch's, from its text ``first``) that holds a
    surrogate, named by its place in the batch; None when none does."""
    for j, t in enumerate(texts):
        if isinstance(t, str) and _SURROGATE.search(t) is not None:
            return lone_surrogate_error(t, f"text {first + j:,d} of the batch")
    return None
