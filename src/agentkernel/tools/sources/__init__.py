"""Where tools come from besides the project's script files (the catalog): each source is a package here.

`mcp/` offers the tools of a template's outside MCP servers as `srv__tool`,
on the one dispatch path like a script tool.
"""
