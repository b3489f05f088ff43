"""The web page in a real browser (issue 11 §4, §6): Playwright for Python driving Debian's Chromium.

The real server (LiveServer) runs a project whose template calls a tool
returning a paged table and another returning a chart; the scripted LLM
answers. The test opens the page, chats, sees the table, clicks "More" and
sees the second page, sees the chart, and runs a tool from the panel. It
waits on the page's elements, never on time.

Chromium comes from the distribution (`apt-get install chromium`, as
`.ci/run` does), never from `playwright install`. The screenshot is taken
every run; with AGENTKERNEL_UPDATE_SCREENSHOT=1 it also replaces
docs/img/web-chat.png (so an ordinary run leaves the working tree clean).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.server import token_hash
from tests.conftest import REPO
from tests.fakes import FakeLLMServer, FakeToolCall, Reply
from tests.server.conftest import WAIT_MS, Gated, LiveServer, make_project, script_tool, write
from tests.server.test_continuations_api import PAGED_JS

SCREENSHOT = REPO / "docs" / "img" / "web-chat.png"


CHART_JS = """
function run(args) {
  return {content: 'a chart of sales',
          visual: {type: 'chart', chart: 'bar', title: 'Sales by quarter', labels: ['Q1', 'Q2', 'Q3', 'Q4'],
                   series: [{name: '2025', data: [12, 19, 7, 15]}, {name: '2026', data: [14, 21, 11, 18]}]}};
}
"""

HOURLY_JS = """
function run(args) {
  const made = schedule_cron({name: 'report', template: 'tester', interval_secs: 3600, prompt: 'Report.'});
  return 'scheduled ' + made.name;
}
"""


def page_project(root: Path, llm: FakeLLMServer | None) -> Path:
    """make_project's, plus `paged` (a table in pages of two rows) and `sales` (a bar chart) in `tester`."""
    kernel_yaml = make_project(root, llm)
    tools = root / "config" / "scripts" / "tools"
    script_tool(
        tools,
        "paged",
        PAGED_JS,
        description="Numbers, two per page.",
        parameters={"type": "object", "properties": {"page": {"type": "integer"}}},
        ui={"icon": "🔢"},
    )
    script_tool(tools, "sales", CHART_JS, description="Sales as a chart.", ui={"icon": "📊"})
    write(
        root / "config" / "templates" / "tester.yaml",
        "name: tester\ndescription: A test agent.\ninstructions: You are a test agent.\n"
        "tools: [upper, paged, sales]\nmax_turns: 4\n",
    )
    return kernel_yaml


