"""Turn leases in the message store's file: one turn per session, per-user caps, the write fence.

Two stores on one file stand for two processes (each its own connections);
`tests/server/test_turns_across_processes.py` runs real ones. A lapsed lease is
made by taking it for a fraction of a second and waiting for the store to
say it lapsed, never by timing it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkernel.services.memory import SqliteMessageStore
from agentkernel.services.turn_leases import LeaseLost, SessionLeased, TurnLeases, UserAtCap
from tests.conftest import wait_until

LONG = 600.0
SHORT = 0.05


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "messages.db"


def test_a_live_lease_refuses_another_taker_and_a_released_one_does_not(path: Path) -> None:
    with TurnLeases(path) as here, TurnLeases(path) as there:
        held = here.take("s1", "alice", LONG)
        with pytest.raises(SessionLeased, match="session s1 has a turn running"):
            there.take("s1", "alice", LONG)
        there.take("s2", "alice", LONG)  # another session is free
        here.release(held)
        there.take("s1", "alice", LONG)


def test_the_cap_counts_a_users_live_leases_of_every_store_and_no_other_users(path: Path) -> None:
    with TurnLeases(path) as here, TurnLeases(path) as there:
        here.take("s1", "alice", LONG, most_per_user=2)
        there.take("s2", "alice", LONG, most_per_user=2)
        with pytest.raises(UserAtCap) as refused:
            here.take("s3", "alice", LONG, most_per_user=2)
        assert refused.value.running == 2
        there.take("s4", "bob", LONG, most_per_user=2)
        assert here.running("alice") == 2 and there.running("bob") == 1


def test_a_lapsed_lease_is_taken_over_and_its_holder_can_neither_renew_nor_write(path: Path) -> None:
    with TurnLeases(path) as dead, TurnLeases(path) as alive, SqliteMessageStore(path) as store:
        old = dead.take("s1", "alice", SHORT, most_per_user=1)
        store.append("s1", "user", "user", "one", user_id="alice", lease=old.token)
        wait_until(lambda: dead.running("alice") == 0, "the short lease to lapse")
        new = alive.take("s1", "alice", LONG, most_per_user=1)  # a lapsed lease counts for no cap either
        assert not dead.renew(old)
        with pytest.raises(LeaseLost, match="another turn holds the session now"):
            store.append("s1", "assistant", "agent", "late", user_id="alice", lease=old.token)
        store.append("s1", "assistant", "agent", "on time", user_id="alice", lease=new.token)
        dead.release(old)  # releases nothing of the new holder's
        assert alive.renew(new)
        assert [r.content for r in store.history("s1", 10)] == ["one", "on time"]


def test_changes_counts_the_records_after_a_mark_and_gives_the_last_id(path: Path) -> None:
    with SqliteMessageStore(path) as store:
        first = store.append("s1", "user", "user", "one", user_id="alice")
        assert store.changes("s1", first) == (0, first)
        second = store.append("s1", "assistant", "agent", "two", user_id="alice")
        store.append("s2", "user", "user", "elsewhere", user_id="alice")
        assert store.changes("s1", first) == (1, second)
        assert store.changes("s1", 0) == (2, second)
