"""PyYAML's part of reading a YAML file: its nodes, the line of every key, then its value.

Imported only when a file's text is not in the parse cache (yaml_cache.py),
so a command whose YAML files are unchanged never loads PyYAML. The text is
composed into nodes first (which carry their positions), each key path is
mapped to its line, and only then is the value built; the same pass refuses
a key given twice in one mapping, and aliases that expand without end.
"""

from __future__ import annotations

import io
from pathlib import Path

import yaml

from agentkernel.errors import ConfigError
from agentkernel.util.key_paths import KeyPath, dotted

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
MAX_EXPANDED_VALUES = 100_000  # a config has hundreds; "billion laughs" aliases have billions


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


def _key_lines(path: Path, root: yaml.Node | None) -> dict[KeyPath, int]:
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
    return lines


def _may_expand(text: str) -> bool:
    """Whether a document of `text` may hold more than MAX_EXPANDED_VALUES values or any alias.

    Without an alias (`*name`) every value is written in the text, and n
    characters write far fewer than 4n values: a short file without a `*`
    needs no count (every tool's YAML, read at each start).
    """
    return "*" in text or 4 * len(text) >= MAX_EXPANDED_VALUES


def parse_yaml(path: Path, text: str) -> tuple[object, dict[KeyPath, int]]:
    """The value of `text` (read from `path`) and the line of each key path; a failure is a ConfigError."""
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


__all__ = ["MAX_EXPANDED_VALUES", "parse_yaml"]
