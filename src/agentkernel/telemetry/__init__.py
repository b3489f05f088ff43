"""Operating the kernel (S26): traces (OpenTelemetry's GenAI conventions), metrics, log lines.

Below every layer that makes a span or counts a metric (the server, the agent
loop, dispatch, the helpers, the LLM providers) and above only config and
util: it knows settings and plain values, never a kernel part. Without
`telemetry:` (or the OTEL_* variables) the OpenTelemetry API stays its own
no-op.
"""