def open_page(browser: Any, url: str, width: int = 1280, height: int = 900) -> tuple[Any, list[str]]:
    """A fresh page on `url`, and the list its console errors and uncaught exceptions go to."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT_MS)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(url)
    page.wait_for_selector("#template option[value=tester]", state="attached")
    return page, problems


def send_in_new_chat(browser: Any, url: str, message: str) -> tuple[Any, list[str]]:
    """A fresh page with a new chat open, `message` sent in it (typed in the page's own message box)."""
    page, problems = open_page(browser, url)
    page.get_by_role("button", name="New chat").click()
    page.wait_for_selector("#send:enabled")
    page.fill("#compose textarea", message)
    page.keyboard.press("Enter")
    return page, problems


def test_chat_table_more_chart_and_a_tool_run(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("paged", "{}", id="c1"), FakeToolCall("sales", "{}", id="c2"))),
        Reply(text="Here are **the numbers** and the chart.\n\n- first\n- second"),
    )
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
        page, problems = open_page(browser, live.url)
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")  # the chat is open (its transcript shown)
        page.fill("#message", "Show me the numbers and the sales")
        page.keyboard.press("Enter")  # Enter sends

        # the streamed answer, as Markdown (sanitised): bold and a list
        page.wait_for_selector(".msg.agent strong:has-text('the numbers')")
        assert page.locator(".msg.agent li").all_inner_texts() == ["first", "second"]
        # each tool call is a collapsible row with its arguments and result
        assert page.locator("details.tool-call").count() == 2
        page.locator("details.tool-call summary", has_text="paged").click()
        page.wait_for_selector("details.tool-call[open] pre:has-text('page 1')")

        # the table, then its second page in place
        table = page.locator(".v-table table")
        table.locator("td", has_text="1").first.wait_for()
        assert table.locator("tbody tr").count() == 2
        page.get_by_role("button", name="More").click()
        table.locator("tbody tr:nth-child(4)").wait_for()
        assert table.locator("tbody td:first-child").all_inner_texts() == ["0", "1", "2", "3"]

        # the chart: server-drawn SVG in an <img>, so nothing in it runs
        chart = page.locator(".v-chart img")
        chart.wait_for()
        assert chart.get_attribute("src").startswith("data:image/svg+xml")
        assert chart.get_attribute("alt") == "bar chart: Sales by quarter"
        page.wait_for_function("() => document.querySelector('.v-chart img').naturalWidth > 0")

        # a tool from the panel, with a form generated from its schema
        page.locator("button.tool-pick", has_text="upper").click()
        page.get_by_label("text *").fill("hello from the panel")
        page.get_by_role("button", name="Run upper").click()
        page.wait_for_selector("#tool-output pre:has-text('HELLO FROM THE PANEL')")

        shot = tmp_path / "web-chat.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("AGENTKERNEL_UPDATE_SCREENSHOT") == "1":
            shutil.copyfile(shot, SCREENSHOT)

        # opened again later, the chat shows its table and chart from the transcript, and More still pages
        page.reload()
        page.locator("#session-list button").first.click()
        page.wait_for_selector("#send:enabled")
        table = page.locator(".v-table table")
        table.locator("tbody tr:nth-child(2)").wait_for()
        assert table.locator("tbody td:first-child").all_inner_texts() == ["0", "1"]
        page.get_by_role("button", name="More").click()
        table.locator("tbody tr:nth-child(4)").wait_for()
        page.locator(".v-chart img").wait_for()
        assert problems == []


LONG_DESCRIPTION = (
    "A test agent whose description is longer than any column of the page: it reads, counts, charts "
    "and pages through whatever it is asked about, in as many words as a template's author may write."
)
WIDTHS = (
    pytest.param(390, 844, id="phone-390"),
    pytest.param(1366, 768, id="laptop-1366"),
    pytest.param(1920, 1080, id="desktop-1920"),
)
# a control must lie inside the box of the first of these that holds it (the page's columns and bars)
COLUMNS = ".bar, .llm-status, nav.sessions, main.chat, aside.tools, .status"
LAYOUT_JS = """(columns) => {
  const problems = [];
  const name = (n) => n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") +
    " '" + (n.textContent || n.value || n.getAttribute("aria-label") || "").trim().slice(0, 30) + "'";
  const controls = document.querySelectorAll("button, input, select, textarea, a[href], summary");
  const seen = [];
  for (const control of controls) {
    if (!control.checkVisibility() || control.classList.contains("skip")) continue;  // hidden on purpose
    const column = control.closest(columns);
    const box = control.getBoundingClientRect();
    if (!column) { problems.push(name(control) + " is in no column"); continue; }
    const outer = column.getBoundingClientRect();
    if (box.width < 1 || box.height < 1) problems.push(name(control) + " has no size");
    if (box.left < outer.left - 0.5 || box.right > outer.right + 0.5 || box.top < outer.top - 0.5 ||
        box.bottom > outer.bottom + 0.5) {
      const span = (b) => "[" + Math.round(b.left) + ", " + Math.round(b.right) + "]";
      const where = column.id || column.className;
      problems.push(name(control) + " " + span(box) + " outside " + where + " " + span(outer));
    }
    if (control.scrollWidth > control.clientWidth + 1 && control.tagName === "BUTTON") {
      problems.push(name(control) + " cuts its own label");
    }
    seen.push(name(control));
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    const wide = document.documentElement.scrollWidth;
    problems.push("the page scrolls sideways: " + wide + " > " + window.innerWidth);
  }
  return {problems, seen};
}"""
# the page's controls a person must see, whatever the width
MUST_SEE = ("#template", "#new-chat button", "#message", "#send", "#token", "#tools-toggle", "#jobs-refresh")


