"""The deployment switch of the suite (tests/pg.py, S27.3): what a test marked `across_deployments` sees."""

from __future__ import annotations

import os

import pytest

from agentkernel.config import load_kernel_config
from tests.conftest import write_kernel_yaml


@pytest.mark.across_deployments
def test_each_deployment_puts_the_stores_where_it_says(deployment: str, tmp_path: os.PathLike[str]) -> None:
    from pathlib import Path

    config = load_kernel_config(write_kernel_yaml(Path(tmp_path)))
    if deployment == "embedded":
        assert config.store.url is None
    else:
        assert config.store.url is not None and config.store.url == os.environ["AGENTKERNEL_STORE_URL"]
        import psycopg

        with psycopg.connect(config.store.url) as conn:  # a real, empty database
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (
                0,
            )
