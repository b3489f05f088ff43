"""Command-line entry points: `agentkernel` and `hook_tool`."""
