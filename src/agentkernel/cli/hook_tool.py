"""`hook_tool PATH.yaml ROLE TEXT`: run a script hook on one message (S22.1).

Runs `before_user_message` on `{role, content: TEXT}`, then `after_turn`
and `after_loop` with `job_done`, each only when the hook handles it, and
prints one JSON line per call. With no LLM attached there is no real answer:
`after_turn` gets the message (or its `replace_message`) as the question and
`{role: "assistant", content: <the verdict's reply, or "">}` as the answer.
Each line is
`{"event", "result"}` or `{"event", "error"}`. A failing hook never stops
the others (S7.5). No live service is attached: helpers that need one throw
their SPEC error.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from agentkernel.cli.main import EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, _setup_logging
from agentkernel.config import HOOK_EVENTS, HookSpec, find_kernel_config, load_kernel_config
from agentkernel.errors import ConfigError, ScriptError
from agentkernel.kernel import Kernel
from agentkernel.scripting.engine import NoValue
from agentkernel.scripting.helpers import ScriptCall
from agentkernel.types import JSONObject, JSONValue


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hook_tool", description=__doc__.split("\n\n")[0])
    parser.add_argument("hook", type=Path, help="the hook's YAML file")
    parser.add_argument("role", help="the message's role, e.g. user")
    parser.add_argument("text", help="the message's text")
    parser.add_argument("--config", type=Path, help="kernel.yaml (default: ./config/kernel.yaml)")
    parser.add_argument("--user", help="user id put in ctx")
    parser.add_argument("--session", help="session id put in ctx")
    parser.add_argument("--live", action="store_true", help="attach the live services")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    return parser


def _turn(message: JSONObject, verdict: JSONValue) -> list[JSONValue]:
    """after_turn's (question, answer) as far as a turn without an LLM goes."""
    question: JSONValue = message
    reply: JSONValue = ""
    if isinstance(verdict, dict):
        replaced = verdict.get("replace_message")
        question = replaced if isinstance(replaced, dict) else message
        reply = verdict.get("reply") if isinstance(verdict.get("reply"), str) else ""
    return [question, {"role": "assistant", "content": reply}]


def run_hook(kernel: Kernel, spec: HookSpec, message: JSONObject, caller_args: dict[str, str | None]) -> int:
    caller = kernel.caller(
        user_id=caller_args["user"], session_id=caller_args["session"], pid=str(uuid.uuid4())
    )
    ctx: JSONObject = {
        "pid": caller.pid,
        "agent": caller.agent,
        "template": caller.template,
        "session_id": caller.session_id,
        "user_id": caller.user_id,
        "config": spec.raw,
    }
    limits = spec.script_limits(kernel.config.limits)
    wanted = spec.events if spec.events is not None else HOOK_EVENTS
    defined = kernel.host.defined_functions(
        spec.script, wanted, ScriptCall(caller, f"hook {spec.name}"), limits
    )
    verdict: JSONValue = None
    for event in HOOK_EVENTS:
        if event not in defined:
            continue
        args: list[JSONValue]
        if event == "before_user_message":
            args = [message]
        elif event == "after_turn":
            args = _turn(message, verdict)
        else:
            args = ["job_done"]
        call = ScriptCall(caller, f"hook {spec.name}", max_log_lines=kernel.config.limits.max_log_lines)
        line: JSONObject = {"event": event}
        try:
            value = kernel.host.call(spec.script, event, [ctx, *args], [], call, limits)
            line["result"] = None if isinstance(value, NoValue) else value
        except ScriptError as exc:
            line["error"] = exc.describe(spec.yaml_path.parent)
        if event == "before_user_message":
            verdict = line.get("result")
        print(json.dumps(line, ensure_ascii=False))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    _setup_logging(options.verbose)
    if options.live:
        print(
            "hook_tool: --live needs the kernel's live services (LLM, stores, cron), "
            "which this build does not provide yet",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        kernel = Kernel(load_kernel_config(find_kernel_config(options.config)))
        spec = kernel.catalog.load_file(options.hook)
    except ConfigError as exc:
        print(f"hook_tool: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if not isinstance(spec, HookSpec):
        print(f"hook_tool: {options.hook}: kind is script_tool; use `agentkernel tool run`", file=sys.stderr)
        return EXIT_NOT_FOUND
    try:
        return run_hook(
            kernel,
            spec,
            {"role": options.role, "content": options.text},
            {"user": options.user, "session": options.session},
        )
    except ScriptError as exc:
        print(f"hook_tool: {spec.script}: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND


if __name__ == "__main__":
    raise SystemExit(main())
