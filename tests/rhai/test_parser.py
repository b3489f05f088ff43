"""The Rhai lexer and parser on their own (no compiler): RHAI.md §1, §3–§12, §14, §15.

* every conformance case whose `kind` is `syntax` fails to parse with the
  reference's exact text, and every other case parses;
* the positions of the runtime errors in the conformance cases are positions
  the AST carries, by the rules documented in ast.py;
* precedence, literals, positions and the shapes of tricky constructs;
* compile-time checks read off the reference parser (Rhai 1.25 `parser.rs`);
* robustness (only RhaiSyntaxError ever comes out) and speed.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from agentkernel.rhai.errors import RhaiSyntaxError
from agentkernel.rhai.runtime.values import Char
from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.lexer import tokenize
from agentkernel.rhai.syntax.parser import ParseOptions, parse

CASES_DIR = Path(__file__).resolve().parent / "conformance"
_OPTION_FLAGS = {
    "--max-array-size": "max_array_size",
    "--max-string-size": "max_string_size",
    "--max-map-size": "max_map_size",
    "--max-functions": "max_functions",
}
_POSITIONED = re.compile(r"^(.*) \(line (\d+), position (\d+)\)$")


def _load_cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for name in ("cases.jsonl", "stdlib.jsonl"):
        lines = (CASES_DIR / name).read_text(encoding="utf-8").splitlines()
        cases += [(f"{name}:{n}", json.loads(line)) for n, line in enumerate(lines, 1) if line.strip()]
    return cases


CASES = _load_cases()


def _options(case: dict[str, Any]) -> ParseOptions | None:
    """ParseOptions for the case's limit flags; None if a flag is not a parse-time one."""
    flags = case.get("opts", [])
    settings: dict[str, Any] = {}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        if flag not in _OPTION_FLAGS:
            return None
        settings[_OPTION_FLAGS[flag]] = int(value)
    return ParseOptions(**settings)


def _runner_source(src: str) -> str:
    """What the file runner hands the parser: a `#!` first line removed, its newline kept."""
    if src.startswith("#!"):
        return src[src.index("\n") :] if "\n" in src else ""
    return src


def _syntax_error(src: str, options: ParseOptions | None = None) -> str:
    with pytest.raises(RhaiSyntaxError) as caught:
        parse(src, options)
    return caught.value.display()


# -- the conformance cases ---------------------------------------------------------

SYNTAX_CASES = [(label, case) for label, case in CASES if case.get("kind") == "syntax" and _options(case)]


@pytest.mark.parametrize(("label", "case"), SYNTAX_CASES, ids=[label for label, _ in SYNTAX_CASES])
def test_syntax_case_fails_with_the_reference_text(label: str, case: dict[str, Any]) -> None:
    assert _syntax_error(case["src"], _options(case)) == case["error"]


def test_every_syntax_case_is_covered() -> None:
    all_syntax = [label for label, case in CASES if case.get("kind") == "syntax"]
    assert len(SYNTAX_CASES) == len(all_syntax) == 60


def test_every_other_case_parses() -> None:
    failures = []
    for label, case in CASES:
        if case.get("kind") == "syntax":
            continue
        try:
            parse(_runner_source(case["src"]), _options(case) or ParseOptions())
        except RhaiSyntaxError as error:
            failures.append(f"{label}: {case['src']!r} -> {error.display()}")
    assert not failures, "\n".join(failures)


# -- runtime error positions are node positions ---------------------------------------


def _nodes(node: object) -> Iterator[Any]:
    if isinstance(node, tuple):
        for item in node:
            yield from _nodes(item)
    else:
        yield node
        for child in ast.children(node):  # checked against a type-blind walk in test_children.py
            yield from _nodes(child)


def _expected_positions(script: ast.Script, message: str) -> set[ast.Pos] | None:
    """Where ast.py's rules put an error with this message; None if not a rule we check."""
    nodes: list[Any] = [*_nodes(script.stmts), *_nodes(script.functions)]

    def where(kinds: type | tuple[type, ...], test: Any = lambda n: True, pos: Any = None) -> set[ast.Pos]:
        chosen: list[Any] = [n for n in nodes if isinstance(n, kinds) and test(n)]
        return {(pos(n) if pos else n.pos) for n in chosen}

    callers = (ast.Call, ast.MethodCall)
    if message == "in call to function 'eval'":  # reported at the script text argument
        return where(ast.Call, lambda n: n.name == "eval", pos=lambda n: n.args[0].pos)
    if match := re.match(r"in call to function '([^']+)'", message):
        return where(callers, lambda n: n.name == match.group(1))
    if message.startswith("in closure call"):
        return where(ast.MethodCall)
    if match := re.match(r"Function not found: (\S+) \(", message):
        name = match.group(1)  # called directly, as an operator, or through `p.call(..)`/`map("f")`
        return (
            where(callers, lambda n: n.name == name)
            | where((ast.Binary, ast.Unary, ast.Assign), lambda n: n.op == name)
            | where(ast.MethodCall, lambda n: any(isinstance(a, ast.Literal) for a in n.args))
        )
    if match := re.match(r"(?:Unknown|No writable) property '(\w+)'", message):
        return where(ast.Property, lambda n: n.name == match.group(1))
    if match := re.match(r"Variable not found: (?:(\w+)::)?(\w+)$", message):
        return where(ast.Var, lambda n: n.name == match.group(2) and n.namespace == match.group(1))
    if re.match(r"(Array|String) index .* out of bounds", message):
        return where(ast.Index, pos=lambda n: ast.expr_pos(n.index))
    if message.endswith("(expecting bool)"):
        return where((ast.If, ast.While, ast.DoLoop), pos=lambda n: ast.expr_pos(n.cond))
    if message.startswith("Runtime error"):
        return where(ast.Throw)
    if message.startswith("Indexer unavailable"):
        return where(ast.Index)
    if message.startswith("'this' not bound"):
        return where(ast.This)
    if message.startswith("Module not found"):
        return where(ast.Import, pos=lambda n: ast.start_pos(n.path))
    return None


