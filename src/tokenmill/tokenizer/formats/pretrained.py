"""A tokenizer as a ``transformers`` folder: ``save_pretrained(folder)`` and ``to_transformers()``.

``save_huggingface`` writes the one file HF ``tokenizers`` reads. What ``transformers`` users load is a
folder: ``AutoTokenizer.from_pretrained(folder)`` reads its ``tokenizer.json`` and, from
``tokenizer_config.json``, which special token is the end of a text (``eos_token``: what generation stops
at, what ``DataCollatorForLanguageModeling`` and chat code reach for), the beginning (``bos_token``),
padding (``pad_token``) and the unknown token (``unk_token``). Without that file every one of them is
None. :meth:`save_pretrained` writes both files, so a tokenizer trained or imported with tokenmill goes
to a ``Trainer``, a pipeline or the Hub as it is; :meth:`to_transformers` gives the same tokenizer as a
``PreTrainedTokenizerFast`` object.

The roles are named by the tokenizer's special tokens. Left out, each is what the model's own folder says
where the tokenizer was read from one (a model's folder, a Hub repo: Llama 3 Instruct's EOS is ``<|eot_id|>``,
Qwen 2.5 Instruct's ``<|im_end|>``, which no name tells), read as transformers reads that folder: its
``tokenizer_config.json`` and ``special_tokens_map.json``; its chat template (``chat_template.jinja``, else the
config's) and ``model_max_length`` go along. A role neither file names is found by name (the names the
token store also looks for): EOS ``<|endoftext|>``, ``</s>``, ``<|end_of_text|>``, ``<eos>``, ...; BOS
``<|begin_of_text|>``, ``<s>``, ``<bos>``, ...; padding ``<pad>``, ``<|pad|>``, ``[PAD]``; the unknown
token is a SentencePiece model's own (``<unk>``). A role whose name the tokenizer lacks stays None;
``None`` leaves a role unset; a name that is no special token of the tokenizer is refused (transformers
would add it as a new special token: a vocabulary token would then be cut out of every text as a token
of its own, and ids would change); a model's config naming one is said, and that role left unset.

A folder already holding ``special_tokens_map.json``, ``added_tokens.json`` or a ``chat_template.jinja`` /
``.json`` is refused: transformers reads them beside the config, and they would change the roles, ids or template
of what is written. The model's own files are never written over.

The ids are the tokenizer's: ``AutoTokenizer.from_pretrained(folder)`` encodes text as tokenmill does
(``add_special_tokens`` adds nothing: the ``tokenizer.json`` written has no post-processor, unless an
imported one brought its own) and decodes ids as tokenmill does (``clean_up_tokenization_spaces`` off).
"""

from __future__ import annotations

import filecmp
import os
from pathlib import Path

from ..._io import (
    atomic_path,
    check_writable_folder,
    fs_path,
    json_text,
    moved_aside,
    read_bytes_limited,
    resolve_output,
)
from ...errors import ConfigError, FormatError, MissingExtraError, require, warn
from ..special import BOS_NAMES, EOS_NAMES, PAD_NAMES

