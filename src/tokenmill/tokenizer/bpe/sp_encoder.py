"""The compiled SentencePiece-style BPE encoder: tables built from a model, checked, and fed to ``_sp_kernels``.

Plain Python around the kernels: it derives the symbol table (each character's symbol and whether a
segment may be cut around it), the pair table (``left, right -> rank, merged id``), the cut rules
for ``▁``, and the user-defined symbols, validates every array a kernel reads, and keeps one cache
per thread (the kernels release the GIL). Two sources:

* a SentencePiece ``.model`` (:class:`CompiledSentencePiece`): merges by score over characters, a
  character no piece is stays a symbol while some piece holds it; ids equal
  ``sentencepiece.encode_reference``'s, which equal ``sentencepiece``'s (tested);
* a tokenizer.json of this family (:meth:`CompiledSentencePiece.from_merges`): merges by their place
  in the merge list, a character outside the vocabulary falls back to bytes (or the unknown token)
  at once, as HF ``tokenizers`` does (tested against it).
"""

from __future__ import annotations

import threading

import numpy as np

from ..._arrays import offsets_of
from .._scratch import heap_for_large_blocks, scratch
from ..sp_types import NORMAL, UNUSED, USER_DEFINED, WS

FIRST_RUN_PYTHON_CHARS = 1 << 21  # a first run encodes this much in pure Python before compiling
_HOT_SLOTS = 1 << 12  # direct-mapped slots in front of it (128 kB: the frequent words stay in cache)
_SHORT_SLOTS = 1 << 17  # slots of the table of segments up to 15 bytes (cleared when half full)
_CACHE_ENTRIES = 1 << 15  # longer segments cached per thread before that table is cleared



class DecodeTables:
    """The tables of sentencepiece's ``decode``, compiled (``_sp_kernels.decode_pieces``), made and checked once:
    each id's surface in one buffer (``blob[starts[i]:starts[i + 1]]``: ``▁`` as a space, an unknown piece's
    the model's, a byte piece its byte, a control piece nothing), the piece types, whether a piece starts
    with ``▁``; all read-only. A call checks its ids' array; the kernel checks every id before it reads a
    table."""

    def __init__(self, surfaces: list, types: np.ndarray, lead_ws: np.ndarray):
        from ..._gather import Pieces

        pieces = Pieces(surfaces)  # (the surfaces in one buffer, as the byte-level decode keeps its tokens)
        self.blob, self.starts = pieces.blob, pieces.starts
        self.types = np.ascontiguousarray(types, np.uint8)
        self.lead_ws = np.ascontiguousarray(lead_ws, np.bool_)
        if self.types.shape != (len(pieces),) or self.lead_ws.shape != (len(pieces),):
            raise ValueError("one type and one lead-space flag a piece")
        for a in (self.types, self.lead_ws):
            a.setflags(write=False)

    def decode(self, ids: np.ndarray, strip_first: bool, remove_extra_whitespaces: bool,
               replace: bool) -> tuple[np.ndarray, int]:
        """``(the decoded bytes as uint8, -1)``, or ``(nothing, k)`` where ``ids[k]`` (int64, 1-D) names no piece."""
        from . import _sp_kernels as K

        if type(ids) is not np.ndarray or ids.dtype != np.int64 or ids.ndim != 1:
            raise ValueError("ids must be a 1-D int64 array")
        return K.decode_pieces(ids, self.blob, self.starts, self.types, self.lead_ws, bool(strip_first),
                               bool(remove_extra_whitespaces), bool(replace))


def python_first(size: int) -> bool:
    """True while this machine's SentencePiece kernels are not compiled, for the first
    :data:`FIRST_RUN_PYTHON_CHARS` characters this process encodes (``_jit.python_first``): the
    pure-Python encoder gives the same ids and starts at once."""
    from ..._jit import python_first as first
    from . import _sp_kernels

    return first("sentencepiece", [_sp_kernels.encode, _sp_kernels.normalize], size, FIRST_RUN_PYTHON_CHARS)

