"""`@record` and `@mutable_record` (rhai/syntax/records.py) behave as slotted dataclasses, frozen or not."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import ClassVar

import pytest

from agentkernel.rhai.syntax import ast
from agentkernel.rhai.syntax.records import field, mutable_record, record, record_fields, replace


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


@record
class Tagged:
    """A value with fields outside its equality (as the interpreter's ranges and Fn pointers)."""

    name: str
    items: list[int] = field(default_factory=list, compare=False)
    tag: int = field(default=0, compare=False, repr=False)


@mutable_record
class Counter:
    count: int = 0
    seen: set[int] = field(default_factory=set)
    names: list[str] = field(default_factory=list, repr=False)


def test_fields_left_out_of_equality_hash_and_repr() -> None:
    assert Tagged("a", [1], tag=5) == Tagged("a", [2]) and Tagged("a") != Tagged("b")
    assert hash(Tagged("a", [1], tag=5)) == hash(Tagged("a"))
    assert repr(Tagged("a", [1], tag=5)) == "Tagged(name='a', items=[1])"


def test_default_factory_makes_a_value_per_instance() -> None:
    first, second = Tagged("a"), Tagged("a")
    assert first.items == [] and first.items is not second.items
    given = [7]
    assert Tagged("a", given).items is given


def test_mutable_record_assigns_and_is_unhashable() -> None:
    counter = Counter()
    counter.count += 1
    counter.seen.add(3)
    assert counter == Counter(1, {3}) != Counter(1)
    assert repr(counter) == "Counter(count=1, seen={3})"
    assert Counter().seen is not Counter().seen
    with pytest.raises(TypeError):
        hash(counter)
    with pytest.raises(AttributeError):
        counter.other = 1  # type: ignore[attr-defined]
    assert not hasattr(counter, "__dict__")


def test_errors_name_the_class_and_the_field() -> None:
    with pytest.raises(TypeError, match=r"Point.__init__\(\) missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="Late: field 'b' without a default follows one with a default"):

        @record
        class Late:
            a: int = 0
            b: int  # type: ignore[misc]


def test_replace_copies_with_changes() -> None:
    tagged = Tagged("a", [1])
    changed = replace(tagged, tag=4)
    assert (changed.name, changed.items, changed.tag, tagged.tag) == ("a", [1], 4, 0)
    with pytest.raises(TypeError, match="Tagged has no field 'other'"):
        replace(tagged, other=1)


def test_pickle_and_copy_keep_every_field() -> None:
    for value in (Point(1, 2, "t"), Tagged("a", [1], tag=3), Counter(2, {1}, ["n"])):
        for twin in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(twin) is type(value)
            fields = record_fields(value)
            assert [getattr(twin, n) for n in fields] == [getattr(value, n) for n in fields]


def test_shapes_share_a_template_but_not_names() -> None:
    @record
    class Pair:
        left: int
        right: int = 1

    @record
    class Span:
        start: int
        end: int = 2

    assert (Pair(0).left, Pair(0).right, Span(0).start, Span(0).end) == (0, 1, 0, 2)
    assert Pair(right=5, left=4) == Pair(4, 5) and Span(end=5, start=4) == Span(4, 5)
    assert Pair.__init__.__code__.co_varnames == ("self", "left", "right")


def test_class_variables_are_not_fields() -> None:
    @record
    class Kind:
        names: ClassVar[tuple[str, ...]] = ("a", "b")
        name: str

    assert record_fields(Kind("a")) == ("name",) and Kind.names == ("a", "b")
