"""Mistral's ``tekken.json``: a rank file in JSON (base64 tokens, the split regex, special tokens first).

Ids equal ``mistral_common``'s Tekkenizer: its ``default_num_special_tokens`` special tokens take ids
0..n-1 (named in the file, the rest ``<SPECIAL_i>``), the first ``default_vocab_size - n`` ranked
tokens the ids after them.
"""

from __future__ import annotations

import binascii
import os

from ..._io import read_bytes_limited
from ...errors import FormatError, UnsupportedTokenizerError
from ..pretokenize.patterns import engine_differences
from .kind import reading
from .schemas import TekkenFile, check_ids_below, decode_file
from .tiktoken import cached_rank_model


def load_tekken(path) -> tuple[list, object, str, dict[str, int]]:
    """(vocab, pair table, split pattern, special tokens) of a tekken.json, through the cache of
    parsed rank files."""
    raw = read_bytes_limited(path, what="tekken tokenizer")

    def parse():
        ranks, pattern, specials = reading(os.fspath(path), raw, "tekken", lambda: read_tekken(path, raw))
        return ranks, {"pattern": pattern, "specials": specials}

    vocab, pairs, conf = cached_rank_model(raw, "tekken", parse)
    return vocab, pairs, conf["pattern"], conf["specials"]

# the special tokens of a tekken file that does not list them (versions up to v7: Mistral Nemo's), ids 0-19, as
# mistral_common names them (``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``); the ids after them are <SPECIAL_i>
_V7_SPECIALS = ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
                "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]")
_TEKKEN_NEEDS = ("config.pattern, config.default_vocab_size, config.default_num_special_tokens and a vocab list")


def tekken_shape(body, src: str) -> None:
    """Before the schema check of a parsed tekken.json: a JSON file that lacks its fields is not one."""
    missing = [k for k in ("config", "vocab") if not isinstance(body, dict) or k not in body]
    if not missing and isinstance(body["config"], dict):
        missing = [f"config.{k}" for k in ("pattern", "default_vocab_size", "default_num_special_tokens")
                   if k not in body["config"]]
    if missing:
        raise FormatError(f"{src}: not a tekken tokenizer (needs {_TEKKEN_NEEDS}; missing {', '.join(missing)})")


def read_tekken(path, raw: bytes) -> tuple[dict[bytes, int], str, dict[str, int]]:
    """(ranks as ids, pattern, special tokens) of a tekken.json (its bytes ``raw``), checked against
    ``schemas.TekkenFile``, every id below the file's size."""
    src = os.fspath(path)
    where = f"tekken tokenizer file {src!r}"
    spec = decode_file(raw, TekkenFile, where=where, pre=lambda body: tekken_shape(body, src))
    pattern, entries = spec.config.pattern, spec.vocab
    import regex

    try:
        regex.compile(pattern)
    except regex.error as e:  # (a damaged file: said without its name or field before)
        raise FormatError(f"{src}: config.pattern = {pattern!r} is not a valid regex ({e}); the file is damaged or "
                          "hand-edited, get it again") from None
    differ = engine_differences(pattern, tiktoken=True)
    if differ:
        raise UnsupportedTokenizerError(
            f"{src}: config.pattern {pattern!r} uses {', '.join(map(repr, differ))}, which mistral_common's engine "
            "(tiktoken's) reads otherwise than tokenmill's; such a file cannot be encoded exactly by tokenmill")
    n_special, size = spec.config.default_num_special_tokens, spec.config.default_vocab_size
    check_ids_below(len(raw), [("config.default_num_special_tokens", n_special)], where=where,
                    what="the special tokens' id count")
    inner = size - n_special
    if not 256 <= inner <= len(entries):
        raise FormatError(f"{src}: default_vocab_size {size:,d} - {n_special:,d} special tokens = {inner:,d} ranked "
                          + ("tokens, fewer than the 256 byte tokens a byte-level BPE needs" if inner < 256 else
                             f"tokens, more than the {len(entries):,d} its vocab holds"))
    ranks: dict[bytes, int] = {}
    for i, e in enumerate(entries[:inner]):
        try:
            if e.rank != i:
                raise ValueError(f"rank {e.rank!r}")
            tb = binascii.a2b_base64(e.token_bytes, strict_mode=True)
        except ValueError as err:
            raise FormatError(f"{src}: vocab[{i:,d}] needs rank {i} and base64 token_bytes ({err})") from None
        if tb in ranks:
            raise FormatError(f"{src}: vocab[{i:,d}] repeats the token {tb!r} of vocab[{ranks[tb] - n_special:,d}]")
        ranks[tb] = i + n_special
    specials: dict[str, int] = {}
    listed = spec.special_tokens
    if listed is None:  # as mistral_common: the names every file up to v7 had, or a refusal after v7
        version = spec.config.version or ""
        if not (version[:1] == "v" and version[1:].isdigit()):
            raise FormatError(f"{src}: lists no special_tokens and its config.version is "
                              f"{spec.config.version!r}, not v1..v7, the versions whose special ids have known "
                              "names (mistral_common refuses such a file too): get the file again")
        if int(version[1:]) > 7:
            raise FormatError(f"{src}: a version {version} tekken file must list its special_tokens (mistral_common "
                              "refuses it too): get the file again")
        specials = {name: i for i, name in enumerate(_V7_SPECIALS[:n_special])}
    for k, e in enumerate(listed or []):
        if not 0 <= e.rank < n_special or e.token_str in specials:
            raise FormatError(f"{src}: special_tokens[{k}] = {{rank: {e.rank}, token_str: {e.token_str!r}}}: rank "
                              f"must lie in 0..{n_special - 1} and the name be a new string")
        specials[e.token_str] = e.rank
    held = set(specials.values())
    for i in range(n_special):
        if i not in held:
            specials[f"<SPECIAL_{i}>"] = i  # mistral_common's filler names
    return ranks, pattern, specials

