"""The token store: a corpus encoded once into verified, memory-mapped shards.

::

    text sources ──► shards (documents in source order, cut every ``shard_bytes`` of input), encoded in
                     jobs of about a megabyte, each sent as soon as its documents are read
                 ──► encoded in parallel (any worker count, local or Ray: same bytes)
                 ──► out_dir/shard-00000.tokens    raw little-endian ids (uint16, or uint32 past 65,536)
                             shard-00000.offsets   int64 (documents + 1,): document d = tokens[o[d]:o[d+1]]
                             shard-00000.meta      int64 (documents, 2): file index, row (provenance)
                             ...
                             manifest.json         written last: a folder without one is unfinished

A shard is written under a temporary name, renamed into place, then recorded in
``shard-NNNNN.json`` with the sha256 of its files and of the exact document bytes it encoded; a rerun
with the same arguments reads and hashes the input again and reuses a recorded shard only when its
files and its input are proven the same (any other shard is encoded again, and the build says so),
so a build killed at any moment ends byte-identical to an uninterrupted one. The manifest replaces
those records when the build ends. A build over an existing store writes the new one in a hidden
sibling folder, verifies it and swaps the two atomically: the old store is never half replaced.
Shard boundaries depend only on the input and ``shard_bytes``, never on ``workers``. Every file of a
store passes its schema (``Manifest``, ``ShardRecord``, ``Journal`` below) before it is used.

>>> import tempfile, os
>>> from tokenmill import Tokenizer, TokenStore
>>> from tokenmill.data import texts
>>> tok = Tokenizer.from_merges([(104, 105)], special_tokens=["<|endoftext|>"])
>>> d = tempfile.mkdtemp()
>>> store = TokenStore.build(os.path.join(d, "s"), texts(["hi", "hi hi"]), tok, workers=1, progress=False)
>>> len(store), store.lengths.tolist(), store.get(1).tolist(), store.dtype.name
(2, [2, 4], [256, 32, 256, 257], 'uint16')
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import functools
import hashlib
import mmap
import os
import re
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Literal

import numpy as np

from .._arrays import is_sealed, offsets_of, seal
from .._io import (
    TMP_SUFFIX,
    LaterFlush,
    StreamedFile,
    atomic_path,
    canonical_hash,
    check_writable_folder,
    exclusive,
    fs_path,
    nonempty_path,
    remove_stale_temporaries,
    sync_folder,
    write_json_atomic,
)
from .._schema import BIG, Count, Meta, Sha256, Struct, check, load_json
from .._words import counted
from ..errors import ConfigError, FormatError, InputError, OutOfRangeError, TokenmillError, interruptible, warn
from ..tokenizer.special import BOS_NAMES, EOS_NAMES
from . import engines
from .readers import Replaced, Source, Utf8Docs, as_sources, blank_note, format_of
from .source import doc_index
from .verify import sha256_file

FORMAT_NAME = "tokenmill.store"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
BUILD_STATE = "build.json"
DEFAULT_SHARD_BYTES = 16 << 20  # input (UTF-8) bytes per shard
_PART_BYTES = 1 << 20  # input bytes per encoding job: a larger shard is encoded in parts, the first one at once
_SHARD_RE = re.compile(r"^shard-([0-9]{5,9})\.(tokens|offsets|meta|json)$")
_PARTS = ("tokens", "offsets", "meta")


class WriteError(TokenmillError, OSError):
    """Writing the store failed (full disk, permissions); names the path. The previous state stays valid."""


# ---- the schemas of the files a store is made of (checked before any value is used) ----------------
class FileInfo(Struct):
    bytes: Count
    sha256: Sha256


class ShardFiles(Struct):
    tokens: FileInfo
    offsets: FileInfo
    meta: FileInfo


class ShardRecord(Struct):
    """One shard: ``shard-NNNNN.json`` during a build, an entry of the manifest's ``shards`` after."""

    name: Annotated[str, Meta(pattern=r"^shard-[0-9]{5,9}$")]  # a plain file name inside the store
    documents: Count
    tokens: Count
    input_bytes: Count
    files: ShardFiles
    input_sha256: Sha256 | None = None  # of the documents' bytes (stores built before it have none)

    def check_sizes(self, itemsize: int) -> None:
        for part, want in (("tokens", self.tokens * itemsize), ("offsets", (self.documents + 1) * 8),
                           ("meta", self.documents * 16)):
            got = getattr(self.files, part).bytes
            if got != want:
                raise ValueError(f"{self.name}.{part} is recorded with {got:,d} bytes; {self.documents:,d} "
                                 f"documents of {self.tokens:,d} tokens need {want:,d}")


class StoreTokenizer(Struct):
    hash: Annotated[str, Meta(min_length=1, max_length=200)]
    vocab_size: Annotated[int, Meta(ge=1, le=2**31)]
    eos_id: Annotated[int, Meta(ge=0)] | None
    bos_id: Annotated[int, Meta(ge=0)] | None


class Manifest(Struct):
    """``manifest.json``: written last by a build; a folder without one is unfinished."""

    format: Literal["tokenmill.store"]
    version: Literal[1]
    tokenizer: StoreTokenizer
    dtype: Literal["uint16", "uint32"]
    byte_order: Literal["little"]
    documents: Count
    tokens: Count
    input_bytes: Count
    build: dict[str, Any]
    build_fingerprint: Annotated[str, Meta(max_length=200)]
    sources: list[str]
    files: list[str]
    file_source: list[Annotated[int, Meta(ge=0)]]
    shards: list[ShardRecord]
    hash: Sha256
    # invalid UTF-8 sequences of the input replaced with U+FFFD (errors="replace"); None: a store built before
    # tokenmill counted them
    invalid_utf8_replaced: Count | None = None

    def __post_init__(self):
        t = self.tokenizer
        want = "uint16" if t.vocab_size <= 1 << 16 else "uint32"
        if self.dtype != want:
            raise ValueError(f"dtype {self.dtype} does not match vocab_size {t.vocab_size:,d} (stores use {want})")
        for name, v in (("eos_id", t.eos_id), ("bos_id", t.bos_id)):
            if v is not None and v >= t.vocab_size:
                raise ValueError(f"tokenizer.{name} {v:,d} is not below vocab_size {t.vocab_size:,d}")
        itemsize = 2 if self.dtype == "uint16" else 4
        for k, rec in enumerate(self.shards):
            if rec.name != shard_name(k):
                raise ValueError(f"shards[{k}] is named {rec.name!r}; shard {k} must be {shard_name(k)!r}")
            rec.check_sizes(itemsize)
        for field in ("documents", "tokens", "input_bytes"):
            total = sum(getattr(r, field) for r in self.shards)
            if total != getattr(self, field):
                raise ValueError(f"{field} is {getattr(self, field):,d} but the shards hold {total:,d}")
        if len(self.file_source) != len(self.files):
            raise ValueError(f"{len(self.files):,d} files but {len(self.file_source):,d} file_source entries")
        if self.file_source and max(self.file_source) >= len(self.sources):
            raise ValueError(f"file_source names source {max(self.file_source):,d}, there are {len(self.sources):,d}")


class Journal(Struct):
    """``build.json``: what a build was started with, so that a rerun resumes only the same build."""

    format: Literal["tokenmill.store.build"]
    build: dict[str, Any]
    build_fingerprint: Annotated[str, Meta(max_length=200)]


def _read_record(path: Path, schema) -> dict:
    """A store file (manifest, journal, shard record) read through the schema layer: the parsed
    dict, after every field was checked (a FormatError naming file, field and value otherwise)."""
    what = {Manifest: "store manifest", Journal: "store build journal", ShardRecord: "shard record"}[schema]

    def newer(raw):
        if schema is Manifest and isinstance(raw, dict):
            v = raw.get("version")
            if isinstance(v, int) and not isinstance(v, bool) and v > FORMAT_VERSION:
                raise FormatError(f"{path}: store format version {v} is newer than this tokenmill reads "
                                  f"(<= {FORMAT_VERSION}); upgrade tokenmill")

    raw, _ = load_json(path, schema, what=what, pre=newer,
                       hint="the file was modified or corrupted: rebuild the store" if schema is Manifest else "",
                       fix="rerun the store's build, which builds a damaged store again (or pass overwrite=True)"
                       if schema is Manifest else "write it again")
    return raw


def shard_name(k: int) -> str:
    return f"shard-{k:05d}"


def _test_hook(point: str, k: int) -> None:
    """Tests kill a build at an exact point: TOKENMILL_STORE_KILL=<point>:<shard>, e.g. ``renamed:1``."""
    want = os.environ.get("TOKENMILL_STORE_KILL")
    if want and want == f"{point}:{k}":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


# ==================================================================================================
# building
# ==================================================================================================
def special_id(tokenizer, names, given, what: str, needed: bool) -> int | None:
    if not needed:
        return None
    specials = dict(getattr(tokenizer, "special_tokens", {}) or {})
    if given is not None:
        from .._validate import check_int

        given = check_int(given, f"{what}_id", min=0, max=int(tokenizer.vocab_size) - 1)
        if specials and given not in specials.values():  # (a typo, 12800 for 128001: a word after every document)
            try:
                shown = repr(tokenizer.decode([given]))
            except (KeyError, TokenmillError):  # (an id that holds no token: cl100k's gaps)
                shown = "no token"
            warn(f"{what}_id={given} ({shown}) is none of the tokenizer's special tokens; it is stored as the "
                 f"{what.upper()} all the same (the special tokens' ids: "
                 f"{', '.join(f'{k} {v:,d}' for k, v in list(specials.items())[:6])}"
                 f"{' ...' if len(specials) > 6 else ''})")
        return given
    from ..tokenizer.formats.pretrained import roles_of

    declared = roles_of(tokenizer).get(f"{what}_token")  # (the model's own, where it declares one; else by name)
    if declared is not None and declared in specials:
        return int(specials[declared])
    for n in names:
        if n in specials:
            return int(specials[n])
    flag = "append_eos" if what == "eos" else "prepend_bos"
    cli = "--eos-id ID, or --no-eos" if what == "eos" else "--bos-id ID, or no --bos"
    names_of = list(map(repr, specials))
    listed = ", ".join(names_of[:12]) + (f" and {len(names_of) - 12:,d} more" if len(names_of) > 12 else "")
    raise ConfigError(f"{flag}=True but the tokenizer has no {what.upper()} special token of a known name "
                      f"({', '.join(names)}; it has: {listed or 'none'}); pass {what}_id=... or {flag}=False "
                      f"(CLI: {cli})")


def _describe_difference(old, new, where: str = "", out: list | None = None) -> str:
    """The first differences between two JSON values, by path: ``sources[0].mtimes_ns[2]: 1 before, 2 now``."""
    out = [] if out is None else out
    if len(out) >= 4:
        return "; ".join(out)
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            if old.get(k) != new.get(k):
                _describe_difference(old.get(k), new.get(k), f"{where}.{k}" if where else str(k), out)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            if a != b:
                _describe_difference(a, b, f"{where}[{i}]", out)
    elif isinstance(old, list) and isinstance(new, list) and where.endswith(".files"):
        before, now = set(old), set(new)  # a folder's files: which were added or removed
        gone = [x for x in old if x not in now]
        came = [x for x in new if x not in before]
        for verb, xs in (("added", came), ("removed", gone)):
            if xs:
                out.append(f"{where}: {len(xs)} {verb} ({', '.join(map(str, xs[:3]))}{', ...' if len(xs) > 3 else ''})")
    elif isinstance(old, list) and isinstance(new, list) and where.endswith((".mtimes_ns", ".sizes")):
        pass  # (the files added or removed are named under .files; their sizes and times say nothing more)
    elif isinstance(old, list) and isinstance(new, list) and where == "sources":
        # sources added or removed (their specs had been printed cut at 100 characters, before any difference)
        def label(spec) -> str:
            files = spec.get("files") if isinstance(spec, dict) else None
            if isinstance(files, list) and files:
                return str(files[0]) if len(files) == 1 else f"{files[0]} and {len(files) - 1:,d} more files"
            return str(spec.get("kind")) if isinstance(spec, dict) else repr(spec)[:60]

        gone = [label(x) for x in old if x not in new]
        came = [label(x) for x in new if x not in old]
        out.append(f"sources: {len(old)} before, {len(new)} now" + "".join(
            f"; {verb}: {', '.join(xs[:3])}{', ...' if len(xs) > 3 else ''}" for verb, xs in (("added", came),
                                                                                            ("removed", gone)) if xs))
    elif len(out) < 4:
        a, b = repr(old), repr(new)
        out.append(f"{where}: {a if len(a) < 100 else a[:97] + '...'} before, {b if len(b) < 100 else b[:97] + '...'} now")
    return "; ".join(out)


# ---- what a store folder holds --------------------------------------------------------------------
_STAGING_SUFFIX = ".tokenmill-build"


def staging_dir(out: Path) -> Path:
    """Where a build over an existing store writes the new one (a hidden sibling of ``out``): the
    old store stays untouched until the new one is complete and verified, then the two are swapped."""
    return out.parent / f".{out.name}{_STAGING_SUFFIX}"


def _old_dir(out: Path) -> Path:
    return out.parent / f".{out.name}.tokenmill-old"


def _manifest_shards(d: Path, names: dict) -> tuple[set[str], bool]:
    """``(shard names the manifest of folder d records, whether the manifest passed its checks)``. A valid
    manifest's names are exact; a damaged one's (still JSON, or not even that) are the names it still lists
    and the shards a build leaves: 0, 1, ... in a row, each with its three files."""
    try:
        return {s["name"] for s in _checked_manifest(d)["shards"]}, True
    except FormatError:
        try:
            raw = load_json(d / MANIFEST, None, what="store manifest")[0]
        except FormatError:
            raw = None
    shards = raw.get("shards") if isinstance(raw, dict) else None
    found = {s["name"] for s in shards if isinstance(s, dict) and isinstance(s.get("name"), str)} \
        if isinstance(shards, list) else set()
    k = 0
    while all(f"{shard_name(k)}.{part}" in names for part in _PARTS):
        found.add(shard_name(k))
        k += 1
    return found, False


