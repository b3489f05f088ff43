"""MCP both ways (issue 16): serving our tools, consuming outside servers' tools."""
