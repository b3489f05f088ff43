"""The Rhai parser: source text to `ast.Script` (RHAI.md §1, §3–§12).

A hand-written recursive-descent parser with precedence climbing that
mirrors the reference parser (Rhai 1.25 `parser.rs`) function for function.
The mirroring is deliberate. The reference counts expression depth as it
recurses, including once per operator of a flat chain (so `a + b + …` with
63 operators is already too complex at the top level, 29 inside a
function); it reports every error at one particular token; and it accepts
a few odd forms (`(f)(1)` is a call, `..5` is `0..5`, a `fn` may be defined
in a switch arm at global level). Following its structure keeps all of that
identical. What it builds is our AST (ast.py): left-nested chains instead of
the reference's right-nested ones, with the reference's error positions.

This module holds statements, blocks, functions, closures and control flow;
expressions are in `expr_parser.py`, the shape checks in `parse_rules.py`.
Only `RhaiSyntaxError` ever escapes: nesting is bounded by the depth limits
(and a hard cap when they are disabled), and the token list always ends in
an `EOF` token that is never consumed.
"""

from __future__ import annotations

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.compile_clock import CompileClock
from agentkernel.rhai.syntax.errors import RhaiSyntaxError
from agentkernel.rhai.syntax.expr_parser import JUMPS, ExprParser, is_coalesce
from agentkernel.rhai.syntax.lexer import Pos, Token, tokenize
from agentkernel.rhai.syntax.parse_rules import (
    CaseKind,
    case_kind,
    invalid_lvalue,
    is_constant,
    iterable_mismatch,
)
from agentkernel.rhai.syntax.parse_support import (
    BREAKABLE,
    CLOSURE,
    FN_AT_GLOBAL_ONLY,
    FN_SCOPE,
    GLOBAL,
    NEEDS_SEMI,
    NOOP,
    TERMINATED,
    TOO_COMPLEX,
    ParseOptions,
    Settings,
    Variables,
    depth_limit,
    fail,
    lex_error,
    missing,
    reserved,
)
from agentkernel.rhai.syntax.words import STANDARD_KEYWORDS

_OP_ASSIGN = {
    "+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "**=": "**",
    "<<=": "<<", ">>=": ">>", "&=": "&", "|=": "|", "^=": "^",
}  # fmt: skip


def parse(source: str, options: ParseOptions | None = None, clock: CompileClock | None = None) -> ast.Script:
    """Parse a whole script; raises RhaiSyntaxError with the reference's text
    (and `Script terminated` once past the clock's deadline)."""
    opts = options or ParseOptions()
    clock = clock or CompileClock()
    parser = Parser(tokenize(source, opts.max_string_size, clock), opts, clock)
    try:
        return parser.script()
    except RecursionError:
        raise RhaiSyntaxError(TOO_COMPLEX, parser.peek().pos) from None


