"""SentencePiece ``.model`` files: a protobuf ``ModelProto`` read (and written, for tests and
exports) by a small hand-written decoder of protobuf's wire format (no ``protobuf`` dependency).

A model holds pieces (text, score, type), a ``TrainerSpec`` (model type, ``byte_fallback``,
``treat_whitespace_as_suffix``, the unknown-piece surface) and a ``NormalizerSpec``
(``add_dummy_prefix``, ``remove_extra_whitespaces``, ``escape_whitespaces``, a precompiled character
map). Every length, count and value is bounded and validated, so a corrupt or hostile file is a
:class:`~tokenmill.errors.FormatError` naming the file and the field, never a crash or a huge
allocation. The load-time checks of ``sentencepiece`` 0.2.x are repeated (duplicate pieces, byte
pieces without ``byte_fallback``, a missing unknown piece, pieces of 8,000 bytes or more, a character
map whose trie would read outside itself, ...). Encoding with a model: ``tokenizer.sentencepiece``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ...errors import FormatError, UnsupportedTokenizerError
from ..sp_types import BYTE, CONTROL, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, WS

TYPE_NAMES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL", USER_DEFINED: "USER_DEFINED",
              UNUSED: "UNUSED", BYTE: "BYTE"}
MODEL_TYPES = {1: "Unigram", 2: "BPE", 3: "word", 4: "char"}
WS_BYTES = WS.encode("utf-8")
MAX_PIECE_BYTES = 8000  # sentencepiece refuses longer pieces ("piece is too long")
MAX_PIECES = 1 << 24  # far above any real vocabulary (Gemma: 256k); ids stay well inside the kernels' 30 bits
MAX_RESEGMENT_DEPTH = 100  # sentencepiece's bound on splitting UNUSED pieces back (kMaxBpeResegmentDepth)
UNK_SURFACE = " \u2047 "
MAX_TRIE_RESULTS = 32  # Normalizer::kMaxTrieResultsSize
_MAX_NESTING = 4  # ModelProto > TrainerSpec / NormalizerSpec / SentencePiece: nothing deeper is read


# ============================================================================ protobuf wire format
def _where(what: str, path: str) -> str:
    return f"{what}: field {path}" if path else what


def _varint(buf: bytes, i: int, end: int, what: str, path: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= end:
            raise FormatError(f"{_where(what, path)}: truncated (a varint runs past the end of its message)")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, i
        shift += 7
        if shift >= 70:
            raise FormatError(f"{_where(what, path)}: a varint longer than 10 bytes; the file is corrupted")


def _fields(buf: bytes, start: int, end: int, what: str, path: str):
    """``(field number, wire type, value)`` of a message ``buf[start:end]``: an int for varints and
    fixed-width values, ``(a, b)`` offsets for length-delimited ones."""
    i = start
    while i < end:
        tag, i = _varint(buf, i, end, what, path)
        num, wt = tag >> 3, tag & 7
        if num == 0 or num > 0x1FFFFFFF:
            raise FormatError(f"{_where(what, path)}: field number {num:,d} is not a protobuf field; the file is "
                              "not a SentencePiece model or is corrupted")
        if wt == 0:
            v, i = _varint(buf, i, end, what, f"{path}.{num}" if path else str(num))
        elif wt == 1:
            if i + 8 > end:
                raise FormatError(f"{_where(what, path)}: truncated (a 64-bit value of field {num} runs past the end)")
            v = int.from_bytes(buf[i:i + 8], "little")
            i += 8
        elif wt == 2:
            n, i = _varint(buf, i, end, what, path)
            if n > end - i:
                raise FormatError(f"{_where(what, path)}: field {num} claims {n:,d} bytes but only {end - i:,d} are "
                                  "left; the file is truncated or corrupted")
            v = (i, i + n)
            i += n
        elif wt == 5:
            if i + 4 > end:
                raise FormatError(f"{_where(what, path)}: truncated (a 32-bit value of field {num} runs past the end)")
            v = int.from_bytes(buf[i:i + 4], "little")
            i += 4
        else:
            raise FormatError(f"{_where(what, path)}: field {num} has wire type {wt} (protobuf groups or an invalid "
                              "type), which a SentencePiece model never holds")
        yield num, wt, v


# Message schemas: field number -> (name, kind). Kinds: "string", "bytes", "bool", "enum", "int32",
# "float", "msg:<schema>". Fields not listed are skipped (protobuf's rule for unknown fields); a listed
# field with the wrong wire type is refused.
_WIRE = {"string": 2, "bytes": 2, "bool": 0, "enum": 0, "int32": 0, "float": 5}
_PIECE = {1: ("piece", "string"), 2: ("score", "float"), 3: ("type", "enum")}
_TRAINER = {3: ("model_type", "enum"), 4: ("vocab_size", "int32"), 24: ("treat_whitespace_as_suffix", "bool"),
            25: ("split_digits", "bool"), 35: ("byte_fallback", "bool"), 44: ("unk_surface", "string"),
            45: ("unk_piece", "string"), 46: ("bos_piece", "string"), 47: ("eos_piece", "string"),
            48: ("pad_piece", "string"), 26: ("allow_whitespace_only_pieces", "bool")}
_NORMALIZER = {1: ("name", "string"), 2: ("precompiled_charsmap", "bytes"), 3: ("add_dummy_prefix", "bool"),
               4: ("remove_extra_whitespaces", "bool"), 5: ("escape_whitespaces", "bool")}
_MODEL = {1: ("pieces", "msg:piece"), 2: ("trainer_spec", "msg:trainer"), 3: ("normalizer_spec", "msg:normalizer"),
          5: ("denormalizer_spec", "msg:normalizer")}
_SCHEMAS = {"piece": _PIECE, "trainer": _TRAINER, "normalizer": _NORMALIZER, "model": _MODEL}
_REPEATED = {"pieces"}


def _parse(buf: bytes, start: int, end: int, schema: str, what: str, path: str, into: dict, depth: int) -> dict:
    """Fields of one message into ``into`` (a message given twice merges, as protobuf does)."""
    if depth > _MAX_NESTING:
        raise FormatError(f"{_where(what, path)}: messages nest too deeply")
    spec = _SCHEMAS[schema]
    for num, wt, v in _fields(buf, start, end, what, path):
        if num not in spec:
            continue
        name, kind = spec[num]
        here = f"{path}.{name}" if path else name
        want = 2 if kind.startswith("msg:") else _WIRE[kind]
        if wt != want:
            raise FormatError(f"{_where(what, here)}: wire type {wt}, expected {want}; the file is corrupted")
        if kind.startswith("msg:"):
            if name in _REPEATED:
                lst = into.setdefault(name, [])
                if len(lst) >= MAX_PIECES:
                    raise FormatError(f"{_where(what, name)}: more than {MAX_PIECES:,d} pieces")
                lst.append(_parse(buf, v[0], v[1], kind[4:], what, f"{here}[{len(lst)}]", {}, depth + 1))
            else:
                _parse(buf, v[0], v[1], kind[4:], what, here, into.setdefault(name, {}), depth + 1)
        elif kind == "string":
            try:
                into[name] = bytes(buf[v[0]:v[1]]).decode("utf-8")
            except UnicodeDecodeError as e:
                raise FormatError(f"{_where(what, here)}: not UTF-8 (byte {e.start:,d}: {e.reason})") from None
        elif kind == "bytes":
            into[name] = bytes(buf[v[0]:v[1]])
        elif kind == "bool":
            into[name] = v != 0
        elif kind == "int32":
            into[name] = v - (1 << 64) if v >= 1 << 63 else v
        elif kind == "enum":
            into[name] = v
        else:  # float
            into[name] = struct.unpack("<f", v.to_bytes(4, "little"))[0]
    return into


def _enc_varint(v: int) -> bytes:
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _enc_message(fields: dict, schema: str) -> bytes:
    spec = {name: (num, kind) for num, (name, kind) in _SCHEMAS[schema].items()}
    out = bytearray()
    for name, value in fields.items():
        num, kind = spec[name]
        items = value if name in _REPEATED else [value]
        for item in items:
            if kind.startswith("msg:"):
                body = _enc_message(item, kind[4:])
                out += _enc_varint(num << 3 | 2) + _enc_varint(len(body)) + body
            elif kind in ("string", "bytes"):
                body = item.encode("utf-8") if kind == "string" else bytes(item)
                out += _enc_varint(num << 3 | 2) + _enc_varint(len(body)) + body
            elif kind == "float":
                out += _enc_varint(num << 3 | 5) + struct.pack("<f", item)
            else:
                out += _enc_varint(num << 3) + _enc_varint(int(item))
    return bytes(out)


def write_model_proto(pieces, *, trainer: dict | None = None, normalizer: dict | None = None,
                      denormalizer: dict | None = None) -> bytes:
    """The bytes of a ``ModelProto``: ``pieces`` as ``(text, score, type)``; ``trainer``/``normalizer``
    dicts of the fields this module reads (e.g. ``{"model_type": 2, "byte_fallback": True}``). For
    tests and small hand-made models (the warm-up compiles the kernels on one)."""
    body = {"pieces": [{"piece": p, "score": float(s), "type": int(t)} for p, s, t in pieces],
            "trainer_spec": dict(trainer or {"model_type": 2})}
    if normalizer is not None:
        body["normalizer_spec"] = normalizer
    if denormalizer is not None:
        body["denormalizer_spec"] = denormalizer
    return _enc_message(body, "model")


def is_sentencepiece_model(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) starts like a SentencePiece ``ModelProto``: its first
    field is a piece (field 1, a message of at most 8 kB, whole in ``head``) made of the fields a
    piece holds (text, score, type) with their wire types. A JSON or text file never reads so."""
    if len(head) < 4 or head[0] != 0x0A:
        return False
    try:
        n, i = _varint(head, 1, len(head), "", "")
        if n == 0 or n > 8192 or i + n > len(head):
            return False
        got = [(num, wt) for num, wt, _ in _fields(head, i, i + n, "", "")]
    except FormatError:
        return False
    return bool(got) and got[0] == (1, 2) and all((num, wt) in ((1, 2), (2, 5), (3, 0)) for num, wt in got)


