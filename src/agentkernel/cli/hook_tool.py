"""`hook_tool PATH.yaml|NAME ROLE TEXT [--live]`: run a script hook on one message (S22.1).

The hook is a YAML file (its project found upward from the file), or the
name of a hook of the project found from the working directory.

Runs `before_user_message` on `{role, content: TEXT}`, then `after_turn`
and `after_loop` with `job_done`, each only when the hook handles it, through
the kernel's hook pipeline (`Kernel.run_hooks`), and prints one JSON line
per call: `{"event", "result"}` or `{"event", "error"}` (a part of a verdict
the pipeline ignored is one more line with its `error`). With no LLM in the loop there is no real
answer: `after_turn` gets the message (or its `replace_message`) as the
question and `{role: "assistant", content: <the verdict's reply, or "">}` as
the answer (null when the message was suppressed). A failing hook never stops
the others (S7.5), but the exit status is 1 when any call failed (a throw,
a limit, a verdict with a part ignored), so a script or CI sees it.

Without `--live` no live service is attached: helpers that need one throw
the error the contract gives them (docs/contract.md). With `--live` the
configured LLM and the message store are attached (DESIGN rule 4), and each
call is also recorded in the transcript of the session (`--session`, or a
new one) as the agent loop records hooks. The kernel is closed at the end:
every service a hook used, the message store and the LLM client.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentkernel.cli.common import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    add_global_flags,
    load_kernel,
    names_a_file,
    quiet_broken_pipe,
    setup_logging,
)
from agentkernel.config import HookSpec
from agentkernel.errors import ConfigError, ScriptError
from agentkernel.types import JSONObject

if TYPE_CHECKING:
    from agentkernel.kernel import Kernel

EXIT_FAILED = 1  # a hook call failed: its JSON line has the `error`


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hook_tool", description=__doc__.split("\n\n")[0])
    parser.add_argument("hook", help="the hook's YAML file, or its name in the project")
    parser.add_argument("role", help="the message's role, e.g. user")
    parser.add_argument("text", help="the message's text")
    parser.add_argument("--user", help="user id put in ctx")
    parser.add_argument("--session", help="session id put in ctx (with --live, the transcript's session)")
    parser.add_argument(
        "--live", action="store_true", help="attach the live services: the LLM and the message store"
    )
    add_global_flags(parser, inherited=False)
    return parser


def show_hook(kernel: Kernel, spec: HookSpec, message: JSONObject, options: argparse.Namespace) -> int:
    """One message through this hook's functions (`Kernel.run_hooks`), one JSON line per call."""
    session = options.session or (str(uuid.uuid4()) if options.live else None)
    run = kernel.run_hooks(spec, message, kernel.caller(user_id=options.user, session_id=session))
    for record in run.records:
        line = {k: v for k, v in record.to_json().items() if k != "hook"}
        print(json.dumps(line, ensure_ascii=False))
    if options.live and session is not None:  # the kernel recorded each call in the transcript
        where = kernel.config.store.shown or kernel.config.messages_db  # the store database with store.url
        print(f"recorded in session {session} of {where}", file=sys.stderr)
    return EXIT_FAILED if any(record.failed for record in run.records) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    setup_logging(options.verbose, options.log_format)
    if options.verbose == 0:  # a failing hook is printed as its JSON line; its log line would repeat it
        logging.getLogger("agentkernel.hooks").setLevel(logging.ERROR)
    # the hook's own project: search upward from its file, wherever hook_tool runs
    start = Path(options.hook).resolve().parent if names_a_file(options.hook) else None
    with load_kernel("hook_tool", options.config, start=start, live=options.live) as kernel:
        return _run(kernel, options)


def _run(kernel: Kernel, options: argparse.Namespace) -> int:
    try:
        if options.live and kernel.llm_config is None:
            raise ConfigError(kernel.config.path, "llm: --live needs an LLM configured in kernel.yaml")
        spec = (
            kernel.load_spec(Path(options.hook)) if names_a_file(options.hook) else kernel.hook(options.hook)
        )
    except ConfigError as exc:
        print(f"hook_tool: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if not isinstance(spec, HookSpec):
        print(f"hook_tool: {options.hook}: kind is script_tool; use `agentkernel tool run`", file=sys.stderr)
        return EXIT_NOT_FOUND
    message: JSONObject = {"role": options.role, "content": options.text}
    try:
        return quiet_broken_pipe(lambda: show_hook(kernel, spec, message, options))
    except ScriptError as exc:
        print(f"hook_tool: {spec.script}: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND


if __name__ == "__main__":
    raise SystemExit(main())
