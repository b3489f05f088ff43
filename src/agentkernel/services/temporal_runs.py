"""Starting and cancelling runs on Temporal (S27.2): the serving side of `runs.engine: temporal`.

`TemporalRuns` connects once (lazily, on the first use) to `runs.address`
and starts a run's workflow (services/temporal_workflow.py) with the run id
as the workflow id on `runs.task_queue`. Starting is idempotent: a workflow
already running for the run is kept (USE_EXISTING), so a server that finds
a run without a live holder may ask again safely. Imported only with
`runs.engine: temporal` (the SDK's import costs start-up time).
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from agentkernel.config.runs import RunSettings
from agentkernel.services.run_engine import EngineUnavailable
from agentkernel.services.temporal_workflow import RunInput, RunWorkflow


class TemporalRuns:
    """The runs' workflows on the Temporal service of kernel.yaml's `runs:`."""

    def __init__(self, settings: RunSettings) -> None:
        self.settings = settings
        self._client: Client | None = None
        self._connecting = asyncio.Lock()

    async def client(self) -> Client:
        """The connected client (connected on the first call); EngineUnavailable when it cannot be."""
        async with self._connecting:
            if self._client is None:
                where = f"{self.settings.address} (namespace {self.settings.namespace})"
                try:
                    self._client = await Client.connect(
                        self.settings.address, namespace=self.settings.namespace
                    )
                except Exception as exc:
                    raise EngineUnavailable(
                        f"runs.address: Temporal at {where} does not answer: {exc}"
                    ) from exc
            return self._client

    async def start(self, run_id: str, lease_token: str | None = None) -> None:
        """Start the run's workflow (kept as it is when one runs already); EngineUnavailable on failure."""
        client = await self.client()
        given = RunInput(run_id, lease_token, self.settings.heartbeat_secs)
        try:
            await client.start_workflow(
                RunWorkflow.run,
                given,
                id=run_id,
                task_queue=self.settings.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except RPCError as exc:
            raise EngineUnavailable(f"run {run_id}: Temporal did not start its workflow: {exc}") from exc

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run's workflow (its worker stops the run, `terminated`); False when none runs."""
        handle = (await self.client()).get_workflow_handle(run_id)
        try:
            described = await handle.describe()
            if described.status != WorkflowExecutionStatus.RUNNING:
                return False
            await handle.cancel()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise EngineUnavailable(f"run {run_id}: Temporal did not cancel its workflow: {exc}") from exc
        return True


__all__ = ["TemporalRuns"]
