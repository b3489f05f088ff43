"""`lazy_getattr` where the Rhai package still imports it from (util/lazy_exports.py is the module).

Only until the Rhai interpreter imports nothing of agentkernel (issue 25, branch i25-rhai): delete then.
"""

from agentkernel.util.lazy_exports import lazy_getattr

__all__ = ["lazy_getattr"]