def _classify(d: Path) -> tuple[str, list[Path]]:
    """``(state, files tokenmill made)`` of folder ``d``; state is "missing", "empty", "partial"
    (a build journal) or "store" (a manifest). Files are ours only when recorded by a store's manifest
    (its shards' files; see :func:`_manifest_shards` for one that cannot be read) or made by a build whose
    journal is there (every shard file), or named as tokenmill names its temporaries; anything else
    makes the folder a user's (a file named like a shard that the manifest does not record: a user's
    copy), which is refused (ConfigError), never removed."""
    if not d.exists():
        return "missing", []
    if not d.is_dir():
        raise ConfigError(f"out_dir {str(d)!r} exists and is not a folder")
    names = {p.name: p for p in d.iterdir()}
    # a manifest or journal is tokenmill's where its first bytes say so; a manifest also where the folder holds a
    # store's first shard whole (damaged past its first bytes, beside its shards: the shards it cannot record are
    # refused below). A journal is written whole or not at all, and makes every shard-named file tokenmill's: only
    # its first bytes say it is one (a build tool's build.json beside a store's shards had been taken for one, and a
    # user's shard-named copy removed with it). A web app's manifest.json or a build tool's build.json in a user's
    # folder had been taken for a damaged store, replaced or removed.
    shard0 = all(f"{shard_name(0)}.{part}" in names for part in _PARTS)
    journal = BUILD_STATE in names and _our_record(names[BUILD_STATE], FORMAT_NAME + ".build", False)
    manifest = MANIFEST in names and _our_record(names[MANIFEST], FORMAT_NAME, shard0)
    recorded, valid = _manifest_shards(d, names) if manifest and not journal else (set(), False)
    ours, other = [], []
    for n, p in names.items():
        m = _SHARD_RE.match(n)
        if (n == MANIFEST and manifest) or (n == BUILD_STATE and journal) or (n.startswith(".") and n.endswith(TMP_SUFFIX)):
            ours.append(p)
        elif m and (journal or n.rpartition(".")[0] in recorded) and p.is_file() and not p.is_symlink():
            ours.append(p)
        else:
            other.append(p)
    if other:
        odd = sorted(p.name for p in other if _SHARD_RE.match(p.name) and (p.is_symlink() or not p.is_file()))
        if odd:
            raise ConfigError(f"out_dir {str(d)!r} holds shard names that are not regular files ({', '.join(odd[:5])}: "
                              "a link, a folder): tokenmill writes and removes only its own regular files; move them "
                              "out of the folder, or choose another out_dir")
        unrecorded = sorted(p.name for p in other if _SHARD_RE.match(p.name))
        if manifest and unrecorded:
            past = valid and all(int(_SHARD_RE.match(n).group(1)) >= len(recorded) for n in unrecorded)
            raise ConfigError(
                f"out_dir {str(d)!r} holds files named like a token store's shards that "
                + (f"its {MANIFEST} does not record" if valid else
                   f"its damaged {MANIFEST} cannot tell from a user's (they are not among the shards 0, 1, ... that "
                   "are there whole)")
                + f" ({', '.join(unrecorded[:5])}): not tokenmill's to remove or replace; move them out of the folder, "
                "or choose another out_dir"
                + (" (shards past the last one the manifest records: a build of an earlier tokenmill killed while "
                   "tidying up leaves such files; remove them if so)" if past else ""))
        if all(_SHARD_RE.match(p.name) for p in other):  # a store's shards whose manifest is gone
            raise ConfigError(f"out_dir {str(d)!r} holds the shard files of a token store but no {MANIFEST} (nor a "
                              f"build journal): a store whose manifest was removed, which nothing can verify; "
                              "tokenmill removes only files a manifest or journal records, so remove the folder "
                              "yourself and build again, or build into another folder")
        theirs = ", ".join(sorted(p.name for p in other)[:5])
        if manifest and valid:  # (a store, and a file put in its folder since: a plot, a report)
            raise ConfigError(f"out_dir {str(d)!r} is a token store holding files that are not part of it ({theirs}); "
                              "move them out of the store's folder (tokenmill removes only files it made and "
                              "recorded)")
        raise ConfigError(f"out_dir {str(d)!r} holds files that are not part of a token store ({theirs}); choose an "
                          "empty or new folder (tokenmill removes only files it made and recorded)")
    state = "store" if manifest else "partial" if journal else "empty"
    return state, ours


def outside_store(path, store, what: str, instead: str = "a path") -> None:
    """Refuse an output ``path`` inside the folder of ``store`` (a store, a view of one, or None): a store's folder
    holds its files alone (a build run there again finds a file that is no store's, a plot, a report, and stops).
    ``what`` names the output in the message, ``instead`` what to pass."""
    folder = getattr(getattr(store, "store", store), "path", None)
    if not (isinstance(folder, Path) and folder.is_dir()):
        return
    # (the folder's links followed before '..' is taken: abspath had made "link/../p.png" a path outside the store
    # where the link led inside it; a link as the file itself is the output's own check, resolve_output's)
    where = Path(os.path.realpath(os.path.dirname(os.path.join(os.getcwd(), os.fspath(path)))))
    inside = folder.resolve()
    if where == inside or inside in where.parents:
        raise ConfigError(f"{what} is inside the store's folder {str(folder)!r}, which holds the store's files alone "
                          f"(a build there again would stop at it); pass {instead} in another folder")


