"""JSON Schemas never fetch: a `$ref` that leaves the schema is refused, never retrieved.

jsonschema, given no registry, still fetches a `$ref` to a URL (deprecated,
with a warning) through urllib: no timeout, and none of the kernel's
address rules (S8), so `169.254.169.254` and the kernel's own network are
reachable. Schemas reach validators from where the kernel trusts nothing:
a script's `llm_json` schema (S9), a sub-agent's `output_schema` (S17), an
outside MCP server's input schema (S23.7). So every validator built from
such a schema gets `local_refs()`, a registry that refuses to retrieve: a
reference inside the schema (`#/$defs/x`, or a `$id` the schema itself
declares) resolves as always; any other fails without a byte sent. And
`remote_refs` finds those references up front, so the schema is refused
when it is given, naming the reference, rather than failing mid-call.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urldefrag, urljoin

if TYPE_CHECKING:
    from referencing import Registry

MAX_SHOWN_REFS = 3


def _refuse(uri: str) -> NoReturn:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs fields, unseen by mypy


@functools.cache
def local_refs() -> Registry[Any]:
    """The registry every validator of a schema from outside gets: it resolves only inside the schema.

    Made on first use: `referencing` is imported only by a command that validates through jsonschema.
    """
    from referencing import Registry

    return Registry(retrieve=_refuse)  # type: ignore[call-arg]


def _nodes(schema: Any, base: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object in `schema` with the base URI it sits under (`$id`s change it)."""
    stack: list[tuple[Any, str]] = [(schema, base)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            declared = node.get("$id")
            if isinstance(declared, str):
                where = urldefrag(urljoin(where, declared))[0]
            yield node, where
            stack.extend((child, where) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, where) for child in node)


def _specifications() -> Any:
    """The JSON Schema metaschemas, by their URIs (imported only when a reference leaves its schema)."""
    from jsonschema_specifications import REGISTRY

    return REGISTRY


def remote_refs(schema: Any) -> list[str]:
    """The `$ref`/`$dynamicRef` values of `schema` that point at a document it does not hold itself
    (the JSON Schema metaschemas, which the kernel holds, excepted)."""
    nodes = list(_nodes(schema, ""))
    held = {where for _, where in nodes}
    remote: list[str] = []
    for node, where in nodes:
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            document = urldefrag(urljoin(where, ref))[0]
            if document not in held and ref not in remote and document not in _specifications():
                remote.append(ref)
    return remote


def remote_refs_problem(schema: Any) -> str | None:
    """`$ref 'http://…' points outside the schema; …` or None: for an error naming what is refused."""
    refs = remote_refs(schema)
    if not refs:
        return None
    shown = ", ".join(repr(r) for r in refs[:MAX_SHOWN_REFS])
    more = f" and {len(refs) - MAX_SHOWN_REFS} more" if len(refs) > MAX_SHOWN_REFS else ""
    return (
        f"$ref {shown}{more} points outside the schema; the kernel never fetches schemas "
        "(put the definition under $defs and refer to it as '#/$defs/…')"
    )


__all__ = ["local_refs", "remote_refs", "remote_refs_problem"]
