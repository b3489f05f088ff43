"""kernel.yaml and the tool and hook YAML → typed, validated, frozen values; errors name file, line and field.

One model: every section of kernel.yaml is one frozen dataclass
(`KernelConfig.limits`, `.http`, `.shell`, `.files`, `.state`, `.duckdb`,
`.llm`, `.server`; the kernel's own `scripts`, `paths` and `logging` are its resolved
fields), and each service is built from its own section's value, never
from the raw YAML. One parsing style: each section states its fields as
JSON Schema beside its dataclass; the whole file is validated in one pass
(schema.py) and the first error becomes a ConfigError with the file, the
line and the key path; a section builder then does what no schema can
say (host names and CIDR ranges, paths that must not overlap). The other
YAML the kernel reads — templates and their `mcp_servers:`, a tool's
`tests:`, the scripted LLM's rules — is read by yaml_files.py and checked
by schema.py the same way.

Why jsonschema and dataclasses, not pydantic v2:
- start-up: the schemas are plain data, so a valid document is proved
  valid by schemas/plain.py without importing jsonschema at all, which is
  imported only to word an error (a tool's `parameters` are JSON Schema
  too, which pydantic does not validate); pydantic would add an import as
  heavy as jsonschema's, and the building of its models, to every short
  command (docs/benchmarks.md, "Before and after the reshaping" and
  "Speed II (issue 31): start-up");
- the error texts: users and tests read ours (`http.max_redirects:
  expected an integer of at least 0, got -1`, `unknown key 'limts' …; did
  you mean 'limits'?`), and pydantic's (`Input should be greater than or
  equal to 0`) would have to be rewritten error type by error type anyway;
- what pydantic would give besides, a JSON Schema for editors, is what
  these schemas already are.

Modules: schema.py (the validator and the wording of errors), limits.py
(`limits:`, a script's own limits, the per-call `CallBudget`), sections.py
and hosts.py (the helper sections and `llm:`), server.py (`server:`), quotas.py (`quotas:`), cron.py
(`cron:`, its static jobs included), stores.py (the checks across sections),
kernel_yaml.py (finding and loading kernel.yaml), scripts.py (tool and hook
YAML), yaml_files.py (the one reader of every YAML file: parsed once per change).
"""

from __future__ import annotations

from agentkernel.config.kernel_yaml import (
    CONFIG_ENV,
    DEFAULT_CONFIG,
    KERNEL_SCHEMA,
    KernelConfig,
    find_kernel_config,
    load_kernel_config,
)
from agentkernel.config.limits import CallBudget, Ceilings, KernelLimits, ScriptLimits
from agentkernel.config.schema import describe_validation_error, yaml_error
from agentkernel.config.scripts import (
    HOOK_EVENTS,
    TOOL_NAME_PATTERN,
    YAML_SUFFIXES,
    HookSpec,
    ScriptSpec,
    ToolSpec,
    WarningRule,
    json_safe_yaml,
    load_script_spec,
)
from agentkernel.config.sections import (
    DuckSettings,
    FilesSettings,
    HttpConfig,
    LLMConfig,
    ShellSettings,
    StateSettings,
)
from agentkernel.config.server import ServerSettings
from agentkernel.config.stores import ReadRoot
from agentkernel.config.yaml_files import read_yaml, read_yaml_file

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONFIG",
    "HOOK_EVENTS",
    "KERNEL_SCHEMA",
    "TOOL_NAME_PATTERN",
    "YAML_SUFFIXES",
    "CallBudget",
    "Ceilings",
    "DuckSettings",
    "FilesSettings",
    "HookSpec",
    "HttpConfig",
    "KernelConfig",
    "KernelLimits",
    "LLMConfig",
    "ReadRoot",
    "ScriptLimits",
    "ScriptSpec",
    "ServerSettings",
    "ShellSettings",
    "StateSettings",
    "ToolSpec",
    "WarningRule",
    "describe_validation_error",
    "find_kernel_config",
    "json_safe_yaml",
    "load_kernel_config",
    "load_script_spec",
    "read_yaml",
    "read_yaml_file",
    "yaml_error",
]
