"""Refusing an MCP server loop: a template whose MCP server serves, through any path, that template.

A template may list `agentkernel mcp serve --template X` among X's own
`mcp_servers:` (or `agentkernel serve`'s own `/mcp/X`). Listing X's tools
would then start (or ask) a server that lists X's tools, which starts the
next one, each waiting on the next until the 30 s start timeout, and every
level a process or a request held meanwhile.

So what starts an outside server tells it which templates it is needed
for: an entry per template (of a project folder) that declares the
server, after the entries it was itself started with. They travel in the
environment of a stdio server (`AGENTKERNEL_MCP_CHAIN`) and in a header to
an HTTP one (`Agentkernel-Mcp-Chain`). `agentkernel mcp serve --template X`
and `/mcp/X` refuse at once, saying why, when X of their project is in the
chain. Entries are hashes, so an outside server learns nothing of the
project's paths or templates from them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

CHAIN_VARIABLE = "AGENTKERNEL_MCP_CHAIN"
CHAIN_HEADER = "agentkernel-mcp-chain"
MAX_CHAIN = 64  # entries: deeper than any design, and a header that stays ~1 KB
_ENTRY_CHARS = 16


def template_entry(root: Path | None, template: str) -> str:
    """The chain's entry for template `template` of the project in `root`."""
    import hashlib  # OpenSSL's library: for an MCP call's chain only

    where = str(root.resolve()) if root is not None else ""
    described = f"{where}\0{template}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(described).hexdigest()[:_ENTRY_CHARS]


def chain_from(text: str | None) -> tuple[str, ...]:
    """The chain `text` (a variable's or header's value) carries; () for none or one that is not ours."""
    if not text:
        return ()
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
        return ()
    return tuple(value[: MAX_CHAIN + 1])


def inherited_chain(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The chain this process was started with (empty unless an MCP client of ours started it)."""
    return chain_from(environ.get(CHAIN_VARIABLE))


def encoded(chain: tuple[str, ...]) -> str:
    """`chain` as the variable's or header's value (plain ASCII)."""
    return json.dumps(list(chain[-MAX_CHAIN:]))


def loop_problem(chain: tuple[str, ...], root: Path | None, template: str) -> str | None:
    """Why serving `template` of `root` to the client that sent `chain` would loop, or None."""
    if template_entry(root, template) in chain:
        return (
            f"MCP server loop: template {template!r} is already being served up the chain that asks "
            f"for it (one of its `mcp_servers:`, or of a template they serve, serves it again); "
            f"list such tools in the template's `tools:` instead"
        )
    if len(chain) >= MAX_CHAIN:
        return f"MCP servers nested too deep to serve template {template!r} (over {MAX_CHAIN} templates up)"
    return None


__all__ = [
    "CHAIN_HEADER",
    "CHAIN_VARIABLE",
    "MAX_CHAIN",
    "chain_from",
    "encoded",
    "inherited_chain",
    "loop_problem",
    "template_entry",
]