def _our_record(p: Path, fmt: str, beside_shards: bool) -> bool:
    """Whether the file ``p`` is a record tokenmill wrote (a manifest, a build journal): a regular file whose first
    bytes name the format ``fmt``, as tokenmill writes them, or any regular file ``beside_shards`` (a store's shard
    files: a record damaged past its first bytes); a user's file of the same name is neither."""
    if p.is_symlink() or not p.is_file():
        return False
    if beside_shards:
        return True
    try:
        with open(p, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and f'"format": "{fmt}"'.encode() in head


def _checked_manifest(d: Path) -> dict:
    """The manifest of folder ``d`` through the schema layer, its content hash checked (a FormatError else)."""
    m = _read_record(d / MANIFEST, Manifest)
    if m["hash"] != canonical_hash({k: v for k, v in m.items() if k != "hash"}):
        raise FormatError(f"{d / MANIFEST}: content hash mismatch; the manifest was modified or corrupted")
    return m


def _file_ident(p: Path) -> tuple[int, int, int] | None:
    """``(inode, mtime, size)`` of the file at ``p`` (None where there is none): whether it was replaced."""
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _clear(files: list[Path]) -> None:
    for p in files:
        p.unlink(missing_ok=True)


def _recorded_fingerprint(d: Path, name: str) -> tuple[str | None, dict]:
    """The build fingerprint and arguments recorded in ``d/name`` (manifest or journal); (None, {})
    when the file is not a valid record (it is then rebuilt, never trusted)."""
    try:
        raw = _read_record(d / name, Manifest if name == MANIFEST else Journal)
    except FormatError:
        return None, {}
    return raw["build_fingerprint"], raw["build"]


# what a source's spec records of its input's identity, by kind: a rerun over other values (a touched or
# edited file, a dataset with a new fingerprint or length, an iterable of another length) is the same build
# over changed input, which the input hashes of the store's shards tell (a touch changes nothing)
_INPUT_IDENTITY = {"files": ("sizes", "mtimes_ns"), "hf_dataset": ("fingerprint", "len"), "iterable": ("len",)}


def _without_input_identity(args: dict) -> dict:
    """A build's arguments without what its sources record of their input's identity (:data:`_INPUT_IDENTITY`):
    those are no arguments, the input hashes tell a change."""
    sources = args.get("sources")
    if not isinstance(sources, list):
        return args
    return {**args, "sources": [{k: v for k, v in spec.items() if k not in _INPUT_IDENTITY.get(spec.get("kind"), ())}
                                if isinstance(spec, dict) else spec for spec in sources]}


def _comparable(args: dict) -> dict:
    """A build's arguments as two runs of one build compare them: without their inputs' identity
    (:func:`_without_input_identity`), and with the files of a file source absolute (a build recorded before files
    were recorded absolute holds them as typed, relative to where it ran: taken as relative to here)."""
    args = _without_input_identity(args)
    sources = args.get("sources")
    if not isinstance(sources, list):
        return args
    return {**args, "sources": [
        {**spec, "files": [os.path.abspath(f) if isinstance(f, str) else f for f in spec["files"]]}
        if isinstance(spec, dict) and spec.get("kind") == "files" and isinstance(spec.get("files"), list) else spec
        for spec in sources]}


def _prepare(out: Path, args: dict, fingerprint: str, overwrite: bool) -> tuple[str, Path]:
    """What to do with ``out``: ``("new" | "resume" | "done" | "replace", folder to build in)``."""
    state, ours = _classify(out)
    if state in ("missing", "empty"):
        _clear(ours)  # our dead temporaries
        return "new", out
    name = MANIFEST if state == "store" else BUILD_STATE
    fp, old_args = _recorded_fingerprint(out, name)
    if fp is None and state == "store":  # a damaged manifest: a damaged store, built again beside it
        _say(f"tokenmill: the store at {out} is damaged (its {MANIFEST} is not valid); building it again in "
             f"{staging_dir(out)} (the damaged store stays as it is until the new one is verified)")
        return "replace", staging_dir(out)
    if fp == fingerprint or (fp is not None and _comparable(old_args) == _comparable(args)):
        # the same arguments (the input files' sizes or times may differ: the input hashes of the store's
        # shards then say what changed, and only that is encoded again)
        return ("done" if state == "store" else "resume"), out
    if state == "partial":
        if overwrite or not any(_SHARD_RE.match(p.name) for p in ours):
            _clear(ours)  # an unfinished build (one that wrote no shard never blocks the next)
            return "new", out
    elif overwrite:
        return "replace", staging_dir(out)
    what = "store" if state == "store" else "partial build"
    why = _describe_difference(old_args, args) if fp is not None else f"its {name} is not valid"
    raise ConfigError(f"{out} already holds a {what} made with other arguments ({why}); pass "
                      "overwrite=True (CLI: --overwrite) to replace it, or choose another out_dir")


def _prepare_staging(stage: Path, fingerprint: str) -> str:
    """``"new"`` or ``"resume"``: a staging folder of an earlier replacement with the same arguments
    is resumed; anything else tokenmill left there is removed."""
    state, ours = _classify(stage)
    if state == "partial" and _recorded_fingerprint(stage, BUILD_STATE)[0] == fingerprint:
        return "resume"
    _clear(ours)
    return "new"


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system or file system cannot."""
    if sys.platform != "linux":
        return False
    import ctypes
    import errno

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _not_the_working_folder(out: Path) -> None:
    """Refuse to replace the store the process runs in (or below): the swap would leave the working folder
    a deleted one (a shell in it too), and a staging folder of ``.`` lay inside the store."""
    cwd = Path(os.path.realpath(os.getcwd()))
    if cwd == out or out in cwd.parents:
        raise ConfigError(f"the store at {out} must be built again (replaced), but it is the current folder (or holds "
                          "it): run the build from outside it (cd ..), naming the store by its path")


def _replace_store(stage: Path, out: Path) -> None:
    """Put the verified store in ``stage`` at ``out`` and remove the old one."""
    _test_hook("swap", 0)
    if _exchange(stage, out):
        old = stage
    else:  # two renames: a kill between them leaves the old store at _old_dir(out) (open() says so)
        old = _old_dir(out)
        _clear(_classify(old)[1])
        if old.exists():
            old.rmdir()
        os.rename(out, old)
        os.rename(stage, out)
    sync_folder(out.parent)  # (the swap survives a power loss before the old store goes)
    _test_hook("swapped", 0)
    _clear(_classify(old)[1])
    old.rmdir()


def store_files(source) -> list[Path]:
    """The files a token source reads (a store's manifest and shard files, a view's store's, a
    Megatron pair): outputs refuse to be written onto any of them."""
    root = getattr(source, "store", source)
    if isinstance(root, TokenStore):
        return [root.path / MANIFEST] + [sh.path(part) for sh in root._shards for part in _PARTS]
    return list(getattr(root, "_files", ()))


@interruptible
def build(out_dir, sources, tokenizer, *, workers: int | None = None, engine: str = "local",
          append_eos: bool = True, prepend_bos: bool = False, shard_bytes: int = DEFAULT_SHARD_BYTES,
          errors: str = "strict", field: str = "text", format: str = "auto",
          split_lines: bool = False, separator: str | None = None, eos_id: int | None = None,
          bos_id: int | None = None, special_text: str = "error", overwrite: bool = False,
          progress: bool | None = None, ray_address: str | None = None) -> "TokenStore":
    """Encode ``sources`` with ``tokenizer`` into a store at ``out_dir``; see :meth:`TokenStore.build`."""
    from .._validate import check_int

    out_dir = _out_dir(out_dir)
    from ..tokenizer.adapters import tokenizer_with

    # a path (tokenizer.json, a tokenmill file, a rank file...), an HF, transformers, tiktoken or SentencePiece
    # object: converted as every stage's tokenizer is (or refused, naming what it is)
    tokenizer = tokenizer_with(tokenizer, ("encode_batch", "vocab_size", "special_tokens"))
    shard_bytes = check_int(shard_bytes, "shard_bytes", min=1, max=BIG)
    if progress is None:  # (bars where someone watches: a terminal, as train_bpe; not frames in a pipe or a log)
        import sys

        progress = sys.stderr.isatty()
    for name, flag in (("append_eos", append_eos), ("prepend_bos", prepend_bos), ("overwrite", overwrite),
                       ("progress", progress), ("split_lines", split_lines)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ConfigError(f"{name}={flag!r} must be True or False (got a {type(flag).__name__})")
    if special_text not in ("error", "plain", "special"):
        raise ConfigError(f"special_text={special_text!r}: use 'error' (text spelling a special token fails), "
                          "'plain' (encode it as ordinary text) or 'special' (encode it as the special token)")
    workers = engines.default_workers() if workers is None else workers
    workers = check_int(workers, "workers", min=1, max=1 << 16)
    if engine not in engines.ENGINES:
        raise ConfigError(f"engine={engine!r} is not one of {', '.join(map(repr, engines.ENGINES))}")
    if ray_address is not None and engine != "ray":  # (it had been ignored: a local build where a cluster was meant)
        raise ConfigError(f"ray_address={ray_address!r} is for engine='ray' (CLI: --engine ray), and the engine is "
                          f"{engine!r}; pass both, or leave the address out")
    srcs = as_sources(sources, field=field, format=format, split_lines=bool(split_lines), separator=separator,
                      errors=errors)
    vocab = check_int(tokenizer.vocab_size, "the tokenizer's vocab_size", min=1, max=2**31)
    opts = engines.EncodeOptions(
        dtype="uint16" if vocab <= 1 << 16 else "uint32", vocab_size=vocab,
        eos_id=special_id(tokenizer, EOS_NAMES, eos_id, "eos", bool(append_eos)),
        bos_id=special_id(tokenizer, BOS_NAMES, bos_id, "bos", bool(prepend_bos)), special_text=special_text)
    args = {"sources": [s.spec() for s in srcs], "tokenizer_hash": None,
            "vocab_size": vocab, "dtype": opts.dtype, "eos_id": opts.eos_id, "bos_id": opts.bos_id,
            "shard_bytes": int(shard_bytes), "special_text": special_text}
    # the folder itself, links resolved: a store reached through a symbolic link is replaced where it is (the
    # link was swapped with the new store and the old one's files deleted through it), and "." is a folder
    # with a parent to stage beside
    out = Path(os.path.realpath(out_dir))  # (see _out_dir)
    if not out.exists():  # a new store: its folder is made (and the lock's beside it) where it can be
        check_writable_folder(out, "the store", os.fspath(out_dir))
    # one writer at a time (another process's build of the same folder, e.g. every rank of a job calling
    # build: the second waits, then finds the store built); its files were taken for this one's before
    with exclusive(out, _say):
        return _build_at(out, srcs, tokenizer, opts, args, int(shard_bytes), bool(overwrite), bool(progress),
                         engine, workers, ray_address)


def _build_at(out: Path, srcs, tokenizer, opts, args: dict, shard_bytes: int, overwrite: bool, progress: bool,
              engine: str, workers: int, ray_address) -> "TokenStore":
    """:func:`build` at ``out`` (links resolved), under its lock."""
    state, ours = _classify(out)
    if state in ("missing", "empty"):
        # a new build: nothing on disk to compare the fingerprint with, so the tokenizer's content hash
        # (to_dict of a 50k vocabulary: ~25 ms, once per tokenizer object) is taken when the first shard is
        # written, while the worker encodes the next one (see _Builder.begin), not before any encoding
        _clear(ours)  # our dead temporaries
        mode, work = "new", out
    else:
        args["tokenizer_hash"] = engines.tokenizer_key(tokenizer)
        mode, work = _prepare(out, args, canonical_hash(args), bool(overwrite))
    builder = _Builder(work, srcs, tokenizer, opts, int(shard_bytes), bool(progress))
    if mode == "done":
        # a store whose files no longer match their sha256 (edited, truncated, removed) is never handed back
        # as the build's result: it is built again (before its input is read, so a generator is read once)
        try:
            store = TokenStore.open(out)
            store.verify()
            damaged = ""
        except FormatError as e:
            damaged = str(e)
        if damaged:
            _say(f"tokenmill: the store at {out} is damaged ({damaged}); building it again in {staging_dir(out)} "
                 "(the damaged store stays as it is until the new one is verified)")
            mode, work = "replace", staging_dir(out)
        else:
            changed = builder.input_changes(store.manifest["shards"])
            if not changed:
                _tidy(out, store.num_shards)  # a build killed after writing its manifest
                stage = staging_dir(out)
                if stage.exists():  # the old store of a replacement killed after the swap
                    _clear(_classify(stage)[1])
                    stage.rmdir()
                return store
            once = [s.describe() for s in srcs if s.one_shot]
            if once:  # the check has read part of it: a build from what is left would lose its start
                raise InputError(
                    f"the input of {out} changed since it was built ({changed}), and {', '.join(once)} is an "
                    "iterator (a generator) that checking it has partly consumed, so the store cannot be built "
                    f"again from it; {out} is unchanged. Pass the documents as a list (or any iterable that can "
                    "be read twice), or build into a new folder")
            _say(f"tokenmill: the input of {out} changed since it was built ({changed}); building the store "
                 f"again in {staging_dir(out)} (the current store stays as it is until the new one is verified)")
            mode, work = "replace", staging_dir(out)
        builder = _Builder(work, srcs, tokenizer, opts, int(shard_bytes), bool(progress))
    if mode == "replace":
        _not_the_working_folder(out)
        mode = _prepare_staging(work, canonical_hash(args))

    check_writable_folder(work, "the store", os.fspath(out))  # (said here, before any encoding)
    if not work.is_dir():
        work.mkdir(parents=True)
        sync_folder(work.parent)
    remove_stale_temporaries(work)

    def begin() -> str:
        """The build's fingerprint, and the journal of a new build (written before its first shard file)."""
        if args["tokenizer_hash"] is None:
            args["tokenizer_hash"] = engines.tokenizer_key(tokenizer)
        fingerprint = canonical_hash(args)
        if mode == "new":
            _write_json(work / BUILD_STATE, {"format": FORMAT_NAME + ".build", "build": args,
                                             "build_fingerprint": fingerprint})
        return fingerprint

    if args["tokenizer_hash"] is not None:  # an existing folder: resumed or replaced from the start
        builder.fingerprint = begin()
    builder.begin, builder.specs = begin, args["sources"]
    try:
        builder.run(engine, workers, ray_address)
    except BaseException as e:
        builder.flush.close()
        # failed before its first shard: the journal still marks the folder as an interrupted build (what
        # open() then reports)
        if isinstance(e, Exception) and builder.fingerprint is None:
            with contextlib.suppress(Exception):
                builder.started()
        raise
    replaced = _finish(work, srcs, args, builder.started(), opts, builder.records, builder.flush)
    if builder.reused and (progress or os.environ.get("TOKENMILL_QUIET", "") in ("", "0")):
        # (a resumed build's counts: what was kept, what was encoded now; said without progress bars too, as
        # the CLI writing to a log file has none, unless it was asked to be quiet)
        kept = [builder.records[k] for k in builder.reused]
        _say(f"tokenmill: resumed an interrupted build: {len(kept):,d} of {counted(len(builder.records), 'shard')} "
             f"({counted(sum(r['documents'] for r in kept), 'document')}, "
             f"{counted(sum(r['tokens'] for r in kept), 'token')}) "
             f"were finished by the earlier run and kept, their input checked; "
             f"{len(builder.records) - len(kept):,d} encoded now")
    if replaced.count:
        _say(f"tokenmill: {replaced.note()}")
    blank = sum(s.blank_lines[0] for s in srcs if isinstance(getattr(s, "blank_lines", None), list))
    if blank:
        _say("tokenmill: " + blank_note(blank, "their line numbers are kept as the documents' rows"))
    if opts.special_text == "special" and opts.eos_id is not None:
        _say_doubled_eos(TokenStore.open(work), opts)
    if work != out:  # a replacement: verify every byte of the new store, then swap it in
        TokenStore.open(work).verify(progress=bool(progress))
        try:
            _replace_store(work, out)
        except OSError as e:
            raise WriteError(f"cannot put the new store {work} in place of {out}: {e.strerror or e}; {out} "
                             "is unchanged and the new store is complete in the staging folder") from e
    return TokenStore.open(out)


def _out_dir(out_dir) -> str:
    """A store's output folder as given (a str), checked: a path, not empty."""
    return nonempty_path(fs_path(out_dir, "out_dir is {kind}; pass the store's folder (a str or a path)"), "out_dir",
                         "pass the store's folder")


def _say_doubled_eos(store: "TokenStore", opts) -> None:
    """Warn where documents end with two EOS: their text ended with EOS's own text, which ``special_text='special'``
    reads as the token, and the build appended another (each such document then trains an EOS to predict EOS).
    One gather of every document's last two ids (the store was just written: its pages are in memory)."""
    eos, text = int(opts.eos_id), 1 + (opts.bos_id is not None)
    n = 0
    for sh in store.shards:
        o = sh.offsets
        ends = o[1:][np.diff(o) > text]  # (a document of some text: more than its BOS and EOS)
        t = sh.tokens
        n += int(((t[ends - 1] == eos) & (t[ends - 2] == eos)).sum())
    if n:
        warn(f"{store.path}: {counted(n, 'document ends', 'documents end')} with two EOS (id {eos}): the text ends "
             "with the EOS token's own text, which special_text='special' reads as the token, and the build appended another; "
             "pass append_eos=False (CLI: --no-eos) where the texts end with their own EOS")


def _doc_where(name: str, row: int) -> str:
    """Where a document is, as the readers' errors say it: a JSONL record by its line (``data.jsonl:3``, from
    1, as an editor counts), any other by its row (from 0, as ``store.provenance`` and Python count)."""
    if format_of(Path(name)) == "jsonl":
        return f"{name}:{row + 1}: document on line {row + 1:,d}"
    return f"{name}: document at row {row:,d}"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _write_json(path: Path, obj) -> None:
    try:
        write_json_atomic(path, obj)
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror or e}; what the folder held before is unchanged") from e


def _little(arr: np.ndarray) -> np.ndarray:
    """``arr`` C-contiguous and little-endian (a copy only where it is not)."""
    data = np.ascontiguousarray(arr)
    return data.astype(data.dtype.newbyteorder("<")) if data.dtype.byteorder == ">" else data


def _write_array(path: Path, arr: np.ndarray, flush: LaterFlush | None = None) -> tuple[int, str]:
    """Write ``arr`` (little-endian) atomically; return its size and sha256. ``flush``: flushed to the disk
    there (in the background) rather than before its rename."""
    data = _little(arr)
    view = memoryview(data.reshape(-1)).cast("B") if data.size else memoryview(b"")  # (0, 2) meta: no bytes
    try:
        with atomic_path(path, durable=True if flush is None else flush) as tmp:
            with open(tmp, "wb") as f:
                f.write(view)
    except OSError as e:
        raise _write_error(path, e) from e
    return len(view), "sha256:" + hashlib.sha256(view).hexdigest()


def _write_error(path: Path, e: OSError) -> WriteError:
    """The error of a shard file that could not be written (what was there is unchanged). Written into the staging
    folder of a replacement, it names that folder: what holds the disk's space until a rerun finishes or it is
    removed (a user giving up the replacement had no word of it)."""
    folder = Path(path).parent
    staged = folder.name.startswith(".") and folder.name.endswith(_STAGING_SUFFIX)
    where = (f"; the new store is staged in {folder} beside the old one, which is whole: rerun to go on, or remove "
             "that folder to give the replacement up" if staged else "")
    return WriteError(f"cannot write {path}: {e.strerror or e}; what the folder held before is unchanged "
                      f"(free space or fix permissions, then rerun: finished shards are kept){where}")


def input_digest(documents: list[bytes]) -> str:
    """``sha256:<hex>`` of a shard's documents (their UTF-8 bytes, lone surrogates as 'surrogatepass' writes
    them): the lengths as int64 little-endian, then the bytes of all documents back to back (so a document
    boundary that moves changes the digest too). The definition; a build takes it in pieces
    (``_ShardInput.done``)."""
    h = hashlib.sha256(np.fromiter(map(len, documents), "<i8", len(documents)).tobytes())
    h.update(b"".join(documents))
    return "sha256:" + h.hexdigest()


class _ShardInput:
    """The documents of the shard being cut (``_Builder._cut``), gathered in pieces of batches; those not
    handed out yet as a part of the shard (``take_part``) in ``unsent``: ``(texts, data, sizes, utf8)`` a piece,
    ``texts`` a list of strs or None (a piece read as :class:`~tokenmill.data.readers.Utf8Docs`), ``data`` the
    documents' UTF-8 back to back, ``utf8`` whether that is well-formed (not where a str held a lone
    surrogate: 'surrogatepass' bytes, which the encoder does not read). ``bytes_in``: jobs go to the encoder as
    their UTF-8 where it is well-formed (a tokenmill ``Tokenizer`` encodes those bytes), else as strs."""

    def __init__(self, bytes_in: bool = True):
        self.bytes_in = bytes_in
        self.unsent: list[tuple] = []
        self.unsent_size = 0
        self.count = 0  # documents
        self.files: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []
        self.data: list = []
        self.size = 0

    def add(self, texts: list[str] | None, file: int, rows: np.ndarray, sizes: np.ndarray, data, utf8: bool) -> None:
        n = len(sizes)
        self.unsent.append((texts, data, sizes, utf8))
        self.count += n
        self.files.append(np.full(n, file, np.int64))
        self.rows.append(rows)
        self.sizes.append(sizes)
        self.data.append(data)
        size = int(sizes.sum())
        self.size += size
        self.unsent_size += size

    def take_part(self) -> tuple[int, list[str] | Utf8Docs]:
        """``(index of its first document in the shard, documents)`` of the documents added since the last part:
        their UTF-8 as one :class:`~tokenmill.data.readers.Utf8Docs` (what the input hash reads, handed to the
        encoder as it is: no str encoded again), or a list of strs where a piece's bytes are not well-formed."""
        pieces = self.unsent
        count = sum(len(sizes) for _, _, sizes, _ in pieces)
        self.unsent, self.unsent_size = [], 0
        first = self.count - count
        if not pieces:
            return first, []
        if self.bytes_in and all(utf8 for *_, utf8 in pieces):
            data = pieces[0][1] if len(pieces) == 1 else np.concatenate([np.frombuffer(d, np.uint8) for _, d, _, _ in pieces])
            return first, Utf8Docs(data, offsets_of(np.concatenate([sizes for _, _, sizes, _ in pieces])))
        texts: list[str] = []
        for piece_texts, data, sizes, _ in pieces:
            if piece_texts is None:  # (well-formed bytes beside a piece that is not)
                piece_texts = Utf8Docs(np.frombuffer(data, np.uint8), offsets_of(sizes)).texts()
            texts.extend(piece_texts)
        return first, texts

    def done(self) -> tuple[int, list[str] | Utf8Docs, np.ndarray, int, str]:
        """``(first, documents, meta, input bytes, input hash)``: the documents not handed out as parts (the first
        of them the shard's document ``first``), the meta and input size of all of them, and the hash as
        :func:`input_digest` takes it, in pieces."""
        first, texts = self.take_part()
        meta = np.empty((self.count, 2), np.int64)
        if self.count:
            meta[:, 0] = np.concatenate(self.files)
            meta[:, 1] = np.concatenate(self.rows)
        sizes = np.concatenate(self.sizes) if self.sizes else np.zeros(0, np.int64)
        h = hashlib.sha256(sizes.astype("<i8").tobytes())
        for piece in self.data:
            h.update(piece)
        return first, texts, meta, self.size, "sha256:" + h.hexdigest()


