"""kernel.yaml's `telemetry:` section (S26.1, S26.2): where traces go, what they may carry, who reads metrics.

With the section present, every run is a trace exported over OTLP
(`protocol`: `http/protobuf` or `grpc`) to `endpoint`; without it, the
standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
variable turns traces on the same way, and the rest of the `OTEL_*`
variables (headers, service name, protocol) are read by the OpenTelemetry
SDK as usual; `enabled: false` keeps a written section off. Message
contents reach spans only with `capture_content`; a user id is hashed
unless `record_user_ids`. `GET /metrics` asks for a
server token unless `metrics_public`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentkernel.config.schema import Where, expect, section

OTLP_PROTOCOLS = ("http/protobuf", "grpc")


@dataclass(frozen=True)
class TelemetrySettings:
    """The `telemetry:` section, validated; `enabled` is False when the section is absent."""

    enabled: bool = False  # traces exported: the section is present (unless `enabled: false`)
    present: bool = False  # the section is written (`enabled: false` then keeps OTEL_* variables off too)
    endpoint: str | None = None  # OTLP endpoint; None: the OTEL_EXPORTER_OTLP_* variables, else the SDK's
    protocol: str | None = None  # http/protobuf | grpc; None: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf
    service_name: str | None = None  # None: OTEL_SERVICE_NAME, else "agentkernel"
    capture_content: bool = False  # message contents and tool arguments/results on spans
    record_user_ids: bool = False  # a span carries the user id itself, not its hash
    metrics_public: bool = False  # GET /metrics without a token


TELEMETRY_SCHEMA = section(
    {
        "enabled": expect("true or false", type="boolean"),
        "endpoint": expect("an http:// or https:// URL", type="string", pattern=r"^https?://\S+$"),
        "protocol": expect("one of " + ", ".join(OTLP_PROTOCOLS), enum=list(OTLP_PROTOCOLS)),
        "service_name": expect("a non-empty name", type="string", pattern=r"\S"),
        "capture_content": expect("true or false", type="boolean"),
        "record_user_ids": expect("true or false", type="boolean"),
        "metrics_public": expect("true or false", type="boolean"),
    }
)


def telemetry_settings(values: Mapping[str, Any] | None, _: Where) -> TelemetrySettings:
    """The section's settings; `values` None: the section is absent (traces off unless OTEL_* say)."""
    if values is None:
        return TelemetrySettings()
    return TelemetrySettings(**{"enabled": True, **values, "present": True})


__all__ = ["OTLP_PROTOCOLS", "TELEMETRY_SCHEMA", "TelemetrySettings", "telemetry_settings"]
