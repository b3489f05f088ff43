"""The kernel's LLM as a script's worker thread reaches it (S9.2, S21.3).

Scripts are synchronous and the provider is async. `llm()` hands its
request to the kernel's event loop (services/kernel_loop.py) — the one the
agent loop and sub-agents run on, so their HTTP connections and the
kernel-wide concurrency limit are shared — and blocks only its own worker
thread, no longer than the script has left. When the time runs out the
request is cancelled on the loop (its connection closed, its slot of the
concurrency limit freed) and TimeoutError is raised to the waiting thread.
"""

from __future__ import annotations

from agentkernel.llm.base import Completion, CompletionRequest, Provider
from agentkernel.services.kernel_loop import KernelLoop


class KernelLLM:
    """The provider, called synchronously from a worker thread on the kernel's event loop."""

    def __init__(self, provider: Provider, home: KernelLoop) -> None:
        self.provider = provider
        self._home = home

    def complete(self, request: CompletionRequest, timeout: float | None) -> Completion:
        """The provider's answer; TimeoutError (the request cancelled) after `timeout` seconds."""
        return self._home.run(lambda: self.provider.complete(request), timeout)


__all__ = ["KernelLLM"]
