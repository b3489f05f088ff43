"""`make_docx` and `fill_contract` (issue 15, S6.2) called as the dispatcher calls them, on real files.

Each produced .docx is opened again with python-docx and read back: the
headings, lists, tables and code must really be there, and the fields
really filled. The bad inputs of the issue (a name with a path, 50 MB of
Markdown, a template that is not a .docx, data that is not an object) each
fail with a message naming what is wrong, and nothing is written outside
the session's scratch folder.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from docx import Document as open_docx
from docx.document import Document
from docx.oxml.ns import qn

from agentkernel import Kernel
from agentkernel.builtins import WORKER_PRELOAD, Worker
from agentkernel.builtins.markdown_docx import CODE_CHAR_STYLE, CODE_FONT, CODE_STYLE, LINK_STYLE
from agentkernel.builtins.office import DOCX_MIME, fill_contract, make_docx
from agentkernel.config import CallBudget, ScriptLimits, load_kernel_config
from agentkernel.errors import ScriptError
from agentkernel.helpers.table import ScriptCall
from agentkernel.tools.isolated import WorkerPool
from agentkernel.tools.python_tools import pool_worker
from agentkernel.types import JSONObject, JSONValue
from tests.conftest import write_kernel_yaml

REPORT = """\
# Отчёт за квартал

Вступление с **жирным**, *курсивом*, `кодом` и [ссылкой](https://example.com/a).
Вторая строка того же абзаца.

## Итоги

1. первый
2. второй
   - вложенный *а*
   - вложенный б
     1. глубже
3. третий

- пункт
- ещё пункт

5. пятый
6. шестой

| Показатель | Значение |
|------------|---------:|
| Выручка    | **100**  |
| Расходы    | 40       |

```python
def total(a, b):
    return a + b
```

> Цитата

---

Конец.
"""

Tool = Callable[[JSONObject, JSONObject, ScriptCall, Worker], JSONValue]


@pytest.fixture
def kernel(project: Path) -> Kernel:
    return Kernel(load_kernel_config(project / "config" / "kernel.yaml"))


@pytest.fixture
def call(kernel: Kernel) -> ScriptCall:
    """A call from user u-1's session s-1, as the dispatcher would make it."""
    return ScriptCall(kernel.caller(session_id="s-1", user_id="u-1"), "office")


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """The worker processes the tools hand their work to, as the kernel's dispatcher does."""
    workers = WorkerPool(1, preload=WORKER_PRELOAD)
    yield workers
    workers.close()


@pytest.fixture
def worker(pool: WorkerPool, kernel: Kernel) -> Worker:
    """A worker within the kernel's limits, as a tool that sets none of its own gets."""
    limits = kernel.config.limits
    own = ScriptLimits(limits.max_operations, limits.timeout_secs, limits.memory_limit_mb << 20, 1 << 20)
    return pool_worker(pool, "office", CallBudget.starting_now(own), "tester")


@pytest.fixture
def scratch(call: ScriptCall) -> Path:
    assert call.caller.temp_dir is not None
    return Path(call.caller.temp_dir)


def result_file(result: JSONValue, scratch: Path, name: str) -> Document:
    """The file block of `result`, checked, and the document its path names."""
    assert isinstance(result, dict) and result["success"] is True
    visual = result["visual"]
    assert isinstance(visual, list) and len(visual) == 1
    block = visual[0]
    assert isinstance(block, dict)
    assert block == {"type": "file", "name": name, "mime": DOCX_MIME, "path": str(scratch / name)}
    return open_docx(str(scratch / name))


def failure(
    tool: Tool, args: JSONObject, call: ScriptCall, worker: Worker, config: JSONObject | None = None
) -> str:
    with pytest.raises(ScriptError) as raised:
        tool(args, config or {}, call, worker)
    return str(raised.value)


def all_files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()}


# -- make_docx: what the Markdown becomes ----------------------------------------------------------