def _batch_bytes(texts: list, src, f: int, rows) -> tuple[np.ndarray, Any, np.ndarray, bool]:
    """``(sizes, data, offsets, utf8)`` of a batch's documents: each one's UTF-8 size (int64), and their UTF-8
    back to back (document ``i`` is ``data[offsets[i]:offsets[i + 1]]``), what the input hash covers, and
    whether that is well-formed. :class:`~tokenmill.data.readers.Utf8Docs` as they are; strs: CPython's own
    UTF-8 of each, read in one pass (``texts_utf8``; made and kept with a non-ASCII str); a batch holding a
    lone surrogate: as 'surrogatepass' writes it, document by document (not well-formed)."""
    from ..tokenizer.encoding import texts_utf8

    if isinstance(texts, Utf8Docs):
        return np.diff(texts.offsets), texts.data, texts.offsets, True
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), -1) if set(map(type, texts)) - {str} else -1
    if bad >= 0:
        raise InputError(f"{_doc_where(src.files()[f], list(rows)[bad])} is a {type(texts[bad]).__name__}, "
                         "not a str; a source yields the text of each document")
    joined = texts_utf8(texts)
    if joined is not None:
        data, offs = joined
        return np.diff(offs), data, offs, True
    raw = [t.encode("utf-8", "surrogatepass") for t in texts]
    sizes = np.fromiter(map(len, raw), np.int64, len(raw))
    return sizes, b"".join(raw), offsets_of(sizes), False


def _takes_utf8(tokenizer) -> bool:
    """Whether ``engines.encode_job`` encodes ``tokenizer``'s jobs from their UTF-8 (a tokenmill ``Tokenizer``);
    any other is given strs, which the readers then make as before."""
    from ..tokenizer.model import Tokenizer

    return isinstance(tokenizer, Tokenizer)


class _Builder:
    def __init__(self, out: Path, srcs: list[Source], tokenizer, opts, shard_bytes: int, progress: bool):
        self.out, self.srcs, self.tok, self.opts = out, srcs, tokenizer, opts
        self.shard_bytes, self.progress = shard_bytes, progress
        self.files: list[str] = []
        self.file_base: list[int] = []
        for s in srcs:
            self.file_base.append(len(self.files))
            self.files.extend(s.files())
        self.pending_meta: dict[int, tuple] = {}
        self.records: list[dict] = []
        self.rebuilt: list[int] = []
        self.reused: list[int] = []  # shards an interrupted build finished, their input checked, kept as they are
        # documents read as their UTF-8 and encoded from it (a tokenmill Tokenizer), or as strs (any other)
        self.bytes_in = _takes_utf8(tokenizer)
        self.begin: Callable[[], str] | None = None  # the build's fingerprint (and journal): see build()
        self.fingerprint: str | None = None
        # the shard files reach the disk in the background, before the manifest (see _finish)
        self.flush = LaterFlush()

    def started(self) -> str:
        """The build's fingerprint, the journal of a new build written first (once, before any shard file)."""
        if self.fingerprint is None:
            self.fingerprint = self.begin()
        return self.fingerprint

    # documents in source order, cut into shards; each shard's input hashed as it is read
    def _cut(self, part_bytes: int = 0) -> Iterator[tuple[int, int, list[str], np.ndarray | None, int, str]]:
        """``(shard, first, texts, meta, input bytes, input hash)`` of every shard, in order. The hash is
        :func:`input_digest` of the shard's documents: what a resumed build compares to prove a
        finished shard was made from the same input. With ``part_bytes``, each time that many bytes of
        the shard being cut are read, its documents read so far come first as a part, ``(shard, first,
        texts, None, 0, "")`` (``first``: the index of its first document in the shard), the last one
        too, and the shard's own tuple then holds no texts: a worker starts on a shard's first megabyte
        while the rest is read, and on its last while it is hashed (the shard boundaries are the same).
        The sources are read in batches
        (``Source.batches``): a batch's UTF-8 sizes, bytes and cuts are worked out by array operations,
        not per document (57,007 JSONL records: ~2.5 us a record less on the calling thread)."""
        k, shard = 0, _ShardInput(self.bytes_in)
        for si, src in enumerate(self.srcs):
            base, count = self.file_base[si], 0
            for texts, f, rows in (src.utf8_batches() if self.bytes_in else src.batches()):
                n = len(texts)
                count += n
                sizes, data, offs, utf8 = _batch_bytes(texts, src, f, rows)
                strs = None if isinstance(texts, Utf8Docs) else texts
                rows = np.asarray(rows, np.int64)
                lo = 0
                while lo < n:  # a shard (or a part) ends with the document that brings it to its size
                    # (offs[1:]: the batch's running sizes)
                    room = self.shard_bytes - shard.size
                    if part_bytes:
                        room = min(room, part_bytes - shard.unsent_size)
                    hi = int(np.searchsorted(offs[1:], offs[lo] + room, side="left"))
                    end = min(hi + 1, n)
                    shard.add(None if strs is None else strs[lo:end], base + f, rows[lo:end], sizes[lo:end],
                              data[offs[lo] : offs[end]], utf8)
                    if hi < n:
                        if shard.size >= self.shard_bytes:
                            if part_bytes:  # its last part first (encoded while the shard is hashed)
                                yield (k, *shard.take_part(), None, 0, "")
                            yield (k, *shard.done())
                            k, shard = k + 1, _ShardInput(self.bytes_in)
                        else:
                            yield (k, *shard.take_part(), None, 0, "")
                    lo = end
            if count == 0:
                raise InputError(f"source {si} ({src.describe()}) holds no documents; remove it or check the "
                                 "path, field and split options")
        if shard.count or k == 0:
            if part_bytes and shard.unsent:
                yield (k, *shard.take_part(), None, 0, "")
            yield (k, *shard.done())

    def _jobs(self) -> Iterator[tuple[tuple[int, int, bool], list[str] | None]]:
        """The encoding jobs, ``((shard, first document, last of its shard), texts)``: each shard's parts
        (``_cut``: about a megabyte each, handed out as they are read), then the rest of it (None: nothing
        left, or a finished shard, not encoded again). The parts of a shard that an earlier run may have
        finished (its record is there) wait until its input is known."""
        held: list = []  # the parts of the shard being cut, kept back
        for k, first, texts, meta, size, digest in self._cut(_PART_BYTES):
            if meta is None:
                if not held and not (self.out / f"{shard_name(k)}.json").exists():
                    yield (k, first, False), texts
                else:
                    held.append(((k, first, False), texts))
                continue
            rec = self._finished(k, meta, size, digest)
            self.records.append(rec)
            if rec is not None:
                self.reused.append(k)
                yield (k, 0, True), None
            else:
                self.pending_meta[k] = (meta, size, digest)
                yield from held
                yield (k, first, True), texts or None
            held = []

    @staticmethod
    def _same_input(rec: dict, meta: np.ndarray, size: int, digest: str) -> str:
        """Why shard ``rec`` was not made from this input ("" when it was)."""
        if rec.get("documents") != len(meta) or rec.get("input_bytes") != size:
            return (f"it held {rec.get('documents'):,d} documents ({rec.get('input_bytes'):,d} bytes), the input "
                    f"now gives {len(meta):,d} ({size:,d} bytes)")
        if rec.get("input_sha256") not in (None, digest):
            return "its documents' bytes differ (same count and size)"
        return ""

    def _same_meta(self, k: int, meta: np.ndarray) -> bool:
        """Whether shard ``k``'s ``.meta`` (its sha256 checked by the caller) records ``meta``'s files and rows."""
        stored = np.fromfile(self.out / f"{shard_name(k)}.meta", dtype="<i8").reshape(-1, 2)
        return np.array_equal(stored, meta)

    def input_changes(self, records: list[dict]) -> str:
        """How the input differs from what a finished store's ``records`` were built from ("" when it
        is the same): the input is read and hashed, never encoded."""
        n = 0
        for k, _first, _texts, meta, size, digest in self._cut():
            n += 1
            if k >= len(records):
                return f"it now gives more than {len(records):,d} shards"
            why = self._same_input(records[k], meta, size, digest)
            if why:
                return f"shard {k}: {why}"
            if records[k].get("input_sha256") is None:  # a store from before input hashes: as before
                return ""
            # the same documents' bytes from other files or rows (lines moved, blank lines added, documents
            # moved from one file to the next): the tokens stand, but each document's provenance would not
            if not self._same_meta(k, meta):
                return f"shard {k}: its documents come from other files or rows now"
        return "" if n == len(records) else f"it now gives {n:,d} shards, the store has {len(records):,d}"

    def _finished(self, k: int, meta: np.ndarray, size: int, digest: str) -> dict | None:
        """The record of shard ``k`` when an earlier run finished it from this very input (its files
        intact), else None: then it is encoded (again), and a changed input is reported."""
        rec_path = self.out / f"{shard_name(k)}.json"
        if not rec_path.exists():
            return None
        try:
            rec = _read_record(rec_path, ShardRecord)
            check(rec, ShardRecord, what=str(rec_path)).check_sizes(np.dtype(self.opts.dtype).itemsize)
        except (FormatError, ValueError) as e:
            _say(f"tokenmill: shard {k}: its record is not valid ({e}); encoding it again")
            return None
        if rec["name"] != shard_name(k):
            return None
        why = ""
        for part in _PARTS:
            p = self.out / f"{shard_name(k)}.{part}"
            info = rec["files"][part]
            if not p.is_file():
                why = why or f"its {p.name} is missing"
            elif p.stat().st_size != info["bytes"] or sha256_file(p) != info["sha256"]:
                why = why or f"its {p.name} is damaged (not the bytes its record holds)"
        if why:
            self.rebuilt.append(k)
            if len(self.rebuilt) <= 5:
                _say(f"tokenmill: shard {k} of the interrupted build: {why}; encoding it again")
            return None
        why = self._same_input(rec, meta, size, digest)
        if not why and rec.get("input_sha256") is None:  # a record without an input hash proves nothing
            why = "its record has no input hash"
        if not why and not self._same_meta(k, meta):
            why = "its documents come from other files or rows now"
        if why:
            self.rebuilt.append(k)
            if len(self.rebuilt) <= 5:
                _say(f"tokenmill: shard {k} of the interrupted build was made from other input ({why}); "
                     "encoding it again")
            return None
        return rec

    def run(self, engine: str, workers: int, ray_address: str | None) -> None:
        self.bar = None
        self.tokens_done = 0
        self.docs_done = 0
        # two shards' worth of jobs a worker in flight (up to 64): while this thread hashes a whole shard or
        # writes one, the workers have the next one's parts to encode
        per_shard = -(-self.shard_bytes // _PART_BYTES) if _PART_BYTES else 1
        results = engines.run_jobs(self._jobs(), self.tok, self.opts, engine=engine, workers=workers,
                                   ray_address=ray_address, ahead=2 * min(per_shard, 32), quiet=not self.progress)
        if self.progress:
            from tqdm.auto import tqdm

            # the files' sizes, where they bound the text they hold (not compressed: a .gz holds more text than
            # its size, a Parquet file's columns are compressed); the bar advances by the documents' UTF-8 bytes,
            # which a JSONL file's syntax makes fewer than its size, and ends at its total
            names = [str(f).lower() for f in self.files]
            total = None if any(n.endswith((".gz", ".zst", ".parquet")) for n in names) else \
                sum(sum(spec.get("sizes") or []) for spec in self.specs) or None
            self.bar = tqdm(total=total, unit="B", unit_scale=True, desc="store build", file=sys.stderr,
                            dynamic_ncols=True)
        writing = None  # the shard whose jobs' results are being written: a _ShardTokens
        try:
            for (k, first, last), res in results:
                if res is not None:  # a job's ids, written as they come (a finished shard has none)
                    if writing is None:
                        self.started()  # (the journal before any shard file)
                        writing = _ShardTokens(self.out / f"{shard_name(k)}.tokens", self.flush)
                    writing.add(first, res)
                if not last:
                    continue
                if self.records[k] is not None:  # finished by an earlier run (never encoded: no parts)
                    if writing is not None:  # (its record came after its first parts were sent: another writer)
                        raise FormatError(
                            f"{self.out / shard_name(k)}.json appeared while this build wrote that shard: another "
                            "process is building the same store without sharing this one's lock (another machine, "
                            "or a lock file neither could make); stop it, then build again on one machine")
                    rec = self.records[k]
                else:
                    rec, writing = self._write_shard(k, writing), None
                self.records[k] = rec
                self.tokens_done += rec["tokens"]
                self.docs_done += rec["documents"]
                if self.bar is not None:  # input bytes of finished shards: MB/s and ETA of the real work
                    self.bar.update(rec["input_bytes"])
                    el = self.bar.format_dict.get("elapsed") or 0
                    self.bar.set_postfix(docs=f"{self.docs_done:,d}",
                                         tok_s=f"{self.tokens_done / el:,.0f}" if el else "-", refresh=False)
            if self.bar is not None and self.bar.total:
                self.bar.update(max(0, self.bar.total - self.bar.n))  # (the JSONL syntax read, no document bytes)
        finally:
            if writing is not None:
                writing.tokens.abort()
            if self.bar is not None:
                self.bar.close()
        if len(self.rebuilt) > 5:
            _say(f"tokenmill: {len(self.rebuilt):,d} shards of the interrupted build were made from other input "
                 "or damaged, and were encoded again")

    def _write_shard(self, k: int, writing: _ShardTokens | None) -> dict:
        """Finish shard ``k``: its tokens written from its jobs' results (``writing``), its meta and offsets
        written, the tokens renamed into place, then its record."""
        meta, size, digest = self.pending_meta.pop(k)
        if writing is None:  # (a shard of no job: not made by _cut, kept for safety)
            self.started()
            writing = _ShardTokens(self.out / f"{shard_name(k)}.tokens", self.flush)
        if writing.error is not None:
            first, res = writing.error
            writing.tokens.abort()
            f, row = meta[first + res.index]
            raise InputError(f"{_doc_where(self.files[f], int(row))} (shard {k}): {res.message}")
        lengths = np.concatenate(writing.lengths) if writing.lengths else np.zeros(0, np.int64)
        offsets = offsets_of(lengths)
        name = shard_name(k)
        info = {}
        for part, arr in (("meta", meta), ("offsets", offsets)):
            _test_hook(f"before-{part}", k)
            n, h = _write_array(self.out / f"{name}.{part}", arr, self.flush)
            info[part] = {"bytes": n, "sha256": h}
        _test_hook("before-tokens", k)
        n, h = writing.close()
        info["tokens"] = {"bytes": n, "sha256": h}
        _test_hook("renamed", k)
        rec = {"name": name, "documents": int(lengths.size), "tokens": writing.count, "input_bytes": int(size),
               "input_sha256": digest, "files": info}
        _write_json(self.out / f"{name}.json", rec)
        _test_hook("recorded", k)
        return rec


class _ShardTokens:
    """The tokens file of the shard being written (``StreamedFile``: a temporary, hashed as written, renamed
    into place when the shard is done), each job's ids appended as its result arrives, in job order; a job
    that failed is kept (``error``: its first document and the JobError) and nothing after it written."""

    def __init__(self, path: Path, flush: LaterFlush):
        try:
            self.tokens = StreamedFile(path, durable=flush)
        except OSError as e:
            raise _write_error(path, e) from e
        self.path = path
        self.lengths: list[np.ndarray] = []
        self.count = 0
        self.error: tuple[int, engines.JobError] | None = None

    def add(self, first: int, res) -> None:
        if self.error is not None:
            return
        if isinstance(res, engines.JobError):
            self.error = (first, res)
            return
        ids, lengths = res
        try:
            self.tokens.write(_little(ids))
        except OSError as e:
            raise _write_error(self.path, e) from e
        self.lengths.append(lengths)
        self.count += int(ids.size)

    def close(self) -> tuple[int, str]:
        """Rename the tokens into place (flushed to the disk in the background): ``(bytes, sha256)``."""
        try:
            return self.tokens.close()
        except OSError as e:
            raise _write_error(self.path, e) from e


def _finish(out: Path, srcs: list[Source], args: dict, fingerprint: str, opts, shards: list[dict],
            flush: LaterFlush) -> Replaced:
    """Write the manifest of the finished build in ``out`` once its shard files are on the disk (``flush``);
    the invalid UTF-8 its read replaced."""
    files, file_source = [], []
    replaced = Replaced()  # what the build's read of the files replaced (errors="replace")
    for i, s in enumerate(srcs):
        files.extend(s.files())
        file_source.extend([i] * len(s.files()))
        if isinstance(getattr(s, "replaced", None), Replaced):  # a FileSource, a dataset
            replaced.merge(s.replaced)
    body = {
        "format": FORMAT_NAME, "version": FORMAT_VERSION,
        "tokenizer": {"hash": args["tokenizer_hash"], "vocab_size": opts.vocab_size, "eos_id": opts.eos_id,
                      "bos_id": opts.bos_id},
        "dtype": opts.dtype, "byte_order": "little",
        "documents": sum(s["documents"] for s in shards), "tokens": sum(s["tokens"] for s in shards),
        "input_bytes": sum(s["input_bytes"] for s in shards),
        "build": args, "build_fingerprint": fingerprint,
        "sources": [spec["kind"] for spec in args["sources"]], "files": files, "file_source": file_source,
        "shards": shards, "invalid_utf8_replaced": replaced.count,
    }
    body["hash"] = canonical_hash(body)
    check(body, Manifest, what=f"the manifest of {out}")  # what open() will accept, before it is written
    try:
        flush.wait()
    except OSError as e:
        raise WriteError(f"cannot flush the shard files of {out} to the disk: {e.strerror or e}; run the build "
                         "again to finish it") from e
    _write_json(out / MANIFEST, body)
    _test_hook("manifest", 0)
    _tidy(out, len(shards))
    return replaced


def _tidy(out: Path, n_shards: int) -> None:
    """Remove what only a build needs once the manifest holds every record (also after a kill here):
    the journal, shard records, shards past the last (from an earlier, longer input), temporaries."""
    for p in _classify(out)[1]:  # the journal last: until it goes, every shard file is the build's (_classify)
        m = _SHARD_RE.match(p.name)
        if (m and m.group(2) == "json") or (m and int(m.group(1)) >= n_shards):
            p.unlink(missing_ok=True)
    (out / BUILD_STATE).unlink(missing_ok=True)
    remove_stale_temporaries(out)  # those of killed processes; a live writer's are kept


# ==================================================================================================
# reading
# ==================================================================================================
ITER_CHECK_EVERY = 256  # an iteration checks a shard's files once per this many documents it reads from it
_FILES_PER_SHARD = 3  # a shard's mappings kept open: tokens, offsets, and meta once provenance is asked


def _room_for_files(n: int) -> None:
    """Let this process hold ``n`` more open files: each mapping a store keeps holds one (the kernel's
    descriptor of the file mapped), and the usual soft limit (``ulimit -n``: 1,024) stopped a store of ~500
    shards at the first pass over it ("Too many open files"). The soft limit is raised towards the hard one
    where it is lower than what the store needs (as Ray and other data loaders do); beyond the hard limit,
    opening a file says so (:func:`_too_many_files`)."""
    try:
        import resource
    except ImportError:  # (not a POSIX system)
        return
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = n + 1024  # (and room for everything else the process opens)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard),
                                                        hard))
    except (OSError, ValueError):  # (a sandbox that refuses: opening a file past the limit says so)
        pass


