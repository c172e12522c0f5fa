"""The shapes of the tokenizer files tokenmill reads, as :mod:`tokenmill._schema` schemas.

Every tokenizer file passes one of these before any of its values is used: tokenmill's own file
(:class:`TokenizerFile`), Hugging Face ``tokenizer.json`` (:class:`HFTokenizerJson`), Mistral's
``tekken.json`` (:class:`TekkenFile`), and the conversions cached on disk. Rank files
(``.tiktoken``) are lines, not JSON: ``model._parse_tiktoken`` checks them line by line.

Types are exact: ``"special": "false"`` is not a bool, ``1.0`` is not an id. Ids are ``0 <= id < 2**31``
and, since tokenmill allocates tables as large as the largest id, below the size of the file that
states them (:func:`check_ids_below`): a 5 kB file cannot make tokenmill allocate gigabytes.

Hugging Face's readers skip keys they do not know inside a component (mistral_common anywhere), so
those schemas (:class:`Lenient`) do too; the fields tokenmill interprets are typed exactly, and the
components tokenmill cannot reproduce are refused by name before the schema is checked
(``huggingface._refuse_components``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, UnsetType

from ..._schema import Id, Meta, Struct, check, parse_json, show_value
from ...errors import FormatError

B64 = Annotated[str, Meta(pattern=r"^[A-Za-z0-9+/]*={0,2}$")]  # a token's bytes (decoded strictly after)
B64Token = Annotated[str, Meta(min_length=2, pattern=r"^[A-Za-z0-9+/]+={0,2}$")]  # and not empty
Text = Annotated[str, Meta(min_length=1)]
ID_RULE = "an id, an integer in [0, 2**31)"


class Lenient(Struct, forbid_unknown_fields=False):
    """A component of a file written by other software whose reader ignores keys it does not know
    (HF ``tokenizers``, mistral_common): unknown keys are skipped, the fields read are exact."""


# ---------------------------------------------------------------------------- tokenmill's own file
class AddedTokenEntry(Struct):
    """``added_tokens[i]`` of a version-2 file (``huggingface.AddedToken.to_dict``) and of the cache."""

    id: Id
    content: Text
    special: bool = False
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False


class MergesModel(Struct, tag_field="type", tag="merges"):
    # entries are exact ints, checked one by one by model._json_ints (its messages show them as written)
    merges: list[list[Any]]
    merge_counts: Union[list[Any], None] = None


class RanksModel(Struct, tag_field="type", tag="ranks"):
    tokens: list[Union[B64, None]]


class BpeModel(Struct, tag_field="type", tag="bpe"):
    tokens: list[Union[B64, None]]
    merges: list[list[Any]]
    merge_ids: list[Any]
    ignore_merges: bool


class ChatTemplateEntry(Lenient):
    name: str
    template: str


# a chat template kept in tokenmill's own file: Jinja text, not blank, at most the 1 MiB a template file may hold
# (``pretrained.read_chat_template``)
TEMPLATE_CHARS = 1 << 20
TemplateText = Annotated[str, Meta(min_length=1, max_length=TEMPLATE_CHARS, pattern=r"\S")]


class SavedTemplate(Struct):
    """One of the named chat templates of a tokenizer file's ``pretrained`` (a config's ``[{name, template}]``)."""

    name: Annotated[str, Meta(min_length=1, max_length=1024)]
    template: TemplateText


class SavedRoles(Struct):
    """A tokenizer file's ``pretrained`` (version 3): what the model the tokenizer was read from says of its special
    tokens' roles, chat template and longest input (its folder's ``tokenizer_config.json``, or the transformers
    object's), kept so that ``save_pretrained`` and ``encode_sft`` of the tokenizer read back find them (an
    Instruct model's EOS is no name's: Llama 3's ``<|eot_id|>``). A role left out: the model names none (found by
    name); null: the model says it has none."""

    bos_token: Union[str, None, UnsetType] = UNSET
    eos_token: Union[str, None, UnsetType] = UNSET
    unk_token: Union[str, None, UnsetType] = UNSET
    pad_token: Union[str, None, UnsetType] = UNSET
    chat_template: Union[TemplateText, Annotated[list[SavedTemplate], Meta(min_length=1, max_length=1024)], None] = None
    model_max_length: Union[Annotated[int, Meta(ge=1, le=2**62)], None] = None
    add_bos_token: bool = False
    add_eos_token: bool = False


class TokenizerFile(Struct):
    """A file written by ``Tokenizer.save`` (version 1: merges or ranks; version 2 adds model "bpe"; version 3 adds
    ``pretrained``, written only where there is one)."""

    format: Literal["tokenmill.tokenizer"]
    version: Annotated[int, Meta(ge=1)]
    pattern: Union[str, None]
    special_tokens: dict[str, Any]  # ids checked by from_dict (exact ints below the file's size)
    model: Union[MergesModel, RanksModel, BpeModel]
    hash: str
    pattern_preset: Union[str, None] = None
    split_patterns: list[str] = []
    add_prefix_space: bool = False
    normalizer: Union[Literal["NFC"], None] = None
    added_tokens: Union[list[AddedTokenEntry], None] = None
    pretrained: Union[SavedRoles, None] = None

    def __post_init__(self):
        if isinstance(self.model, BpeModel) and self.version < 2:
            raise ValueError("model type 'bpe' needs format version 2")
        if self.pretrained is not None and self.version < 3:
            raise ValueError("'pretrained' needs format version 3")


# ---------------------------------------------------------------------------- Hugging Face tokenizer.json
class HFAddedToken(Lenient):
    id: Id  # HF re-derives added tokens' ids on load (so does tokenmill); the file's must still be a valid id
    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: Union[bool, UnsetType] = UNSET  # HF's default: not special
    special: bool = False


class HFNFC(Lenient, tag_field="type", tag="NFC"):
    pass


class HFNormalizerSequence(Lenient, tag_field="type", tag="Sequence"):
    normalizers: list[Union[HFNFC, HFNormalizerSequence]] = []


HFNormalizer = Union[HFNFC, HFNormalizerSequence]


class HFByteLevel(Lenient, tag_field="type", tag="ByteLevel"):
    add_prefix_space: bool = True
    use_regex: bool = True


class HFSplitPattern(Lenient):
    Regex: Union[str, UnsetType] = UNSET
    String: Union[str, UnsetType] = UNSET

    def __post_init__(self):
        if (self.Regex is UNSET) == (self.String is UNSET):
            raise ValueError("a Split pattern is {\"Regex\": ...} or {\"String\": ...}")


class HFSplit(Lenient, tag_field="type", tag="Split"):
    pattern: HFSplitPattern
    behavior: str
    invert: bool = False


class HFDigits(Lenient, tag_field="type", tag="Digits"):
    individual_digits: bool = False


HFPiece = Union[HFByteLevel, HFSplit, HFDigits]


class HFPreSequence(Lenient, tag_field="type", tag="Sequence"):
    pretokenizers: list[HFPiece] = []


HFPreTokenizer = Union[HFByteLevel, HFSplit, HFDigits, HFPreSequence]


class HFBPE(Lenient):
    type: Union[Literal["BPE"], UnsetType] = UNSET
    vocab: Union[dict[str, Id], UnsetType] = UNSET  # HF requires both (a missing one is named)
    merges: Union[list[Union[str, tuple[str, str]]], UnsetType] = UNSET  # no type and no merges: not a BPE
    dropout: Union[float, None] = None
    byte_fallback: Union[bool, None] = False  # null reads as false, as in HF
    continuing_subword_prefix: Union[str, None] = None
    end_of_word_suffix: Union[str, None] = None
    ignore_merges: Union[bool, None] = False  # likewise


class HFTokenizerJson(Struct):
    """A tokenizer.json; its top level is strict, as in HF (an unknown key fails ``Tokenizer.from_file``)."""

    model: HFBPE
    added_tokens: Union[list[HFAddedToken], UnsetType] = UNSET  # may be absent, not null (as in HF)
    normalizer: Union[HFNormalizer, None] = None
    pre_tokenizer: Union[HFPreTokenizer, None] = None
    version: Union[Literal["1.0"], UnsetType] = UNSET  # HF reads "1.0" only (or none)
    truncation: Any = None  # these do not decide the ids tokenmill reproduces
    padding: Any = None
    post_processor: Any = None
    decoder: Any = None


class HFCacheConfig(Struct):
    """The conversion of a tokenizer.json as cached on disk (``conversion_cache.save_cached``)."""

    patterns: list[str]
    add_prefix_space: bool
    normalizer: Union[Literal["NFC"], None]
    ignore_merges: bool
    added_tokens: list[AddedTokenEntry]
    not_applied: list[str] = []  # what HF's encode does as the file asks and tokenmill's does not (said on load)
    decoder: Union[str, None] = None  # a decoder other than ByteLevel, which tokenmill's decode does not apply
    post_processor: Union[str, None] = None  # the file's post_processor as JSON (written back by save_huggingface)


class RankCacheConfig(Struct):
    """What a cached rank or tekken file keeps besides its tokens: the file's own pattern and specials."""

    pattern: Union[str, None, UnsetType] = UNSET
    specials: Union[dict[str, Id], UnsetType] = UNSET


