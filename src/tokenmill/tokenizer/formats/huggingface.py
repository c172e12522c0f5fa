"""Import a Hugging Face byte-level BPE ``tokenizer.json`` exactly as HF ``tokenizers`` runs it.

What is honoured (anything else is refused with a FormatError naming the component):

* ``normalizer``: none or ``NFC`` (also inside a ``Sequence``);
* ``pre_tokenizer``: ``ByteLevel`` (with its own GPT-2 regex or ``use_regex: false``, and
  ``add_prefix_space``: a space before every piece between added tokens that does not start with
  one), ``Split`` (a regex or a string, ``Isolated``, not inverted) and ``Digits``, also several in a
  ``Sequence``, each splitting the chunks of the one before;
* ``model``: ``BPE`` with merges as ``"a b"`` strings or ``["a", "b"]`` pairs, applied by merge
  priority (a pair listed twice keeps its last priority, as HF's merge map does); ``ignore_merges``
  (a chunk that is a vocabulary token is that token); vocabularies in any id order, byte tokens
  anywhere; no ``dropout``, no ``byte_fallback``, no word prefix or suffix;
* ``added_tokens``: ids assigned as HF assigns them on load (an added token whose content is a
  vocabulary token takes its id; others get ids from the vocabulary's size on, in file order);
  matched in the text as HF's AddedVocabulary does: non-normalized tokens first on the raw text,
  leftmost-longest, then normalized ones on the normalized pieces; ``single_word`` (no word
  character on either side), ``lstrip``/``rstrip`` (the token absorbs the whitespace beside it).
  Special added tokens follow tokenmill's safety model (``allowed_special``); non-special ones are
  always matched, as in HF.

Ids then equal ``tokenizers.Tokenizer.encode(text, add_special_tokens=False).ids`` (the
post-processor's template tokens, e.g. a BOS, are not added: add them yourself).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from msgspec import UNSET

from ...errors import FormatError, UnsupportedTokenizerError
from ..added import AddedToken
from ..pretokenize.patterns import engine_differences, matches_empty
from .conversion_cache import load_cached, save_cached
from .kind import reading
from .schemas import (
    ID_RULE,
    HFByteLevel,
    HFCacheConfig,
    HFNormalizerSequence,
    HFPreSequence,
    HFSplit,
    HFTokenizerJson,
    check_ids_below,
    check_merge_forms,
    decode_file,
    is_id,
)

# HF ByteLevel's own split regex; equal to the gpt2 preset on every input (tested), so it runs compiled.
BYTELEVEL_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


# ------------------------------------------------------------------------------------ loading
def _refuse(source: str, what: str, why: str = "") -> FormatError:
    return UnsupportedTokenizerError(
        f"{source}: {what} cannot be reproduced exactly by tokenmill{': ' + why if why else ''}; tokenmill "
        "imports byte-level BPE tokenizers (ByteLevel/Split/Digits pre-tokenizers, BPE model, NFC or no "
        "normalizer). tokenmill.as_tokenizer(path) (and --tokenizer) run such a file through HF tokenizers."
    )


_NORMALIZERS = ("NFC", "Sequence")
_PRE_TOKENIZERS = ("ByteLevel", "Split", "Digits")


def _refuse_components(body, source: str) -> None:
    """Before the schema check of a parsed tokenizer.json (whose schema knows only what tokenmill
    reproduces): refuse a model, normalizer or pre-tokenizer of another kind by its name."""
    if not isinstance(body, dict):
        raise FormatError(f"{source}: not a Hugging Face tokenizer.json (a JSON {type(body).__name__} where an "
                          "object with a 'model' is expected)")
    model = body.get("model")
    if not isinstance(model, dict):
        raise FormatError(f"{source}: not a Hugging Face tokenizer.json (no 'model' object)")
    mtype = model.get("type", "BPE" if "merges" in model else None)
    if (mtype is None or isinstance(mtype, str)) and mtype != "BPE":
        raise _refuse(source, f"the {mtype!r} model")
    stack = [body.get("normalizer")]  # a Sequence may hold Sequences: walked without recursion
    while stack:
        spec = stack.pop()
        kind = spec.get("type") if isinstance(spec, dict) else None
        if kind == "Sequence" and isinstance(spec.get("normalizers"), list):
            stack.extend(spec["normalizers"])
        elif isinstance(kind, str) and kind not in _NORMALIZERS:
            raise _refuse(source, f"the {kind!r} normalizer")
    pre = body.get("pre_tokenizer")
    items = (pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]) if isinstance(pre, dict) else []
    for item in items if isinstance(items, list) else []:
        kind = item.get("type") if isinstance(item, dict) else None
        if isinstance(kind, str) and kind not in _PRE_TOKENIZERS:
            nested = kind == "Sequence" and pre.get("type") == "Sequence"
            raise _refuse(source, "a pre-tokenizer Sequence inside the pre-tokenizer Sequence" if nested
                          else f"the {kind!r} pre-tokenizer")


def _normalizer(spec, source: str) -> str | None:
    """``"NFC"`` or None from a checked normalizer (NFC, or Sequences of them: walked without recursion)."""
    nfc, stack = 0, [spec]
    while stack:
        s = stack.pop()
        if isinstance(s, HFNormalizerSequence):
            stack.extend(s.normalizers)
        elif s is not None:
            nfc += 1
    if nfc > 1:
        raise _refuse(source, "a normalizer Sequence of several NFC")
    return "NFC" if nfc else None


def _pre_tokenizer(spec, source: str):
    """(patterns, add_prefix_space) from the pre-tokenizer: each pattern splits the chunks of the one before."""
    import regex

    if spec is None:
        raise _refuse(source, "a tokenizer without a ByteLevel pre-tokenizer", "its model does not see bytes")
    items = spec.pretokenizers if isinstance(spec, HFPreSequence) else [spec]
    patterns: list[str] = []
    prefix_space = False
    byte_level = False
    for k, item in enumerate(items):
        kind = type(item).__struct_config__.tag
        if byte_level:
            raise _refuse(source, f"pre-tokenizer {kind!r} after ByteLevel")
        if isinstance(item, HFByteLevel):
            byte_level = True
            if item.add_prefix_space:
                if k > 0:
                    raise _refuse(source, "ByteLevel(add_prefix_space=true) after another pre-tokenizer",
                                  "it would add a space to every chunk")
                prefix_space = True
            if item.use_regex:
                patterns.append("gpt2")
        elif isinstance(item, HFSplit):
            if item.invert:
                raise _refuse(source, "an inverted Split pre-tokenizer")
            if item.behavior != "Isolated":
                raise _refuse(source, f"a Split pre-tokenizer with behavior {item.behavior!r}",
                              "only 'Isolated' is supported")
            rx = item.pattern.Regex
            if rx is not UNSET:
                differ = engine_differences(rx, oniguruma=True)
                if differ:
                    raise _refuse(source, f"the Split regex {rx!r}", f"Oniguruma (HF's engine) reads "
                                  f"{', '.join(map(repr, differ))} otherwise than tokenmill's engines")
                if regex.search(r"\{\d+(?:,\d*)?\}\+", rx):
                    raise _refuse(source, f"the Split regex {rx!r}", "Oniguruma reads '{m,n}+' as a repetition")
                patterns.append(onig_classes(rx, source))
                try:  # (Oniguruma's nested classes as the regex module reads them)
                    regex.compile(patterns[-1])
                except regex.error as e:  # (said without the file's name or field before)
                    # Oniguruma takes some the regex module cannot compile (\e, \Q...\E, a{2}{3}): not a damaged
                    # file, one tokenmill cannot run (as_tokenizer then runs it through HF tokenizers, which
                    # refuses it in turn where it is damaged)
                    field = "pre_tokenizer" + (f".pretokenizers[{k}]" if isinstance(spec, HFPreSequence) else "")
                    raise _refuse(source, f"{field}.pattern.Regex = {rx!r}", f"the regex module cannot compile it "
                                  f"as tokenmill reads it ({e})") from None
                if matches_empty(patterns[-1]):
                    raise _refuse(source, f"the Split regex {rx!r}", "it can match the empty string, after which "
                                  "Oniguruma steps one character on and tokenmill's engines do not")
            else:
                patterns.append(regex.escape(item.pattern.String))
            if regex.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", patterns[-1]):  # a file's split on one literal word: a
                patterns[-1] = f"(?:{patterns[-1]})"  # group, as pattern arguments take a bare word for a name
        else:  # HFDigits
            patterns.append(r"\p{N}" if item.individual_digits else r"\p{N}+")
    if not byte_level:
        raise _refuse(source, "a tokenizer without a ByteLevel pre-tokenizer", "its model does not see bytes")
    return patterns, prefix_space


def onig_classes(rx: str, source: str = "<pattern>") -> str:
    r"""``rx`` (Oniguruma syntax, as HF ``tokenizers`` compiles it) with its nested character classes
    flattened for the ``regex`` module: in Oniguruma ``[`` inside a class opens a nested class, so
    BLOOM's ``[^(\s|[.,!?])]`` is one class of ``(``, whitespace, ``|``, ``.``, ``,``, ``!``, ``?`` and
    ``)``, which ``regex`` would read as a class ending at the first ``]``. A nested class is a union,
    so its brackets are dropped. A pattern with a negated nested class or an ``&&`` intersection is
    returned as it is: tokenmill evaluates such classes in the ``regex`` module's version 1 mode,
    which reads them as Oniguruma does (``patterns.has_set_syntax``).

    >>> print(onig_classes(r" ?[^(\s|[.,!?])]+"))
     ?[^(\s|.,!?)]+
    """
    out: list[str] = []
    verbatim = False
    depth = 0  # class nesting depth
    i, n = 0, len(rx)
    while i < n:
        c = rx[i]
        if c == "\\":
            out.append(rx[i : i + 2])
            i += 2
            continue
        if depth == 0:
            if c == "[":
                depth = 1
                out.append(c)
                i += 1
                if rx.startswith("^", i):
                    out.append("^")
                    i += 1
                if rx.startswith("]", i):  # engines disagree on what '[]...]' and '[^]...]' mean
                    raise _refuse(source, f"the Split regex {rx!r}", "a ']' first in a class; escape it as '\\]'")
                continue
            out.append(c)
            i += 1
            continue
        if c == "[" and rx.startswith("[:", i):  # a POSIX bracket [:alpha:] stays as it is
            end = rx.find(":]", i + 2)
            if end > 0:
                out.append(rx[i : end + 2])
                i = end + 2
                continue
        if c == "[":
            if rx.startswith("[^", i):
                verbatim = True  # a set operation: left to the version 1 evaluation
            depth += 1
            i += 1
            continue
        if c == "&" and rx.startswith("&&", i):
            verbatim = True
        if c == "]":
            depth -= 1
            if depth == 0:
                out.append(c)
            i += 1
            continue
        out.append("\\[" if c == "[" else c)
        i += 1
    return rx if verbatim else "".join(out)


@functools.cache
def _byte_level_table() -> dict[int, int]:
    """``str.translate`` table from ByteLevel characters to the latin-1 character of their byte; any
    other character below U+0100 goes to U+FFFF, so that encoding to latin-1 fails on it."""
    from .export import bytes_to_unicode

    table = {c: 0xFFFF for c in range(256)}
    table.update({ord(u): b for b, u in bytes_to_unicode().items()})
    return table


def _split_merge(m, k: int, source: str) -> tuple[str, str]:
    if isinstance(m, str):
        parts = m.split(" ")
        if len(parts) != 2:
            raise FormatError(f"{source}: merge {k} {m!r} is not two tokens separated by one space")
        return parts[0], parts[1]
    if isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(x, str) for x in m):
        return m[0], m[1]
    raise FormatError(f"{source}: merge {k} {m!r} is neither 'a b' nor a pair of strings")


def tokenizer_json_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / "tokenizer.json" if p.is_dir() else p


def load_tokenizer_json(path: str | os.PathLike, build):
    """``Tokenizer.from_huggingface``: see the module docstring. ``build`` makes the tokenizer from
    the converted parts (``Tokenizer.from_merge_list``: this module does not import the class).

    The conversion (vocabulary to bytes, merges to id arrays) is cached on disk, keyed by the file's
    SHA-256, under the same cache folder as the splitter's class table: a 128k-vocabulary file then
    loads in a fraction of a second."""
    from ..._io import read_bytes_limited

    p = tokenizer_json_path(path)
    return load_tokenizer_json_bytes(read_bytes_limited(p, what="tokenizer.json"), str(p), build)


def load_tokenizer_json_bytes(raw: bytes, source: str, build):
    """:func:`load_tokenizer_json` of a tokenizer.json's bytes already in memory (``Tokenizer.from_huggingface_str``:
    an HF object's ``to_str()``), ``source`` naming them in messages."""
    import hashlib

    key = hashlib.sha256(raw).hexdigest()[:32]
    # (2: the config says what is not applied; 3: and a decoder other than ByteLevel; 4: and the post-processor)
    cache_key = f"hf4-{key}"
    cached = load_cached(cache_key)
    if cached is not None:
        try:
            return _build(*cached, source=source, build=build)
        except FormatError:
            pass  # a damaged cache entry: rebuilt from the file
    parts = reading(source, raw, "huggingface", lambda: _convert(read_tokenizer_json(raw, source), source, len(raw)))
    save_cached(cache_key, *parts)
    return _build(*parts, source=source, build=build)


