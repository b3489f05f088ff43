"""All the data one evaluation holds is bounded, not just each value (issue 9, item 4; S21.1).

Sizes are counted as the reference counts them (`data_check.rs`): nested
values count toward their container, and a string stored many times counts
each time. What died is not counted, and nothing is built that would not
fit: a size is refused before the allocation, not after it.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from agentkernel.rhai import Engine, Limits, RhaiRuntimeError
from agentkernel.rhai.codegen.abi import bind_closure
from agentkernel.rhai.runtime.data_size import SCALAR, STRING, cut_size
from agentkernel.rhai.runtime.runtime import Cell, data_size_of, flat_size_of
from agentkernel.rhai.runtime.values import Char, FnPtr, with_tag

MIB = 1 << 20


def engine(data_mib: float = 4, **limits: int) -> Engine:
    return Engine(limits=Limits(max_data_size=int(data_mib * MIB), max_operations=10**9, **limits))


def too_large(source: str, data_mib: float = 4, **limits: int) -> RhaiRuntimeError:
    with pytest.raises(RhaiRuntimeError) as info:
        engine(data_mib, **limits).eval(source)
    err = info.value
    assert (err.kind, err.catchable) == ("ErrorDataTooLarge", False)
    return err


# -- sizes -------------------------------------------------------------------------------------------------


def test_a_string_counts_by_its_length() -> None:
    assert data_size_of("x" * 1000) == STRING + 1000
    assert data_size_of("ж" * 1000) > 2000  # wide characters take more room


def test_a_shared_string_counts_each_time_it_is_stored() -> None:
    text = "x" * 1000
    once = data_size_of([text])
    assert data_size_of([text] * 10) >= 10 * (STRING + 1000)
    assert data_size_of([[text], [text]]) > 2 * once - 100


TEXTS = {
    "words": " ".join(f"word{i}" for i in range(100)),
    "wide words": " ".join("слово" * (i % 7 + 1) for i in range(60)),
    "long wide words": " ".join(["🙂" * 300, *("ж" * 260 for _ in range(20)), "x"]),
    "whitespace runs": "\t\n ".join(f"w{i}  " for i in range(40)),
    "few words": "one two three",
}


@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
def test_what_split_counts_is_at_least_what_its_pieces_take(text: str) -> None:
    pieces = text.split()
    bound = cut_size(len(pieces), text)
    if len(pieces) <= 16:
        assert bound is None  # few pieces: each measured alone
    else:
        assert bound is not None and bound >= data_size_of(pieces)


FLAT_ITEMS: dict[str, list[Any]] = {
    "strings": [f"s{i}" for i in range(40)],
    "few strings": ["a", "ж" * 300, "b"],
    "long wide strings": ["🙂" * 300 for _ in range(20)],
    "mixed": [1, "two", 3.0, True, Char("c"), None, *(f"x{i}" for i in range(30))],
    "no strings": [1, 2.5, False, Char("z")] * 10,
    "empty": [],
}


@pytest.mark.parametrize("items", FLAT_ITEMS.values(), ids=FLAT_ITEMS.keys())
def test_an_array_of_flat_items_counts_without_a_first_pass(items: list[Any]) -> None:
    """Given its items' types it finds what a walk finds; given more (a filter's, of the array it
    kept some of), at least that."""
    assert flat_size_of(items, set(map(type, items))) == data_size_of(items)
    wider = flat_size_of(items, set(map(type, items)) | {int, str})
    assert wider is not None and wider >= data_size_of(items)


def test_an_array_holding_a_container_or_tagged_value_is_not_flat() -> None:
    for item in ([1], {"a": 1}, bytearray(b"x"), with_tag("s", 1), FnPtr("f")):
        items = ["a", item]
        assert flat_size_of(items, set(map(type, items))) is None


def test_a_tagged_array_or_map_counts_as_an_untagged_one() -> None:
    def array() -> list[Any]:
        return [{"k": "x" * 100}, ["y" * 50]]

    def table() -> dict[str, Any]:
        return {"a": ["y" * 50], "b": "z" * 70}

    assert data_size_of(with_tag(array(), 7)) == data_size_of(array())
    assert data_size_of(with_tag(table(), 7)) == data_size_of(table())
    assert data_size_of([with_tag(array(), 7)]) == data_size_of([array()])


def test_scalars_nested_values_and_closures_count() -> None:
    assert data_size_of([1, 2.5, True]) >= 3 * SCALAR
    assert data_size_of({"a": [1, 2], "b": {"c": "xyz"}}) > data_size_of([1, 2]) + data_size_of("xyz")
    captured = Cell("y" * 5000)
    closure = FnPtr("anon$1", (), _closure_with(captured))
    assert data_size_of(closure) > 5000
    assert data_size_of(FnPtr("f", ("z" * 3000,))) > 3000


def _closure_with(cell: Cell) -> Callable[..., Any]:
    """What the compiler makes of `|| captured`: the body with the captured cell bound first."""

    def body(cell: Cell, rt: object, d: int, th: object) -> None:
        return None

    return bind_closure(body, 0, cell)


def test_a_closure_that_captures_itself_is_counted_once() -> None:
    cell = Cell(None)
    cell.v = FnPtr("anon$2", (), _closure_with(cell))
    assert 0 < data_size_of(cell.v) < 1000


# -- the limit on one evaluation --------------------------------------------------------------------------

S = 'let s = ""; s.pad(100000, "x"); '  # a 100 kB string; the limit is 4 MiB
W = 'let w = []; for i in 0..40 { let s = ""; s.pad(10000, "x"); w.push(s + i); } '  # 40 strings of 10 kB
HOLDING_TOO_MUCH = {
    "strings in an array": S + "let a = []; for i in 0..100 { a.push(s + i); }",
    "one string stored many times": S + "let a = []; a.pad(100, s);",
    "copies in a map": "let a = []; a.pad(10000, 1); let m = #{}; for i in 0..100 { m[`k${i}`] = a; }",
    "copies down a recursion": "fn f(n, a) { if n > 0 { f(n - 1, a) } } "
    "let a = []; a.pad(20000, 1); f(60, a);",
    "closures": S + "let fs = []; for i in 0..100 { let t = s + i; fs.push(|| t); }",
    "results of map": S + "let a = []; a.pad(100, 1); a.map(|x| s + x);",
    "a map built by a callback": S + "let m = #{}; for i in 0..100 { m[`k${i}`] = i; } m.map(|k, v| s + v);",
    "eval's variables": S + "for i in 0..100 { eval(`let v${i} = s + ${i};`); }",
    "+= on an array": S + "let a = []; for i in 0..100 { a += s + i; }",
    "array +": "let a = []; a.pad(20000, 1); let b = []; for i in 0..20 { b = b + a; }",
    "split": 'let s = ""; s.pad(2000000, "x,"); let parts = s.split(",");',
    # natives that count what they build themselves (registered `charged`)
    # natives that count what they build themselves (registered `charged`), held down a recursion
    "split at whitespace": "fn f(n, s) { let a = s.split(); if n > 0 { f(n - 1, s) } } "
    'let s = ""; s.pad(20000, "word "); f(40, s);',
    "results of filter": W + "".join(f"let k{i} = w.filter(|x| x.len > 0); " for i in range(20)),
    "results of filter by name": W
    + "fn long(x) { x.len > 0 } "
    + "".join(f'let k{i} = w.filter("long"); ' for i in range(20)),
    # `this` is not copied, but each `for` walks its own copy of the array
    "loops over this in a recursion": "fn walk(d) { for x in this { if d > 0 { this.walk(d - 1) } break; } } "
    "let a = []; a.pad(20000, 1); a.walk(60);",
}


@pytest.mark.parametrize("source", HOLDING_TOO_MUCH.values(), ids=HOLDING_TOO_MUCH.keys())
def test_holding_more_than_the_limit_stops_the_script(source: str) -> None:
    """Each is stopped, whichever counts what it builds: the runtime after a native, or the native."""
    err = too_large(source)
    assert err.message in {
        "Length of string too large",
        "Size of array/BLOB too large",
        "Size of object map too large",
    }
    assert err.extras["limit"] == 4 * MIB


def test_the_message_names_what_takes_the_room() -> None:
    many_strings = 'let s = ""; s.pad(100000, "x"); let a = []; for i in 0..100 { a.push(s + i); }'
    assert too_large(many_strings).message == "Length of string too large"
    many_maps = "let a = []; for i in 0..100000 { a.push(#{ n: i, m: i }); }"
    assert too_large(many_maps).message == "Size of object map too large"


def test_a_limit_cannot_be_caught() -> None:
    too_large('let s = ""; s.pad(100000, "x"); let a = []; try { loop { a.push(s + a.len()); } } catch { 1 }')


def test_what_died_is_not_counted() -> None:
    source = """
        let total = 0;
        for i in 0..300 {
            let s = "";
            s.pad(50000, "x");
            let a = [s + i, s];
            total += a[0].len();
        }
        total
    """
    assert engine(data_mib=1).eval(source) == 300 * 50000 + sum(len(str(i)) for i in range(300))


def test_without_a_limit_nothing_is_counted() -> None:
    plain = Engine(limits=Limits(max_operations=10**9))
    assert plain.eval('let s = ""; s.pad(100000, "x"); let a = []; a.pad(100, s); a.len()') == 100


# -- refused before it is built ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        'let s = "x"; s.pad(16000000, "y");',
        'let s = ""; s.pad(1000000, "x"); s.replace("x", "yyyyyyyyyy");',
        'let s = ""; s.pad(1000000, "x"); s.to_chars();',
        'let s = ""; s.pad(1000000, "x"); s.split("");',
    ],
    ids=["pad", "replace", "to_chars", "split"],
)
def test_a_native_refuses_before_building(source: str) -> None:
    """`s` (1 MB) fits in 2 MiB; what the native would build does not, and is never built."""
    tracemalloc.start()
    try:
        too_large(source, data_mib=2)
        _, most = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert most < 8 * MIB


def test_interpolation_checks_the_length_before_joining() -> None:
    """`${s}` forty times would be 40 MB; the 2 MB string limit refuses it before any joining."""
    parts = "${s}" * 40
    source = f'let s = ""; s.pad(1000000, "x"); let t = `{parts}`;'
    tracemalloc.start()
    try:
        with pytest.raises(RhaiRuntimeError, match="Length of string too large"):
            Engine(limits=Limits(max_string_size=2_000_000)).eval(source)
        _, most = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert most < 16 * MIB


def test_parse_json_reserves_what_the_text_may_build() -> None:
    """Four megabytes of `[],` would be 1.3 million arrays, far more than 16 MiB: refused unparsed."""
    source = 'let t = `{"a": [`; t.pad(4000000, "[],"); t += "[]]}"; parse_json(t).a.len()'
    tracemalloc.start()
    try:
        too_large(source, data_mib=16)
        _, most = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert most < 32 * MIB
    assert engine(data_mib=16).eval('parse_json(`{"a": [1, 2, {"b": "c"}]}`)') == {"a": [1, 2, {"b": "c"}]}
