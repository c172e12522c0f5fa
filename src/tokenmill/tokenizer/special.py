"""Special tokens: their names and ids, and tiktoken's safety model for text that spells one.

``encode`` refuses text that contains a special token unless the caller allows it (then it becomes
its id) or disallows nothing (then it is plain text); :class:`SpecialTokens` decides which, and cuts
the text at the allowed ones.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from .._validate import check_int
from ..errors import ConfigError, SpecialTokenError

# the special tokens that end or begin a text, or pad one, by name, most common first: what a token store
# appends (EOS) or prepends (BOS) when not told an id, and the roles a transformers folder is given
# (``formats.pretrained``). The last of each: DeepSeek's.
EOS_NAMES = ("<|endoftext|>", "</s>", "<|eos|>", "<eos>", "<|end_of_text|>", "<|im_end|>",
             "<\uff5cend\u2581of\u2581sentence\uff5c>")
BOS_NAMES = ("<|begin_of_text|>", "<s>", "<|bos|>", "<bos>", "<|startoftext|>",
             "<\uff5cbegin\u2581of\u2581sentence\uff5c>")
PAD_NAMES = ("<pad>", "<|pad|>", "[PAD]")


def special_token_names(special_tokens, *, takes_ids: bool = True) -> list[str]:
    """Special token names: a str is one token (not one per character); each must be a non-empty,
    encodable (no lone surrogate) string, listed once. ``takes_ids``: the caller also takes a dict name ->
    id (said in the advice)."""
    if special_tokens is None:
        return []
    if isinstance(special_tokens, (set, frozenset)):
        if len(special_tokens) > 1:  # (its order changes with PYTHONHASHSEED: so would the ids it gives)
            raise ConfigError(f"special_tokens is a {type(special_tokens).__name__}, whose order Python does not "
                              "keep from one run to the next, so the ids it gives would change; pass a list (its "
                              "order gives the ids)" + (" or a dict name -> id" if takes_ids else ""))
    if not isinstance(special_tokens, str) and not hasattr(special_tokens, "__iter__"):
        raise ConfigError(f"special_tokens={special_tokens!r}: pass a list of names or a dict name -> id")
    names = [special_tokens] if isinstance(special_tokens, str) else list(special_tokens)
    seen = set()
    for s in names:
        if not isinstance(s, str) or not s:
            raise ConfigError(f"special token {s!r} must be a non-empty string")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ConfigError(f"special token {s!r} holds a lone surrogate at character {e.start:,d}, which UTF-8 "
                              "cannot encode; special tokens must be valid text") from None
        if s in seen:
            raise ConfigError(f"special token {s!r} is listed twice; special tokens must be distinct")
        seen.add(s)
    return names


def without_special_ids(ids, special: Mapping[str, int], skip) -> list[int]:
    """``ids`` (checked: ints >= 0) with every id of ``special`` left out when ``skip`` (``decode``'s
    ``skip_special_tokens``, a real bool), as HF's ``decode(skip_special_tokens=True)`` leaves out its special
    tokens; ``ids`` as they are otherwise.

    >>> without_special_ids([5, 0, 6, 1], {"<s>": 0, "</s>": 1}, True)
    [5, 6]
    """
    from .._validate import check_bool

    if not check_bool(skip, "skip_special_tokens"):
        return ids
    import numpy as np

    from .._validate import check_ids_array

    arr = check_ids_array(ids)
    if special:
        arr = arr[~np.isin(arr, np.fromiter(special.values(), np.int64, len(special)))]
    return arr.tolist()


def check_specials(special: dict[str, int], vocab: Sequence, dense: bool = True) -> dict[str, int]:
    """Special tokens: distinct names and ids, anywhere an id is not held by other vocabulary bytes
    (after the vocabulary, in a gap, or, when not ``dense`` (tokenizer.json imports), on a token with
    the same bytes)."""
    if not isinstance(special, Mapping):  # (a list, set or str reached .items() as an AttributeError)
        raise ConfigError(f"special_tokens is a {type(special).__name__}; pass a dict name -> id (e.g. "
                          "{'<|endoftext|>': 50256}): a vocabulary of ranks gives its special tokens no ids of its own")
    special_token_names(special)
    # tables are sized by the largest id (a Python int per id for lists out: an id of 2**31 - 1 took the
    # process's memory at its first encode): ids stay within 2**20 of the vocabulary
    top = len(vocab) + (1 << 20) - 1
    for s, i in special.items():
        check_int(i, f"special token {s!r} id", min=0, max=top)
    holders: dict[int, list[str]] = {}
    for s, i in special.items():
        holders.setdefault(i, []).append(s)
    twice = next((i for i, names in holders.items() if len(names) > 1), None)
    if twice is not None:  # (the whole sorted list of ids had been the message: 1,000 of them for tekken)
        held = holders[twice]
        raise ConfigError(f"special tokens {held[0]!r} and {held[1]!r} both have id {twice:,d}"
                          + (f" ({len(held) - 2:,d} more too)" if len(held) > 2 else "")
                          + "; each special token needs its own id")
    n_vocab = len(vocab)
    for s, i in special.items():
        if i < n_vocab and vocab[i] is not None and (dense or vocab[i] != s.encode("utf-8")):
            raise ConfigError(f"special token {s!r} has id {i:,d}, which the vocabulary token {vocab[i]!r} holds; "
                              + ("give it a free id" if dense else "one id cannot stand for both a special token's "
                                 "text and another token's bytes in tokenmill"))
    return dict(special)


def split_specials(text: str, allowed):
    """Yield (piece, is_special) splitting ``text`` at allowed special tokens (longest first)."""
    pos = 0
    for m in split_pattern(allowed if isinstance(allowed, frozenset) else frozenset(allowed)).finditer(text):
        if m.start() > pos:
            yield text[pos : m.start()], False
        yield m.group(), True
        pos = m.end()
    if pos < len(text):
        yield text[pos:], False


def any_of(words) -> str:
    """A regex source matching any of ``words`` (non-empty strings), the longest where several match at one
    position (at the leftmost position where a token matches, the longest wins: HF's and tiktoken's rule),
    written as a trie (``<(?:s>|/s>)``): one path a shared prefix, each node's continuations tried before it
    ends there (``(?:...)?`` is greedy). The same matches as the alternation of the words longest first,
    which a regex engine tries one by one at each candidate position (DeepSeek's 1,283 added tokens, all
    starting with '<': ~8 us a '<' of the text; Mistral v3's 750 control pieces). Valid for ``re`` and
    ``regex`` alike (``re.escape``'s escapes read as literals in both)."""
    import re

    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[None] = None  # a word ends here

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(child) for ch, child in sorted((k, v) for k, v in node.items() if k is not None)]
        if not alts:
            return ""
        if len(alts) == 1 and None not in node:
            return alts[0]
        return "(?:" + "|".join(alts) + ")" + ("?" if None in node else "")

    try:
        return emit(trie)
    except RecursionError:  # (a word of ~1,000 characters: the alternation, longest first, matches the same)
        return "|".join(re.escape(w) for w in sorted(set(words), key=lambda w: (-len(w), w)))


@functools.lru_cache(maxsize=64)
def split_pattern(allowed: frozenset):
    """The compiled :func:`any_of` of ``allowed``, made once per set of tokens: escaping and compiling it
    for every text cost ~8 us a text with Mistral v3's 751 control pieces (the ``regex`` module's own
    cache still paid for the pattern's text), and byte-level tokenizers with ``allowed_special="all"``
    paid it too."""
    import regex

    return regex.compile(any_of(allowed))


def requested(names, allowed_special, disallowed_special) -> tuple[frozenset[str], frozenset[str]]:
    """(allowed, to check): the special tokens ``allowed_special`` names (``"all"``, one token as a str,
    or a collection; unknown names are an error, in either) and the disallowed ones the text must not spell.
    Frozensets: a rule is worked out once for a batch (or kept, :func:`rule_of`) and shared by its texts,
    and a frozenset is its own key in the pattern caches (no copy of its names a text)."""
    allowed = _names(names, allowed_special, "allowed_special")
    unknown = allowed.difference(names)
    if unknown:
        raise ConfigError(f"allowed_special names {sorted(unknown)!r}, which are not special tokens of this tokenizer")
    disallowed = _names(names, disallowed_special, "disallowed_special")
    unknown = disallowed.difference(names)
    if unknown:  # (a misspelt one had made every special token's text plain text, silently)
        raise ConfigError(f"disallowed_special names {sorted(unknown)!r}, which are not special tokens of this "
                          "tokenizer; name some of its own, or pass () to disallow none (their text then plain text)")
    # as tiktoken: "all" means every token not allowed; a token named in both is disallowed (the text must not
    # spell it: tiktoken raises there, and encoding it as allowed read past the caller's explicit refusal)
    return allowed, (disallowed - allowed) if disallowed_special == "all" else disallowed


def rule_of(memo: dict, names, allowed_special, disallowed_special) -> tuple[frozenset[str], frozenset[str]]:
    """``requested(names, allowed_special, disallowed_special)``, kept in ``memo`` (a tokenizer's own dict,
    for its fixed ``names``; cleared past 64 entries) where the two arguments can be a dict key (``"all"``,
    ``()``, a tuple or frozenset of names): sets of Mistral v3's 751 names were ~8 us a call, each
    ``encode`` of a short text paying them. An error is raised again each call, never kept."""
    try:
        key = (allowed_special, disallowed_special)
        rule = memo.get(key)
    except TypeError:  # a list or a set: worked out each time
        return requested(names, allowed_special, disallowed_special)
    if rule is None:
        rule = requested(names, allowed_special, disallowed_special)
        if len(memo) >= 64:
            memo.clear()
        memo[key] = rule
    return rule


def _names(names, value, what: str) -> frozenset:
    """The special tokens ``value`` names: ``"all"``, one token as a str (not a set of characters), or a
    collection of them."""
    if value == "all":
        return frozenset(names)
    if isinstance(value, str):
        return frozenset((value,))
    try:
        out = frozenset(value)
    except TypeError:
        raise ConfigError(f"{what} must be 'all', a special token or a collection of them, not "
                          f"{type(value).__name__}") from None
    bad = next((x for x in out if not isinstance(x, str)), None)
    if bad is not None:
        raise ConfigError(f"{what} holds {bad!r} ({type(bad).__name__}); special tokens are named by their text")
    return out


def union_of(*sets: frozenset) -> frozenset:
    """The union of frozensets, the one itself where only one is not empty (a batch's usual rule: no copy of
    751 names)."""
    full = [s for s in sets if s]
    return full[0] if len(full) == 1 else frozenset().union(*full)


def first_holding(datas: list, words: frozenset) -> int | None:
    """The index of the first of ``datas`` (texts' UTF-8) that holds one of ``words`` (the special or added
    tokens that cut a text or refuse it), ``len(datas)`` when none does: one compiled pass over the texts'
    joined bytes (``_special_scan``), not a Python search a text (most of the cost of a batch of short
    lines). None where one pass cannot tell: more than 8 distinct first bytes (the scan's
    bound), or a word that is empty or not valid text; the caller then asks each text."""
    if not words or not datas:
        return len(datas)
    needles = _needles(words if isinstance(words, frozenset) else frozenset(words))
    if needles is None:
        return None
    import numpy as np

    from ._special_scan import find_special

    docs = np.zeros(len(datas) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, datas), np.int64, len(datas)), out=docs[1:])
    at = find_special(b"".join(datas), docs, needles)
    return len(datas) if at < 0 else int(np.searchsorted(docs, at, side="right")) - 1


