"""What `make_docx` and `fill_contract` do in their worker process: plain values and bytes in, bytes out.

office.py checks the arguments, reads a template through the files
service and writes the result to the scratch folder, in the kernel. All
that a caller's input can make expensive is here — parsing the Markdown,
building and saving the document, opening a template, finding and filling
its fields — and runs in a worker process the call's deadline kills
(tools/isolated.py). A refusal is a ScriptError, whose text the caller
sees as it is; running out of the call's memory is a MemoryError, which
is never turned into a refusal.
"""

from __future__ import annotations

import io
import zipfile
from typing import TYPE_CHECKING, Any

from agentkernel.errors import ScriptError
from agentkernel.util.short_text import shown_value

if TYPE_CHECKING:
    from docx.document import Document

# the main part's content types python-docx opens: .docx, .docm, .dotx, .dotm
_WORD_MAIN_TYPES = (
    b"wordprocessingml.document.main+xml",
    b"wordprocessingml.template.main+xml",
    b"ms-word.document.macroEnabled.main+xml",
    b"ms-word.template.macroEnabledTemplate.main+xml",
)


def render_markdown(text: str) -> tuple[bytes, int, int]:
    """Markdown → the .docx file's bytes, its number of paragraphs and of tables."""
    from agentkernel.builtins.markdown_docx import markdown_document  # python-docx, markdown-it: on first use

    document = markdown_document(text)
    return _saved(document), len(document.paragraphs), len(document.tables)


def fill_template(
    template: bytes, shown: str, data: dict[str, Any], max_unpacked: int
) -> tuple[bytes, list[str]]:
    """The template (bytes) with its `{{field}}`s filled from `data`: the .docx file's bytes, the fields.

    `shown` is how messages name the template; `max_unpacked` bounds its
    files unzipped (max_template_unpacked_bytes), checked before it opens.
    """
    from agentkernel.builtins.docx_fields import (  # python-docx: on first use
        FieldProblem,
        field_names,
        field_values,
        fill_fields,
    )

    document = _open_docx(template, shown, max_unpacked)
    try:
        names = field_names(document)
        fill_fields(document, field_values(data, names))
    except FieldProblem as problem:
        raise ScriptError(f"fill_contract: template {shown}: {problem}") from None
    return _saved(document), names


def _saved(document: Document) -> bytes:
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _open_docx(data: bytes, shown: str, max_unpacked: int) -> Document:
    """The template as a python-docx Document, or a ScriptError saying it is not a Word .docx file."""
    from docx import Document as open_document

    not_docx = f"fill_contract: template {shown} is not a Word .docx file"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        raise ScriptError(f"{not_docx} (it is not even a zip archive)") from None
    unpacked = sum(member.file_size for member in members)
    if unpacked > max_unpacked:
        raise ScriptError(
            f"fill_contract: template {shown} unpacks to {unpacked:,} bytes, over the {max_unpacked:,}-byte "
            "limit (max_template_unpacked_bytes in fill_contract.yaml)"
        )
    names = {member.filename for member in members}
    if "[Content_Types].xml" not in names or "word/document.xml" not in names:
        raise ScriptError(f"{not_docx} (a zip archive without [Content_Types].xml and word/document.xml)")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        types = archive.read("[Content_Types].xml")
    if not any(kind in types for kind in _WORD_MAIN_TYPES):
        raise ScriptError(f"{not_docx} (no Word document inside: an .xlsx or .pptx renamed?)")
    try:
        return open_document(io.BytesIO(data))
    except MemoryError:  # the call's memory limit, not a bad template
        raise
    except Exception as exc:  # python-docx raises KeyError, ValueError, lxml and zip errors alike
        reason = f"{type(exc).__name__}: {exc}"
        raise ScriptError(f"{not_docx} (python-docx cannot read it: {shown_value(reason)})") from None


__all__ = ["fill_template", "render_markdown"]