def test_runtime_error_positions_are_node_positions() -> None:
    checked, failures = 0, []
    for label, case in CASES:
        if case.get("kind") != "runtime":
            continue
        script = parse(_runner_source(case["src"]), _options(case) or ParseOptions())
        for line in case["error"].split("\n"):
            found = _POSITIONED.match(line)
            expected = _expected_positions(script, found.group(1)) if found else None
            if found is None or expected is None:
                continue
            checked += 1
            pos = (int(found.group(2)), int(found.group(3)))
            if pos not in expected:
                failures.append(f"{label}: {case['src']!r}: {line} not in {sorted(expected)}")
    assert not failures, "\n".join(failures)
    assert checked > 150


# -- precedence -------------------------------------------------------------------------


def sx(node: Any) -> str:
    """An expression as a compact S-expression, for shape assertions."""
    if isinstance(node, ast.ExprStmt):
        return sx(node.expr)
    if isinstance(node, ast.Literal):
        return _literal(node.value)
    if isinstance(node, ast.Var):
        return f"{node.namespace}::{node.name}" if node.namespace else node.name
    if isinstance(node, ast.Binary):
        return f"({node.op} {sx(node.left)} {sx(node.right)})"
    if isinstance(node, ast.And | ast.Or):
        return f"({'&&' if isinstance(node, ast.And) else '||'} {sx(node.left)} {sx(node.right)})"
    if isinstance(node, ast.Unary):
        return f"({node.op} {sx(node.operand)})"
    if isinstance(node, ast.Property):
        return f"{sx(node.target)}{'?.' if node.optional else '.'}{node.name}"
    if isinstance(node, ast.MethodCall):
        dot = "?." if node.optional else "."
        return f"{sx(node.target)}{dot}{node.name}({', '.join(sx(a) for a in node.args)})"
    if isinstance(node, ast.Index):
        return f"{sx(node.target)}{'?[' if node.optional else '['}{sx(node.index)}]"
    if isinstance(node, ast.Call):
        name = f"{node.namespace}::{node.name}" if node.namespace else node.name
        return f"{name}{'!' if node.capture else ''}({', '.join(sx(a) for a in node.args)})"
    if isinstance(node, ast.ArrayLit):
        return f"[{', '.join(sx(item) for item in node.items)}]"
    if isinstance(node, ast.Break | ast.Return | ast.Throw):
        word = type(node).__name__.lower()
        return word if node.value is None else f"({word} {sx(node.value)})"
    return type(node).__name__


def _literal(value: object) -> str:
    if value is None:
        return "()"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Char):
        return f"'{value}'"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def expr(src: str, options: ParseOptions | None = None) -> ast.Expr:
    script = parse(src, options)
    assert len(script.stmts) == 1, script.stmts
    stmt = script.stmts[0]
    assert isinstance(stmt, ast.ExprStmt)
    return stmt.expr


@pytest.mark.parametrize(
    ("src", "shape"),
    [
        ("1 + 2 << 1", "(+ 1 (<< 2 1))"),
        ("3 ** 2 << 1", "(** 3 (<< 2 1))"),
        ("2 ** 3 ** 2", "(** 2 (** 3 2))"),
        ("1 + 2 * 3 - 4", "(- (+ 1 (* 2 3)) 4)"),
        ("1 + 2 .. 3 * 4", "(.. (+ 1 2) (* 3 4))"),
        ("() ?? 1 + 2", "(?? () (+ 1 2))"),
        ("1 == 2 ?? 3", "(== 1 (?? 2 3))"),
        ("1 < 2 < 3", "(< (< 1 2) 3)"),
        ("1 + 1 in [2]", "(in (+ 1 1) [2])"),
        ("x !in y == false", "(== (!in x y) false)"),
        ("1 | 2 ^ 3 & 4", "(^ (| 1 2) (& 3 4))"),
        ("a && b & c", "(& (&& a b) c)"),
        ("a || b && c", "(|| a (&& b c))"),
        ("-2 ** 2", "(** -2 2)"),
        ("!true == false", "(== (! true) false)"),
        ("-x.abs()", "(- x.abs())"),
        ("-5.abs()", "-5.abs()"),
        ("-(5).abs()", "(- 5.abs())"),
        ("- 5", "-5"),
        ("+5", "5"),
        ("+x", "(+ x)"),
        ("1 -5", "(- 1 5)"),
        ("x - -1", "(- x -1)"),
        ("!!x", "(! (! x))"),
        ("a ?? b ?? c", "(?? (?? a b) c)"),
        ("1..=5", "(..= 1 5)"),
        ("..5", "(.. 0 5)"),
        ("a[1..]", "a[(.. 1 ())]"),
        ("x.y.z(1)[2]", "x.y.z(1)[2]"),
        ("a?.b.c", "a?.b.c"),
        ("a?[0]?.b", "a?[0]?.b"),
        ("(f)(1)", "f(1)"),
        ("f!(1)", "f!(1)"),
        ("global::X + a::b::f(1)", "(+ global::X a::b::f(1))"),
        ("-9223372036854775808", "-9223372036854775808"),
        ("-(-9223372036854775808)", "9.223372036854776e+18"),
    ],
)
def test_precedence_and_grouping(src: str, shape: str) -> None:
    assert sx(expr(src)) == shape


