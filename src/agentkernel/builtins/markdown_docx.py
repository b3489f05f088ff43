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
alt text (nothing is fetched). The heavy imports stay inside the functions,
so a command that makes no document never pays for them. The elements are
appended by docx_xml.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentkernel.builtins.docx_xml import (
    CODE_CHAR_STYLE,
    CODE_FONT,
    CODE_STYLE,
    LINK_STYLE,
    DocxWriter,
    Node,
)

if TYPE_CHECKING:
    from docx.document import Document
    from markdown_it.token import Token

_DEEPEST_LIST_STYLE = 3  # the default template has "List Bullet", "List Bullet 2", "List Bullet 3"
# what XML 1.0 cannot hold (a Word file is XML): C0 controls but tab, newline and return; U+FFFE, U+FFFF
_NOT_IN_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def markdown_document(text: str) -> Document:
    """A new document holding `text` rendered from Markdown (characters XML cannot hold become U+FFFD)."""
    from docx import Document as new_document
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    writer = _Walk(DocxWriter(new_document()))
    writer.write(parser.parse(_NOT_IN_XML.sub("\ufffd", text)))
    writer.out.finish()
    return writer.out.document


@dataclass
class _List:
    """One open list: bulleted or numbered, and (numbered) the numbering instance its items use."""

    ordered: bool
    start: int
    num_id: int | None = None


@dataclass
class _Table:
    """A table being read: its rows of cells, each cell an `inline` token."""

    rows: list[list[Token]] = field(default_factory=list)
    header_rows: int = 0
    in_head: bool = False


class _Walk:
    """Walks the token stream once and appends to the document through `out`."""

    def __init__(self, out: DocxWriter) -> None:
        self.out = out
        self.lists: list[_List] = []
        self.quote_depth = 0
        self.item_fresh = False  # the next paragraph is the first of a list item
        self.table: _Table | None = None
        self.paragraph: Node | None = None

    def write(self, tokens: list[Token]) -> None:
        for token in tokens:
            handler = getattr(self, "_" + token.type, None)
            if handler is not None:
                handler(token)

    # -- blocks ------------------------------------------------------------------------------------

    def _heading_open(self, token: Token) -> None:
        self.paragraph = self.out.paragraph(f"Heading {int(token.tag[1:])}")

    def _paragraph_open(self, token: Token) -> None:
        if self.table is None:
            self.paragraph = self._new_paragraph()

    def _paragraph_close(self, token: Token) -> None:
        self.paragraph = None

    _heading_close = _paragraph_close

    def _inline(self, token: Token) -> None:
        if self.table is not None:
            self.table.rows[-1].append(token)
        elif self.paragraph is not None:
            add_inline(self.out, self.paragraph, token.children or [])

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
        self.out.run(self.out.paragraph(CODE_STYLE), code)
        self.item_fresh = False

    _code_block = _fence

    def _hr(self, token: Token) -> None:
        self.out.rule()

    def _new_paragraph(self) -> Node:
        """A list item's first paragraph is the item; later ones continue it; a quote is a Quote."""
        if not self.lists:
            return self.out.paragraph("Quote" if self.quote_depth else None)
        depth = min(len(self.lists), _DEEPEST_LIST_STYLE)
        suffix = "" if depth == 1 else f" {depth}"
        if not self.item_fresh:
            return self.out.paragraph("List Continue" + suffix)
        self.item_fresh = False
        innermost = self.lists[-1]
        if not innermost.ordered:
            return self.out.paragraph("List Bullet" + suffix)
        style = "List Number" + suffix
        if innermost.num_id is None:
            innermost.num_id = self.out.new_numbering(style, innermost.start)
        return self.out.paragraph(style, numbered=(innermost.num_id, 0))

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
        table, self.table = self.table, None
        cells = self.out.table(len(table.rows), max(len(row) for row in table.rows))
        for index, (row, paragraphs) in enumerate(zip(table.rows, cells, strict=True)):
            for token, paragraph in zip(row, paragraphs, strict=False):  # a short row's last cells stay empty
                add_inline(self.out, paragraph, token.children or [], bold=index < table.header_rows)


# -- inline ----------------------------------------------------------------------------------------

_TOGGLES = {"strong": "bold", "em": "italic", "s": "strike"}


@dataclass
class _Format:
    """The inline formatting in force while walking an `inline` token's children."""

    bold: int = 0
    italic: int = 0
    strike: int = 0
    link: Node | None = None  # the open <w:hyperlink>, if any


def add_inline(out: DocxWriter, paragraph: Node, children: list[Token], *, bold: bool = False) -> None:
    """The runs of one `inline` token: text with bold/italic/strikethrough, code, links, breaks."""
    state = _Format(bold=int(bold))
    for child in children:
        kind = child.type
        if kind in ("text", "code_inline", "image", "html_inline"):
            text = f"[{child.content}]" if kind == "image" else child.content  # an image is never fetched
            _add_run(out, paragraph, text, state, code=kind == "code_inline")
        elif kind == "softbreak":
            _add_run(out, paragraph, " ", state)
        elif kind == "hardbreak":
            out.line_break(paragraph)
        elif kind == "link_open":  # markdown-it already refused `javascript:` and such
            state.link = out.hyperlink(paragraph, str(child.attrGet("href") or ""))
        elif kind == "link_close":
            state.link = None
        elif kind.endswith(("_open", "_close")):
            what, _, edge = kind.rpartition("_")
            name = _TOGGLES.get(what)
            if name is not None:
                setattr(state, name, getattr(state, name) + (1 if edge == "open" else -1))


def _add_run(out: DocxWriter, paragraph: Node, text: str, state: _Format, *, code: bool = False) -> None:
    if not text:
        return
    style = LINK_STYLE if state.link is not None else CODE_CHAR_STYLE if code else None
    parent = paragraph if state.link is None else state.link
    out.run(parent, text, style=style, bold=state.bold > 0, italic=state.italic > 0, strike=state.strike > 0)


__all__ = ["CODE_CHAR_STYLE", "CODE_FONT", "CODE_STYLE", "LINK_STYLE", "markdown_document"]
