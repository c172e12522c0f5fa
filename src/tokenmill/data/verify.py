"""``TokenStore.verify``: every byte checked against the manifest, every id against the vocabulary."""

from __future__ import annotations

import hashlib
import sys

import numpy as np

from ..errors import FormatError


def sha256_file(path) -> str:
    """``sha256:<hex>`` of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                break
            h.update(b)
    return "sha256:" + h.hexdigest()


def verify_store(store, *, progress: bool = False) -> dict:
    """Check hashes, offsets, ids and provenance of every shard; raise one FormatError listing all
    problems (each names its file), else return ``{"shards", "documents", "tokens", "bytes"}``."""
    problems: list[str] = []
    m = store.manifest
    vocab, nfiles = store.vocab_size, len(m["files"])
    total_bytes = 0
    shards = store.shards
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(shards), unit="shard", desc="verify", file=sys.stderr)
    for sh in shards:
        sh.check_replaced()  # (a store built again over since it was opened: said, not listed as damage)
        rec = sh.rec
        bad_hash = False
        for part in ("tokens", "offsets", "meta"):
            p = sh.path(part)
            info = rec["files"][part]
            try:
                size = p.stat().st_size
            except FileNotFoundError:
                problems.append(f"{p}: missing")
                bad_hash = True
                continue
            total_bytes += size
            if size != info["bytes"]:
                problems.append(f"{p}: {size:,d} bytes, the manifest says {info['bytes']:,d}")
                bad_hash = True
            elif sha256_file(p) != info["sha256"]:
                problems.append(f"{p}: sha256 differs from the manifest (the file was modified or corrupted)")
                bad_hash = True
        if bad_hash:
            if bar is not None:
                bar.update(1)
            continue
        try:
            off = sh.offsets
        except FormatError as e:
            problems.append(str(e))
            continue
        tok = sh.tokens
        if tok.size and int(tok.max()) >= vocab:
            i = int(np.argmax(tok >= vocab))
            problems.append(f"{sh.path('tokens')}: id {int(tok[i]):,d} at position {i:,d} is not below the "
                            f"vocabulary size {vocab:,d}")
        meta = sh.meta()
        if meta.size and (meta[:, 0].min() < 0 or meta[:, 0].max() >= nfiles or meta[:, 1].min() < 0):
            problems.append(f"{sh.path('meta')}: a document names a file outside 0 .. {nfiles - 1} or a negative row")
        del off
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    if problems:
        raise FormatError(f"token store {store.path} failed verification ({len(problems)} problem"
                          f"{'s' if len(problems) != 1 else ''}):\n  " + ";\n  ".join(problems)
                          + (".\nRebuild the store (or restore the files)." if not all(
                              "rebuild the store" in p for p in problems) else "."))
    return {"shards": len(shards), "documents": len(store), "tokens": store.num_tokens, "bytes": total_bytes}
