"""Lazy exports: a package names what it exports and where each name lives; a name's module is
imported on first access, so ``import tokenmill`` (or ``tokenmill.torch``) loads no optional
dependency and no compiler. The one implementation both public packages use."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, namespace: dict, exports: dict[str, str], extra: tuple[str, ...] = ()):
    """``(__getattr__, __dir__, __all__)`` for ``package``: ``exports`` maps a name to the module
    (relative to ``package``) that defines it; a loaded name is cached in ``namespace``."""
    names = sorted(exports) + list(extra)

    def __getattr__(name: str):
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return names

    return __getattr__, __dir__, names
