"""Text sources for the token store: files (text, JSONL, Parquet), Hugging Face datasets, iterables.

Every source yields ``(text, file, row)`` in a fixed order: ``file`` indexes the source's
:meth:`Source.files` (its provenance names) and ``row`` is the document's 0-based place in that file
(the line of a JSONL file, the row of a Parquet file, the piece of a split text file). Errors name
the file and the byte offset, line or row, and say what to do::

    files(["a.txt", "b.jsonl.gz"])      a.txt -> 1 document (row 0); b.jsonl.gz -> 1 per line
    files("corpus/")                    every .txt/.jsonl/.ndjson/.parquet (+ .gz/.zst) below, sorted
    files("shards/*.parquet", field="content")
    texts(["doc one", "doc two"])       any iterable of str (a generator too)
    hf_dataset(ds, field="text")        a datasets.Dataset or IterableDataset column

Text files are read exactly as ``tokenmill train`` reads them (:mod:`tokenmill.data.text`): one
document per file, per line (``split_lines``: at ``\n``, ``\r\n`` or ``\r``, blank lines skipped) or per
``separator``; lines and separators are streamed in blocks, in time linear in the file's size, so
memory stays bounded: one document, line or JSONL record may hold at most
``$TOKENMILL_MAX_DOCUMENT_BYTES`` bytes (default 1 GiB; more is an InputError naming the file and
the byte offset where it starts). ``.gz`` and ``.zst`` are decompressed transparently (byte offsets
then count in the decompressed data).
Only regular files are read: a FIFO or device could not be read again by a resumed build.
"""

from __future__ import annotations

import functools
import glob as _glob
import io
import json
import operator
import os
import stat
from dataclasses import dataclass
from dataclasses import field as _field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

import numpy as np

from .._io import nonempty_path
from ..errors import ConfigError, InputError, require
from ..tokenizer.surrogates import replace_surrogates

Errors = Literal["strict", "replace"]
Format = Literal["auto", "text", "jsonl", "parquet"]
FORMATS = ("auto", "text", "jsonl", "parquet")
_BLOCK = 1 << 22  # bytes read per block when streaming lines or separators
# files tokenmill refuses to read as text, named or found: archives and compressions other than .gz and .zst
_UNREAD = (".bz2", ".xz", ".lz4", ".lzma", ".zip", ".7z", ".rar", ".tar", ".tgz", ".tbz2", ".txz")
_FIRST_BLOCK = 1 << 18  # a file's first block (then twice each, up to _BLOCK): its first documents come sooner
_TEXT_EXT = (".txt", ".text", ".md")
_JSONL_EXT = (".jsonl", ".ndjson")
_PARQUET_EXT = (".parquet",)
_TABLE_EXT = (".json", ".csv", ".tsv")  # records a file of their own: refused by format="auto", named
_COMPRESSED = (".gz", ".zst")

Document = tuple  # (text: str, file: int, row: int)
Batch = tuple  # (texts: list[str], file: int, rows: list[int] | range)
_BATCH_DOCS = 4096  # documents a batch of Source.batches' default, at most
_BATCH_CHARS = 1 << 22  # and characters, at most (unless one document holds more)


@dataclass(frozen=True)
class Utf8Docs:
    """Documents as their UTF-8 bytes back to back, checked well-formed where they were read: document ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (``data`` a read-only 1-D uint8 array, ``offsets`` int64 from 0 to
    ``data.size``, non-decreasing). What the token store hashes and its encoder reads, with no str made on
    the way (a whole English text file: ~1 ms a MB less on the reading thread, most of it holding the GIL)."""

    data: np.ndarray
    offsets: np.ndarray

    def __post_init__(self):  # a read-only view and checked offsets, also when unpickled in a worker process
        data = np.frombuffer(self.data, np.uint8) if not isinstance(self.data, np.ndarray) else self.data.view()
        offsets = np.ascontiguousarray(self.offsets, np.int64)
        if data.dtype != np.uint8 or data.ndim != 1 or not data.flags.c_contiguous:
            raise ValueError("Utf8Docs.data must be a contiguous 1-D uint8 array")
        if (offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != data.size
                or np.any(offsets[1:] < offsets[:-1])):
            raise ValueError("Utf8Docs.offsets must run from 0 to len(data), non-decreasing")
        data.flags.writeable = False
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "offsets", offsets)

    def __reduce__(self):
        return Utf8Docs, (self.data, self.offsets)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def texts(self) -> list[str]:
        """The documents as strs (for a consumer that takes strs: never fails, the bytes were checked)."""
        from ..tokenizer.encoding import utf8_texts

        return utf8_texts(self.data, self.offsets)


def utf8_docs(data: bytes) -> Utf8Docs | None:
    """``data`` as one document of :class:`Utf8Docs` when it is well-formed UTF-8
    (``encoding.well_formed_utf8``: a compiled check), else None: the caller decodes it, which names the first
    bad byte or replaces it."""
    from ..tokenizer.encoding import well_formed_utf8

    buf = well_formed_utf8(data)
    return None if buf is None else Utf8Docs(buf, np.array([0, buf.size], np.int64))


@dataclass
class Replaced:
    """Invalid text replaced with U+FFFD under ``errors="replace"``: ``count`` replacements (each invalid
    UTF-8 piece, which Python's decoder replaces with one U+FFFD, and each lone surrogate a JSON escape
    such as ``"\\ud83d"`` made, which UTF-8 cannot encode: ``surrogates`` of them), and the first one's
    input (``where``) and byte offset in it (None for a surrogate: the line's escape, not a byte). A U+FFFD
    the input spells itself is not counted. The readers add to the one they are given, so that nothing
    is replaced without a count the caller can report.

    >>> r = Replaced()
    >>> decode_utf8(b"a\\xffb\\xfe\\xef\\xbf\\xbd", name="x.txt", errors="replace", replaced=r)
    'a\\ufffdb\\ufffd\\ufffd'
    >>> r.count, r.where, r.offset
    (2, 'x.txt', 1)
    """

    count: int = 0
    where: str | None = None
    offset: int | None = None
    surrogates: int = 0

    def add(self, n: int, where: str, offset: int | None, *, surrogates: bool = False) -> None:
        if n > 0 and self.where is None:
            self.where, self.offset = where, offset
        self.count += n
        self.surrogates += n if surrogates else 0

    def merge(self, other: "Replaced") -> None:
        """Add ``other``'s counts (and its first place, if this one has none yet)."""
        if self.where is None:
            self.where, self.offset = other.where, other.offset
        self.count += other.count
        self.surrogates += other.surrogates

    def note(self) -> str:
        """One line for a user: how many were replaced, and where the first was ("" when none)."""
        if not self.count:
            return ""
        s = "" if self.count == 1 else "s"
        of = f" ({self.surrogates:,d} of them lone surrogates of JSON escapes)" if self.surrogates else ""
        at = "" if self.offset is None else f" at byte offset {self.offset:,d}"
        return f"replaced {self.count:,d} invalid UTF-8 sequence{s} with U+FFFD (errors='replace'){of}; the first in {self.where}{at}"


# the first bytes of files that are no text, for a file read as text whose first bytes are no UTF-8
_MAGIC = ((b"\x1f\x8b", "gzip-compressed data: name it .gz"), (b"\x28\xb5\x2f\xfd", "zstd-compressed data: name it .zst"),
          (b"\xff\xfe", "UTF-16 (little-endian) text: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"),
          (b"\xfe\xff", "UTF-16 (big-endian) text: convert it to UTF-8 (iconv -f UTF-16 -t UTF-8)"),
          (b"PAR1", "a Parquet file: name it .parquet"), (b"PK\x03\x04", "a zip archive: extract it first"),
          (b"BZh", "bzip2-compressed data: decompress it first"),
          (b"\xfd7zXZ\x00", "xz-compressed data: decompress it first"))


