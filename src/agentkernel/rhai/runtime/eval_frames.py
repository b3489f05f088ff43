"""The variables an `eval` call site can see, read from and written back to the calling frames.

`eval(text)` runs in the caller's scope (RHAI.md §3): the text reads the
caller's variables, may assign them and may define new ones. The caller's
variables are Python locals of compiled functions (`v<N>_<name>`), Cells
for captured ones, or slots of a list for code compiled apart
(`nesting.py`); `codegen/variables.Visible` lists those in sight at a call site, and
this module walks that list over the frames: once before the text runs
(its values go in), once after (what it assigned comes back).

Writing a function's local from outside: CPython ≥ 3.13 gives
`frame.f_locals` as a write-through view (PEP 667); before that the
documented `PyFrame_LocalsToFast` copies the frame's locals dictionary back
into its fast slots. Only names the text assigned are written, after it
returned or failed, while the caller's frame is suspended in the call.
"""

from __future__ import annotations

import sys
from types import FrameType

from agentkernel.rhai.runtime.runtime import Cell

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # only its interface: compiled code runs without the code generator
    from typing import Any

    from agentkernel.rhai.codegen.variables import Visible

_UNSET: Any = object()


def read_scope(frame: FrameType, visible: Visible | None) -> tuple[dict[str, Any], frozenset[str]]:
    """The values in sight (a shadowed name gives its innermost value) and which are constants."""
    values: dict[str, Any] = {}
    consts: set[str] = set()
    local_values = frame.f_locals
    link = visible
    while link is not None:
        if link.name is None:
            frame = frame.f_back  # type: ignore[assignment]
            local_values = frame.f_locals
        elif link.name not in values:
            value = local_values.get(link.local, _UNSET)
            if value is not _UNSET:
                if link.index >= 0:
                    value = value[link.index]
                values[link.name] = value.v if link.cell else value
                if link.const:
                    consts.add(link.name)
        link = link.parent
    return values, frozenset(consts)


def write_scope(
    frame: FrameType, visible: Visible | None, changed: dict[str, Any], declared: frozenset[str] = frozenset()
) -> None:
    """Store `changed` values into the innermost variables of those names in sight.

    A name in `declared` was declared anew by the text (`let K = …`): the caller's
    variable is shadowed, not assigned, so a closure that captured it keeps the old
    one — its Cell is replaced, not written into.
    """
    link = visible
    pending = dict(changed)
    while link is not None and pending:
        if link.name is None:
            frame = frame.f_back  # type: ignore[assignment]
        elif link.name in pending:
            _store(frame, link, pending.pop(link.name), link.name in declared)
        link = link.parent


def _store(frame: FrameType, link: Visible, value: Any, anew: bool) -> None:
    holder = frame.f_locals.get(link.local, _UNSET)
    if holder is _UNSET:
        return  # not yet bound where the call stands: nothing to write
    if link.index >= 0:
        if link.cell and not anew:
            holder[link.index].v = value
        else:
            holder[link.index] = Cell(value) if link.cell else value
    elif link.cell:
        if anew:
            _set_local(frame, link.local, Cell(value))
        else:
            holder.v = value
    else:
        _set_local(frame, link.local, value)


def _set_local(frame: FrameType, name: str, value: Any) -> None:
    frame.f_locals[name] = value
    if sys.version_info < (3, 13):
        import ctypes

        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