# -- literals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "value"),
    [
        ("1_000", 1000),
        ("1__2", 12),
        ("0x_ff", 255),
        ("0xff_", 255),
        ("0XFF", 255),
        ("0o17", 15),
        ("0b101", 5),
        ("0B11", 3),
        ("08", 8),
        ("0xffffffffffffffff", -1),
        ("0x8000000000000000", -(2**63)),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", 9.223372036854776e18),
        ("1.5", 1.5),
        ("1_000.000_1", 1000.0001),
        ("1e3", 1000.0),
        ("1E-2", 0.01),
        ("1e+3", 1000.0),
        ("1.5e3", 1500.0),
        ("1_e5", 100000.0),
        ("1e400", float("inf")),
        ("true", True),
        ("()", None),
        ('"a\\tb\\n\\r\\\\\\""', 'a\tb\n\r\\"'),
        ('"\\x41\\xFF\\u00e9\\U0001F600"', "AÿéU0001F600".replace("U0001F600", "\U0001f600")),
        ('"a""b"', 'a"b'),
        ('"ab\\\n    cd"', "ab   cd"),
        ('#"a\\n"#', "a\\n"),
        ('##"a"#b"##', 'a"#b'),
        ('#"x\ny"#', "x\ny"),
        ("`a\\nb`", "a\\nb"),
        ("`x``y`", "x`y"),
        ("`\\${x}`", "${x}"),
        ("`\\q`", "\\q"),
        ("`\n  a`", "  a"),
        ("`a\nb`", "a\nb"),
    ],
)
def test_literal_values(src: str, value: object) -> None:
    node = expr(src)
    assert isinstance(node, ast.Literal)
    assert node.value == value
    assert type(node.value) is type(value)


def test_float_with_trailing_dot_needs_a_non_name_after_it() -> None:
    assert sx(expr("1.;")) == "1.0"
    assert sx(expr("(1.)")) == "1.0"
    assert sx(expr("1.e5")) == "1.e5"  # a property access on an int
    assert sx(expr("123.e-10")) == "(- 123.e 10)"


@pytest.mark.parametrize(("src", "value"), [("'a'", "a"), ("'\\''", "'"), ("'\\u0041'", "A"), ("'\"'", '"')])
def test_char_literals(src: str, value: str) -> None:
    node = expr(src)
    assert isinstance(node, ast.Literal)
    assert type(node.value) is Char
    assert node.value == value


def test_interpolated_string_parts() -> None:
    node = expr("`a${x}b${`c${y}`}`")
    assert isinstance(node, ast.Interpolated)
    assert [type(p).__name__ for p in node.parts] == ["str", "Block", "str", "Block"]
    assert node.parts[0] == "a"
    inner = node.parts[3]
    assert isinstance(inner, ast.Block)
    nested = inner.stmts[0]
    assert isinstance(nested, ast.ExprStmt)
    assert isinstance(nested.expr, ast.Interpolated)
    assert nested.expr.parts[0] == "c"


def test_comments_are_skipped() -> None:
    assert sx(expr("/* a /* nested */ b */ 1 // x")) == "1"
    assert sx(expr("/// doc\n//! module doc\n/** block doc */ 2")) == "2"
    assert parse("1; /* unterminated").stmts


