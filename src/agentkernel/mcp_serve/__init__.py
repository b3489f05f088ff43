"""Our tools as an MCP server (serving): a front end on the `Kernel` face, like the CLI and HTTP.

`serving.py` is the server (tools/list and tools/call through the one
dispatch path), `results.py` a ToolResult as an MCP result. `agentkernel
mcp serve` runs it on stdio (cli/mcp_cmds.py) and `agentkernel serve` at
`/mcp` (server/mcp_mount.py). `import mcp` happens only inside, on first use.
"""