def read_tokenizer_json(raw: bytes, source: str) -> HFTokenizerJson:
    """The bytes of a tokenizer.json checked against ``schemas.HFTokenizerJson``: exact types (``"special":
    "false"`` is an error, not True); a model, normalizer or pre-tokenizer tokenmill does not reproduce is
    refused by name; a bad vocabulary entry is named by its token."""
    vocab_of = lambda body: [("model.vocab", body["model"].get("vocab"), is_id, ID_RULE)]
    return decode_file(raw, HFTokenizerJson, where=f"tokenizer.json file {source!r}",
                       pre=lambda body: _refuse_components(body, source), maps=vocab_of)


def _build(vocab, arr, config, *, source, build):
    from ..._schema import check
    from ...errors import ConfigError

    conf = check(config, HFCacheConfig, what=f"the cached conversion of {source}")
    warn_not_applied(source, conf.not_applied)
    if conf.decoder is not None:
        from ...errors import warn

        warn(f"{source}'s decoder is {conf.decoder}, not ByteLevel: tokenmill's decode gives the tokens' "
             "bytes as text (what a ByteLevel decoder gives), and HF's decode of the same ids may differ "
             "(the ids themselves are HF's)")
    patterns = conf.patterns
    try:
        tok = build(
            vocab, arr[:, :2], merge_ids=arr[:, 2], pattern=patterns[0] if patterns else None,
            added_tokens=[AddedToken.from_entry(t) for t in conf.added_tokens],
            ignore_merges=conf.ignore_merges, normalizer=conf.normalizer,
            add_prefix_space=conf.add_prefix_space, split_patterns=patterns[1:], source=source)
    except ConfigError as e:  # what the file asks of the tokenizer (a pattern, a special token's id) tokenmill refuses
        raise _refuse(source, "this file", f"{e}") from None
    if conf.post_processor is not None:
        tok.hf_post_processor = json.loads(conf.post_processor)
    return tok


