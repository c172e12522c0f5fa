"""Text sources, token sources and (in a later issue) memory-mapped token stores."""

from .source import ArraySource, TokenSource, as_source

__all__ = ["ArraySource", "TokenSource", "as_source"]