# ---------------------------------------------------------------------------- Mistral tekken.json
class TekkenConfig(Lenient):
    pattern: str
    default_vocab_size: Id
    default_num_special_tokens: Annotated[int, Meta(ge=0, le=2**20)]
    version: Union[str, None] = None


class TekkenToken(Lenient):
    rank: Id
    token_bytes: B64Token


class TekkenSpecial(Lenient):
    rank: Id
    token_str: str


class TekkenFile(Lenient):
    config: TekkenConfig
    vocab: list[TekkenToken]
    special_tokens: Union[list[TekkenSpecial], None] = None


# ---------------------------------------------------------------------------- transformers' tokenizer_config.json
class ConfigToken(Lenient):
    """A role's token as transformers writes it in tokenizer_config.json: an ``AddedToken``'s fields."""

    content: str


RoleToken = Union[str, ConfigToken, None, UnsetType]  # (UNSET: the file does not name this role)


class SpecialTokensMapFile(Lenient):
    """A model's ``special_tokens_map.json`` (older transformers folders keep the roles there): the four roles."""

    bos_token: RoleToken = UNSET
    eos_token: RoleToken = UNSET
    unk_token: RoleToken = UNSET
    pad_token: RoleToken = UNSET


class TokenizerConfigFile(SpecialTokensMapFile):
    """The fields of a model's ``tokenizer_config.json`` that ``save_pretrained`` carries over from the folder a
    tokenizer was read from: the special tokens' roles, the chat template, the longest input (transformers writes
    a larger number than any model takes, ``1e30``, where it has none). Other keys are skipped, as transformers
    skips keys it does not know."""

    chat_template: Union[str, list[ChatTemplateEntry], None] = None
    model_max_length: Union[int, float, None] = None
    # a slow SentencePiece class's (Llama 2, Mistral v1-v3): transformers adds BOS (EOS) to every encoded text
    add_bos_token: Union[bool, None, UnsetType] = UNSET
    add_eos_token: Union[bool, None, UnsetType] = UNSET
    # (only whether it is there: transformers then ignores special_tokens_map.json)
    added_tokens_decoder: Union[dict[str, Any], UnsetType] = UNSET