def _other_decoder(decoder) -> str | None:
    """None for a ByteLevel decoder (alone or the one step of a Sequence): tokenmill's ``decode`` gives what it
    gives, the tokens' bytes as text; else the decoder in short (``"null"``, ``"Sequence[ByteLevel, Strip]"``),
    which HF's ``decode`` applies and tokenmill's does not."""
    def name(d) -> str:
        if not isinstance(d, dict):
            return "null" if d is None else type(d).__name__
        steps = d.get("decoders")
        if d.get("type") == "Sequence" and isinstance(steps, list):
            return f"Sequence[{', '.join(map(name, steps))}]"
        return str(d.get("type"))

    said = name(decoder)
    return None if said in ("ByteLevel", "Sequence[ByteLevel]") else said


def not_applied_of(spec) -> list[str]:
    """What a tokenizer.json asks of HF's ``encode`` that tokenmill's does not do: truncation and padding
    (a tokenizer saved after ``enable_truncation`` / ``enable_padding``), with their settings."""
    return [f"{k} ({_settings(getattr(spec, k))})" for k in ("truncation", "padding") if getattr(spec, k) is not None]


def warn_not_applied(source: str, not_applied: list[str]) -> None:
    """A warning (on every load) that ``source`` enables what tokenmill's encode does not apply."""
    if not_applied:
        from ...errors import warn

        warn(f"{source} enables {' and '.join(not_applied)}, which HF tokenizers' encode applies and "
             "tokenmill's does not: its ids are every id of the text, unpadded (cut or pad them where "
             "you need to)")


