"""Megatron-LM's ``.bin`` / ``.idx`` pair (MMIDIDX, version 1), written and read without megatron.

``.bin``: every document's ids, concatenated, in the index's dtype. ``.idx``, little-endian::

    b"MMIDIDX\\x00\\x00"   9 bytes
    version                 uint64 = 1
    dtype code              uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
    sequence count S        uint64
    document count D        uint64 (entries of document_indices: documents + 1, S + 1 in tokenmill's exports)
    sequence_lengths        int32  (S,)
    sequence_pointers       int64  (S,)   byte offset of each sequence in .bin
    document_indices        int64  (D,)   where each document's sequences start, then S: 0, 1, ..., S
                                          (one sequence per document) in tokenmill's exports

megatron-core's ``IndexedDataset(prefix)`` reads the export (tested).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Annotated, Literal

import numpy as np

from .._arrays import offsets_of, seal
from .._io import atomic_path, canonical_hash, fs_path, moved_aside, resolve_output
from .._schema import Meta, Struct, check
from ..errors import ConfigError, FormatError, InputError
from .source import KnownLengths, doc_index

HEADER = b"MMIDIDX\x00\x00"
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
         8: np.uint16}
CODE_OF = {np.dtype(v): k for k, v in CODES.items()}
INT32_MAX = 2**31 - 1


def pair(prefix) -> tuple[Path, Path]:
    """``prefix.bin`` and ``prefix.idx``, or a ConfigError where ``prefix`` names no file (``""``, ``"."``,
    ``"out/"``)."""
    raw = fs_path(prefix, "a Megatron prefix is a path (a str or a Path), not a {kind}; pass the path without "
                          ".bin/.idx")
    p = Path(raw)
    if not raw or raw.endswith(("/", os.sep)) or p.name in ("", ".", ".."):
        raise ConfigError(f"the Megatron prefix {raw!r} {'names a folder, not a file' if raw else 'is empty'}; "
                          "pass a path such as "
                          "'out/data' (for out/data.bin and out/data.idx)")
    return p.with_name(p.name + ".bin"), p.with_name(p.name + ".idx")


def export_megatron(store, prefix, *, inputs=()) -> tuple[Path, Path]:
    """Write ``prefix.bin``/``prefix.idx`` from a token source; ``inputs``: the files it reads (never
    written onto)."""
    bin_path, idx_path = pair(prefix)
    dtype = np.dtype(store.dtype).newbyteorder("=")
    if dtype == np.uint32:  # Megatron has no uint32 code: int32 holds every id below 2**31
        if store.vocab_size - 1 > INT32_MAX:
            raise InputError(f"vocab_size {store.vocab_size:,d} does not fit Megatron's int32 ids")
        dtype = np.dtype(np.int32)
    lengths = np.asarray(store.lengths, np.int64)
    if not lengths.sum():
        raise InputError(f"nothing to export: the source has {lengths.size:,d} documents and no tokens, and "
                         "megatron-core's IndexedDataset cannot open an empty .bin (it memory-maps it); nothing "
                         "was written")
    if lengths.max() > INT32_MAX:
        i = int(np.argmax(lengths > INT32_MAX))
        raise InputError(f"document {i:,d} has {int(lengths[i]):,d} tokens, more than Megatron's int32 "
                         "sequence lengths hold; split it first")
    pointers = np.zeros(lengths.size, np.int64)
    if lengths.size:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    # never onto the store being read (a link or hard link to one of its files): its files are inputs
    inputs = list(inputs)
    le = dtype.newbyteorder("<")

    def write_bin(f):
        if hasattr(store, "shard_arrays"):  # a whole store: shard by shard
            for tokens in store.shard_arrays():
                f.write(np.ascontiguousarray(tokens, le).tobytes())
        else:  # a view: document by document
            for i in range(len(store)):
                f.write(np.ascontiguousarray(store.get(i), le).tobytes())

    def write_idx(f):
        f.write(HEADER)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODE_OF[dtype]))
        f.write(struct.pack("<Q", lengths.size))
        f.write(struct.pack("<Q", lengths.size + 1))
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers.astype("<i8").tobytes())
        f.write(np.arange(lengths.size + 1, dtype="<i8").tobytes())

    for path in (bin_path, idx_path):  # both checked before either is written
        resolve_output(path, what="Megatron output", inputs=inputs)
    # A pair replaced one file after the other left, when killed between the two renames, a new .bin beside
    # the old .idx, which opens without error where the token counts agree (the format has no checksum):
    # both are written first, then the old pair is moved aside, then the .bin and the .idx take their names.
    # Killed in between, the folder holds a .bin without its .idx, which nothing opens (the old pair aside); a
    # failure puts the old pair back (the old .idx had been removed first: a disk error lost it)
    with moved_aside([bin_path, idx_path]) as aside, atomic_path(idx_path, inputs=inputs) as idx_tmp, \
            atomic_path(bin_path, inputs=inputs) as bin_tmp:
        for tmp, write in ((bin_tmp, write_bin), (idx_tmp, write_idx)):
            with open(tmp, "wb") as f:
                write(f)
        aside()
    return bin_path, idx_path


# the dtype codes of Megatron's index (megatron-core's DType): named in a refusal
_MEGATRON_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64", 7: "float32", 8: "uint16"}


class IndexHeader(Struct):
    """The fixed part of a ``.idx`` file, checked before any array of it is mapped."""

    magic: Literal["MMIDIDX"]
    version: Literal[1]
    dtype_code: Literal[4, 8]  # int32, uint16: what Megatron and tokenmill write for token ids
    sequences: Annotated[int, Meta(ge=0, le=INT32_MAX)]
    documents: Annotated[int, Meta(ge=1)]
    file_bytes: int

    def __post_init__(self):
        # (more document indices than sequences + 1 is fine: a document of no sequence repeats its index, as
        # Megatron-LM's preprocess_data.py writes an empty record; the file's size bounds the count)
        need = 34 + 12 * self.sequences + 8 * self.documents
        if need + self.sequences == self.file_bytes and self.sequences:
            raise ValueError("a multimodal index (a mode byte for every sequence after the document indices)")
        if need != self.file_bytes:
            raise ValueError(f"the header describes a {need:,d}-byte index, the file has {self.file_bytes:,d} "
                             f"bytes ({'truncated' if need > self.file_bytes else 'trailing data'})")


class MegatronSource(KnownLengths):
    """A Megatron ``.bin``/``.idx`` pair as a token source: one document per run of sequences that
    ``document_indices`` marks (one sequence each in tokenmill's exports).

    Exposes ``token_array``/``doc_offsets`` (the packing fast path reads them directly).
    """

    ids_checked = True  # (data.source.checked_get: an int32 .bin is scanned for negative ids when opened)

    def __init__(self, prefix):
        bin_, idx = pair(prefix)
        self.prefix = bin_.with_name(bin_.name.removesuffix(".bin"))
        for p in (idx, bin_):
            if not p.exists():
                name = os.fspath(prefix)
                hint = (f"; pass the pair's prefix without the suffix: {name[:-4]!r}"
                        if name.endswith((".bin", ".idx")) and Path(name[:-4] + ".idx").exists() else "")
                raise FormatError(f"Megatron file {p} does not exist{hint}")
            if not p.is_file():
                raise FormatError(f"Megatron file {p} is not a regular file (a folder, device or FIFO)")
        size = idx.stat().st_size
        with open(idx, "rb") as f:
            head = f.read(34)
        if len(head) < 34 or head[:9] != HEADER:
            raise FormatError(f"{idx}: not a Megatron MMIDIDX index (bad header)")
        version, code, n, d = struct.unpack("<QBQQ", head[9:34])
        other = _MEGATRON_DTYPES.get(code) if code not in (4, 8) else None
        if other is not None:  # (a dtype Megatron's builder writes, named, with the way on)
            raise FormatError(f"Megatron index {str(idx)!r} holds {other} ids (dtype code {code}); tokenmill reads "
                              "uint16 or int32 ids: write the pair again with one of them (megatron-core's "
                              "IndexedDatasetBuilder(..., dtype=numpy.int32), or numpy.uint16 below 65,536 ids)")
        check({"magic": "MMIDIDX", "version": version, "dtype_code": code, "sequences": n, "documents": d,
               "file_bytes": size}, IndexHeader, what=f"Megatron index {str(idx)!r}",
              hint="tokenmill reads text-only version-1 indexes of uint16 or int32 ids")
        raw = np.memmap(idx, np.uint8, mode="r")
        self.dtype = np.dtype(CODES[code]).newbyteorder("<")
        lengths = np.frombuffer(raw, "<i4", n, 34).astype(np.int64)
        pointers = np.frombuffer(raw, "<i8", n, 34 + 4 * n).astype(np.int64)
        if (lengths < 0).any():
            i = int(np.argmax(lengths < 0))
            raise FormatError(f"{idx}: sequence {i:,d} has length {int(lengths[i]):,d}; the index is corrupted")
        total = int(lengths.sum())
        have = bin_.stat().st_size
        if have != total * self.dtype.itemsize:  # (trailing data: the two files are not one export)
            raise FormatError(f"{bin_}: {have:,d} bytes, the index describes {total * self.dtype.itemsize:,d} "
                              f"({'truncated' if have < total * self.dtype.itemsize else 'trailing data'}): "
                              f"{bin_.name} and {idx.name} are not one export")
        offsets = offsets_of(lengths)
        if (lengths < 0).any() or not np.array_equal(pointers, offsets[:-1] * self.dtype.itemsize):
            raise FormatError(f"{idx}: sequences are not stored back to back in {bin_.name}; "
                              "tokenmill reads contiguous exports only")
        # documents are the runs of sequences ``document_indices`` marks (0 .. S: one each, as tokenmill and
        # most GPT exports write; a sentence-split corpus groups several; an index repeated: a document of none,
        # an empty record): each one's ids, back to back
        docs = np.frombuffer(raw, "<i8", d, 34 + 12 * n).astype(np.int64)
        if docs[0] != 0 or docs[-1] != n or (np.diff(docs) < 0).any():
            raise FormatError(f"{idx}: document_indices must run from 0 to the {n:,d} sequences without "
                              f"decreasing (they start at {int(docs[0]):,d} and end at {int(docs[-1]):,d}"
                              f"{', and decrease' if (np.diff(docs) < 0).any() else ''}): the index is corrupted")
        offsets = offsets[docs]
        lengths = np.diff(offsets)
        self._lengths = seal(lengths)  # (read-only, as every source's lengths: plans and loaders read them)
        self.doc_offsets = seal(offsets)
        tokens = (np.asarray(np.memmap(bin_, self.dtype, mode="r", shape=(total,))) if total
                  else np.zeros(0, self.dtype))
        if self.dtype.kind == "i" and total and int(tokens.min()) < 0:  # one pass, at open
            i = int(np.argmax(tokens < 0))
            doc = int(np.searchsorted(offsets, i, side="right")) - 1
            raise FormatError(f"{bin_}: id {int(tokens[i]):,d} (document {doc:,d}, position "
                              f"{i - int(offsets[doc]):,d}) is negative; token ids are >= 0: the file is corrupted")
        self._tokens, self._bin_bytes = tokens, have
        self._files = (idx, bin_)
        self._fingerprint = None

    vocab_size = None  # the .idx does not record it

    @property
    def token_array(self) -> np.ndarray:
        """All ids (a read-only memory map of the .bin), once the .bin is checked to have its size still (a
        FormatError instead of a SIGBUS when it was truncated under the map)."""
        bin_ = self._files[1]
        try:
            have = os.stat(bin_).st_size
        except OSError as e:
            raise FormatError(f"cannot read Megatron file {bin_}: {e.strerror or e}") from None
        if have != self._bin_bytes:
            raise FormatError(f"{bin_}: {have:,d} bytes now, {self._bin_bytes:,d} when it was opened: the file was "
                              "modified while in use; open it again (or restore it)")
        return self._tokens

    def check_mapped(self, doc=None) -> None:
        """The .bin still has its size (see :attr:`token_array`): called for every batch read through its memory
        map (a .bin truncated mid-iteration had been read past its end, a SIGBUS)."""
        self.token_array  # noqa: B018 -- (the property checks)

    @property
    def fingerprint(self) -> str:
        """sha256 over both files' content (computed on first use)."""
        if self._fingerprint is None:
            from .verify import sha256_file

            self._fingerprint = canonical_hash({"megatron": [sha256_file(p) for p in self._files]})
        return self._fingerprint

    def get(self, i: int) -> np.ndarray:
        i = doc_index(i, len(self))
        return self.token_array[self.doc_offsets[i]:self.doc_offsets[i + 1]]