ROLES = ("bos_token", "eos_token", "unk_token", "pad_token")
# a model folder's files that say its roles and chat template (read by ``source_config``; fetched with a Hub repo)
SOURCE_FILES = ("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
_OVERRIDING = ("special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json")


class _Inferred:
    """The default of a role: what the model's folder says, else found by the token's name (the module's doc)."""

    def __repr__(self) -> str:
        return "<inferred>"


INFERRED = _Inferred()


def _read_from(tok) -> str | None:
    """The model file ``tok`` was read from (a tokenizer.json, a ``.model``, a rank file), or None (trained, built
    in memory, or read from tokenmill's own file, which keeps no model's folder)."""
    if getattr(tok, "read_from_own_form", False):
        return None
    got = getattr(tok, "read_from", ())
    source = got[0] if got else getattr(getattr(tok, "model", None), "source", None) or getattr(tok, "_source", None)
    return None if not source or str(source).startswith("<") else str(source)


def read_chat_template(path, what: str, error=FormatError) -> str:
    """A chat template file's text: at most 1 MB, UTF-8 (``error`` naming ``what`` and the file otherwise)."""
    raw = read_bytes_limited(path, what=what, limit=1 << 20, error=error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{what} {os.fspath(path)!r}: invalid UTF-8 at byte offset {e.start:,d}; a chat template is Jinja "
                    "text") from None
    if not text.strip():
        raise error(f"{what} {os.fspath(path)!r} is empty; a chat template is Jinja text")
    return text


def read_config(path, schema=None):
    """A ``tokenizer_config.json`` read through its schema (``schemas.TokenizerConfigFile``; or ``schema``: a
    ``special_tokens_map.json``'s)."""
    from .schemas import TokenizerConfigFile, decode_file

    return decode_file(read_bytes_limited(path, what="tokenizer config"), schema or TokenizerConfigFile,
                       where=f"tokenizer config {str(path)!r}")


def source_config(tok) -> dict | None:
    """What the model's folder (the one holding the file ``tok`` was read from) says of the roles, the chat template
    and the longest input, in transformers' order: ``tokenizer_config.json`` (``schemas.TokenizerConfigFile``) and
    ``special_tokens_map.json`` (older folders), whose roles replace the config's unless the config lists its
    ``added_tokens_decoder`` (transformers then reads the config alone); the template from ``chat_template.jinja``
    where there is one (transformers 5 writes it there), else the config's. Each role :data:`INFERRED` where
    neither file names it; ``from``: the file each role came from. None where the folder has none of these files.
    ``paths``: the files read (inputs: never written over)."""
    from msgspec import UNSET

    from .schemas import SpecialTokensMapFile

    given = getattr(tok, "pretrained_config", None)  # (made from a transformers object: what it said)
    if given is not None:
        return given
    # a folder is looked into for tokenmill's own tokenizers only (any object may reach here: a user's own
    # tokenizer handed to encode_sft, whose attributes say nothing of where a model's files are)
    source = _read_from(tok) if hasattr(tok, "_unk_id") else None
    if source is None:
        return None
    folder = Path(source).parent
    files = {n: folder / n for n in SOURCE_FILES}
    files = {n: p for n, p in files.items() if p.is_file()}
    if not files:
        return None
    conf = read_config(files["tokenizer_config.json"]) if "tokenizer_config.json" in files else None
    read = {} if conf is None else {"tokenizer_config.json": conf}
    if "special_tokens_map.json" in files and (conf is None or conf.added_tokens_decoder is UNSET):
        read["special_tokens_map.json"] = read_config(files["special_tokens_map.json"], SpecialTokensMapFile)
    text = lambda v: v.content if v is not None and not isinstance(v, str) else v
    out: dict = {"paths": [str(p) for p in files.values()], "from": {}}
    for role in ROLES:
        out[role] = INFERRED
        for name, c in read.items():  # (the map last: its roles replace the config's)
            if getattr(c, role) is not UNSET:
                out[role], out["from"][role] = text(getattr(c, role)), name
    template = None if conf is None else conf.chat_template
    out["chat_template"] = _usable_template(template if not isinstance(template, list) else
                                           [{"name": e.name, "template": e.template} for e in template])
    if "chat_template.jinja" in files:
        out["chat_template"] = read_chat_template(files["chat_template.jinja"], "chat template")
    for flag in ("add_bos_token", "add_eos_token"):  # (True where the config asks for it; else False)
        out[flag] = conf is not None and getattr(conf, flag) is True
    longest = None if conf is None else conf.model_max_length
    out["model_max_length"] = longest if type(longest) is int and 1 <= longest < 2**62 else None  # (1e30: none)
    return out


def _usable_template(template):
    """A chat template as found (a str, or a list of ``{name, template}``) without what renders nothing: a blank
    template (a config's ``""``) or named entry is none; None where nothing is left."""
    if isinstance(template, str):
        return template if template.strip() else None
    if isinstance(template, list):
        kept = [e for e in template if e["name"] and e["template"].strip()]
        return kept or None
    return None


def saved_roles(tok) -> dict | None:
    """The ``pretrained`` entry of tokenmill's own file for ``tok`` (``schemas.SavedRoles``): what
    :func:`source_config` finds, a role the model leaves unnamed left out; None where it finds nothing. Written
    by ``Tokenizer.save``, so that the tokenizer read back keeps an Instruct model's EOS and its chat template (the
    roles had been found by name again: Llama 3 Instruct's EOS ``<|end_of_text|>``, no template)."""
    conf = source_config(tok)
    if conf is None:
        return None
    out: dict = {role: conf[role] for role in ROLES if conf.get(role, INFERRED) is not INFERRED}
    out["chat_template"] = template = conf.get("chat_template")
    from .schemas import TEMPLATE_CHARS

    longest = max((len(t) for t in ([template] if isinstance(template, str) else
                                    [e["template"] for e in template or ()])), default=0)
    if longest > TEMPLATE_CHARS:  # (the file would be refused on load)
        raise ConfigError(f"the model's chat template is {longest:,d} characters, more than the {TEMPLATE_CHARS:,d} a "
                          "tokenizer file keeps; save the tokenizer without it (Tokenizer.from_huggingface of its "
                          "tokenizer.json alone), or shorten the template")
    out["model_max_length"] = conf.get("model_max_length")
    out["add_bos_token"] = bool(conf.get("add_bos_token"))
    out["add_eos_token"] = bool(conf.get("add_eos_token"))
    return out


def roles_read(entry, source: str) -> dict:
    """:func:`source_config`'s form of a tokenmill file's ``pretrained`` entry (a checked ``schemas.SavedRoles``)."""
    from msgspec import UNSET

    out: dict = {"paths": [], "from": {}}
    for role in ROLES:
        value = getattr(entry, role)
        out[role] = INFERRED if value is UNSET else value
        if value is not UNSET:
            out["from"][role] = f"tokenizer file {source}"
    template = entry.chat_template
    out["chat_template"] = (template if not isinstance(template, list) else
                            [{"name": e.name, "template": e.template} for e in template])
    out["model_max_length"] = entry.model_max_length
    out["add_bos_token"], out["add_eos_token"] = entry.add_bos_token, entry.add_eos_token
    return out


def own_chat_template(tok, name: str | None = None) -> str | None:
    """The chat template that comes with ``tok`` (its model folder's, or the transformers object's it was made
    from); None where it has none. Where it has named templates (a config's list, a transformers object's dict):
    the one called ``name``, else the one called ``"default"``, as transformers' ``apply_chat_template`` picks
    (a ConfigError naming them where none is). With ``name``, None where ``tok`` has no template of that name."""
    conf = source_config(tok)
    template = None if conf is None else conf.get("chat_template")
    if not isinstance(template, list):
        return template if isinstance(template, str) and name is None else None
    named = {e["name"]: e["template"] for e in template}
    if name is not None:
        return named.get(name)
    if "default" in named:
        return named["default"]
    raise ConfigError(f"the tokenizer has {len(named)} named chat templates and none called 'default' ("
                      + ", ".join(repr(n) for n in named) + "); pass the one to use by its name "
                      "(chat_template='...'), or a template's text")


def transformers_config(obj) -> dict | None:
    """What a transformers tokenizer object says of its roles, chat template and longest input, in
    :func:`source_config`'s form (its roles as given: a role the object leaves unset is None, not looked for by
    name); None for an object that is not one (a ``tokenizers.Tokenizer`` says none of this)."""
    if not hasattr(obj, "special_tokens_map") or not hasattr(obj, "chat_template"):
        return None
    out: dict = {"paths": [], "from": {}}
    for role in ROLES:
        value = getattr(obj, role, None)
        out[role] = str(value) if value is not None else None
        out["from"][role] = f"{type(obj).__name__} object"
    template = obj.chat_template
    if isinstance(template, dict):  # (named templates: as a config's list)
        template = [{"name": str(k), "template": str(v)} for k, v in template.items()]
    out["chat_template"] = _usable_template(template)
    out["add_bos_token"] = out["add_eos_token"] = False  # (the backend's post-processor adds them: carried as such)
    longest = getattr(obj, "model_max_length", None)
    out["model_max_length"] = longest if type(longest) is int and 1 <= longest < 2**62 else None
    return out


def roles_of(tokenizer) -> dict:
    """``bos_token``, ``eos_token``, ``unk_token``, ``pad_token`` of ``tokenizer``: as ``save_pretrained`` finds them
    (what the model's folder or transformers object declares, else by name), or, for a tokenizer without that
    machinery (any object with ``special_tokens``), by name. The roles ``encode_sft`` and a store build use (a store
    had taken its EOS by name only: Llama 3 Instruct's ``<|end_of_text|>`` where its folder declares
    ``<|eot_id|>``, as ``encode_sft`` of the same tokenizer took)."""
    if hasattr(tokenizer, "_unk_id") and hasattr(tokenizer, "id_to_token"):
        return special_roles(tokenizer, {}, source_config(tokenizer))
    specials = dict(getattr(tokenizer, "special_tokens", {}) or {})
    out = dict.fromkeys(ROLES)
    for role, names in (("bos_token", BOS_NAMES), ("eos_token", EOS_NAMES)):
        out[role] = next((n for n in names if n in specials), None)
    return out


def special_roles(tok, given: dict, source: dict | None = None) -> dict[str, str | None]:
    """``bos_token``, ``eos_token``, ``unk_token`` and ``pad_token`` of ``tok``: each as ``given`` (a special token's
    text or None) or, where given :data:`INFERRED`, as the model's config says (``source``: :func:`source_config`),
    else found by name."""
    specials = dict(tok.special_tokens)
    unk_id = tok._unk_id()
    unk = tok.id_to_token(unk_id) if unk_id is not None else None
    names = {"bos_token": BOS_NAMES, "eos_token": EOS_NAMES, "pad_token": PAD_NAMES,
             "unk_token": (unk,) if unk is not None else ("<unk>",)}
    roles = {}
    for role in ROLES:
        value = given.get(role, INFERRED)
        if value is INFERRED and source is not None:
            value = source[role]
            if value is not INFERRED and value is not None and value not in specials:
                warn(f"the model's {source['from'][role]} names {role} {value!r}, which is not a special token of "
                     f"this tokenizer: {role} is left unset (give {role}= to set one)")
                value = None
        if value is INFERRED:
            value = next((n for n in names[role] if n in specials), None)
        elif value is not None:
            if not isinstance(value, str):
                raise ConfigError(f"{role}={value!r} is a {type(value).__name__}; pass the text of one of the "
                                  "tokenizer's special tokens, or None to leave it unset")
            if value not in specials:
                have = ", ".join(map(repr, list(specials)[:8])) + (f" and {len(specials) - 8:,d} more"
                                                                    if len(specials) > 8 else "")
                raise ConfigError(f"{role}={value!r} is not a special token of this tokenizer (it has: "
                                  f"{have or 'none'}); transformers would add it as a new special token, which "
                                  "changes how text is cut into ids: pass one of them, or None")
        roles[role] = value
    return roles


def _config(roles: dict, model_max_length, source: dict | None = None, chat_template=None) -> dict:
    body: dict = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    body.update({k: v for k, v in roles.items() if v is not None})
    if model_max_length is not None:
        if type(model_max_length) is not int or model_max_length < 1:
            raise ConfigError(f"model_max_length={model_max_length!r}: pass a positive int (the longest input "
                              "the model takes, in tokens), or None")
        body["model_max_length"] = model_max_length
    elif source is not None and source["model_max_length"] is not None:
        body["model_max_length"] = source["model_max_length"]
    if chat_template is not None:
        if not isinstance(chat_template, str) or not chat_template.strip():
            raise ConfigError(f"chat_template={chat_template!r}: pass the template's Jinja text (a non-empty str), "
                              "or None")
        try:  # (a template that does not parse had been written: transformers fails on it at apply_chat_template)
            from ..chat import compiled_template

            compiled_template(chat_template)
        except MissingExtraError:  # (no jinja2 here: written unchecked, as transformers reads it)
            pass
        body["chat_template"] = chat_template
    elif source is not None and source["chat_template"] is not None:
        body["chat_template"] = source["chat_template"]
    return body


def save_pretrained(tok, folder, given: dict, model_max_length=None, chat_template=None, overwrite: bool = False
                    ) -> Path:
    """Write ``folder/tokenizer.json`` (``tok.save_huggingface``) and ``folder/tokenizer_config.json`` (the
    roles, ``model_max_length``, ``clean_up_tokenization_spaces: false``), each atomically; the folder is
    made where missing. Everything is checked before the first file is written. A folder holding the files of
    another tokenizer (other bytes than the ones written) is refused unless ``overwrite``. Returns the folder."""
    raw = fs_path(folder, "the folder is {kind}, not a str or a path; pass a folder's path")
    if not raw:
        raise ConfigError("the folder is empty (''); pass a folder's path (the current folder is '.')")
    where = Path(raw)
    if where.exists() and not where.is_dir():
        raise ConfigError(f"{raw!r} is a file, not a folder; save_pretrained writes tokenizer.json and "
                          "tokenizer_config.json into a folder: pass a folder's path")
    source = source_config(tok)
    body = _config(special_roles(tok, given, source), model_max_length, source, chat_template)
    check_writable_folder(where, "the tokenizer folder", raw)
    model = _read_from(tok)
    if model is not None and where.is_dir() and os.path.samefile(where, Path(model).parent):
        raise ConfigError(f"{raw!r} is the folder the tokenizer was read from ({os.path.basename(model)}): its files "
                          "are the model's own, and would be written over or read over the new ones; pass a new "
                          "folder")
    # files transformers reads beside tokenizer_config.json and would let change the roles (special_tokens_map.json,
    # a role not in the vocabulary added as a new token), add tokens (added_tokens.json) or replace the template
    # (chat_template.*): the folder would load as another tokenizer than the one written
    stale = [n for n in _OVERRIDING if (where / n).exists()]
    if stale:
        raise ConfigError(f"the folder {raw!r} holds {', '.join(stale)}, which transformers reads beside "
                          "tokenizer_config.json and which would change the roles, ids or chat template of the "
                          "tokenizer written there; pass a new or empty folder, or remove them first")
    inputs = [] if source is None else source["paths"]  # (the model's own config: never written over)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        resolve_output(where / name, what=f"the tokenizer's {name}", inputs=inputs)
    template = _added_around(tok, body, source)
    # the two files as one change: both written to temporaries, the old tokenizer.json removed, then the config
    # renamed into place and the tokenizer.json last (the contexts close inner first). Killed in between, the
    # folder holds a config without its tokenizer.json, which transformers refuses to load, not an old
    # tokenizer.json beside a new config (or a new one without its roles: no EOS), which it would load as
    # another tokenizer
    # (the old pair moved aside, not removed, until both new files are in place: a failure, a disk error at the last
    # flush, puts them back; it had left the folder with neither tokenizer.json)
    names = ("tokenizer.json", "tokenizer_config.json")
    with moved_aside([where / n for n in names]) as aside, \
            atomic_path(where / "tokenizer.json", inputs=inputs) as tj_tmp, \
            atomic_path(where / "tokenizer_config.json", inputs=inputs) as config_tmp:
        tok.save_huggingface(tj_tmp)
        if template is not None:
            _carry_post_processor(tj_tmp, template, inputs)
        config_tmp.write_text(json_text(body) + "\n", encoding="utf-8")
        new = dict(zip(names, (tj_tmp, config_tmp)))
        old = [n for n in names if (where / n).is_file()]
        if old and not overwrite and any(not filecmp.cmp(where / n, new[n], shallow=False) for n in old):
            raise ConfigError(f"the folder {raw!r} holds {' and '.join(old)} of another tokenizer (other bytes than "
                              "this one's); pass overwrite=True (CLI: --overwrite) to replace them, or a new folder "
                              "(a model's folder of weights without tokenizer files is written into as it is)")
        aside()
    return where


def _added_around(tok, body: dict, source: dict | None) -> dict | None:
    """The ``TemplateProcessing`` post-processor that adds BOS (and EOS) around every text, where the model's
    ``tokenizer_config.json`` asks for them (``add_bos_token``, ``add_eos_token``: Llama 2's and Mistral's slow
    configs, which transformers honours by building that post-processor) and the roles name tokens of the
    vocabulary; else None. A ``.model`` carries no post-processor: without this, the folder written had given no
    BOS where the model's own folder gives one. Only where the model's tokenizer is a ``.model``: a folder with its
    own tokenizer.json gives what that file's post-processor says, whatever the config's flags (transformers 5
    builds the post-processor from them only when it converts a ``.model``; the folder written had added a BOS
    the model's own folder does not)."""
    if source is None or not (source.get("add_bos_token") or source.get("add_eos_token")):
        return None
    model = _read_from(tok)
    if model is None or Path(model).suffix.lower() == ".json":
        return None
    around = {}
    for role in ("bos", "eos"):
        if not source.get(f"add_{role}_token"):
            continue
        text = body.get(f"{role}_token")
        tid = tok.token_to_id(text) if isinstance(text, str) else None
        if tid is None:
            warn(f"the model's tokenizer_config.json says add_{role}_token, but no {role.upper()} token of the "
                 "vocabulary has that role: the folder written adds none (pass the role, e.g. "
                 f"{role}_token='<s>')")
            continue
        around[role] = (text, int(tid))

    def seq(part: str, type_id: int) -> list:
        out = [{"SpecialToken": {"id": around["bos"][0], "type_id": type_id}}] if "bos" in around else []
        out.append({"Sequence": {"id": part, "type_id": type_id}})
        return out + ([{"SpecialToken": {"id": around["eos"][0], "type_id": type_id}}] if "eos" in around else [])

    if not around:
        return None
    return {"type": "TemplateProcessing", "single": seq("A", 0), "pair": seq("A", 0) + seq("B", 1),
            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in around.values()}}


