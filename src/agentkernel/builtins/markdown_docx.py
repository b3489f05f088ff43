"""Markdown → a Word document, for `make_docx` (office.py).

markdown-it-py parses (CommonMark plus GitHub's tables and strikethrough;
raw HTML is shown as text, never interpreted) and python-docx writes, so
neither a parser nor the OOXML is ours. What is ours is the walk from one
to the other: the parser's flat token stream (`heading_open`, `inline`,
`bullet_list_open`, …) is read once, front to back, keeping only the
context a paragraph needs (which lists it is in, whether it is in a quote).

What each construct becomes, so a reader edits it in Word as if typed:
headings → the built-in "Heading N" styles; lists → "List Bullet N" /
"List Number N" (N the depth, at most 3), each numbered list restarting at
its own first number; tables → "Table Grid" with a bold header row; code
blocks → a "Code" paragraph style (monospace), inline code → a "Code Char"
character style; quotes → "Quote"; links → real hyperlinks; images → their
alt text (nothing is fetched). The heavy imports stay inside the functions
(issue 8: start-up time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docx.document import Document
    from docx.text.paragraph import Paragraph
    from markdown_it.token import Token

CODE_STYLE = "Code"
CODE_CHAR_STYLE = "Code Char"
LINK_STYLE = "Hyperlink"
CODE_FONT = "Courier New"
_DEEPEST_LIST_STYLE = 3  # the default template has "List Bullet", "List Bullet 2", "List Bullet 3"


def markdown_document(text: str) -> Document:
    """A new document holding `text` rendered from Markdown."""
    from docx import Document as new_document
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    writer = _Writer(new_document())
    writer.write(parser.parse(text))
    return writer.document


@dataclass
class _List:
    """One open list: bulleted or numbered, and (numbered) the numbering instance its items use."""

    ordered: bool
    start: int
    num_id: int | None = None


@dataclass
class _Format:
    """The inline formatting in force while walking an `inline` token's children."""

    bold: int = 0
    italic: int = 0
    strike: int = 0
    document: Any = None  # where the character styles live
    link: Any = None  # the open <w:hyperlink> element, if any


@dataclass
class _Table:
    """A table being read: its rows of cells, each cell an `inline` token."""

    rows: list[list[Token]] = field(default_factory=list)
    header_rows: int = 0
    in_head: bool = False


class _Writer:
    """Walks the token stream once and appends to `document`."""

    def __init__(self, document: Document) -> None:
        self.document = document
        self.lists: list[_List] = []
        self.quote_depth = 0
        self.item_fresh = False  # the next paragraph is the first of a list item
        self.table: _Table | None = None
        self.paragraph: Paragraph | None = None

    def write(self, tokens: list[Token]) -> None:
        for token in tokens:
            handler = getattr(self, "_" + token.type, None)
            if handler is not None:
                handler(token)

    # -- blocks ------------------------------------------------------------------------------------

    def _heading_open(self, token: Token) -> None:
        self.paragraph = self.document.add_heading("", level=int(token.tag[1:]))

    def _paragraph_open(self, token: Token) -> None:
        if self.table is None:
            self.paragraph = self.document.add_paragraph(style=self._paragraph_style())

    def _inline(self, token: Token) -> None:
        if self.table is not None:
            self.table.rows[-1].append(token)
        elif self.paragraph is not None:
            add_inline(self.document, self.paragraph, token.children or [])

    def _bullet_list_open(self, token: Token) -> None:
        self.lists.append(_List(ordered=False, start=1))

    def _ordered_list_open(self, token: Token) -> None:
        start = token.attrGet("start")
        self.lists.append(_List(ordered=True, start=int(start) if start is not None else 1))

    def _bullet_list_close(self, token: Token) -> None:
        self.lists.pop()

    _ordered_list_close = _bullet_list_close

    def _list_item_open(self, token: Token) -> None:
        self.item_fresh = True

    def _blockquote_open(self, token: Token) -> None:
        self.quote_depth += 1

    def _blockquote_close(self, token: Token) -> None:
        self.quote_depth -= 1

    def _fence(self, token: Token) -> None:
        code = token.content[:-1] if token.content.endswith("\n") else token.content
        paragraph = self.document.add_paragraph(style=code_style(self.document))
        paragraph.add_run(code)  # python-docx writes each "\n" as a line break, "\t" as a tab
        self.item_fresh = False

    _code_block = _fence

    def _hr(self, token: Token) -> None:
        add_rule(self.document.add_paragraph())

    def _paragraph_style(self) -> str | None:
        """A list item's first paragraph is the item; later ones continue it; a quote is a Quote."""
        if self.lists:
            depth = min(len(self.lists), _DEEPEST_LIST_STYLE)
            suffix = "" if depth == 1 else f" {depth}"
            if not self.item_fresh:
                return "List Continue" + suffix
            self.item_fresh = False
            return ("List Number" if self.lists[-1].ordered else "List Bullet") + suffix
        return "Quote" if self.quote_depth else None

    def _paragraph_close(self, token: Token) -> None:
        if self.paragraph is not None and self.lists and self.lists[-1].ordered:
            style = self.paragraph.style
            if style is not None and (style.name or "").startswith("List Number"):
                number_item(self.document, self.paragraph, self.lists[-1])
        self.paragraph = None

    # -- tables ------------------------------------------------------------------------------------

    def _table_open(self, token: Token) -> None:
        self.table = _Table()

    def _thead_open(self, token: Token) -> None:
        assert self.table is not None
        self.table.in_head = True

    def _thead_close(self, token: Token) -> None:
        assert self.table is not None
        self.table.in_head = False

    def _tr_open(self, token: Token) -> None:
        assert self.table is not None
        self.table.rows.append([])
        if self.table.in_head:
            self.table.header_rows += 1

    def _table_close(self, token: Token) -> None:
        assert self.table is not None
        add_table(self.document, self.table)
        self.table = None