def _binary_start(data: bytes) -> str:
    """What ``data`` (a file's first bytes) is where its magic bytes say (``"; it starts as gzip..."``), else ""."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return f"; the file starts as {what}"
    return ""


def decode_utf8(data: bytes, *, name: str, errors: Errors = "strict", base: int = 0,
                replaced: Replaced | None = None, first_line: int | None = None) -> str:
    """Decode UTF-8, or raise an InputError naming ``name`` and the first bad byte's offset (``base`` plus
    its place in ``data``: ``data`` may be a block of a larger file), and its line where ``data`` is whole
    lines of a file read as lines (``first_line``: the line number, from 1, of its first). With
    ``errors="replace"`` each invalid sequence becomes U+FFFD and is counted in ``replaced``. Every reader
    of text files decodes here.

    >>> decode_utf8(b"ok", name="x.txt")
    'ok'
    >>> decode_utf8(b"a\\xffb", name="x.txt", errors="replace")
    'a\\ufffdb'
    """
    if errors not in ("strict", "replace"):
        raise ConfigError(f"errors={errors!r}; use 'strict' or 'replace'")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if errors != "replace":
            where = ""
            if first_line is not None:  # (lines cut at \n, \r\n and \r, as _lines cuts them)
                before = data[:e.start]
                line = first_line + before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n")
                where = f"line {line:,d}, "
            raise InputError(
                f"{name}: invalid UTF-8 at {where}byte offset {base + e.start:,d} ({e.reason}"
                f"{_binary_start(data) if base == 0 else ''}); fix the input, "
                "or pass errors='replace' (CLI: --errors replace) to substitute U+FFFD") from None
        text = data.decode("utf-8", "replace")
        if replaced is not None:  # a U+FFFD spelled in valid UTF-8 (EF BF BD) stays one U+FFFD, not counted
            replaced.add(text.count("\ufffd") - data.count(b"\xef\xbf\xbd"), name, base + e.start)
        return text


class Source:
    """One entry of a build's ``sources``: yields ``(text, file, row)`` in a fixed order."""

    kind = "source"
    one_shot = False  # whether reading it consumes it (a generator): it cannot be read a second time

    def files(self) -> list[str]:
        """Provenance names, indexed by the ``file`` of each document."""
        raise NotImplementedError

    def spec(self) -> dict:
        """What defines this source, as JSON (part of the build's argument fingerprint)."""
        raise NotImplementedError

    def documents(self) -> Iterator[Document]:
        raise NotImplementedError

    def batches(self) -> Iterator[Batch]:
        """The same documents as :meth:`documents`, in the same order, as ``(texts, file, rows)``: consecutive
        documents of one file (``rows``: a list or range of their rows), so a reader of many short
        documents pays its per-document work in C. This default groups :meth:`documents`' (see
        :func:`_grouped`); a source that reads in blocks yields its blocks."""
        return _grouped(self.documents())

    def utf8_batches(self) -> Iterator[Batch]:
        """:meth:`batches`, where a batch may come as :class:`Utf8Docs` (its documents' checked UTF-8) in place
        of a list of strs, for a reader that only hashes and encodes them (the token store). This default
        yields :meth:`batches`' lists."""
        return self.batches()

    def describe(self) -> str:
        names = self.files()
        return names[0] if len(names) == 1 else f"{self.kind} source of {len(names):,d} files ({names[0]}, ...)"


def _grouped(documents: Iterable[Document], most: int = 0) -> Iterator[Batch]:
    """``documents`` as batches (``Source.batches``): consecutive documents of one file, up to ``most``
    (default ``_BATCH_DOCS``) documents or ``_BATCH_CHARS`` characters a batch (one longer document is a
    batch of its own)."""
    most = most or _BATCH_DOCS
    texts: list[str] = []
    rows: list[int] = []
    at, chars = None, 0
    for text, f, row in documents:
        if texts and (f != at or len(texts) >= most or chars >= _BATCH_CHARS):
            yield texts, at, rows
            texts, rows, chars = [], [], 0
        at = f
        texts.append(text)
        rows.append(row)
        chars += len(text)
    if texts:
        yield texts, at, rows


# ---- files ---------------------------------------------------------------------------------------
def _plain_name(path: Path) -> str:
    """A file's name, lower case, its .gz/.zst suffix taken off: what it says the file holds."""
    name = path.name.lower()
    for c in _COMPRESSED:
        if name.endswith(c):
            name = name[: -len(c)]
    return name


def holds_records(path: Path) -> bool:
    """A ``.json``, ``.csv`` or ``.tsv`` file (.gz/.zst looked through): records in a form the name does not
    settle, which no reader takes as text without being told."""
    return _plain_name(path).endswith(_TABLE_EXT)


def format_of(path: Path) -> str:
    """``"jsonl"``, ``"parquet"`` or ``"text"``: what a file's name says it holds (.gz/.zst looked through)."""
    name = _plain_name(path)
    if name.endswith(_JSONL_EXT):
        return "jsonl"
    if name.endswith(_PARQUET_EXT):
        return "parquet"
    return "text"


def is_known_file(path: Path) -> bool:
    """A file a folder input reads: text (.txt, .text, .md), JSONL or Parquet, optionally .gz or .zst."""
    return _plain_name(path).endswith(_TEXT_EXT + _JSONL_EXT + _PARQUET_EXT)


def visible_files(folder: Path) -> list[Path]:
    """The files under ``folder`` (recursively, sorted), but those inside a hidden folder or hidden
    themselves (a name starting with "."), as a glob leaves them: a folder's ``.ipynb_checkpoints``
    copies read a second time, its ``.git`` read as data. Symbolic links are followed, to files and to
    folders, as a glob follows them (``rglob`` had left a linked folder out without a word); a link that
    points nowhere, or to a folder around it (a loop), is an InputError naming it."""
    found: list[Path] = []

    def walk(d: Path, around: frozenset) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as e:
            raise InputError(f"the folder {str(d)!r} cannot be read ({e.strerror or e})") from None
        for e in entries:
            if e.name.startswith("."):
                continue
            p = Path(e.path)
            try:
                is_dir, is_file = e.is_dir(), e.is_file()  # (both follow links)
            except OSError:
                is_dir = is_file = False
            if is_dir:
                st = e.stat()  # (follows the link, as is_dir did)
                key = (st.st_dev, st.st_ino)
                if key in around:
                    raise InputError(f"{str(p)!r} is the folder {os.path.realpath(p)!r} again, which holds it (a loop "
                                     "of symbolic links): its files would be read again and again; remove the link "
                                     "or name the files to read")
                walk(p, around | {key})
            elif is_file:
                found.append(p)
            else:  # a FIFO, socket or device (had been left out without a word), or a link to nothing
                try:
                    kind = _special_kind(os.stat(p).st_mode)
                except OSError:
                    kind = None
                link = f"a symbolic link to {os.readlink(p)!r}, which " if e.is_symlink() else ""
                if kind is None and link:
                    raise InputError(f"{str(p)!r} is {link}does not exist (or cannot be read); remove the link, "
                                     "point it at a file, or name the files to read")
                what = kind or "something else"
                raise InputError(f"{str(p)!r} is {link + 'is ' if link else ''}{what}, not a regular file: a folder's "
                                 "inputs are read as files; remove it from the folder, or name the files to read")

    st = os.stat(folder)
    walk(folder, frozenset({(st.st_dev, st.st_ino)}))
    return sorted(found)


