"""The kernel's built-in tools and hooks (issue 15 §1).

Each built-in is an ordinary tool or hook YAML with its script, in
`tools/` and `hooks/` here, loaded after the project's own folders and
written with the public helpers only: it proves the helper set is enough,
and it is an example users can copy. The one exception is a `python_tool`
(office documents need python-docx), whose `function:` names a callable in
a module of this package, and only of this package: a project's YAML may
not run Python (config/scripts.py refuses `kind: python_tool` anywhere
else).

A template still opts in by name, as for any tool. A project tool or hook
of the same name as a built-in is a load problem naming both, unless its
YAML says `overrides: builtin` (catalog.py).
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS_FOLDER = HERE / "tools"
HOOKS_FOLDER = HERE / "hooks"
FOLDERS = (TOOLS_FOLDER, HOOKS_FOLDER)
PACKAGE = __name__  # a python_tool's module lives below this package

__all__ = ["FOLDERS", "HOOKS_FOLDER", "PACKAGE", "TOOLS_FOLDER"]
