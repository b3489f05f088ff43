"""The agent's engine room: the hook pipeline and the agent loop."""