class Parser(ExprParser):
    """One parse: expressions (inherited), statements, the variable stack for
    constant checks, and the functions (and closures) defined so far."""

    def __init__(self, tokens: list[Token], options: ParseOptions, clock: CompileClock) -> None:
        super().__init__(tokens, options, clock)
        self.stack = Variables()  # the visible variables, for the constant checks
        self.frame = 0  # where the current block's variables start in `stack`
        self.functions: list[ast.FnDef] = []
        self.fn_keys: set[tuple[str, int, str | None]] = set()

    # -- script and statements -----------------------------------------------------

    def script(self) -> ast.Script:
        settings = Settings(0, (1, 0), GLOBAL, depth_limit(self.opts.max_expr_depth))
        stmts: list[ast.Stmt] = []
        while self.peek().kind != "EOF":
            stmt, ending = self.statement(settings)
            if ending == NOOP:
                continue
            if stmt is not None:
                stmts.append(stmt)
            self._end_statement(ending, "EOF")
        if not self.opts.allow_functions and self.fn_count:
            raise RhaiSyntaxError(FN_AT_GLOBAL_ONLY, None)
        return ast.Script(tuple(stmts), tuple(self.functions), self.opts.source)

    def _end_statement(self, ending: int, closer: str) -> bool:
        """Consume what may follow a statement; True when `closer` was consumed."""
        token = self.peek()
        if token.kind == closer:
            if closer != "EOF":
                self.k += 1
            return True
        if token.kind == ";" and (ending == NEEDS_SEMI or closer != "EOF"):
            self.k += 1
        elif ending != TERMINATED:
            if token.kind == "LEXERR":
                lex_error(token)
            missing(";", "to terminate this statement", token.pos)
        return False

    def statement(self, settings: Settings) -> tuple[ast.Stmt | None, int]:
        """One statement and how it ends (a no-op, a self-terminated block form, or
        one that needs a `;` before the next statement)."""
        self.clock.tick()
        token = self.peek()
        kind = token.kind
        if kind == "EOF":
            return None, NOOP
        s = settings.at(token.pos)
        if kind == ";":
            self.k += 1
            return None, NOOP
        if kind in ("fn", "private"):
            self._fn_definition(s, token)
            return None, NOOP
        block_form = self.block_form(s, kind)
        if block_form is not None:
            return ast.ExprStmt(block_form, block_form.pos), TERMINATED
        return self._simple_statement(s, token)

    def block_form(self, s: Settings, kind: str) -> ast.Expr | None:
        """Statements that need no `;` after them: blocks, if, switch, loops, for."""
        if kind == "{":
            return self.block(s.up())
        if kind == "if":
            return self._if(s.up())
        if kind == "switch":
            return self._switch(s.up())
        if kind in ("while", "loop"):
            return self._while(s.up())
        if kind == "for":
            return self._for(s.up())
        return None

    def _simple_statement(self, s: Settings, token: Token) -> tuple[ast.Stmt | None, int]:
        kind = token.kind
        if kind == "try":
            return self._try(s.up()), TERMINATED
        if kind == "do":
            node = self.do_loop(s.up())
            return ast.ExprStmt(node, node.pos), NEEDS_SEMI
        if kind in JUMPS:
            jump = self._jump(s, token)
            return ast.ExprStmt(jump, jump.pos), NEEDS_SEMI
        if kind in ("let", "const"):
            return self._let(s.up(), kind == "const"), NEEDS_SEMI
        if kind == "import":
            return self._import(s.up()), NEEDS_SEMI
        if kind == "export":
            if not s.has(GLOBAL):
                fail("Export statement can only appear at global level", token.pos)
            return self._export(s.up()), NEEDS_SEMI
        return self._expr_statement(s.up()), NEEDS_SEMI

    def _jump(self, s: Settings, token: Token) -> ast.Expr:
        """`break [v]`, `continue`, `return [v]`, `throw [v]`."""
        kind = token.kind
        if kind in ("break", "continue") and not s.has(BREAKABLE):
            fail("Break statement should only be used inside a loop", token.pos)
        self.k += 1
        if kind == "continue":
            return ast.Continue(token.pos)
        value = self._optional_expr(s.up())
        if kind == "break":
            return ast.Break(value, token.pos)
        if kind == "return":
            return ast.Return(value, token.pos)
        return ast.Throw(value, token.pos)

    def _optional_expr(self, s: Settings) -> ast.Expr | None:
        """An expression if one starts here: the reference tries to parse one and
        takes "nothing" when the attempt fails without consuming a token."""
        start = self.k
        try:
            return self.expr(s)
        except RhaiSyntaxError:
            if self.k == start:
                return None
            raise

    def block(self, s: Settings) -> ast.Block:
        """`{ statements }`; its variables end with it."""
        brace = self.next()
        if brace.kind != "{":
            if brace.kind == "LEXERR":
                lex_error(brace)
            missing("{", "to start a statement block", brace.pos)
        inner = s.up_at(brace.pos)
        inner = inner.with_flags(inner.flags & ~GLOBAL)
        outer_frame, self.frame = self.frame, len(self.stack)
        stmts: list[ast.Stmt] = []
        while True:
            token = self.peek()
            if token.kind == "}":
                self.k += 1
                break
            if token.kind == "EOF":
                missing("}", "to terminate this block", token.pos)
            stmt, ending = self.statement(inner)
            if ending == NOOP:
                continue
            if stmt is not None:
                stmts.append(stmt)
            if self._end_statement(ending, "}"):
                break
        self.stack.truncate(self.frame)
        self.frame = outer_frame
        return ast.Block(tuple(stmts), brace.pos)

    def _expr_statement(self, s: Settings) -> ast.Stmt:
        s = s.at(self.peek().pos)
        target = self.expr(s)
        token = self.peek()
        if token.kind != "=" and token.kind not in _OP_ASSIGN:
            return ast.ExprStmt(target, ast.start_pos(target))
        self.k += 1
        value = self.expr(s.at(token.pos))
        return self._assignment(target, _OP_ASSIGN.get(token.kind), value, token.pos)

    def _assignment(self, target: ast.Expr, op: str | None, value: ast.Expr, pos: Pos) -> ast.Assign:
        """Check the target as the reference does, then build the assignment."""
        if isinstance(target, ast.Var):
            if target.namespace is None and self._is_constant(target.name):
                fail(f"Cannot assign to constant {target.name}", target.pos)
        elif isinstance(target, ast.Property | ast.MethodCall | ast.Index):
            bad = invalid_lvalue(target)
            if bad is not None:
                fail("Expression cannot be assigned to", bad)
        elif isinstance(target, ast.This):
            pass
        elif is_constant(target):
            fail("Cannot assign to a constant value", ast.start_pos(target))
        elif op is None and (isinstance(target, ast.And | ast.Or) or is_coalesce(target)):
            fail("Possibly a typo of '=='?", pos)
        else:
            fail("Expression cannot be assigned to", ast.expr_pos(target))
        return ast.Assign(target, op, value, pos)

    # -- variables -------------------------------------------------------------------

    def _declare(self, name: str, const: bool) -> None:
        """A `let`/`const` in the current block reuses its entry; else a new one."""
        self.stack.declare(name, const, self.frame)

    def _is_constant(self, name: str) -> bool:
        return self.stack.is_constant(name)

    def _let(self, s: Settings, const: bool) -> ast.Let:
        keyword = self.next()
        s = s.at(keyword.pos)
        name, _ = self.var_name()
        value = self.expr(s.up()) if self.match("=") else None
        self._declare(name, const)
        return ast.Let(name, value, const, keyword.pos)

    def _import(self, s: Settings) -> ast.Import:
        keyword = self.next()
        path = self.expr(s.up_at(keyword.pos))
        alias = self.var_name()[0] if self.match("as") else None
        return ast.Import(path, alias, keyword.pos)

    def _export(self, s: Settings) -> ast.Export:
        """`export let/const x = …` (the declaration, exported under its own name) or
        `export x [as y]` (a variable in sight, exported under `y`)."""
        keyword = self.next()
        s = s.at(keyword.pos)
        if self.peek().kind in ("let", "const"):
            decl = self._let(s.up(), self.peek().kind == "const")
            return ast.Export(decl.name, decl.name, decl.pos, decl)
        name, pos = self.var_name()
        alias = self.var_name()[0] if self.match("as") else name
        return ast.Export(name, alias, pos)

    # -- functions and closures ---------------------------------------------------

    def _enter_function(self) -> tuple[Variables, int, bool]:
        """A function body sees none of the enclosing variables."""
        saved = (self.stack, self.frame, self.pipe_ends_expr)
        self.stack, self.frame, self.pipe_ends_expr = Variables(), 0, False
        return saved

    def _leave_function(self, saved: tuple[Variables, int, bool]) -> None:
        self.stack, self.frame, self.pipe_ends_expr = saved

    def _fn_definition(self, s: Settings, first: Token) -> None:
        private = first.kind == "private"
        if private:
            self.k += 1
        fn = self.next()
        if fn.kind != "fn":
            missing("fn", "following 'private'", fn.pos)
        if not s.has(GLOBAL):
            fail(FN_AT_GLOBAL_ONLY, first.pos)
        if self.opts.max_functions and self.fn_count >= self.opts.max_functions:
            fail("Number of functions defined exceeds maximum limit", fn.pos)
        saved = self._enter_function()
        settings = Settings(0, fn.pos, FN_SCOPE, depth_limit(self.opts.max_fn_expr_depth))
        definition = self._function(settings, private, fn.pos)
        self._leave_function(saved)
        key = (definition.name, len(definition.params), definition.this_type)
        if key in self.fn_keys:
            fail(_duplicate_function(definition.name, len(definition.params)), fn.pos)
        self.fn_keys.add(key)
        self.functions.append(definition)
        self.fn_count += 1

    def _function(self, s: Settings, private: bool, fn_pos: Pos) -> ast.FnDef:
        s = s.up()
        name_token, this_type = self._method_type()
        if name_token.kind == "RESERVED":
            reserved(str(name_token.value), name_token.pos)
        if name_token.kind != "IDENT":
            fail("Expecting function name in function declaration", name_token.pos)
        name = str(name_token.value)
        params = self._fn_params(name)
        if self.peek().kind != "{":
            fail(f"Expecting body statement block for function {name}", self.peek().pos)
        body = self.block(s)
        return ast.FnDef(name, params, body, fn_pos, private, this_type)

    def _method_type(self) -> tuple[Token, str | None]:
        """`fn int.dbl()` / `fn "My Type".m()`: the name token and the `this` type."""
        token = self.next()
        after = self.peek()
        if token.kind == "STR" and after.kind != ".":
            missing(".", "after the type name for 'this'", after.pos)
        if token.kind in ("STR", "IDENT") and after.kind == ".":
            self.k += 1
            type_name = str(token.value)
            return self.next(), {"int": "i64", "float": "f64"}.get(type_name, type_name)
        return token, None

    def _fn_params(self, name: str) -> tuple[str, ...]:
        opener = self.peek()
        if opener.kind == "()":
            self.k += 1
            return ()
        if opener.kind != "(":
            fail(f"Expecting parameters for function {name}", opener.pos)
        self.k += 1
        if self.match(")"):
            return ()
        params: list[str] = []
        while True:
            token = self.next()
            if token.kind == ")":
                break
            params.append(self._param(token, params, f"function {name}", ")", f"function '{name}'"))
            self.stack.push(params[-1])
            separator = self.next()
            if separator.kind == ")":
                break
            if separator.kind != ",":
                if separator.kind == "LEXERR":
                    lex_error(separator)
                missing(",", f"to separate the parameters of function '{name}'", separator.pos)
        return tuple(params)

    @staticmethod
    def _param(token: Token, seen: list[str], owner: str, closer: str, closer_owner: str) -> str:
        """One parameter name of a function or closure, with the reference's errors."""
        if token.kind == "IDENT":
            name = str(token.value)
            if name in seen:
                fail(f"Duplicated parameter {name} for {owner}", token.pos)
            return name
        if token.kind == "LEXERR":
            lex_error(token)
        if token.kind == "RESERVED":
            reserved(str(token.value), token.pos)
        if token.kind in STANDARD_KEYWORDS:
            fail("Expecting name of a variable", token.pos)
        missing(closer, f"to close the parameters list of {closer_owner}", token.pos)

    def closure(self, s: Settings) -> ast.Closure:
        """`|a, b| body` or `|| body`: the body is one statement, in a new scope."""
        saved = self._enter_function()
        opener = self.next()
        params: list[str] = []
        if opener.kind == "|" and not self.match("|"):
            while True:
                token = self.next()
                if token.kind == "|":
                    break
                params.append(self._param(token, params, "function ", "|", "anonymous function or closure"))
                self.stack.push(params[-1])
                separator = self.next()
                if separator.kind == "|":
                    break
                if separator.kind != ",":
                    if separator.kind == "LEXERR":
                        lex_error(separator)
                    missing(",", "to separate the parameters of anonymous function", separator.pos)
        body_settings = s.with_flags(FN_SCOPE | CLOSURE)
        stmt, _ = self.statement(body_settings.up())
        self._leave_function(saved)
        self.fn_count += 1
        return ast.Closure(tuple(params), _as_block(stmt, s.pos), s.pos)

    # -- control flow ----------------------------------------------------------------

    def condition(self, s: Settings) -> ast.Expr:
        """A bool condition: not a `{`, not a non-bool literal, not followed by `=`."""
        token = self.peek()
        if token.kind == "{":
            fail("Expecting a boolean expression", token.pos)
        cond = self.expr(s)
        self.ensure_bool(cond)
        if self.peek().kind == "=":
            fail("Possibly a typo of '=='?", self.peek().pos)
        return cond

    def _if(self, s: Settings) -> ast.If:
        keyword = self.next()
        s = s.up_at(keyword.pos)
        cond = self.condition(s)
        then = self.block(s)
        otherwise: ast.Block | ast.If | None = None
        if self.match("else"):
            otherwise = self._if(s) if self.peek().kind == "if" else self.block(s)
        return ast.If(cond, then, otherwise, keyword.pos)

    def _while(self, s: Settings) -> ast.While | ast.Loop:
        s = s.up()
        keyword = self.next()
        cond = self.condition(s) if keyword.kind == "while" else None
        s = s.at(keyword.pos).with_flags(s.flags | BREAKABLE)
        body = self.block(s)
        if cond is None:
            return ast.Loop(body, keyword.pos)
        return ast.While(cond, body, keyword.pos)

    def do_loop(self, s: Settings) -> ast.DoLoop:
        keyword = self.next()
        s = s.up_at(keyword.pos)
        body = self.block(s.with_flags(s.flags | BREAKABLE))
        word = self.next()
        if word.kind not in ("while", "until"):
            missing("while", "for the do statement", word.pos)
        cond = self.condition(s)
        return ast.DoLoop(body, cond, word.kind == "until", keyword.pos)

    def _for(self, s: Settings) -> ast.For:
        keyword = self.next()
        s = s.up_at(keyword.pos)
        var, counter = self._for_names()
        word = self.next()
        if word.kind != "in":
            if word.kind == "LEXERR":
                lex_error(word)
            missing("in", "after the iteration variable", word.pos)
        if self.peek().kind == "{":
            fail("Expecting a boolean expression", self.peek().pos)
        iterable = self.expr(s)
        kind = iterable_mismatch(iterable)
        if kind is not None:
            fail(f"Expecting an iterable value, not {kind}", ast.start_pos(iterable))
        depth = len(self.stack)
        if counter is not None:
            self.stack.push(counter)
        self.stack.push(var)
        body = self.block(s.with_flags(s.flags | BREAKABLE))
        self.stack.truncate(depth)
        return ast.For(var, counter, iterable, body, keyword.pos)

    def _for_names(self) -> tuple[str, str | None]:
        if not self.match("("):
            return self.var_name()[0], None
        name, _ = self.var_name()
        if not self.match(","):
            missing(",", "after the iteration variable name", self.peek().pos)
        counter, counter_pos = self.var_name()
        if counter == name:
            fail(f"Duplicated variable name: {counter}", counter_pos)
        if not self.match(")"):
            missing(")", "to close the iteration variable", self.peek().pos)
        return name, counter

    def _try(self, s: Settings) -> ast.TryCatch:
        keyword = self.next()
        s = s.up_at(keyword.pos)
        body = self.block(s)
        if not self.match("catch"):
            missing("catch", "for the 'try' statement", self.peek().pos)
        var: str | None = None
        if self.match("("):
            var, _ = self.var_name()
            if not self.match(")"):
                missing(")", "to enclose the catch variable", self.peek().pos)
            self.stack.push(var)
        handler = self.block(s)
        if var is not None:
            self.stack.truncate(len(self.stack) - 1)
        return ast.TryCatch(body, var, handler, keyword.pos)

    def _switch(self, s: Settings) -> ast.Switch:
        keyword = self.next()
        s = s.up_at(keyword.pos)
        subject = self.expr(s)
        brace = self.next()
        if brace.kind != "{":
            if brace.kind == "LEXERR":
                lex_error(brace)
            missing("{", "to start a switch block", brace.pos)
        return _SwitchArms(self, s, subject, keyword.pos).parse()