def _special_kind(mode: int) -> str | None:
    """What a file that is neither a regular file nor a folder is, in words."""
    import stat

    for test, name in ((stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return None


def folder_files(folder: Path, keep) -> list[Path]:
    """``visible_files(folder)`` that ``keep`` accepts; the others are not dropped silently: a warning
    counts them and names the first (a file named as an input is read whatever its type)."""
    files = visible_files(folder)
    found = [f for f in files if keep(f)]
    other = [f for f in files if not keep(f)]
    if other and found:
        from .._words import counted
        from ..errors import warn

        names = ", ".join(str(f.relative_to(folder)) for f in other[:3]) + (", ..." if len(other) > 3 else "")
        warn(f"the folder {str(folder)!r}: {counted(len(other), 'file')} of another type left out "
             f"({names}); name a file as an input to read it")
    return found


_JSON_SPACE = b" \t\r\n"  # the whitespace JSON allows (bytes.strip() would take \x0b, \x0c, \x1c-\x1f too)

KNOWN_FILES = ".txt, .text, .md, .jsonl, .ndjson or .parquet file (optionally .gz or .zst) outside hidden folders"


_TEXTS_HINT = (" (if it is a text given in Python: a list of strings is taken as a list of paths; for in-memory texts "
               "pass tokenmill.data.texts([...]))")


def _shown(s: str) -> str:
    """An input as an error shows it: whole up to 100 characters, else its start and its length."""
    return repr(s) if len(s) <= 100 else f"{s[:60]!r}... ({len(s):,d} characters)"


def expand_paths(inputs) -> list[Path]:
    """Paths as given; folders expand to their known files (recursively, sorted, hidden ones left out);
    globs (``*``, ``?``, ``[``) to their sorted matches, a matched folder to its known files. A missing
    path, an empty folder or a glob that gives no file is an error."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    out: list[Path] = []
    for item in inputs:
        s = os.fspath(item)
        nonempty_path(s, "an input path", "pass a file, folder or glob", InputError)
        if s == "-" and not os.path.lexists(s):
            raise InputError("input '-' (standard input) is not read here: the input is read more than once; write "
                             "the data to a file first")
        if (isinstance(s, str) and ("\n" in s or "\0" in s or len(s.encode("utf-8", "surrogatepass")) > 4096)
                and not os.path.lexists(s)):  # (a file may be named with a line break)
            # (a text given where paths go: "File name too long" from the file system, or the whole text echoed)
            why = " (it holds a line break)" if "\n" in s else " (it holds a NUL)" if "\0" in s else ""
            raise InputError(f"input {_shown(s)} is no path{why}" + _TEXTS_HINT)
        if any(c in s for c in "*?[") and not os.path.exists(s):
            matches = sorted(_glob.glob(s, recursive=True))
            # a matched folder is read as a folder named as an input is (as the shell's expansion of the
            # same pattern would give it), not left out: 'data/*' over data/en/ and data/fr/ reads both
            found = [f for m in matches for f in (folder_files(Path(m), is_known_file) if os.path.isdir(m) else [Path(m)])]
            if not found:
                raise InputError(f"the pattern {_shown(s)} matches no file" + (
                    f" (it matches only folders, and they hold no {KNOWN_FILES})"
                    if matches else _TEXTS_HINT if " " in s else ""))
            out.extend(found)
            continue
        p = Path(s)
        try:
            is_dir = p.is_dir()
        except OSError as e:  # (a name too long for the file system, say)
            raise InputError(f"input {_shown(s)} cannot be a path ({e.strerror or e})" + _TEXTS_HINT) from None
        if is_dir:
            found = folder_files(p, is_known_file)
            if not found:
                raise InputError(f"the folder {s!r} holds no {KNOWN_FILES}")
            out.extend(found)
        elif os.path.lexists(p):
            out.append(p)
        else:
            raise InputError(f"input {_shown(s)} does not exist" + (
                _TEXTS_HINT if not os.path.dirname(s) or " " in s else ""))
    if not out:
        raise InputError("no input given (an empty list of paths); pass files, folders or glob patterns")
    refuse_repeated_files(out)
    for p in out:  # (a name is recorded in the store's manifest, which is UTF-8 JSON)
        try:
            os.fspath(p).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"the file name {os.fsencode(p)!r} is not valid UTF-8 (a store records its input "
                             "files by name); rename the file") from None
    return out


def check_regular(path: Path) -> os.stat_result:
    """``os.stat`` of a regular file, else an InputError naming what it is."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputError(f"cannot read input file {str(path)!r}: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a character device" if stat.S_ISCHR(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file")
        raise InputError(f"input {str(path)!r} is {what}; only regular files can be read here (the input is "
                         "read more than once: hashed and read again to resume or check a build, sized for a "
                         "report): write the data to a file first")
    return st


def open_binary(path: Path):
    """A binary reader of ``path``, decompressing ``.gz`` and ``.zst``."""
    check_regular(path)
    name = path.name.lower()
    try:
        if name.endswith(".gz"):
            import gzip

            return gzip.open(path, "rb")
        if name.endswith(".zst"):
            zstd = require("zstandard", "zstd")
            cut = zstd_cut_at(path)
            if cut is not None:
                raise InputError(f"{path}: truncated zstd data: the file ends inside the frame that starts at byte "
                                 f"offset {cut:,d}, so the documents after it are missing; the file was cut short "
                                 "(an interrupted copy or download?): get it again")
            raw = open(path, "rb")
            return io.BufferedReader(zstd.ZstdDecompressor().stream_reader(raw, closefd=True), _BLOCK)
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read input file {str(path)!r}: {e.strerror or e}") from e


DEFAULT_MAX_DOCUMENT_BYTES = 1 << 30


def max_document_bytes() -> int:
    """The largest document, line or record a text or JSONL file may hold, in bytes:
    ``$TOKENMILL_MAX_DOCUMENT_BYTES`` (default 1 GiB). Reading keeps at most this much (plus one
    block) of an unfinished document in memory, so a file without a line end (``/dev/zero``
    compressed into a ``.jsonl.zst``) ends with an error instead of exhausting memory."""
    raw = os.environ.get("TOKENMILL_MAX_DOCUMENT_BYTES")
    if raw is None:
        return DEFAULT_MAX_DOCUMENT_BYTES
    value = int(raw) if raw.isascii() and raw.isdigit() else 0
    if value < 1:
        raise ConfigError(f"TOKENMILL_MAX_DOCUMENT_BYTES={raw!r} is not a whole number of bytes >= 1 "
                          f"(the default is {DEFAULT_MAX_DOCUMENT_BYTES:,d}, 1 GiB)")
    return value


def _too_large(path, what: str, start: int, limit: int, lines_before: int | None = None) -> InputError:
    """``lines_before``: the line breaks before the record where records are lines (it is named by its number)."""
    which = f"line {lines_before + 1:,d}" if lines_before is not None else f"the {what}"
    return InputError(f"{path}: {which} starting at byte offset {start:,d} holds more than {limit:,d} bytes, "
                      "the most one document may hold; if it is genuine, raise TOKENMILL_MAX_DOCUMENT_BYTES "
                      "(bytes), or split the input")


def zstd_cut_at(path: Path) -> int | None:
    """The byte offset where the ``.zst`` file ``path`` ends inside a frame (cut short: an interrupted copy or
    download), or None where its frames are whole. zstandard's ``stream_reader`` reads a cut file to the cut
    and stops as at a clean end, and the documents past it were lost without a word; the frames' headers
    and block headers are walked here (a seek past each block: no decompression), as the format lays them
    out: magic, frame header (descriptor, window, dictionary id, content size), blocks of a 3-byte header
    (last flag, type, size; an RLE block holds one byte), a 4-byte checksum when the descriptor says so;
    skippable frames (magic 0x184D2A5?) hold their size."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        pos = 0
        while pos < size:
            head = f.read(4)
            if len(head) < 4:
                return pos
            magic = int.from_bytes(head, "little")
            if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: its length, then as many bytes
                n = f.read(4)
                if len(n) < 4 or pos + 8 + int.from_bytes(n, "little") > size:
                    return pos
                pos += 8 + int.from_bytes(n, "little")
                f.seek(pos)
                continue
            if magic != 0xFD2FB528:
                return None  # not zstd framing: the decompressor names what it is
            d = f.read(1)
            if not d:
                return pos
            fhd = d[0]
            single, checksum, did, fcs = fhd >> 5 & 1, fhd >> 2 & 1, fhd & 3, fhd >> 6
            at = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[did] + ((1 if single else 0), 2, 4, 8)[fcs]
            f.seek(at)
            while True:
                bh = f.read(3)
                if len(bh) < 3:
                    return pos
                h = int.from_bytes(bh, "little")
                last, kind, n = h & 1, h >> 1 & 3, h >> 3
                at += 3 + (1 if kind == 1 else n)
                if at > size:
                    return pos
                f.seek(at)
                if last:
                    break
            at += 4 * checksum
            if at > size:
                return pos
            pos = at
            f.seek(pos)
    return None


@functools.cache
def _damaged_file_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises: the OS's errors, gzip's (``BadGzipFile`` is an OSError, a
    cut stream an EOFError), zlib's, and zstandard's where it is installed (its reader's own class)."""
    import zlib

    kinds: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, zlib.error)
    try:
        import zstandard
    except ImportError:
        return kinds
    return kinds + (zstandard.ZstdError,)


