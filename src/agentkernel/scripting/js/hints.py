"""What a JavaScript script should use instead of the Node and browser globals it lacks.

QuickJS gives scripts the language and its standard library, nothing of Node
or of a browser. Script authors, and LLMs writing scripts, reach for `fetch`,
`require` or `process` by habit; QuickJS's bare `ReferenceError: 'fetch' is
not defined` says what is missing but not what to do. These hints name the
kernel's helper for the job and the guide's section (docs/scripts.md), so
the error that reaches the author, or the LLM, says what to write instead.
"""

from __future__ import annotations

import re

_HTTP = "use http_get(url) / http_post(url, body) (docs/scripts.md §8.5)"
_NPM = (
    "scripts cannot load npm or Node modules; write the tool as an .mjs module that imports "
    "a file of your own (import { f } from './lib.mjs'), or use a helper (docs/scripts.md §3.1, §8)"
)
_NODE = (
    "scripts do not run on Node, Deno or Bun; the kernel's helpers do that work: "
    "http_get, fs_read, env_var, caller (docs/scripts.md §8)"
)
_TIMERS = (
    "scripts have no timers; run() goes to completion (within timeout_secs) and the helpers "
    "return their results directly, so do the work without waiting (docs/scripts.md §3.4)"
)
_BROWSER = (
    "scripts do not run in a browser; use globalThis for globals, and return visual blocks "
    "to show tables and charts to the person (docs/scripts.md §6)"
)

# A global that QuickJS lacks → what to use instead.
_INSTEAD: dict[str, str] = {
    "fetch": f"scripts have no fetch; {_HTTP}",
    "XMLHttpRequest": f"scripts have no XMLHttpRequest; {_HTTP}",
    "require": _NPM,
    "process": (
        "scripts have no process; use env_var(name) for the environment "
        "and caller() for who the script runs for (docs/scripts.md §8.1, §8.2)"
    ),
    "Deno": _NODE,
    "Bun": _NODE,
    "__dirname": _NODE,
    "__filename": _NODE,
    "Buffer": (
        "scripts have no Buffer; fs_read_bytes(path) and fs_write_bytes(path, b64) "
        "carry bytes as base64 text (docs/scripts.md §8.7)"
    ),
    "setTimeout": _TIMERS,
    "setInterval": _TIMERS,
    "setImmediate": _TIMERS,
    "window": _BROWSER,
    "document": _BROWSER,
    "navigator": _BROWSER,
    "localStorage": (
        "scripts have no localStorage; state_get(key) / state_set(key, value) keep values "
        "between calls (docs/scripts.md §8.8)"
    ),
}

_NOT_DEFINED = re.compile(r"^ReferenceError: '(?P<name>[^']+)' is not defined$")
_MODULE_NOT_FOUND = re.compile(r"^ReferenceError: module '(?P<name>[^']+)' not found$")


def _is_bare_specifier(name: str) -> bool:
    """`lodash`, `node:fs`: a package name, not a file path QuickJS resolved."""
    return not name.startswith(("/", ".")) and not re.match(r"^[A-Za-z]:[\\/]", name)


def hint_for(message: str) -> str | None:
    """What to do instead, for a QuickJS error message the kernel recognises; else None."""
    missing = _NOT_DEFINED.match(message)
    if missing is not None:
        return _INSTEAD.get(missing["name"])
    module = _MODULE_NOT_FOUND.match(message)
    if module is not None and _is_bare_specifier(module["name"]):
        return _NPM
    return None


__all__ = ["hint_for"]