def screenshot(page: Any, shot: Path) -> None:
    """The whole page as PNG at `shot`; also in $AGENTKERNEL_SCREENSHOT_DIR when set, to look at."""
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get("AGENTKERNEL_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(keep) / shot.name)


# each chart's smallest text as shown, in CSS px: its font-size in the SVG times the image's scale
CHART_TEXT_JS = """() => [...document.querySelectorAll(".v-chart img")].map((img) => {
  const svg = decodeURIComponent(img.src.slice(img.src.indexOf(",") + 1));
  const doc = new DOMParser().parseFromString(svg, "image/svg+xml");
  const sizes = [...doc.querySelectorAll("[font-size]")].map((n) => Number(n.getAttribute("font-size")));
  return {where: img.closest("aside, main").id || img.closest("aside, main").className,
          shown: Math.min(...sizes) * img.clientWidth / img.naturalWidth};
})"""


def check_charts_readable(page: Any) -> None:
    """Every chart's text is shown at 11 px or more (the tools panel's was 5 px: 640 px shrunk to 294)."""
    charts = page.evaluate(CHART_TEXT_JS)
    assert charts and all(c["shown"] >= 11 for c in charts), charts


def check_layout(page: Any) -> None:
    """Every visible control inside its column, each of MUST_SEE visible and on top, no sideways scroll."""
    found = page.evaluate(LAYOUT_JS, COLUMNS)
    assert not found["problems"], "\n".join(found["problems"])
    for selector in MUST_SEE:
        control = page.locator(selector)
        control.scroll_into_view_if_needed()
        assert control.is_visible(), selector
        # on top where a person clicks: nothing else (the chat panel, the status line) over its middle
        on_top = control.evaluate(
            """(n) => { const b = n.getBoundingClientRect();
                        const x = b.left + b.width / 2, y = b.top + b.height / 2;
                        return n.contains(document.elementFromPoint(x, y)); }"""
        )
        assert on_top, selector


@pytest.mark.parametrize(("width", "height"), WIDTHS)
def test_every_control_stays_in_its_column_and_is_clicked_as_a_person_does(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any, width: int, height: int
) -> None:
    """Issue 26 §1: a template's long description stretched the picker, and with it "New chat", past its
    240 px column (909 px at 1366 and 1920, under the chat panel), and the page scrolled sideways at 390.
    Layout is checked at three widths, before and after a chat with a table and a chart and a tool run
    from the panel; every click is Playwright's, which waits until the element would get the click."""
    kernel_yaml = page_project(tmp_path, llm_server)
    write(
        tmp_path / "config" / "templates" / "tester.yaml",
        f"name: tester\ndescription: {json.dumps(LONG_DESCRIPTION)}\ninstructions: You are a test agent.\n"
        "tools: [upper, paged, sales]\nmax_turns: 4\n",
    )
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("paged", "{}", id="c1"), FakeToolCall("sales", "{}", id="c2"))),
        Reply(text="Here are the numbers: " + "x" * 300),  # one long word: it wraps, the page does not widen
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        page, problems = open_page(browser, live.url, width=width, height=height)
        check_layout(page)
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.get_by_label("Message").fill(
            "Show me the numbers and the sales, please, for every quarter of the year"
        )
        page.get_by_role("button", name="Send").click()
        page.wait_for_selector(".msg.agent .md:has-text('Here are the numbers')")
        # the chat is listed, and headed, by its first message, shortened (issue 26 §6)
        title = "Show me the numbers and the sales, please, for every…"
        page.locator("#session-list button[aria-current=true] .title", has_text=title).wait_for()
        assert page.locator("#chat-title").inner_text() == title
        page.locator(".v-table tbody tr:nth-child(2)").wait_for()
        page.get_by_role("button", name="More").click()
        page.locator(".v-table tbody tr:nth-child(4)").wait_for()
        page.locator(".v-chart img").wait_for()
        page.locator("details.tool-call summary", has_text="paged").click()
        page.wait_for_selector("details.tool-call[open] pre")
        page.locator("button.tool-pick", has_text="sales").click()
        page.get_by_role("button", name="Run sales").click()
        page.locator("#tool-output .v-chart img").wait_for()
        page.wait_for_function("() => document.querySelector('#tool-output .v-chart img').naturalWidth > 0")
        page.wait_for_selector("#send:enabled")
        check_layout(page)
        check_charts_readable(page)
        screenshot(page, tmp_path / f"web-chat-{width}.png")
        assert problems == []


