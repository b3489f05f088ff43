"""The services helpers reach (DESIGN rule 4): embedded stores and clients, one module each.

Each implements a port of ports.py (`http.py` → `Http`, `state.py` →
`StateStore`, …) and is built by the kernel's assembly from its kernel.yaml
section, on first use. Nothing here knows the layers above: the helpers,
the script host, the tools, the agent runtime.
"""
