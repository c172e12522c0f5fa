"""An embedded default corpus: text every Python installation already carries, written by the
Python developers (not by us), so the demo and examples need no download and no data file.

Documents: the topics of the interactive help (``pydoc_data.topics``, ~460 KB of English
reference prose with code), then the docstrings of a fixed list of standard-library modules.
"""

from __future__ import annotations

import importlib
import inspect

# Pure-Python standard-library modules with substantial docstrings; a fixed list keeps the corpus
# identical across runs (missing modules are skipped and counted).
_MODULES = (
    "argparse", "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email", "enum", "fractions", "functools", "heapq", "http.client",
    "inspect", "ipaddress", "itertools", "json", "logging", "os", "pathlib", "pickle", "random", "re",
    "shutil", "statistics", "string", "subprocess", "tarfile", "textwrap", "threading", "typing",
    "unittest", "urllib.parse", "uuid", "zipfile",
)


def default_corpus(*, docstrings: bool = True) -> list[str]:
    """The documents of the embedded corpus, in a fixed order.

    >>> docs = default_corpus(docstrings=False)
    >>> len(docs) > 50 and all(isinstance(d, str) and d for d in docs)
    True
    """
    from pydoc_data.topics import topics

    docs = [topics[k] for k in sorted(topics) if topics[k].strip()]
    if docstrings:
        docs.extend(_docstrings())
    return docs


def _docstrings() -> list[str]:
    out: list[str] = []
    for name in _MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        parts = [inspect.getdoc(mod) or ""]
        for attr in sorted(getattr(mod, "__all__", None) or dir(mod)):
            if attr.startswith("_"):
                continue
            obj = getattr(mod, attr, None)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and (getattr(obj, "__module__", None) or "").startswith(name):
                doc = inspect.getdoc(obj)
                if doc:
                    parts.append(f"{attr}\n{doc}")
        text = "\n\n".join(p for p in parts if p)
        if text:
            out.append(text)
    return out
