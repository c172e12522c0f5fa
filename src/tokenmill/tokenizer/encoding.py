"""How a :class:`~tokenmill.tokenizer.model.Tokenizer` turns text into ids: special and added tokens
cut out first, then the plain text between them through the compiled encoder (``bpe.encoder``) or,
on a first run while the kernels are not compiled yet, its pure-Python twin (``bpe.reference``).
"""

from __future__ import annotations

import numpy as np

from .._arrays import offsets_of
from ..errors import ConfigError, LoneSurrogateError, SpecialTokenError
from .bpe import encoder as compiled
from .bpe import tables
from .bpe.reference import PythonEncoder
from .groups import GROUP_BYTES, batch_args, batch_texts, batch_threads, check_strs, group_bounds, in_groups, text_sizes
from .special import SpecialTokens, batch_special_error, requested
from .surrogates import batch_surrogate_error, lone_surrogate_error

# a batch of one text up to this many characters takes ``encode``'s path (a larger one the batch's: its
# UTF-8 read through CPython, not encoded again, and its kernel work cut across the threads)
_ONE_TEXT_CHARS = 1 << 16


def texts_utf8(texts: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(read-only uint8 buffer, int64 offsets)``: the UTF-8 of the strs ``texts`` back to back (text ``i`` is
    ``buffer[offsets[i]:offsets[i + 1]]``), read in one pass as the encoder reads them (CPython's own copy of
    each str, made and kept with a non-ASCII one); None when one holds a lone surrogate (no UTF-8). For a
    caller that hashes or stores the bytes the encoder reads (the token store's input hash)."""
    from ._cpython import utf8_joined

    return utf8_joined(texts)


def utf8_texts(data: np.ndarray, offsets) -> list[str]:
    """The strs of the well-formed UTF-8 pieces ``data[offsets[i]:offsets[i + 1]]`` (``texts_utf8``'s inverse)."""
    o = offsets.tolist() if isinstance(offsets, np.ndarray) else list(offsets)
    mv = memoryview(data)
    return [str(mv[o[i] : o[i + 1]], "utf-8") for i in range(len(o) - 1)]


_UTF8_FIRST_BYTES = 1 << 20  # bytes left to str.decode while the UTF-8 check kernel is not compiled


def well_formed_utf8(data: bytes) -> np.ndarray | None:
    """``data`` as a read-only uint8 array when it is well-formed UTF-8 (exactly what ``data.decode("utf-8")``
    accepts, told by one compiled pass that does not hold the GIL: ~0.1 ms a MB of English), else None (the
    caller decodes it, which names the first bad byte or replaces it). None too while that kernel is not
    compiled on this machine, for the first :data:`_UTF8_FIRST_BYTES` bytes of the process
    (``_jit.python_first``: a first run on a few files does not wait for a compile)."""
    from .._jit import python_first
    from . import _utf8_check

    buf = np.frombuffer(data, np.uint8)  # (read-only: data is bytes)
    if python_first("utf8", _utf8_check.first_invalid, buf.size, _UTF8_FIRST_BYTES):
        return None
    return buf if _utf8_check.first_invalid(buf) < 0 else None


def checked_str(text) -> str:
    if not isinstance(text, str):
        raise ConfigError(f"text is a {type(text).__name__}; encode takes a str (decode bytes first: "
                          "data.decode('utf-8'))")
    return text


class Encoding:
    """The encoder of one tokenizer spec: its special-token rule, added-token matcher, compiled
    encoder and Python twin (the last three built on first use)."""

    def __init__(self, spec, pair_table, byte_ids: list[int], n_ids: int):
        self.spec = spec
        self.pairs = pair_table
        self.byte_ids = byte_ids
        self.n_ids = n_ids
        self.specials = SpecialTokens(dict(spec.special_tokens))
        self.matcher = None  # the added-token matcher
        self.python = None  # the pure-Python encoder
        self.compiled = None  # the compiled encoder
        self.lists = None  # one Python int per id, for lists out (as_list)

    def encode(self, text, allowed_special, disallowed_special) -> list[int]:
        if isinstance(text, str) and self.python_first(len(text)):
            return self.encode_python(text, allowed_special, disallowed_special)
        return self.as_list(self.encode_array(text, allowed_special, disallowed_special))

    def encode_python(self, text, allowed_special, disallowed_special) -> list[int]:
        if self.python is None:
            self.python = PythonEncoder(self.spec, self.pairs, self.byte_ids)
        out: list[int] = []
        try:
            for piece, token_id in self.pieces(checked_str(text), allowed_special, disallowed_special):
                if token_id is None:
                    out.extend(self.python.encode(piece))
                else:
                    out.append(token_id)
        except (UnicodeEncodeError, LoneSurrogateError):  # named in the whole text (a piece's own index is not)
            raise lone_surrogate_error(text) from None
        return out

    def _python_batch(self, texts: list, allowed_special, disallowed_special) -> list[list[int]]:
        """``encode_python`` of each text; a lone surrogate named by its text's place in the batch (no text: the
        special-token arguments checked all the same, as a batch's kernel path checks them)."""
        if not texts:
            requested(self.specials.ids, allowed_special, disallowed_special)
        try:
            return [self.encode_python(t, allowed_special, disallowed_special) for t in texts]
        except LoneSurrogateError:
            raise batch_surrogate_error(texts) from None

    def encode_batch(self, texts, num_threads, as_arrays: bool, allowed_special, disallowed_special) -> list:
        if (type(texts) is list and len(texts) == 1 and type(texts[0]) is str and type(as_arrays) is bool
                and (num_threads is None or (type(num_threads) is int and 1 <= num_threads <= 1024))
                and len(texts[0]) <= _ONE_TEXT_CHARS and not self.python_first(len(texts[0]))):
            # one short text, arguments plainly valid (a loader encoding as it goes): encode's path, without
            # the batch's argument checks and sizes (~8 us of a 63-byte text's ~16)
            try:
                ids = self.encode_array(texts[0], allowed_special, disallowed_special)
            except LoneSurrogateError:
                raise batch_surrogate_error(texts) from None
            return [ids if as_arrays else self.as_list(ids)]
        texts, threads, as_arrays = batch_args(texts, num_threads, as_arrays, items=False)
        try:
            return self._encode_batch(texts, threads, as_arrays, allowed_special, disallowed_special)
        except SpecialTokenError as e:
            raise self._named(texts, e, allowed_special, disallowed_special) from None

    def _named(self, texts: list, e: SpecialTokenError, allowed_special, disallowed_special) -> SpecialTokenError:
        return batch_special_error(texts, e, lambda t: self.pieces(t, allowed_special, disallowed_special))

    def _encode_batch(self, texts: list, threads: int, as_arrays: bool, allowed_special, disallowed_special) -> list:
        sizes, strs = text_sizes(texts)
        check_strs(texts, strs)
        total = int(sizes.sum())
        if self.python_first(total):
            lists = self._python_batch(texts, allowed_special, disallowed_special)
            return [np.array(ids, np.int64) for ids in lists] if as_arrays else lists
        if len(texts) == 1 and total <= _ONE_TEXT_CHARS:
            # one short text (a loader encoding as it goes): ``encode``'s path, without the batch's groups,
            # joined UTF-8 and document marks (~120 us a call where the text's own encode took ~40)
            try:
                ids = self.encode_array(texts[0], allowed_special, disallowed_special)
            except LoneSurrogateError:
                raise batch_surrogate_error(texts) from None
            return [ids if as_arrays else self.as_list(ids)]
        flat = self._group_encoder(texts, threads, total, strs, allowed_special, disallowed_special)

        def group(lo: int, hi: int) -> list:
            """The results of texts[lo:hi]: arrays, views of the group's ids (one buffer, no copy per text),
            or lists, all made in one pass (read from the encoder's own buffer: no copy)."""
            ids, bounds = flat(lo, hi, not as_arrays)
            if as_arrays:
                b = bounds.tolist()
                return [ids[b[j] : b[j + 1]] for j in range(hi - lo)]
            return self.int_lists().split(ids, bounds)

        return in_groups(texts, threads, group, sizes)

    def encode_flat(self, texts, num_threads, allowed_special, disallowed_special) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, bounds)``: the ids of all ``texts`` back to back (int64) and where each text's start
        (``len(texts) + 1`` int64), text ``i``'s ids being ``ids[bounds[i]:bounds[i + 1]]``; the ids
        ``encode_batch`` gives, without an array or list per text (a batch of short texts spent half its
        time making and joining those)."""
        texts = batch_texts(texts, "encode_flat", items=False)
        threads = batch_threads(num_threads)
        try:
            return self._encode_flat(texts, threads, allowed_special, disallowed_special)
        except SpecialTokenError as e:
            raise self._named(texts, e, allowed_special, disallowed_special) from None

    def _encode_flat(self, texts: list, threads: int, allowed_special, disallowed_special) -> tuple[np.ndarray, np.ndarray]:
        sizes, strs = text_sizes(texts)
        check_strs(texts, strs, "encode_flat")
        total = int(sizes.sum())
        if self.python_first(total) or not texts:
            return _joined([np.array(ids, np.int64) for ids in self._python_batch(texts, allowed_special,
                                                                                    disallowed_special)])
        flat = self._group_encoder(texts, threads, total, strs, allowed_special, disallowed_special)
        # (no cap on a group's texts but its characters: no array or list per text to keep small, and each
        # kernel call takes the interpreter lock back twice, which a store build's reading thread holds)
        got = in_groups(texts, threads, lambda lo, hi: [flat(lo, hi)], sizes, most=len(texts))
        if len(got) == 1:
            return got[0]
        ids = np.concatenate([g[0] for g in got])
        starts = np.cumsum([0] + [g[0].size for g in got[:-1]])
        bounds = np.concatenate([g[1][:-1] + s for g, s in zip(got, starts.tolist())] + [np.array([ids.size])])
        return ids, bounds.astype(np.int64, copy=False)

    def encode_flat_parts(self, texts: list, allowed_special, disallowed_special, twin: bool | None = None):
        """``encode_flat`` of ``texts`` on this thread, a kernel group at a time: ``(lo, hi, ids, bounds)`` of
        ``texts[lo:hi]``, ``ids`` possibly a view of this thread's buffer, valid until the next item is
        asked for (for a caller that writes them elsewhere at once, as the token store does: no int64 block
        of their own, no page faults for it). ``twin``: whether the caller chose the pure-Python twin already
        (:meth:`python_first` asked once per batch: each layer had charged the same texts to the first run's
        budget again, so a store build of 710 KB compiled for a minute where 2 MB were meant to run at once)."""
        sizes, strs = text_sizes(texts)
        total = int(sizes.sum())
        if not texts:
            yield (0, 0, *self.encode_flat(texts, 1, allowed_special, disallowed_special))
            return
        if self.python_first(total) if twin is None else twin:
            check_strs(texts, strs, "encode_flat")
            try:
                got = _joined([np.array(ids, np.int64) for ids in self._python_batch(texts, allowed_special,
                                                                                      disallowed_special)])
            except SpecialTokenError as e:
                raise self._named(texts, e, allowed_special, disallowed_special) from None
            yield (0, len(texts), *got)
            return
        flat = self._group_encoder(texts, 1, total, strs, allowed_special, disallowed_special)
        b = group_bounds(sizes, GROUP_BYTES, len(texts))
        for lo, hi in zip(b[:-1], b[1:]):
            yield (lo, hi, *flat(lo, hi, True))

    def encode_flat_parts_utf8(self, data: np.ndarray, docs: np.ndarray, allowed_special, disallowed_special):
        """:meth:`encode_flat_parts` of the documents ``data[docs[i]:docs[i + 1]]``, well-formed UTF-8 (checked
        by the caller; ``data`` read-only uint8, ``docs`` int64 from 0 to ``data.size``, non-decreasing): a group
        of non-empty documents of plain text goes to the compiled encoder as those bytes
        (``CompiledEncoder.encode_utf8``: no str, no second copy of their UTF-8), any other group as strs."""
        n = docs.size - 1
        sizes = np.diff(docs)
        _, fast, needles = self._plain_rule(allowed_special, disallowed_special)
        twin = n > 0 and self.python_first(int(docs[-1]))  # (asked once for the whole batch)
        direct = fast and not self.spec.add_prefix_space and n > 0 and not twin
        b = group_bounds(sizes, GROUP_BYTES, n)
        for lo, hi in zip(b[:-1], b[1:]):
            got = None
            if direct and sizes[lo:hi].all():
                got = self.compiled_encoder().encode_utf8(data[docs[lo] : docs[hi]], docs[lo : hi + 1] - docs[lo],
                                                          forbid=needles, view=True)
            if got is not None:
                yield lo, hi, *got
                continue
            texts = utf8_texts(data, docs[lo : hi + 1])
            for a, z, ids, bounds in self.encode_flat_parts(texts, allowed_special, disallowed_special, twin=twin):
                yield lo + a, lo + z, ids, bounds

    def _plain_rule(self, allowed_special, disallowed_special):
        """``(rule, fast, needles)``: ``special.requested``'s rule; whether every text is one plain piece (no
        special token allowed, no added token to cut out) unless it spells one of ``needles``
        (``_special_scan.check_needles`` of the disallowed special tokens and the added tokens: None when there
        is none to look for)."""
        # the special tokens allowed and those to check for, worked out once (~1.5 us a text: 185 files of
        # code, 0.3 ms of a 9 ms pass)
        rule = requested(self.specials.ids, allowed_special, disallowed_special)
        # none allowed and no added tokens: every text is plain unless it spells a disallowed special token,
        # which one compiled pass over the group's UTF-8 looks for (``_special_scan``; ``str.__contains__``
        # per text read ~3.7 GB/s: 0.7 ms of a 14 ms pass over 2.7 MB of English); a group where it finds
        # one goes text by text, and the first such text raises as ``encode`` does
        # (tokenizer.json imports: a text that spells none of the added tokens either, when no normalizer
        # could change it)
        spelled = set(rule[1])
        fast = not rule[0]
        if fast and self.spec.added_tokens is not None:
            added = self.added_matcher().plain_unless_spelled()
            fast = added is not None
            spelled.update(added or ())
        needles = None
        if fast and spelled:
            from ._special_scan import check_needles

            needles = check_needles([s.encode("utf-8") for s in sorted(spelled)])
        return rule, fast, needles

    def _group_encoder(self, texts: list, threads: int, total: int, strs: bool, allowed_special, disallowed_special):
        """``flat(lo, hi)``: the ``(ids, bounds)`` of ``texts[lo:hi]`` (as :meth:`encode_flat`): the plain ones in
        one kernel call, the others (special or added tokens) one by one."""
        rule, fast, needles = self._plain_rule(allowed_special, disallowed_special)

        def flat(lo: int, hi: int, view: bool = False) -> tuple[np.ndarray, np.ndarray]:
            """``view``: the ids may be a view of the encoder's buffer, valid until this thread's next encode."""
            try:
                return texts_flat(lo, hi, view)
            except (UnicodeEncodeError, LoneSurrogateError):
                err = batch_surrogate_error(texts[lo:hi], lo)
                if err is None:
                    raise
                raise err from None

        def texts_flat(lo: int, hi: int, view: bool) -> tuple[np.ndarray, np.ndarray]:
            chunk = texts[lo:hi]
            # a group of more than a thread's share of the batch (a text too large to be balanced by
            # the other groups, or the only one) cuts its kernel work across the threads too
            inner = threads if threads > 1 and sum(len(t) for t in chunk) * threads > total else 1
            # a group of one plain text too: encode_many reads the str's UTF-8 through CPython (kept with
            # the str once made), where encode() encodes it again on every call (English books, a few
            # curly quotes making the str non-ASCII: ~0.5 ms a MB)
            every = fast and strs and all(chunk)  # every text one plain piece (unless the scan finds a token)
            if every:
                got = self.compiled_encoder().encode_many(
                    [self.prefixed(t) for t in chunk] if self.spec.add_prefix_space else chunk, inner, forbid=needles,
                    view=view)
                if got is not None:
                    return got
            if fast:  # each text one plain piece, unless encode_many's scan finds a token in the group
                pieces = [[(t, None)] if checked_str(t) else [] for t in chunk]
            else:
                pieces = [self.pieces(checked_str(t), allowed_special, disallowed_special, rule) for t in chunk]
                got = self._spliced(pieces, inner)
                if got is not None:
                    return got
            plain = [i for i, p in enumerate(pieces) if len(p) == 1 and p[0][1] is None]
            res: list = [np.zeros(0, np.int64) if not p else None for p in pieces]
            got = None  # None: not in one pass (tried above already where ``every``)
            if plain and not every:
                got = self.compiled_encoder().encode_many([self.prefixed(pieces[i][0][0]) for i in plain], inner,
                                                          forbid=needles)
            if got is not None:
                ids, bounds = got
                b = bounds.tolist()
                for j, i in enumerate(plain):
                    res[i] = ids[b[j] : b[j + 1]]
            elif fast and plain:  # one by one, each text's tokens found as encode finds them (and refused)
                pieces = [self.pieces(t, allowed_special, disallowed_special, rule) for t in chunk]
            for i, r in enumerate(res):
                if r is None:
                    res[i] = self.encode_pieces(pieces[i])
            return _joined(res)

        return flat

    def _spliced(self, pieces: list, threads: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(ids, bounds)`` of texts cut into ``pieces`` (each text's ``(piece, id)``, as :meth:`pieces` gives
        them): every plain piece of every text in one kernel pass (``encode_many``), the tokens' ids spliced in
        between, where a kernel call a piece cost ~20 us a text (chat records, lines ending in a special
        token). None where one pass cannot take them (``encode_many``: a split sequence, a lone surrogate)."""
        plain = [self.prefixed(p) for ps in pieces for p, i in ps if i is None and p]
        if plain:
            got = self.compiled_encoder().encode_many(plain, threads, view=True)
            if got is None:
                return None
            ids, bounds = got
            b = bounds.tolist()
        else:
            ids, b = np.zeros(0, np.int64), [0]
        # every piece a segment of ``src`` (the plain pieces' ids, then the tokens' ids), gathered in order
        starts, lens, per_text, tokens = [], [], [], []
        j, n = 0, ids.size
        for ps in pieces:
            total = 0
            for p, i in ps:
                if i is not None:
                    starts.append(n + len(tokens))
                    tokens.append(i)
                    lens.append(1)
                    total += 1
                elif p:
                    starts.append(b[j])
                    lens.append(b[j + 1] - b[j])
                    total += b[j + 1] - b[j]
                    j += 1
            per_text.append(total)
        src = np.concatenate([ids, np.array(tokens, np.int64)])
        lens_a = np.array(lens, np.int64)
        at = np.cumsum(lens_a) - lens_a  # where each piece's ids go
        index = np.arange(int(lens_a.sum()), dtype=np.int64) + np.repeat(np.array(starts, np.int64) - at, lens_a)
        return src[index], offsets_of(np.array(per_text, np.int64))

    def encode_array(self, text, allowed_special=(), disallowed_special="all") -> np.ndarray:
        """``encode`` as an int64 array (possibly a view of a larger buffer)."""
        try:
            return self.encode_pieces(self.pieces(checked_str(text), allowed_special, disallowed_special))
        except (UnicodeEncodeError, LoneSurrogateError):  # named in the whole text (a piece's own index is not)
            raise lone_surrogate_error(text) from None

    def encode_pieces(self, pieces) -> np.ndarray:
        if len(pieces) == 1 and pieces[0][1] is None:  # no special token in the text (the common call)
            return (self.compiled or self.compiled_encoder()).encode(self.prefixed(pieces[0][0]))
        parts = [np.array([i], np.int64) if i is not None else self.compiled_encoder().encode(self.prefixed(p))
                 for p, i in pieces]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def pieces(self, text: str, allowed_special, disallowed_special, rule=None) -> list[tuple[str, int | None]]:
        """(piece, id): special (or, for tokenizer.json imports, added) tokens matched (their id), the
        text between them (None); raises if ``text`` spells a disallowed special token. ``rule``: see
        ``SpecialTokens.allowed``."""
        allowed = self.specials.allowed(text, allowed_special, disallowed_special, rule)
        if self.spec.added_tokens is None:
            return self.specials.pieces(text, allowed)
        return self.added_matcher().pieces(text, allowed)

    def added_matcher(self):
        """The added-token matcher (tokenizer.json imports; made on first use)."""
        if self.matcher is None:
            from .added import AddedTokenMatcher

            self.matcher = AddedTokenMatcher(self.spec.added_tokens, self.spec.normalizer)
        return self.matcher

    def prefixed(self, piece: str) -> str:
        """HF ByteLevel's ``add_prefix_space``: a space before a piece that does not start with one."""
        return " " + piece if self.spec.add_prefix_space and not piece.startswith(" ") else piece

    def compiled_encoder(self):
        if self.compiled is None:
            s = self.spec
            self.compiled = compiled.CompiledEncoder(
                list(s.vocab), tables.pair_arrays(self.pairs), self.byte_ids, s.pattern,
                pin_vocab=s.whole_chunk_lookup, merge_ids=s.merge_ids, split_patterns=s.split_patterns)
        return self.compiled

    def python_first(self, size: int) -> bool:
        """Encode in pure Python while the kernels are not compiled (``bpe.encoder.python_first``)."""
        return self.compiled is None and compiled.python_first(size)

    def int_lists(self):
        """The lists-out builder (``_cpython.IntLists``: one Python int per id, made on first use)."""
        if self.lists is None:
            from ._cpython import IntLists

            self.lists = IntLists(self.n_ids)
        return self.lists

    def as_list(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, from one Python int per id made once (``_cpython``: ~2x faster than
        ``tolist``'s new int per token, equal lists)."""
        return self.int_lists().one(ids)


def _joined(arrays: list) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, bounds)`` of per-text int64 arrays (see ``Encoding.encode_flat``)."""
    bounds = offsets_of(np.fromiter(map(len, arrays), np.int64, len(arrays)))
    ids = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
    return ids.astype(np.int64, copy=False), bounds
