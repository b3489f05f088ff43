"""The kernel's built-in tools and hooks.

Each built-in is an ordinary tool or hook YAML with its script, in
`tools/` and `hooks/` here, loaded after the project's own folders and
written with the public helpers only: it proves the helper set is enough,
and it is an example users can copy. The one exception is a `python_tool`
(office documents need python-docx), whose `function:` names a callable in
a module of this package, and only of this package: a project's YAML may
not run Python (config/scripts.py refuses `kind: python_tool` anywhere
else).

A python_tool's function does the kernel's part (checking the arguments,
reading a template through the files service, writing the result to the
scratch folder) and hands whatever untrusted input can make expensive to
its `worker`: a process the call's deadline kills and its memory limit
caps (tools/isolated.py). The work must pickle (a module-level function of
this package, plain values and bytes in and out).

A template still opts in by name, as for any tool. A project tool or hook
of the same name as a built-in is a load problem naming both, unless its
YAML says `overrides: builtin` (tools/catalog.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentkernel.config.python_package import PACKAGE

HERE = Path(__file__).resolve().parent
TOOLS_FOLDER = HERE / "tools"
HOOKS_FOLDER = HERE / "hooks"
FOLDERS = (TOOLS_FOLDER, HOOKS_FOLDER)
# PACKAGE (config/python_package.py) is this package: a python_tool's module lives below it
# what a worker process imports before its first call, so no call pays for it
WORKER_PRELOAD = (
    "docx",
    "markdown_it",
    f"{PACKAGE}.office_work",
    f"{PACKAGE}.markdown_docx",
    f"{PACKAGE}.docx_fields",
)

T = TypeVar("T")


class Worker(Protocol):
    """`worker(function, *args)`: `function(*args)` run in a worker process, within the call's limits.

    Raises ScriptLimitError naming `timeout_secs` or `memory_limit_mb`, and
    ScriptError with the text of a ScriptError the function raised.
    """

    def __call__(self, function: Callable[..., T], /, *args: Any) -> T: ...


__all__ = ["FOLDERS", "HOOKS_FOLDER", "PACKAGE", "TOOLS_FOLDER", "WORKER_PRELOAD", "Worker"]
