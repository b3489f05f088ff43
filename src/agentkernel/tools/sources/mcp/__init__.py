"""Outside MCP servers' tools as our tools (consuming): a tool source of the registry.

`outside.py` offers them (`OutsideToolSpec`, `srv__tool`), `client_pool.py`
holds one connection per server, `results.py` turns an MCP result into a
ToolResult, `nesting.py` refuses a server loop, `stderr_tail.py` keeps a
stdio server's last words. `import mcp` happens only inside, on first use.
"""