def test_markdown_becomes_headings_lists_tables_and_code(
    call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    result = make_docx({"name": "report.docx", "content": REPORT}, {}, call, worker)
    assert isinstance(result, dict) and "report.docx is ready" in str(result["content"])
    document = result_file(result, scratch, "report.docx")
    shown = [(p.style.name if p.style else None, p.text) for p in document.paragraphs]
    assert shown[:2] == [
        ("Heading 1", "Отчёт за квартал"),
        ("Normal", "Вступление с жирным, курсивом, кодом и ссылкой. Вторая строка того же абзаца."),
    ]
    assert ("Heading 2", "Итоги") in shown
    lists = [(style, text) for style, text in shown if style and style.startswith("List")]
    assert lists == [
        ("List Number", "первый"),
        ("List Number", "второй"),
        ("List Bullet 2", "вложенный а"),
        ("List Bullet 2", "вложенный б"),
        ("List Number 3", "глубже"),
        ("List Number", "третий"),
        ("List Bullet", "пункт"),
        ("List Bullet", "ещё пункт"),
        ("List Number", "пятый"),
        ("List Number", "шестой"),
    ]
    assert (CODE_STYLE, "def total(a, b):\n    return a + b") in shown
    assert document.styles[CODE_STYLE].font.name == CODE_FONT
    assert ("Quote", "Цитата") in shown
    assert shown[-1] == ("Normal", "Конец.")
    [table] = document.tables
    assert table.style is not None and table.style.name == "Table Grid"
    assert [[cell.text for cell in row.cells] for row in table.rows] == [
        ["Показатель", "Значение"],
        ["Выручка", "100"],
        ["Расходы", "40"],
    ]
    assert all(run.bold for run in table.rows[0].cells[0].paragraphs[0].runs)  # the header row
    assert table.rows[1].cells[1].paragraphs[0].runs[0].bold  # **100**


def test_inline_formatting_is_kept_in_runs(call: ScriptCall, scratch: Path, worker: Worker) -> None:
    text = "a **b** *c* ***d*** `e` ~~f~~ [g](https://example.com/g)"
    document = result_file(
        make_docx({"name": "x.docx", "content": text}, {}, call, worker), scratch, "x.docx"
    )
    paragraph = document.paragraphs[0]
    runs = {run.text: run for run in paragraph.runs}
    assert runs["b"].bold and not runs["b"].italic
    assert runs["c"].italic and not runs["c"].bold
    assert runs["d"].bold and runs["d"].italic
    assert runs["e"].style is not None and runs["e"].style.name == CODE_CHAR_STYLE
    assert document.styles[CODE_CHAR_STYLE].font.name == CODE_FONT
    assert runs["f"].font.strike
    [link] = paragraph.hyperlinks
    assert (link.text, link.address) == ("g", "https://example.com/g")
    assert link.runs[0].style is not None and link.runs[0].style.name == LINK_STYLE


def test_links_each_get_a_relationship_one_per_address(
    call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    text = "[a](https://example.com/1) [b](https://example.com/2) [c](https://example.com/1)"
    document = result_file(
        make_docx({"name": "l.docx", "content": text}, {}, call, worker), scratch, "l.docx"
    )
    links = document.paragraphs[0].hyperlinks
    assert [(link.text, link.address) for link in links] == [
        ("a", "https://example.com/1"),
        ("b", "https://example.com/2"),
        ("c", "https://example.com/1"),
    ]
    ids = [link._hyperlink.rId for link in links]
    assert ids[0] == ids[2] != ids[1]
    external = [rel for rel in document.part.rels.values() if rel.is_external]
    assert len(external) == 2


def test_each_numbered_list_restarts_at_its_own_first_number(
    call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    text = "1. a\n2. b\n\nparagraph\n\n7. c\n8. d\n"
    document = result_file(
        make_docx({"name": "n.docx", "content": text}, {}, call, worker), scratch, "n.docx"
    )
    numbering = document.part.numbering_part.element

    def start_of(paragraph_index: int) -> tuple[int, int]:
        found = document.paragraphs[paragraph_index]._p.xpath("./w:pPr/w:numPr/w:numId/@w:val")
        num_id = int(found[0])
        override = numbering.num_having_numId(num_id).find(qn("w:lvlOverride"))
        return num_id, int(override.find(qn("w:startOverride")).get(qn("w:val")))

    first, second = start_of(0), start_of(3)
    assert start_of(1) == first and start_of(4) == second
    assert first[1] == 1 and second[1] == 7 and first[0] != second[0]


def test_html_and_unsafe_links_are_text_never_markup(call: ScriptCall, scratch: Path, worker: Worker) -> None:
    text = "<script>alert(1)</script>\n\n[x](javascript:alert(1)) <b>bold?</b> ![logo](https://example.com/l.png)"
    document = result_file(
        make_docx({"name": "h.docx", "content": text}, {}, call, worker), scratch, "h.docx"
    )
    texts = [p.text for p in document.paragraphs]
    assert texts == ["<script>alert(1)</script>", "[x](javascript:alert(1)) <b>bold?</b> [logo]"]
    assert not any(p.hyperlinks for p in document.paragraphs)
    assert not document.inline_shapes  # nothing fetched


def test_characters_a_word_file_cannot_hold_are_replaced_not_fatal(
    call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    text = "a\x01b\x0c **c\ufffe** `x\x00` \ud800"
    result = make_docx({"name": "c.docx", "content": text}, {}, call, worker)
    assert [p.text for p in result_file(result, scratch, "c.docx").paragraphs] == [
        "a\ufffdb\ufffd c\ufffd x\ufffd \ufffd"
    ]
    assert isinstance(result, dict)
    assert result["content"] == (
        "c.docx is ready: a Word document of 1 paragraph and 0 tables; the user can download it."
    )


def test_an_empty_document_is_still_a_document(call: ScriptCall, scratch: Path, worker: Worker) -> None:
    document = result_file(make_docx({"name": "e.docx", "content": ""}, {}, call, worker), scratch, "e.docx")
    assert [p.text for p in document.paragraphs] == []


# -- make_docx: bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../x.docx", "has a path in it"),
        ("a/b.docx", "has a path in it"),
        ("/tmp/x.docx", "has a path in it"),
        ("..\\x.docx", "has a path in it"),
        ("report.txt", "must be a file name ending in .docx"),
        ("report", "must be a file name ending in .docx"),
        (".docx", "must be a file name ending in .docx"),
        ("a\x00.docx", "has a control character in it"),
        ("a\n.docx", "has a control character in it"),
        ("x" * 300 + ".docx", "characters long, over 200"),
        (42, "name must be a file name like report.docx, got number 42"),
        (None, "name must be a file name like report.docx, got null"),
    ],
)
def test_a_bad_name_is_refused_and_nothing_is_written(
    name: JSONValue, reason: str, call: ScriptCall, project: Path, worker: Worker
) -> None:
    before = all_files(project)
    message = failure(make_docx, {"name": name, "content": "# x"}, call, worker)
    assert message.startswith("make_docx: ") and reason in message
    assert all_files(project) == before


def test_fifty_megabytes_of_markdown_are_refused_before_any_work(
    call: ScriptCall, project: Path, worker: Worker
) -> None:
    before = all_files(project)
    message = failure(make_docx, {"name": "big.docx", "content": "# x\n" * (50 << 18)}, call, worker)
    assert message == (
        "make_docx: content is 52,428,800 characters, over the 1,000,000-character limit "
        "(max_content_chars in make_docx.yaml); split the document"
    )
    assert all_files(project) == before


def test_the_yaml_sets_the_content_limit(call: ScriptCall, worker: Worker) -> None:
    message = failure(
        make_docx, {"name": "a.docx", "content": "x" * 11}, call, worker, {"max_content_chars": 10}
    )
    assert "11 characters, over the 10-character limit" in message
    bad = failure(make_docx, {"name": "a.docx", "content": "x"}, call, worker, {"max_content_chars": "many"})
    assert bad == "the tool's YAML: max_content_chars must be a positive integer, got string 'many'"


def test_content_that_is_not_text_is_refused(call: ScriptCall, worker: Worker) -> None:
    message = failure(make_docx, {"name": "a.docx", "content": ["# x"]}, call, worker)
    assert message == 'make_docx: content must be Markdown text, got array ["# x"]'


def test_without_a_session_there_is_no_scratch_folder_to_write_to(kernel: Kernel, worker: Worker) -> None:
    message = failure(
        make_docx, {"name": "a.docx", "content": "x"}, ScriptCall(kernel.caller(), "office"), worker
    )
    assert message.startswith("no temp dir: make_docx writes only inside a session's temp dir")


def test_the_scratch_limits_of_fs_write_bytes_hold(tmp_path: Path, worker: Worker) -> None:
    config = load_kernel_config(write_kernel_yaml(tmp_path, "files:\n  max_write_bytes: 1000\n"))
    call = ScriptCall(Kernel(config).caller(session_id="s-1", user_id="u-1"), "office")
    message = failure(make_docx, {"name": "a.docx", "content": "# x"}, call, worker)
    assert message.startswith("make_docx: content is ") and "(files.max_write_bytes)" in message


def test_a_link_planted_at_the_name_is_replaced_not_followed(
    call: ScriptCall, scratch: Path, tmp_path: Path, worker: Worker
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "r.docx").symlink_to(victim)
    message = failure(make_docx, {"name": "r.docx", "content": "# x"}, call, worker)
    assert "link" in message
    assert victim.read_text() == "original"


# -- fill_contract ---------------------------------------------------------------------------------

CONTRACT: JSONObject = {"client": "ООО «Ромашка»", "date": "1 марта 2026", "amount": 150000}


def document_text(document: Document) -> str:
    """Every paragraph's text, the tables' too, and the headers' and footers'."""
    parts = [p.text for p in document.paragraphs]
    for table in document.tables:
        parts += [cell.text for row in table.rows for cell in row.cells]
    for section in document.sections:
        for story in (section.header, section.footer):
            if not story.is_linked_to_previous:
                parts += [p.text for p in story.paragraphs]
    return "\n".join(parts)


def test_the_default_contract_is_filled_everywhere(call: ScriptCall, scratch: Path, worker: Worker) -> None:
    result = fill_contract({"name": "dogovor.docx", "data": CONTRACT}, {}, call, worker)
    document = result_file(result, scratch, "dogovor.docx")
    text = document_text(document)
    assert "{{" not in text and "}}" not in text
    assert "г. Москва, 1 марта 2026" in text
    assert "ООО «Ромашка», именуемый в дальнейшем «Заказчик»" in text
    assert "Стоимость услуг составляет 150000 рублей." in text
    assert document.tables[0].cell(1, 0).text.startswith("ООО «Ромашка»")
    assert isinstance(result, dict)
    assert result["content"] == (
        "dogovor.docx is ready: dogovor.docx (the default contract) with 3 field(s) filled "
        "(date, client, amount); the user can download it."
    )


def split_template() -> bytes:
    """A template whose fields Word split across runs, in a header, a footer, a table and a hyperlink."""
    document = open_docx()
    paragraph = document.add_paragraph("Клиент: {{cli")
    paragraph.add_run("ent").bold = True
    paragraph.add_run("}}, сумма {{ amount }} руб., {{client}} ещё раз.")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "Дата: {{date}}"
    section = document.sections[0]
    section.header.paragraphs[0].text = "Шапка {{date}}"
    section.footer.paragraphs[0].text = "Подвал {{client}}"
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_fields_split_across_runs_in_headers_footers_and_tables_are_filled(
    call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "mine.docx").write_bytes(split_template())
    data: JSONObject = {"client": "Иванов", "amount": 99.5, "date": "сегодня", "extra": "x"}
    result = fill_contract({"name": "out.docx", "template": "mine.docx", "data": data}, {}, call, worker)
    document = result_file(result, scratch, "out.docx")
    runs = document.paragraphs[0].runs
    assert document.paragraphs[0].text == "Клиент: Иванов, сумма 99.5 руб., Иванов ещё раз."
    assert [run.text for run in runs] == ["Клиент: Иванов", "", ", сумма 99.5 руб., Иванов ещё раз."]
    assert document.tables[0].cell(0, 0).text == "Дата: сегодня"
    assert document.sections[0].header.paragraphs[0].text == "Шапка сегодня"
    assert document.sections[0].footer.paragraphs[0].text == "Подвал Иванов"
    assert isinstance(result, dict) and "not in the template, so unused: extra" in str(result["content"])


def test_missing_fields_are_named_all_of_them(call: ScriptCall, project: Path, worker: Worker) -> None:
    before = all_files(project)
    message = failure(fill_contract, {"name": "d.docx", "data": {"client": "x"}}, call, worker)
    assert message == (
        "fill_contract: template dogovor.docx (the default contract): "
        "data has no value for the template's field(s): date, amount"
    )
    assert all_files(project) == before


@pytest.mark.parametrize(
    ("data", "kind"),
    [([1, 2], "array [1, 2]"), ("client", "string 'client'"), (None, "null"), (7, "number 7")],
)
def test_data_that_is_not_an_object_is_refused(
    data: JSONValue, kind: str, call: ScriptCall, worker: Worker
) -> None:
    message = failure(fill_contract, {"name": "d.docx", "data": data}, call, worker)
    assert message.startswith("fill_contract: data must be an object of field values")
    assert message.endswith(f"got {kind}")


def test_values_that_are_not_text_or_numbers_are_named(call: ScriptCall, worker: Worker) -> None:
    data: JSONObject = {"client": {"name": "x"}, "date": True, "amount": None}
    message = failure(fill_contract, {"name": "d.docx", "data": data}, call, worker)
    assert message.endswith(
        "data values must be text or numbers; not so for: date (a boolean), client (an object), amount (null)"
    )


def template_with(text: str) -> bytes:
    document = open_docx()
    document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def test_expressions_are_refused_not_evaluated(call: ScriptCall, scratch: Path, worker: Worker) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    text = "{{ client | upper }} {{ 7*7 }} {{ ''.__class__ }} {{client}}"
    (scratch / "jinja.docx").write_bytes(template_with(text))
    message = failure(
        fill_contract, {"name": "o.docx", "template": "jinja.docx", "data": {"client": "a"}}, call, worker
    )
    assert message == (
        "fill_contract: template 'jinja.docx': the template has fields that are not plain names: "
        "{{ client | upper }}, {{ 7*7 }}, {{ ''.__class__ }}; only {{name}} fields are filled "
        "(no expressions, filters or Jinja tags)"
    )
    assert not (scratch / "o.docx").exists()


def test_the_templates_folder_comes_first_then_the_scratch_folder(
    call: ScriptCall, scratch: Path, project: Path, worker: Worker
) -> None:
    folder = project / "data" / "shared" / "docx_templates"
    folder.mkdir(parents=True)
    (folder / "t.docx").write_bytes(template_with("операторский {{client}}"))
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "t.docx").write_bytes(template_with("из сессии {{client}}"))
    (scratch / "only.docx").write_bytes(template_with("только в сессии {{client}}"))
    for template, expected in (("t.docx", "операторский Пётр"), ("only.docx", "только в сессии Пётр")):
        result = fill_contract(
            {"name": "o.docx", "template": template, "data": {"client": "Пётр"}}, {}, call, worker
        )
        assert result_file(result, scratch, "o.docx").paragraphs[0].text == expected
    other = project / "elsewhere"
    other.mkdir()
    (other / "t.docx").write_bytes(template_with("из конфигурации {{client}}"))
    result = fill_contract(
        {"name": "o.docx", "template": "t.docx", "data": {"client": "Пётр"}},
        {"templates_dir": "elsewhere"},
        call,
        worker,
    )
    assert result_file(result, scratch, "o.docx").paragraphs[0].text == "из конфигурации Пётр"


def test_a_template_name_is_a_plain_name_and_links_are_not_followed(
    call: ScriptCall, project: Path, tmp_path: Path, worker: Worker
) -> None:
    secret = tmp_path / "secret.docx"
    secret.write_bytes(template_with("секрет {{client}}"))
    folder = project / "data" / "shared" / "docx_templates"
    folder.mkdir(parents=True)
    (folder / "link.docx").symlink_to(secret)
    message = failure(
        fill_contract, {"name": "o.docx", "template": "link.docx", "data": {"client": "x"}}, call, worker
    )
    assert message.startswith("fill_contract: template 'link.docx' in data/shared/docx_templates: ")
    assert "link" in message.removeprefix("fill_contract: template 'link.docx'")
    for name in ("../secret.docx", str(secret)):
        message = failure(fill_contract, {"name": "o.docx", "template": name, "data": {}}, call, worker)
        assert "has a path in it" in message


def test_an_unknown_template_names_where_it_was_looked_for(call: ScriptCall, worker: Worker) -> None:
    message = failure(fill_contract, {"name": "o.docx", "template": "nowhere.docx", "data": {}}, call, worker)
    assert message == (
        "fill_contract: template 'nowhere.docx' is neither in data/shared/docx_templates "
        "nor in the session's scratch folder"
    )


def zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


WORD_TYPES = b'<Types><Override ContentType="wordprocessingml.document.main+xml"/></Types>'


def spreadsheet() -> bytes:
    """A real .docx whose main part says it is a spreadsheet's: as an .xlsx renamed looks to python-docx."""
    with zipfile.ZipFile(io.BytesIO(template_with("x"))) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    files["[Content_Types].xml"] = files["[Content_Types].xml"].replace(
        b"wordprocessingml.document.main+xml", b"spreadsheetml.sheet.main+xml"
    )
    return zip_of(files)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"Just text, renamed to .docx\n", "(it is not even a zip archive)"),
        (
            zip_of({"readme.txt": b"hello"}),
            "(a zip archive without [Content_Types].xml and word/document.xml)",
        ),
        (zip_of({"word/document.xml": b"<not xml"}), "without [Content_Types].xml and word/document.xml"),
        (spreadsheet(), "(no Word document inside: an .xlsx or .pptx renamed?)"),
        (
            zip_of({"[Content_Types].xml": WORD_TYPES, "word/document.xml": b"<w:document/>"}),
            "(python-docx cannot read it: ",
        ),
    ],
)
def test_a_template_that_is_not_a_docx_is_refused(
    content: bytes, reason: str, call: ScriptCall, scratch: Path, worker: Worker
) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "fake.docx").write_bytes(content)
    message = failure(fill_contract, {"name": "o.docx", "template": "fake.docx", "data": {}}, call, worker)
    assert message.startswith("fill_contract: template 'fake.docx' is not a Word .docx file ")
    assert reason in message
    assert sorted(os.listdir(scratch)) == ["fake.docx"]


def test_a_template_that_unpacks_too_big_is_refused_unopened(call: ScriptCall, worker: Worker) -> None:
    config: JSONObject = {"max_template_unpacked_bytes": 10_000}
    message = failure(fill_contract, {"name": "o.docx", "data": CONTRACT}, call, worker, config)
    assert message.startswith("fill_contract: template dogovor.docx (the default contract) unpacks to ")
    assert message.endswith(
        "bytes, over the 10,000-byte limit (max_template_unpacked_bytes in fill_contract.yaml)"
    )
