"""The body of a Word document written as WordprocessingML text, parsed once (for markdown_docx.py).

Why not python-docx's `add_paragraph`/`add_run`/`run.bold`: each resolves a
style by walking every style of the document, places each child by
searching its siblings, and (`add_table`) searches the whole document for
the page width, so the cost of each element grows with the document; and
making each element with lxml from Python is still slow per element
(docs/benchmarks.md, "make_docx of a 20-page document"). So the blocks are
collected as text (`Node`s: an opening tag, the pieces inside, a closing
tag), every piece of user text escaped, and `finish` parses the whole
body once with python-docx's own parser and moves it into the document
before its section properties. python-docx still opens
the package, owns the styles, numbering and relationships parts, and
saves; the XML is the one its `add_*` methods would have made.

The move is piecewise (`_adopt`): lxml fixes the namespaces of an element
moved into another document node by node with a cache that misses for
every node whose namespace was declared above it (and for every
`xml:space`), so one move is quadratic in the size of what it carries,
and holds the GIL all along: a paragraph of 10,000 runs or a table of
10,000 rows would stop every other user's work. A small subtree is moved
whole; a bigger one is made anew in the document, shallow, and its
children adopted one by one: linear.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from itertools import islice
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docx.document import Document

CODE_STYLE = "Code"
CODE_CHAR_STYLE = "Code Char"
LINK_STYLE = "Hyperlink"
CODE_FONT = "Courier New"
_OUR_STYLES = {CODE_STYLE: True, CODE_CHAR_STYLE: False, LINK_STYLE: False}  # name → a paragraph style?
_NAMESPACES = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
_MOVED_WHOLE = 64  # the most elements one lxml move carries (see `_adopt`)
_TABLE_LOOK = (
    '<w:tblLook w:firstColumn="1" w:firstRow="1" w:lastColumn="0" w:lastRow="0" '
    'w:noHBand="0" w:noVBand="1" w:val="04A0"/>'
)


@dataclass
class Node:
    """An element being written: its opening tag (with its properties), what is inside, its closing tag."""

    open: str
    close: str
    inner: list[str | Node] = field(default_factory=list)

    def render(self, out: list[str]) -> None:
        out.append(self.open)
        for piece in self.inner:
            if isinstance(piece, str):
                out.append(piece)
            else:
                piece.render(out)
        out.append(self.close)


class DocxWriter:
    """Collects blocks for the end of `document`'s body; `finish` puts them there.

    Style ids are looked up (or our styles added) once per name (`id`), and
    a link's relationship made once per address (`hyperlink`).
    """

    def __init__(self, document: Document) -> None:
        self.document = document
        self.ids: dict[str, str] = {}
        self.blocks: list[Node] = []
        self._width: int | None = None
        self._links: dict[str, str] = {}  # href → the id of its relationship
        self._next_link: int | None = None
        self._list_definitions: dict[str, int] = {}  # a list style → its abstractNumId
        self._next_num: int | None = None

    def id(self, name: str) -> str:
        """The id of the style called `name` (the template's, or ours added on first use)."""
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = _style(self.document, name).style_id
        return found

    def paragraph(self, style: str | None = None, *, numbered: tuple[int, int] | None = None) -> Node:
        """A new paragraph at the end of the body; `numbered` is (numId, level) for a list item."""
        paragraph = Node(self._paragraph_open(style, numbered), "</w:p>")
        self.blocks.append(paragraph)
        return paragraph

    def _paragraph_open(self, style: str | None, numbered: tuple[int, int] | None) -> str:
        if style is None and numbered is None:
            return "<w:p>"
        properties = "" if style is None else f'<w:pStyle w:val="{escape(self.id(style))}"/>'
        if numbered is not None:
            properties += (
                f'<w:numPr><w:ilvl w:val="{numbered[1]}"/><w:numId w:val="{numbered[0]}"/></w:numPr>'
            )
        return f"<w:p><w:pPr>{properties}</w:pPr>"

    def run(
        self, parent: Node, text: str, *, style: str | None = None, bold: bool = False,
        italic: bool = False, strike: bool = False,
    ) -> None:  # fmt: skip
        """A run of `text` at the end of `parent` (a paragraph or a hyperlink); newlines and tabs kept."""
        properties = "" if style is None else f'<w:rStyle w:val="{escape(self.id(style))}"/>'
        if bold:
            properties += "<w:b/>"
        if italic:
            properties += "<w:i/>"
        if strike:
            properties += "<w:strike/>"
        content = escape(text, quote=False)
        if "\n" in content or "\t" in content:
            content = content.replace("\n", '</w:t><w:br/><w:t xml:space="preserve">')
            content = content.replace("\t", '</w:t><w:tab/><w:t xml:space="preserve">')
        properties = f"<w:rPr>{properties}</w:rPr>" if properties else ""
        parent.inner.append(f'<w:r>{properties}<w:t xml:space="preserve">{content}</w:t></w:r>')

    def line_break(self, parent: Node) -> None:
        parent.inner.append("<w:r><w:br/></w:r>")

    def hyperlink(self, paragraph: Node, href: str) -> Node:
        """A <w:hyperlink> to the external `href` at the end of `paragraph`; runs go inside it."""
        relation = self._links.get(href)
        if relation is None:
            relation = self._links[href] = self._new_link(href)
        link = Node(f'<w:hyperlink r:id="{escape(relation)}">', "</w:hyperlink>")
        paragraph.inner.append(link)
        return link

    def _new_link(self, href: str) -> str:
        """A new external hyperlink relationship of the document's part; its id.

        Not `part.relate_to`: it searches every relationship for one to the
        same target, then every id for a free one, so 20,000 links took
        minutes. The ids go on from the highest the part had, found once.
        """
        from docx.opc.constants import RELATIONSHIP_TYPE

        rels = self.document.part.rels
        if self._next_link is None:
            taken = (int(rid[3:]) for rid in rels if rid.startswith("rId") and rid[3:].isdigit())
            self._next_link = max(taken, default=0) + 1
        rid = f"rId{self._next_link}"
        self._next_link += 1
        rels.add_relationship(RELATIONSHIP_TYPE.HYPERLINK, href, rid, is_external=True)
        return rid

    def rule(self) -> None:
        """A horizontal rule: an empty paragraph with a bottom border."""
        border = '<w:bottom w:val="single" w:sz="6" w:space="1" w:color="auto"/>'
        self.blocks.append(Node(f"<w:p><w:pPr><w:pBdr>{border}</w:pBdr></w:pPr>", "</w:p>"))

    def new_numbering(self, style: str, start: int) -> int:
        """A numbering instance over `style`'s list definition that starts at `start`; its numId.

        A "List Number" style carries one numbering shared by every paragraph
        of that style, which would make the second list of a document go on
        from the first; a new <w:num> over the same definition with a start
        override is how Word itself restarts a list. Not python-docx's
        `add_num`: it looks for a free numId among all of them, each time in
        a list, so 2,000 numbered lists took 18 s; ids go on from the highest
        the part had, found once, and each style's definition is found once.
        """
        from docx.oxml.ns import qn
        from docx.oxml.numbering import CT_Num

        numbering = self.document.part.numbering_part.element
        abstract = self._list_definitions.get(style)
        if abstract is None:
            shared = self.document.styles[style].element.pPr.numPr.numId.val
            abstract = self._list_definitions[style] = numbering.num_having_numId(shared).abstractNumId.val
        if self._next_num is None:
            self._next_num = max((int(n) for n in numbering.xpath("./w:num/@w:numId")), default=0) + 1
        num_id, self._next_num = self._next_num, self._next_num + 1
        num = CT_Num.new(num_id, abstract)  # type: ignore[no-untyped-call]  # python-docx's oxml is untyped
        num.add_lvlOverride(ilvl=0).add_startOverride(start)
        last = numbering.find(qn("w:numIdMacAtCleanup"))  # the one element that comes after every <w:num>
        if last is None:
            numbering.append(num)
        else:
            last.addprevious(num)
        return num_id

    def table(self, rows: int, columns: int) -> list[list[Node]]:
        """A "Table Grid" table at the end of the body (as `add_table` makes it); each cell's paragraph."""
        if self._width is None:
            self._width = int(self.document._block_width)  # found by searching the document: once
        twips = self._width // columns // 635  # EMU → twentieths of a point
        grid = f'<w:gridCol w:w="{twips}"/>' * columns
        style = escape(self.id("Table Grid"))
        table = Node(
            f'<w:tbl><w:tblPr><w:tblStyle w:val="{style}"/><w:tblW w:type="auto" w:w="0"/>{_TABLE_LOOK}'
            f"</w:tblPr><w:tblGrid>{grid}</w:tblGrid>",
            "</w:tbl>",
        )
        cell = f'<w:tc><w:tcPr><w:tcW w:type="dxa" w:w="{twips}"/></w:tcPr><w:p>'
        paragraphs = [[Node(cell, "</w:p></w:tc>") for _ in range(columns)] for _ in range(rows)]
        table.inner = [Node("<w:tr>", "</w:tr>", list(row)) for row in paragraphs]
        self.blocks.append(table)
        return paragraphs

    def finish(self) -> None:
        """Parse what was written, once, and put it at the end of the body, before its section properties."""
        from docx.oxml import parse_xml
        from docx.oxml.ns import qn

        out = [f"<w:body {_NAMESPACES}>"]
        for block in self.blocks:
            block.render(out)
        out.append("</w:body>")
        parsed = parse_xml("".join(out))
        body = self.document.element.body
        end = body.find(qn("w:sectPr"))
        for element in list(parsed):
            _adopt(element, body, end)
        self.blocks = []


def _adopt(element: Any, parent: Any, before: Any | None) -> None:
    """Move `element` (of another document) into `parent`, before `before` (or last), in linear time.

    A subtree of at most `_MOVED_WHOLE` elements moves in one step; a bigger
    one is copied shallow (tag and attributes: text sits only in small leaves) into `parent`'s document
    and its children follow one by one, so no single move carries much.
    """
    if next(islice(element.iter(), _MOVED_WHOLE, None), None) is None:
        if before is not None:
            before.addprevious(element)
        else:
            parent.append(element)
        return
    shell = parent.makeelement(element.tag, dict(element.attrib))
    if before is not None:
        before.addprevious(shell)
    else:
        parent.append(shell)
    for child in list(element):
        _adopt(child, shell, None)


def _style(document: Document, name: str) -> Any:
    """The style `name`: the template's, or one of ours added on first use."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.shared import Pt, RGBColor

    styles = document.styles
    if name not in _OUR_STYLES or name in styles:
        return styles[name]
    paragraph = _OUR_STYLES[name]
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


__all__ = ["CODE_CHAR_STYLE", "CODE_FONT", "CODE_STYLE", "LINK_STYLE", "DocxWriter", "Node"]
