"""The shape of the code stays as the README's architecture describes it: no import circles (an
import inside a function counts too: hiding a circle there is still a circle), and no module
imports another module's private name or a private module of another package."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imports(mods):
    """``{module: {(imported module, name or None)}}`` for every tokenmill import, anywhere in a file."""
    out = {}
    for mod, path in mods.items():
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                if base and base.split(".")[0] == "tokenmill":
                    for a in node.names:
                        full = f"{base}.{a.name}"
                        found.add((full, None) if full in mods else (base, a.name))
            elif isinstance(node, ast.Import):
                found |= {(a.name, None) for a in node.names if a.name.split(".")[0] == "tokenmill"}
        out[mod] = found
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_import_circles():
    mods = _modules()
    graph = {m: {t for t, _ in imps if t in mods and t != m} for m, imps in _imports(mods).items()}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    assert circles == [], f"import circles: {circles}"


def test_no_private_names_across_modules():
    mods = _modules()
    bad = []
    for mod, imps in _imports(mods).items():
        for target, name in imps:
            if name is not None and _private(name) and target != mod:
                bad.append(f"{mod} imports {target}.{name}")
            parts = target.split(".")
            for i, part in enumerate(parts):
                if _private(part):  # a private module belongs to its package
                    owner = ".".join(parts[:i])
                    if not (mod == owner or mod.startswith(owner + ".")):
                        bad.append(f"{mod} imports {target}, private to {owner}")
                    break
    assert bad == []


def test_the_checks_see_an_import_inside_a_function():
    mods = _modules()
    # Tokenizer.from_huggingface imports the format lazily (inside the method): the import is seen
    assert "tokenmill.tokenizer.formats.huggingface" in {t for t, _ in _imports(mods)["tokenmill.tokenizer.model"]}


def test_every_kernel_takes_njit_from_the_jit_module():
    """A kernel module that took numba's ``njit`` itself had none of what ``tokenmill._jit.njit`` installs: its
    disk cache keyed on its own file alone, a damaged cache file a crash, its compile neither said on stderr nor
    kept out of progress-bar rates, no wait at a fork, and numba's slow inliner copies (the general splitter,
    ``_regex_vm``, compiled in 16 s, unannounced)."""
    bad = []
    for mod, path in _modules().items():
        if mod == "tokenmill._jit":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
                bad += [f"{mod}: from {node.module} import {a.name}" for a in node.names if a.name in ("njit", "jit")]
            elif isinstance(node, ast.Attribute) and node.attr in ("njit", "jit") and \
                    isinstance(node.value, ast.Name) and node.value.id == "numba":
                bad.append(f"{mod}: numba.{node.attr}")
    assert not bad, bad
