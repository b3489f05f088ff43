"""The standard string methods compiled inline (codegen/inline_methods.py) answer as the natives do.

Each script runs twice: as compiled, and with the runtime's `natives_inline`
turned off, so that every call takes the general path (the registry's
native). Values, operation counts and errors must be the same; what turns the
fast path off (a script's function of the name, a typed method, a host's
registration) must still win.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.codegen.inline_methods import INLINE
from agentkernel.rhai.engine import _run_main
from agentkernel.rhai.stdlib import INLINED
from agentkernel.scripting.rhai_modules import module_resolver

# Rust's whitespace that Python's str.strip() also takes, and what each takes alone
RUST_AND_PYTHON = " \t\n\u2003\u3000\x85\xa0"
PYTHON_ONLY = "\x1c\x1d\x1e\x1f"  # str.isspace(), not char::is_whitespace
# where a method that changes its receiver may find it
HOLDERS = (
    "let s = TEXT; let r = s.M(); [s, r]",
    "let m = #{s: TEXT}; m.s.M(); m",
    "let a = [TEXT]; a[0].M(); a",
)


def run(source: str, *, inline: bool = True, **limits: Any) -> tuple[Any, int]:
    """`source`'s value and the operations it counted, with the inline paths on or off."""
    engine = Engine(limits=Limits(max_operations=10_000_000, **limits))
    script = engine.compile(source)
    rt = engine.new_runtime(script, stdout=lambda text: None)
    rt.natives_inline = rt.natives_inline and inline
    return _run_main(rt, script), rt.counted()


def same_both_ways(source: str, **limits: Any) -> Any:
    """`source` gives the same value and count inline and not; returns the value."""
    inline = run(source, **limits)
    general = run(source, inline=False, **limits)
    assert inline == general, source
    return inline[0]


def test_the_compiler_and_the_library_list_the_same_inline_methods() -> None:
    assert set(INLINE) == set(INLINED)


# every inline method, its arguments variables (tested at run time) and literals (tested as compiled)
EVERY_METHOD = """
let out = [];
for x in ["", "l", "hé", "zz", 'o', 'é'] {
    out.push([s.contains(x), s.starts_with(x), s.ends_with(x), s.index_of(x)]);
}
for n in [0, 2, -3, 9, 99, -20] {
    for m in [0, 1, 3, 100, -4] { out.push(s.sub_string(n, m)); }
    out.push(s.sub_string(n));
}
out.push([s.len(), s.is_empty(), s.to_upper(), s.to_lower(), s.contains("é"), s.index_of('l')]);
out.push([s.sub_string(0, 3), s.sub_string(1, 0), s.sub_string(1, -4), s.sub_string(-2, 1)]);
out.push([s.sub_string(99, 2), s.sub_string(2, 99)]);
out.push([s.sub_string(0), s.sub_string(-1), s.sub_string(99), s]);
out
"""


@pytest.mark.parametrize("text", ["", "héllo wörld", "ßtraße", "  spaced  ", "l", "x\u0301y"])
def test_every_method_gives_what_the_native_gives(text: str) -> None:
    same_both_ways(f"let s = {rhai_literal(text)};" + EVERY_METHOD)


def test_the_inline_path_is_the_one_compiled() -> None:
    source = Engine().compile('let s = " a "; s.trim(); [s.sub_string(0, 1).to_upper(), s.index_of("a")]')
    code = source.module.source
    for piece in (".strip(", "s[:1]", ".upper()", ".find("):
        assert piece in code.replace("v1_s[:1]", "s[:1]").replace("_s[:1]", "s[:1]"), piece


@pytest.mark.parametrize(
    "method",
    ["trim", "make_upper", "make_lower"],
)
@pytest.mark.parametrize(
    "text",
    [
        "  Abc  ",
        "",
        "\u3000Straße\u2003",
        f"{PYTHON_ONLY}x{PYTHON_ONLY}",
        f"{RUST_AND_PYTHON}é{RUST_AND_PYTHON}",
    ],
)
def test_a_method_changing_its_receiver_stores_it_back_wherever_it_is(method: str, text: str) -> None:
    for holder in HOLDERS:
        same_both_ways(holder.replace("TEXT", rhai_literal(text)).replace("M", method))


def rhai_literal(text: str) -> str:
    """`text` as a Rhai string literal, every character but a letter escaped (`\\u2003`)."""
    return '"' + "".join(c if c.isalnum() and c.isascii() else f"\\u{ord(c):04x}" for c in text) + '"'


def test_trim_takes_rusts_whitespace_not_pythons() -> None:
    """`\\x1c`–`\\x1f` are whitespace to Python's `str.isspace()`, not to Rust's `char::is_whitespace`."""
    value, _ = run('let s = "\\x1c\\u3000 x \\u2003\\x1f"; s.trim(); s')
    assert value == "\x1c\u3000 x \u2003\x1f"
    value, _ = run('let s = "\\u3000\\x85 x \\u2003\\t"; s.trim(); s')
    assert value == "x"


