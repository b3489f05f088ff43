"""The one short display of a value (agentkernel/util/short_text.py) that errors, logs and the chat use."""

from __future__ import annotations

import json

import pytest

from agentkernel.util.short_text import clip, json_preview, shown_value


@pytest.mark.parametrize(
    ("text", "width", "mark", "shown"),
    [
        ("short", 10, "...", "short"),
        ("exactly10!", 10, "...", "exactly10!"),
        ("eleven char", 10, "...", "eleven ..."),
        ("eleven char", 10, "…", "eleven ch…"),
        ("abc", 2, "...", "..."),  # a mark wider than the room still says "cut"
    ],
)
def test_clip_keeps_to_the_width_and_marks_a_cut(text: str, width: int, mark: str, shown: str) -> None:
    assert clip(text, width, mark) == shown
    assert len(clip(text, width, mark)) <= max(width, len(mark))


def test_a_string_is_quoted_anything_else_is_json() -> None:
    assert shown_value("users") == "'users'"
    assert shown_value("a\nb") == "'a\\nb'"
    assert [shown_value(v) for v in (5, 1.5, True, None, [1], {"scope": "user"})] == [
        "5",
        "1.5",
        "true",
        "null",
        "[1]",
        '{"scope": "user"}',
    ]


def test_a_huge_value_shows_its_start_within_the_width() -> None:
    assert shown_value("x" * 1_000_000) == "'" + "x" * 76 + "..."
    many = ["y" * 1_000_000] * 1_000  # a gigabyte of JSON: never built
    shown = shown_value(many, 40)
    assert shown == '["' + "y" * 35 + "..." and len(shown) == 40


def test_json_preview_cuts_exactly_past_the_width() -> None:
    for size in (77, 78, 79, 80, 81):
        value = ["z" * (size - 4)]  # JSON text of `size` characters
        text = json.dumps(value)
        assert len(text) == size
        assert json_preview(value) == (text if size <= 80 else text[:77] + "...")


def test_a_value_that_is_not_json_shows_as_python_writes_it() -> None:
    assert shown_value({1, 2}, 20) == "{1, 2}"
