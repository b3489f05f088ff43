"""`make_docx` and `fill_contract`: the built-in Word tools (S6.2), in Python.

They are Python, not scripts, because the work is a library's
(markdown-it-py and python-docx) and no helper exposes it. Otherwise they
are tools like any other (`kind: python_tool`): the one
dispatch path checks access and arguments, and a failure is a ScriptError
whose text the caller sees.

This module is their kernel side: what a caller hands in is checked before
any work (the name, the size of the Markdown, the type of `data`), a
template is read through the files service's confined reads, and the
result is written where `fs_write_bytes` writes, by its very function
(`write_scratch_file`): the session's scratch folder, a plain file name
(never a path), within `files.max_write_bytes` and the scratch quota. The
document itself is made by `worker` (office_work.py, in a process the
call's deadline kills), since hostile Markdown or a hostile template can
make that work as long as they like. Both tools return a `file` block
whose `path` the server swaps for a download id (server/downloads.py).
"""

from __future__ import annotations

from pathlib import Path

from agentkernel.builtins import Worker
from agentkernel.config import ReadRoot
from agentkernel.errors import HelperError, ScriptError
from agentkernel.helpers.files import write_scratch_file
from agentkernel.helpers.table import ScriptCall
from agentkernel.ports import FILES, Files
from agentkernel.services.confined import NotFound, PathRefused
from agentkernel.services.files import FilesService
from agentkernel.types import JSONObject, JSONValue
from agentkernel.util.short_text import shown_value

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
DEFAULT_TEMPLATE = "dogovor.docx"  # shipped beside this module, in office_templates/
MAX_CONTENT_CHARS = 1_000_000  # make_docx's `content`, unless the YAML's max_content_chars says otherwise
MAX_UNPACKED_BYTES = 64 << 20  # a template's files, unzipped, unless max_template_unpacked_bytes says so
TEMPLATES_DIR = "data/shared/docx_templates"  # fill_contract's templates, unless templates_dir says so
_MAX_NAME_CHARS = 200


def make_docx(args: JSONObject, config: JSONObject, call: ScriptCall, worker: Worker) -> JSONValue:
    """Markdown `content` → the Word file `name` in the session's scratch folder, offered as a file block."""
    name = _docx_name("make_docx", args.get("name"), "name")
    content = args.get("content")
    if not isinstance(content, str):
        raise ScriptError(f"make_docx: content must be Markdown text, got {_kind(content)}")
    limit = _setting(config, "max_content_chars", MAX_CONTENT_CHARS)
    if len(content) > limit:
        raise ScriptError(
            f"make_docx: content is {len(content):,} characters, over the {limit:,}-character limit "
            "(max_content_chars in make_docx.yaml); split the document"
        )
    from agentkernel.builtins.office_work import render_markdown  # python-docx: in the worker, not here

    made, paragraphs, tables = worker(render_markdown, content)
    path = _write("make_docx", call, name, made)
    summary = (
        f"{name} is ready: a Word document of {_counted(paragraphs, 'paragraph')} "
        f"and {_counted(tables, 'table')}; the user can download it."
    )
    return _result(summary, name, path)


def fill_contract(args: JSONObject, config: JSONObject, call: ScriptCall, worker: Worker) -> JSONValue:
    """The .docx `template` with its `{{field}}`s filled from `data`, written as `name`; a file block."""
    from agentkernel.builtins.office_work import fill_template  # python-docx: in the worker, not here

    name = _docx_name("fill_contract", args.get("name"), "name")
    data = args.get("data")
    if not isinstance(data, dict):
        raise ScriptError(
            "fill_contract: data must be an object of field values, like "
            f'{{"client": "ООО Ромашка", "amount": 150000}}; got {_kind(data)}'
        )
    template, shown = _template(args.get("template"), config, call)
    max_unpacked = _setting(config, "max_template_unpacked_bytes", MAX_UNPACKED_BYTES)
    filled, names = worker(fill_template, template, shown, data, max_unpacked)
    path = _write("fill_contract", call, name, filled)
    unused = sorted(set(data) - set(names))
    summary = f"{name} is ready: {shown} with {len(names)} field(s) filled ({', '.join(names) or 'none'})"
    if unused:
        summary += f"; not in the template, so unused: {', '.join(unused)}"
    return _result(summary + "; the user can download it.", name, path)


