"""Built-in tools and hooks shipped with agentkernel (issue 15)."""