@pytest.mark.parametrize(
    ("src", "error"),
    [
        ('"\\z"', "Invalid escape sequence: '\\z' (line 1, position 3)"),
        ('"\\\'"', "Invalid escape sequence: '\\'' (line 1, position 3)"),
        ("'\\\"'", "Invalid escape sequence: '\\\"' (line 1, position 3)"),
        ('"\\u{41}"', "Invalid escape sequence: '\\u{' (line 1, position 4)"),
        ('"\\uD800"', "Invalid escape sequence: '\\uD800' (line 1, position 7)"),
        ('"\\U00110000"', "Invalid escape sequence: '\\U00110000' (line 1, position 11)"),
        ('"\\x4"', "Invalid escape sequence: '\\x4\"' (line 1, position 5)"),
        ('"abc', "Open string is not terminated (line 1, position 1)"),
        ('"ab\ncd"', "Open string is not terminated (line 1, position 1)"),
        ('"abc\\', "Open string is not terminated (line 1, position 1)"),
        ("`abc", "Open string is not terminated (line 1, position 1)"),
        ("`a${1}", "Open string is not terminated"),
        ("`a${1}bc", "Open string is not terminated (line 1, position 7)"),
        ('#"abc', "Open string is not terminated (line 1, position 1)"),
        ("##x", "Unexpected 'x' (line 1, position 1)"),
        ("'ab'", "Invalid character: 'ab' (line 1, position 1)"),
        ("''", "Invalid character: '' (line 1, position 1)"),
        ("ü", "Unexpected 'ü' (line 1, position 1)"),
        ("_1", "Variable name is not proper: '_1' (line 1, position 1)"),
        ("let _ = 1;", "Expecting name of a variable (line 1, position 5)"),
        ("0b102", "Expecting ';' to terminate this statement (line 1, position 5)"),
        ("-0x10", "Invalid number: 'x10' (line 1, position 1)"),
        ("0x", "Invalid number: '' (line 1, position 1)"),
        ("#!x", "'#!' is a reserved symbol (line 1, position 1)"),
        ("a ~ b", "Unknown operator: '~' (line 1, position 3)"),
        ("x @ y", "Unknown operator: '@' (line 1, position 3)"),
        ("i++", "Unknown operator: '++' (line 1, position 2)"),
        ("--i", "'--' is a reserved symbol (line 1, position 1)"),
        ("a === b", "'===' is not a valid operator. This is not JavaScript! Should it be '=='? "
         "(line 1, position 3)"),
        ("a !== b", "'!==' is not a valid operator. This is not JavaScript! Should it be '!='? "
         "(line 1, position 3)"),
        ("x := 1", "':=' is not a valid assignment operator. This is not Go or Pascal! "
         "Should it be simply '='? (line 1, position 3)"),
        ("a -> b", "'->' is not a valid symbol. This is not C or C++! (line 1, position 3)"),
        ("a <- b", "'<-' is not a valid symbol. This is not Go! Should it be '<='? (line 1, position 3)"),
        ("# {}", "'#' is not a valid symbol. Should it be '#{'? (line 1, position 1)"),
        ("let var = 1;", "'var' is a reserved keyword (line 1, position 5)"),
    ],
)  # fmt: skip
def test_lexical_errors(src: str, error: str) -> None:
    assert _syntax_error(src) == f"Syntax error: {error}"


def test_max_string_size_applies_to_literals() -> None:
    options = ParseOptions(max_string_size=5)
    assert parse('"abcde"', options).stmts
    assert _syntax_error('let s = "abcdef";', options) == (
        "Syntax error: Length of string exceeds the maximum limit (5) (line 1, position 9)"
    )
    assert _syntax_error('"ééé"', options).startswith("Syntax error: Length of string exceeds")  # bytes


# -- positions ---------------------------------------------------------------------------


def test_positions_count_characters_from_one() -> None:
    node = expr('"é\tü" + x')
    assert isinstance(node, ast.Binary)
    assert node.pos == (1, 7)
    assert node.right.pos == (1, 9)


def test_positions_across_lines() -> None:
    script = parse("let x = 1;\n  x.foo\n")
    stmt = script.stmts[1]
    assert isinstance(stmt, ast.ExprStmt) and isinstance(stmt.expr, ast.Property)
    assert stmt.expr.pos == (2, 5)
    assert stmt.expr.dot_pos == (2, 4)
    assert stmt.pos == (2, 3)


def test_escaped_interpolation_shifts_later_positions_like_the_reference() -> None:
    node = expr("`\\${x}` + y")
    assert isinstance(node, ast.Binary)
    assert node.pos == (1, 8)  # the reference does not count the `$` of `\${`


@pytest.mark.parametrize(
    ("src", "pos"),
    [
        ("a + b", (1, 3)),
        ("f(1)", (1, 1)),
        ("x.foo(1)", (1, 3)),
        ("x.foo", (1, 3)),
        ("x[1]", (1, 2)),
        ("-x", (1, 1)),
        ("- 5", (1, 1)),
        ("[1]", (1, 1)),
        ("#{}", (1, 1)),
        ("|x| x", (1, 1)),
        ("if x {}", (1, 1)),
        ("throw 1", (1, 1)),
        ("global::x", (1, 1)),
        ("a::b::f()", (1, 7)),
        ("`a${1}`", (1, 1)),
    ],
)
def test_node_positions(src: str, pos: ast.Pos) -> None:
    assert expr(src).pos == pos


def test_statement_positions() -> None:
    script = parse('let a = 1; a += 2; a.b = 3; const C = 4; import "m" as m; try {} catch {}')
    assert [stmt.pos for stmt in script.stmts] == [(1, 1), (1, 14), (1, 24), (1, 29), (1, 42), (1, 59)]
    script = parse("fn f() {} x.y(1) + 2")
    assert script.functions[0].pos == (1, 1)
    assert script.stmts[0].pos == (1, 18)  # an expression statement: the expression's start_pos


def test_expr_pos_and_start_pos_of_chains() -> None:
    chain = expr("m.a[1].b(2)")
    assert ast.expr_pos(chain) == (1, 2)  # the first `.` after the root
    assert ast.start_pos(chain) == (1, 1)
    index_first = expr("a[0].b")
    assert ast.expr_pos(index_first) == (1, 2)
    both = expr("a && b || c")
    assert ast.start_pos(both) == (1, 1)
    assert ast.start_pos(expr("x + y")) == (1, 3)  # operators are calls in the reference


def test_and_or_coalesce_chains_keep_the_first_operator_position() -> None:
    node = expr("a && b && c")
    assert isinstance(node, ast.And) and node.pos == (1, 3)
    node = expr("a ?? b ?? c")
    assert node.pos == (1, 3)