def _carry_post_processor(path: Path, template: dict, inputs) -> None:
    """``template`` as the post-processor of the tokenizer.json just written at ``path``, where it has none (an
    imported file's own is kept)."""
    import json

    from ..._io import write_bytes_atomic

    body = json.loads(read_bytes_limited(path, what="tokenizer.json"))
    if body.get("post_processor") is not None:
        return
    body["post_processor"] = template
    write_bytes_atomic(path, json.dumps(body, ensure_ascii=False).encode("utf-8"), inputs=inputs)


def to_transformers(tok, given: dict, model_max_length=None, chat_template=None):
    """``tok`` as a ``transformers.PreTrainedTokenizerFast`` (the folder :func:`save_pretrained` writes, loaded
    from a temporary folder)."""
    import tempfile

    transformers = require("transformers", "transformers")
    with tempfile.TemporaryDirectory(prefix="tokenmill-hf-") as tmp:
        save_pretrained(tok, tmp, given, model_max_length, chat_template)
        return transformers.PreTrainedTokenizerFast.from_pretrained(os.fspath(tmp))


class PretrainedExport:
    """:meth:`save_pretrained` and :meth:`to_transformers` for a tokenizer with ``save_huggingface``,
    ``special_tokens`` and the vocabulary names (``VocabNames``)."""

    def save_pretrained(self, folder, *, bos_token=INFERRED, eos_token=INFERRED, unk_token=INFERRED,
                        pad_token=INFERRED, model_max_length: int | None = None,
                        chat_template: str | None = None, overwrite: bool = False) -> Path:
        """Write a ``transformers`` tokenizer folder: ``tokenizer.json`` and ``tokenizer_config.json`` (the special
        tokens' roles, as the model's own config says or found by name unless given; ``None`` leaves one unset;
        ``chat_template``: a Jinja template for ``apply_chat_template``, else the model's own), which
        ``AutoTokenizer.from_pretrained(folder)`` loads with this tokenizer's ids
        (``tokenizer/formats/pretrained.py``). A folder already holding the files of another tokenizer is refused
        unless ``overwrite=True`` (a model's folder of weights alone, or one holding this same tokenizer, is written
        into as it is). Returns the folder as a Path.

        >>> import tempfile, tokenmill
        >>> tok = tokenmill.Tokenizer.from_merges([(104, 105)], special_tokens=["<|endoftext|>"])
        >>> with tempfile.TemporaryDirectory() as d:
        ...     sorted(p.name for p in tok.save_pretrained(d, model_max_length=1024).iterdir())
        ['tokenizer.json', 'tokenizer_config.json']
        """
        from ..._validate import check_bool

        given = dict(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, pad_token=pad_token)
        return save_pretrained(self, folder, given, model_max_length, chat_template,
                               check_bool(overwrite, "overwrite"))

    def to_transformers(self, *, bos_token=INFERRED, eos_token=INFERRED, unk_token=INFERRED, pad_token=INFERRED,
                        model_max_length: int | None = None, chat_template: str | None = None):
        """This tokenizer as a ``transformers.PreTrainedTokenizerFast`` (same ids; the roles as in
        :meth:`save_pretrained`). Needs ``pip install 'tokenmill[transformers]'``."""
        given = dict(bos_token=bos_token, eos_token=eos_token, unk_token=unk_token, pad_token=pad_token)
        return to_transformers(self, given, model_max_length, chat_template)
