"""The one way a test or a benchmark reaches behind the `Kernel` face: `kernel_parts(kernel)`.

The kernel's own tests and benchmarks check what the verbs cannot show: a
service built or not, a store's rows, the script pool's queues, a part
swapped for an instrumented one. They read the kernel's `KernelParts`
(assembly.py) here and nowhere else, so a change of the parts shows up in
one place. Not promised to anyone else: the parts change with the engine room.
"""

from __future__ import annotations

from agentkernel.assembly import KernelParts
from agentkernel.kernel import Kernel


def kernel_parts(kernel: Kernel) -> KernelParts:
    """The parts behind `kernel`'s verbs: its services, history, store, host, pools, …"""
    return kernel._parts


__all__ = ["kernel_parts"]
