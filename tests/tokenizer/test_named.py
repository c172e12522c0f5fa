"""Tokenizers by name where no file has it: a Hugging Face Hub repo id (fetched with huggingface_hub: here from a
cache laid out as the Hub's, offline) and a tiktoken encoding name (tiktoken's own cache, offline)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.tokenizer.test_model_tokenizers import _dir
from tokenmill import Tokenizer, as_tokenizer
from tokenmill.errors import ConfigError
from tokenmill.tokenizer import named

TEXT = "Hello world, it's 2026: naïve café — 数字 12345\n\n\tdef f(x): return x"


def _hub_cache(root, repo: str, files: dict) -> None:
    """``root`` laid out as huggingface_hub's cache holding ``repo`` at one revision with ``files`` (name -> source)."""
    d = root / f"models--{repo.replace('/', '--')}"
    snap = d / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (d / "refs").mkdir()
    (d / "refs" / "main").write_text("0" * 40)
    for name, src in files.items():
        shutil.copy(src, snap / name)


def test_a_hub_repo_id_loads_its_tokenizer_json_from_the_hub_cache(tmp_path):
    """As `tokenmill encode --tokenizer meta-llama/Meta-Llama-3-8B` runs for a user whose cache holds the repo (a
    fresh process: huggingface_hub reads HF_HUB_OFFLINE and its cache folder when imported)."""
    llama3 = _dir("TOKENMILL_LLAMA3_DIR", "llama3", "tokenizer.json")
    _hub_cache(tmp_path / "hub", "meta-llama/Meta-Llama-3-8B", {"tokenizer.json": llama3 / "tokenizer.json"})
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    argv = [sys.executable, "-m", "tokenmill", "encode", "--tokenizer", "meta-llama/Meta-Llama-3-8B", "--json", TEXT]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == Tokenizer.from_huggingface(llama3).encode(TEXT)
    assert "'meta-llama/Meta-Llama-3-8B' is no file or folder here: the Hugging Face Hub repo's tokenizer.json" \
        in out.stderr
    missing = subprocess.run([*argv[:5], "meta-llama/Not-There", "hi"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert missing.returncode == 1
    assert "fetching it as a Hugging Face Hub repo failed (LocalEntryNotFoundError" in missing.stderr


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """huggingface_hub's snapshot_download standing in for the Hub: the repos under ``tmp_path/repos``, and every
    call recorded."""
    hub = pytest.importorskip("huggingface_hub")
    calls, bars_off = [], []

    def snapshot_download(repo_id, allow_patterns=None, **kw):
        calls.append((repo_id, allow_patterns))
        bars_off.append(hub.utils.are_progress_bars_disabled())
        d = tmp_path / "repos" / repo_id
        if not d.is_dir():
            raise hub.errors.LocalEntryNotFoundError(f"Cannot find the requested files for {repo_id} in the cache")
        return str(d)

    monkeypatch.setattr(hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(named, "_SAID", set())
    return tmp_path / "repos", calls, bars_off


def test_each_kind_of_repo_is_read_as_its_folder_would_be(fake_hub, capsys):
    repos, calls, _ = fake_hub
    mistral = _dir("TOKENMILL_MISTRAL_DIR", "mistral", "tekken_240911.json")
    (repos / "mistralai" / "Nemo").mkdir(parents=True)
    shutil.copy(mistral / "tekken_240911.json", repos / "mistralai" / "Nemo" / "tekken.json")
    (repos / "mistralai" / "V1").mkdir(parents=True)
    shutil.copy(mistral / "tokenizer.model.v1", repos / "mistralai" / "V1" / "tokenizer.model")
    nemo, v1 = as_tokenizer("mistralai/Nemo"), as_tokenizer("mistralai/V1")
    assert nemo.encode(TEXT) == Tokenizer.from_tekken(mistral / "tekken_240911.json").encode(TEXT)
    assert v1.encode(TEXT) == as_tokenizer(mistral / "tokenizer.model.v1").encode(TEXT)
    want = [*named.HUB_FILES, *named.SOURCE_FILES]
    assert calls == [("mistralai/Nemo", want), ("mistralai/V1", want)]
    err = capsys.readouterr().err
    assert "the Hugging Face Hub repo's tekken.json" in err and "the Hugging Face Hub repo's tokenizer.model" in err
    as_tokenizer("mistralai/V1")
    assert capsys.readouterr().err == ""  # (said once a process)
    (repos / "org" / "empty").mkdir(parents=True)
    (repos / "org" / "empty" / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="the Hugging Face Hub repo 'org/empty' holds none of tokenizer.json, "
                                          "tekken.json, tokenizer.model"):
        as_tokenizer("org/empty")
    with pytest.raises(ConfigError, match=r"'org/nothing' is no file or folder here, and fetching it as a Hugging "
                                          r"Face Hub repo failed \(LocalEntryNotFoundError: Cannot find"):
        as_tokenizer("org/nothing")


def test_local_paths_are_never_taken_for_repo_ids(fake_hub, tmp_path, monkeypatch):
    _, calls, _ = fake_hub
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    for missing in ("data/tok", "out/tok.json", "a/b/c", "./x/y", "org/name.tiktoken"):
        with pytest.raises(ConfigError, match="does not exist.*; pass a tokenmill tokenizer file"):
            as_tokenizer(missing)
    assert calls == []  # (a missing local file is said missing, with no look at the Hub)


def test_a_tiktoken_encoding_name_loads_through_tiktoken_and_its_cache(tmp_path, monkeypatch, capsys):
    """``cl100k_base`` as tiktoken.get_encoding gives it (its cache, filled here with the real rank file under
    the name tiktoken gives the download: no network), converted exactly."""
    tiktoken = pytest.importorskip("tiktoken")
    openai = _dir("TOKENMILL_OPENAI_DIR", "openai", "cl100k_base.tiktoken")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cache = tmp_path / "tiktoken"
    cache.mkdir()
    shutil.copy(openai / "cl100k_base.tiktoken", cache / hashlib.sha1(url.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(named, "_SAID", set())
    tok = as_tokenizer("cl100k_base")
    assert isinstance(tok, Tokenizer)
    assert tok.encode(TEXT) == tiktoken.get_encoding("cl100k_base").encode(TEXT)
    assert tok.special_tokens["<|endoftext|>"] == 100257
    assert "'cl100k_base' is no file here: tiktoken's encoding of that name" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="special_tokens .* apply to rank files only; 'cl100k_base' is no file "
                                          "here but a tiktoken encoding"):
        as_tokenizer("cl100k_base", special_tokens={"<|x|>": 5})


def test_a_missing_path_says_why_it_was_not_taken_for_a_repo_id(fake_hub, tmp_path, monkeypatch):
    _, calls, _ = fake_hub
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mistralai").mkdir()  # (an earlier export's folder, say)
    with pytest.raises(ConfigError, match="not looked up as a Hugging Face Hub repo id: a folder 'mistralai' exists"):
        as_tokenizer("mistralai/Mistral-7B-v0.1")
    # a rank file's options: a missing rank file, never a repo
    with pytest.raises(ConfigError, match="'tokenizers/qwen' does not exist; pass"):
        as_tokenizer("tokenizers/qwen", pattern="qwen2")
    assert calls == []


def test_the_hub_download_bars_follow_the_commands_progress_rule(fake_hub, capsys):
    """A command's progress rule (bars on a terminal or with --progress, never with --quiet) turns
    huggingface_hub's download bars off for the fetch, and back on after it; a library call keeps
    huggingface_hub's own setting."""
    from huggingface_hub.utils import are_progress_bars_disabled

    from tokenmill.cli import main

    repos, _, bars_off = fake_hub
    gpt2 = Tokenizer.from_tiktoken(os.environ.get("TOKENMILL_GPT2_RANKS", ".cache/gpt2.tiktoken"), pattern="gpt2")
    (repos / "org" / "gpt2").mkdir(parents=True)
    gpt2.save_huggingface(repos / "org" / "gpt2" / "tokenizer.json")
    assert not are_progress_bars_disabled()
    as_tokenizer("org/gpt2")
    for flag in ("--progress", "--quiet", None):  # (None: pytest's stderr is no terminal)
        assert main(["encode", "--tokenizer", "org/gpt2", "--json", *([flag] if flag else []), "hi"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == gpt2.encode("hi")
    assert bars_off == [False, False, True, True]
    assert not are_progress_bars_disabled()