class _SwitchArms:
    """The arms of one `switch { … }`, with the reference's case-order rules."""

    def __init__(self, parser: Parser, settings: Settings, subject: ast.Expr, pos: Pos) -> None:
        self.p = parser
        self.s = settings
        self.subject = subject
        self.pos = pos
        self.cases: list[ast.SwitchCase] = []
        self.default: ast.Expr | None = None
        self.default_pos: Pos | None = None
        self.seen_range = False

    def parse(self) -> ast.Switch:
        p = self.p
        while True:
            token = p.peek()
            if token.kind == "}":
                p.next()
                return ast.Switch(self.subject, tuple(self.cases), self.default, self.pos)
            if token.kind == "EOF":
                missing("}", "to end this switch block", token.pos)
            if self.default_pos is not None:
                fail("Default switch case must be the last", self.default_pos)
            self._arm(token)

    def _arm(self, token: Token) -> None:
        p = self.p
        patterns: list[ast.Expr] | None = None
        condition: ast.Expr | None = None
        if token.kind == "_":
            self.default_pos = token.pos
            p.next()
            if p.peek().kind == "if":
                fail("This switch case cannot have a condition", p.peek().pos)
        else:
            patterns = self._patterns()
            if p.match("if"):
                condition = p.condition(self.s)
        arrow = p.next()
        if arrow.kind != "=>":
            if arrow.kind == "LEXERR":
                lex_error(arrow)
            missing("=>", "in this switch case", arrow.pos)
        stmt, ending = p.statement(self.s)
        body = _arm_body(stmt, arrow.pos)
        if patterns is None:
            self.default = body
        else:
            self._check_literals(patterns)
            self.cases.append(ast.SwitchCase(tuple(patterns), condition, body, ast.start_pos(patterns[0])))
        self._separator(need_comma=ending != TERMINATED)

    def _patterns(self) -> list[ast.Expr]:
        """`p1 | p2 | …`: any syntax error inside is "Expecting literal expression"."""
        p = self.p
        patterns: list[ast.Expr] = []
        while True:
            saved, p.pipe_ends_expr = p.pipe_ends_expr, True
            try:
                patterns.append(p.expr(self.s))
            except RhaiSyntaxError as error:
                raise RhaiSyntaxError("Expecting literal expression", error.pos) from None
            finally:
                p.pipe_ends_expr = saved
            if not p.match("|"):
                return patterns

    def _check_literals(self, patterns: list[ast.Expr]) -> None:
        for pattern in patterns:
            kind = case_kind(pattern)
            if kind is None:
                fail("Expecting a literal expression", ast.start_pos(pattern))
            if kind is CaseKind.RANGE:
                self.seen_range = True
            elif kind is CaseKind.NUMBER and self.seen_range:
                fail("Numeric switch case cannot follow a range case", ast.start_pos(pattern))

    def _separator(self, *, need_comma: bool) -> None:
        token = self.p.peek()
        if token.kind == ",":
            self.p.next()
        elif token.kind == "EOF":
            missing(")", "to end this switch block", token.pos)  # sic: the reference says ')'
        elif token.kind == "LEXERR":
            lex_error(token)
        elif token.kind != "}" and need_comma:
            missing(",", "to separate the items in this switch block", token.pos)


# -- small pure helpers --------------------------------------------------------------


def _as_block(stmt: ast.Stmt | None, pos: Pos) -> ast.Block:
    """A closure body: its block, or the one statement wrapped in a block."""
    if stmt is None:
        return ast.Block((), pos)
    if isinstance(stmt, ast.ExprStmt) and isinstance(stmt.expr, ast.Block):
        return stmt.expr
    return ast.Block((stmt,), stmt.pos)


def _arm_body(stmt: ast.Stmt | None, pos: Pos) -> ast.Expr:
    """A switch arm's action: the expression, or a statement wrapped in a block."""
    if isinstance(stmt, ast.ExprStmt):
        return stmt.expr
    if stmt is None:
        return ast.Block((), pos)
    return ast.Block((stmt,), stmt.pos)


def _duplicate_function(name: str, arity: int) -> str:
    params = {0: "no parameters", 1: "1 parameter"}.get(arity, f"{arity} parameters")
    return f"Function {name} with {params} already exists"


__all__ = ["ParseOptions", "parse"]
