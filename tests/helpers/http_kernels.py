"""Kernels for the HTTP helper tests: the service built from a kernel.yaml, and probe tools in JS and Rhai."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.helpers import default_helper_table
from agentkernel.helpers import http as http_helpers
from agentkernel.services.http import HttpService, Resolver, system_resolver
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, switched_on, write_kernel_yaml

JS_PROBE = """
function run(args) {
    const u = args.base;
    try { return { content: "ok", data: EXPR }; }
    catch (e) { return { content: "thrown", data: { thrown: e.message } }; }
}
"""
RHAI_PROBE = """
fn run(args) {
    let u = args.base;
    try { return #{ content: "ok", data: EXPR }; }
    catch (e) { return #{ content: "thrown", data: #{ thrown: e } }; }
}
"""


@dataclass
class Kernels:
    """Builds kernels with the HTTP helpers and a service; closes every service at the end."""

    project: Path
    services: list[HttpService] = field(default_factory=list)

    def build(self, http_yaml: str = "", *, attach: bool = True, resolver: Resolver | None = None) -> Kernel:
        """A kernel whose scripts may reach 127.0.0.1 (the test servers) unless `http_yaml` says otherwise."""
        kernel_yaml = switched_on(http_yaml, "http", "allow_private")
        return self.load(write_kernel_yaml(self.project, kernel_yaml), attach=attach, resolver=resolver)

    def load(self, path: Path, *, attach: bool = True, resolver: Resolver | None = None) -> Kernel:
        config = load_kernel_config(path)
        table = default_helper_table()
        if "http_get" not in table:  # until the kernel's default table holds them
            http_helpers.register(table)
        service: HttpService | None = None
        if attach:
            service = HttpService.from_config(config, resolver=resolver or system_resolver)
            self.services.append(service)
        return Kernel(config, helpers=table, extra_services={"http": service})  # None: detached


_names = iter(range(1_000_000))


def fresh_name(prefix: str) -> str:
    """A tool name no other test of this run uses."""
    return f"{prefix}{next(_names)}"


def probe(
    kernel: Kernel,
    make_tool: ToolFactory,
    engine: str,
    expr: str,
    base: str,
) -> dict[str, JSONValue]:
    """Evaluate `expr` (`#{…}` is an object, `NULL` is null, `u` the base URL) in a tool of `engine`."""
    if engine == ".js":
        expr = expr.replace("#{", "{").replace("NULL", "null")
    else:
        expr = expr.replace("NULL", "()")
    name = fresh_name("probe")
    source = (JS_PROBE if engine == ".js" else RHAI_PROBE).replace("EXPR", expr)
    make_tool(name, source, ext=engine)
    result = kernel.run_tool(name, {"base": base})
    assert result.success, result.content
    assert isinstance(result.data, dict), result.data
    assert "thrown" not in result.data, f"S8.2: the helper threw: {result.data}"
    assert set(result.data) == {"status", "body", "error"}, result.data
    return result.data


def echoed(result: dict[str, JSONValue]) -> dict[str, Any]:
    """What the server's /echo saw, from a result that must be a 200."""
    assert result["status"] == 200 and result["error"] == "", result
    seen = json.loads(str(result["body"]))
    assert isinstance(seen, dict)
    return seen