def read_chunk(f, path, size: int = 0) -> bytes:
    """``f.read(size)`` (a block when 0), a damaged compressed file an InputError naming ``path``."""
    try:
        return f.read(size or _BLOCK)
    except InputError:
        raise
    except _damaged_file_errors() as e:  # (evaluated only when reading raised)
        raise InputError(f"{path}: cannot read (corrupt or truncated compressed data?): {e}") from e


def _tail(parts: list[bytes], n: int) -> bytes:
    """The last ``n`` bytes (or fewer) of the concatenation of ``parts``."""
    out, need = [], n
    for p in reversed(parts):
        if need <= 0:
            break
        out.append(p[-need:])
        need -= len(out[-1])
    return b"".join(reversed(out))


def _blocks(path: Path, sep: bytes, *, what: str = "line", opener=None) -> Iterator[tuple[int, bytes]]:
    """``(offset, block)`` of the file's bytes, every block but the last ending with ``sep``.

    Linear in the file's size: only each newly read chunk is searched for ``sep`` (with the few bytes
    before it, for a separator across two chunks); the chunks of an unfinished record are kept in a
    list and joined once. A record (the bytes between two separators) longer than
    :func:`max_document_bytes` is an InputError naming the file and its starting offset.
    """
    limit = max_document_bytes()
    k = len(sep)
    bordered = any(sep[:i] == sep[-i:] for i in range(1, k))  # "||": occurrences may overlap
    lines = 0 if sep == b"\n" else None  # line breaks before ``offset``: a too long line is named by its number
    with (opener or open_binary)(path) as f:
        parts: list[bytes] = []  # the unfinished record: it starts at ``offset``
        held, offset = 0, 0
        size = min(_FIRST_BLOCK, _BLOCK)
        while True:
            chunk = read_chunk(f, path, size)
            size = min(2 * size, _BLOCK)  # (a store build encodes a file's first shard while the rest is read)
            if not chunk:
                break
            head = _tail(parts, k - 1) if parts and k > 1 else b""
            cut = _last_split(head + chunk if head else chunk, sep, bordered)
            if cut < 0:
                parts.append(chunk)
                held += len(chunk)
                if held > limit + k - 1:  # (its last k - 1 bytes may begin a separator)
                    raise _too_large(path, what, offset, limit, lines)
                continue
            cut += k - len(head)  # just after the separator, inside ``chunk``
            parts.append(chunk[:cut])
            block = b"".join(parts) if len(parts) > 1 else parts[0]
            if len(block) > limit:  # a record of the block may be too long: find it
                _check_records(path, block, sep, offset, limit, what, lines)
            yield offset, block
            offset += len(block)
            if lines is not None:
                lines += block.count(sep)
            rest = chunk[cut:]
            parts, held = ([rest], len(rest)) if rest else ([], 0)
            if held > limit:
                raise _too_large(path, what, offset, limit, lines)
        if held > limit:
            raise _too_large(path, what, offset, limit, lines)
        if parts:
            yield offset, b"".join(parts) if len(parts) > 1 else parts[0]


def _last_split(data: bytes, sep: bytes, bordered: bool) -> int:
    """The start of the last separator of ``data`` that ``bytes.split`` would split at (``data``
    starts a record), or -1. Occurrences of a separator such as "||" may overlap ("|||"): split
    takes them from the left, so the last one is found by walking them; any other is ``rfind``'s."""
    if not bordered:
        return data.rfind(sep)
    last, j = -1, data.find(sep)
    while j >= 0:
        last, j = j, data.find(sep, j + len(sep))
    return last


def _check_records(path, block: bytes, sep: bytes, offset: int, limit: int, what: str,
                   lines: int | None = None) -> None:
    pos = 0
    while True:
        j = block.find(sep, pos)
        end = len(block) if j < 0 else j
        if end - pos > limit:
            raise _too_large(path, what, offset + pos, limit, None if lines is None else lines + block.count(sep, 0, pos))
        if j < 0:
            return
        pos = j + len(sep)


def read_all(path: Path, *, opener=None) -> bytes:
    """The whole (decompressed) file, read in blocks: more than :func:`max_document_bytes` is an
    InputError, found after reading at most that much plus one block."""
    limit = max_document_bytes()
    with (opener or open_binary)(path) as f:
        parts, held = [], 0
        while True:
            chunk = read_chunk(f, path)
            if not chunk:
                break
            parts.append(chunk)
            held += len(chunk)
            if held > limit:
                raise _too_large(path, "document (the whole file)", 0, limit)
    return b"".join(parts) if len(parts) != 1 else parts[0]


def text_documents(path: Path, *, split_lines: bool = False, separator: str | None = None,
                   errors: Errors = "strict", opener=None, replaced: Replaced | None = None,
                   blank: list | None = None) -> Iterator[tuple[str, int]]:
    """``(text, row)`` of one text file: the whole file, its lines (:func:`_lines`, blank lines
    skipped but counted) or its pieces between ``separator`` (``str.split``). ``opener(path)``
    returns a binary reader (default: :func:`open_binary`, which refuses anything but a regular file
    and decompresses ``.gz`` and ``.zst``). Shared by :class:`FileSource` and ``tokenmill train``. ``blank``:
    a one-item list the blank lines skipped are added to."""
    if split_lines:
        for texts, rows in _line_batches(path, errors, opener, replaced, blank):
            yield from zip(texts, rows)
    elif separator is not None:
        sep = separator.encode("utf-8")  # UTF-8 is self-synchronizing: bytes split == str split
        row, ended = 0, True  # str.split: "" -> [""], "a|" -> ["a", ""]
        for offset, block in _blocks(path, sep, what="document", opener=opener):
            pieces = block.split(sep)
            ended = block.endswith(sep)
            if ended:
                pieces.pop()  # the empty piece after the block's last separator starts the next block
            pos = offset
            for piece in pieces:
                yield decode_utf8(piece, name=str(path), base=pos, errors=errors, replaced=replaced), row
                pos += len(piece) + len(sep)
                row += 1
        if ended:
            yield "", row
    else:
        yield decode_utf8(read_all(path, opener=opener), name=str(path), errors=errors, replaced=replaced), 0


def blank_note(n: int, what: str) -> str:
    """One line for a user: ``n`` blank lines that split_lines skipped, and ``what`` that means here."""
    return f"{n:,d} blank line{'s' if n != 1 else ''} skipped (split lines are the lines that hold text; {what})"


