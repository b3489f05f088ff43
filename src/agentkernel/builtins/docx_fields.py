"""Plain `{{field}}` fields in a Word document: find them, fill them (for `fill_contract`, office.py).

Why not docxtpl (Jinja2 over the document's XML): a template may come from
the session's scratch folder, where untrusted scripts write, and Jinja is a
language. Even in a SandboxedEnvironment a template can loop
(`{% for a in range(99999) %}{% for b in range(99999) %}…`) until its
deadline kills the worker, every call, and each sandbox escape found in
Jinja would run code of the template's writer there. A plain field is all
the manual asks for (`{{client}}`), so that is all this
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

A template may be hostile, so every step is linear in its size: fields are
found by scanning for `{{` and then `}}` (the lazy regex from `{{` to `}}` it
replaces backtracked quadratically over `{{{{…`), a paragraph's elements are rewritten in one
pass over them and its fields together, and each `<w:t>` is given to its
paragraph in one walk of the document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from docx.document import Document

_OPEN, _CLOSE = "{{", "}}"


class FieldProblem(Exception):
    """The template's fields or the data given for them are wrong; the text says which."""


class Field(NamedTuple):
    """One `{{…}}` in a text: where it starts, where it ends (past `}}`), and what is between the braces."""

    start: int
    end: int
    inner: str

    @property
    def whole(self) -> str:
        return _OPEN + self.inner + _CLOSE


def fields_in(text: str) -> Iterator[Field]:
    """Each `{{…}}` of `text`, left to right: from a `{{` to the first `}}` after it.

    What a lazy regex from `{{` to `}}` finds (`.*?`, dot matching newlines),
    in linear time: once no `}}` follows a `{{`, none follows a later one.
    """
    position = 0
    while (start := text.find(_OPEN, position)) != -1:
        close = text.find(_CLOSE, start + len(_OPEN))
        if close == -1:
            return
        position = close + len(_CLOSE)
        yield Field(start, position, text[start + len(_OPEN) : close])


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
        for found in fields_in(paragraph.text):
            name = found.inner.strip()
            if name.isidentifier():
                names[name] = None
            else:
                bad[found.whole] = None
    if bad:
        shown = ", ".join(bad)
        raise FieldProblem(
            f"the template has fields that are not plain names: {shown}; only {{{{name}}}} fields "
            "are filled (no expressions, filters or Jinja tags)"
        )
    return list(names)


def fill_fields(document: Document, values: Mapping[str, str]) -> None:
    """Replace every `{{name}}` with `values[name]` (each name must be there: see `field_names`)."""
    from docx.oxml.ns import qn

    for paragraph in _paragraphs(document):
        texts = [t.text or "" for t in paragraph.texts]
        found = [(f.start, f.end, values[f.inner.strip()]) for f in fields_in("".join(texts))]
        for element, text in zip(paragraph.texts, filled_texts(texts, found), strict=True):
            if text is not None:
                element.text = text
                element.set(qn("xml:space"), "preserve")


def filled_texts(texts: list[str], fields: list[tuple[int, int, str]]) -> list[str | None]:
    """Each element's text with the fields (start, end, value) of their joined text replaced; None: unchanged.

    A field's value goes into the element where the field starts; the rest
    of the field is cut from the elements it spans. One pass over the
    elements and the fields together (both in order, fields apart).
    """
    out: list[str | None] = []
    pending = iter(fields)
    field = next(pending, None)
    offset = 0
    for text in texts:
        low, high = offset, offset + len(text)
        offset = high
        if field is None or field[0] >= high:
            out.append(None)
            continue
        pieces: list[str] = []
        cursor = low  # how far into the joined text this element is written
        while field is not None and field[0] < high:
            start, end, value = field
            if start >= cursor:  # the field starts here: the text before it, then its value
                pieces += [text[cursor - low : start - low], value]
            cursor = min(end, high)
            if end > high:  # it goes on in the next element
                break
            field = next(pending, None)
        pieces.append(text[cursor - low :])
        out.append("".join(pieces))
    return out


def _paragraphs(document: Document) -> Iterator[_Paragraph]:
    """Every paragraph of the body, its tables, and every header and footer, with its own `<w:t>`s.

    One walk of each part: a `<w:t>` belongs to the nearest paragraph above
    it (a text box's paragraph inside another keeps its own texts).
    """
    from docx.oxml.ns import qn

    paragraph, text = qn("w:p"), qn("w:t")
    for root in _roots(document):
        owned: dict[Any, list[Any]] = {}  # paragraph → its texts, paragraphs in document order
        for element in root.iter(paragraph, text):
            if element.tag == paragraph:
                owned[element] = []
                continue
            owner = next(element.iterancestors(paragraph), None)
            if owner is not None and owner in owned:
                owned[owner].append(element)
        for texts in owned.values():
            if texts:
                yield _Paragraph(texts)


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


__all__ = ["Field", "FieldProblem", "field_names", "field_values", "fields_in", "fill_fields", "filled_texts"]
