"""The package a `kind: python_tool`'s `function:` names a module of: the kernel's built-ins, only.

A constant of its own, so loading a YAML (config/scripts.py) finds the
module without importing the built-ins package, which is a tool source
above config (agentkernel/builtins/__init__.py takes its PACKAGE from here).
"""

PACKAGE = "agentkernel.builtins"

__all__ = ["PACKAGE"]
