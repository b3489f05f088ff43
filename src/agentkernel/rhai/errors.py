"""Rhai errors, with the reference's texts and positions (RHAI.md §12, §15).

Every failure of a Rhai script is one of these; no Python exception may
escape the interpreter. `display()` is what hosts print:
`<message> (line L, position P)`, one line per nested call level.
"""

from __future__ import annotations

from enum import StrEnum

from agentkernel.rhai.syntax.errors import NO_POS, Pos, RhaiError, RhaiSyntaxError, with_position

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any


class ErrorKind(StrEnum):
    """The reference's `EvalAltResult` variants that our run-time errors take.

    A str enum: `err.kind == "ErrorArithmetic"` holds, and a `catch` map shows the
    plain name (`str(kind)`). Errors are built in `failures.py`, one constructor each.
    """

    ARITHMETIC = "ErrorArithmetic"
    ARRAY_BOUNDS = "ErrorArrayBounds"
    ASSIGNMENT_TO_CONSTANT = "ErrorAssignmentToConstant"
    BIT_FIELD_BOUNDS = "ErrorBitFieldBounds"
    DATA_TOO_LARGE = "ErrorDataTooLarge"
    DOT_EXPR = "ErrorDotExpr"
    FOR = "ErrorFor"
    FUNCTION_NOT_FOUND = "ErrorFunctionNotFound"
    IN_FUNCTION_CALL = "ErrorInFunctionCall"
    IN_MODULE = "ErrorInModule"
    INDEXING_TYPE = "ErrorIndexingType"
    MISMATCH_DATA_TYPE = "ErrorMismatchDataType"
    MISMATCH_OUTPUT_TYPE = "ErrorMismatchOutputType"
    MODULE_NOT_FOUND = "ErrorModuleNotFound"
    NON_PURE_METHOD_CALL_ON_CONSTANT = "ErrorNonPureMethodCallOnConstant"
    PARSING = "ErrorParsing"
    RUNTIME = "ErrorRuntime"
    STACK_OVERFLOW = "ErrorStackOverflow"
    STRING_BOUNDS = "ErrorStringBounds"
    TERMINATED = "ErrorTerminated"
    TOO_MANY_MODULES = "ErrorTooManyModules"
    TOO_MANY_OPERATIONS = "ErrorTooManyOperations"
    TOO_MANY_VARIABLES = "ErrorTooManyVariables"
    UNBOUND_THIS = "ErrorUnboundThis"
    VARIABLE_NOT_FOUND = "ErrorVariableNotFound"


class RhaiRuntimeError(RhaiError):
    """A run-time error.

    `kind` is the reference's variant (`ErrorKind.ARITHMETIC`,
    `FUNCTION_NOT_FOUND`, `RUNTIME` for `throw`, …); `message` is the
    text without position; `pos` may be None (arithmetic errors have none);
    `extras` are the additional keys a `catch` map carries (`function`,
    `index`, `length`, …); `value` is the thrown value for `throw v`;
    `catchable` is False for limits (too many operations, stack overflow,
    data too large) and `exit()`; `inner` chains "in call to function" levels.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        pos: Pos | None = None,
        *,
        extras: dict[str, Any] | None = None,
        value: Any = None,
        catchable: bool = True,
        inner: RhaiRuntimeError | None = None,
    ) -> None:
        self.kind = kind
        self.message = message
        self.pos = pos
        self.extras = extras or {}
        self.value = value
        self.catchable = catchable
        self.inner = inner
        super().__init__(message)

    def display(self, call_src: str = "") -> str:
        """The reference's text: nested levels first, each with its own position; a level
        inside a function of a script with a source (a module) says so: `… @ 'lib'`."""
        own = with_position(f"{self.message} @ '{call_src}'" if call_src else self.message, self.pos)
        if self.inner is None:
            return own
        return f"{self.inner.display(self.extras.get('source', ''))}\n{own}"

    def at(self, pos: Pos) -> RhaiRuntimeError:
        """This error positioned at `pos` unless it already has a position."""
        if self.pos is None or self.pos == NO_POS:
            self.pos = pos
        return self

    def __str__(self) -> str:
        return self.display()


__all__ = ["NO_POS", "ErrorKind", "Pos", "RhaiError", "RhaiRuntimeError", "RhaiSyntaxError", "with_position"]