def _settings(value) -> str:
    """A truncation or padding setting of a tokenizer.json, in short: ``max_length=3`` or the like."""
    if not isinstance(value, dict):
        return "on"
    keys = [k for k in ("max_length", "strategy", "direction", "pad_to_multiple_of") if value.get(k) is not None]
    return ", ".join(f"{k}={value[k]!r}" for k in keys) or "on"


def _convert(spec: HFTokenizerJson, source: str, file_size: int):
    """(vocab by id, merges (M, 3) [left, right, merged id], config) from a checked tokenizer.json of
    ``file_size`` bytes."""
    from .export import bytes_to_unicode

    model = spec.model
    if model.type is UNSET and model.merges is UNSET:
        raise _refuse(source, "the None model")
    missing = [k for k in ("vocab", "merges") if getattr(model, k) is UNSET]
    if missing:  # (HF refuses it too: "Missing vocab/merges")
        raise FormatError(f"{source}: the BPE model has no {' and no '.join(missing)}; a tokenizer.json's BPE model "
                          "lists both (an empty list is fine): the file is damaged or hand-edited, get it again")
    if model.dropout not in (None, 0.0):
        raise _refuse(source, f"BPE dropout={model.dropout}", "it samples")
    if model.byte_fallback:
        raise _refuse(source, "BPE byte_fallback")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if getattr(model, key):
            raise _refuse(source, f"BPE {key}={getattr(model, key)!r}")
    normalizer = _normalizer(spec.normalizer, source)
    patterns, prefix_space = _pre_tokenizer(spec.pre_tokenizer, source)

    vocab_map: dict[str, int] = model.vocab
    size = max(vocab_map.values(), default=-1) + 1
    if size > file_size:  # the list below has one slot per id up to the largest
        check_ids_below(file_size, ((f"model.vocab[{s!r}]", i) for s, i in vocab_map.items()),
                        where=f"tokenizer.json file {source!r}", what="id")
    if len(set(vocab_map.values())) != len(vocab_map):
        held: dict[int, str] = {}
        for s, i in vocab_map.items():
            if i in held:
                raise FormatError(f"{source}: model.vocab gives id {i:,d} to both {held[i]!r} and {s!r}; a "
                                  "vocabulary needs one token per id (HF would keep one of them for decoding)")
            held[i] = s
    vocab: list[bytes | None] = [None] * size
    table = _byte_level_table()
    for s, i in vocab_map.items():
        try:  # ByteLevel text -> bytes: every character stands for one byte
            vocab[i] = s.translate(table).encode("latin-1")
        except UnicodeEncodeError:
            pass  # not byte-level text: BPE can never produce it from bytes (only an added token can)
    ids = {s: i for s, i in vocab_map.items() if vocab[i] is not None}
    raw = model.merges
    check_merge_forms(raw, source)
    try:
        arr = np.array([(ids[a], ids[b], vocab_map[a + b]) for a, b in
                        (m.split(" ") if isinstance(m, str) else m for m in raw)], np.int64).reshape(-1, 3)
    except (KeyError, ValueError, TypeError):  # find the merge at fault, or drop unusable ones
        rows = []
        for k, m in enumerate(raw):
            a, b = _split_merge(m, k, source)
            if a not in ids or b not in ids:
                if a in vocab_map and b in vocab_map:
                    continue  # a merge of non-byte-level tokens never fires on byte-level input
                raise FormatError(f"{source}: merge {k} ({a!r}, {b!r}) names a token missing from the vocabulary") from None
            if a + b not in vocab_map:
                raise FormatError(f"{source}: merge {k} ({a!r}, {b!r}) produces {a + b!r}, missing from the "
                                  "vocabulary") from None
            rows.append((ids[a], ids[b], vocab_map[a + b]))
        arr = np.array(rows, np.int64).reshape(-1, 3)
    missing = [x for x in range(256) if bytes_to_unicode()[x] not in ids]
    if missing:
        raise _refuse(source, f"a vocabulary without the byte tokens for bytes {missing[:8]}",
                      "a byte-level BPE needs all 256")
    added = added_tokens_of([] if spec.added_tokens is UNSET else spec.added_tokens, vocab_map, source)
    # HF's encode also truncates and pads where the file enables it (a tokenizer saved after
    # enable_truncation / enable_padding); tokenmill's encode gives every id, unpadded: said on each load
    not_applied = not_applied_of(spec)
    config = {"patterns": patterns, "add_prefix_space": prefix_space, "normalizer": normalizer,
              "ignore_merges": bool(model.ignore_merges), "not_applied": not_applied,
              "added_tokens": [t.to_dict() for t in added], "decoder": _other_decoder(spec.decoder),
              # (what HF's encode adds with add_special_tokens=True, a BOS say: tokenmill's ids never hold it, and
              # save_huggingface writes it back; the export had written none, HF's encode then adding no BOS)
              "post_processor": None if spec.post_processor is None else json.dumps(spec.post_processor,
                                                                                    ensure_ascii=False)}
    return vocab, arr, config


