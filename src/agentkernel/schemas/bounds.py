"""JSON Schema validation of untrusted values that ends by the caller's deadline, in bounded memory.

Every validation of a value the kernel does not trust (a tool's arguments,
a model's structured answer) against a schema it does not trust either (a
tool YAML's `parameters`, an outside MCP server's input schema, a script's
output schema) goes through here. The schema is measured first
(schemas/cost.py, `schema_problem`); then the validators made here differ
from jsonschema's own in what a hostile pair could otherwise make endless:

- `pattern`, `patternProperties` and `additionalProperties` (which skips the
  properties a pattern matches) match with the `regex` module, which
  releases the GIL while matching and gives up at the deadline, instead of
  Python's `re`, which backtracks without limit holding the GIL:
  `^(a|a)*$` against thirty `a`s and a `!` would stop the whole kernel.
- every keyword first reads the clock, so no schema outlives the caller.
- `anyOf`/`oneOf` keep only the first error of each branch, and at most
  `MAX_KEPT_BRANCH_ERRORS` in one validation, rather than every error of
  every branch; messages are cut to `MAX_MESSAGE_CHARS`.
- `uniqueItems` compares in one pass, not item against item.

`unevaluatedProperties` walks `patternProperties` inside jsonschema with
`re`, so a schema holding both is refused (`schema_problem`). `format` is
an annotation only: no format checker runs, so `"format": "regex"` never
compiles a value.
"""

from __future__ import annotations

import functools
import itertools
import reprlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from agentkernel.errors import AgentKernelError
from agentkernel.schemas.cost import CostProblem, SchemaBounds, cost_problem
from agentkernel.schemas.patterns import patterns_problem
from agentkernel.util.short_text import clip

UNBOUNDED_SECS = 30.0
"""The time a validation whose caller gave no deadline may take (a schema checked outside any call)."""
MAX_KEPT_BRANCH_ERRORS = 64
"""Errors of failed `anyOf`/`oneOf` branches one validation keeps to explain itself."""
MAX_MESSAGE_CHARS = 500
"""An error message longer than this is cut: one names a value that may be megabytes long."""

_ITEMS_PER_CLOCK_READ = 1024

Keyword = Callable[[Any, Any, Any, Any], Iterable[Any] | None]


class ValidationStopped(AgentKernelError):
    """A value could not be validated to the end: the time ran out, a pattern is no regex the kernel
    runs, or the value nests too deep."""


@dataclass
class _Run:
    """One validation: its deadline, and the branch errors it has kept."""

    end: float
    kept: int = 0

    def check_time(self) -> None:
        if time.monotonic() > self.end:
            raise ValidationStopped("validating was still going on when the time ran out")

    def keep(self) -> bool:
        """Whether one more failed branch's error may be kept."""
        self.kept += 1
        return self.kept <= MAX_KEPT_BRANCH_ERRORS


_RUN: ContextVar[_Run | None] = ContextVar("agentkernel_schema_validation", default=None)
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxdict = 5
_SHORT.maxlevel = 3


def _run() -> _Run:
    run = _RUN.get()
    if run is None:
        raise RuntimeError("a bounded validator validates only inside bounded_errors()")
    return run


def _shown(instance: Any) -> str:
    return _SHORT.repr(instance)


# -- keywords -------------------------------------------------------------------------------------------