# -- shapes of tricky constructs ---------------------------------------------------------


def test_coalesce_with_break() -> None:
    loop = expr("loop { x ?? break; }")
    assert isinstance(loop, ast.Loop)
    stmt = loop.body.stmts[0]
    assert isinstance(stmt, ast.ExprStmt)
    assert sx(stmt.expr) == "(?? x break)"
    assert sx(expr("while c { x ?? continue }").body.stmts[0]) == "(?? x Continue)"  # type: ignore[union-attr]
    assert sx(expr("|| x ?? return 5").body.stmts[0]) == "(?? x (return 5))"  # type: ignore[union-attr]


def test_if_at_statement_start_is_a_statement() -> None:
    script = parse("if true {1} else {2} + 1")
    assert [sx(stmt) for stmt in script.stmts] == ["If", "1"]
    assert sx(expr("(if true {1} else {2}) + 1")) == "(+ If 1)"
    let = parse("let x = if a {1} else if b {2} else {3};").stmts[0]
    assert isinstance(let, ast.Let) and isinstance(let.value, ast.If)
    assert isinstance(let.value.otherwise, ast.If)
    assert isinstance(let.value.otherwise.otherwise, ast.Block)


def test_optional_chain() -> None:
    node = expr("a?.b.c")
    assert isinstance(node, ast.Property) and not node.optional
    assert isinstance(node.target, ast.Property) and node.target.optional
    assert isinstance(node.target.target, ast.Var)


@pytest.mark.parametrize(
    ("src", "target", "op"),
    [
        ("x = 1", "x", None),
        ("x += 1", "x", "+"),
        ("x **= 2", "x", "**"),
        ("x <<= 2", "x", "<<"),
        ("a[1] = 2", "a[1]", None),
        ("a.b[1].c -= 2", "a.b[1].c", "-"),
        ("this.v ^= 1", "This.v", "^"),
    ],
)
def test_assignment_targets(src: str, target: str, op: str | None) -> None:
    code = "fn f() { " + src + " }" if "this" in src else src
    script = parse(code)
    stmt = script.functions[0].body.stmts[0] if script.functions else script.stmts[0]
    assert isinstance(stmt, ast.Assign)
    assert sx(stmt.target) == target
    assert stmt.op == op


def test_switch_arms() -> None:
    node = expr('switch x { 1 | 2 => 3, 4 if y => { 5 } 6..10 => let z = 1, "a" => (), _ => 7 }')
    assert isinstance(node, ast.Switch)
    assert [[sx(p) for p in case.patterns] for case in node.cases] == [
        ["1", "2"],
        ["4"],
        ["(.. 6 10)"],
        ['"a"'],
    ]
    assert node.cases[1].condition is not None and sx(node.cases[1].condition) == "y"
    assert isinstance(node.cases[1].body, ast.Block)
    statement_arm = node.cases[2].body
    assert isinstance(statement_arm, ast.Block) and isinstance(statement_arm.stmts[0], ast.Let)
    assert node.default is not None and sx(node.default) == "7"


def test_closures() -> None:
    node = expr("|a, b| a + b")
    assert isinstance(node, ast.Closure)
    assert node.params == ("a", "b")
    assert sx(node.body.stmts[0]) == "(+ a b)"
    block = expr("|| { 1 }")
    assert isinstance(block, ast.Closure) and block.params == () and sx(block.body.stmts[0]) == "1"
    assign = expr("|| this.v += 1")
    assert isinstance(assign, ast.Closure) and isinstance(assign.body.stmts[0], ast.Assign)
    assert expr("| | 1").params == ()  # type: ignore[union-attr]


def test_loops_and_try() -> None:
    for_loop = expr("for (x, i) in 0..10 { }")
    assert isinstance(for_loop, ast.For) and (for_loop.var, for_loop.counter) == ("x", "i")
    do = expr("do { } until x")
    assert isinstance(do, ast.DoLoop) and do.until
    value = parse("let v = for i in 0..10 { if i == 4 { break i } };").stmts[0]
    assert isinstance(value, ast.Let) and isinstance(value.value, ast.For)
    caught = parse("try { throw 1 } catch (e) { e }").stmts[0]
    assert isinstance(caught, ast.TryCatch) and caught.var == "e"
    bare = parse("try { throw; } catch { }").stmts[0]
    assert isinstance(bare, ast.TryCatch) and bare.var is None


def test_functions_are_hoisted() -> None:
    script = parse('f(1); fn f(x) { x } private fn g() {} fn int.dbl() { this * 2 } fn "My T".m(a,) {}')
    assert [f.name for f in script.functions] == ["f", "g", "dbl", "m"]
    assert [sx(s) for s in script.stmts] == ["f(1)"]
    assert script.functions[1].private
    assert [f.this_type for f in script.functions] == [None, None, "i64", "My T"]
    assert script.functions[3].params == ("a",)


def test_semicolon_rules() -> None:
    block_forms = "if x {} while y {} loop {} for a in b {} switch c {} {} try {} catch {} fn f() {} 1"
    assert len(parse(block_forms).stmts) == 8
    assert len(parse("1; 2; 3;;").stmts) == 3
    error = _syntax_error("do {} while x 1")
    assert error == "Syntax error: Expecting ';' to terminate this statement (line 1, position 15)"


