"""The package's version: what `--version` prints, the User-Agent of `http_*` and the server's OpenAPI say.

A module of its own, importing nothing, so any layer may name it without
importing the package root (whose type-checking view names every layer).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
