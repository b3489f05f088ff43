"""The web page's download button for a make_docx file (issue 15, S6.2), in Debian's Chromium.

The LLM calls make_docx in a turn; the page shows the file block as a
button, and clicking it saves the very .docx, opened here with python-docx.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docx import Document as open_docx

from agentkernel import Kernel
from agentkernel.builtins.office import DOCX_MIME
from agentkernel.config import load_kernel_config
from tests.conftest import BUILTINS_ON
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import WAIT_MS, LiveServer, browser, make_project, write

__all__ = ["browser"]  # the fixture, shared with the page's own browser tests


def test_the_page_downloads_the_docx_a_turn_made(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    kernel_yaml = make_project(tmp_path, llm_server, BUILTINS_ON)
    write(
        tmp_path / "config" / "templates" / "tester.yaml",
        "name: tester\ninstructions: You write documents.\ntools: [make_docx]\nmax_turns: 4\n",
    )
    args = {"name": "отчёт.docx", "content": "# Квартальный отчёт\n\n- выручка\n- расходы\n"}
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("make_docx", json.dumps(args, ensure_ascii=False), id="c1"),)),
        Reply(text="Отчёт готов."),
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(live.url)
        page.wait_for_selector("#template option[value=tester]", state="attached")
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.fill("#message", "отчёт, пожалуйста")
        page.keyboard.press("Enter")

        button = page.get_by_role("button", name=f"⬇ отчёт.docx ({DOCX_MIME})")
        with page.expect_download() as started:
            button.click()
        download = started.value
        assert download.suggested_filename == "отчёт.docx"
        document = open_docx(download.path())
        assert [p.text for p in document.paragraphs] == ["Квартальный отчёт", "выручка", "расходы"]
        assert page.locator(".v-file [role=status]").inner_text() == ""  # no error shown
        assert problems == []
