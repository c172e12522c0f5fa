"""Tokenizers by name, where a path names no file: a Hugging Face Hub repo id (``Qwen/Qwen2.5-7B``) as
``AutoTokenizer.from_pretrained`` takes one, or a tiktoken encoding name (``cl100k_base``, ``o200k_base``) as
``tiktoken.get_encoding`` takes one.

A repo's ``tokenizer.json``, ``tekken.json`` or ``tokenizer.model`` is fetched with ``huggingface_hub`` (its
cache, its login for gated models, ``HF_HUB_OFFLINE`` honoured) and read as that file would be from a folder
(the same schema checks, the same exact import); its ``tokenizer_config.json``, ``special_tokens_map.json`` and
``chat_template.jinja`` come along, for ``save_pretrained`` to carry the model's special-token roles and chat
template over. A tiktoken name is ``tiktoken.get_encoding(name)`` (its cache, its download, its checksums)
converted as any ``tiktoken.Encoding`` is. Either is said once on stderr, so a
mistyped local path that happens to be a repo id is seen, not taken silently; a name whose first folder exists
here (``data/tok``) is a local path, never a repo id.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError, MissingExtraError
from .formats.pretrained import SOURCE_FILES

TIKTOKEN_NAMES = ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony")
HUB_FILES = ("tokenizer.json", "tekken.json", "tokenizer.model")  # (what a folder is read by, in that order)
# HF's repo ids: "owner/name", letters, digits, '-', '_', '.', no leading or trailing '.' or '-', no '--' / '..'
_HUB_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# a name ending as a tokenizer or data file does is a file that is missing, not a repo
_FILE_ENDINGS = (".json", ".model", ".tiktoken", ".txt", ".jsonl", ".parquet", ".bin", ".gz", ".zst")
_SAID: set = set()
_BARS = {"off": False}  # huggingface_hub's download bars turned off (``download_bars``: the CLI's --quiet)


@contextmanager
def download_bars(show: bool):
    """A Hub repo fetched inside this block shows huggingface_hub's download bars only if ``show`` (the CLI's
    progress rule: a terminal and no ``--quiet``); a library caller keeps huggingface_hub's own setting."""
    before = _BARS["off"]
    _BARS["off"] = not show
    try:
        yield
    finally:
        _BARS["off"] = before


def _repo_shaped(raw: str) -> bool:
    return (bool(_HUB_ID.fullmatch(raw)) and "--" not in raw and ".." not in raw
            and not raw.lower().endswith(_FILE_ENDINGS))


def is_hub_id(raw: str) -> bool:
    """Whether ``raw`` (a path that names nothing here) reads as a Hub repo id rather than a missing file.

    >>> [is_hub_id(s) for s in ("meta-llama/Meta-Llama-3-8B", "Qwen/Qwen2.5-7B", "out/tok.json", "/abs/x", "a/b/c")]
    [True, True, False, False, False]
    """
    return _repo_shaped(raw) and not os.path.isdir(raw.split("/")[0])


def not_found_note(raw: str) -> str:
    """What a "does not exist" message adds for a missing path shaped like a repo id that was not looked up on
    the Hub because its first folder exists here (a folder an earlier export made, say)."""
    if _repo_shaped(raw) and os.path.isdir(raw.split("/")[0]):
        return (f" (it was not looked up as a Hugging Face Hub repo id: a folder {raw.split('/')[0]!r} exists here, so "
                "it reads as a path in it; run from another folder, or pass the repo's files' local path)")
    return ""


def _say(key: str, text: str) -> None:
    if key not in _SAID:
        _SAID.add(key)
        print(f"tokenmill: {text}", file=sys.stderr, flush=True)


def rank_options_refused(pattern, special_tokens, what: str) -> ConfigError:
    """The refusal of a rank file's options (``pattern``, ``special_tokens``) given for a tokenizer that carries
    its own (``what``: what it is)."""
    given = " and ".join(n for n, v in (("pattern", pattern), ("special_tokens", special_tokens)) if v)
    return ConfigError(f"{given} (--pattern / --special) apply to rank files only; {what}, which carries its own: "
                       "leave them out")


def named_tokenizer(raw: str, load_folder, from_encoding, *, pattern=None, special_tokens=None):
    """The tokenizer a missing path ``raw`` names (a tiktoken encoding or a Hub repo), or None where it names
    neither. ``load_folder``: how a folder of tokenizer files is read (``adapters.load_tokenizer_path``);
    ``from_encoding``: how a ``tiktoken.Encoding`` is taken (``adapters.as_tokenizer``)."""
    tiktoken_name = raw in TIKTOKEN_NAMES
    rank_options = pattern is not None or bool(special_tokens)
    # (with a rank file's options, a missing path is that rank file: a local one, never looked up on the Hub)
    if not tiktoken_name and (rank_options or not is_hub_id(raw)):
        return None
    if rank_options:
        raise rank_options_refused(pattern, special_tokens, f"{raw!r} is no file here but a tiktoken encoding")
    return _tiktoken(raw, from_encoding) if tiktoken_name else _hub(raw, load_folder)


def _tiktoken(name: str, from_encoding):
    try:
        import tiktoken
    except ImportError:
        raise MissingExtraError(f"tokenizer {name!r} is no file here; as tiktoken's encoding of that name it needs "
                                "tiktoken: pip install 'tokenmill[tiktoken]' (or pass its rank file's path)") from None
    try:
        enc = tiktoken.get_encoding(name)
    except Exception as e:  # noqa: BLE001  (tiktoken's download: network, proxy, checksum errors of every kind)
        raise ConfigError(f"tokenizer {name!r} is no file here, and tiktoken could not load its encoding of that "
                          f"name ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); tiktoken downloads "
                          "it once (network needed, then TIKTOKEN_CACHE_DIR keeps it): pass a rank file's path "
                          "otherwise") from None
    _say("tiktoken:" + name, f"{name!r} is no file here: tiktoken's encoding of that name")
    return from_encoding(enc)


def _hub(repo: str, load_folder):
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingExtraError(f"tokenizer {repo!r} is no file or folder here; as a Hugging Face Hub repo id it "
                                "needs huggingface_hub: pip install 'tokenmill[hf]' (or pass a local path)") from None
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    bars_off = _BARS["off"] and not are_progress_bars_disabled()
    if bars_off:
        disable_progress_bars()
    try:
        # (and the model's own roles and chat template, which save_pretrained carries over)
        folder = Path(snapshot_download(repo, allow_patterns=[*HUB_FILES, *SOURCE_FILES]))
    except Exception as e:  # noqa: BLE001  (the Hub's errors: no such repo, gated, offline, network, HTTP)
        first = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(f"tokenizer {repo!r} is no file or folder here, and fetching it as a Hugging Face Hub repo "
                          f"failed ({type(e).__name__}: {first}); pass a local path, or check the repo id, the "
                          "network (HF_HUB_OFFLINE=1 reads only what is cached) and, for a gated model, "
                          "`hf auth login`") from None
    finally:
        if bars_off:
            enable_progress_bars()
    found = [n for n in HUB_FILES if (folder / n).is_file()]
    if not found:
        raise ConfigError(f"the Hugging Face Hub repo {repo!r} holds none of {', '.join(HUB_FILES)} (at its top "
                          "level); download its tokenizer files yourself and pass their path")
    _say("hub:" + repo, f"{repo!r} is no file or folder here: the Hugging Face Hub repo's {found[0]} ({folder})")
    return load_folder(folder)