@functools.lru_cache(maxsize=64)
def _needles(words: frozenset):
    """``_special_scan.check_needles`` of ``words``' UTF-8, once per set of words; None where the scan does
    not take them (see :func:`first_holding`)."""
    try:
        utf8 = sorted(w.encode("utf-8") for w in words)
    except UnicodeEncodeError:
        return None
    if not all(utf8) or len({b[0] for b in utf8}) > 8:
        return None
    from ._special_scan import check_needles

    return check_needles(utf8)


def holds_any(text: str, prefixes: tuple) -> bool:
    """Whether ``text`` holds one of ``prefixes`` (short strings; ``Prefixes`` of them computes their first
    characters once): their first characters are looked for first, one character at a time (a
    ``memchr``-like scan, ~20x faster than a two-character search on a 3 MB text), the prefixes
    themselves only where one occurs."""
    firsts = prefixes.firsts if isinstance(prefixes, Prefixes) else {p[:1] for p in prefixes}
    for c in firsts:
        if c in text:
            return any(p in text for p in prefixes)
    return False


class Prefixes(tuple):
    """A tuple of prefixes for :func:`holds_any`, their distinct first characters worked out once (a set
    built on every call cost ~0.4 us of a sentence's ``encode``)."""

    def __new__(cls, prefixes):
        self = super().__new__(cls, prefixes)
        self.firsts = tuple(sorted({p[:1] for p in self}))
        return self


