"""Reading a YAML file together with the line of every key in it.

Errors about a YAML file should read like a compiler's, `file:line: field:
what is wrong`, so the file is composed into nodes first (which carry their
positions), each key path is mapped to its line, and only then is the value
built. The same pass refuses a key given twice in one mapping, which YAML
parsers otherwise settle silently by keeping the last one.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from agentkernel.errors import ConfigError

KeyPath = tuple[str | int, ...]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_EXPANDED_VALUES = 100_000  # a config has hundreds; "billion laughs" aliases have billions


def dotted(path: Iterable[str | int]) -> str:
    """`a.b[0].c`: a key path as the error texts show it."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def undotted(text: str) -> KeyPath:
    """The key path `dotted` wrote: `a.b[0].c` → ("a", "b", 0, "c")."""
    return tuple(int(index) if index else key for key, index in _STEP.findall(text))


@dataclass(frozen=True)
class YamlLines:
    """The 1-based line of each key and sequence item of a document, by key path."""

    by_path: Mapping[KeyPath, int] = field(default_factory=dict)

    def of(self, *path: str | int) -> int | None:
        """The line of `path`, else of its nearest known ancestor; None at the top."""
        key: KeyPath = tuple(path)
        while key:
            line = self.by_path.get(key)
            if line is not None:
                return line
            key = key[:-1]
        return None

    def of_reason(self, reason: str) -> int | None:
        """The line of the field a `field.path: what is wrong` text starts with."""
        field_path, colon, _ = reason.partition(": ")
        return self.of(*undotted(field_path)) if colon and " " not in field_path else None


NO_LINES = YamlLines()


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc


def _syntax_error(path: Path, exc: yaml.MarkedYAMLError) -> ConfigError:
    """`bad YAML: <problem> (column C), <context> that starts at line L, column C`."""
    mark, context_mark = exc.problem_mark, exc.context_mark
    text = f"bad YAML: {exc.problem or exc.context or 'syntax error'}"
    if mark is not None:
        text += f" (column {mark.column + 1})"
    if exc.context and exc.problem:
        text += f", {exc.context}"
        if context_mark is not None:
            text += f" that starts at line {context_mark.line + 1}, column {context_mark.column + 1}"
    at = mark or context_mark
    return ConfigError(path, text, at.line + 1 if at is not None else None)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Refuse aliases that expand into a huge value (or into themselves) before anything builds it.

    Anchors make a tree a graph: nine lines of nested `*a` aliases stand for
    a billion values, which building, validating or passing the value to a
    script as JSON would hang on. Counting each node once (memoised,
    iteratively) costs time linear in the file.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:
        node, finished = todo.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_EXPANDED_VALUES:
                where = node.start_mark.line + 1
                reason = f"its aliases expand to more than {MAX_EXPANDED_VALUES:,} values"
                raise ConfigError(path, reason, where)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise ConfigError(path, "an alias refers to a value that contains it", node.start_mark.line + 1)
        open_nodes.add(key)
        todo.append((node, True))
        todo.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _key_lines(path: Path, root: yaml.Node | None) -> YamlLines:
    """Walk the node tree (iteratively: depth is the author's choice) and map every key."""
    lines: dict[KeyPath, int] = {}
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, KeyPath]] = [(root, ())] if root is not None else []
    while todo:
        node, at = todo.pop()
        if id(node) in seen:  # an alias: its keys were mapped where the anchor is
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[(*at, index)] = item.start_mark.line + 1
                todo.append((item, (*at, index)))
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                    continue
                line = key.start_mark.line + 1
                if key.value in first:
                    reason = f"{dotted((*at, key.value))}: key given twice (first on line {first[key.value]})"
                    raise ConfigError(path, reason, line)
                first[key.value] = line
                lines[(*at, key.value)] = line
                todo.append((value, (*at, key.value)))
    return YamlLines(lines)


def _may_expand(text: str) -> bool:
    """Whether a document of `text` may hold more than MAX_EXPANDED_VALUES values or any alias.

    Without an alias (`*name`) every value is written in the text, and n
    characters write far fewer than 4n values: a short file without a `*`
    needs no count (every tool's YAML, read at each start).
    """
    return "*" in text or 4 * len(text) >= MAX_EXPANDED_VALUES


def load_yaml(path: Path) -> tuple[object, YamlLines]:
    """Parse one YAML file into its value and its key lines; every failure is a ConfigError."""
    text = _read_text(path)
    stream = io.StringIO(text)
    stream.name = str(path)  # the parser names the file in its marks
    loader = _Loader(stream)
    try:
        root = loader.get_single_node()
        if root is not None and _may_expand(text):
            _check_expansion(path, root)
        lines = _key_lines(path, root)
        return (loader.construct_document(root) if root is not None else None), lines
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(path, exc) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(path, f"bad YAML: {exc}") from exc
    finally:
        loader.dispose()


__all__ = ["NO_LINES", "KeyPath", "YamlLines", "dotted", "load_yaml", "undotted"]
