"""Generated code names only what `abi.py` lists (issue 10, shape 4: the compiler ↔ runtime contract).

A corpus (the conformance cases, the benchmark scripts, the compile benchmark's
shapes and a few scripts for the rarer paths) is compiled, and every name its
generated Python uses is checked against the ABI: the globals it reads, the
`rt.*` members of the runtime, the attributes of other values. The lists must
also be tight: every entry is used by some script of the corpus and exists.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import symtable
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from agentkernel.rhai import Engine, Limits, RhaiSyntaxError
from agentkernel.rhai.codegen import abi
from agentkernel.rhai.codegen.script_module import compile_script
from agentkernel.rhai.runtime.runtime import Runtime
from agentkernel.rhai.stdlib import Mutated
from agentkernel.rhai.syntax.parser import parse
from tests.rhai.conformance import CASE_FILES, HERE

ROOT = Path(__file__).resolve().parents[2]
RARE_PATHS = [
    'import "x" as y;',  # Module not found
    'import "x"; import "y" as m; export const Z = m::X; let w = 1; export w as v; m::f(1); m::s::g();',
    "fn h() { q::f() }",  # a module the top level imported, found at run time
    'let x = 1; eval("x + 1"); is_def_var("x") && is_def_var(x.to_string())',
    'eval("let s = 1;"); s = 2; s',  # a variable only eval defined, assigned
    "fn f() { this.n += 1 } let m = #{n: 1}; m.f(); m.n",
    "let t = 0; for (x, i) in [1, 2] { t += x * i; if i > 5 { break } } t",
    "try { throw 1 } catch (e) { try { throw } catch { 0 } } exit(3);",
    "let a = 1; let f = || a += 1; f.call(); is_shared(a); curry(f); call(f); a",
    "switch 5 { 1..3 => 1, [1] => 2, #{a: 1} => 3, _ if true => 4 }",
    "global::X; const C = 1; fn g() { global::C } g()",
    "let s = `a${1}b`; s.x = 1; s[0] = 'c'; debug(); debug(s); print(); print(s); type_of(s)",
    "let x = ((1 ?? 2) ?? y); -x; x in [1]; x !in [1]; 5 / x; 5 % x; x ** 2; 1..x; x..=2",
    'fn p(a) { a.push(1); a } let v = [1]; v.push(2); Fn("p").call(v); p(v); is_def_fn("p", 1)',
    'let q = #{}; q?.a?.b; q?["a"]; let r = [[1]]; r[0][0] = 2; r[0].push(3); r',
]


def _nested(depth: int) -> str:
    """Loops nested past what one Python function may hold: compiled apart, with jumps."""
    inner = "if i == 1 { continue } if i == 2 { break } if i == 3 { return 7 } n += 1;"
    for level in range(depth):
        inner = f"for i{level} in 0..2 {{ let i = i{level}; {inner} }}"
    return f"fn f() {{ let n = 0; {inner} n }} f()"


def _compile_benchmark_shapes() -> list[str]:
    spec = importlib.util.spec_from_file_location("rhai_compile", ROOT / "benchmarks" / "rhai_compile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [make(30) for make in module.CASES.values()]


def corpus() -> Iterator[str]:
    for file in (*CASE_FILES, "ops.jsonl"):
        for line in (HERE / file).read_text(encoding="utf-8").splitlines():
            if line.strip() and "src" in (case := json.loads(line)):
                yield case["src"]
    for path in sorted((ROOT / "benchmarks" / "rhai").glob("*.rhai")):
        yield path.read_text(encoding="utf-8")
    yield from _compile_benchmark_shapes()
    yield from RARE_PATHS
    yield _nested(25)


@dataclass
class Used:
    """What a body of generated Python names."""

    globals: set[str] = field(default_factory=set)
    runtime: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)

    def add(self, source: str) -> None:
        tree = ast.parse(source)
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.globals |= _global_names(symtable.symtable(source, "<rhai>", "exec")) - defined
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                on_runtime = isinstance(node.value, ast.Name) and node.value.id == "rt"
                (self.runtime if on_runtime else self.attributes).add(node.attr)


def _global_names(table: symtable.SymbolTable) -> set[str]:
    names = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
    if table.get_type() == "module":
        names = {s.get_name() for s in table.get_symbols() if s.is_referenced() and not s.is_assigned()}
    for child in table.get_children():
        names |= _global_names(child)
    return names


# texts handed to `eval`, compiled as `eval` compiles them (their `let`s go back to the caller)
EVAL_TEXTS = ["let s = 1; s += 1;", "let t = s + 1; if t > 1 { let u = t; }"]


@cache
def used() -> Used:
    engine = Engine(limits=Limits(max_expr_depth=0, max_fn_expr_depth=0))
    seen = Used()
    for text in EVAL_TEXTS:
        seen.add(
            compile_script(parse(text, engine.parse_options(allow_functions=False)), eval_mode=True).source
        )
    compiled = 0
    for source in corpus():
        try:
            script = engine.compile(source)
        except RhaiSyntaxError:
            continue
        seen.add(script.module.source)
        compiled += 1
    assert compiled > 1000
    return seen


def test_generated_code_reads_only_the_abi_globals() -> None:
    allowed = set(abi.GLOBALS) | abi.PER_SCRIPT
    assert used().globals - allowed == set(), "add the name to abi.py, or stop emitting it"


def test_generated_code_uses_only_the_abi_runtime_members() -> None:
    assert used().runtime - abi.RUNTIME_MEMBERS == set(), "add the member to abi.RUNTIME_MEMBERS"


def test_generated_code_uses_only_the_abi_value_attributes() -> None:
    assert used().attributes - abi.VALUE_ATTRIBUTES == set(), "add the attribute to abi.VALUE_ATTRIBUTES"


def test_the_abi_lists_nothing_unused() -> None:
    assert set(abi.GLOBALS) - {"__builtins__"} - used().globals == set()
    assert abi.PER_SCRIPT - used().globals == set()
    assert abi.RUNTIME_MEMBERS - used().runtime == set()
    assert abi.VALUE_ATTRIBUTES - used().attributes == set()


@pytest.mark.parametrize("member", sorted(abi.RUNTIME_MEMBERS))
def test_every_runtime_member_exists(member: str) -> None:
    assert hasattr(Runtime(), member)


def test_the_generated_module_has_no_builtins() -> None:
    assert abi.GLOBALS["__builtins__"] == {}
    assert abi.GLOBALS["Mutated"] is Mutated