def test_the_shipped_project_s_page_at_three_widths(tmp_path: Path, browser: Any) -> None:
    """The case of issue 26 §1 itself: hello-agent's description in the picker, and its LLM not running.

    The project's kernel.yaml points at a port where nothing listens, as a first hour without Ollama does.
    """
    shutil.copytree(REPO / "config", tmp_path / "config")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        llm_url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    kernel_yaml = tmp_path / "config" / "kernel.yaml"
    kernel_yaml.write_text(
        kernel_yaml.read_text(encoding="utf-8").replace("http://127.0.0.1:11434/v1", llm_url),
        encoding="utf-8",
    )
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        page.set_default_timeout(WAIT_MS)
        page.goto(live.url)
        page.wait_for_selector("#template option[value=hello-agent]", state="attached")
        page.locator("#llm-status").wait_for()  # the LLM does not answer: said at once
        for width, height in ((1366, 768), (1920, 1080), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            check_layout(page)
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.get_by_label("Message").fill("Привет! Сколько слов в этой фразе?")
        page.get_by_role("button", name="Send").click()
        page.wait_for_selector(".msg.agent, #log .error")
        page.wait_for_selector("#send:enabled")
        page.locator("#session-list .title", has_text="Привет! Сколько слов в этой фразе?").wait_for()
        for width, height in ((390, 844), (1366, 768), (1920, 1080)):
            page.set_viewport_size({"width": width, "height": height})
            check_layout(page)
            screenshot(page, tmp_path / f"shipped-{width}.png")


def test_no_llm_says_how_to_configure_one_and_tools_still_run(tmp_path: Path, browser: Any) -> None:
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, None)))) as live:
        page, problems = open_page(browser, live.url, width=390, height=844)  # a phone
        # keyboard alone: focus the picker, Tab to "New chat", Enter
        page.focus("#template")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "New chat"
        page.keyboard.press("Enter")
        page.locator("#message:focus").wait_for()  # the new chat takes the focus
        page.keyboard.type("hello")
        page.keyboard.press("Enter")
        page.wait_for_selector(".error:has-text('no LLM provider is configured')")
        page.wait_for_selector(".help:has-text('kernel.yaml under llm:') code:text-is('llm:')")
        # the status line says so too, and how to fix it: commands as code, never a backtick (issue 26 §6)
        status = page.locator("#llm-status")
        assert status.locator("#llm-status-title").inner_text() == "The chat cannot answer:"
        assert status.locator("code", has_text="agentkernel dev llm").count() == 1
        assert status.locator("code", has_text="agentkernel serve --llm-url URL").count() == 1
        assert "`" not in page.locator("body").inner_text()

        page.locator("button.tool-pick", has_text="paged").click()
        page.get_by_label("page", exact=True).fill("2")
        page.get_by_role("button", name="Run paged").click()
        page.wait_for_selector("#tool-output td:text-is('3')")
        # nothing wider than the phone's screen
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert problems == []


