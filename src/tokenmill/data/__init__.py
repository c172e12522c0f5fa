"""Text sources (files, JSONL, Parquet, datasets, iterables), token sources and the token store."""

from .readers import Source, as_sources, files, hf_dataset, texts
from .source import ArraySource, TokenSource, as_source

__all__ = ["ArraySource", "Source", "TokenSource", "TokenStore", "as_source", "as_sources", "files",
           "hf_dataset", "texts"]


def __getattr__(name: str):
    if name == "TokenStore":  # loaded on use: keeps `import tokenmill.data` light
        from .store import TokenStore

        return TokenStore
    raise AttributeError(f"module 'tokenmill.data' has no attribute {name!r}")
