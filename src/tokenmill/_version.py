"""The release, in one place (the package, the CLI and the report read it)."""

__version__ = "0.1.0"
