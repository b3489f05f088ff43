"""The compiler's operands are typed by place, not guessed from their text (issue 10, shape 4)."""

from __future__ import annotations

import pytest

from agentkernel.rhai import Engine, Limits
from agentkernel.rhai.codegen.module import Module, literal_operand
from agentkernel.rhai.codegen.operands import (
    BOXED,
    CONSTANT,
    LITERAL,
    LOCAL,
    NONE,
    TEMP,
    Operand,
    Place,
    joined,
)
from agentkernel.rhai.codegen.variables import VarInfo

DEEP = Limits(max_expr_depth=0, max_fn_expr_depth=0)


def test_an_operand_is_its_text_in_generated_code() -> None:
    temp = Operand("t1", TEMP)
    assert f"x = {temp}" == "x = t1" and str(temp) == "t1"
    assert joined([temp, NONE, "K[0]"]) == "t1, None, K[0]"


@pytest.mark.parametrize(
    ("value", "place", "int_value"),
    [(None, LITERAL, None), (5, LITERAL, 5), (-2, LITERAL, -2), (1.5, LITERAL, None)],
)
def test_literals(value: object, place: Place, int_value: int | None) -> None:
    operand = literal_operand(Module(), value)
    assert operand.place == place and operand.int_value == int_value
    assert not operand.is_variable and not operand.is_name


def test_a_string_is_a_constant_of_the_table() -> None:
    operand = literal_operand(Module(), "s")
    assert operand == Operand("K[0]", CONSTANT) and not operand.is_name


def test_variables_locals_cells_and_boxes() -> None:
    local, cell = VarInfo("v1_x", False, False).load, VarInfo("v2_y", False, True).load
    boxed = VarInfo("B3[0]", False, False, boxed=True).load
    assert local == Operand("v1_x", LOCAL) and cell == Operand("v2_y.v", LOCAL)
    assert boxed.place == BOXED
    assert all(o.is_variable for o in (local, cell, boxed))
    assert local.is_name and cell.is_name and not boxed.is_name  # `B3[0][i]` goes through a temp


def test_a_variable_operand_is_read_before_the_right_side_rebinds_it() -> None:
    assert Engine().eval("let x = 1; x + { x = 5; x }") == 6


def test_so_is_a_variable_of_the_enclosing_function_in_a_part_compiled_apart() -> None:
    inner = "r = x + { x = 5; x };"
    for level in range(14):  # more loops than one Python function may nest
        inner = f"for i{level} in 0..1 {{ {inner} }}"
    source = f"let x = 1; let r = 0; {inner} r"
    engine = Engine(limits=DEEP)
    assert "def h" in engine.compile(source).module.source
    assert engine.eval(source) == 6
