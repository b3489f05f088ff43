"""`{{field}}`s found and filled in linear time, exactly as the lazy regex (REGEX) and the old
replacement (one field at a time, from the end) did for every template, hostile ones included."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agentkernel.builtins.docx_fields import fields_in, filled_texts

REGEX = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
TEXTS = st.text(alphabet="{}a ", max_size=40)


def replaced_one_by_one(texts: list[str], fields: list[tuple[int, int, str]]) -> list[str | None]:
    """The replacement as it was: each field from the last, across the elements it spans."""
    out: list[str | None] = [None] * len(texts)
    current = list(texts)
    for start, end, value in reversed(fields):
        offset = 0
        placed = False
        for index, text in enumerate(current):
            low, high = offset, offset + len(text)
            offset = high
            if high <= start or low >= end:
                continue
            head = text[: max(start - low, 0)]
            tail = text[max(end - low, 0) :] if end < high else ""
            current[index] = out[index] = head + ("" if placed else value) + tail
            placed = True
    return out


@given(TEXTS)
def test_the_scan_finds_what_the_regex_found(text: str) -> None:
    assert [(f.start, f.end, f.inner) for f in fields_in(text)] == [
        (m.start(), m.end(), m.group(1)) for m in REGEX.finditer(text)
    ]


@given(st.lists(TEXTS, max_size=6))
def test_one_pass_fills_as_the_replacement_one_field_at_a_time_did(texts: list[str]) -> None:
    fields = [(f.start, f.end, f"<{i}>") for i, f in enumerate(fields_in("".join(texts)))]
    assert filled_texts(texts, fields) == replaced_one_by_one(texts, fields)


def test_a_field_split_across_runs_goes_where_it_starts() -> None:
    texts = ["Клиент: {{cli", "ent", "}}, сумма {{ amount }}"]
    fields = [(f.start, f.end, f.inner.strip().upper()) for f in fields_in("".join(texts))]
    assert filled_texts(texts, fields) == ["Клиент: CLIENT", "", ", сумма AMOUNT"]


def test_braces_without_an_end_are_no_field() -> None:
    assert list(fields_in("{" * 30_000)) == []
    assert [f.inner for f in fields_in("{" * 30_000 + "}}")] == ["{" * 29_998]
