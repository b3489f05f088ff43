"""Plain `{{field}}` fields in a Word document: find them, fill them (for `fill_contract`, office.py).

Why not docxtpl (Jinja2 over the document's XML): a template may come from
the session's scratch folder, where untrusted scripts write, and Jinja is a
language. Even in a SandboxedEnvironment a template can loop
(`{% for a in range(99999) %}{% for b in range(99999) %}…`), and a Python
function cannot be stopped at the call's deadline as a script can. A plain
field is all the manual asks for (`{{client}}`), so that is all this
understands: `{{ name }}` where `name` is an identifier (Unicode letters
allowed: `{{клиент}}`). Anything else between `{{` and `}}` is refused by
name rather than left in the contract.

Word splits typed text into runs wherever formatting, spell-checking or an
edit session changed (`{{cli` `ent}}`), so a field is found in the joined
text of a paragraph's `<w:t>` elements and replaced across them: the value
goes into the element where the field starts (keeping that run's
formatting) and the rest of the field is cut from the others. Every
paragraph of the body, the tables, and each section's headers and footers
is visited, including those inside hyperlinks, fields and text boxes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docx.document import Document

_FIELD = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


class FieldProblem(Exception):
    """The template's fields or the data given for them are wrong; the text says which."""


@dataclass
class _Paragraph:
    """A paragraph's own `<w:t>` elements and their joined text."""

    texts: list[Any]

    @property
    def text(self) -> str:
        return "".join(t.text or "" for t in self.texts)


def field_names(document: Document) -> list[str]:
    """The fields of `document`, each once, in order of appearance; FieldProblem for a non-plain one."""
    names: dict[str, None] = {}
    bad: dict[str, None] = {}
    for paragraph in _paragraphs(document):
        for match in _FIELD.finditer(paragraph.text):
            name = match.group(1).strip()
            if name.isidentifier():
                names[name] = None
            else:
                bad[match.group(0)] = None
    if bad:
        shown = ", ".join(bad)
        raise FieldProblem(
            f"the template has fields that are not plain names: {shown}; only {{{{name}}}} fields "
            "are filled (no expressions, filters or Jinja tags)"
        )
    return list(names)


def fill_fields(document: Document, values: Mapping[str, str]) -> None:
    """Replace every `{{name}}` with `values[name]` (each name must be there: see `field_names`)."""
    for paragraph in _paragraphs(document):
        matches = list(_FIELD.finditer(paragraph.text))
        for match in reversed(matches):  # from the end, so earlier offsets stay valid
            _replace(paragraph, match.start(), match.end(), values[match.group(1).strip()])


def _replace(paragraph: _Paragraph, start: int, end: int, value: str) -> None:
    """Put `value` where the text [start, end) is, across as many `<w:t>` as it spans."""
    from docx.oxml.ns import qn

    offset = 0
    placed = False
    for element in paragraph.texts:
        text = element.text or ""
        low, high = offset, offset + len(text)
        offset = high
        if high <= start or low >= end:
            continue
        head = text[: max(start - low, 0)]
        tail = text[max(end - low, 0) :] if end < high else ""
        element.text = head + ("" if placed else value) + tail
        element.set(qn("xml:space"), "preserve")
        placed = True


def _paragraphs(document: Document) -> Iterator[_Paragraph]:
    """Every paragraph of the body, its tables, and every header and footer, with its own `<w:t>`s."""
    from docx.oxml.ns import qn

    for root in _roots(document):
        for p in root.iter(qn("w:p")):
            own = [t for t in p.iter(qn("w:t")) if next(t.iterancestors(qn("w:p"))) is p]
            if own:
                yield _Paragraph(own)


def _roots(document: Document) -> Iterator[Any]:
    yield document.element.body
    seen: set[int] = set()
    for section in document.sections:
        for part in (
            section.header,
            section.first_page_header,
            section.even_page_header,
            section.footer,
            section.first_page_footer,
            section.even_page_footer,
        ):
            if part.is_linked_to_previous:  # no part of its own: reading it would add one
                continue
            element = part._element
            if id(element) not in seen:
                seen.add(id(element))
                yield element


def field_values(data: Mapping[str, Any], names: list[str]) -> dict[str, str]:
    """The text each field gets; FieldProblem naming every missing field, or every value not text/number."""
    missing = [name for name in names if name not in data]
    if missing:
        raise FieldProblem(f"data has no value for the template's field(s): {', '.join(missing)}")
    wrong = [name for name in names if not _is_scalar(data[name])]
    if wrong:
        shown = ", ".join(f"{name} ({_kind(data[name])})" for name in wrong)
        raise FieldProblem(f"data values must be text or numbers; not so for: {shown}")
    return {name: str(data[name]) for name in names}


def _is_scalar(value: object) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", list: "an array", dict: "an object"}.get(type(value), type(value).__name__)


__all__ = ["FieldProblem", "field_names", "field_values", "fill_fields"]