# ============================================================================ the validated model
@dataclass(frozen=True)
class Normalizer:
    """A ``NormalizerSpec``: flags and the precompiled character map (a validated Darts trie)."""

    name: str = ""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    trie: np.ndarray | None = None  # uint32 units; None: no character map
    replacements: bytes = b""  # the NUL-separated normalized strings the trie's values point into
    charsmap: bytes = b""

    @property
    def identity(self) -> bool:
        return self.trie is None


@dataclass(frozen=True)
class SentencePieceModel:
    """A SentencePiece ``ModelProto`` read and checked: what decides the ids."""

    pieces: tuple  # str per id
    scores: np.ndarray  # float32 per id
    types: np.ndarray  # int8 per id (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE)
    model_type: int
    byte_fallback: bool
    treat_whitespace_as_suffix: bool
    unk_surface: str
    normalizer: Normalizer
    denormalizer: Normalizer | None
    raw: bytes = field(repr=False)
    source: str = "<bytes>"
    split_digits: bool = False
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"

    def __post_init__(self):
        lookup = {}
        for i, p in enumerate(self.pieces):
            if not (p == "\0" and self.types[i] == UNUSED):
                lookup[p.encode("utf-8")] = i
        object.__setattr__(self, "_lookup", lookup)
        unk = np.flatnonzero(self.types == UNKNOWN)
        object.__setattr__(self, "unk_id", int(unk[0]) if unk.size else -1)
        byte_ids = np.full(256, -1, np.int64)
        if self.byte_fallback:
            for b in range(256):
                byte_ids[b] = lookup[byte_piece(b).encode()]
        object.__setattr__(self, "byte_ids", byte_ids)
        object.__setattr__(self, "user_defined", tuple(
            p.encode("utf-8") for p, t in zip(self.pieces, self.types.tolist()) if t == USER_DEFINED))
        bits = self.scores.astype(np.float32).view(np.int32).astype(np.int64)
        # sentencepiece compares scores by their bits: a negative float's magnitude bits in reverse
        object.__setattr__(self, "score_keys", np.where(bits < 0, -(bits & 0x7FFFFFFF) - 1, bits))

    def piece_id(self, piece: bytes) -> int:
        """``PieceToIdNoReserved``: the id of the piece spelled ``piece`` (any type), else the unknown id."""
        return self._lookup.get(piece, self.unk_id)

    @property
    def mergeable(self) -> np.ndarray:
        """Pieces a BPE merge may produce (NORMAL, USER_DEFINED, UNUSED): bool per id."""
        return (self.types == NORMAL) | (self.types == USER_DEFINED) | (self.types == UNUSED)