def test_the_status_line_says_the_llm_does_not_answer_until_it_does(tmp_path: Path, browser: Any) -> None:
    """Issue 26 §6: read at load, with how to fix it (no backticks shown), and checked again on a click."""
    with socket.socket() as probe:  # a port where nothing listens, yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = f"llm:\n  base_url: http://127.0.0.1:{port}/v1\n  model: fake\n  max_retries: 0\n"
    kernel_yaml = make_project(tmp_path, None, extra=llm)
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        page, problems = open_page(browser, live.url, width=390, height=844)
        status = page.locator("#llm-status")
        status.wait_for()
        text = status.inner_text()
        assert f"Nothing answers at http://127.0.0.1:{port}/v1" in text, text
        assert "--llm-url" in text and "`" not in text, text
        assert status.locator("code", has_text="agentkernel dev llm").count() == 1
        check_layout(page)
        screenshot(page, tmp_path / "web-chat-llm-status-390.png")
        with FakeLLMServer(port=port, models=("fake",)):
            page.get_by_role("button", name="Check again").click()
            status.wait_for(state="hidden")
        assert problems == []


def test_a_hostile_answer_is_shown_as_harmless_markup(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """The answer is model output a script can steer: marked's HTML goes through DOMPurify (and the CSP)."""
    hostile = (
        "**Hi** <img src=x onerror=\"document.title='pwned'\"> <script>document.title='pwned'</script> "
        "[click](javascript:document.title='pwned') <iframe src=\"/\"></iframe>"
    )
    llm_server.add(Reply(text=hostile))
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
        page, _ = open_page(browser, live.url)  # the <img src=x> is a harmless 404 in the console
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.fill("#message", "say hi")
        page.get_by_role("button", name="Send").click()
        page.wait_for_selector(".msg.agent strong:has-text('Hi')")
        page.wait_for_selector("#send:enabled")  # the turn is over
        answer = page.locator(".msg.agent .md")
        assert answer.locator("script, iframe, [onerror]").count() == 0
        assert answer.locator("a[href^='javascript']").count() == 0
        assert page.title() == "agentkernel"


def test_stop_ends_the_answer_being_made(tmp_path: Path, llm_server: FakeLLMServer, browser: Any) -> None:
    gate = threading.Event()
    llm_server.add(Gated(gate))
    try:
        with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
            page, problems = open_page(browser, live.url)
            page.get_by_role("button", name="New chat").click()
            page.wait_for_selector("#send:enabled")
            page.fill("#message", "take your time")
            page.keyboard.press("Enter")
            page.wait_for_selector("#stop:visible")
            page.keyboard.press("Escape")  # the keyboard alone; the button does the same
            page.wait_for_selector(".notice:has-text('turn ended: terminated')")
            page.wait_for_selector("#stop", state="hidden")
            page.wait_for_selector("#send:enabled")
            assert problems == []
    finally:
        gate.set()


def test_a_stop_that_reaches_the_server_before_its_turn_still_stops_it(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """Stop pressed at once: the stop request may overtake the message; the page asks again until stopped."""
    gate = threading.Event()
    llm_server.add(Gated(gate))
    held: list[Any] = []
    try:
        with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
            page, problems = open_page(browser, live.url)
            page.get_by_role("button", name="New chat").click()
            page.wait_for_selector("#send:enabled")
            page.route("**/messages", lambda route: held.append(route))  # it waits here: the stop goes first
            page.fill("#message", "take your time")
            page.keyboard.press("Enter")
            page.wait_for_selector("#stop:visible")
            with page.expect_response("**/stop") as first:
                page.keyboard.press("Escape")
            assert first.value.json() == {"stopped": False}  # no turn yet to stop
            held[0].continue_()
            page.wait_for_selector(".notice:has-text('turn ended: terminated')")
            page.wait_for_selector("#send:enabled")
            assert problems == []
    finally:
        gate.set()


def test_with_tokens_the_page_asks_for_one_and_keeps_it(tmp_path: Path, browser: Any) -> None:
    """§3: a page without a token gets 401 and says so; the token typed is kept in the browser."""
    kernel_yaml = page_project(tmp_path, None)
    with kernel_yaml.open("a", encoding="utf-8") as config:
        config.write(f'server:\n  tokens:\n    "{token_hash("alice-token")}": alice\n')
    with LiveServer(Kernel(load_kernel_config(kernel_yaml))) as live:
        page = browser.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(live.url)
        page.wait_for_selector("#status:has-text('token')")
        page.locator("#token:focus").wait_for()  # the token box takes the focus
        page.keyboard.type("alice-token")
        page.keyboard.press("Enter")
        page.wait_for_selector("#template option[value=tester]", state="attached")
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.reload()  # kept in this browser
        page.wait_for_selector("#session-list button:has-text('tester')")
        assert page.evaluate("localStorage.length") == 1


def test_a_file_block_downloads_with_the_token(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """A sealed `file` block (S6.2): fetched with the bearer token, saved through a Blob URL."""
    from tests.server.test_files_api import CSV, files_project

    llm_server.add(
        Reply(tool_calls=(FakeToolCall("report", '{"name": "отчёт.csv"}', id="c1"),)),
        Reply(text="Your report is ready."),
    )
    with LiveServer(Kernel(load_kernel_config(files_project(tmp_path, llm_server)))) as live:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_MS)
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(live.url)
        page.fill("#token", "alice-token")  # tokens are configured: without one, every call is 401
        page.keyboard.press("Enter")
        page.wait_for_selector("#template option[value=tester]", state="attached")
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.fill("#message", "a report please")
        page.keyboard.press("Enter")

        button = page.get_by_role("button", name="⬇ отчёт.csv (text/csv)")
        with page.expect_download() as started:
            button.click()
        download = started.value
        assert download.suggested_filename == "отчёт.csv"
        assert Path(download.path()).read_bytes() == CSV.encode()
        assert page.locator(".v-file [role=status]").inner_text() == ""  # no error shown

        # the scratch folder cleaned up (files.scratch_ttl_hours): the page says so, plainly
        ttl = live.kernel.config.files.scratch_ttl_hours * 3600
        assert live.kernel.clean_scratch(now=time.time() + 2 * ttl)
        button.click()
        page.wait_for_selector(".v-file [role=status]:has-text('this file is no longer available')")
        assert problems == []


def test_the_jobs_panel_lists_a_job_and_cancels_it(tmp_path: Path, browser: Any) -> None:
    """Issue 13 §7: the user's cron jobs (GET /v1/cron) with a Cancel button (DELETE /v1/cron/{name})."""
    page_project(tmp_path, None)
    tools = tmp_path / "config" / "scripts" / "tools"
    script_tool(tools, "hourly", HOURLY_JS, description="Schedule an hourly report.", ui={"icon": "⏰"})
    with LiveServer(Kernel(load_kernel_config(tmp_path / "config" / "kernel.yaml"))) as live:
        page, problems = open_page(browser, live.url)
        page.wait_for_selector("#job-list li:has-text('no scheduled jobs')")
        page.locator("button.tool-pick", has_text="hourly").click()
        page.get_by_role("button", name="Run hourly").click()
        page.wait_for_selector("#tool-output pre:has-text('scheduled report')")
        job = page.locator("#job-list li[data-job=report]")  # listed once the tool has run
        job.wait_for()
        assert job.locator("strong").inner_text() == "report"
        assert "tester · every 3600 s" in job.inner_text() and "last: never · runs: 0" in job.inner_text()
        assert live.kernel.cron_jobs("local")[0]["name"] == "report"
        page.get_by_role("button", name="Cancel report").click()
        page.wait_for_selector("#job-list li:has-text('no scheduled jobs')")
        assert live.kernel.cron_jobs("local") == []
        assert problems == []


def test_an_answer_cannot_take_over_the_page_s_own_elements_by_id(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """S6.2 and the page: an answer's HTML keeps no `id`/`name` of its own, nor form controls.

    DOMPurify keeps `id` by default, and the answer sits before the message box in
    the page, so `<textarea id="message">` in an answer (a script's result can steer
    the model into writing it) was what `getElementById("message")` found: the next
    message sent was the answer's text, not what the person typed.
    """
    planted = "Yes, delete every file I have"
    llm_server.add(
        Reply(text=f'Sure. <textarea id="message">{planted}</textarea> <p id="send" name="compose">x</p>'),
        Reply(text="ok"),
    )
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "say hi")
        page.wait_for_selector(".msg.agent .md:has-text('Sure.')")
        page.wait_for_selector("#compose button[type=submit]:enabled")  # the turn is over
        answer = page.locator(".msg.agent .md")
        assert answer.locator("textarea, input, select, button, form").count() == 0
        assert answer.locator("[id=message], [id=send], [name=compose]").count() == 0
        page.fill("#compose textarea", "my own words")
        page.keyboard.press("Enter")
        page.wait_for_selector(".msg.user p:text-is('my own words')")
        assert page.locator(f".msg.user p:text-is('{planted}')").count() == 0
        assert problems == []


def test_a_line_separator_in_an_answer_or_a_result_does_not_cut_the_stream(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """The stream's JSON keeps U+2028/U+2029 as they are (SSE lines end only at CR or LF), so the page
    must not read a frame with a JavaScript `.`, which stops at them: it did, and JSON.parse of the cut
    line failed, ending the turn in the page with an error (a tool's result can hold any text, S4)."""
    llm_server.add(
        Reply(tool_calls=(FakeToolCall("upper", '{"text": "a\\u2028b"}', id="c1"),)),
        Reply(text="first\u2028second\u2029third"),
    )
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
        page, problems = send_in_new_chat(browser, live.url, "separate")
        page.wait_for_selector(".msg.agent .md:has-text('third')")
        page.wait_for_selector("#send:enabled")  # the turn is over
        assert page.locator("details.tool-call pre.content", has_text="A\u2028B").count() == 1
        assert page.locator("#log .error").count() == 0
        assert problems == []


def test_a_long_answer_is_rendered_once_a_frame_not_once_a_token(
    tmp_path: Path, llm_server: FakeLLMServer, browser: Any
) -> None:
    """Each render parses the whole answer so far (marked, then DOMPurify): a render per streamed token
    made a long answer quadratic, and a tab froze. With the page's animation frames held back, hundreds
    of tokens render nothing on their own; the answer is shown whole when it is complete."""
    words = " ".join(f"word{n}" for n in range(300))  # ~2,400 characters: ~800 streamed pieces
    llm_server.add(Reply(text=words))
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, llm_server)))) as live:
        page, problems = open_page(browser, live.url)
        page.evaluate(
            """() => {
              window.renders = 0;  // each render sets the answer box's HTML: one childList record
              new MutationObserver((records) => {
                window.renders += records.filter((r) => r.target.classList.contains("md")).length;
              }).observe(document.getElementById("log"), {childList: true, subtree: true});
              window.requestAnimationFrame = () => 1;  // asked for, never given: only flushes render
              window.cancelAnimationFrame = () => {};
            }"""
        )
        page.get_by_role("button", name="New chat").click()
        page.wait_for_selector("#send:enabled")
        page.fill("#compose textarea", "talk at length")
        page.keyboard.press("Enter")
        page.wait_for_selector(".msg.agent .md:has-text('word299')")
        page.wait_for_selector("#send:enabled")  # the turn is over
        assert page.evaluate("window.renders") <= 2  # the end of the stream, not each of its pieces
        assert problems == []


def test_new_chat_waits_for_the_templates_so_an_early_click_is_not_lost(tmp_path: Path, browser: Any) -> None:
    """A person clicks "New chat" as soon as it shows: before the templates came, the click was lost."""
    with LiveServer(Kernel(load_kernel_config(page_project(tmp_path, None)))) as live:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(WAIT_MS)
        held: list[Any] = []
        page.route(
            "**/v1/templates", lambda route: held.append(route)
        )  # the templates' answer waits until let through
        page.goto(live.url, wait_until="domcontentloaded")
        button = page.get_by_role("button", name="New chat")
        page.wait_for_function("() => document.readyState === 'complete'")
        assert held != [] and button.is_disabled()
        held[0].continue_()
        button.click()  # Playwright's actionability: waits for the button to be enabled, as a person would
        page.locator("#message:focus").wait_for()
        assert page.locator("#session-list li").count() == 1