def _lines(text: str) -> list[str]:
    """The lines of ``text``: cut at ``\n``, ``\r\n`` and ``\r`` (universal newlines, as datasets' text loader and
    ``open()`` read them), a line break ending the last line. ``str.splitlines`` also cut at form feeds,
    ``\x85``, U+2028 and the other separators Unicode names, which real lines hold (source code, books, text
    scraped from the web): one line became several documents, an end of text put inside it."""
    if not text:
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":  # (after the last line break: no line)
        lines.pop()
    return lines


def _line_batches(path: Path, errors: Errors, opener=None, replaced: Replaced | None = None,
                  blank: list | None = None) -> Iterator[tuple[list[str], list[int] | range]]:
    """The lines of a text file (:func:`_lines`, blank lines skipped but counted: their rows kept, their
    number added to ``blank[0]``) as ``(texts, rows)`` batches of up to ``_BATCH_DOCS`` lines of a block,
    told blank or not by C loops."""
    row = 0
    for offset, block in _blocks(path, b"\n", what="line", opener=opener):
        lines = _lines(decode_utf8(block, name=str(path), base=offset, errors=errors, replaced=replaced,
                                   first_line=row + 1))
        for lo in range(0, len(lines), _BATCH_DOCS):
            part = lines[lo : lo + _BATCH_DOCS]
            if all(map(str.strip, part)):  # no blank line (the common case)
                yield part, range(row, row + len(part))
            else:
                keep = [j for j, line in enumerate(part) if line.strip()]
                if blank is not None:
                    blank[0] += len(part) - len(keep)
                if keep:
                    yield [part[j] for j in keep], [row + j for j in keep]
            row += len(part)


def check_options_apply(kinds, *, field: str, split_lines: bool, separator) -> None:
    """A ConfigError where an option given applies to none of the inputs (``kinds``: the "text", "jsonl" and
    "parquet" of their files): a field names a record's field, which text files have none of; splitting on lines
    or a separator cuts text files, and JSONL and Parquet files are a document a record. (Ignored, they had been
    said nothing of: JSONL "split" by line is one document a line anyway, a text file has no fields.)"""
    kinds = set(kinds)
    if not kinds:
        return
    if (split_lines or separator is not None) and "text" not in kinds:
        what = "split_lines=True" if split_lines else f"separator={separator!r}"
        raise ConfigError(f"{what} (CLI: {'--split-lines' if split_lines else '--separator'}) cuts text files into "
                          f"documents, but the input holds {' and '.join(sorted(kinds))} files only, whose records "
                          "are the documents; leave it out")
    if field != "text" and not kinds & {"jsonl", "parquet"}:
        raise ConfigError(f"field={field!r} (CLI: --field) names a JSONL field or Parquet column, but the input holds "
                          "text files only (a document a file, line or piece); leave it out, or read files of one "
                          "JSON object a line with format='jsonl' (--format jsonl)")