class SpecialTokens:
    """A tokenizer's special tokens (name -> id) and the check of a text against them."""

    def __init__(self, special: dict[str, int]):
        self.ids = dict(special)
        self._re = None
        self._rules: dict = {}  # (allowed_special, disallowed_special) -> requested's rule (rule_of)
        if len(special) > 4:  # one scan for all of them instead of one ``in`` per token
            import regex

            self._re = regex.compile("|".join(regex.escape(s) for s in sorted(special)))
            self._prefixes = Prefixes(sorted({s[:2] for s in special}))

    def allowed(self, text: str, allowed_special, disallowed_special, rule=None) -> set[str]:
        """The allowed special tokens; raises if ``text`` spells a disallowed one. ``rule``: ``requested(...)``
        of these arguments, worked out once for a batch of texts."""
        names = self.ids
        allowed, check = rule_of(self._rules, names, allowed_special, disallowed_special) if rule is None else rule
        if not check or (self._re is not None and len(check) == len(names)
                         and not holds_any(text, self._prefixes)):
            return allowed
        found = [(text.find(s), s) for s in check if s in text]
        if found:  # the first in the text (the longest there), as tiktoken names it
            at, s = min(found, key=lambda f: (f[0], -len(f[1])))
            if s in names:
                found = f"the text contains the special token {s!r} at character {at:,d}"
                if s in allowed:  # (named in both: "all" disallows only what is not allowed)
                    raise SpecialTokenError(f"{found}, which both allowed_special and disallowed_special name (as "
                                            "tiktoken, disallowed wins); leave it out of disallowed_special to encode "
                                            "it as a special token", found)
                raise SpecialTokenError(
                    f"{found}; pass allowed_special={{{s!r}}} (or 'all') to encode it as a special token, "
                    "disallowed_special=() to encode it as plain text, or use encode_ordinary()", found)
            found = f"the text contains {s!r} at character {at:,d}, which disallowed_special names"
            raise SpecialTokenError(f"{found}; leave it out of disallowed_special to encode it as plain text", found)
        return allowed

    def pieces(self, text: str, allowed: set[str]) -> list[tuple[str, int | None]]:
        """(piece, id): the allowed special tokens in ``text`` (their id) and the text between (None)."""
        if not allowed:
            return [(text, None)] if text else []
        return [(p, self.ids[p] if special else None) for p, special in split_specials(text, allowed)]