def test_import_and_export() -> None:
    script = parse('import "a/b" as m; import "x"; export let y = 1; export const Z = 2; export y as w;')
    first = script.stmts[0]
    assert isinstance(first, ast.Import) and first.alias == "m"
    second = script.stmts[1]
    assert isinstance(second, ast.Import) and second.alias is None
    assert [type(s).__name__ for s in script.stmts] == ["Import", "Import", "Export", "Export", "Export"]
    exports = [(s.name, s.alias, s.decl is not None) for s in script.stmts if isinstance(s, ast.Export)]
    assert exports == [("y", "y", True), ("Z", "Z", True), ("y", "w", False)]


def test_source_name_is_kept() -> None:
    assert parse("1", ParseOptions(source="main.rhai")).source == "main.rhai"


# -- compile-time checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "error"),
    [
        ("x.print()", "'print' is a reserved keyword (line 1, position 3)"),
        ("x.type_of", "'type_of' is a reserved keyword (line 1, position 3)"),
        ("x.a::b", "Invalid symbol encountered: '::' (line 1, position 4)"),
        ("x.a!(1)", "method-call style does not support running within the caller's scope "
         "(line 1, position 3)"),
        ("m::f!(1)", "Unexpected '!' (line 1, position 5)"),
        ("f !x", "Expecting '(' to start arguments list of function call (line 1, position 4)"),
        ("if (x) print(1);", "Expecting '{' to start a statement block (line 1, position 8)"),
        ("if {x} {}", "Expecting a boolean expression (line 1, position 4)"),
        ("if x = 1 {}", "Possibly a typo of '=='? (line 1, position 6)"),
        ("if 1 {}", "Expecting a boolean expression, not a number (line 1, position 4)"),
        ('while "s" {}', "Expecting a boolean expression, not a string (line 1, position 7)"),
        ("do {} while 1.5", "Expecting a boolean expression, not a floating-point number "
         "(line 1, position 13)"),
        ("true || 'c'", "Expecting a boolean expression, not a character (line 1, position 9)"),
        ("[1] && true", "Expecting a boolean expression, not an array (line 1, position 1)"),
        ("for x in 5 {}", "Expecting an iterable value, not a number (line 1, position 10)"),
        ("for x in true {}", "Expecting an iterable value, not a boolean (line 1, position 10)"),
        ("for (x, x) in y {}", "Duplicated variable name: x (line 1, position 9)"),
        ("for x y {}", "Expecting 'in' after the iteration variable (line 1, position 7)"),
        ("#{a: 1}[0]", "Object map expects string index, not a number (line 1, position 9)"),
        ('[1]["a"]', "Array, string or bit-field expects numeric index, not a string (line 1, position 5)"),
        ('"abc"[1.5]', "Array, string or bit-field expects integer index, not a float (line 1, position 7)"),
        ("5 = 1", "Cannot assign to a constant value (line 1, position 1)"),
        ("a && b = 1", "Possibly a typo of '=='? (line 1, position 8)"),
        ("x.f() = 1", "Expression cannot be assigned to (line 1, position 3)"),
        ("x.f().y = 1", "Expression cannot be assigned to (line 1, position 3)"),
        ("f().x = 1", "Expression cannot be assigned to (line 1, position 1)"),
        ("f() = 1", "Expression cannot be assigned to (line 1, position 1)"),
        ("const A = 1; { A = 3 }", "Cannot assign to constant A (line 1, position 16)"),
        ("x ?? break", "Break statement should only be used inside a loop (line 1, position 6)"),
        ("loop { fn f() {} }", "Function definitions must be at global level and cannot be inside a block or "
         "another function (line 1, position 8)"),
        ("let f = || { fn g() {} };", "Function definitions must be at global level and cannot be inside a "
         "block or another function (line 1, position 14)"),
        ("loop { || break }", "Break statement should only be used inside a loop (line 1, position 11)"),
        ("fn f() {} fn f() {}", "Function f with no parameters already exists (line 1, position 11)"),
        ("fn f(a, b) {} fn f(c, d) {}", "Function f with 2 parameters already exists (line 1, position 15)"),
        ("fn f(a b) {}", "Expecting ',' to separate the parameters of function 'f' (line 1, position 8)"),
        ("fn f(let) {}", "Expecting name of a variable (line 1, position 6)"),
        ("fn f {}", "Expecting parameters for function f (line 1, position 6)"),
        ("fn f()", "Expecting body statement block for function f (line 1, position 7)"),
        ('fn "T" x() {}', "Expecting '.' after the type name for 'this' (line 1, position 8)"),
        ("private let x = 1;", "Expecting 'fn' following 'private' (line 1, position 9)"),
        ("|a, a| a", "Duplicated parameter a for function  (line 1, position 5)"),
        ("|a b| a", "Expecting ',' to separate the parameters of anonymous function (line 1, position 4)"),
        ("{ export let x = 1; }", "Export statement can only appear at global level (line 1, position 3)"),
        ("switch x { _ => 1, 2 => 3 }", "Default switch case must be the last (line 1, position 12)"),
        ("switch x { _ if y => 1 }", "This switch case cannot have a condition (line 1, position 14)"),
        ("switch x { 1 => 2 3 => 4 }", "Expecting ',' to separate the items in this switch block "
         "(line 1, position 19)"),
        ("switch x { 1 => 2", "Expecting ')' to end this switch block (line 1, position 18)"),
        ("switch x { 1 2 }", "Expecting '=>' in this switch case (line 1, position 14)"),
        ("switch x { => 1 }", "Expecting literal expression (line 1, position 12)"),
        ("switch x { 1 + 1 => 1 }", "Expecting a literal expression (line 1, position 14)"),
        ("switch x { 5..5 => 1, 3 => 2 }", None),
        ("switch x { ..5 => 1, 3.5 => 2 }", "Numeric switch case cannot follow a range case "
         "(line 1, position 22)"),
        ("switch x { [1, 2] => 1, #{a: 'c'} => 2, Fn(\"f\") => 3, \"s\" => 4 }", None),
        ("let r = try { 1 } catch { 2 };", "Unexpected 'try' (line 1, position 9)"),
        ("try {} finally {}", "Expecting 'catch' for the 'try' statement (line 1, position 8)"),
        ("try {} catch (e {}", "Expecting ')' to enclose the catch variable (line 1, position 17)"),
        ("do {} x", "Expecting 'while' for the do statement (line 1, position 7)"),
        ("(1", "Expecting ')' for a matching ( in this expression (line 1, position 3)"),
        ("a[1", "Expecting ']' for a matching [ in this index expression (line 1, position 4)"),
        ("f(1 2)", "Expecting ',' to separate the arguments to function call 'f' (line 1, position 5)"),
        ("#{a: 1 b: 2}", "Expecting ',' to separate the items of this object map literal "
         "(line 1, position 8)"),
        ("#{a: 1, 2: 3}", "Expecting name of a property (line 1, position 9)"),
        ("#{print: 1}", "'print' is a reserved keyword (line 1, position 3)"),
        ("{ 1", "Expecting ';' to terminate this statement (line 1, position 4)"),
        ("{ 1;", "Expecting '}' to terminate this block (line 1, position 5)"),
        ("x.", "Expecting name of a property (line 1, position 3)"),
        (")", "Unexpected ')' (line 1, position 1)"),
    ],
)  # fmt: skip
def test_compile_time_checks(src: str, error: str | None) -> None:
    if error is None:
        parse(src)
    else:
        assert _syntax_error(src) == f"Syntax error: {error}"


