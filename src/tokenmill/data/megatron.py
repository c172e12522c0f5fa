"""Megatron-LM's ``.bin`` / ``.idx`` pair (MMIDIDX, version 1), written and read without megatron.

``.bin``: every document's ids, concatenated, in the index's dtype. ``.idx``, little-endian::

    b"MMIDIDX\\x00\\x00"   9 bytes
    version                 uint64 = 1
    dtype code              uint8 (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
    sequence count S        uint64
    document count D        uint64 (= S + 1 entries of document_indices)
    sequence_lengths        int32  (S,)
    sequence_pointers       int64  (S,)   byte offset of each sequence in .bin
    document_indices        int64  (D,)   0, 1, ..., S: one sequence per document

megatron-core's ``IndexedDataset(prefix)`` reads the export (tested).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .._io import atomic_path, canonical_hash
from ..errors import FormatError, InputError

HEADER = b"MMIDIDX\x00\x00"
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
         8: np.uint16}
CODE_OF = {np.dtype(v): k for k, v in CODES.items()}
INT32_MAX = 2**31 - 1


def export_megatron(store, prefix) -> tuple[Path, Path]:
    prefix = Path(prefix)
    dtype = np.dtype(store.dtype).newbyteorder("=")
    if dtype == np.uint32:  # Megatron has no uint32 code: int32 holds every id below 2**31
        if store.vocab_size > INT32_MAX:
            raise InputError(f"vocab_size {store.vocab_size:,d} does not fit Megatron's int32 ids")
        dtype = np.dtype(np.int32)
    lengths = np.asarray(store.lengths, np.int64)
    if lengths.size and lengths.max() > INT32_MAX:
        i = int(np.argmax(lengths > INT32_MAX))
        raise InputError(f"document {i:,d} has {int(lengths[i]):,d} tokens, more than Megatron's int32 "
                         "sequence lengths hold; split it first")
    pointers = np.zeros(lengths.size, np.int64)
    if lengths.size:
        np.cumsum(lengths[:-1] * dtype.itemsize, out=pointers[1:])
    bin_path, idx_path = prefix.with_name(prefix.name + ".bin"), prefix.with_name(prefix.name + ".idx")
    with atomic_path(bin_path) as tmp:
        with open(tmp, "wb") as f:
            le = dtype.newbyteorder("<")
            if hasattr(store, "_shards"):  # a whole store: shard by shard
                for sh in store._shards:
                    f.write(np.ascontiguousarray(sh.tokens, le).tobytes())
            else:  # a view: document by document
                for i in range(len(store)):
                    f.write(np.ascontiguousarray(store.get(i), le).tobytes())
    with atomic_path(idx_path) as tmp:
        with open(tmp, "wb") as f:
            f.write(HEADER)
            f.write(struct.pack("<Q", 1))
            f.write(struct.pack("<B", CODE_OF[dtype]))
            f.write(struct.pack("<Q", lengths.size))
            f.write(struct.pack("<Q", lengths.size + 1))
            f.write(lengths.astype("<i4").tobytes())
            f.write(pointers.astype("<i8").tobytes())
            f.write(np.arange(lengths.size + 1, dtype="<i8").tobytes())
    return bin_path, idx_path


class MegatronSource:
    """A Megatron ``.bin``/``.idx`` pair as a token source (one document per sequence).

    Exposes ``token_array``/``doc_offsets`` (the packing fast path reads them directly).
    """

    def __init__(self, prefix):
        prefix = Path(prefix)
        self.prefix = prefix
        idx = prefix.with_name(prefix.name + ".idx")
        bin_ = prefix.with_name(prefix.name + ".bin")
        for p in (idx, bin_):
            if not p.is_file():
                raise FormatError(f"Megatron file {p} does not exist")
        raw = np.memmap(idx, np.uint8, mode="r")
        if raw.size < 34 or bytes(raw[:9]) != HEADER:
            raise FormatError(f"{idx}: not a Megatron MMIDIDX index (bad header)")
        version, = struct.unpack("<Q", bytes(raw[9:17]))
        code = int(raw[17])
        if version != 1 or code not in CODES:
            raise FormatError(f"{idx}: MMIDIDX version {version} dtype code {code} is not supported (version 1)")
        n, d = struct.unpack("<QQ", bytes(raw[18:34]))
        need = 34 + 4 * n + 8 * n + 8 * d
        if raw.size < need:
            raise FormatError(f"{idx}: {raw.size:,d} bytes, {need:,d} needed for {n:,d} sequences (truncated)")
        self.dtype = np.dtype(CODES[code]).newbyteorder("<")
        lengths = np.frombuffer(raw, "<i4", n, 34).astype(np.int64)
        pointers = np.frombuffer(raw, "<i8", n, 34 + 4 * n).astype(np.int64)
        total = int(lengths.sum())
        if bin_.stat().st_size < total * self.dtype.itemsize:
            raise FormatError(f"{bin_}: {bin_.stat().st_size:,d} bytes, the index needs "
                              f"{total * self.dtype.itemsize:,d} (truncated)")
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if (lengths < 0).any() or not np.array_equal(pointers, offsets[:-1] * self.dtype.itemsize):
            raise FormatError(f"{idx}: sequences are not stored back to back in {bin_.name}; "
                              "tokenmill reads contiguous exports only")
        self._lengths = lengths
        self.doc_offsets = offsets
        self.token_array = (np.asarray(np.memmap(bin_, self.dtype, mode="r", shape=(total,))) if total
                            else np.zeros(0, self.dtype))
        self._files = (idx, bin_)
        self._fingerprint = None

    vocab_size = None  # the .idx does not record it

    @property
    def fingerprint(self) -> str:
        """sha256 over both files' content (computed on first use)."""
        if self._fingerprint is None:
            from .verify import sha256_file

            self._fingerprint = canonical_hash({"megatron": [sha256_file(p) for p in self._files]})
        return self._fingerprint

    @property
    def lengths(self) -> np.ndarray:
        return self._lengths

    def __len__(self) -> int:
        return int(self._lengths.size)

    def get(self, i: int) -> np.ndarray:
        return self.token_array[self.doc_offsets[i]:self.doc_offsets[i + 1]]
