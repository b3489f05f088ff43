"""Probe scripts shared by the helper tests: run one expression in JS or Rhai, catch its error."""

from __future__ import annotations

ENGINES = [".js", ".rhai"]

JS_PROBE = """
function run(args) {
    try { return { content: "ok", data: { value: EXPR } }; }
    catch (e) { return { content: "error", data: { error: e.message } }; }
}
"""
RHAI_PROBE = """
fn run(args) {
    try { return #{ content: "ok", data: #{ value: EXPR } }; }
    catch (e) { return #{ content: "error", data: #{ error: e } }; }
}
"""


def probe_source(engine: str, expr: str) -> str:
    """A tool whose result holds the expression's value, or the error it threw."""
    return (JS_PROBE if engine == ".js" else RHAI_PROBE).replace("EXPR", expr)