def _found(pattern: str, text: str) -> bool:
    """`regex.search(pattern, text)` by the validation's deadline, without the GIL while it matches."""
    import regex

    left = _run().end - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return regex.search(pattern, text, timeout=left, concurrent=True) is not None
    except TimeoutError:
        raise ValidationStopped(
            f"the pattern {clip(pattern, 80)!r} was still matching when the time ran out"
        ) from None
    except regex.error as exc:
        raise ValidationStopped(
            f"the pattern {clip(pattern, 80)!r} is not a regular expression the kernel runs: {exc}"
        ) from None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _found(pattern, instance):
        yield ValidationError(f"{_shown(instance)} does not match {clip(pattern, 80)!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _found(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [key for key in instance if key not in named and not any(_found(p, key) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(_shown(extra) for extra in sorted(extras)[:10])
        more = f" and {len(extras) - 10:,} more" if len(extras) > 10 else ""
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({shown}{more} {verb} unexpected)")


def _any_of(validator: Any, branches: list[Any], instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    run, kept = _run(), []
    for index, branch in enumerate(branches):
        first = next(iter(validator.descend(instance, branch, schema_path=index)), None)
        if first is None:
            return
        if run.keep():
            kept.append(first)
    yield ValidationError(f"{_shown(instance)} is not valid under any of the given schemas", context=kept)


def _one_of(validator: Any, branches: list[Any], instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    run, kept, valid = _run(), [], []
    for index, branch in enumerate(branches):
        first = next(iter(validator.descend(instance, branch, schema_path=index)), None)
        if first is None:
            valid.append(index)
            if len(valid) > 1:
                break
        elif run.keep():
            kept.append(first)
    if not valid:
        yield ValidationError(f"{_shown(instance)} is not valid under any of the given schemas", context=kept)
    elif len(valid) > 1:
        yield ValidationError(
            f"{_shown(instance)} is valid under more than one of the given schemas "
            f"(oneOf[{valid[0]}] and oneOf[{valid[1]}])"
        )


def _same_key(value: Any) -> Any:
    """A hashable key equal for values JSON Schema calls equal (1 and 1.0; not 1 and true; any key order)."""
    if isinstance(value, bool) or value is None:
        return ("c", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list | tuple):
        return ("l", tuple(_same_key(item) for item in value))
    if isinstance(value, dict):
        return ("d", frozenset((key, _same_key(item)) for key, item in value.items()))
    return ("o", id(value))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    run, seen = _run(), set()
    for index, item in enumerate(instance):
        if index % _ITEMS_PER_CLOCK_READ == 0:
            run.check_time()
        key = _same_key(item)
        if key in seen:
            yield ValidationError(f"{_shown(instance)} has non-unique elements")
            return
        seen.add(key)


_OURS: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "uniqueItems": _unique_items,
}


def _timed(keyword: Keyword) -> Keyword:
    """`keyword` reading the clock before it runs, and cutting the messages of the errors it yields."""

    @functools.wraps(keyword)
    def timed(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        _run().check_time()
        for error in keyword(validator, value, instance, schema) or ():
            if len(error.message) > MAX_MESSAGE_CHARS:
                error.message = clip(error.message, MAX_MESSAGE_CHARS)
            yield error

    return timed


@functools.cache
def _bounded_class(base: Any) -> Any:
    """`base` (a jsonschema validator class) with every keyword timed and ours in place of its own."""
    from jsonschema import validators

    keywords = {name: _timed(_OURS.get(name, keyword)) for name, keyword in base.VALIDATORS.items()}
    return validators.extend(base, keywords)  # type: ignore[no-untyped-call]


# -- the interface --------------------------------------------------------------------------------------


def bounded_validator(schema: Any, base: Any = None) -> Any:
    """A validator of `schema` that validates only through `bounded_errors`.

    `base` is the jsonschema validator class (the draft); None: the one the
    schema's `$schema` names, else 2020-12. No format checker; `$ref`s
    outside the schema are refused, never fetched (schemas/refs.py).
    """
    from jsonschema import validators

    from agentkernel.schemas.refs import local_refs

    draft = base or validators.validator_for(schema, default=validators.Draft202012Validator)
    return _bounded_class(draft)(schema, registry=local_refs(), format_checker=None)


def bounded_errors(validator: Any, instance: Any, deadline: float | None, most: int) -> list[Any]:
    """The first `most` errors of `instance` (jsonschema ValidationErrors), found by `deadline`.

    `deadline` is a time.monotonic() value; None means UNBOUNDED_SECS from
    now. ValidationStopped when the time runs out, a pattern is no regex,
    a `$ref` does not resolve, or the value nests too deep for the stack.
    """
    from referencing.exceptions import Unresolvable

    end = time.monotonic() + UNBOUNDED_SECS if deadline is None else deadline
    token = _RUN.set(_Run(end))
    try:
        return list(itertools.islice(validator.iter_errors(instance), most))
    except RecursionError:
        raise ValidationStopped("the value nests too deep to be validated against the schema") from None
    except Unresolvable as exc:  # jsonschema wraps referencing's; `ref` is the reference
        ref = getattr(exc, "ref", str(exc))
        raise ValidationStopped(f"the schema's $ref {ref!r} does not point to a part of the schema") from None
    finally:
        _RUN.reset(token)


def schema_problem(schema: Any, bounds: SchemaBounds) -> CostProblem | None:
    """Why values cannot be validated against `schema` within `bounds`, or None.

    Its size and complexity (schemas/cost.py), then its patterns: too big
    once compiled, not compiled by the `regex` module, or
    `patternProperties` beside `unevaluatedProperties` (schemas/patterns.py).
    """
    return cost_problem(schema, bounds) or patterns_problem(schema)


__all__ = [
    "MAX_KEPT_BRANCH_ERRORS",
    "MAX_MESSAGE_CHARS",
    "UNBOUNDED_SECS",
    "CostProblem",
    "SchemaBounds",
    "ValidationStopped",
    "bounded_errors",
    "bounded_validator",
    "schema_problem",
]
