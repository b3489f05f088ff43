"""Whether the patterns of a JSON Schema from outside can be compiled and matched with a bound.

Patterns are matched with the `regex` module (schemas/bounds.py), which lets
go of the GIL and stops at a deadline while it matches, but compiles in C
with the GIL held and no timeout, unrolling a repeat of a fixed count:
`(?:a{1000}){1000}` becomes a million items, `(?:a{65535}){65535}` four
billion (docs/benchmarks.md). So each pattern's width is measured on
Python's own parse of it, which unrolls nothing (each item counts one, a
repeat its body as many times as its least count), and the patterns of one
schema may hold at most MAX_PATTERN_WIDTH items before any is compiled. A
pattern Python cannot parse is no regular expression a schema may hold
(its metaschema says so too), nor one `regex` cannot compile.
`unevaluatedProperties` walks `patternProperties` inside jsonschema with
`re`, so a schema with both is refused.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from agentkernel.schemas.cost import CostProblem, written_subschemas
from agentkernel.util.short_text import clip
from agentkernel.util.yaml_source import KeyPath

# re's own parser and its constants (typeshed has no stubs for these private modules)
_parser: Any = importlib.import_module("re._parser")
_constants: Any = importlib.import_module("re._constants")

MAX_PATTERN_WIDTH = 50_000
"""Items the patterns of one schema may compile to, their counted repeats unrolled."""
_REPEATS = (_constants.MAX_REPEAT, _constants.MIN_REPEAT, _constants.POSSESSIVE_REPEAT)


def _nested(argument: Any) -> Iterator[Any]:
    """The subpatterns inside one parsed item's argument (a group's body, a branch's alternatives)."""
    if isinstance(argument, _parser.SubPattern):
        yield argument
    elif isinstance(argument, tuple | list):
        for part in argument:
            yield from _nested(part)


def _width(items: Any, most: int) -> int:
    """The unrolled width of parsed `items`; counting stops soon after it passes `most`."""
    total = 0
    for op, argument in items:
        if total > most:
            break
        if op in _REPEATS:
            least, _, body = argument
            total += max(1, least) * _width(body, most)
        else:
            total += 1 + sum(_width(part, most) for part in _nested(argument))
    return total


def unrolled_width(pattern: str, most: int) -> int:
    """The items `pattern` compiles to, its counted repeats unrolled; past `most`, some number above it.

    re.error when Python cannot parse it, RecursionError when it nests too deep to.
    """
    return _width(_parser.parse(pattern), most)


def _patterns(node: dict[str, Any], path: KeyPath) -> Iterator[tuple[str, KeyPath]]:
    """The patterns of one subschema, each with its key path."""
    if isinstance(node.get("pattern"), str):
        yield node["pattern"], (*path, "pattern")
    if isinstance(node.get("patternProperties"), dict):
        yield from ((pattern, (*path, "patternProperties", pattern)) for pattern in node["patternProperties"])


def _width_reason(shown: str) -> str:
    return (
        f"the pattern {shown!r} is too big once compiled: the patterns of one schema, their counted "
        f"repeats unrolled ((?:a{{1000}}){{1000}} is a million), may hold at most {MAX_PATTERN_WIDTH:,} items"
    )


def patterns_problem(schema: Any) -> CostProblem | None:
    """Why the patterns of `schema` cannot be matched with a bound, or None."""
    written = list(written_subschemas(schema))
    keywords = {key for node, _, _ in written for key in node}
    if "patternProperties" in keywords and "unevaluatedProperties" in keywords:
        return CostProblem((), "unevaluatedProperties together with patternProperties is not supported")
    patterns = [found for node, path, _ in written for found in _patterns(node, path)]
    if not patterns:
        return None  # most schemas hold none: `regex` is imported only to compile one
    import regex

    width = 0
    for pattern, at in patterns:
        shown = clip(pattern, 80)
        try:
            width += unrolled_width(pattern, MAX_PATTERN_WIDTH - width)
            if width > MAX_PATTERN_WIDTH:
                return CostProblem(at, _width_reason(shown))
            regex.compile(pattern)
        except (re.error, regex.error) as exc:
            return CostProblem(
                at, f"the pattern {shown!r} is not a regular expression the kernel runs: {exc}"
            )
        except RecursionError:
            return CostProblem(at, f"the pattern {shown!r} nests its groups too deep")
    return None


__all__ = ["MAX_PATTERN_WIDTH", "patterns_problem", "unrolled_width"]
