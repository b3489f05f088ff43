"""Result normalisation, visual blocks, warnings rules and truncation: S4, S5, S6."""

from __future__ import annotations

import pytest

from agentkernel import Kernel
from agentkernel.config import KernelLimits, WarningRule
from agentkernel.tools.results import ToolResult, finish, normalize, rule_matches, truncate
from agentkernel.tools.visual import block_problem, validate_visual
from agentkernel.types import NO_VALUE, JSONValue
from tests.conftest import ToolFactory

LIMITS = KernelLimits()


def norm(value: JSONValue) -> ToolResult:
    return normalize(value, max_visual_chars=LIMITS.max_visual_chars)


# -- S4: every return form --------------------------------------------------------


def test_s4_3_plain_string_is_content() -> None:
    assert norm("Слов: 2").to_json() == {
        "content": "Слов: 2",
        "success": True,
        "error": None,
        "visual": None,
        "warnings": [],
    }


def test_s4_1_object_with_content_defaults_to_success() -> None:
    result = norm({"content": "ok"})
    assert (result.content, result.success, result.error) == ("ok", True, None)


def test_s4_2_error_without_success_is_a_failure_with_error_as_content() -> None:
    result = norm({"error": "empty text"})
    assert (result.content, result.success, result.error) == ("empty text", False, "empty text")


def test_s4_2_content_and_error_keep_both() -> None:
    result = norm({"content": "текст пуст", "success": False, "error": "empty text"})
    assert (result.content, result.success, result.error) == ("текст пуст", False, "empty text")


def test_s4_2_explicit_success_wins_over_error() -> None:
    result = norm({"content": "partial", "success": True, "error": "one source failed"})
    assert result.success is True and result.error == "one source failed"


def test_empty_error_string_is_not_a_failure() -> None:
    assert norm({"content": "fine", "error": ""}).success is True


def test_non_boolean_success_is_coerced_with_a_warning() -> None:
    result = norm({"content": "x", "success": 0})
    assert result.success is False
    assert result.warnings == ["`success` should be true or false, got 0"]


def test_non_string_content_becomes_json_text() -> None:
    assert norm({"content": {"a": [1, "б"]}}).content == '{"a": [1, "б"]}'


def test_data_is_carried_for_call_tool() -> None:
    result = norm({"content": "x", "data": {"n": 1}})
    assert result.for_script() == {"content": "x", "success": True, "data": {"n": 1}, "visual": None}


@pytest.mark.parametrize(
    ("value", "content"),
    [
        (42, "42"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "null"),
        ([1, "два"], '[1, "два"]'),
        ({"total": 3}, '{"total": 3}'),
    ],
)
def test_s4_5_other_values_become_json_text(value: JSONValue, content: str) -> None:
    result = norm(value)
    assert (result.content, result.success) == (content, True)


def test_no_value_is_a_failure_naming_the_function() -> None:
    result = normalize(NO_VALUE, max_visual_chars=100, function="run")
    assert result.success is False
    assert "run() returned undefined" in result.content


# -- S6: visual blocks -------------------------------------------------------------

GOOD_BLOCKS: list[JSONValue] = [
    {"type": "text", "text": "hello"},
    {
        "type": "table",
        "columns": [{"key": "id", "title": "ID"}],
        "rows": [{"id": 1}],
        "continuation": {"args": {"page": 2}},
    },
    {"type": "chart", "chart": "pie", "labels": ["a", "b"], "series": [{"name": "n", "data": [1, 2.5]}]},
    {"type": "file", "name": "report.docx", "mime": "application/msword", "url": "/files/1"},
]


@pytest.mark.parametrize("block", GOOD_BLOCKS)
def test_s6_2_well_formed_blocks_pass(block: JSONValue) -> None:
    assert block_problem(block) is None


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ("just text", "expected an object with `type`"),
        ({"text": "no type"}, "missing `type` (expected one of text, table, chart, file)"),
        ({"type": "video"}, "unknown block type 'video'"),
        ({"type": "text"}, "'text' is a required property"),
        ({"type": "table", "columns": [{"title": "x"}], "rows": []}, "columns[0]: 'key' is a required"),
        ({"type": "table", "columns": [], "rows": [1]}, "rows[0]: 1 is not of type 'object'"),
        ({"type": "table", "columns": [], "rows": [], "continuation": {}}, "continuation: 'args'"),
        ({"type": "chart", "chart": "radar", "labels": [], "series": [{"data": []}]}, "chart: 'radar'"),
        ({"type": "chart", "chart": "bar", "labels": ["a"], "series": [{"data": [1, 2]}]}, "2 values for 1"),
        ({"type": "chart", "chart": "bar", "labels": ["a"], "series": [{"data": ["x"]}]}, "data[0]"),
        ({"type": "file", "name": "a.txt"}, "file block: needs a download reference, `url` or `path`"),
    ],
)
def test_s6_malformed_blocks_are_named(block: JSONValue, fragment: str) -> None:
    problem = block_problem(block)
    assert problem is not None and fragment in problem