@dataclass
class FileSource(Source):
    """Documents from files (see the module docstring). ``format="auto"`` picks by extension:
    ``.jsonl``/``.ndjson`` -> JSONL, ``.parquet`` -> Parquet, anything else -> text."""

    paths: list[Path]
    format: str = "auto"
    field: str = "text"
    split_lines: bool = False
    separator: str | None = None
    errors: str = "strict"
    _given: list[str] = _field(default_factory=list)
    # invalid UTF-8 replaced (errors="replace") by the last read of the files: see _batches
    replaced: Replaced = _field(default_factory=Replaced, init=False, repr=False, compare=False)
    # blank lines (split_lines) the last read skipped: a one-item list
    blank_lines: list = _field(default_factory=lambda: [0], init=False, repr=False, compare=False)

    kind = "files"

    def __post_init__(self):
        if self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r} is not one of {', '.join(map(repr, FORMATS))}")
        if self.errors not in ("strict", "replace"):
            raise ConfigError(f"errors={self.errors!r}; use 'strict' or 'replace'")
        if self.split_lines and self.separator is not None:
            raise ConfigError("pass either split_lines=True or separator=..., not both")
        if self.separator is not None and not isinstance(self.separator, str):
            raise ConfigError(f"separator={self.separator!r} is a {type(self.separator).__name__}; pass the text "
                              "that separates documents (a str)")
        if self.separator == "":
            raise ConfigError("separator must not be empty")
        if self.separator is not None:
            try:
                self.separator.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"separator={self.separator!r} holds a lone surrogate, which no UTF-8 text "
                                  "holds; pass the text that separates documents") from None
        for p in self.paths:  # (read as text, an archive or another compression made garbage documents)
            name = p.name.lower()
            if name.endswith(_UNREAD) or ".tar." in name:
                raise InputError(f"{p}: an archive or a compression tokenmill does not read (it reads .gz and .zst); "
                                 "extract or decompress it first")
        if not isinstance(self.field, str) or not self.field:
            raise ConfigError(f"field={self.field!r} must be a non-empty column or field name")
        if self.format == "auto":  # (read as one text document, its records and field= ignored without a word)
            for p in self.paths:
                if holds_records(p):
                    name = _plain_name(p)
                    raise ConfigError(
                        f"{p}: a {name[name.rindex('.'):]} file, which format='auto' would read as one text document; "
                        "if it holds one JSON object a line (datasets' to_json writes that), name it .jsonl or pass "
                        "format='jsonl' (CLI: --format jsonl); format='text' reads it as text; or load it (pandas, "
                        "datasets) and pass its text column")

    def kind_of(self, path: Path) -> str:
        return format_of(path) if self.format == "auto" else self.format

    def files(self) -> list[str]:
        """The files as absolute paths: what a build records (its arguments, the store's provenance), so a build run
        again from another folder, or a provenance read from one, names the same files (paths as typed, relative to
        where the build ran, had refused a resume from elsewhere and named files no other folder finds)."""
        return [os.path.abspath(p) for p in self.paths]

    def spec(self) -> dict:
        stats = [check_regular(p) for p in self.paths]
        # size and modification time: a rerun with other ones reads and hashes the input to tell an edit
        # (the shards its input hashes no longer match are encoded again) from a touch (nothing to do)
        spec = {"kind": "files", "format": self.format, "field": self.field, "split_lines": self.split_lines,
                "separator": self.separator, "errors": self.errors, "files": self.files(),
                "sizes": [st.st_size for st in stats], "mtimes_ns": [st.st_mtime_ns for st in stats]}
        # lines are cut at line breaks only since 2026-12 (str.splitlines cut at form feeds, U+2028...): a store
        # made with the old rule is not taken for one made with this one
        return {**spec, "lines": "newlines"} if self.split_lines else spec

    def documents(self) -> Iterator[Document]:
        for texts, i, rows in self.batches():
            for text, row in zip(texts, rows):
                yield text, i, row

    def batches(self) -> Iterator[Batch]:
        return self._batches(utf8=False)

    def utf8_batches(self) -> Iterator[Batch]:
        """:meth:`batches`, a whole text file (one document per file) that is well-formed UTF-8 as its bytes
        (:class:`Utf8Docs`, never decoded); the others as :meth:`batches` gives them."""
        return self._batches(utf8=True)

    def _batches(self, utf8: bool) -> Iterator[Batch]:
        self.replaced = Replaced()  # a read counts its own replacements (a second read does not add to the first's)
        self.blank_lines = [0]
        for i, p in enumerate(self.paths):
            kind = self.kind_of(p)
            if utf8 and kind == "text" and not self.split_lines and self.separator is None:
                data = read_all(p)
                docs = utf8_docs(data)
                yield (docs if docs is not None else
                       [decode_utf8(data, name=str(p), errors=self.errors, replaced=self.replaced)]), i, [0]
                continue
            if kind == "jsonl":  # a block of records at a time
                groups = self._jsonl_blocks(p)
            elif kind == "parquet":  # a row group at a time
                groups = self._parquet_groups(p, self._parquet_file(p))
            elif self.split_lines:  # a block of lines at a time
                groups = _line_batches(p, self.errors, None, self.replaced, self.blank_lines)
            else:  # one document per file or per separator
                yield from _grouped((text, i, row) for text, row in self._text(p))
                continue
            for texts, rows in groups:
                if texts:
                    yield texts, i, rows

    # -- text: per file, per line, per separator
    def _text(self, p: Path) -> Iterator[tuple[str, int]]:
        return text_documents(p, split_lines=self.split_lines, separator=self.separator, errors=self.errors,
                              replaced=self.replaced, blank=self.blank_lines)

    # -- JSONL: one record per line, the text in ``field``
    def _jsonl_blocks(self, p: Path) -> Iterator[tuple[list[str], list[int] | range]]:
        """``(texts, rows)`` of each block of the file's lines (rows: 0-based line numbers; blank lines carry no
        record). A UTF-8 byte-order mark at the file's start is skipped (editors on Windows write one; JSON
        allows a reader to ignore it, and ``json.loads`` refused the first line for it)."""
        fast, refused = _field_decoder(self.field)
        text_of = operator.attrgetter("v")
        line_no = 0  # lines before the block
        for offset, block in _blocks(p, b"\n"):
            if offset == 0 and block.startswith(b"\xef\xbb\xbf"):
                block, offset = block[3:], 3
            lines = block.split(b"\n")
            if block.endswith(b"\n"):
                lines.pop()
            try:  # msgspec checks the UTF-8 of what it decodes, not of the fields it skips: the block's, here
                block.decode("utf-8")
                utf8 = True
            except UnicodeDecodeError:  # its lines take json's path, which names the byte (or replaces it)
                utf8 = False
            for lo in range(0, len(lines), _BATCH_DOCS):  # (a batch a few hundred KB: its shard starts sooner)
                part = lines[lo : lo + _BATCH_DOCS]
                texts = None
                if utf8:
                    try:  # every line an object whose field is a string: their texts, as json.loads gives them
                        texts = list(map(text_of, map(fast.decode, part)))
                    except (refused, RecursionError):  # a line it refuses (blank, NaN, a lone surrogate, an error...): one by one
                        pass
                if texts is not None:
                    yield texts, range(line_no, line_no + len(part))
                else:
                    yield self._jsonl_lines(p, part, offset, line_no, utf8, fast, refused)
                offset += sum(map(len, part)) + len(part)
                line_no += len(part)

    def _jsonl_lines(self, p: Path, lines: list[bytes], offset: int, line_no: int, utf8: bool, fast,
                     refused) -> tuple[list[str], list[int]]:
        """``(texts, rows)`` of a block's ``lines`` one by one: msgspec where it takes the line, else
        ``json.loads``' path, which gives the same text or names the problem."""
        texts: list[str] = []
        rows: list[int] = []
        pos = offset
        for raw in lines:
            line_no += 1
            start, pos = pos, pos + len(raw) + 1
            if not raw.strip(_JSON_SPACE):
                continue  # blank lines carry no record (blank by JSON's rules: a form feed is an error)
            text = None
            if utf8:
                try:  # an object, its field a string: the text, as json.loads would give it
                    text = fast.decode(raw).v
                except (refused, RecursionError):  # anything else (NaN, lone surrogates, errors): json's path below
                    pass
            if text is None:
                line = decode_utf8(raw, name=f"{p}:{line_no}", base=start, errors=self.errors,
                                   replaced=self.replaced)
                rec = _json_line(line, f"{p}:{line_no}")
                text = _field_of(rec, self.field, f"{p}:{line_no}")
                if self.errors == "strict" and not text.isascii():
                    try:
                        text.encode("utf-8")
                    except UnicodeEncodeError as e:  # (found here, by its line, not when encoding it)
                        raise InputError(f"{p}:{line_no}: field {self.field!r} holds a lone surrogate escape "
                                         f"(U+{ord(text[e.start]):04X} at character {e.start:,d}), which no UTF-8 "
                                         "text holds; pass errors='replace' (CLI: --errors replace) to make it "
                                         "U+FFFD, or fix the file") from None
                if self.errors == "replace":  # a lone surrogate escaped ("\\ud83d" of a cut emoji): U+FFFD
                    fixed = replace_surrogates(text)
                    if fixed is not text:
                        self.replaced.add(fixed.count("\ufffd") - text.count("\ufffd"), f"{p}:{line_no}", None,
                                          surrogates=True)
                        text = fixed
            texts.append(text)
            rows.append(line_no - 1)
        return texts, rows

    # -- Parquet: one column, streamed by row group
    def _parquet_file(self, p: Path):
        """The Parquet file ``p`` opened, its column ``field`` checked to exist."""
        pq = require("pyarrow.parquet", "parquet")
        check_regular(p)
        if p.name.lower().endswith(_COMPRESSED):  # (pyarrow: "magic bytes not found in footer")
            raise InputError(f"{p}: a compressed Parquet file; Parquet compresses its own pages, and tokenmill reads "
                             ".parquet files as they are: decompress it first")
        try:
            pf = pq.ParquetFile(p)
        except Exception as e:  # pyarrow raises ArrowInvalid/OSError subclasses
            raise InputError(f"{p}: not a readable Parquet file ({e})") from e
        names = pf.schema_arrow.names
        if self.field not in names:
            raise InputError(f"{p}: no column {self.field!r}; the columns are: {', '.join(names)}; "
                             f"pass field=... (CLI: --field){_top_level(self.field, names)}")
        if names.count(self.field) > 1:  # (pyarrow reads the first: which one was meant is not known)
            raise InputError(f"{p}: {names.count(self.field)} columns are named {self.field!r}; a file with one "
                             "such column can be read")
        return pf

    def _parquet_groups(self, p: Path, pf) -> Iterator[tuple[list[str], range]]:
        """``(texts, rows)`` of each row group of the open Parquet file ``pf``: a column of strs as it comes,
        any other value checked and decoded row by row (or refused, naming its row)."""
        row = 0
        for g in range(pf.num_row_groups):
            try:
                arr = pf.read_row_group(g, columns=[self.field]).column(0)
            except Exception as e:  # noqa: BLE001 (pyarrow's ArrowInvalid / OSError of a damaged page)
                raise InputError(f"{p}: row group {g:,d} (from row {row:,d}) is not readable ({e}); the file is "
                                 "damaged: write or fetch it again") from e
            try:
                col = arr.to_pylist()
            except UnicodeDecodeError:  # a string column holding invalid UTF-8 (older writers): its bytes, each
                import pyarrow as pa  # value decoded as errors= says, a bad one named by its row

                col = arr.cast(pa.large_binary()).to_pylist()
            if set(map(type, col)) - {str}:
                col = [_as_text(v, f"{p}: row {row + i:,d}", self.field, self.errors, self.replaced)
                       for i, v in enumerate(col)]
            yield col, range(row, row + len(col))
            row += len(col)


def _json_int(digits: str):
    """``json.loads``' integers: an int, or past Python's digit limit (4,300) a Decimal (a value no text field
    takes, named as such), where int() raised a bare ValueError naming no file or line."""
    if len(digits) <= 4000:
        return int(digits)
    import decimal

    return decimal.Decimal(digits)


@functools.lru_cache(maxsize=16)
def _field_decoder(name: str):
    """A msgspec decoder of a JSONL record that keeps only the string field ``name`` (as ``.v``): ~0.7 us a
    line against ~7 for ``json.loads`` (57,007 records of ~70 bytes: the reader 520-680 -> 120-176 ms; it
    had been most of a one-worker store build's time). On a line of valid UTF-8 (the caller checks: msgspec
    does not look inside the fields it skips), where it decodes the line, ``json.loads`` gives the same text
    (tested); every line it refuses (invalid UTF-8 or JSON, NaN or Infinity anywhere, a lone surrogate escaped, not
    an object, a field missing or not a string) takes ``json.loads``' path, which accepts it or names the
    problem as before. With the error class those refusals raise (msgspec is imported on first use)."""
    import msgspec

    return msgspec.json.Decoder(msgspec.defstruct("Record", [("v", str)], rename={"v": name})), msgspec.MsgspecError


