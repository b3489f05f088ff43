"""JSON Schema validation whose regular expressions cannot outlive the script (S9.3, S17).

A script's `output_schema` is untrusted, and so is the model's answer it is
checked against. jsonschema matches `pattern` and `patternProperties` with
Python's `re`, which backtracks without limit and holds the GIL while it
does: `{"pattern": "(x+x+)+y"}` against forty `x`s would freeze the whole
kernel for hours, far past any script's `timeout_secs`. So the validators
made here match those keywords with the `regex` module instead, which
releases the GIL while matching and gives up at a deadline: the time the
calling script has left. Running out raises `PatternFailed`.

The keywords that call `re` inside jsonschema are replaced with our own:
`pattern`, `patternProperties` and `additionalProperties` (which skips
the properties a pattern matches). `unevaluatedProperties` walks
`patternProperties` inside jsonschema too, so a schema with both is refused
when it is checked (`pattern_problem`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from agentkernel.errors import AgentKernelError

_UNBOUNDED_SECS = 30.0
"""The deadline of a validation whose caller gave none (a schema checked outside any script)."""


class PatternFailed(AgentKernelError):
    """A pattern of the schema could not be matched: the caller's time ran out, or it is no regex."""


def pattern_problem(schema: Any) -> str | None:
    """Why a schema cannot be validated with bounded patterns: `unevaluatedProperties` beside one."""
    if not _holds(schema, "patternProperties") or not _holds(schema, "unevaluatedProperties"):
        return None
    return "unevaluatedProperties together with patternProperties is not supported in an output schema"


def _holds(value: Any, keyword: str) -> bool:
    """Whether `keyword` is a key of any object nested in `value` (a keyword or a name: the safe side)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if keyword in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def bounded_validator(schema: dict[str, Any], deadline: float | None) -> Any:
    """A jsonschema validator of `schema` (its `$schema`'s draft, else 2020-12) with bounded patterns.

    `deadline` is a time.monotonic() value; None means `_UNBOUNDED_SECS` from now.
    """
    from jsonschema import validators

    from agentkernel.schema_refs import LOCAL_REFS  # a $ref to a URL is refused, never fetched

    end = time.monotonic() + _UNBOUNDED_SECS if deadline is None else deadline
    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    search = _Search(end)
    keywords = {
        "pattern": search.pattern_keyword,
        "patternProperties": search.pattern_properties_keyword,
        "additionalProperties": search.additional_properties_keyword,
    }
    return validators.extend(base, keywords)(schema, registry=LOCAL_REFS)  # type: ignore[no-untyped-call]


class _Search:
    """`regex.search` bounded by one deadline shared by every match of one validation."""

    def __init__(self, end: float) -> None:
        self.end = end

    def found(self, pattern: str, text: str) -> bool:
        import regex

        left = self.end - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return regex.search(pattern, text, timeout=left, concurrent=True) is not None
        except TimeoutError:
            raise PatternFailed(
                f"the pattern {pattern!r} was still matching when the script's time ran out"
            ) from None
        except regex.error as exc:
            raise PatternFailed(
                f"the pattern {pattern!r} is not a regular expression the kernel runs: {exc}"
            ) from None

    def pattern_keyword(self, validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
        from jsonschema import ValidationError

        if validator.is_type(instance, "string") and not self.found(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")

    def pattern_properties_keyword(
        self, validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
    ) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for pattern, subschema in patterns.items():
            for key, value in instance.items():
                if self.found(pattern, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=pattern)

    def additional_properties_keyword(
        self, validator: Any, additional: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        from jsonschema import ValidationError

        if not validator.is_type(instance, "object"):
            return
        named = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        extras = [
            key
            for key in instance
            if key not in named and not any(self.found(pattern, key) for pattern in patterns)
        ]
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:
            shown = ", ".join(repr(extra) for extra in sorted(extras))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({shown} {verb} unexpected)")


__all__ = ["PatternFailed", "bounded_validator", "pattern_problem"]