def test_s6_1_single_block_or_list_and_bad_ones_dropped_with_warnings() -> None:
    kept, warnings = validate_visual([GOOD_BLOCKS[0], {"type": "nope"}, GOOD_BLOCKS[1]], 10_000)
    assert kept == [GOOD_BLOCKS[0], GOOD_BLOCKS[1]]
    assert warnings == [
        "visual[1] dropped: unknown block type 'nope' (expected one of text, table, chart, file)"
    ]
    assert validate_visual(GOOD_BLOCKS[0], 10_000) == ([GOOD_BLOCKS[0]], [])


def test_oversized_visual_is_dropped_whole() -> None:
    block: JSONValue = {"type": "text", "text": "x" * 500}
    kept, warnings = validate_visual(block, 200)
    assert kept == [] and "more than 200" in warnings[0]


def test_visual_from_a_script_never_reaches_content(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "pager",
        """
        function run(args) {
            const page = args.page ?? 1;
            return {
                content: `страница ${page}`,
                success: true,
                visual: {
                    type: "table",
                    columns: [ { key: "id", title: "ID" } ],
                    rows: [ { id: 1 }, { id: 2 } ],
                    continuation: page < 3 ? { args: { page: page + 1 } } : undefined,
                },
            };
        }
        """,
    )
    first = kernel.run_tool("pager", {"page": 1})
    last = kernel.run_tool("pager", {"page": 3})
    assert first.content == "страница 1"
    assert first.visual[0]["continuation"] == {"args": {"page": 2}}
    assert "continuation" not in last.visual[0]
    assert "id" not in first.content


def test_malformed_visual_from_a_script_is_a_warning(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("badvis", "function run() { return {content: 'ok', visual: [{type: 'table', rows: 5}]}; }")
    result = kernel.run_tool("badvis", {})
    assert result.success is True and result.visual == []
    assert result.warnings and result.warnings[0].startswith("visual[0] dropped: table block:")


# -- S5: warnings rules --------------------------------------------------------------


def test_s5_rules_match_on_all_conditions() -> None:
    failed = ToolResult.failure("timeout talking to API")
    ok = ToolResult(content="done, 3 skipped")
    assert rule_matches(WarningRule("m", failed=True), failed)
    assert not rule_matches(WarningRule("m", failed=True), ok)
    assert rule_matches(WarningRule("m", failed=False, contains="skipped"), ok)
    assert not rule_matches(WarningRule("m", failed=True, contains="skipped"), failed)
    assert rule_matches(WarningRule("m", contains="timeout"), failed)
    assert rule_matches(WarningRule("m"), ok)


def test_s5_matching_messages_are_warnings_not_content() -> None:
    rules = (WarningRule("Не удалось", failed=True), WarningRule("never", failed=False))
    result = finish(ToolResult.failure("boom"), rules, LIMITS)
    assert result.warnings == ["Не удалось"]
    assert "Не удалось" not in result.content


def test_s5_rules_apply_to_thrown_errors(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool(
        "thrower",
        "function run() { throw new Error('down'); }",
        yaml_extra="warnings:\n  - failed: true\n    message: 'Сервис недоступен'\n",
    )
    result = kernel.run_tool("thrower", {})
    assert result.warnings == ["Сервис недоступен"]


# -- truncation -----------------------------------------------------------------------


def test_truncate_marks_the_cut() -> None:
    text, warning = truncate("a" * 250, 100)
    assert text.startswith("a" * 100) and "truncated: 100 of 250 characters" in text
    assert warning == "content truncated from 250 to 100 characters"
    assert truncate("short", 100) == ("short", None)


def test_long_content_is_truncated_by_dispatch(kernel: Kernel, make_tool: ToolFactory) -> None:
    make_tool("long", "function run() { return 'x'.repeat(200000); }")
    result = kernel.run_tool("long", {})
    assert result.success is True
    assert len(result.content) < 50_100
    assert result.warnings == ["content truncated from 200,000 to 50,000 characters"]
