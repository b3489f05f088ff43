"""`@record` (rhai/records.py): the syntax tree's value classes behave as frozen, slotted dataclasses."""

from __future__ import annotations

import dataclasses

import pytest

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import record, record_fields


@record
class Point:
    x: int
    y: int = 0
    tag: str | None = None


def test_construction_defaults_and_repr() -> None:
    assert Point(1) == Point(x=1, y=0, tag=None)
    assert repr(Point(1, 2, "a")) == "Point(x=1, y=2, tag='a')"
    assert record_fields(Point(1)) == ("x", "y", "tag") == Point.__match_args__
    assert record_fields(42) == ()
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_equality_and_hash_are_by_class_and_fields() -> None:
    @record
    class Other:
        x: int
        y: int = 0
        tag: str | None = None

    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1, 2) != Other(1, 2)  # type: ignore[comparison-overlap]
    assert len({Point(1, 2), Point(1, 2), Point(3)}) == 2


def test_frozen_and_slotted() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.x
    assert not hasattr(point, "__dict__")


def test_pattern_matching_on_nodes() -> None:
    match ast.Binary("+", ast.Literal(1, (1, 1)), ast.Var("x", (1, 5)), (1, 3)):
        case ast.Binary("+", ast.Literal(value), ast.Var(name)):
            assert (value, name) == (1, "x")
        case _:
            pytest.fail("the node did not match its own shape")