class CompiledSentencePiece:
    """Tables of one model for the kernels, and ``encode_many`` over them."""

    def __init__(self, model):  # a sentencepiece.SentencePieceModel
        heap_for_large_blocks()
        pieces, types = model.pieces, model.types.tolist()
        nv = len(pieces)
        live = [model.piece_id(p.encode("utf-8")) == i for i, p in enumerate(pieces)]
        mergeable = [live[i] and types[i] in (NORMAL, UNUSED) for i in range(nv)]  # results of merges
        piece_sym = {pieces[i]: i for i in range(nv) if live[i] and types[i] in (NORMAL, UNUSED, USER_DEFINED)}
        # characters: a symbol each (a piece's id, or one after the vocabulary: a character that is no
        # piece still merges into a piece holding it)
        chars = sorted({c for i in range(nv) if mergeable[i] for c in pieces[i]})
        char_sym: dict[str, int] = {}
        virtual = 0
        for c in chars:
            if c in piece_sym:
                char_sym[c] = piece_sym[c]
            else:
                char_sym[c] = nv + virtual
                virtual += 1
        for c, i in piece_sym.items():  # single-character pieces no longer piece holds
            if len(c) == 1 and c not in char_sym:
                char_sym[c] = i
        from . import _sp_kernels as K

        kind = np.full(nv + virtual, K.K_UNKNOWN, np.int8)
        for i in range(nv):
            if live[i] and types[i] in (NORMAL, USER_DEFINED):
                kind[i] = K.K_PIECE
            elif live[i] and types[i] == UNUSED:
                kind[i] = K.K_UNUSED
        # pair table: every split of a mergeable piece into two symbols, ranked by score (ties share)
        keys = model.score_keys
        cand = np.flatnonzero(np.array(mergeable, bool))
        order = np.unique(-keys[cand], return_inverse=True)[1].ravel()  # dense rank: best score first
        rank = np.zeros(nv, np.int64)
        rank[cand] = order
        lefts, rights, values = [], [], []

        def sym(s: str):
            if len(s) == 1:
                return char_sym.get(s)
            i = piece_sym.get(s)
            return i if i is not None and mergeable[i] else None

        for i in cand.tolist():
            p = pieces[i]
            v = (int(rank[i]) << 32) | i
            for k in range(1, len(p)):
                sa, sb = sym(p[:k]), sym(p[k:])
                if sa is not None and sb is not None:
                    lefts.append(sa)
                    rights.append(sb)
                    values.append(v)
        ud = [(p.encode("utf-8"), i) for p, i in piece_sym.items() if types[i] == USER_DEFINED]
        norm = model.normalizer
        self.model = model
        self._setup(char_sym=char_sym, results=[pieces[i] for i in cand.tolist()], lefts=lefts, rights=rights,
                    values=values, kind=kind, nv=nv, ud=ud, byte_fallback=model.byte_fallback,
                    byte_ids=model.byte_ids, unk=model.unk_id, fuse_unk=True,
                    escape=norm.escape_whitespaces, ws_split=False,
                    raw=norm.identity and not norm.remove_extra_whitespaces)

    @classmethod
    def from_merges(cls, tokens: dict[str, int], nv: int, merges: list[tuple[str, str]], *, byte_fallback: bool,
                    unk: int, fuse_unk: bool, ws_split: bool, escape: bool = True) -> "CompiledSentencePiece":
        """HF ``tokenizers``' BPE over characters: ``tokens`` text -> id (``nv`` ids in all), ``merges`` in
        priority order (a pair listed twice keeps its last place), a character outside the vocabulary
        falls back to its bytes' ``<0xNN>`` tokens (``byte_fallback``, when all exist) or ``unk`` (-1:
        dropped; ``fuse_unk``: a run is one). The text it reads has ``▁`` written as a space (``escape``;
        else a space is just a space); ``ws_split``: a word starts at every ``▁`` (Metaspace ``split``)."""
        from . import _sp_kernels as K

        self = cls.__new__(cls)
        self.model = None
        char_sym = {t: i for t, i in tokens.items() if len(t) == 1}
        last: dict[tuple[int, int], tuple[int, int]] = {}
        results = []
        for k, (a, b) in enumerate(merges):
            last[(tokens[a], tokens[b])] = (k, tokens[a + b])
            results.append(a + b)
        lefts = [a for a, _ in last]
        rights = [b for _, b in last]
        values = [(k << 32) | i for k, i in last.values()]
        kind = np.full(max(nv, 1), K.K_PIECE, np.int8)
        byte_ids = np.array([tokens.get(f"<0x{b:02X}>", -1) for b in range(256)], np.int64)
        self._setup(char_sym=char_sym, results=results, lefts=lefts, rights=rights, values=values, kind=kind, nv=nv,
                    ud=[], byte_fallback=byte_fallback, byte_ids=byte_ids, unk=unk, fuse_unk=fuse_unk, escape=escape,
                    ws_split=ws_split and escape, raw=True)
        return self

    def _setup(self, *, char_sym, results, lefts, rights, values, kind, nv, ud, byte_fallback, byte_ids, unk, fuse_unk,
               escape, ws_split, raw) -> None:
        from . import _sp_kernels as K
        from ._pairs import key_filter

        self._K = K
        if kind.size >= 1 << 29:
            raise ValueError("too many symbols for the kernels' 29-bit symbol ids")
        in_multi = {c for r in results if len(r) > 1 for c in r}
        # each character's symbol, whether no merged piece holds it (bit 30: a segment is cut around
        # it), and whether it is then a piece on its own (bit 29 too: its id is written at once)
        self.cp_info = np.full(0x110000, -1, np.int32)
        for c, s in char_sym.items():
            cp = ord(c)
            if 0xD800 <= cp < 0xE000:
                continue  # never in UTF-8 text
            cut = c not in in_multi
            self.cp_info[cp] = s | (cut << 30) | ((cut and kind[s] == K.K_PIECE) << 29)
        self.kind = kind
        self.nv = nv
        self.table, self.filt = K.build_pair_table(np.array(lefts, np.int64), np.array(rights, np.int64),
                                                   np.array(values, np.int64))
        # whitespace: the symbol a space stands for, and which side of it a segment may be cut
        ws = WS if escape else " "
        self.ws_cp = ord(ws)
        holders = [r for r in results if len(r) > 1 and ws in r]
        before = all(all(p[k - 1] == ws for k in range(1, len(p)) if p[k] == ws) for p in holders)
        after = all(all(p[k + 1] == ws for k in range(len(p) - 1) if p[k] == ws) for p in holders)
        self.ws_rule = 3 if ws_split else 1 if before else 2 if after else 0
        # user-defined symbols, grouped by first byte, longest first
        ud = sorted(ud, key=lambda x: (x[0][0], -len(x[0]), x[0]))
        self.ud_ptr = np.zeros(257, np.int64)
        for b, _ in ud:
            self.ud_ptr[b[0] + 1] += 1
        self.ud_ptr = np.cumsum(self.ud_ptr)
        self.ud_len = np.array([len(b) for b, _ in ud], np.int64)
        self.ud_start = (np.concatenate(([0], np.cumsum(self.ud_len)[:-1])).astype(np.int64) if ud
                         else np.zeros(0, np.int64))
        self.ud_bytes = np.frombuffer(b"".join(b for b, _ in ud), np.uint8).copy() if ud else np.zeros(1, np.uint8)
        self.ud_id = np.array([i for _, i in ud], np.int64)
        # the text goes in as it is (a space standing for ``▁``) when normalizing is only adding ``▁``;
        # a space stands for ``▁`` in what the encoder reads (the text itself, or the normalizer writes
        # it so) unless a user-defined symbol holds a space or ``▁`` (matched against the text as it is)
        ud_ws = any(b" " in b or WS.encode() in b for b, _ in ud)
        self.raw = raw and not (escape and ud_ws)
        self.space_ws = escape and not ud_ws
        self.escape_mode = 2 if self.space_ws else 1 if escape else 0
        self.ws_info = int(self.cp_info[self.ws_cp])
        # characters side by side in some piece: a 128 x 128 bit matrix for ASCII (32 standing for
        # ``▁`` when a space stands for it) and a Bloom filter over symbol pairs for the rest
        self.abig = np.zeros(256, np.uint64)
        keys = set()

        def ascii_of(c: str) -> int:
            if self.space_ws:
                return 32 if c == WS else -1 if c == " " or ord(c) >= 128 else ord(c)
            return ord(c) if ord(c) < 128 else -1

        for p in results:
            for x, y in zip(p, p[1:]):
                sx, sy = char_sym.get(x), char_sym.get(y)
                if sx is None or sy is None:
                    continue  # a character outside the vocabulary is cut around (from_merges)
                keys.add((sx << 32) | sy)
                bx, by = ascii_of(x), ascii_of(y)
                if bx >= 0 and by >= 0:
                    self.abig[2 * bx + (by >> 6)] |= np.uint64(1 << (by & 63))
        self.bfilt = key_filter(np.array(sorted(keys), np.int64))
        self.byte_fallback = bool(byte_fallback)
        self.byte_ids = np.asarray(byte_ids, np.int64).copy()
        self.unk = int(unk)
        self.fuse_unk = bool(fuse_unk)
        # ids per byte, at most: a space standing for an unknown ``▁`` falls back to its 3 bytes
        ws_unknown = self.ws_info < 0 or self.kind[self.ws_info & 0x1FFFFFFF] != K.K_PIECE
        self.ids_per_byte = 3 if self.space_ws and ws_unknown else 1
        self._normalizer_tables()
        self._check()
        self._local = threading.local()
        # the kernel's tables, as every call passes them (``encode_one``, ``encode_many``)
        self._tables = (self.cp_info, self.ws_info, self.space_ws, self.ws_cp, self.ws_rule, self.abig, self.bfilt,
                        self.table, self.filt, self.kind, self.byte_fallback, self.byte_ids, self.unk, self.fuse_unk,
                        self.ud_ptr, self.ud_start, self.ud_len, self.ud_bytes, self.ud_id)

    def _normalizer_tables(self) -> None:
        """The character map and its fast paths, for models whose text is normalized by the kernel."""
        norm = self.model.normalizer if self.model is not None else None
        self.trie = norm.trie.astype(np.uint32) if norm is not None and norm.trie is not None else np.zeros(0, np.uint32)
        repl = norm.replacements if norm is not None else b""
        self.repl = np.frombuffer(repl + b"\xef\xbf\xbd\0", np.uint8).copy()
        # bytes out per byte in, at most: a rule consumes one byte or more and writes its string, each
        # space of which may become ``▁`` (3 bytes); user-defined symbols and other characters stay
        longest = max((len(r) for r in repl.split(b"\0")), default=0)
        self.grow = 3 * max(longest, 3)
        # bytes that start no rule and no user-defined symbol: their characters are themselves
        firsts = {int(self.ud_bytes[s]) for s in self.ud_start.tolist()}
        self.plain = np.ones(256, np.bool_)
        for b in firsts:
            self.plain[b] = False
        # ASCII bytes starting rules, none of which is the byte alone: the bytes that may follow (a
        # 256-bit set; empty where the byte is plain or not eligible)
        self.cont = np.zeros((256, 4), np.uint64)
        if self.trie.size:
            t = self.trie.astype(np.int64)

            def step(node: int, c: int):
                """(next node base, has leaf) after byte ``c`` from ``node``'s base, or None."""
                u = t[node ^ c]
                if (u & 0x800000FF) != c:
                    return None
                return (node ^ c) ^ ((u >> 10) << ((u & 512) >> 6)), bool((u >> 8) & 1)

            root = int((t[0] >> 10) << ((t[0] & 512) >> 6))
            for b in range(256):
                got = step(root, b)
                if got is None:
                    continue
                self.plain[b] = False
                base, leaf = got
                if b < 0x80 and not leaf and b not in firsts:
                    for c in range(256):
                        if step(base, c) is not None:
                            self.cont[b, c >> 6] |= np.uint64(1 << (c & 63))
        # the normalizer's fast paths: bytes copied in runs, and what the map does to each character
        # of the Basic Multilingual Plane on its own (``_sp_kernels.char_map``)
        self.run = np.zeros(256, np.uint8)
        self.follow = np.zeros(256, np.bool_)
        for b in range(256):
            if b == 32 or 0x80 <= b < 0xC0:
                continue
            if self.plain[b]:
                self.run[b] = 1
            elif b < 0x80 and self.cont[b].any():
                self.run[b] = 2
                for c in range(256):
                    if (int(self.cont[b, c >> 6]) >> (c & 63)) & 1:
                        self.follow[c] = True
        if self.plain[0x80:0xC0].all():  # a plain lead byte's character is copied whole
            self.run[0x80:0xC0] = 1
        else:  # (a rule starting with a continuation byte: no runs through characters beyond ASCII)
            self.run[0x80:] = 0
        self.run[self.follow] = 0  # a run ends before a byte that may continue a rule
        self.cmap = self._K.char_map(self.trie, self.repl, 0x10000 if self.trie.size else 0)
        for b in range(0x80):  # ASCII characters that stand for one space on their own
            v = int(self.cmap[b]) if self.cmap.size else -1
            if b not in firsts and (self.plain[b] and b == 32 or v >= 0 and v & 63 == 1 and self.repl[v >> 7] == 32):
                self.run[b] = 4

    def _check(self) -> None:
        """Every index a kernel reads from these tables lies inside them (numba checks no bounds)."""
        nsym = self.kind.size
        info = self.cp_info[self.cp_info >= 0].astype(np.int64) & 0x1FFFFFFF
        if info.size and info.max() >= nsym:
            raise ValueError("a character's symbol lies outside the symbol table")
        t = self.table[self.table[:, 0] != -1]
        if t.size and ((t[:, 1] & 0xFFFFFFFF) >= min(nsym, self.nv)).any():
            raise ValueError("a merge makes an id outside the vocabulary")
        if self.table.shape[0] & (self.table.shape[0] - 1) or self.filt.size & (self.filt.size - 1) or (
                self.bfilt.size & (self.bfilt.size - 1)) or self.abig.size != 256:
            raise ValueError("a hash table's size is not a power of two")
        if self.byte_ids.size != 256 or (self.byte_ids >= self.nv).any() or self.unk >= self.nv:
            raise ValueError("a byte or unknown id lies outside the vocabulary")
        if self.ud_ptr.size != 257 or self.ud_ptr[-1] != self.ud_len.size or self.ud_id.size != self.ud_len.size:
            raise ValueError("the user-defined symbol index is inconsistent")
        if ((self.ud_start + self.ud_len > self.ud_bytes.size) | (self.ud_len < 1)).any():
            raise ValueError("a user-defined symbol lies outside its bytes")
        if self.run.size != 256 or self.follow.size != 256 or self.plain.size != 256 or self.cont.shape != (256, 4):
            raise ValueError("a normalizer byte table is not 256 entries")
        m = self.cmap[self.cmap >= 0].astype(np.int64)
        if self.cmap.size > 0x110000 or (m.size and ((m >> 7) + (m & 63)).max() > self.repl.size):
            raise ValueError("a character map entry lies outside its strings")

    def _state(self):
        """This thread's cache (``_sp_kernels.encode``), made on first use."""
        st = getattr(self._local, "state", None)
        if st is None:
            st = self._local.state = (
                np.zeros((_HOT_SLOTS, 4), np.int64), np.zeros((_SHORT_SLOTS, 4), np.int64),
                np.zeros(_SHORT_SLOTS * 2, np.int64),
                np.full(2 * _CACHE_ENTRIES, -1, np.int64), np.zeros((_CACHE_ENTRIES, 4), np.int64),
                np.zeros(_CACHE_ENTRIES * 32, np.uint8), np.zeros(_CACHE_ENTRIES * 8, np.int64),
                np.zeros(5, np.int64), np.zeros(1 << 16, np.uint64))
        return st

    def _normalize_call(self, src: np.ndarray, out: np.ndarray) -> int:
        norm = self.model.normalizer
        return self._K.normalize(src, self.trie, self.repl, self.plain, self.cont, self.run, self.follow, self.cmap,
                                 self.ud_ptr, self.ud_start, self.ud_len, self.ud_bytes, norm.add_dummy_prefix,
                                 norm.remove_extra_whitespaces, self.escape_mode, self.model.treat_whitespace_as_suffix,
                                 out)

    def normalized(self, data: bytes) -> bytes:
        """The bytes the encoder reads for UTF-8 ``data``: the text itself with ``▁`` added (``raw``), or
        sentencepiece's normalized text (whitespace written as a space where a space stands for ``▁``)."""
        if not data:
            return b""
        norm = self.model.normalizer if self.model is not None else None
        if self.raw:  # a space stands for ``▁`` (``space_ws``) or is one (escape_whitespaces off)
            if norm is None or not norm.add_dummy_prefix:
                return data
            return data + b" " if self.model.treat_whitespace_as_suffix else b" " + data
        src = np.frombuffer(data, np.uint8)
        for size in (3 * len(data) + 16, self.grow * len(data) + 16):
            out = np.empty(size, np.uint8)
            n = self._normalize_call(src, out)
            if n >= 0:
                return out[:n].tobytes()
        raise AssertionError("the normalized text outgrew its bound")  # pragma: no cover

    @staticmethod
    def _joined(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, offsets) of ``texts`` back to back: text ``i`` is ``bytes[offsets[i]:offsets[i+1]]``."""
        docs = offsets_of(np.fromiter(map(len, texts), np.int64, len(texts)))
        return (np.frombuffer(b"".join(texts), np.uint8) if texts else np.zeros(0, np.uint8)), docs

    def _normalized_batch(self, datas: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``_joined`` of the texts as the encoder reads them, written one after another into this
        thread's buffer (no bytes object per text, no join)."""
        if self.raw:
            norm = self.model.normalizer if self.model is not None else None
            if norm is None or not norm.add_dummy_prefix:
                return self._joined(datas)
            if datas and all(datas):  # each text with its ``▁`` (a space): one join, no bytes object a text
                joined = b" ".join(datas)
                joined = joined + b" " if self.model.treat_whitespace_as_suffix else b" " + joined
                return np.frombuffer(joined, np.uint8), offsets_of(np.fromiter(map(len, datas), np.int64,
                                                                               len(datas)) + 1)
            return self._joined([self.normalized(d) for d in datas])
        docs = np.zeros(len(datas) + 1, np.int64)
        sizes = [3 * len(d) + 16 if d else 0 for d in datas]  # the kernel's bound: most rules write 3 bytes or fewer
        buf = scratch("sp_norm", sum(sizes), np.uint8)
        pos = 0
        for i, d in enumerate(datas):
            if d:
                n = self._normalize_call(np.frombuffer(d, np.uint8), buf[pos:pos + sizes[i]])
                if n < 0:  # a text that grows more (long rules): bytes objects for this batch
                    return self._joined([self.normalized(x) for x in datas])
                pos += n
            docs[i + 1] = pos
        return buf[:pos], docs

    def encode_one(self, data: bytes, *, normalized: bool = False) -> tuple[np.ndarray, bool]:
        """``(ids, slow)`` of one non-empty UTF-8 text (``normalized``: already what the encoder reads):
        :meth:`encode_many` of ``[data]`` without its per-batch
        work (a sentence's call took ~15 us of Python and dispatch around ~1 us of kernel work). ``ids``: a
        view of this thread's scratch buffer (copy what you keep). The kernel is called through its machine
        code for these calls' argument types (``_jit.ExactCall``): each is made the same way every call
        (the text's bytes read-only, or the normalizer's output in this thread's buffer, this thread's
        documents, bounds, flag and cache, the ids' scratch buffer, the model's tables)."""
        one = getattr(self._local, "one", None)
        if one is None:
            from ..._jit import ExactCall

            one = self._local.one = (np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(1, np.bool_),
                                     ExactCall(self._K.encode))
        docs, bounds, slow, kernel = one
        if normalized:
            buf = np.frombuffer(data, np.uint8)
        elif self.raw:
            buf = np.frombuffer(self.normalized(data), np.uint8)
        else:
            out = scratch("sp_norm", 3 * len(data) + 16, np.uint8)
            n = self._normalize_call(np.frombuffer(data, np.uint8), out)
            buf = out[:n] if n >= 0 else np.frombuffer(self.normalized(data), np.uint8)
        docs[1] = buf.size
        slow[0] = False
        state = self._state()
        ids = scratch("sp_ids", self.ids_per_byte * buf.size + 1, np.int64)
        kernel(state, buf, docs, *self._tables, *state, ids, bounds, slow)
        return ids[: bounds[1]], bool(slow[0])

    def encode_many(self, datas: list[bytes], *, normalized: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, bounds, slow)`` for UTF-8 texts: text ``i``'s ids are ``ids[bounds[i]:bounds[i+1]]``,
        unless ``slow[i]``: an UNUSED piece was left, which only sentencepiece's split-back over the
        whole text resolves (the caller encodes that text with the pure-Python encoder).
        ``normalized``: the texts are already what the encoder reads. ``ids`` is this thread's
        scratch buffer: copy what you keep before the thread's next call to any encoder."""
        data, docs = self._joined(datas) if normalized else self._normalized_batch(datas)
        state = self._state()
        out = scratch("sp_ids", self.ids_per_byte * data.size + 1, np.int64)
        bounds = np.empty(len(datas) + 1, np.int64)
        slow = np.zeros(len(datas), np.bool_)
        self._K.encode(data, docs, *self._tables, *state, out, bounds, slow)
        return out, bounds, slow