def test_trim_of_a_constant_fails_as_the_general_path_does() -> None:
    with pytest.raises(RhaiRuntimeError, match="constant"):
        run('const S = " a "; S.trim(); S')


@pytest.mark.parametrize(
    "source",
    [
        "let c = 'a'; [c.to_upper(), c.to_lower()]",  # a char's own natives
        "let a = [1, 2]; [a.len(), a.is_empty(), a.contains(2), a.index_of(2)]",
        'let m = #{len: 3}; [m.len(), m.contains("len")]',
        "let b = blob(3); [b.len(), b.is_empty()]",
        'let s = "ab"; s.set_tag(1); [s.len(), s.contains("b"), s.to_upper()]',  # tagged
        "let s = \"abcdef\"; [s.contains('c'), s.index_of('d'), s.starts_with('a')]",
    ],
)
def test_other_receivers_and_arguments_take_their_own_natives(source: str) -> None:
    same_both_ways(source)


@pytest.mark.parametrize(
    "source",
    [
        'let s = "abc"; s.sub_string("x", 1)',
        'let s = "abc"; s.sub_string(1, "x")',
        'let s = "abc"; s.contains(1)',
        'let s = "abc"; s.index_of(())',
        "let s = 5; s.to_upper()",
        "let s = 5; s.trim()",
    ],
)
def test_wrong_types_fail_with_the_natives_own_error(source: str) -> None:
    with pytest.raises(RhaiRuntimeError) as inline:
        run(source)
    with pytest.raises(RhaiRuntimeError) as general:
        run(source, inline=False)
    assert str(inline.value) == str(general.value)


def test_a_long_receiver_takes_the_general_path_and_answers_the_same() -> None:
    long = "x" * 300
    assert same_both_ways(
        f'let s = "  {long}  "; s.trim(); [s.len(), s.sub_string(298, 5), s.to_upper().len()]'
    ) == [
        300,
        "xx",
        300,
    ]


@pytest.mark.parametrize(
    ("definition", "call", "expected"),
    [
        ('fn trim() { this = "mine"; 1 }', "s.trim()", [1, "mine"]),
        ("fn sub_string(a, b) { `mine ${a} ${b}` }", "s.sub_string(0, 1)", ["mine 0 1", " a "]),
        ("fn len() { 42 }", "s.len()", [42, " a "]),
        ('fn to_upper() { "up" }', "s.to_upper()", ["up", " a "]),
        ("fn string.index_of(x) { -7 }", 's.index_of("a")', [-7, " a "]),
        ("fn int.twice() { this * 2 }", "s.to_upper()", [" A ", " a "]),  # any typed method: general path
    ],
)
def test_a_script_function_of_the_name_still_wins(definition: str, call: str, expected: list[Any]) -> None:
    value, _ = run(f'{definition} let s = " a "; let r = {call}; [r, s]')
    assert value == expected


def test_a_host_registration_still_wins() -> None:
    engine = Engine()
    engine.register_fn("sub_string", lambda s, a, b: "host", params=[str, int, int])
    assert engine.eval('let s = "abc"; [s.sub_string(0, 1), s.to_upper()]') == ["host", "ABC"]
    engine = Engine()
    engine.register_fn("trim", lambda s: None, params=[str])  # a host's trim changes nothing
    assert engine.eval('let s = " abc "; s.trim(); s') == " abc "


def test_a_module_function_of_the_name_wins_inside_its_module(tmp_path: Path) -> None:
    (tmp_path / "m.rhai").write_text('fn to_upper() { "module" } fn up(s) { s.to_upper() }')
    engine = Engine(module_resolver=module_resolver(tmp_path))
    assert engine.eval('import "m" as m; let s = "a"; [m::up(s), s.to_upper()]') == ["module", "A"]


def test_the_data_limit_counts_what_the_inline_methods_build() -> None:
    """As much counted toward the data limit as the general path counts, and the limit holds."""
    source = (
        'let s = " abcdefghij "; let a = []; '
        "for i in 0..100 { s.trim(); a.push(s.to_upper()); a.push(s.sub_string(0, 9)) }"
    )
    meters = []
    for inline in (True, False):
        engine = Engine(limits=Limits(max_data_size=1 << 20))
        script = engine.compile(source)
        rt = engine.new_runtime(script)
        rt.natives_inline = inline
        _run_main(rt, script)
        meters.append(rt.data_meter)
    assert meters[0] == meters[1] > 100 * 2 * 9
    with pytest.raises(RhaiRuntimeError, match="too large"):
        run(source.replace("0..100", "0..100000"), max_data_size=20_000)


def test_counts_are_the_same_under_a_kernel_tools_limits() -> None:
    limits = {"max_string_size": 1000, "max_array_size": 100, "max_map_size": 100, "max_data_size": 1 << 20}
    source = (
        'let t = ""; for i in 0..50 { let s = " ab "; s.trim(); t += `${s.to_upper()}${s.index_of("b")}`; } t'
    )
    assert same_both_ways(source, **limits) == "AB1" * 50
