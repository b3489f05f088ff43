"""Natives that need the interpreter itself: `parse_json` and `get_fn_metadata_list`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkernel.scripting.rhai.errors import NO_POS, RhaiRuntimeError, RhaiSyntaxError
from agentkernel.scripting.rhai.stdlib import Library
from agentkernel.scripting.rhai.values import type_name

if TYPE_CHECKING:
    from agentkernel.scripting.rhai.engine import Engine
    from agentkernel.scripting.rhai.runtime import Runtime


def json_as_rhai(text: str) -> tuple[str, list[tuple[int, int]]]:
    """JSON text as a Rhai expression: `{` opens a map (`#{`), `null` is `()`.

    Returns the text and where `#` was inserted (line, column), so syntax
    error positions can be given back in the caller's text, as the reference
    (which reads JSON as a map literal) reports them.
    """
    out: list[str] = []
    inserted: list[tuple[int, int]] = []
    line, column, index, in_string = 1, 1, 0, False
    while index < len(text):
        ch = text[index]
        if in_string:
            if ch == "\\" and index + 1 < len(text):
                out.append(text[index : index + 2])
                index += 2
                column += 2
                continue
            in_string = ch != '"'
        elif ch == '"':
            in_string = True
        elif ch == "{":
            out.append("#")
            inserted.append((line, column))
        elif (
            text.startswith("null", index)
            and not _word_char(text, index - 1)
            and not _word_char(text, index + 4)
        ):
            out.append("()  ")
            index += 4
            column += 4
            continue
        out.append(ch)
        if ch == "\n":
            line, column = line + 1, 1
        else:
            column += 1
        index += 1
    return "".join(out), inserted


def _word_char(text: str, index: int) -> bool:
    return 0 <= index < len(text) and (text[index].isalnum() or text[index] == "_")


def register(library: Library, make_engine: Callable[[], Engine]) -> None:
    """Add the natives; `make_engine` gives the engine `parse_json` evaluates with."""

    def parse_json(ctx: Runtime, text: str) -> Any:
        source, inserted = json_as_rhai(text)
        try:
            value = make_engine().eval(source)
        except RhaiSyntaxError as exc:
            if exc.pos is not None:
                shift = sum(1 for line, col in inserted if line == exc.pos[0] and col < exc.pos[1])
                exc = RhaiSyntaxError(exc.message, (exc.pos[0], exc.pos[1] - shift))
            raise RhaiRuntimeError("ErrorParsing", exc.display(), NO_POS) from None
        if type(value) is not dict:
            raise RhaiRuntimeError(
                "ErrorMismatchOutputType", f"Output type incorrect: {type_name(value)} (expecting map)"
            )
        return value

    def metadata(ctx: Runtime, name: str | None = None) -> list[dict[str, Any]]:
        return [
            {
                "name": fn.name,
                "params": list(getattr(fn, "params", ())),
                "access": "private" if fn.private else "public",
            }
            for (fn_name, _), fn in sorted(ctx.functions.items())
            if name is None or fn_name == name
        ]

    library.register("parse_json", (str,), parse_json, needs_context=True)
    library.register("get_fn_metadata_list", (), lambda ctx: metadata(ctx), needs_context=True)
    library.register("get_fn_metadata_list", (str,), metadata, needs_context=True)
