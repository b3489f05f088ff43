"""schemas/type_names.py: a `type` JSON Schema lacks gets the JSON Schema name it stands for."""

from __future__ import annotations

import pytest

from agentkernel.schemas.type_names import TYPES, type_hint


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("int", "; did you mean 'integer'?"),
        ("str", "; did you mean 'string'?"),
        ("bool", "; did you mean 'boolean'?"),
        ("float", "; did you mean 'number'?"),
        ("dict", "; did you mean 'object'?"),
        ("list", "; did you mean 'array'?"),
        ("None", "; did you mean 'null'?"),
        ("Integer", "; did you mean 'integer'?"),
        ("strnig", "; did you mean 'string'?"),  # a typo: difflib's near miss
        (["string", "int"], "; did you mean 'integer' for 'int'?"),
        ("uuid", ""),  # nothing close: no guess
        (["string", "null"], ""),
        (5, ""),
    ],
)
def test_type_hint(given: object, hint: str) -> None:
    assert type_hint(given) == hint


def test_json_schema_s_own_names_get_no_hint() -> None:
    assert [type_hint(name) for name in TYPES] == [""] * len(TYPES)
