"""The expression half of the Rhai parser (RHAI.md §4, §6, §10, §11).

Precedence climbing over the token list, mirroring the reference parser
(Rhai 1.25 `parser.rs`: `parse_expr`, `parse_binary_op`, `parse_unary`,
`parse_primary`, `parse_postfix`, `parse_index_chain`) call for call, so that
depth is counted and errors are placed exactly as the reference does. The
statement half (parser.py) subclasses this and supplies the constructs that
expressions can contain: blocks, `if`/`switch`/loops, closures, and the
statements after `??` (`x ?? break`).
"""

from __future__ import annotations

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.compile_clock import CompileClock
from agentkernel.rhai.syntax.lexer import Pos, Token
from agentkernel.rhai.syntax.parse_rules import bool_mismatch, index_type_error
from agentkernel.rhai.syntax.parse_support import (
    FN_SCOPE,
    ParseOptions,
    Settings,
    fail,
    lex_error,
    missing,
    reserved,
)
from agentkernel.rhai.syntax.words import CALLABLE_RESERVED, METHOD_RESERVED, is_valid_identifier

_PRECEDENCE = {
    "||": 30, "|": 30, "^": 30,
    "&&": 60, "&": 60,
    "==": 90, "!=": 90,
    "in": 110, "!in": 110,
    "<": 130, "<=": 130, ">": 130, ">=": 130,
    "??": 135,
    "..": 140, "..=": 140,
    "+": 150, "-": 150,
    "*": 180, "/": 180, "%": 180,
    "**": 190,
    "<<": 210, ">>": 210,
}  # fmt: skip

_LITERALS = frozenset(["INT", "FLOAT", "STR", "CHAR", "true", "false", "()"])
_RANGE_OPEN_BEFORE = frozenset(["]", ")", "}", ",", ";", "=>"])  # `a..` with an open end
JUMPS = frozenset(["break", "continue", "return", "throw"])


