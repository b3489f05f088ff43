"""What the two halves of the Rhai parser share: options, settings, errors.

The parser is split the way the reference's is organised: `expr_parser.py`
parses expressions, `parser.py` statements, functions and the whole script.
Both need the parse options, the reference's per-call `ParseSettings` (depth,
position, scope flags) and its error texts, which live here.
"""

from __future__ import annotations

from agentkernel.rhai.syntax.errors import Pos, RhaiSyntaxError
from agentkernel.rhai.syntax.records import record
from agentkernel.rhai.syntax.words import reserved_message

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:  # only its interface: the engine needs the options without the lexer's patterns
    from typing import NoReturn

    from agentkernel.rhai.syntax.lexer import Token

HARD_DEPTH = 256  # used when a depth limit is 0 (unlimited): Python's stack is not

GLOBAL, FN_SCOPE, CLOSURE, BREAKABLE = 1, 2, 4, 8  # the reference's ParseSettingFlags
NOOP, TERMINATED, NEEDS_SEMI = 0, 1, 2  # how a parsed statement ends

FN_AT_GLOBAL_ONLY = (
    "Function definitions must be at global level and cannot be inside a block or another function"
)
TOO_COMPLEX = "Expression exceeds maximum complexity"


@record
class ParseOptions:
    """Parse-time limits (RHAI.md §14); 0 means unlimited.

    `allow_functions=False` is for `eval` text, where defining a function
    (or a closure, which the reference also counts as one) is an error.
    """

    max_expr_depth: int = 64
    max_fn_expr_depth: int = 32
    max_string_size: int = 0
    max_array_size: int = 0
    max_map_size: int = 0
    max_functions: int = 0
    allow_functions: bool = True
    source: str | None = None


def fail(message: str, pos: Pos) -> NoReturn:
    """Raise the syntax error `message` at `pos`."""
    raise RhaiSyntaxError(message, pos)


def missing(token: str, context: str, pos: Pos) -> NoReturn:
    """The reference's MissingToken: "Expecting 'token' context"."""
    fail(f"Expecting '{token}' {context}", pos)


def reserved(word: str, pos: Pos) -> NoReturn:
    """A reserved keyword or symbol used where a name or expression belongs."""
    fail(reserved_message(word), pos)


def lex_error(token: Token) -> NoReturn:
    """Raise the lexical error a `LEXERR` token carries."""
    fail(str(token.value), token.pos)


class Settings:
    """The reference's ParseSettings: nesting level, current position, flags.

    Treated as immutable: every change makes a new one, as the reference's
    `Copy` struct is changed only in the callee's copy.
    """

    __slots__ = ("flags", "level", "limit", "pos")

    def __init__(self, level: int, pos: Pos, flags: int, limit: int) -> None:
        self.level = level
        self.pos = pos
        self.flags = flags
        self.limit = limit

    def at(self, pos: Pos) -> Settings:
        return Settings(self.level, pos, self.flags, self.limit)

    def up(self) -> Settings:
        """One level deeper; "Expression exceeds maximum complexity" past the limit."""
        if self.level >= self.limit:
            fail(TOO_COMPLEX, self.pos)
        return Settings(self.level + 1, self.pos, self.flags, self.limit)

    def up_at(self, pos: Pos) -> Settings:
        return self.up().at(pos)

    def with_flags(self, flags: int) -> Settings:
        return Settings(self.level, self.pos, flags, self.limit)

    def has(self, flag: int) -> bool:
        return bool(self.flags & flag)


class Variables:
    """The variables in sight while parsing, for `Cannot assign to constant X`.

    A stack like the reference's scope (a block's variables end with it),
    indexed by name so that declaring or looking up a name costs the same
    however many variables came before (compile time stays linear).
    """

    __slots__ = ("_consts", "_names", "_where")

    def __init__(self) -> None:
        self._names: list[str] = []
        self._consts: list[bool] = []
        self._where: dict[str, list[int]] = {}  # name -> its entries' indexes, innermost last

    def __len__(self) -> int:
        return len(self._names)

    def push(self, name: str, const: bool = False) -> None:
        self._where.setdefault(name, []).append(len(self._names))
        self._names.append(name)
        self._consts.append(const)

    def declare(self, name: str, const: bool, frame: int) -> None:
        """A `let`/`const` in the current block (entries from `frame` on) reuses its entry."""
        found = self._where.get(name)
        if found and found[-1] >= frame:
            self._consts[found[-1]] = const
        else:
            self.push(name, const)

    def is_constant(self, name: str) -> bool:
        found = self._where.get(name)
        return self._consts[found[-1]] if found else False

    def truncate(self, depth: int) -> None:
        """Forget the entries from `depth` on (a block or loop ended)."""
        while len(self._names) > depth:
            name = self._names.pop()
            self._consts.pop()
            found = self._where[name]
            found.pop()
            if not found:
                del self._where[name]


def depth_limit(limit: int) -> int:
    """The effective nesting limit: 0 (unlimited) and huge values become HARD_DEPTH."""
    return min(limit, HARD_DEPTH) if limit > 0 else HARD_DEPTH


__all__ = [
    "BREAKABLE",
    "CLOSURE",
    "FN_AT_GLOBAL_ONLY",
    "FN_SCOPE",
    "GLOBAL",
    "HARD_DEPTH",
    "NEEDS_SEMI",
    "NOOP",
    "TERMINATED",
    "TOO_COMPLEX",
    "ParseOptions",
    "Settings",
    "Variables",
    "depth_limit",
    "fail",
    "lex_error",
    "missing",
    "reserved",
]