def add_table(document: Document, table: _Table) -> None:
    """The rows read as a "Table Grid" table; header cells bold; short rows padded."""
    columns = max(len(row) for row in table.rows)
    made = document.add_table(rows=len(table.rows), cols=columns)
    made.style = document.styles["Table Grid"]
    for row_index, (row, cells) in enumerate(zip(table.rows, made.rows, strict=True)):
        for token, cell in zip(row, cells.cells, strict=False):
            add_inline(document, cell.paragraphs[0], token.children or [], bold=row_index < table.header_rows)


# -- inline ----------------------------------------------------------------------------------------


def add_inline(
    document: Document, paragraph: Paragraph, children: list[Token], *, bold: bool = False
) -> None:
    """The runs of one `inline` token: text with bold/italic/strikethrough, code, links, breaks."""
    state = _Format(bold=int(bold), document=document)
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline", "image", "html_inline"):
            text = f"[{child.content}]" if kind == "image" else child.content
            _add_run(paragraph, text, state, code=kind == "code_inline")
        elif kind == "softbreak":
            _add_run(paragraph, " ", state)
        elif kind == "hardbreak":
            paragraph.add_run().add_break()
        elif kind == "link_open":
            state.link = _open_link(paragraph, str(child.attrGet("href") or ""))
        elif kind == "link_close":
            state.link = None
        elif kind.endswith(("_open", "_close")):
            _toggle(state, kind)


_TOGGLES = {"strong": "bold", "em": "italic", "s": "strike"}


def _toggle(state: _Format, kind: str) -> None:
    what, _, edge = kind.rpartition("_")
    name = _TOGGLES.get(what)
    if name is not None:
        setattr(state, name, getattr(state, name) + (1 if edge == "open" else -1))


def _add_run(paragraph: Paragraph, text: str, state: _Format, *, code: bool = False) -> None:
    if not text:
        return
    run = paragraph.add_run(text)
    if state.bold:
        run.bold = True
    if state.italic:
        run.italic = True
    if state.strike:
        run.font.strike = True
    if code:
        run.style = code_char_style(state.document)
    if state.link is not None:
        run.style = link_style(state.document)
        state.link.append(run._r)  # moves the run into the hyperlink


def _open_link(paragraph: Paragraph, href: str) -> Any:
    """A <w:hyperlink> to `href` ending `paragraph` (markdown-it already refused `javascript:` and such)."""
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), paragraph.part.relate_to(href, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    paragraph._p.append(link)
    return link


# -- numbering, rules and styles -------------------------------------------------------------------


def number_item(document: Document, paragraph: Paragraph, open_list: _List) -> None:
    """Number `paragraph` in `open_list`'s own numbering instance, so each list restarts at its start.

    A "List Number" style carries one numbering shared by every paragraph of
    that style, which would make the second list of a document go on from
    the first; a new <w:num> over the same definition with a start override
    is how Word itself restarts a list.
    """
    if open_list.num_id is None:
        numbering = document.part.numbering_part.element
        style_num = paragraph.style.element.pPr.numPr.numId.val  # type: ignore[union-attr]
        definition = numbering.num_having_numId(style_num).abstractNumId.val
        num = numbering.add_num(definition)
        num.add_lvlOverride(ilvl=0).add_startOverride(open_list.start)
        open_list.num_id = num.numId
    properties = paragraph._p.get_or_add_pPr().get_or_add_numPr()
    properties.get_or_add_ilvl().val = 0
    properties.get_or_add_numId().val = open_list.num_id


def add_rule(paragraph: Paragraph) -> None:
    """A horizontal rule: an empty paragraph with a bottom border."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    borders = OxmlElement("w:pBdr")
    bottom = OxmlElement("w:bottom")
    for key, value in (("w:val", "single"), ("w:sz", "6"), ("w:space", "1"), ("w:color", "auto")):
        bottom.set(qn(key), value)
    borders.append(bottom)
    paragraph._p.get_or_add_pPr().append(borders)


def code_style(document: Document) -> Any:
    """The "Code" paragraph style (monospace, no spacing between lines), added on first use."""
    return _style(document, CODE_STYLE, paragraph=True)


def code_char_style(document: Document) -> Any:
    """The "Code Char" character style for inline code, added on first use."""
    return _style(document, CODE_CHAR_STYLE, paragraph=False)


def link_style(document: Document) -> Any:
    """The "Hyperlink" character style (blue, underlined), added on first use."""
    return _style(document, LINK_STYLE, paragraph=False)


def _style(document: Document, name: str, *, paragraph: bool) -> Any:
    from docx.enum.style import WD_STYLE_TYPE
    from docx.shared import Pt, RGBColor

    styles = document.styles
    if name in styles:
        return styles[name]
    style: Any = styles.add_style(name, WD_STYLE_TYPE.PARAGRAPH if paragraph else WD_STYLE_TYPE.CHARACTER)
    if name == LINK_STYLE:
        style.font.color.rgb = RGBColor(0x05, 0x63, 0xC1)
        style.font.underline = True
        return style
    style.font.name = CODE_FONT
    style.font.size = Pt(9)
    if paragraph:
        style.base_style = styles["Normal"]
        style.paragraph_format.space_after = Pt(6)
        style.paragraph_format.line_spacing = 1.0
    return style


__all__ = ["CODE_CHAR_STYLE", "CODE_FONT", "CODE_STYLE", "LINK_STYLE", "markdown_document"]
