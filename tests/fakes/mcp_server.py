"""A small outside MCP server written with the SDK, for the tests of outside tools (tools/sources/mcp).

Run as `python mcp_server.py` it speaks stdio; `python mcp_server.py
http PORT_FILE` serves streamable HTTP on 127.0.0.1 at a free port, which
it writes to PORT_FILE once it listens. Its tools tell the tests what they
need to see from the server's side: its pid, its environment.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

app = MCPServer("outside")


@app.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@app.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@app.tool()
def env(name: str) -> str:
    """The value of an environment variable of this server, or `(unset)`."""
    return os.environ.get(name, "(unset)")


@app.tool()
def touch(path: str, text: str) -> str:
    """Write `text` to the file `path`: an effect a test can look for (did the call run?)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return f"wrote {path}"


@app.tool()
def crash() -> str:
    """End this server's process at once, mid-call."""
    os._exit(3)


@app.tool()
def slow(secs: float) -> str:
    """Answer after `secs` seconds."""
    time.sleep(secs)
    return "done"


@app.tool()
def grow(name: str) -> str:
    """Offer one more tool, `name`, from now on: a tool list that changes while the server runs."""

    def grown() -> str:
        return f"{name} grown"

    app.add_tool(grown, name=name, description="A tool added while the server runs.")
    return f"now offering {name}"


@app.tool()
def pick(text: Annotated[str, Field(pattern="^(a|a)*$")]) -> str:
    """A tool whose inputSchema holds a pattern that backtracks without end in Python's `re` (issue 24)."""
    return text


@app.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name has a character our tool names may not hold."""
    return "dotted"


def _serve_http(port_file: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await __import__("asyncio").sleep(0.02)
        with open(port_file + ".tmp", "w") as out:
            out.write(str(port))
        os.replace(port_file + ".tmp", port_file)

    async def main() -> None:
        import asyncio

        task = asyncio.create_task(announce())
        await server.serve(sockets=[sock])
        task.cancel()

    import asyncio

    asyncio.run(main())


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        _serve_http(sys.argv[2])
    else:
        print("outside server: stdio", file=sys.stderr)
        app.run()
