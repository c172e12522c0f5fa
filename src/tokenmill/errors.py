"""One small error hierarchy. Messages name the input, the value, the limit and the fix."""

from __future__ import annotations


class TokenmillError(Exception):
    """Base class of every error tokenmill raises on purpose."""


class ConfigError(TokenmillError, ValueError):
    """An option or argument has a value that cannot work (names the parameter and the fix)."""


class OutOfRangeError(ConfigError, IndexError):
    """An index past the end of what it indexes (a document of a token source): an IndexError too, so
    code that stops at one (the sequence protocol) still does."""


class UnknownTokenError(ConfigError, KeyError):
    """A token id that holds no token (out of range, or a gap between a tokenizer's ids), or a text that is no
    single token: a KeyError too, as tiktoken's ``decode`` and ``encode_single_token`` raise, so code written
    for tiktoken that catches one still does."""

    __str__ = Exception.__str__  # (KeyError's would quote the message)


class InputError(TokenmillError, ValueError):
    """Input data is malformed: names the file, line, byte offset or document."""


class LoneSurrogateError(InputError):
    """A text holds a surrogate code point (U+D800-U+DFFF), which UTF-8 cannot encode: names the text and
    the character; ``tokenmill.replace_surrogates`` rewrites it as tiktoken does."""


class FormatError(TokenmillError, ValueError):
    """A tokenmill file is corrupted, has a wrong hash, or a format version this release cannot read."""


class UnsupportedTokenizerError(FormatError):
    """A valid tokenizer file uses a component tokenmill cannot reproduce exactly (an NFKC normalizer,
    a Unigram model, ...); ``tokenmill.as_tokenizer`` then runs it through HF ``tokenizers``."""


class SpecialTokenError(TokenmillError, ValueError):
    """Text spells a special token that the caller did not allow. ``found``: what the text holds and where
    (``the text contains the special token '<|x|>' at character 5``), the message without the advice that
    follows it, for a caller whose options differ (a store build, the CLI) to give its own."""

    def __init__(self, message: str, found: str | None = None):
        super().__init__(message)
        self.found = message if found is None else found


class MissingExtraError(TokenmillError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


def require(module: str, extra: str):
    """Import an optional dependency lazily, or fail with the pip command that installs it.

    >>> require("json", "core").__name__
    'json'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"{module!r} is not installed; install it with: pip install 'tokenmill[{extra}]'"
        ) from e


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` pointed at the first caller outside tokenmill (the user's line), however deep in
    tokenmill the warning is raised: a fixed ``stacklevel`` points into tokenmill when the same code is
    reached through another path (``as_tokenizer`` of a file, of an object, from a store build). In a
    thread or pool worker tokenmill started there is no user's line: the stack ends in ``threading`` or
    ``concurrent.futures``, and the warning names the line in tokenmill's function that the thread
    runs instead of the thread machinery's. Tested in ``tests/tokenizer/test_export.py``
    (``test_warnings_point_at_the_users_line_whatever_the_path``, ``..._in_a_thread``)."""
    import sys
    import warnings

    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "tokenmill":
        frame, level = frame.f_back, level + 1
    outside = "" if frame is None else frame.f_globals.get("__name__", "")
    if level > 1 and (frame is None or outside == "threading" or outside.startswith("concurrent.futures")):
        level -= 1  # the outermost tokenmill frame: the function the thread runs
    warnings.warn(message, category, stacklevel=level + 1)


def interrupt_in(e: BaseException | None) -> KeyboardInterrupt | None:
    """The KeyboardInterrupt ``e`` is or wraps (its cause or context, at any depth), else None. numba turns a
    Ctrl-C that lands while a compiled kernel's result is made into a SystemError ("returned a result with an
    exception set") whose cause is the interrupt."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def interruptible(fn):
    """``fn`` raising a KeyboardInterrupt where numba wrapped one in a SystemError (Ctrl-C during a compiled
    kernel's return, ~1 in 6 interrupts of a two-thread ``encode_batch``, 1 in 5 of a ``pack``): a script that
    catches the interrupt to save its work, and a notebook's "interrupt kernel", see what they expect. A generator
    function's iteration is covered too (a loader's batches)."""
    import functools
    import inspect

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def iterate(*args, **kwargs):
            try:
                return (yield from fn(*args, **kwargs))
            except SystemError as e:
                _raise_interrupt_in(e)
                raise

        return iterate

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemError as e:
            _raise_interrupt_in(e)
            raise

    return call


def _raise_interrupt_in(e: SystemError) -> None:
    """Raise the KeyboardInterrupt ``e`` wraps, if it wraps one (with ``e``'s traceback, not chained to it)."""
    got = interrupt_in(e)
    if got is not None:
        raise got.with_traceback(e.__traceback__) from None
