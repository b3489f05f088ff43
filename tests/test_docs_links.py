"""Every link of the README and docs/*.md resolves inside the repository; every S-number has its anchor.

A newcomer who follows a link must land on something: a relative link names
a file or folder of this repository, and a `file.md#fragment` names an
anchor that file defines, as GitHub renders it (a heading's slug, or an
explicit `<a id="…">` / `<a name="…">`). No text may send the reader to the
folder beside the repository, where the project's private notes once lived
(the contract is restated in docs/contract.md). And every contract number
cited anywhere (`S7.6`, `S23`) is an anchor of docs/contract.md (`#s7-6`,
`#s23`), so a citation can always be looked up.

Markdown is parsed with markdown-it-py (CommonMark plus tables, as GitHub
reads it), so links inside code blocks and code spans are not links.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

REPO = Path(__file__).resolve().parent.parent
CONTRACT = REPO / "docs" / "contract.md"
OUTSIDE = "../" + "shared/"  # spelt in two parts so that this file does not mention it
DOCUMENTS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
CITING_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".js", ".mjs", ".cjs", ".rhai", ".toml"}

_PARSER = MarkdownIt("commonmark").enable("table")
_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_HREF = re.compile(r"""<a\s[^>]*?\bhref\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_NOT_IN_SLUG = re.compile(r"[^\w\- ]")  # GitHub keeps letters, digits, `_`, `-` and spaces
_CITATION = re.compile(r"\bS([1-9][0-9]?)(?:\.([1-9][0-9]?))?\b")


@dataclass(frozen=True)
class Link:
    """One link target as written, with the line it is on."""

    source: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.source.relative_to(REPO)}:{self.line}: {self.target}"


def github_slug(text: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`."""
    return _NOT_IN_SLUG.sub("", text.lower()).replace(" ", "-")


def _inline_text(token: Token) -> str:
    """The text a heading shows: its words and code spans, without markup or HTML tags."""
    return "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every fragment that `path#fragment` can name: heading slugs (numbered when repeated) and `<a id>`s."""
    tokens = _PARSER.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            slug = github_slug(_inline_text(tokens[index + 1]).strip())
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    for token in _walk(tokens):
        if token.type in ("html_inline", "html_block"):
            found.update(_ANCHOR.findall(token.content))
    return frozenset(found)


def links(path: Path) -> list[Link]:
    """Every link and image target of a Markdown file, HTML `<a href>` included."""
    tokens = _PARSER.parse(path.read_text(encoding="utf-8"))
    found: list[Link] = []
    line = 0
    for token in tokens:
        if token.map is not None:
            line = token.map[0] + 1
        for item in _walk([token]):
            if item.type == "link_open":
                found.append(Link(path, line, str(item.attrGet("href"))))
            elif item.type == "image":
                found.append(Link(path, line, str(item.attrGet("src"))))
            elif item.type in ("html_inline", "html_block"):
                found.extend(Link(path, line, href) for href in _HREF.findall(item.content))
    return found


def link_problem(link: Link) -> str | None:
    """Why a link does not resolve inside the repository, or None when it does."""
    parts = urlsplit(link.target)
    if parts.scheme or parts.netloc:
        return None  # a web address: not this test's business
    target = (link.source.parent / unquote(parts.path)).resolve() if parts.path else link.source
    if not target.is_relative_to(REPO):
        return "leads outside the repository"
    if not target.exists():
        return f"no such file or folder: {target.relative_to(REPO)}"
    if parts.fragment and target.suffix == ".md" and unquote(parts.fragment) not in anchors(target):
        return f"{target.relative_to(REPO)} defines no anchor #{parts.fragment}"
    return None


def tracked_files() -> list[Path]:
    """The repository's files, new ones included, as git sees them (the whole tree when git is not there)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return [
            p for p in REPO.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts
        ]
    return [REPO / name for name in listed if name and (REPO / name).is_file()]


# -- the tests -----------------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves(document: Path) -> None:
    problems = [f"{link}: {why}" for link in links(document) if (why := link_problem(link)) is not None]
    assert problems == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_text_points_outside_the_repository(document: Path) -> None:
    lines = document.read_text(encoding="utf-8").splitlines()
    mentions = [f"{document.name}:{n}: {text.strip()}" for n, text in enumerate(lines, 1) if OUTSIDE in text]
    assert mentions == []


def test_no_source_file_points_outside_the_repository() -> None:
    """Docstrings, comments, tests, benchmarks and configs cite docs/contract.md, not the folder beside us."""
    mentions = [
        str(path.relative_to(REPO))
        for path in tracked_files()
        if path.suffix in CITING_SUFFIXES and OUTSIDE in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert mentions == []


def test_every_cited_contract_number_has_an_anchor() -> None:
    """`S7.6` anywhere in the repository can be looked up as docs/contract.md#s7-6."""
    defined = anchors(CONTRACT)
    missing: dict[str, str] = {}
    for path in tracked_files():
        if path.suffix not in CITING_SUFFIXES:
            continue
        for match in _CITATION.finditer(path.read_text(encoding="utf-8", errors="replace")):
            anchor = f"s{match[1]}" + (f"-{match[2]}" if match[2] else "")
            if anchor not in defined:
                missing.setdefault(match[0], str(path.relative_to(REPO)))
    assert missing == {}, "cited contract numbers without an anchor in docs/contract.md"


def test_the_contract_covers_s1_to_s23() -> None:
    defined = anchors(CONTRACT)
    assert [n for n in range(1, 24) if f"s{n}" not in defined] == []


# -- the checker itself ----------------------------------------------------------------


def test_slugs_follow_github() -> None:
    assert github_slug("4. The LLM: llm: in kernel.yaml") == "4-the-llm-llm-in-kernelyaml"
    assert (
        github_slug("8.1 caller(): who the script runs for (S15)") == "81-caller-who-the-script-runs-for-s15"
    )
    assert github_slug("7. hook_tool and the shipped hooks") == "7-hook_tool-and-the-shipped-hooks"
    assert github_slug("S7 — Hooks") == "s7--hooks"


def test_broken_links_and_anchors_are_caught(tmp_path: Path) -> None:
    """The checker fails on a missing file, a missing anchor and a path out of the repository."""
    page = REPO / "docs" / "contract.md"
    fine = [
        Link(page, 1, "scripts.md#2-declaring-a-tool"),
        Link(page, 1, "#s7-6"),
        Link(page, 1, "../tests/"),
    ]
    assert [link_problem(link) for link in fine] == [None, None, None]
    assert link_problem(Link(page, 1, "https://rhai.rs/book/")) is None
    assert "no such file" in str(link_problem(Link(page, 1, "nowhere.md")))
    assert "defines no anchor #s99" in str(link_problem(Link(page, 1, "contract.md#s99")))
    assert "defines no anchor #nope" in str(link_problem(Link(page, 1, "#nope")))
    assert "outside the repository" in str(link_problem(Link(page, 1, "../../SPEC.md")))
    sample = tmp_path / "sample.md"
    sample.write_text(
        '# Title\n\n## Title\n\n<a id="s7-6"></a>\n\n```md\n[not a link](gone.md)\n```\n\n'
        "`[nor this](gone.md)` but [this](other.md#x) and ![this](pic.png).\n",
        encoding="utf-8",
    )
    assert anchors(sample) == {"title", "title-1", "s7-6"}
    assert [link.target for link in links(sample)] == ["other.md#x", "pic.png"]