def byte_piece(b: int) -> str:
    return f"<0x{b:02X}>"


PIECE_TO_BYTE = {byte_piece(b): b for b in range(256)}


def read_model(path) -> SentencePieceModel:
    """Read and check a SentencePiece ``.model`` file (bounded read; FormatError naming the file)."""
    from ..._io import read_bytes_limited

    raw = read_bytes_limited(path, what="SentencePiece model")
    return parse_model(raw, source=os.fspath(path))


def parse_model(raw: bytes, *, source: str = "<bytes>") -> SentencePieceModel:
    """A ``SentencePieceModel`` from the bytes of a ``.model`` file (see :func:`read_model`)."""
    what = f"SentencePiece model file {source!r}"
    raw = bytes(raw)
    if not raw:
        raise FormatError(f"{what} is empty")
    if raw[0] != 0x0A:  # every model sentencepiece writes starts with its first piece (field 1, a message)
        first = raw[:64].split(b"\n")[0]
        raise FormatError(f"{what} does not start as a SentencePiece model does (with its first piece: byte 0x0a, "
                          f"not 0x{raw[0]:02x}; the file begins {first!r}): it is not a .model file, or not whole. "
                          "tokenmill.Tokenizer.load tells tokenizer file formats apart by their content")
    msg = _parse(raw, 0, len(raw), "model", what, "", {}, 0)
    pieces = msg.get("pieces", [])
    if "trainer_spec" not in msg:  # (its model_type would default to Unigram: a cut BPE model read as another)
        raise FormatError(f"{what} holds {len(pieces):,d} pieces and no trainer_spec (the model's settings, which "
                          "sentencepiece writes after the pieces): the file is cut short or not a whole model; get "
                          "it again")
    trainer = msg["trainer_spec"]
    model_type = trainer.get("model_type", 1)
    if model_type not in MODEL_TYPES:
        raise FormatError(f"{_where(what, 'trainer_spec.model_type')} = {model_type}: not a model type "
                          "(1 Unigram, 2 BPE, 3 word, 4 char)")
    if model_type != 2:
        raise UnsupportedTokenizerError(
            f"{what} is a SentencePiece {MODEL_TYPES[model_type]} model; tokenmill runs SentencePiece BPE models "
            "(Mistral v1-v3, Llama 2, Gemma-style) exactly, not Unigram, word or char ones; "
            "tokenmill.as_tokenizer runs it through the sentencepiece package instead (pip install sentencepiece)")
    byte_fallback = bool(trainer.get("byte_fallback", False))
    if not pieces:
        raise FormatError(f"{what}: the model has no pieces")
    texts, scores, types = [], np.empty(len(pieces), np.float32), np.empty(len(pieces), np.int8)
    seen: dict[str, int] = {}
    unk = -1
    bytes_found = set()
    for i, p in enumerate(pieces):
        here = f"pieces[{i}]"
        text = p.get("piece", "")
        t = p.get("type", NORMAL)
        if t not in TYPE_NAMES:
            raise FormatError(f"{_where(what, here + '.type')} = {t}: not a piece type (1-6)")
        if len(text.encode("utf-8")) >= MAX_PIECE_BYTES:
            raise FormatError(f"{_where(what, here + '.piece')}: {len(text.encode()):,d} bytes; sentencepiece refuses "
                              f"pieces of {MAX_PIECE_BYTES:,d} bytes or more")
        if not text:
            raise FormatError(f"{_where(what, here + '.piece')} is empty; sentencepiece refuses empty pieces")
        if byte_fallback and text == "\0":
            t = UNUSED  # sentencepiece's workaround for converted files holding a raw NUL piece
        texts.append(text)
        scores[i] = p.get("score", 0.0)
        types[i] = t
        if text == "\0" and t == UNUSED:
            continue
        if "\0" in text:
            raise FormatError(f"{_where(what, here + '.piece')} = {text!r} holds a NUL character, which sentencepiece "
                              "refuses")
        if text in seen:
            raise FormatError(f"{_where(what, here + '.piece')} = {text!r} is already piece {seen[text]:,d}; "
                              "sentencepiece refuses duplicate pieces")
        seen[text] = i
        if t == UNKNOWN:
            if unk >= 0:
                raise FormatError(f"{_where(what, here)}: a second unknown piece ({text!r}; the first is piece {unk:,d})")
            unk = i
        if t == BYTE:
            if not byte_fallback:
                raise FormatError(f"{_where(what, here)}: byte piece {text!r} although trainer_spec.byte_fallback is "
                                  "false")
            b = PIECE_TO_BYTE.get(text)
            if b is None:
                raise FormatError(f"{_where(what, here)}: byte piece {text!r} is not of the form <0xNN>")
            bytes_found.add(b)
    if unk < 0 and not byte_fallback:
        raise FormatError(f"{what}: no unknown piece (type UNKNOWN) and byte_fallback is off; sentencepiece "
                          "refuses such a model")
    if byte_fallback and len(bytes_found) != 256:
        missing = min(set(range(256)) - bytes_found)
        raise FormatError(f"{what}: byte_fallback is on but there are {len(bytes_found)} byte pieces, not 256 "
                          f"(missing {byte_piece(missing)})")
    unk_surface = trainer.get("unk_surface", UNK_SURFACE)
    norm = _normalizer(msg.get("normalizer_spec", {}), what, "normalizer_spec")
    denorm = None
    if msg.get("denormalizer_spec", {}).get("precompiled_charsmap"):
        denorm = _normalizer(msg["denormalizer_spec"], what, "denormalizer_spec")
    return SentencePieceModel(
        pieces=tuple(texts), scores=scores, types=types, model_type=model_type, byte_fallback=byte_fallback,
        treat_whitespace_as_suffix=bool(trainer.get("treat_whitespace_as_suffix", False)), unk_surface=unk_surface,
        normalizer=norm, denormalizer=denorm, raw=raw, source=source,
        split_digits=bool(trainer.get("split_digits", False)), unk_piece=trainer.get("unk_piece", "<unk>"),
        bos_piece=trainer.get("bos_piece", "<s>"), eos_piece=trainer.get("eos_piece", "</s>"))


