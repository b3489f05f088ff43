"""kernel.yaml's `store:` (S27.2): a PostgreSQL URL, from the file or the variable, its password hidden."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.config import load_kernel_config
from agentkernel.config.store import STORE_URL_ENV, StoreSettings, masked_url
from agentkernel.errors import ConfigError
from tests.conftest import write_kernel_yaml

URL = "postgresql://kernel:s3cret-pw@db.internal:5432/agents"


def test_the_section_names_the_database_and_its_repr_hides_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    store = load_kernel_config(write_kernel_yaml(tmp_path, f"store:\n  url: {URL}\n")).store
    assert store.postgres and store.url == URL and store.named == "store.url"
    assert store.shown == "postgresql://kernel:***@db.internal:5432/agents"
    assert "s3cret" not in repr(store)
    assert "s3cret" not in repr(load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{URL}'}}\n")))


def test_without_the_section_or_the_variable_the_stores_stay_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    assert load_kernel_config(write_kernel_yaml(tmp_path)).store == StoreSettings()
    assert not StoreSettings().postgres


def test_the_variable_sets_the_url_when_the_section_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_URL_ENV, URL)
    store = load_kernel_config(write_kernel_yaml(tmp_path)).store
    assert (store.url, store.from_env, store.named) == (URL, True, f"${STORE_URL_ENV}")
    written = "postgresql://other@localhost/db"
    assert (
        load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{written}'}}\n")).store.url == written
    )


@pytest.mark.parametrize(
    "extra",
    [
        "store:\n  url: mysql://kernel:s3cret-pw@db/agents\n",
        "store:\n  url: 'postgresql://kernel:s3cret-pw@db/ agents'\n",
        "store:\n  url: 5\n",
    ],
)
def test_a_url_that_is_not_postgresql_is_refused_without_echoing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str
) -> None:
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(write_kernel_yaml(tmp_path, extra))
    assert "store.url: expected a postgresql://" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_the_section_needs_a_url_and_knows_no_other_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    with pytest.raises(ConfigError, match="url"):
        load_kernel_config(write_kernel_yaml(tmp_path, "store: {}\n"))
    with pytest.raises(ConfigError, match="pool_size"):
        load_kernel_config(write_kernel_yaml(tmp_path, f"store: {{url: '{URL}', pool_size: 3}}\n"))


def test_a_variable_that_is_not_postgresql_is_refused_by_name_without_echoing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STORE_URL_ENV, "sqlite://kernel:s3cret-pw@x/y")
    with pytest.raises(ConfigError) as caught:
        load_kernel_config(write_kernel_yaml(tmp_path))
    assert f"${STORE_URL_ENV}: expected a postgresql://" in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_a_masked_url_keeps_everything_but_the_password() -> None:
    assert masked_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert masked_url("postgres://u:p%40ss@[::1]:5433/db?sslmode=require") == (
        "postgres://u:***@[::1]:5433/db?sslmode=require"
    )