def _json_line(line: str, where: str) -> Any:
    """One JSONL line's value, else an InputError naming ``where`` (file:line)."""
    try:
        return json.loads(line, parse_int=_json_int)
    except json.JSONDecodeError as e:  # (its msg may end in "at": "Invalid control character at")
        # (records cut by a lone CR, an old Mac's line end, are one line here: "Extra data" said nothing of why)
        cr = ("; the line holds a carriage return (\\r) between records: the file's lines end with CR alone, "
              "convert them to \\n (e.g. tr '\\r' '\\n')") if e.msg == "Extra data" and "\r" in line.strip() else ""
        raise InputError(f"{where}: not valid JSON ({e.msg.removesuffix(' at')} at column {e.colno}); every line of a "
                         f"JSONL file must be one JSON object{cr}") from None
    except RecursionError:
        raise InputError(f"{where}: its JSON nests too deeply to read; every line of a JSONL file must be one JSON "
                         "object (of reasonable depth)") from None


def jsonl_records(path) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` of each non-blank line of a JSONL file (``.gz``/``.zst`` read as a build reads
    them), each a JSON object: the whole record, for readers of more than one text field (a chat's messages).
    A line that is no valid UTF-8, no valid JSON or no object is an InputError naming the file and line."""
    p = Path(path)
    line_no = 0
    for offset, block in _blocks(p, b"\n"):
        if offset == 0 and block.startswith(b"\xef\xbb\xbf"):
            block = block[3:]
            offset = 3
        start = offset  # (of each line in the file: an invalid byte's offset is the file's, as a build says it)
        for raw in block.split(b"\n")[: -1 if block.endswith(b"\n") else None]:
            line_no += 1
            at, start = start, start + len(raw) + 1
            if not raw.strip(_JSON_SPACE):
                continue
            where = f"{p}:{line_no}"
            rec = _json_line(decode_utf8(raw, name=where, base=at), where)
            if not isinstance(rec, dict):
                raise InputError(f"{where}: the line is a JSON {type(rec).__name__}, not an object")
            yield line_no, rec


def _field_of(rec: Any, name: str, where: str) -> str:
    if not isinstance(rec, dict):
        raise InputError(f"{where}: the line is a JSON {type(rec).__name__}, not an object with a {name!r} field")
    if name not in rec:
        present = ", ".join(map(repr, rec)) or "none"
        raise InputError(f"{where}: no field {name!r}; the record's fields are: {present}; pass field=... "
                         f"(CLI: --field){_top_level(name, rec)}")
    return _as_text(rec[name], where, name, "strict")


def _top_level(name: str, names) -> str:
    """Where ``name`` reads as a path into a nested field (``meta.text`` beside a field ``meta``): that fields are
    read by their top-level name."""
    head = name.split(".")[0]
    if "." not in name or head not in names:
        return ""
    return (f" (a field is read by its top-level name: {name!r} is not looked up inside {head!r}; flatten the records "
            "first, e.g. datasets' flatten() or a jq/pandas pass)")


def _as_text(v: Any, where: str, name: str, errors: str, replaced: Replaced | None = None) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return decode_utf8(v, name=f"{where} (field {name!r})", errors=errors, replaced=replaced)
    raise InputError(f"{where}: field {name!r} is {'null' if v is None else type(v).__name__}, not a string; give every "
                     "record a string there (\"\" for none), or leave the record out")


# ---- in-memory sources ---------------------------------------------------------------------------
@dataclass
class IterableSource(Source):
    """Any iterable of str (a list, a generator, ...); ``name`` labels it in errors and provenance."""

    items: Any
    name: str = "<iterable>"
    kind = "iterable"

    def files(self) -> list[str]:
        return [self.name]

    def spec(self) -> dict:
        n = len(self.items) if hasattr(self.items, "__len__") else None
        return {"kind": "iterable", "name": self.name, "len": n}

    @property
    def one_shot(self) -> bool:
        """An iterator (a generator, an open file, ``map(...)``) is its own iterator: reading it consumes it."""
        try:
            return iter(self.items) is self.items
        except TypeError:
            return False

    def documents(self) -> Iterator[Document]:
        for row, t in enumerate(self.items):
            if not isinstance(t, str):
                raise InputError(f"{self.name}: item {row:,d} {_not_text(t)}")
            yield t, 0, row

    def batches(self) -> Iterator[Batch]:
        """A list in slices (their types checked in C); any other iterable as :meth:`documents` reads it."""
        if type(self.items) is not list:
            yield from _grouped(self.documents())
            return
        for lo in range(0, len(self.items), _BATCH_DOCS):
            part = self.items[lo : lo + _BATCH_DOCS]
            if set(map(type, part)) - {str}:
                for i, t in enumerate(part):
                    if not isinstance(t, str):
                        raise InputError(f"{self.name}: item {lo + i:,d} {_not_text(t)}")
            yield part, 0, range(lo, lo + len(part))


def _not_text(t) -> str:
    """What an item that is not a str is, said for an error: a missing value (None, or a float NaN, as pandas
    reads a missing cell) by that name."""
    if t is None or (isinstance(t, float) and t != t):
        return f"is missing ({t!r}, as a table's empty cell reads): drop or fill the rows without text"
    return f"is a {type(t).__name__}, not a str"


@dataclass
class HFSource(Source):
    """A column of a Hugging Face ``datasets.Dataset`` or ``IterableDataset``, read in batches."""

    dataset: Any
    field: str = "text"
    batch_size: int = 1000
    errors: str = "strict"  # bytes values that are not UTF-8: "replace" makes them U+FFFD, counted
    kind = "hf_dataset"
    replaced: Replaced = _field(default_factory=Replaced, init=False, repr=False, compare=False)

    def __post_init__(self):
        from .._validate import check_int

        # (0 made datasets' iter() spin forever, -1 a SystemError; 2.5 was taken)
        self.batch_size = check_int(self.batch_size, "batch_size", min=1, max=1 << 30)
        if self.errors not in ("strict", "replace"):
            raise ConfigError(f"errors={self.errors!r}; use 'strict' or 'replace'")

    def files(self) -> list[str]:
        name = getattr(getattr(self.dataset, "info", None), "dataset_name", None) or "<datasets>"
        return [str(name)]

    def spec(self) -> dict:
        fp = getattr(self.dataset, "_fingerprint", None)
        n = len(self.dataset) if hasattr(self.dataset, "__len__") else None
        spec = {"kind": "hf_dataset", "field": self.field, "fingerprint": fp, "len": n}
        return spec if self.errors == "strict" else {**spec, "errors": self.errors}

    def documents(self) -> Iterator[Document]:
        for texts, _, rows in self.batches():
            for text, row in zip(texts, rows):
                yield text, 0, row

    def batches(self) -> Iterator[Batch]:
        """The dataset's own batches: a column of strs as it comes, no work per row (any other value is
        checked and decoded row by row, or refused naming its row)."""
        names = getattr(self.dataset, "column_names", None)
        if names is not None and self.field not in names:
            raise InputError(f"dataset {self.files()[0]}: no column {self.field!r}; the columns are: "
                             f"{', '.join(names)}; pass field=... (CLI: --field)")
        row = 0
        self.replaced = Replaced()  # a read counts its own replacements (errors="replace")
        dataset = self.dataset
        fmt = getattr(dataset, "format", None)
        if isinstance(fmt, dict) and fmt.get("type") in _ARRAY_FORMATS and hasattr(dataset, "with_format"):
            # (numpy makes a column of strs one fixed-width array, which drops each text's trailing NULs, and
            # is as wide as the longest text a row: the rows as arrow gives them, the same values)
            dataset = dataset.with_format("arrow")
        for batch in dataset.iter(batch_size=self.batch_size):
            cols = list(getattr(batch, "column_names", None) or batch)  # (a dict, or a pyarrow Table: "arrow")
            if self.field not in cols:
                raise InputError(f"dataset {self.files()[0]}: no column {self.field!r}; the columns are: "
                                 f"{', '.join(map(str, cols))}; pass field=...")
            col = batch[self.field]
            if not isinstance(col, list):  # a dataset in "arrow", "numpy" or "pandas" format: its values
                col = col.to_pylist() if hasattr(col, "to_pylist") else col.tolist() if hasattr(col, "tolist") \
                    else list(col)
            texts = col if not set(map(type, col)) - {str} else [
                _as_text(v, f"dataset {self.files()[0]}: row {row + i:,d}", self.field, self.errors, self.replaced)
                for i, v in enumerate(col)]
            if texts:
                yield texts, 0, range(row, row + len(texts))
            row += len(texts)


_ARRAY_FORMATS = ("numpy", "np", "torch", "pt", "tensorflow", "tf", "jax")  # datasets' formats of fixed-width arrays


# ---- constructors --------------------------------------------------------------------------------
def files(inputs, *, format: Format = "auto", field: str = "text", split_lines: bool = False,
          separator: str | None = None, errors: Errors = "strict") -> FileSource:
    """A file source: paths, folders and globs (see :func:`expand_paths`), read in sorted order."""
    return FileSource(expand_paths(inputs), format, field, split_lines, separator, errors)


def texts(items: Iterable[str], *, name: str = "<iterable>") -> IterableSource:
    """An iterable of str as a source (one str is refused: it would be one document per character)."""
    from .._validate import check_texts

    return IterableSource(check_texts(items, "texts", "documents"), name)


def hf_dataset(dataset, *, field: str = "text", batch_size: int = 1000, errors: Errors = "strict") -> HFSource:
    """A Hugging Face dataset column as a source (``errors``: for bytes values, as a file's)."""
    return HFSource(dataset, field, batch_size, errors)


def as_sources(sources, *, field: str = "text", format: Format = "auto", split_lines: bool = False,
               separator: str | None = None, errors: Errors = "strict") -> list[Source]:
    """Normalize what :meth:`TokenStore.build` accepts into a list of :class:`Source`.

    ``sources``: one source or a list/tuple of them. A source is a :class:`Source`, a path (str or
    ``os.PathLike``: file, folder or glob), a list/tuple of paths (one source of all their files), a
    ``datasets`` Dataset/IterableDataset, or any other iterable of str (e.g. a generator). A plain list
    of strings is a list of *paths*, and so is a list of strings in the list; wrap in-memory texts with
    :func:`texts`. Each path (file, folder or glob) is one source.
    """
    opts = dict(field=field, format=format, split_lines=split_lines, separator=separator, errors=errors)
    items = list(sources) if isinstance(sources, (list, tuple)) else [sources]
    if not items:
        raise InputError("no sources given; pass at least one file, folder, glob, dataset or iterable of str")
    # each path (a file, a folder, a glob) is one source: the unit of ``split(by="source")``; a list of
    # paths in the list is one source of their files (read as texts, the paths became the documents)
    srcs = [files(item, **opts) if _paths(item) else _one(item, field, errors) for item in items]
    refuse_repeated_files([p for s in srcs if isinstance(s, FileSource) for p in s.paths])
    if all(isinstance(s, FileSource) for s in srcs):  # an option nothing reads
        check_options_apply({s.kind_of(p) for s in srcs for p in s.paths}, field=field, split_lines=split_lines,
                            separator=separator)
    return srcs


def refuse_repeated_files(paths: Iterable[Path]) -> None:
    """An InputError naming two of ``paths`` that are one file (one path spelled twice, a folder and a file
    in it, a symbolic or hard link): read twice, its documents would be stored, trained on and counted twice."""
    seen: dict[tuple[int, int], Path] = {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:  # (missing or unreadable: the read names it)
            continue
        key = (st.st_dev, st.st_ino)
        first = seen.get(key)
        if first is None:
            seen[key] = p
        else:
            same = "the same path" if os.path.abspath(first) == os.path.abspath(p) else "the same file"
            raise InputError(f"the inputs name {str(first)!r} and {str(p)!r}, {same}: its documents would be read, "
                             "stored and counted twice; name each file once (a folder and a file in it, or a link "
                             "to a file, count twice too). To weight some data more, use tokenmill.Mixture's "
                             "weights over stores")


def _paths(item) -> bool:
    """A path, or a non-empty list/tuple of paths."""
    if isinstance(item, (str, os.PathLike)):
        return True
    return isinstance(item, (list, tuple)) and bool(item) and all(isinstance(x, (str, os.PathLike)) for x in item)


def _one(item, field: str, errors: Errors = "strict") -> Source:
    if isinstance(item, Source):
        return item
    mod = type(item).__module__ or ""
    if mod.startswith("datasets") and hasattr(item, "iter"):
        return hf_dataset(item, field=field, errors=errors)
    if mod.startswith("datasets") and isinstance(item, dict):  # a DatasetDict: splits, each a source
        splits = ", ".join(repr(k) for k in list(item)[:4])
        raise ConfigError(f"the {type(item).__name__} holds splits ({splits}), not rows; pass one of them, e.g. "
                          f"ds[{next(iter(item), 'train')!r}], or each as its own source")
    if (type(item).__module__ or "").startswith("pyarrow") and hasattr(item, "to_pylist"):
        return _arrow_texts(item, field)
    if _is_table(item):  # (iterated, a DataFrame gives its column names: they became the documents)
        columns = [str(c) for c in item.columns]
        if field not in columns:
            raise ConfigError(f"a {type(item).__name__} with no column {field!r} (its columns: {', '.join(columns[:8])}); "
                              "pass field=... (CLI: --field) naming the text column")
        return texts(item[field], name=f"{type(item).__name__} column {field!r}")
    if isinstance(item, (bytes, dict)) or not hasattr(item, "__iter__"):
        raise ConfigError(f"cannot read a source of type {type(item).__name__}; pass a path, a folder, a glob, "
                          "a datasets.Dataset, or an iterable of str")
    return texts(item)


class _ArrowColumn:
    """A pyarrow string column (Array or ChunkedArray) as a re-iterable sequence of Python values, a chunk at
    a time (a resumed build reads it again)."""

    def __init__(self, column):
        self.column = column

    def __len__(self) -> int:
        return len(self.column)

    def __iter__(self):
        for chunk in getattr(self.column, "chunks", [self.column]):
            yield from chunk.to_pylist()


def _arrow_texts(item, field: str) -> Source:
    """A pyarrow Table or RecordBatch (its column ``field``), or a string Array / ChunkedArray, as a source."""
    if hasattr(item, "column_names"):
        if field not in item.column_names:
            raise ConfigError(f"a pyarrow {type(item).__name__} with no column {field!r} (its columns: "
                              f"{', '.join(item.column_names[:8])}); pass field=... (CLI: --field)")
        return texts(_ArrowColumn(item.column(field)), name=f"pyarrow {type(item).__name__} column {field!r}")
    return texts(_ArrowColumn(item), name=f"pyarrow {type(item).__name__}")


def _is_table(item) -> bool:
    """A pandas or polars DataFrame (whose iteration gives its column names)."""
    return type(item).__name__ == "DataFrame" and hasattr(item, "columns") and hasattr(item, "__getitem__")