# ---------------------------------------------------------------------------- checks
def decode_file(raw: bytes, schema: type, *, where: str, pre=None, maps=None):
    """A JSON file's bytes checked against ``schema``. Decoded straight into the schema first (one
    pass, no intermediate objects: what a valid 9 MB tokenizer.json takes); on any failure parsed again
    as plain JSON so that the message names the field and the value: :func:`~tokenmill._schema.parse_json`,
    then ``pre(obj)`` (refusals that must come first), then :func:`check_file` with ``maps(obj)``."""
    try:
        return msgspec.json.decode(raw, type=schema, strict=True)
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        pass
    obj = parse_json(raw, what=where)
    if pre is not None:
        pre(obj)
    return check_file(obj, schema, where=where, maps=() if maps is None else maps(obj))


def check_file(obj: Any, schema: type, *, where: str, maps: tuple = ()):
    """``check(obj, schema)``; when the first violation lies inside a JSON object keyed by strings
    (msgspec reports its path as ``[...]``), the entry at fault is found and named instead:
    ``maps`` lists ``(path, mapping, ok, expected)`` for those objects (only scanned on failure)."""
    try:
        return check(obj, schema, what=where)
    except FormatError as e:
        if "[...]" in str(e):
            for path, mapping, ok, expected in maps:
                if isinstance(mapping, dict):
                    for k, v in mapping.items():
                        if not ok(v):
                            raise FormatError(f"{where}: field {path}[{k!r}] = {show_value(v)}: expected {expected}") \
                                from None
        raise


def is_id(v) -> bool:
    return type(v) is int and 0 <= v < 2**31  # noqa: E721 (bool is not an id)


SMALL_FILE_IDS = 1 << 20  # ids any file may use: tables of this many entries take a few MB


def check_merge_forms(merges: list, where: str) -> None:
    """A tokenizer.json's ``model.merges`` are all ``"a b"`` strings or all ``[a, b]`` pairs: HF's reader
    takes either form, never a mix (its error: "did not match any variant of untagged enum MergeType")."""
    if not merges:
        return
    first = type(merges[0]) is str
    for k, m in enumerate(merges):
        if (type(m) is str) is not first:
            kind = ("an 'a b' string", "an [a, b] pair")
            raise FormatError(f"{where}: model.merges mixes forms: merge 0 is {kind[not first]}, merge {k} "
                              f"({m!r}) {kind[first]}. A tokenizer.json holds one form (Hugging Face's reader "
                              "refuses a mix); write every merge the same way")


def check_ids_below(size: int, ids, *, where: str, what: str) -> None:
    """Refuse an id ``>= max(size, SMALL_FILE_IDS)`` (``size``: the file's size in bytes):
    tokenmill sizes its tables by the largest id, and every id a file really uses takes at least a
    few bytes of it; below 2**20 ids the tables stay small whatever the file (a small tokenizer
    saved with a special token at id 100,000 loads back). ``ids`` yields ``(path, id)``; only the
    largest is looked at."""
    best = None
    for path, i in ids:
        if best is None or i > best[1]:
            best = (path, i)
    if best is not None and best[1] >= max(size, SMALL_FILE_IDS):
        path, i = best
        raise FormatError(
            f"{where}: field {path} = {i:,d}: {what} {i:,d} is not below the file's size ({size:,d} bytes) nor "
            f"2**20; every id a tokenizer file uses takes at least a few bytes of it, so this file is corrupted "
            "or not a tokenizer (tokenmill would allocate tables this large)")

