"""Appending to a string where it lies: no quadratic cliffs.

CPython grows a string in place only when nothing but the one local being
assigned refers to it: `t += x` compiled as `BINARY_OP` + `STORE_FAST` on a
string with no other reference resizes it instead of copying it. Through
`rt.compound(op, s, x)`, or while a map, an array or a Cell still holds the
string, every append copies it, and building a string in a loop takes time
quadratic in its length (docs/benchmarks.md has the figures).

So `s += x` and `s.append(x)` on a string are compiled as:

- a plain local: `s += text` on the local itself;
- a captured variable (a Cell), a property (`o.s += x`) or an element
  (`a[i] += x`, `m["k"] += x`): the string is taken out into a temporary,
  its holder's slot cleared, the temporary extended, and put back.

Only for a string target that stays within `max_string_size`; anything else
(an array, a BLOB, a char, a string that would pass the limit, a custom type)
takes the general path given as `slow`, which raises the reference's errors.
The data limit is charged what is appended, as the general path would.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.operands import Operand, list_index_test
from agentkernel.rhai.syntax import ast

Slow = Callable[[Operand], None]
"""Emits the general path, given the operand holding the target's current value."""


def append_in_place(
    c: FunctionBase,
    target: ast.Expr,
    right: Operand,
    slow: Slow,
    also: str = "True",
    *,
    counted: bool = False,
) -> bool:
    """Compile `target += right` (or `target.append(right)`) growing a string in place.

    `also`: one more run-time condition of the fast path; `counted`: `+=`, whose `+=` of a
    value that is no string nor char calls a function of the reference's library, counted
    as it runs (`append` is a method's call, counted with its node). Returns False,
    having emitted nothing, when the target is not a kind this can take
    (`this`, a constant, a variable proven to hold an int); the caller then
    compiles its general path alone.
    """
    if isinstance(target, ast.Var):
        return _to_variable(c, target, right, slow, also, counted)
    if isinstance(target, ast.Property | ast.Index) and c.is_lvalue(target) and not _optional(target):
        _to_member(c, target, right, slow, also, counted)
        return True
    return False


def _optional(node: ast.Expr) -> bool:
    while isinstance(node, ast.Property | ast.Index):
        if node.optional:
            return True
        node = node.target
    return False


def _to_variable(
    c: FunctionBase, target: ast.Var, right: Operand, slow: Slow, also: str, counted: bool
) -> bool:
    info = c.lookup(target.name)
    if target.namespace is not None or info is None or info.const or info.load in c.int_operands:
        return False  # a variable known to hold an int keeps the int fast path
    if not info.cell:
        current = info.load
        _unchecked(c, current, right, also)
        with c.indented():
            text = _text(c, current, right, also, counted)
            c.emit(f"{current} += {text}")
            _charge(c, text)
            _otherwise(c, current, slow)
        return True
    current = c.temp()
    c.emit(f"{current} = {info.py}.v")
    text = _text(c, current, right, also, counted)
    c.emit(f"{info.py}.v = None")  # the Cell lets go: `current` is the string's one reference
    c.emit(f"{current} += {text}")
    c.emit(f"{info.py}.v = {current}")
    _charge(c, text)
    _otherwise(c, current, slow)
    return True


def _to_member(
    c: FunctionBase, target: ast.Property | ast.Index, right: Operand, slow: Slow, also: str, counted: bool
) -> None:
    holder = c.named(c.expr(target.target))
    current = c.link(target, holder)
    if isinstance(target, ast.Property):
        key = c.m.constant(target.name)
        plain_slot = c.type_test(holder, "dict")
    else:
        key = c.index_of(target)
        dict_slot = f"{c.type_test(holder, 'dict')} and type({key}) is str"
        listed = list_index_test(holder, key, is_list=c.type_test(holder, "list"))
        plain_slot = f"(({listed}) or ({dict_slot}))"
    text = _text(c, current, right, f"{also} and {plain_slot}", counted)
    c.emit(f"{holder}[{key}] = None")  # the container lets go: `current` is the string's one reference
    c.emit(f"{current} += {text}")
    c.emit(f"{holder}[{key}] = {current}")
    _charge(c, text)
    _otherwise(c, current, slow)


def _unchecked(c: FunctionBase, current: Operand, right: Operand, also: str) -> None:
    """A string to a string with no size limit set (nothing to check, nothing to count):
    Python's `+=` alone; opens the `else:` of every other case."""
    tests = [c.type_test(current, "str", unless="sizes_checked")]
    if not c.is_str_constant(right):
        tests.append(c.type_test(right, "str"))
    if also != "True":
        tests.append(also)
    c.emit(f"if {' and '.join(tests)}:")
    with c.indented():
        c.emit(f"{current} += {c.str_literal(right) if c.is_str_constant(right) else right}")
    c.emit("else:")


def _text(c: FunctionBase, current: Operand, right: Operand, also: str, counted: bool) -> Operand:
    """Open the fast branch: `current` is a string, `right`'s text fits; returns the text."""
    text = c.temp()
    c.emit(f"{text} = None")
    c.emit(f"if {c.type_test(current, 'str')}{'' if also == 'True' else f' and {also}'}:")
    with c.indented():
        if c.is_str_constant(right):
            c.emit(f"{text} = {c.str_literal(right)}")
        elif counted:
            c.emit(f"if type({right}) is str: {text} = {right}")
            c.emit("else:")
            with c.indented():
                c.emit(f"{text} = rt.append_text({right})")
                c.emit(f"if type({right}) is not Char:")
                with c.indented():
                    c.count(1, None)
        else:
            c.emit(f"{text} = {right} if type({right}) is str else rt.append_text({right})")
        limit = c.setting("string_limit")
        c.emit(f"if {limit} and len({current}) + len({text}) > {limit}: {text} = None")
    c.emit(f"if {text} is not None:")
    c.ind += 1
    return text


def _charge(c: FunctionBase, text: Operand) -> None:
    c.emit(f"if {c.setting('data_limit')}: rt.charge_data(len({text}))")


def _otherwise(c: FunctionBase, current: Operand, slow: Slow) -> None:
    """Close the fast branch and emit the general path."""
    c.ind -= 1
    c.emit("else:")
    with c.indented():
        slow(current)