def test_constants_follow_block_scopes() -> None:
    parse("const A = 1; let A = 2; A = 3;")  # shadowed in the same scope: writable again
    parse("const A = 1; fn f() { A = 2 }")  # functions do not see the script's variables
    parse("const A = 1; let f = || { A = 2 };")  # nor do closures (a runtime matter)
    parse("let A = 1; { const A = 2; } A = 3;")  # the constant ended with its block
    parse("const A = 1; for A in [] { A = 1 }")
    error = _syntax_error("const A = 1; A.x = 2; A = 3")
    assert error == "Syntax error: Cannot assign to constant A (line 1, position 23)"


def test_this_only_inside_functions_and_closures() -> None:
    parse("fn f() { this } let g = || this;")
    assert (
        _syntax_error("{ this }") == "Syntax error: 'this' can only be used in functions (line 1, position 3)"
    )


def test_literal_size_limits() -> None:
    """An array literal of exactly the limit is rejected (checked before each item and
    before the `]`); a map literal is checked before each value, so exactly the limit passes."""
    assert parse("[1, 2]", ParseOptions(max_array_size=3)).stmts
    assert _syntax_error("[1, 2, 3]", ParseOptions(max_array_size=3)).endswith("(3) (line 1, position 9)")
    assert _syntax_error("[[1], 2, 3]", ParseOptions(max_array_size=3)).startswith(
        "Syntax error: Size of array literal exceeds the maximum limit (3)"
    )
    assert parse("#{a: 1, b: 2}", ParseOptions(max_map_size=2)).stmts
    assert _syntax_error("#{a: 1, b: 2, c: 3}", ParseOptions(max_map_size=2)) == (
        "Syntax error: Number of properties in object map literal exceeds the maximum limit (2) "
        "(line 1, position 18)"
    )


def test_max_functions_counts_closures() -> None:
    options = ParseOptions(max_functions=1)
    assert _syntax_error("let f = |x| x; fn g() {}", options) == (
        "Syntax error: Number of functions defined exceeds maximum limit (line 1, position 16)"
    )
    assert _syntax_error("fn g() {} let f = || 1;", options) == (
        "Syntax error: Number of functions defined exceeds maximum limit (line 1, position 19)"
    )


def test_eval_text_may_not_define_functions() -> None:
    options = ParseOptions(allow_functions=False)
    assert parse("let y = 7; y", options).stmts
    message = (
        "Syntax error: Function definitions must be at global level and cannot be inside a block or "
        "another function"
    )
    assert _syntax_error("fn f() {}", options) == message
    assert _syntax_error("let f = |x| x;", options) == message
    assert (
        _syntax_error("fn f() {} 1 +", options) == "Syntax error: Script is incomplete (line 1, position 14)"
    )


# -- depth limits ----------------------------------------------------------------------------

TOO_COMPLEX = "Syntax error: Expression exceeds maximum complexity"


