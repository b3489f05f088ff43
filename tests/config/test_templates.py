"""Agent templates: loading, validation and references (S23.1, S2.5)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.templates import (
    DEFAULT_MAX_TURNS,
    ModelSettings,
    TemplateSpec,
    check_references,
    load_template,
    load_templates,
)
from agentkernel.errors import ConfigError
from agentkernel.util.folder_watch import RESCAN_SECS
from tests.conftest import REPO

SHIPPED = REPO / "config" / "templates"
MINIMAL = "name: t\ninstructions: be brief\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the shipped templates ---------------------------------------------------------------


def test_shipped_templates_load_without_problems() -> None:
    templates, problems = load_templates(SHIPPED)
    assert problems == []
    assert set(templates) == {"hello-agent", "review-agent"}
    hello = templates["hello-agent"]
    assert hello.tools == (
        "text_stats",
        "text_stats_rhai",
        "wordcount",
        "currency",
        "save_note",
        "clear_notes",
    )
    assert hello.instructions.strip()
    assert hello.yaml_path == (SHIPPED / "hello-agent.yaml").resolve()
    assert templates["review-agent"].tools == ("text_stats", "wordcount")


def test_shipped_templates_name_only_shipped_tools_and_hooks() -> None:
    with Kernel(load_kernel_config(REPO / "config" / "kernel.yaml")) as kernel:
        assert kernel.problems() == []
        assert {t.name for t in kernel.list_templates()} >= {"hello-agent", "review-agent"}


# -- one good file -------------------------------------------------------------------------


def test_every_field_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "full.yaml",
        "name: full\ndescription: d\ninstructions: do it\n"
        "model: {name: gpt-x, max_tokens: 300, temperature: 1}\n"
        "tools: [a, b]\nhooks: [h]\nbudget: {tokens: 500}\nmax_turns: 3\n",
    )
    spec = load_template(path)
    assert spec == TemplateSpec(
        name="full",
        instructions="do it",
        description="d",
        model=ModelSettings(name="gpt-x", max_tokens=300, temperature=1.0),
        tools=("a", "b"),
        hooks=("h",),
        budget_tokens=500,
        max_turns=3,
        yaml_path=path.resolve(),
        raw=spec.raw,
    )
    assert isinstance(spec.model.temperature, float)
    assert spec.raw["budget"] == {"tokens": 500}


def test_defaults_for_omitted_fields(tmp_path: Path) -> None:
    spec = load_template(write(tmp_path, "t.yaml", MINIMAL))
    assert spec.model == ModelSettings()  # the kernel's default model
    assert spec.tools == () and spec.hooks == ()
    assert spec.budget_tokens is None  # unlimited
    assert spec.max_turns == DEFAULT_MAX_TURNS
    assert spec.description == ""


# -- bad files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("name: [\n", "bad YAML"),
        ("", "expected a mapping with `name` and `instructions`, got an empty file"),
        ("- a\n", "got a list"),
        ("instructions: x\n", "'name' is a required property"),
        ("name: t\n", "'instructions' is a required property"),
        (MINIMAL + "toolz: [a]\n", "unknown key 'toolz' (allowed: budget, description, hooks, "),
        (
            MINIMAL + "model: {nme: x}\n",
            "model: unknown key 'nme' (allowed: max_tokens, name, provider, providers, temperature)",
        ),
        (MINIMAL + "budget: {tokens: 5, usd: 1}\n", "budget: unknown key 'usd' (allowed: tokens)"),
        ("name: 'a b'\ninstructions: x\n", "name: 'a b' does not match"),
        ("name: t\ninstructions: ''\n", "instructions: '' should be non-empty"),
        (MINIMAL + "tools: text_stats\n", "tools: 'text_stats' is not of type 'array'"),
        (MINIMAL + "tools: [a, 3]\n", "tools[1]: 3 is not of type 'string'"),
        (MINIMAL + "tools: [a, a]\n", "tools: ['a', 'a'] has non-unique elements"),
        (MINIMAL + "tools: [a, '*']\n", "tools[1]: '*' is not allowed; list each tool by name"),
        (MINIMAL + "hooks: ['*']\n", "hooks[0]: '*' is not allowed; list each hook by name"),
        (MINIMAL + "hooks: {a: 1}\n", "hooks: {'a': 1} is not of type 'array'"),
        (MINIMAL + "model: {max_tokens: many}\n", "model.max_tokens: 'many' is not of type 'integer'"),
        (MINIMAL + "model: {max_tokens: 0}\n", "model.max_tokens: 0 is less than the minimum of 1"),
        (MINIMAL + "model: {temperature: hot}\n", "model.temperature: 'hot' is not of type 'number'"),
        (MINIMAL + "model: {temperature: true}\n", "model.temperature: True is not of type 'number'"),
        (MINIMAL + "model: gpt\n", "model: 'gpt' is not of type 'object'"),
        (MINIMAL + "budget: 100\n", "budget: 100 is not of type 'object'"),
        (MINIMAL + "budget: {}\n", "budget: 'tokens' is a required property"),
        (MINIMAL + "budget: {tokens: 1.5}\n", "budget.tokens: 1.5 is not of type 'integer'"),
        (MINIMAL + "budget: {tokens: 0}\n", "budget.tokens: 0 is less than the minimum of 1"),
        (MINIMAL + "max_turns: 0\n", "max_turns: 0 is less than the minimum of 1"),
        (MINIMAL + "max_turns: '8'\n", "max_turns: '8' is not of type 'integer'"),
    ],
)
def test_bad_template_names_file_and_field(tmp_path: Path, text: str, reason: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_template(path)
    assert caught.value.path == str(path)
    assert reason in caught.value.reason


def test_a_bad_file_is_a_problem_and_the_others_still_load(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", MINIMAL)
    bad = write(tmp_path, "bad.yml", "name: u\ninstructions: x\nmax_turns: -1\n")
    templates, problems = load_templates(tmp_path)
    assert list(templates) == ["t"]
    assert [(p.path, p.reason) for p in problems] == [(bad, "max_turns: -1 is less than the minimum of 1")]
    assert str(problems[0]).startswith(f"{bad}:3: max_turns:")


def test_two_files_claiming_a_name_are_both_refused(tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", MINIMAL)
    second = write(tmp_path, "b.yaml", MINIMAL.replace("be brief", "other"))
    templates, problems = load_templates(tmp_path)
    assert templates == {}
    assert [(p.path, p.line, p.reason) for p in problems] == [
        (first, 1, "name: 't' is also defined in b.yaml; rename one of them"),
        (second, 1, "name: 't' is also defined in a.yaml; rename one of them"),
    ]


def test_folder_scan_skips_other_files_subfolders_and_missing_folders(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", MINIMAL)
    write(tmp_path, "notes.txt", "not a template")
    (tmp_path / "drafts").mkdir()
    write(tmp_path / "drafts", "d.yaml", "broken: [")
    templates, problems = load_templates(tmp_path)
    assert list(templates) == ["t"] and problems == []
    assert load_templates(tmp_path / "absent") == ({}, [])


def test_yaml_that_cannot_become_json_is_refused(tmp_path: Path) -> None:
    recursive = write(tmp_path, "t.yaml", MINIMAL + "description: &d [*d]\n")
    with pytest.raises(ConfigError, match="an alias refers to a value that contains it"):
        load_template(recursive)
    not_json = write(tmp_path, "u.yaml", MINIMAL + "description: .nan\n")
    with pytest.raises(ConfigError, match="cannot be passed to a script as JSON"):
        load_template(not_json)


# -- references -------------------------------------------------------------------------------


def test_unknown_tool_and_hook_are_named_with_their_index(tmp_path: Path) -> None:
    path = write(
        tmp_path, "hello.yaml", "name: hello-agent\ninstructions: x\ntools: [a, nope]\nhooks: [gone]\n"
    )
    templates, _ = load_templates(tmp_path)
    problems = check_references(templates, ["b", "a"], ["audit"])
    assert [p.path for p in problems] == [path.resolve(), path.resolve()]
    assert [p.reason for p in problems] == [
        "template hello-agent: tools[1]: unknown tool 'nope' (known: a, b)",
        "template hello-agent: hooks[0]: unknown hook 'gone' (known: audit)",
    ]


def test_unknown_name_with_nothing_loaded_says_none() -> None:
    template = TemplateSpec(name="t", instructions="x", hooks=("audit",))
    (problem,) = check_references({"t": template}, [], [])
    assert problem.reason == "template t: hooks[0]: unknown hook 'audit' (known: none)"
    assert problem.path == Path("t")  # built in code: no file to name


def test_a_long_known_list_is_shortened() -> None:
    template = TemplateSpec(name="t", instructions="x", tools=("zz",))
    (problem,) = check_references({"t": template}, [f"tool{i:02}" for i in range(25)], [])
    assert problem.reason.endswith("tool19, … and 5 more)")


def test_known_references_give_no_problems() -> None:
    template = TemplateSpec(name="t", instructions="x", tools=("a",), hooks=("h",))
    assert check_references({"t": template}, {"a": 1, "b": 2}, ("h",)) == []


def test_several_unknown_keys_are_all_named(tmp_path: Path) -> None:
    path = write(tmp_path, "t.yaml", MINIMAL + "zeta: 1\nalpha: 2\n")
    with pytest.raises(ConfigError, match=r"^.*: unknown keys 'alpha', 'zeta' \(allowed: budget, "):
        load_template(path)


def test_unknown_references_carry_their_line_and_a_suggestion(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", MINIMAL + "tools:\n  - text_stats\n  - wordcont\nhooks: [audit]\n")
    templates, _ = load_templates(tmp_path)
    problems = check_references(templates, ["text_stats", "wordcount"], [])
    assert [(p.line, p.reason) for p in problems] == [
        (
            5,
            "template t: tools[1]: unknown tool 'wordcont' (known: text_stats, wordcount);"
            " did you mean 'wordcount'?",
        ),
        (6, "template t: hooks[0]: unknown hook 'audit' (known: none)"),
    ]


# -- reading a folder again: only what changed is parsed (S2.4) ---------------------------------------


def test_a_folder_read_again_parses_only_the_files_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkernel.config import templates as module

    parsed: list[str] = []

    def counting(path: Path) -> TemplateSpec:
        parsed.append(path.name)
        return load_template(path)

    monkeypatch.setattr(module, "load_template", counting)
    write(tmp_path, "a.yaml", "name: a\ninstructions: first\n")
    write(tmp_path, "b.yaml", "name: b\ninstructions: bee\n")
    folder = module.TemplateFolder(tmp_path)
    assert sorted(folder.load()[0]) == ["a", "b"] and sorted(parsed) == ["a.yaml", "b.yaml"]
    parsed.clear()
    assert sorted(folder.load()[0]) == ["a", "b"] and parsed == []  # nothing changed: nothing parsed
    replacement = write(tmp_path, "a.new", "name: a\ninstructions: other\n")  # same size, same time…
    stat = (tmp_path / "a.yaml").stat()
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    replacement.replace(tmp_path / "a.yaml")  # …saved as a new file renamed over the old (a new inode)
    templates, problems = folder.load()
    assert parsed == ["a.yaml"] and templates["a"].instructions == "other" and problems == []
    write(tmp_path, "b.yaml", "name: b\ninstructions: [not, text]\n")
    (tmp_path / "c.yaml").write_text("name: c\ninstructions: new\n", encoding="utf-8")
    parsed.clear()
    templates, problems = folder.load()
    assert sorted(parsed) == ["b.yaml", "c.yaml"] and sorted(templates) == ["a", "c"]
    assert [p.path.name for p in problems] == ["b.yaml"]
    (tmp_path / "c.yaml").unlink()
    assert sorted(folder.load()[0]) == ["a"]


def test_a_lookup_while_nothing_changed_asks_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder's watch vouches for the last look: no listing, no `stat`, until a change or RESCAN_SECS;
    a change made before a lookup starts is seen by it (S2.4)."""
    from agentkernel.config import templates as module

    looks: list[Path] = []

    def counting(folder: Path) -> list[Path]:
        looks.append(folder)
        return listed(folder)

    listed = module._template_files
    monkeypatch.setattr(module, "_template_files", counting)
    write(tmp_path, "a.yaml", "name: a\ninstructions: first\n")
    folder = module.TemplateFolder(tmp_path)
    try:
        assert sorted(folder.load()[0]) == ["a"] and len(looks) == 1
        for _ in range(50):
            assert sorted(folder.load()[0]) == ["a"]
        assert len(looks) == 1  # watched: nothing asked of the files
        write(tmp_path, "b.yaml", "name: b\ninstructions: bee\n")
        assert sorted(folder.load()[0]) == ["a", "b"] and len(looks) == 2  # the change seen at once
        assert sorted(folder.load()[0]) == ["a", "b"] and len(looks) == 2
        folder._looked_at -= RESCAN_SECS  # as if a second went by: looked at again, change or not
        assert sorted(folder.load()[0]) == ["a", "b"] and len(looks) == 3
    finally:
        folder.close()
    assert sorted(folder.load()[0]) == ["a", "b"] and sorted(folder.load()[0]) == ["a", "b"]
    assert len(looks) == 5  # unwatched: every lookup looks


def test_a_missing_template_folder_is_looked_for_at_every_lookup(tmp_path: Path) -> None:
    from agentkernel.config import templates as module

    folder = module.TemplateFolder(tmp_path / "templates")
    try:
        assert folder.load() == ({}, [])
        (tmp_path / "templates").mkdir()
        write(tmp_path / "templates", "a.yaml", "name: a\ninstructions: first\n")
        assert sorted(folder.load()[0]) == ["a"]  # no watch could be had: the folder is looked at again
    finally:
        folder.close()