def _normalizer(spec: dict, what: str, path: str) -> Normalizer:
    blob = spec.get("precompiled_charsmap", b"")
    trie = None
    repl = b""
    if blob:
        trie, repl = _decode_charsmap(blob, what, f"{path}.precompiled_charsmap")
    return Normalizer(name=spec.get("name", ""), add_dummy_prefix=spec.get("add_dummy_prefix", True),
                      remove_extra_whitespaces=spec.get("remove_extra_whitespaces", True),
                      escape_whitespaces=spec.get("escape_whitespaces", True), trie=trie, replacements=repl,
                      charsmap=blob)


def _decode_charsmap(blob: bytes, what: str, path: str) -> tuple[np.ndarray, bytes]:
    """The trie units and the normalized strings of a precompiled character map, checked as
    sentencepiece 0.2.3 checks them (``DecodePrecompiledCharsMap`` and darts' ``validate``): every
    transition and leaf of the trie stays inside it and every value inside the strings, so a lookup
    never reads outside either. The strings must be UTF-8 (tokenmill's own rule: the normalized text
    stays UTF-8)."""
    where = _where(what, path)
    if len(blob) <= 4:
        raise FormatError(f"{where}: {len(blob)} bytes, too short for a character map")
    size = int.from_bytes(blob[:4], "little")
    if size >= len(blob) - 4:
        raise FormatError(f"{where}: its trie claims {size:,d} bytes of {len(blob) - 4:,d}")
    if size < 1024 or size % 1024:
        raise FormatError(f"{where}: its trie has {size:,d} bytes, not a positive multiple of 1024")
    units = np.frombuffer(blob[4:4 + size], "<u4").astype(np.uint32)
    repl = blob[4 + size:]
    if not repl or repl[-1] != 0:
        raise FormatError(f"{where}: its normalized strings do not end with a NUL byte")
    n = units.size
    u = units.astype(np.int64)
    label = u & ((1 << 31) | 0xFF)
    has_leaf = (u >> 8) & 1
    offset = (u >> 10) << ((u & (1 << 9)) >> 6)
    value = u & ((1 << 31) - 1)
    idx = np.arange(n, dtype=np.int64)
    inner = label <= 0xFF
    if label[0] != 0 or has_leaf[0] or offset[0] == 0 or (offset[0] | 0xFF) >= n:
        raise FormatError(f"{where}: its trie's root is invalid")
    nxt = (idx ^ offset) | 0xFF
    bad = inner & (idx > 0) & (nxt >= n)
    leaf_at = np.where(inner & (has_leaf == 1), idx ^ offset, 0)
    bad |= inner & (idx > 0) & (has_leaf == 1) & (nxt < n) & (label[np.minimum(leaf_at, n - 1)] <= 0xFF)
    bad |= ~inner & (value >= len(repl))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise FormatError(f"{where}: its trie is invalid at unit {k:,d} (a transition or value outside the map)")
    for k, s in enumerate(repl[:-1].split(b"\0")):
        try:
            s.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{where}: normalized string {k:,d} is not UTF-8") from None
    return units, bytes(repl)
