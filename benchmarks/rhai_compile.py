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
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from agentkernel.scripting.rhai import Engine, Limits


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--only", help="comma-separated subset of " + ",".join(CASES))
    parser.add_argument("--give-up", type=float, default=60.0, help="seconds; skip larger sizes after")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny counts: checks that it runs (CI); the figures mean nothing"
    )
    options = parser.parse_args()
    if options.smoke:
        options.sizes = "100"
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


if __name__ == "__main__":
    main()