class ExprParser:
    """The token cursor and every expression form; statement forms are hooks."""

    def __init__(self, tokens: list[Token], options: ParseOptions, clock: CompileClock) -> None:
        self.clock = clock
        self.toks = tokens
        self.k = 0
        self.opts = options
        self.pipe_ends_expr = False  # inside switch patterns `|` separates cases
        self.fn_count = 0  # script functions plus closures: the reference's `lib`

    # -- cursor --------------------------------------------------------------------

    def peek(self) -> Token:
        return self.toks[self.k]

    def next(self) -> Token:
        token = self.toks[self.k]
        if token.kind != "EOF":
            self.k += 1
        return token

    def match(self, kind: str) -> bool:
        if self.toks[self.k].kind == kind:
            self.k += 1
            return True
        return False

    # -- hooks: statement forms that appear inside expressions (parser.py) ------------

    def block(self, s: Settings) -> ast.Block:
        """`{ statements }`."""
        raise NotImplementedError

    def statement(self, settings: Settings) -> tuple[ast.Stmt | None, int]:
        """One statement and how it ends (NOOP, TERMINATED or NEEDS_SEMI)."""
        raise NotImplementedError

    def block_form(self, s: Settings, kind: str) -> ast.Expr | None:
        """`{…}`, `if`, `switch`, `while`/`loop`, `for` when `kind` starts one, else None."""
        raise NotImplementedError

    def do_loop(self, s: Settings) -> ast.DoLoop:
        """`do { } while|until cond`."""
        raise NotImplementedError

    def closure(self, s: Settings) -> ast.Closure:
        """`|params| body`."""
        raise NotImplementedError

    # -- names and conditions -------------------------------------------------------

    def var_name(self) -> tuple[str, Pos]:
        """A name being declared (`let x`, `for x`, `catch (x)`, `ns::x`) and its position."""
        token = self.next()
        if token.kind == "IDENT":
            return str(token.value), token.pos
        if token.kind == "RESERVED" and is_valid_identifier(str(token.value)):
            reserved(str(token.value), token.pos)
        if token.kind == "LEXERR":
            lex_error(token)
        fail("Expecting name of a variable", token.pos)

    @staticmethod
    def ensure_bool(expr: ast.Expr) -> None:
        """Reject a literal that can never be a bool where one is required."""
        kind = bool_mismatch(expr)
        if kind is not None:
            fail(f"Expecting a boolean expression, not {kind}", ast.start_pos(expr))

    # -- expressions -------------------------------------------------------------------

    def expr(self, s: Settings) -> ast.Expr:
        self.clock.tick()
        s = s.at(self.peek().pos).up()
        return self._binary(s, 1, self._unary(s))

    def _precedence(self, token: Token) -> int:
        """The binding power of `token` as a binary operator (0: not one)."""
        if token.kind == "RESERVED" and not is_valid_identifier(str(token.value)):
            fail(f"Unknown operator: '{token.value}'", token.pos)
        return _PRECEDENCE.get(token.kind, 0)

    def _binary(self, s: Settings, parent: int, lhs: ast.Expr) -> ast.Expr:
        """Precedence climbing; each operator takes the chain one level deeper."""
        s = s.at(ast.expr_pos(lhs))
        root = lhs
        while True:
            op = self.peek()
            if self.pipe_ends_expr and op.kind == "|":
                return root
            precedence = self._precedence(op)
            if precedence < parent or (precedence == parent and op.kind != "**"):
                return root
            self.k += 1
            rhs = self._binary_rhs(s, op)
            following = self._precedence(self.peek())
            if precedence < following or (precedence == following and op.kind == "**"):
                rhs = self._binary(s.up(), precedence, rhs)
            s = s.up_at(op.pos)
            root = self._combine(op, root, rhs)

    def _binary_rhs(self, s: Settings, op: Token) -> ast.Expr:
        after = self.peek()
        if op.kind == "??" and after.kind in JUMPS:
            stmt, _ = self.statement(s)
            assert isinstance(stmt, ast.ExprStmt)
            return stmt.expr
        if op.kind in ("..", "..=") and after.kind in _RANGE_OPEN_BEFORE:
            return ast.Literal(None, after.pos)
        return self._unary(s)

    def _combine(self, op: Token, left: ast.Expr, right: ast.Expr) -> ast.Expr:
        kind, pos = op.kind, op.pos
        if kind in ("&&", "||"):
            self.ensure_bool(left)
            self.ensure_bool(right)
            if kind == "&&":
                return ast.And(left, right, left.pos if isinstance(left, ast.And) else pos)
            return ast.Or(left, right, left.pos if isinstance(left, ast.Or) else pos)
        if kind == "??" and is_coalesce(left):
            pos = left.pos
        return ast.Binary(kind, left, right, pos)

    def _unary(self, s: Settings) -> ast.Expr:
        token = self.peek()
        if self.pipe_ends_expr and token.kind == "|":
            fail("Unexpected '|'", token.pos)
        s = s.at(token.pos)
        kind = token.kind
        if kind in ("-", "u-", "+", "u+", "!"):
            self.k += 1
            operand = self._unary(s.up())
            return _apply_unary(kind[-1], operand, token.pos)
        if kind == "EOF":
            fail("Script is incomplete", token.pos)
        return self._primary(s)

    def _primary(self, s: Settings) -> ast.Expr:
        token = self.peek()
        if self.pipe_ends_expr and token.kind == "|":
            fail("Unexpected '|'", token.pos)
        s = s.at(token.pos)
        node = self._primary_root(s, token)
        if self.pipe_ends_expr and self.peek().kind == "|":
            return node
        return self._postfix(s, node)

    def _primary_root(self, s: Settings, token: Token) -> ast.Expr:
        kind = token.kind
        if kind in _LITERALS:
            self.k += 1
            return ast.Literal(_literal_value(token), token.pos)
        if kind in ("..", "..="):
            return ast.Literal(0, token.pos)  # `..5` is `0..5`; the `..` stays
        compound = self._compound(s, kind)
        if compound is not None:
            return compound
        if kind in ("|", "||"):
            if self.opts.max_functions and self.fn_count >= self.opts.max_functions:
                fail("Number of functions defined exceeds maximum limit", token.pos)
            return self.closure(s)
        if kind == "IDENT":
            self.k += 1
            return ast.Var(str(token.value), token.pos)
        if kind == "RESERVED":
            return self._reserved_word(s, token)
        if kind == "EOF":
            fail("Script is incomplete", token.pos)
        if kind == "LEXERR":
            self.k += 1
            lex_error(token)
        fail(f"Unexpected '{token.display()}'", token.pos)

    def _compound(self, s: Settings, kind: str) -> ast.Expr | None:
        """Bracketed and keyword expressions: blocks, `(…)`, `[…]`, `#{…}`, if, loops…"""
        if kind == "(":
            return self._paren(s)
        if kind == "ISTR":
            return self._interpolated(s.up())
        if kind == "[":
            return self._array(s.up())
        if kind == "#{":
            return self._map(s.up())
        if kind == "do":
            return self.do_loop(s.up())
        return self.block_form(s, kind)

    def _reserved_word(self, s: Settings, token: Token) -> ast.Expr:
        """`print(…)`, `Fn(…)` and co. are calls; `this` only inside functions."""
        self.k += 1
        word = str(token.value)
        if self.peek().kind in ("(", "!", "()") and word in CALLABLE_RESERVED:
            return ast.Var(word, token.pos)
        if word == "this":
            if not s.has(FN_SCOPE):
                fail("'this' can only be used in functions", token.pos)
            return ast.This(token.pos)
        reserved(word, token.pos)

    def _paren(self, s: Settings) -> ast.Expr:
        opener = self.next()
        inner = self.expr(s.at(opener.pos).up())
        closer = self.next()
        if closer.kind != ")":
            if closer.kind == "LEXERR":
                lex_error(closer)
            missing(")", "for a matching ( in this expression", closer.pos)
        return inner

    def _interpolated(self, s: Settings) -> ast.Interpolated:
        """`` `text ${ block } text` ``: the lexer hands over text and `${` blocks in turn."""
        first = self.next()
        parts: list[str | ast.Block] = [str(first.value)] if first.value else []
        while True:
            parts.append(self.block(s))
            text = self.next()
            if text.kind == "LEXERR":
                lex_error(text)
            if text.value:
                parts.append(str(text.value))
            if text.kind != "ISTR":
                return ast.Interpolated(tuple(parts), first.pos)

    def _array(self, s: Settings) -> ast.ArrayLit:
        opener = self.next()
        s = s.at(opener.pos)
        limit = self.opts.max_array_size
        items: list[ast.Expr] = []
        while True:
            if limit and len(items) >= limit:
                fail(f"Size of array literal exceeds the maximum limit ({limit})", self.peek().pos)
            token = self.peek()
            if token.kind == "]":
                self.k += 1
                return ast.ArrayLit(tuple(items), opener.pos)
            if token.kind == "EOF":
                missing("]", "to end this array literal", token.pos)
            items.append(self.expr(s.up()))
            self._list_separator(
                "]", "to end this array literal", "to separate the items of this array literal"
            )

    def _list_separator(self, closer: str, end_context: str, separate_context: str) -> None:
        token = self.peek()
        if token.kind == ",":
            self.k += 1
        elif token.kind == closer:
            return
        elif token.kind == "EOF":
            missing(closer, end_context, token.pos)
        elif token.kind == "LEXERR":
            lex_error(token)
        else:
            missing(",", separate_context, token.pos)

    def _map(self, s: Settings) -> ast.MapLit:
        opener = self.next()
        s = s.at(opener.pos)
        items: list[tuple[str, ast.Expr]] = []
        keys: set[str] = set()  # the duplicate check stays O(1) however big the literal
        while True:
            token = self.peek()
            if token.kind == "}":
                self.k += 1
                return ast.MapLit(tuple(items), opener.pos)
            if token.kind == "EOF":
                missing("}", "to end this object map literal", token.pos)
            name = self._map_key(keys)
            keys.add(name)
            colon = self.next()
            if colon.kind != ":":
                if colon.kind == "LEXERR":
                    lex_error(colon)
                missing(":", f"to follow the property '{name}' in this object map literal", colon.pos)
            limit = self.opts.max_map_size
            if limit and len(items) >= limit:
                message = f"Number of properties in object map literal exceeds the maximum limit ({limit})"
                fail(message, self.peek().pos)
            items.append((name, self.expr(s.up())))
            self._map_separator()

    def _map_key(self, keys: set[str]) -> str:
        token = self.next()
        if token.kind in ("IDENT", "STR"):
            name = str(token.value)
            if name in keys:
                fail(f"Duplicated property for object map literal: {name}", token.pos)
            return name
        if token.kind == "RESERVED" and is_valid_identifier(str(token.value)):
            reserved(str(token.value), token.pos)
        if token.kind == "LEXERR":
            lex_error(token)
        if token.kind == "EOF" or (not keys and token.kind != "ISTR"):
            missing("}", "to end this object map literal", token.pos)
        fail("Expecting name of a property", token.pos)

    def _map_separator(self) -> None:
        token = self.peek()
        if token.kind == ",":
            self.k += 1
        elif token.kind == "IDENT":
            missing(",", "to separate the items of this object map literal", token.pos)
        elif token.kind == "LEXERR":
            lex_error(token)
        elif token.kind != "}":
            missing("}", "to end this object map literal", token.pos)

    # -- postfix: calls, namespaces, properties, indexing ------------------------------

    def _postfix(self, s: Settings, lhs: ast.Expr) -> ast.Expr:
        """Calls, `ns::x`, `.prop`, `.method()`, `[index]` (and `?.`/`?[`)."""
        name_pos = lhs.pos
        while True:
            token = self.peek()
            kind = token.kind
            is_var = isinstance(lhs, ast.Var)
            if kind not in (".", "?.", "[", "?[") and not (is_var and kind in ("(", "()", "!", "::")):
                return lhs
            self.k += 1
            s = s.at(token.pos)
            if isinstance(lhs, ast.Var) and kind in ("(", "()", "!"):
                lhs = self._call(s.at(name_pos), lhs, token)
            elif isinstance(lhs, ast.Var) and kind == "::":
                name, name_pos = self.var_name()
                namespace = lhs.name if lhs.namespace is None else f"{lhs.namespace}::{lhs.name}"
                lhs = ast.Var(name, lhs.pos, namespace)
            elif kind in ("[", "?["):
                lhs = self._index_chain(s.up(), lhs, kind == "?[", check_types=True)
            else:
                lhs = self._dot(s, lhs, token)

    def _call(self, s: Settings, var: ast.Var, opener: Token) -> ast.Call:
        """`f(args)`, `f()`, `f!(args)` (run in the caller's scope), `ns::f(args)`."""
        capture = opener.kind == "!"
        if capture:
            if var.namespace is not None:
                if self.peek().kind in ("(", "()"):
                    fail("Unexpected '!'", opener.pos)
                fail("'!' cannot be used to call module functions", opener.pos)
            opener = self._call_opener()
        args = self._args(s, var.name, no_args=opener.kind == "()")
        return ast.Call(var.name, args, s.pos, var.namespace, capture)

    def _call_opener(self) -> Token:
        opener = self.peek()
        if opener.kind not in ("(", "()"):
            missing("(", "to start arguments list of function call", opener.pos)
        self.k += 1
        return opener

    def _args(self, s: Settings, name: str, *, no_args: bool) -> tuple[ast.Expr, ...]:
        if no_args:
            return ()
        close_context = f"to close the arguments list of this function call '{name}'"
        token = self.peek()
        if token.kind == "EOF":
            missing(")", close_context, token.pos)
        if token.kind == "LEXERR":
            lex_error(token)
        if token.kind == ")":
            self.k += 1
            return ()
        s = s.up()
        args: list[ast.Expr] = []
        while True:
            if self.peek().kind != ")":
                args.append(self.expr(s))
            token = self.peek()
            if token.kind == ")":
                self.k += 1
                return tuple(args)
            if token.kind == ",":
                self.k += 1
                continue
            if token.kind == "EOF":
                missing(")", close_context, token.pos)
            if token.kind == "LEXERR":
                lex_error(token)
            missing(",", f"to separate the arguments to function call '{name}'", token.pos)

    def _dot(self, s: Settings, target: ast.Expr, dot: Token) -> ast.Expr:
        """`.name`, `.name(args)` and the rest of the chain after them."""
        token = self.peek()
        word = str(token.value)
        if token.kind == "RESERVED" and word not in METHOD_RESERVED:
            reserved(word, token.pos)
        if token.kind not in ("IDENT", "RESERVED"):
            fail("Expecting name of a property", token.pos)
        s = s.up().at(token.pos)
        self.k += 1
        after = self.peek()
        if token.kind == "RESERVED" and after.kind not in ("(", "!", "()"):
            reserved(word, token.pos)
        if after.kind == "::":
            fail("Invalid symbol encountered: '::'", after.pos)
        optional = dot.kind == "?."
        if after.kind not in ("(", "()", "!"):
            return self._postfix(s, ast.Property(target, word, token.pos, optional, dot.pos))
        self.k += 1
        opener = self._call_opener() if after.kind == "!" else after
        args = self._args(s, word, no_args=opener.kind == "()")
        method = ast.MethodCall(target, word, args, token.pos, optional, dot.pos)
        chain = self._postfix(s, method)
        if after.kind == "!" and chain is method:
            message = "method-call style does not support running within the caller's scope"
            fail(message, token.pos)
        return chain

    def _index_chain(self, s: Settings, target: ast.Expr, optional: bool, *, check_types: bool) -> ast.Expr:
        """`[i]` and any `[j]` right after it, one level deeper each (as the reference)."""
        index = self.expr(s.up())
        if check_types:
            problem = index_type_error(target, index)
            if problem is not None:
                fail(problem, ast.start_pos(index))
        token = self.peek()
        if token.kind != "]":
            if token.kind == "LEXERR":
                lex_error(token)
            missing("]", "for a matching [ in this index expression", token.pos)
        self.k += 1
        node = ast.Index(target, index, s.pos, optional)
        following = self.peek()
        if following.kind not in ("[", "?["):
            return node
        self.k += 1
        deeper = s.at(following.pos).up()
        return self._index_chain(deeper, node, following.kind == "?[", check_types=False)


def _literal_value(token: Token) -> bool | int | float | str | None:
    if token.kind == "()":
        return None
    if token.kind in ("true", "false"):
        return token.kind == "true"
    value = token.value
    assert isinstance(value, int | float | str)
    return value


def _apply_unary(op: str, operand: ast.Expr, pos: Pos) -> ast.Expr:
    """`-`/`+` on a number literal fold into it (`-9223372036854775808` works)."""
    if op in "-+" and isinstance(operand, ast.Literal) and type(operand.value) in (int, float):
        value = operand.value
        assert isinstance(value, int | float)
        if op == "+":
            return operand
        if type(value) is int and value == -(1 << 63):
            return ast.Literal(float(1 << 63), pos)  # i64::MIN cannot be negated: a float
        return ast.Literal(-value, pos)
    return ast.Unary(op, operand, pos)


def is_coalesce(expr: ast.Expr) -> bool:
    """Is this `a ?? b`?"""
    return isinstance(expr, ast.Binary) and expr.op == "??"


__all__ = ["JUMPS", "ExprParser", "is_coalesce"]