def _too_many_files(path: str, e: OSError) -> ConfigError:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return ConfigError(f"cannot open shard file {path}: this process may hold {soft:,d} open files (ulimit -n), "
                       f"and each shard a store has read keeps {_FILES_PER_SHARD} (its mapped files): raise the "
                       "limit (ulimit -n, or your system's hard limit), or build the store with larger shards "
                       f"(shard_bytes) ({e.strerror})")


class Shard:
    """One shard of a store (``store.shards[k]``): its files, its record, and its memory maps,
    loaded and validated on first use.

    A file mapped in memory that shrinks under the mapping (truncated by another program) would
    kill the interpreter with SIGBUS at the first read past its new end. So every read of a shard
    first checks that the files it reads still have their recorded sizes, and raises a FormatError
    instead. What is checked when: each ``get(i)`` / ``store[i]`` checks the tokens and offsets
    files of the document's shard, each ``provenance(i)`` the meta file, each batch (packing,
    windows) the shards its segments come from, and an iteration (``for doc in store``, a view's,
    ``reversed``) each shard once per :data:`ITER_CHECK_EVERY` documents it reads from it; never
    every token.

    A file the shard has mapped is checked through its mapping, which holds the file open: one
    ``fstat`` of the very file mapped (about half a microsecond; no path is resolved), so a store
    moved or built again over keeps reading, and checking, the files it mapped (the flat view of
    all shards that batches read is made only of those same files: ``TokenStore._flat``). A file
    not mapped yet is checked by its path. What remains: a file truncated between a check and the
    read (microseconds; in an iteration, until its next check) still raises SIGBUS; a shard
    rewritten in place at the same size is caught by ``verify()`` once mapped (before, by its
    modification time, below).

    A file not mapped yet is also checked to be the one the store had when it was opened (its device,
    inode and modification time, recorded by ``TokenStore.open`` and carried to worker processes): a store
    built again over (``overwrite=True``) while open had its unmapped shards, and every shard a DataLoader
    worker maps, read from the new store's files under the old one's offsets and fingerprint (documents of
    neither store when the sizes agreed). Such a read is a FormatError saying the store was replaced; a
    file whose modification time moved (touched, written in place) one saying it was modified since.
    """

    def __init__(self, root: Path, rec: dict, dtype: np.dtype):
        self.root, self.rec, self.dtype = root, rec, dtype
        self._tokens = self._offsets = self._meta = None
        base = os.path.join(os.fspath(root), rec["name"])
        self._where = {part: f"{base}.{part}" for part in _PARTS}  # path strings, made once
        self._want = {part: int(rec["files"][part]["bytes"]) for part in _PARTS}
        self._maps: dict[str, mmap.mmap] = {}  # the parts mapped and kept (an empty file is never mapped)
        self._mapped: dict[str, tuple[int, int]] = {}  # (device, inode) of each file in _maps
        self._ident: dict[str, tuple[int, int, int]] = {}  # (device, inode, mtime) of each file at open
        self.manifest_seen: tuple[int, int, int] | None = None  # (inode, mtime, size) of the manifest TokenStore.open read

    def __getstate__(self) -> dict:
        """Pickled without its memory maps (a worker process maps the files itself, on first use)."""
        return {**self.__dict__, "_tokens": None, "_offsets": None, "_meta": None, "_maps": {}, "_mapped": {}}

    def path(self, part: str) -> Path:
        return self.root / f"{self.rec['name']}.{part}"

    def check_files(self, parts=("tokens", "offsets")) -> None:
        """Each file of ``parts`` is a regular file of its recorded size (a file the shard mapped:
        checked through its mapping; see the class docstring)."""
        for part in parts:
            m = self._maps.get(part)
            if m is None:
                self._stat(part)
                continue
            try:
                size = m.size()  # (fstat of the descriptor the mapping holds)
            except (OSError, ValueError) as e:
                raise FormatError(f"cannot read shard file {self._where[part]}: "
                                  f"{getattr(e, 'strerror', None) or e}") from None
            if size != self._want[part]:
                self._wrong_size(part, size)

    def _stat(self, part: str, st: os.stat_result | None = None) -> None:
        """The checks of :meth:`check_files` on ``st`` (by default, the file at the part's path)."""
        p = self._where[part]
        if st is None:
            try:
                st = os.stat(p)
            except FileNotFoundError:
                raise self._missing(p) from None
            except OSError as e:
                raise FormatError(f"cannot read shard file {p}: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"shard file {p} is not a regular file; rebuild the store")
        modified = self._same_file(part, st)  # (a replaced file said first; a modified one after its size)
        if st.st_size != self._want[part]:
            self._wrong_size(part, st.st_size)
        if modified:
            raise FormatError(f"shard file {self._where[part]} was modified since the store was opened (its "
                              "modification time moved: written again in place, touched, or another copy): open "
                              "the store again (TokenStore.open) to read it as it is now, and verify() it if "
                              "tokenmill did not write it")

    def _missing(self, p: str) -> FormatError:
        """The error for a missing file ``p`` of the shard: the store replaced since it was opened (its manifest
        is another file now, or gone: a store built again with fewer shards had been said to be incomplete,
        "rebuild it"), else the store incomplete."""
        seen = self.manifest_seen
        if seen is not None and _file_ident(self.root / MANIFEST) != seen:
            return FormatError(f"shard file {p} is gone: the store at {self.root} was built again, replaced or "
                               f"removed since it was opened (its {MANIFEST} is not the one read then); open it again "
                               "(TokenStore.open, and a new loader over it) to read what is there now")
        return FormatError(f"shard file {p} is missing; the store is incomplete: rebuild it (or restore the file)")

    def _same_file(self, part: str, st: os.stat_result) -> bool:
        """Whether ``st``, of the file the part had when the store was opened (see the class docstring), was
        modified since (its modification time moved: written in place, touched, or an inode reused by a later
        replacement); another file on the same device (the store built again over) is a FormatError. On another
        device (a handle pickled to where the path is another mount or copy) inodes say nothing: the
        modification time and the size decide."""
        dev, ino, mtime = st.st_dev, st.st_ino, st.st_mtime_ns
        known = self._ident.setdefault(part, (dev, ino, mtime))
        if known[0] == dev and known[1] != ino:
            raise FormatError(f"shard file {self._where[part]} is no longer the file the store had when it was "
                              f"opened: the store at {self.root} was built again or replaced since; open it again "
                              "(TokenStore.open, and a new loader over it) to read the new one")
        return known[2] != mtime

    def check_replaced(self) -> None:
        """Each file of the shard that is there is, on its device, the one the store had when it was opened (a
        FormatError saying the store was replaced otherwise); a file modified in place, missing or resized is
        left to the caller's checks (``verify`` lists it)."""
        for part in _PARTS:
            try:
                st = os.stat(self._where[part])
            except OSError:
                continue
            self._same_file(part, st)

    def _wrong_size(self, part: str, size: int):
        want = self._want[part]
        raise FormatError(f"shard file {self._where[part]} has {size:,d} bytes, the manifest says {want:,d} "
                          f"({'truncated' if size < want else 'too long'}) since the store "
                          "was written: rebuild the store (or restore the file)")

    def _map(self, part: str, dtype: np.dtype, count: int, *, keep: bool = True) -> np.ndarray:
        """The part's ``count`` values, mapped read-only once its file passed the checks; ``keep``: the
        mapping checks the file from then on (else it is closed when the array is gone)."""
        if count == 0:  # (nothing to map, nothing to read past)
            self._stat(part)
            return np.zeros(0, dtype)
        p = self._where[part]
        flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)  # (a FIFO: no wait)
        try:
            fd = os.open(p, flags)
        except FileNotFoundError:
            raise self._missing(p) from None
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                raise _too_many_files(p, e) from None
            raise FormatError(f"cannot read shard file {p}: {e.strerror or e}") from None
        try:
            st = os.fstat(fd)
            self._stat(part, st)  # the file opened is the one checked
            try:
                m = mmap.mmap(fd, self._want[part], access=mmap.ACCESS_READ)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):  # (the mapping's own copy of the descriptor)
                    raise _too_many_files(p, e) from None
                raise FormatError(f"cannot map shard file {p}: {getattr(e, 'strerror', None) or e}") from None
            except ValueError as e:  # (e.g. truncated since the fstat)
                raise FormatError(f"cannot map shard file {p}: {getattr(e, 'strerror', None) or e}") from None
        finally:
            os.close(fd)
        if keep:
            self._maps[part], self._mapped[part] = m, (st.st_dev, st.st_ino)
        return np.frombuffer(m, dtype=dtype, count=count)

    def _mapped_at_path(self, part: str) -> bool:
        """Whether the file at the part's path is the one the shard mapped (an empty one: nothing to map)."""
        if self._want[part] == 0:
            return True
        try:
            st = os.stat(self._where[part])
        except OSError:
            return False
        return self._mapped.get(part) == (st.st_dev, st.st_ino)

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            self._tokens = self._map("tokens", self.dtype, self.rec["tokens"])
        return self._tokens

    @property
    def offsets(self) -> np.ndarray:
        if self._offsets is None:
            o = self._map("offsets", np.dtype("<i8"), self.rec["documents"] + 1)
            d = np.diff(o)
            if o[0] != 0 or o[-1] != self.rec["tokens"] or (d < 0).any():
                raise FormatError(f"{self.path('offsets')}: document offsets are not monotone from 0 to "
                                  f"{self.rec['tokens']:,d}; the shard is corrupted: rebuild the store")
            self._offsets = o
        return self._offsets

    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tokens, offsets)`` after one check of both files (document ``j`` is
        ``tokens[offsets[j]:offsets[j + 1]]``): what every read of documents goes through."""
        t, o = self._maps.get("tokens"), self._maps.get("offsets")
        try:
            ok = t is not None and o is not None and t.size() == self._want["tokens"] \
                and o.size() == self._want["offsets"]
        except (OSError, ValueError):
            ok = False
        if not ok:  # not mapped yet (an empty tokens file never is), or a file changed: check_files names it
            _ = self.offsets, self.tokens  # (mapped on first use)
            self.check_files()
        return self._tokens, self._offsets

    def meta(self, *, keep: bool = False) -> np.ndarray:
        """``(documents, 2)`` int64: file index and row of each document, the file checked first.
        ``keep``: the mapping is kept (and checks the file) for the next calls, as ``provenance`` reads
        one document at a time; else the file is mapped for this call only (no file stays open)."""
        if self._meta is not None:
            self.check_files(("meta",))
            return self._meta
        m = self._map("meta", np.dtype("<i8"), 2 * self.rec["documents"], keep=keep).reshape(-1, 2)
        if keep:
            self._meta = m
        return m


class StoreSource:
    """What every store and view shares: a read-only sequence of documents, windows, packing fast
    path, stats, split.

    As a sequence it behaves as Python's own: ``len``, ``source[i]`` with negative indexes counted
    from the end, ``source[a:b:c]`` a view (no copy of the data) with Python's slice rules,
    iteration, ``reversed``; an index out of range is an ``IndexError`` and one that is not an
    integer a ``TypeError`` (the two exceptions that are not a ``TokenmillError``, as Python users
    expect). ``get(i)`` is the document of id ``i`` and refuses negative ids (-1 marks padding in
    batches' ``doc_ids``). ``x in source`` is refused: it would compare every document.
    """

    ids_checked = True  # (data.source.checked_get: ids checked when the store was written)

    # ---- a read-only sequence of documents ---------------------------------------------------------
    def __getitem__(self, key):
        n = len(self)
        if isinstance(key, slice):
            r = range(n)[key]  # Python's own slice rules (a zero step is its ValueError)
            picked = np.arange(r.start, r.stop, r.step, dtype=np.int64)
            if isinstance(self, StoreView):  # (the slice and its parent's definition say which documents)
                return StoreView(self.store, self.index[picked], {"of": self.definition, "slice": [r.start, r.stop, r.step]},
                                 determined=self.determined)
            return StoreView(self, picked, {"slice": [r.start, r.stop, r.step]}, determined=True)
        from .._validate import as_index

        index = as_index(key)
        if index is None:
            raise TypeError(f"document indices must be integers or slices, not {type(key).__name__}")
        key = index
        if not -n <= key < n:
            raise OutOfRangeError(f"document index {key:,d} is outside -{n:,d} .. {n - 1:,d}")
        return self.get(key % n)

    def __iter__(self) -> Iterator[np.ndarray]:
        """Every document, in order, as ``get`` gives it; a shard's files are checked once per
        :data:`ITER_CHECK_EVERY` documents read from it, not once per document."""
        return self._documents(range(len(self)))

    def __reversed__(self) -> Iterator[np.ndarray]:
        return self._documents(range(len(self) - 1, -1, -1))

    def _documents(self, ids: range) -> Iterator[np.ndarray]:
        """The documents ``ids`` of this source, read from the store chunk by chunk (see ``__iter__``)."""
        root = getattr(self, "store", self)
        for lo in range(0, len(ids), ITER_CHECK_EVERY):
            r = ids[lo : lo + ITER_CHECK_EVERY]
            chunk = np.arange(r.start, r.stop, r.step, dtype=np.int64)
            yield from root._read_many(chunk if root is self else self.index[chunk])

    def __contains__(self, item) -> bool:
        raise TypeError("`x in store` is not supported: it would compare x with every document; compare a "
                        "document yourself, e.g. np.array_equal(store[i], x), or keep the indices you need")

    def _doc_index(self, i) -> int:
        """``i`` as a document id of this source: an integer in 0 .. len - 1."""
        return doc_index(i, len(self), "; store[-1] counts from the end")

    def gather_windows(self, plan, rows=None, *, pad_id: int = 0, out: np.ndarray | None = None):
        """``WindowPlan.gather`` across shards: ``(ids (B, max length) padded with pad_id, lengths)``.

        The shards read as one flat array (mapped back to back), so this is the windows' own compiled
        gather; where that mapping is unavailable, one compiled copy per shard present in ``rows``.
        Never one Python call per window.
        """
        if not all(hasattr(plan, a) for a in ("row_indices", "doc", "start", "length")):  # (a WindowPlan's)
            raise ConfigError(f"plan is a {type(plan).__name__}, not a WindowPlan; pass what SlidingWindows(...).plan "
                              "(or another planner) made of this store's lengths")
        # the plan's own reading of rows (indices, exact, or a boolean mask), as plan.gather's: a mask had been
        # cast to 0/1 indices (every window of a 1-window selection), 0.9 truncated to row 0
        rows = plan.row_indices(rows)
        doc, start, length = (np.asarray(a, np.int64) for a in (plan.doc[rows], plan.start[rows], plan.length[rows]))
        width = int(length.max()) if length.size else 0
        if out is None:
            out = np.empty((rows.size, width), self.dtype)
        elif (not isinstance(out, np.ndarray) or isinstance(out, np.ma.MaskedArray) or out.ndim != 2
              or out.shape[0] != rows.size or out.shape[1] < width or not out.flags.c_contiguous
              or not out.flags.writeable):
            raise ConfigError(f"out must be a writable C-contiguous array of shape ({rows.size}, >= {width})")
        flat = self._flat_segments(doc, start, length)
        if flat is not None:
            from .._gather import gather_rows

            gather_rows(flat[0], flat[1], length, out, pad_id)
            return out, length
        out[...] = pad_id
        self._fill(doc, start, length, np.arange(rows.size, dtype=np.int64) * out.shape[1], out.reshape(-1))
        return out, length

    def segment_filler(self, doc, start, length):
        """The packing fast path (``PackPlan.batches``): ``(tokens, offsets)`` -- one flat array (the
        shards mapped back to back) and each segment's offset in it, read by the layout pass itself --
        or, where that mapping is unavailable, ``fill(out, dst)`` copying segment ``k`` (``doc[k]``,
        from ``start[k]``, ``length[k]`` ids) to ``out[dst[k]:]`` with one compiled call per shard
        present in the batch."""
        doc, start, length = (np.asarray(a, np.int64) for a in (doc, start, length))
        flat = self._flat_segments(doc, start, length)
        if flat is not None:  # one shard: the layout pass reads the memory map itself (no extra copy)
            return flat
        return lambda out, dst: self._fill(doc, start, length, np.asarray(dst, np.int64), out)

    def check_mapped(self, doc) -> None:
        """The shards holding documents ``doc`` (this source's numbering) still have their files' sizes: called
        for every batch read through the flat memory map (a shard truncated mid-iteration had been read past
        its end, a SIGBUS, where its size was checked once per chunk of batches)."""
        root = getattr(self, "store", self)
        doc = np.asarray(doc, np.int64)
        root.check_shards(self.index[doc] if root is not self else doc)

    def _flat_segments(self, doc, start, length):
        """``(tokens, source offset of every segment)`` when the store reads as one flat array
        (one shard, or all shards mapped back to back), else None."""
        root = getattr(self, "store", self)
        flat = root._flat()
        if flat is None:
            return None
        self._check_segments(doc, start, length)
        if root is not self:  # a view: its documents in the store's numbering
            doc = self.index[doc]
        root.check_shards(doc)
        tokens, starts = flat
        return tokens, starts[doc] + start

    def _check_segments(self, doc, start, length) -> None:
        n = len(self)
        if doc.size == 0:
            return
        if doc.min() < 0 or doc.max() >= n:
            raise InputError(f"a segment names document {int(doc.max() if doc.max() >= n else doc.min()):,d}, "
                             f"outside 0 .. {n - 1:,d}")
        bad = (start < 0) | (length < 0) | (start + length > self.lengths[doc])
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"segment (doc {int(doc[i]):,d}, start {int(start[i]):,d}, length {int(length[i]):,d}) "
                             f"reaches outside its document of {int(self.lengths[doc[i]]):,d} tokens")

    def export_megatron(self, prefix) -> tuple[Path, Path]:
        """Write ``prefix.bin`` / ``prefix.idx`` (Megatron MMIDIDX version 1), one sequence per document."""
        from .megatron import export_megatron, pair

        outside_store(pair(prefix)[0], self, f"the Megatron prefix {os.fspath(prefix)!r}", "a prefix")
        return export_megatron(self, prefix, inputs=store_files(self))

    def stats(self):
        from .stats import store_stats

        return store_stats(self)

    def split(self, val_fraction: float, *, by: str | Callable = "doc", seed: int = 0):
        """Two disjoint views ``(train, val)``: groups (documents, sources, files or whatever ``by``
        returns) are ordered by a seeded hash of their key and taken into ``val`` until it holds
        ``val_fraction`` of the documents (rounded); a group never lands in both. The rule is the one
        of :func:`tokenmill.split_documents` (same keys and seed, same split), deterministic for a
        seed and independent of the order of the documents.

        ``by``: ``"doc"``, ``"source"`` (the entry of ``sources`` a document came from), ``"file"``, or
        a callable ``f(doc_index) -> hashable group key``.
        """
        from .split import split_store

        base = getattr(self, "store", self)
        train, val = (StoreView(base, idx, definition, determined=d)
                      for idx, definition, d in split_store(self, val_fraction, by=by, seed=seed))
        return train, val


class StoreView(StoreSource):
    """Documents ``index`` (int64; increasing for a split, any order for a slice) of a store, as a
    token source and a sequence (see :class:`~tokenmill.data.store.StoreSource`)."""

    def __init__(self, store, index: np.ndarray, definition: dict, *, determined: bool = False):
        """``determined``: whether ``definition`` alone says which documents the view holds (a split by
        document, source or file, a slice); else (a split by a callable, any index given to ``view``) the
        view's fingerprint hashes ``index`` too."""
        self.store = store
        # the view's own read-only copy (a caller's array edited afterwards, or the view's index edited in place,
        # had changed its documents, its fingerprint unchanged: a validation document read as training data)
        self.index = index if is_sealed(index) else seal(np.array(index, np.int64))
        self.definition = definition
        self.determined = determined
        self.dtype = store.dtype

    @functools.cached_property
    def fingerprint(self) -> str:
        """What defines the view's data: its store's fingerprint, its definition and, where the definition does
        not determine them, its documents' indices (two splits by different callables, or two ``view``s of
        other documents under one definition, shared a fingerprint: a loader state or a plan cache of one
        was taken for the other's)."""
        body = {"store": self.store.fingerprint, "view": self.definition}
        if not self.determined:
            body["index_sha256"] = hashlib.sha256(_little(self.index).tobytes()).hexdigest()
        return canonical_hash(body)

    vocab_size = property(lambda self: self.store.vocab_size)
    tokenizer_hash = property(lambda self: self.store.tokenizer_hash)
    eos_id = property(lambda self: self.store.eos_id)
    bos_id = property(lambda self: self.store.bos_id)

    def check_tokenizer(self, tokenizer) -> None:
        self.store.check_tokenizer(tokenizer)

    def __len__(self) -> int:
        return int(self.index.size)

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    @property
    def lengths(self) -> np.ndarray:
        return self.store.lengths[self.index]

    def get(self, i: int) -> np.ndarray:
        return self.store.get(int(self.index[self._doc_index(i)]))

    def provenance(self, i: int):
        return self.store.provenance(int(self.index[self._doc_index(i)]))

    def decode(self, i: int, tokenizer, *, skip_special_tokens: bool = False) -> str:
        return self.store.decode(int(self.index[self._doc_index(i)]), tokenizer,
                                 skip_special_tokens=skip_special_tokens)

    def _fill(self, doc, start, length, dst, out) -> None:
        if doc.size and (doc.min() < 0 or doc.max() >= len(self)):
            raise ConfigError(f"a segment names document {int(doc.max()):,d}, outside this view's 0 .. {len(self) - 1:,d}")
        self.store._fill(self.index[doc], start, length, dst, out)

    def __repr__(self) -> str:
        return f"StoreView({len(self):,d} of {len(self.store):,d} documents, {self.definition})"


class TokenStore(StoreSource):
    """A finished store, opened read-only: a token source (``len``, ``lengths``, ``get``).

    ``get(i)`` is a zero-copy memory-map view; ``lengths`` (int64) is read once from the offsets.
    ``fingerprint`` hashes what defines the data (tokenizer, dtype, every shard's content hash), not
    the folder it sits in. Build with :meth:`build`, check every byte with :meth:`verify`.
    """

    def __init__(self, path: Path, manifest: dict):
        self.path = Path(path)
        self.manifest = manifest
        self.dtype = np.dtype(manifest["dtype"]).newbyteorder("<")
        self._shards = [Shard(self.path, rec, self.dtype) for rec in manifest["shards"]]
        _room_for_files(_FILES_PER_SHARD * len(self._shards))
        self._doc_start = np.zeros(len(self._shards) + 1, np.int64)
        np.cumsum([r["documents"] for r in manifest["shards"]], out=self._doc_start[1:])
        self._starts = self._doc_start.tolist()  # (for get: bisect on a list, no numpy call per document)
        self._n = int(manifest["documents"])
        self._lengths = None
        self._flat_cache = None  # (tokens, starts), False when unavailable

    # ---- construction ----------------------------------------------------------------------------
    @classmethod
    def build(cls, out_dir, sources, tokenizer, **kwargs) -> "TokenStore":
        """Encode ``sources`` into a store at ``out_dir`` and open it.

        ``sources``: a path, folder or glob, a list of them, a ``datasets`` Dataset, an iterable of str
        (or :func:`tokenmill.data.texts` / ``files`` / ``hf_dataset`` sources); ``tokenizer``: a tokenmill
        Tokenizer, anything with ``encode_batch(texts, as_arrays=True, num_threads=...)``, ``vocab_size``,
        ``special_tokens`` and a content hash, or what :func:`tokenmill.as_tokenizer` converts (a path to
        a tokenizer file, an HF, transformers, tiktoken or SentencePiece object). Keywords: ``workers``
        (default: all cores), ``engine`` ("local" threads, "process", "ray"), ``append_eos=True``,
        ``prepend_bos=False`` (ids found among the special tokens, or ``eos_id``/``bos_id``),
        ``shard_bytes`` (input bytes per shard, 16 MiB), ``errors`` ("strict" or "replace" for invalid
        UTF-8: U+FFFD, counted in the manifest's ``invalid_utf8_replaced``), ``field`` (JSONL field / Parquet or
        dataset column), ``format``, ``split_lines``, ``separator``, ``special_text`` ("error",
        "plain" or "special": text spelling a special token fails, is plain text, or is that token), ``overwrite``,
        ``progress`` (tqdm bars on stderr; default: when stderr is a terminal), ``ray_address``. Same bytes for any ``workers`` and
        engine; a killed build reruns from its finished shards.
        """
        return build(out_dir, sources, tokenizer, **kwargs)

    @classmethod
    def from_token_arrays(cls, out_dir, shards, *, vocab_size: int, tokenizer_hash: str = "external",
                          eos_id: int | None = None, bos_id: int | None = None,
                          overwrite: bool = False, roles=None) -> "TokenStore":
        """A store from ids you already have (pre-tokenized data, synthetic benchmarks), no tokenizer run.

        ``shards``: an iterable of ``(lengths, ids)`` per shard (document lengths and all their ids
        concatenated). Ids must lie in ``0 .. vocab_size - 1``; the store is uint16 when the vocabulary
        fits. ``roles``: instead of ``eos_id`` and ``bos_id``, a function giving ``(eos_id, bos_id)``, called once
        every shard is written (a writer that learns them from the documents it yields, as ``save_sft``).
        Written like a build (shards first, the manifest last, atomically) into a new folder; with
        ``overwrite=True`` over a store already there, which stays whole until the new one is written and
        verified, then the two are swapped (a folder holding anything but a store is refused).

        >>> import numpy as np, tempfile, os
        >>> d = os.path.join(tempfile.mkdtemp(), "s")
        >>> st = TokenStore.from_token_arrays(d, [([2, 1], [5, 6, 7])], vocab_size=10)
        >>> st.lengths.tolist(), st.get(1).tolist()
        ([2, 1], [7])
        """
        from .._validate import check_int

        if not isinstance(overwrite, bool):
            raise ConfigError(f"overwrite={overwrite!r} must be True or False")
        raw = _out_dir(out_dir)
        vocab_size = check_int(vocab_size, "vocab_size", min=1, max=2**31)  # (what a manifest holds)
        # (checked before anything is written: np.int64(7) or 1.5 failed at the manifest, after the shards,
        # and left a folder no call could finish or open)
        if roles is not None and not (callable(roles) and eos_id is None and bos_id is None):
            raise ConfigError("roles= is a function giving (eos_id, bos_id) once the shards are written; pass it "
                              "instead of eos_id and bos_id")

        def checked(eos_id, bos_id) -> tuple:
            return tuple(None if v is None else check_int(v, name, min=0, max=vocab_size - 1)
                         for v, name in ((eos_id, "eos_id"), (bos_id, "bos_id")))

        given = checked(eos_id, bos_id)
        # (one function either way, asked by the writer once its shards are written)
        final = (lambda: given) if roles is None else (lambda: checked(*roles()))
        if not isinstance(tokenizer_hash, str) or not tokenizer_hash:
            raise ConfigError(f"tokenizer_hash={tokenizer_hash!r} must be a non-empty str (the tokenizer's "
                              "content_hash, or 'external')")
        dtype = np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")
        # as a build: the folder itself, links resolved (a store reached through a link is replaced where it is),
        # one writer at a time (a build or another call staging beside the same folder)
        out = Path(os.path.realpath(raw))
        with exclusive(out, _say):
            return cls._token_arrays_at(out, shards, vocab_size, dtype, tokenizer_hash, final, overwrite)

    @classmethod
    def _token_arrays_at(cls, out: Path, shards, vocab_size: int, dtype, tokenizer_hash: str, roles,
                         overwrite: bool) -> "TokenStore":
        state = "missing"
        if out.exists():
            state = _classify(out)[0]  # (refuses a folder with a user's files in it, naming them)
            if not overwrite and state != "empty":  # (overwrite=True had been advised for a user's folder too)
                raise ConfigError(f"{str(out)!r} already holds a token store (or an unfinished one); pass "
                                  "overwrite=True to replace it, or another folder")
            if state == "empty":  # (an empty folder: written into, as a new one)
                out.rmdir()
                state = "missing"
        # into the folder when it is new; over a store (or an unfinished build), into a staging folder beside it
        work = out if state == "missing" else staging_dir(out)
        if work.exists():  # a staging folder an earlier replacement left: only tokenmill's files are removed
            _clear(_classify(work)[1])
            work.rmdir()
        work.mkdir(parents=True)
        # a journal first, as a build writes one: a run killed between its shards leaves a folder tokenmill knows
        # as its own unfinished one (shards without a manifest or journal had been refused, to remove by hand)
        _write_json(work / BUILD_STATE, {"format": FORMAT_NAME + ".build", "build": {"token_arrays": True},
                                         "build_fingerprint": "token-arrays"})
        try:
            store = cls._write_token_arrays(work, shards, vocab_size, dtype, tokenizer_hash, roles)
        except BaseException:  # a bad shard, a full disk: no half-written folder is left (it was made here)
            shutil.rmtree(work, ignore_errors=True)
            raise
        if work == out:
            return store
        store.verify()
        _replace_store(work, out)
        return cls.open(out)

    @classmethod
    def _write_token_arrays(cls, out: Path, shards, vocab_size: int, dtype, tokenizer_hash: str, roles):
        """``roles``: a function giving ``(eos_id, bos_id)``, checked, asked once every shard is written."""
        from .._validate import check_array

        recs, n_docs = [], 0
        if hasattr(shards, "keys") or isinstance(shards, (str, bytes)):
            raise ConfigError(f"shards is a {type(shards).__name__}; pass a list of (lengths, ids) pairs, one a shard")
        for k, pair in enumerate(shards):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(np.ndim(x) == 1 for x in pair)):
                raise ConfigError(f"shards[{k}] is not a (lengths, ids) pair of 1-D arrays; pass a list of pairs, one "
                                  "a shard: [(lengths, ids)] for one")
            lengths, ids = pair
            lengths = check_array(lengths, f"shards[{k}] lengths", min=0)
            # checked in their own dtype and cast once to the store's (an int64 copy first had taken ~10 bytes an
            # id more than the input: 200M ids, 3 GB)
            ids = check_array(ids, f"shards[{k}] ids", min=0, max=vocab_size - 1, dtype=dtype)
            # exact: an int64 sum wraps (2**62 x 4 + 3 had added up to 3 ids); it cannot where no length is above
            # int64 max / their count, else the Python ints' sum
            small = not lengths.size or int(lengths.max()) <= (2**63 - 1) // lengths.size
            total = int(lengths.sum()) if small else sum(lengths.tolist())
            if total != ids.size:
                raise InputError(f"shards[{k}]: the lengths add up to {total:,d} ids but {ids.size:,d} are given")
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype("<i8")
            meta = np.stack([np.zeros(lengths.size, np.int64), np.arange(lengths.size) + n_docs], 1).astype("<i8")
            info = {}
            for part, arr in (("tokens", ids), ("offsets", offsets), ("meta", meta)):
                size, h = _write_array(out / f"{shard_name(k)}.{part}", arr)
                info[part] = {"bytes": size, "sha256": h}
            recs.append({"name": shard_name(k), "documents": int(lengths.size), "tokens": int(ids.size),
                         "input_bytes": 0, "files": info})
            n_docs += int(lengths.size)
        eos_id, bos_id = roles()
        body = {"format": FORMAT_NAME, "version": FORMAT_VERSION,
                "tokenizer": {"hash": tokenizer_hash, "vocab_size": vocab_size, "eos_id": eos_id, "bos_id": bos_id},
                "dtype": dtype.name, "byte_order": "little", "documents": n_docs,
                "tokens": sum(r["tokens"] for r in recs), "input_bytes": 0, "build": {},
                "build_fingerprint": "token-arrays", "sources": ["token arrays"], "files": ["<token arrays>"],
                "file_source": [0], "shards": recs}
        body["hash"] = canonical_hash(body)
        check(body, Manifest, what=f"the manifest of {out}")
        _write_json(out / MANIFEST, body)
        (out / BUILD_STATE).unlink(missing_ok=True)  # (the journal: the manifest now records every shard)
        return cls.open(out)

    @classmethod
    def open(cls, path) -> "TokenStore":
        """Open a finished store; checks the manifest and every shard file's size (not hashes)."""
        path = Path(nonempty_path(fs_path(path, "path is {kind}; pass the store's folder (a str or a path)"),
                                  "the store's path", "pass the store's folder"))
        if not (path / MANIFEST).exists():
            extra = ""
            if (path / BUILD_STATE).exists():  # (from_token_arrays writes no resumable journal: it is run again)
                arrays = _recorded_fingerprint(path, BUILD_STATE)[1].get("token_arrays")
                extra = (" (from_token_arrays was interrupted: run it again with overwrite=True)" if arrays else
                         " (a build was interrupted, or stopped on an error such as bad input: rerun it with the same "
                         "arguments to resume, once what stopped it is fixed)")
            if not path.exists():
                old = _old_dir(path)
                if (old / MANIFEST).exists():
                    raise FormatError(f"token store {str(path)!r} does not exist, but a replacement of it was "
                                      f"interrupted: the previous store is complete in {str(old)!r} (rename it "
                                      "back) and the new one in the staging folder "
                                      f"{str(staging_dir(path))!r}; or rerun the build")
                raise FormatError(f"token store {str(path)!r} does not exist")
            if not path.is_dir():
                raise FormatError(f"{path} is a file, not a token store (a store is the folder `tokenmill store "
                                  "build --input FILES --out FOLDER` writes); pass that folder")
            if not extra and any(_SHARD_RE.match(p.name) for p in path.iterdir()):
                extra = (f" (it holds shard files: a store whose {MANIFEST} was removed; remove the folder and "
                         "build the store again)")
            if not extra and (path / "tokens" / MANIFEST).exists() and (path / "loss_mask" / MANIFEST).exists():
                extra = (" (it holds a loss-masked source: its ids in tokens/ and their flags in loss_mask/, two "
                         "stores; open it with MaskedSource.open, or pass tokens/ where a store of ids is wanted)")
            if not extra and not any(path.iterdir()):
                extra = (" (the folder is empty: a build killed before it wrote anything leaves one; rerun the "
                         "build, or pass the folder `tokenmill store build --input FILES --out FOLDER` wrote)")
            if not extra:
                extra = (" (a folder of other files: a store is what `tokenmill store build --input FILES --out "
                         "FOLDER` writes)")
            raise FormatError(f"{path} has no {MANIFEST}: it is not a finished token store{extra}")
        for attempt in range(3):
            # a store replaced (built again over) between reading its manifest and checking its files had been
            # said to be damaged ("has N bytes, the manifest says M: rebuild the store"): read again
            seen = _file_ident(path / MANIFEST)
            try:
                store = cls(path, _checked_manifest(path))
                for sh in store._shards:
                    sh.check_files(("tokens", "offsets", "meta"))
            except FormatError:
                if attempt == 2 or seen is None or _file_ident(path / MANIFEST) in (seen, None):
                    raise
                continue
            # (replaced after the manifest was read, its files of the same sizes: they had been taken as the old
            # manifest's, their inodes recorded under it)
            if _file_ident(path / MANIFEST) == seen:
                for sh in store._shards:
                    sh.manifest_seen = seen
                return store
        raise FormatError(f"the store at {path} was replaced three times while it was being opened (another process "
                          "builds it again and again); open it once that is done")

    def view(self, index, definition: dict) -> "StoreView":
        """The documents ``index`` of this store as a token source and sequence (no copy of the data; the view keeps
        its own read-only copy of ``index``);
        ``definition`` (JSON) says how they were chosen; it and ``index`` enter the view's fingerprint.
        ``index``: 1-D integers in ``0 .. len - 1`` (a negative one, -1 the padding document of batches,
        had been read as the last document by ``lengths`` and refused by ``get``; floats were truncated)."""
        from .._validate import check_array

        n = len(self)
        idx = check_array(index, "index", min=0, max=n - 1, error=ConfigError,
                          item="index entry {i} is {v}")
        try:
            canonical_hash(definition)
        except (TypeError, ValueError) as e:  # (failed later, when the fingerprint was first asked for)
            raise ConfigError(f"definition must be JSON (a dict of str, numbers, lists): {e}") from None
        return StoreView(self, idx, definition)

    @classmethod
    def from_megatron(cls, prefix):
        """Read a Megatron ``prefix.bin`` / ``prefix.idx`` pair (MMIDIDX version 1) as a token source."""
        from .megatron import MegatronSource

        return MegatronSource(prefix)

    # ---- identity --------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        m = self.manifest
        return canonical_hash({"format": FORMAT_NAME, "version": m["version"], "tokenizer": m["tokenizer"],
                               "dtype": m["dtype"], "shards": [
                                   [r["documents"], r["tokens"]] + [r["files"][p]["sha256"] for p in _PARTS]
                                   for r in m["shards"]]})

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["tokenizer"]["vocab_size"])

    @property
    def tokenizer_hash(self) -> str:
        return self.manifest["tokenizer"]["hash"]

    @property
    def eos_id(self) -> int | None:
        return self.manifest["tokenizer"]["eos_id"]

    @property
    def bos_id(self) -> int | None:
        return self.manifest["tokenizer"]["bos_id"]

    @property
    def num_tokens(self) -> int:
        return int(self.manifest["tokens"])

    @property
    def shards(self) -> tuple:
        """The store's :class:`Shard` objects, in order (their files, records and memory maps)."""
        return tuple(self._shards)

    @property
    def num_shards(self) -> int:
        return len(self._shards)

    def check_tokenizer(self, tokenizer) -> None:
        """Raise unless ``tokenizer`` is the one the store was built with (content hashes equal). A store written
        by ``from_token_arrays`` without a tokenizer hash ("external") records only its vocabulary size: a
        tokenizer of that size is taken, with a warning that nothing more could be checked."""
        rec = self.manifest["tokenizer"]
        size = int(getattr(tokenizer, "vocab_size", -1))
        if self.tokenizer_hash == "external":
            if size != rec["vocab_size"]:
                # (a few more ids than the tokenizer's: a model's embedding size written as the data's vocabulary)
                padded = (" (if it holds this tokenizer's ids and its size is a model's embedding rows padded past "
                          "them, GPT-2's 50,304 say, write the store again with vocab_size=tok.vocab_size and "
                          "tokenizer_hash=tok.content_hash)" if 0 < size < rec["vocab_size"] < size + 1024 else "")
                raise ConfigError(f"the store {self.path} records no tokenizer (from_token_arrays without "
                                  f"tokenizer_hash), only a vocabulary of {rec['vocab_size']:,d} ids; this tokenizer "
                                  f"has {size:,d}: pass one of that vocabulary{padded}")
            warn(f"the store {self.path} records no tokenizer (from_token_arrays without tokenizer_hash): "
                 "its ids are read with this tokenizer of the same vocabulary size, unchecked; write it with "
                 "tokenizer_hash=tok.content_hash to have it checked")
            return
        h = engines.tokenizer_key(tokenizer)
        if h != self.tokenizer_hash:  # what differs, where the manifest says (a rank file without its --special...)
            why = []
            if size != rec["vocab_size"]:
                why.append(f"it has {size:,d} ids, the store's {rec['vocab_size']:,d}")
            specials = getattr(tokenizer, "special_tokens", None) or {}
            for name, key in (("EOS", "eos_id"), ("BOS", "bos_id")):
                if rec.get(key) is not None and rec[key] not in specials.values():
                    why.append(f"the store's {name} id {rec[key]:,d} is none of its special tokens")
            raise ConfigError(f"the tokenizer does not match the store {self.path}: its hash is {h}, the store was "
                              f"built with {self.tokenizer_hash}" + (f" ({'; '.join(why)})" if why else "") +
                              "; use the tokenizer that built it (the same file, with the same pattern and special "
                              "tokens; the hash is of the tokenizer's file as tokenmill writes it, so one read back "
                              "from an export of it, a rank file or a tokenizer.json, is another one even where its "
                              "ids agree: keep tok.save(...)'s file, or export --to tokenmill)")

    def decode(self, i: int, tokenizer, *, skip_special_tokens: bool = False) -> str:
        """The text of document ``i``: EOS/BOS included as their special-token text, or left out with
        ``skip_special_tokens=True`` (as every special token's id)."""
        self.check_tokenizer(tokenizer)
        ids = self.get(i).tolist()
        return tokenizer.decode(ids, skip_special_tokens=True) if skip_special_tokens else tokenizer.decode(ids)

    def __repr__(self) -> str:
        return (f"TokenStore({str(self.path)!r}: {counted(len(self), 'document')}, {counted(self.num_tokens, 'token')}, "
                f"{counted(self.num_shards, 'shard')}, {self.dtype.name})")

    # ---- token source ----------------------------------------------------------------------------
    def __getstate__(self) -> dict:
        """Pickled without memory maps (a spawned worker maps the files itself): the flat view is
        made again on first use, not copied."""
        return {**self.__dict__, "_flat_cache": None}

    def __len__(self) -> int:
        return self._n

    @property
    def lengths(self) -> np.ndarray:
        """``(num_docs,)`` int64 document lengths (read from the offsets once; validates them)."""
        if self._lengths is None:
            parts = [np.diff(s.offsets) for s in self._shards]
            # (read-only: every plan and loader made from the store reads this one array; a caller's edit of it had
            # changed their documents' lengths silently, the store's fingerprint unchanged)
            self._lengths = seal(np.concatenate(parts) if parts else np.zeros(0, np.int64))
        return self._lengths

    def _locate(self, i: int) -> tuple[Shard, int]:
        i = doc_index(i, self._n, "; store[-1] counts from the end")
        if len(self._starts) == 2:
            return self._shards[0], i
        s = bisect.bisect_right(self._starts, i) - 1
        return self._shards[s], i - self._starts[s]

    def get(self, i: int) -> np.ndarray:
        """Document ``i``'s ids (``0 <= i < len``): a read-only view of the memory map (no copy).
        Each call first checks that its shard's tokens and offsets files still have their recorded
        sizes (see :class:`Shard`)."""
        sh, j = self._locate(i)
        tokens, o = sh._read()
        return tokens[o[j]:o[j + 1]]

    def _read_many(self, doc: np.ndarray) -> Iterator[np.ndarray]:
        """Documents ``doc`` (int64 ids, one chunk of an iteration), each shard they lie in checked once."""
        if doc.size == 0:
            return
        lo, hi = int(doc.min()), int(doc.max())
        if lo < 0 or hi >= self._n:
            doc_index(lo if lo < 0 else hi, self._n)  # (raises, as get would)
        shard = np.searchsorted(self._doc_start, doc, side="right") - 1
        first, last = np.empty_like(doc), np.empty_like(doc)
        tokens = {}
        for s in (np.unique(shard).tolist() if len(self._shards) > 1 else [0]):
            m = shard == s
            local = doc[m] - self._doc_start[s]
            tokens[s], o = self._shards[s]._read()
            first[m], last[m] = o[local], o[local + 1]
        if len(tokens) == 1:
            (t,) = tokens.values()
            for a, b in zip(first.tolist(), last.tolist()):
                yield t[a:b]
        else:
            for s, a, b in zip(shard.tolist(), first.tolist(), last.tolist()):
                yield tokens[s][a:b]

    def provenance(self, i: int) -> tuple[int, str, int]:
        """``(source index, file name, row)`` of document ``i`` (each call checks its shard's meta file)."""
        sh, j = self._locate(i)
        f, row = sh.meta(keep=True)[j].tolist()
        files = self.manifest["files"]
        if not 0 <= f < len(files) or row < 0:  # (meta rewritten in place at its size: verify() finds it too)
            raise FormatError(f"{sh.path('meta')}: document {i:,d} names file {f:,d} (of 0 .. {len(files) - 1:,d}) "
                              f"and row {row:,d}; the file was modified or corrupted: rebuild the store (or "
                              "restore the file)")
        return int(self.manifest["file_source"][f]), files[f], int(row)

    def meta(self) -> np.ndarray:
        """``(num_docs, 2)`` int64: file index (into ``manifest['files']``) and row of every document."""
        parts = [s.meta() for s in self._shards]
        nfiles = len(self.manifest["files"])
        for sh, m in zip(self._shards, parts):  # (a split by file or source, stats: keys read from here)
            if m.size and (int(m[:, 0].min()) < 0 or int(m[:, 0].max()) >= nfiles or int(m[:, 1].min()) < 0):
                raise FormatError(f"{sh.path('meta')}: a document names a file outside 0 .. {nfiles - 1:,d} or a "
                                  "negative row; the file was modified or corrupted: rebuild the store (or restore "
                                  "the file)")
        return np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)

    # single-shard stores expose the flat arrays the plans read directly
    @property
    def token_array(self) -> np.ndarray:
        if len(self._shards) != 1:
            raise AttributeError("token_array exists only for a single-shard store; use segment_filler")
        return self._shards[0].tokens

    @property
    def doc_offsets(self) -> np.ndarray:
        if len(self._shards) != 1:
            raise AttributeError("doc_offsets exists only for a single-shard store; use segment_filler")
        return self._shards[0].offsets

    def _flat(self):
        """``(tokens, starts)``: all ids as one array and where every document starts in it; for
        several shards, their files mapped back to back (``_vmap``); None where that is impossible."""
        if self._flat_cache is None:
            if len(self._shards) == 1:
                sh = self._shards[0]
                self._flat_cache = (sh.tokens, sh.offsets[:-1])
            else:
                from ._vmap import map_files

                for sh in self._shards:  # every shard's files mapped and checked by the shard: batches check them
                    sh._read()

                def same() -> bool:  # the files at the paths are those (else the per-shard copies read them)
                    return all(sh._mapped_at_path("tokens") for sh in self._shards)

                m = map_files([sh.path("tokens") for sh in self._shards],
                              [sh.rec["files"]["tokens"]["bytes"] for sh in self._shards], self.dtype) if same() else None
                if m is None or not same():
                    self._flat_cache = False
                else:
                    tokens, bases = m
                    starts = [sh.offsets[:-1] + b for sh, b in zip(self._shards, bases.tolist())]
                    self._flat_cache = (tokens, np.concatenate(starts) if starts else np.zeros(0, np.int64))
        return self._flat_cache or None

    def check_shards(self, doc: np.ndarray) -> None:
        """The shards holding documents ``doc`` still have their files' recorded sizes (a FormatError
        instead of a SIGBUS when one was truncated under the memory map)."""
        if len(self._shards) == 1:
            self._shards[0].check_files()
        elif doc.size:
            for s in np.unique(np.searchsorted(self._doc_start, doc, side="right") - 1).tolist():
                self._shards[s].check_files()

    def shard_arrays(self) -> Iterator[np.ndarray]:
        """Each shard's ids (a read-only memory map), in order."""
        for sh in self._shards:
            sh.check_files()
            yield sh.tokens

    def _fill(self, doc, start, length, dst, out) -> None:
        from .._gather import gather_segments

        self._check_segments(doc, start, length)
        if out.dtype != np.int64 and out.dtype != self.dtype:
            raise ConfigError(f"out has dtype {out.dtype}; use int64 or the store's {self.dtype}")
        if dst.size and (dst.min() < 0 or (dst + length).max() > out.size):
            raise ConfigError("a segment's destination lies outside out")
        shard = np.searchsorted(self._doc_start, doc, side="right") - 1
        for s in (np.unique(shard) if len(self._shards) > 1 else [0]):
            m = shard == s if len(self._shards) > 1 else slice(None)
            sh = self._shards[int(s)]
            sh.check_files()
            local = doc[m] - self._doc_start[int(s)]
            src = np.ascontiguousarray(sh.offsets[local] + start[m])
            gather_segments(sh.tokens, src, np.ascontiguousarray(length[m]), np.ascontiguousarray(dst[m]), out)

    # ---- checks ----------------------------------------------------------------------------------
    def verify(self, *, progress: bool = False) -> dict:
        """Check every shard: sha256 of each file, offsets monotone, every id < vocab size, provenance
        in range. Raises :class:`FormatError` listing the problems; returns counts on success."""
        from .verify import verify_store

        return verify_store(self, progress=progress)



def remove_store(path) -> None:
    """Delete a store folder written by tokenmill (refuses a folder holding other files)."""
    path = Path(path)
    state, ours = _classify(path)
    if state == "missing":
        return
    _clear(ours)
    path.rmdir()


Sequence.register(StoreSource)