# -- names, settings and results -------------------------------------------------------------------


def _docx_name(tool: str, value: JSONValue, field: str) -> str:
    """A plain file name ending in .docx: no folder, no `..`, nothing the file system reads specially."""
    if not isinstance(value, str):
        raise ScriptError(f"{tool}: {field} must be a file name like report.docx, got {_kind(value)}")
    shown = shown_value(value)
    if "/" in value or "\\" in value:
        raise ScriptError(
            f"{tool}: {field} {shown} has a path in it; give a plain file name like report.docx"
        )
    if any(ord(char) < 32 or char == "\x7f" for char in value):
        raise ScriptError(f"{tool}: {field} {shown} has a control character in it")
    if not value.lower().endswith(".docx") or value.startswith("."):
        raise ScriptError(f"{tool}: {field} {shown} must be a file name ending in .docx, like report.docx")
    if len(value) > _MAX_NAME_CHARS:
        raise ScriptError(f"{tool}: {field} is {len(value):,} characters long, over {_MAX_NAME_CHARS}")
    return value


def _counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _setting(config: JSONObject, key: str, default: int) -> int:
    value = config.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ScriptError(f"the tool's YAML: {key} must be a positive integer, got {_kind(value)}")
    return value


def _kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return f"{kinds.get(type(value), type(value).__name__)} {shown_value(value)}"


def _result(summary: str, name: str, path: str) -> JSONObject:
    block: JSONObject = {"type": "file", "name": name, "mime": DOCX_MIME, "path": path}
    return {"success": True, "content": summary, "visual": [block]}


def _write(tool: str, call: ScriptCall, name: str, data: bytes) -> str:
    """Write the file where fs_write_bytes would, by its rules; the absolute path written."""
    try:
        return write_scratch_file(tool, call, name, data)
    except HelperError as exc:
        raise ScriptError(str(exc)) from None


# -- templates -------------------------------------------------------------------------------------


def _template(value: JSONValue, config: JSONObject, call: ScriptCall) -> tuple[bytes, str]:
    """The template's bytes and how messages show it.

    None: the contract shipped with the package. Otherwise a plain .docx name,
    looked up first in the YAML's `templates_dir` (relative to the project;
    the operator's templates win) and then in the session's scratch folder
    (a template the user uploaded or a script wrote). Both are read by the
    files service's confined reads: no link is followed, only a regular file
    within `files.max_read_bytes` is read.
    """
    if value is None:
        from importlib.resources import files

        return (files("agentkernel.builtins") / "office_templates" / DEFAULT_TEMPLATE).read_bytes(), (
            f"{DEFAULT_TEMPLATE} (the default contract)"
        )
    name = _docx_name("fill_contract", value, "template")
    service = call.caller.services.require(FILES, "fill_contract")
    folder = config.get("templates_dir", TEMPLATES_DIR)
    if not isinstance(folder, str) or not folder:
        raise ScriptError(f"the tool's YAML: templates_dir must be a folder, got {_kind(folder)}")
    places = [(service.root / folder, folder)]
    if call.caller.temp_dir is not None:
        places.append((Path(call.caller.temp_dir), "the session's scratch folder"))
    for place, where in places:
        found = _read_in(service, place, name, where)
        if found is not None:
            return found, shown_value(name)
    searched = " nor in ".join(where for _, where in places)
    raise ScriptError(f"fill_contract: template {shown_value(name)} is neither in {searched}")


def _read_in(service: Files, folder: Path, name: str, where: str) -> bytes | None:
    """`folder/name` read as the files service reads (confined to `folder`); None when it is not there."""
    if not folder.is_dir():
        return None
    reader = FilesService(service.settings, root=service.root, roots=[ReadRoot(folder, where)])
    try:
        return reader.read_file(str(folder / name))
    except NotFound:
        return None
    except PathRefused as exc:
        raise ScriptError(f"fill_contract: template {shown_value(name)} in {where}: {exc}") from None


__all__ = ["DOCX_MIME", "fill_contract", "make_docx"]
