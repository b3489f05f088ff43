"""How Rhai compile time grows with the size of a script (issue 9: compile must be linear).

    .venv/bin/python benchmarks/rhai_compile.py [--sizes 1000,10000,100000] [--only lets,map] [--smoke]

Each case generates a script with N of one construct (N `let`s, a map
literal of N keys, N closures…) and times `Engine.compile` on it: the lexer,
the parser, the code generator and CPython's `compile()` of the generated
code. A linear compile shows as a constant time per item (the µs/item
column) from one size to the next; a quadratic one as a column that grows
tenfold with each tenfold size. A case whose last size took longer than
`--give-up` seconds skips the larger sizes, and so does a size past a case's
own cap (`CAPS`: CPython's `compile()` needs about 1.5 KiB of memory per byte
of such a script, so its 100,000 size would take gigabytes; the kernel
refuses scripts over 256 KiB anyway).

The second table (issue 14 §4) times realistic scripts of 100, 1,000 and
10,000 lines (functions with `let`s, `if`s, loops, maps, string operations
and method calls): lexing and parsing, generating Python, and CPython's
`compile()` of every part, each the least CPU time of `--repeat` runs, in ms;
the whole `Engine.compile` (which leaves a script function's `compile()` to
its first call) also in ms per 1,000 lines (the target: at most 100 for the
whole), then `every fn`: that compile and every function's first-call
compile, what a script that calls all its functions pays, beside CPython
compiling a Python program of the same shape and as many lines (ratio). The third times what a
user waits for: the first call of a kernel tool of 1,000 lines after its
file changed (compiled on that call), after a restart with the compile cache
warm (`paths.data_dir/cache/rhai`), and after a restart with it emptied.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentkernel.rhai import Engine, Limits
from agentkernel.rhai.codegen.script_module import compile_script
from agentkernel.rhai.engine import LazyFunction, _compiled_parts
from agentkernel.rhai.syntax.parser import ParseOptions, parse


def _lets(n: int) -> str:
    return "".join(f"let x{i} = {i};\n" for i in range(n)) + f"x{n - 1}"


def _map(n: int) -> str:
    return "let m = #{" + ", ".join(f"k{i}: {i}" for i in range(n)) + "}; m.len()"


def _array(n: int) -> str:
    return "let a = [" + ", ".join(str(i) for i in range(n)) + "]; a.len()"


def _closures(n: int) -> str:
    return "let y = 1;\n" + "".join(f"let f{i} = |x| x + y + {i};\n" for i in range(n)) + "f0.call(1)"


def _functions(n: int) -> str:
    return "".join(f"fn f{i}(x) {{ x + {i} }}\n" for i in range(n)) + "f0(1)"


def _assignments(n: int) -> str:
    """Many variables, each written later: every write looks its name up."""
    return "".join(f"let v{i} = 0;\n" for i in range(n)) + "".join(f"v{i} += 1;\n" for i in range(n))


def _statements(n: int) -> str:
    """Ordinary code: a loop body of N mixed statements."""
    body = "".join(
        f"if total > {i} {{ total -= 1 }} else {{ total += i * 2 }}\nlist.push(`x${{total}}`);\n"
        for i in range(n // 2)
    )
    return f"let total = 0; let list = []; for i in 0..2 {{\n{body}}}\ntotal"


def _switch(n: int) -> str:
    return "let x = 3; switch x {" + ", ".join(f"{i} => {i}" for i in range(n)) + ", _ => 0 }"


def _consts(n: int) -> str:
    return "".join(f"const C{i} = {i};\n" for i in range(n)) + f"C{n - 1}"


def _evals(n: int) -> str:
    """N/2 variables, then N/2 `eval` calls: each call site can see every variable."""
    half = n // 2
    return "".join(f"let v{i} = {i};\n" for i in range(half)) + 'eval("v0 + 1");\n' * half + "v0"


def _deep(n: int) -> str:
    """N `if`s, nested 50 deep at a time: past one Python function's nesting, compiled apart."""
    block = "if x >= 0 { " * 50 + "x += 1;" + " }" * 50 + "\n"
    return "let x = 0;\n" + block * (n // 50) + "x"


def _strings(n: int) -> str:
    return "let s = " + " + ".join(f'"{i}"' for i in range(min(n, 60))) + ";\n" + "s += `t`;\n" * n + "s"


CASES: dict[str, Callable[[int], str]] = {
    "lets": _lets,
    "map": _map,
    "array": _array,
    "closures": _closures,
    "functions": _functions,
    "assignments": _assignments,
    "statements": _statements,
    "switch": _switch,
    "consts": _consts,
    "evals": _evals,
    "strings": _strings,
    "deep": _deep,
}


CAPS = {"statements": 30_000}


def time_compile(source: str) -> float:
    engine = Engine(limits=Limits(max_expr_depth=0, max_fn_expr_depth=0))
    started = time.perf_counter()
    engine.compile(source)
    return time.perf_counter() - started


_RHAI_FUNCTION = """fn process_{n}(items, opts) {{
    let total = 0;
    let names = [];
    let seen = #{{}};
    for item in items {{
        if item.score > opts.min_{n} {{
            total += item.score * 2 - {k};
            names.push(`${{item.name}}-{n}`);
        }} else if item.name.len() > 3 {{
            seen[item.name] = true;
        }} else {{
            continue;
        }}
    }}
    let label = "result " + names.len().to_string();
    label.trim();
    let i = 0;
    while i < 10 {{ i += 1; if i % 3 == 0 {{ break; }} }}
    let parts = label.split(" ");
    let m = #{{ total: total, label: label.to_upper(), count: parts.len(), first: parts[0] }};
    if m.count == 0 {{ return (); }}
    m
}}
"""

_PYTHON_FUNCTION = """def process_{n}(items, opts):
    total = 0
    names = []
    seen = {{}}
    for item in items:
        if item["score"] > opts["min_{n}"]:
            total += item["score"] * 2 - {k}
            names.append(f"{{item['name']}}-{n}")
        elif len(item["name"]) > 3:
            seen[item["name"]] = True
        else:
            continue
    label = "result " + str(len(names))
    label.strip()
    i = 0
    while i < 10:
        i += 1
        if i % 3 == 0:
            break
    parts = label.split(" ")
    m = {{"total": total, "label": label.upper(), "count": len(parts), "first": parts[0]}}
    if m["count"] == 0:
        return None
    return m
"""


def realistic(lines: int) -> str:
    """A Rhai script of about `lines` lines: functions of everyday code, then a call of one."""
    functions = max(1, (lines - 3) // _RHAI_FUNCTION.count("\n"))
    body = "".join(_RHAI_FUNCTION.format(n=n, k=n % 7) for n in range(functions))
    call = 'let data = [#{name: "abcd", score: 5}, #{name: "xy", score: 1}];\nprocess_0(data, #{min_0: 2});\n'
    return body + call


def realistic_python(lines: int) -> str:
    """The same program in Python, as many lines: what CPython's own compile is held against."""
    functions = max(1, (lines - 2) // _PYTHON_FUNCTION.count("\n"))
    body = "".join(_PYTHON_FUNCTION.format(n=n, k=n % 7) for n in range(functions))
    return (
        body
        + 'data = [{"name": "abcd", "score": 5}, {"name": "xy", "score": 1}]\nprocess_0(data, {"min_0": 2})\n'
    )


def _best(run: Callable[[], object], repeat: int) -> float:
    """The least CPU time of `repeat` runs: on a shared machine, wall time measures the others."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def realistic_table(sizes: list[int], repeat: int) -> None:
    """Each phase of compiling realistic scripts, in ms per 1,000 lines, beside CPython's."""
    print(f"\n{'realistic':<10} {'lines':>7} {'parse':>7} {'codegen':>8} {'bytecode':>9} {'total':>7}"
          f" {'ms/1k':>7} {'every fn':>9} {'CPython':>8} {'ratio':>6}")  # fmt: skip
    for size in sizes:
        _realistic_row(size, repeat)


def _realistic_row(size: int, repeat: int) -> None:
    options = ParseOptions()
    source = realistic(size)
    lines = source.count("\n")
    script = parse(source, options)
    module = compile_script(script)
    parsing = _best(lambda: parse(source, options), repeat)
    generating = _best(lambda: compile_script(script), repeat)
    bytecode = _best(lambda: list(_compiled_parts(module, None)), repeat)
    whole = _best(lambda: Engine().compile(source), repeat)
    every = _best(lambda: _compile_every_function(source), repeat)
    python = realistic_python(lines)
    cpython = _best(lambda: compile(python, "<python>", "exec"), repeat)
    print(
        f"{'realistic':<10} {lines:7,} {parsing * 1e3:7.1f} {generating * 1e3:8.1f} {bytecode * 1e3:9.1f}"
        f" {whole * 1e3:7.1f} {whole * 1e6 / lines:7.1f} {every * 1e3:9.1f} {cpython * 1e3:8.2f}"
        f" {whole / cpython:6.0f}"
    )


def _compile_every_function(source: str) -> None:
    """`Engine.compile`, then the bytecode of every script function it left to a first call:
    what a script that calls all of its functions pays in all."""
    for fn in Engine().compile(source).functions.values():
        if isinstance(fn.body, LazyFunction):
            fn.body.compiled()


def first_call_table(lines: int) -> None:
    """What a user waits for: a kernel tool's first call after an edit, and after restarts."""
    from agentkernel import Kernel
    from agentkernel.config import load_kernel_config

    root = Path(tempfile.mkdtemp(prefix="rhai-compile-"))
    try:
        config = root / "config" / "kernel.yaml"
        tools = root / "config" / "scripts" / "tools"
        tools.mkdir(parents=True)
        config.write_text("scripts:\n  tools: [config/scripts/tools]\n  hooks: []\n", encoding="utf-8")
        (tools / "big.yaml").write_text(
            "kind: script_tool\nname: big\ndescription: big\nscript: big.rhai\n", encoding="utf-8"
        )
        script = tools / "big.rhai"
        source = (
            realistic(lines)
            + "fn run(args) { process_1([#{name: args.name, score: 9}], #{min_1: 1}).total }\n"
        )
        script.write_text(source, encoding="utf-8")

        def call(kernel: Kernel) -> float:
            started = time.perf_counter()
            result = kernel.run_tool("big", {"name": "abcd"})
            assert result.success, result.content
            return time.perf_counter() - started

        print(f"\nfirst call of a kernel tool of {source.count(chr(10)):,} lines (ms):")
        with Kernel(load_kernel_config(config)) as kernel:
            call(kernel)
            warm = min(call(kernel) for _ in range(3))
            script.write_text(source.replace("- 1;", "- 2;"), encoding="utf-8")
            edited = call(kernel)
        with Kernel(load_kernel_config(config)) as kernel:
            cached = call(kernel)
        shutil.rmtree(root / "data" / "cache", ignore_errors=True)  # (none before issue 14)
        with Kernel(load_kernel_config(config)) as kernel:
            uncached = call(kernel)
        print(f"  {'compiled already (a later call)':<44} {warm * 1e3:8.1f}")
        print(f"  {'after its file changed':<44} {edited * 1e3:8.1f}")
        print(f"  {'after a restart, compile cache warm':<44} {cached * 1e3:8.1f}")
        print(f"  {'after a restart, compile cache empty':<44} {uncached * 1e3:8.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(CASES))
    parser.add_argument("--give-up", type=float, default=60.0, help="seconds; skip larger sizes after")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    parser.add_argument("--lines", default="100,1000,10000", help="sizes of the realistic scripts")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each realistic timing (the best)")
    options = parser.parse_args()
    if options.smoke:
        options.sizes, options.lines, options.repeat = "100", "100", 1
    sizes = [int(s) for s in options.sizes.split(",")]
    names = options.only.split(",") if options.only else list(CASES)
    print(f"{'case':<12} {'N':>8} {'source KB':>10} {'compile s':>10} {'µs/item':>9}")
    for name in names:
        for size in sizes:
            if size > CAPS.get(name, size):
                print(f"{name:<12} {size:8,} skipped (over this case's cap)")
                break
            source = CASES[name](size)
            seconds = time_compile(source)
            print(
                f"{name:<12} {size:8,} {len(source) / 1024:10.0f} {seconds:10.3f} {seconds / size * 1e6:9.1f}"
            )
            if seconds > options.give_up:
                print(f"{name:<12} larger sizes skipped (over {options.give_up:g} s)")
                break
    realistic_table([int(s) for s in options.lines.split(",")], options.repeat)
    first_call_table(100 if options.smoke else 1000)


if __name__ == "__main__":
    main()