def batch_special_error(texts: list, error: SpecialTokenError, check) -> SpecialTokenError:
    """``error`` (a batch's) naming its text: the first of ``texts`` that ``check(text)`` refuses, as
    ``text 3 of the batch: the text contains ...`` (a batch of one keeps the message as it is)."""
    if len(texts) < 2:
        return error
    for k, t in enumerate(texts):
        try:
            check(t)
        except SpecialTokenError as e:
            return SpecialTokenError(f"text {k:,d} of the batch: {e}", f"text {k:,d} of the batch: {e.found}")
    return error


def names_batch_text(encode_batch):
    """``encode_batch`` of a tokenizer with an ``_allowed(text, allowed_special, disallowed_special)`` check
    (the SentencePiece families) whose SpecialTokenError names the batch's text (:func:`batch_special_error`)."""
    import functools

    from .groups import batch_args

    @functools.wraps(encode_batch)
    def wrapped(self, texts, *, num_threads=None, as_arrays: bool = False, allowed_special=(),
                disallowed_special="all") -> list:
        texts = batch_args(texts, num_threads, as_arrays)[0]
        try:
            return encode_batch(self, texts, num_threads=num_threads, as_arrays=as_arrays,
                                allowed_special=allowed_special, disallowed_special=disallowed_special)
        except SpecialTokenError as e:
            raise batch_special_error(texts, e, lambda t: self._allowed(t, allowed_special, disallowed_special)) \
                from None

    return wrapped