@dataclass(frozen=True)
class _Flags:
    """An added token's matching options (HF compares them to skip re-adding an identical token)."""

    content: str
    single_word: bool
    lstrip: bool
    rstrip: bool
    normalized: bool
    special: bool


def added_tokens_of(entries, vocab_map: dict[str, int], source: str) -> list[AddedToken]:
    """HF's ``AddedVocabulary.add_tokens`` on load: the file's ids are not used, the ids are re-derived."""
    next_id = len(vocab_map)
    by_content: dict[str, int] = {}
    by_id: dict[int, _Flags] = {}
    for e in entries:  # checked: schemas.HFAddedToken
        f = _Flags(e.content, e.single_word, e.lstrip, e.rstrip,
                   (not e.special) if e.normalized is UNSET else e.normalized, e.special)
        if not f.content:
            continue
        if f.content in by_content and by_id.get(by_content[f.content]) == f:
            continue
        tid = by_content.get(f.content, vocab_map.get(f.content))
        if tid is None:
            tid = next_id
            next_id += 1
        by_content[f.content] = tid
        by_id[tid] = f
    return [AddedToken(i, f.content, f.special, f.single_word, f.lstrip, f.rstrip, f.normalized)
            for i, f in sorted(by_id.items())]


def tokenizer_json_head(path) -> bytes:
    """The bytes of a tokenizer.json (or the one in a folder) for a format sniff; b"" if unreadable (the
    importer then reports the problem)."""
    from ..._io import read_bytes_limited
    from ...errors import TokenmillError

    p = Path(path)
    p = p / "tokenizer.json" if p.is_dir() else p
    try:
        return read_bytes_limited(p, what="tokenizer.json")
    except TokenmillError:
        return b""