def test_flat_chains_count_towards_depth() -> None:
    """The reference goes one level deeper per operator of a chain (RHAI.md §14)."""
    assert _syntax_error("1+2+3+4+5+6+7+8+9", ParseOptions(max_expr_depth=5)).startswith(TOO_COMPLEX)
    parse("x" + " + x" * 62)
    assert _syntax_error("x" + " + x" * 63).startswith(TOO_COMPLEX)
    parse("fn f(x) { x" + " + x" * 28 + " }")
    assert _syntax_error("fn f(x) { x" + " + x" * 29 + " }").startswith(TOO_COMPLEX)


@pytest.mark.parametrize(
    "src",
    ["(" * 5000 + "1", "[" * 5000, "{" * 5000, "!" * 5000 + "x", "- " * 5000 + "x", "|| " * 5000,
     "a" + ".b" * 5000, "a" + "[0]" * 5000, "if x {} else " * 2000 + "{}", "#{a:" * 5000, "`${" * 5000,
     "1" + " ** 1" * 5000, "f(" * 5000],
)  # fmt: skip
@pytest.mark.parametrize("limit", [64, 0])
def test_deep_nesting_is_a_syntax_error(src: str, limit: int) -> None:
    options = ParseOptions(max_expr_depth=limit, max_fn_expr_depth=limit)
    assert _syntax_error(src, options).startswith(TOO_COMPLEX)


# -- robustness and speed ----------------------------------------------------------------------

_FRAGMENTS = [
    "(", ")", "[", "]", "{", "}", "#{", "`", "${", '"', "'", "#", "\\", "/*", "*/", "//", "\n", ";", ",", ".",
    "?.", "?[", "??", "..", "..=", "=>", "|", "||", "!", "-", "+", "**", "::", "=", "+=", "fn", "let", "if",
    "else", "switch", "_", "for", "in", "do", "while", "loop", "break", "return", "throw", "try", "catch",
    "this", "global::", "0x", "1.", "1e", "é", "\r", "\t", "$", "@", "~",
]  # fmt: skip


def _mutations(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    sources = [case["src"] for _, case in CASES]
    for _ in range(count):
        text = rng.choice(sources)
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(text))
            action = rng.random()
            if action < 0.4:
                text = text[:at] + rng.choice(_FRAGMENTS) + text[at:]
            elif action < 0.7:
                text = text[:at] + text[at + rng.randint(1, 5) :]
            elif action < 0.85:
                other = rng.choice(sources)
                cut = rng.randint(0, len(other))
                text = text[:at] + other[cut : cut + rng.randint(1, 30)] + text[at:]
            else:
                text = text[:at]
        yield text


def _soup(seed: int, count: int) -> Iterator[str]:
    """Strings glued from random fragments: mostly nonsense, often deeply unbalanced."""
    rng = random.Random(seed)
    pieces = [*_FRAGMENTS, "x", "1", " ", "0.5", '"s"', "`t`", "'c'"]
    for _ in range(count):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(1, 60)))


_TIGHT = ParseOptions(
    max_expr_depth=0,
    max_fn_expr_depth=0,
    max_string_size=3,
    max_array_size=2,
    max_map_size=1,
    max_functions=1,
)


def test_fuzz_only_syntax_errors_come_out() -> None:
    outcomes = {"ok": 0, "syntax": 0}
    texts = [*_mutations(seed=20250101, count=5000), *_soup(seed=99, count=2000)]
    for text in texts:
        for options in (None, _TIGHT):
            try:
                parse(text, options)
                outcomes["ok"] += 1
            except RhaiSyntaxError as error:
                assert error.message, text
                outcomes["syntax"] += 1
    assert outcomes["ok"] > 100 and outcomes["syntax"] > 100


def test_tokens_always_end_in_eof() -> None:
    for text in _mutations(seed=7, count=500):
        tokens = tokenize(text)
        assert tokens[-1].kind == "EOF"
        assert all(token.kind != "EOF" for token in tokens[:-1])


_BLOCK = """
fn f_{n}(a, b) {{ if a < b {{ a }} else {{ b * 2 - -3 }} }}
let total_{n} = 0; // a comment
for (x, i) in 0..100 {{ total_{n} += x * i; if total_{n} > 1000 {{ break; }} }}
let m = #{{a: 1, "b c": [1, 2, 3.5], d: `text ${{total_{n}}} more`}};
m.a = m["b c"][1] + m?.d.len();
let g = |p, q| p + q * 2;
switch total_{n} {{ 0 => print("zero"), 1..10 => print("small"), _ => {{ debug(total_{n}) }} }}
while total_{n} > 0 {{ total_{n} -= 1; }}
do {{ total_{n} += 1 }} while total_{n} < 5;
try {{ throw "x" }} catch (e) {{ print(e) }}
"""


def _calls_to_parse(source: str) -> int:
    """How many Python function calls parsing `source` takes: work counted, not timed."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        parse(source)
    finally:
        sys.setprofile(None)
    return calls


def test_a_2000_line_script_parses_in_linear_work() -> None:
    """Ten times the lines, about ten times the work (its speed: benchmarks/rhai_compile.py)."""
    source = "".join(_BLOCK.format(n=n) for n in range(200))
    assert source.count("\n") >= 2000
    assert len(parse(source).functions) == 200
    small = _calls_to_parse("".join(_BLOCK.format(n=n) for n in range(20)))
    assert _calls_to_parse(source) <= 11 * small
