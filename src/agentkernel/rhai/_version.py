"""The interpreter's own version: with CPython's bytecode magic and the text of its files, it
keys the compile cache (compile_cache.py), as a library owns the key of what it caches."""

__version__ = "1.25.0"  # Rhai 1.25, the language it implements; the last part counts our releases of it
