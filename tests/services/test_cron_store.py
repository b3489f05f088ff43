"""The cron store (S10.2): claims once, coalesced, taken over, an owner's cap — on both stores.

Every test runs on the SQLite file and on the PostgreSQL database (S27.2,
tests/pg.py); the PostgreSQL store's own: two processes racing for the
same due times, and the copy from an embedded project's file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agentkernel.config import load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.services.cron_jobs import JobSpec, parse_job
from agentkernel.services.cron_store import CronJobStore, CronStore, Firing
from agentkernel.services.cron_store_pg import TABLE, PostgresCronStore, copy_from_sqlite
from tests.conftest import write_kernel_yaml

Store = CronStore | PostgresCronStore


def open_store(where: str) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    return PostgresCronStore(where) if where.startswith("postgresql://") else CronStore(where)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives: a cron file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "cron.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(where: str) -> Iterator[Store]:
    with open_store(where) as opened:
        assert isinstance(opened, CronJobStore)
        yield opened


def job(**fields: Any) -> dict[str, Any]:
    return {"name": "watch", "template": "watcher", "prompt": "Проверь цену", **fields}


# -- the store's claims: once, coalesced, taken over --------------------------------------------------


def spec_of(**fields: Any) -> JobSpec:
    return parse_job(job(**fields), 0, 0)


def test_due_times_missed_while_down_run_once(store: Store) -> None:
    spec = spec_of(interval_secs=60)
    now = 1_000_000.0
    store.put("anna", spec, now - 3600, by="", now=now - 3660, most=10)  # sixty runs missed
    (claim,) = store.claim_due("k1", now, 360, 60)
    assert claim.scheduled_at == now - 3600 and not claim.misfired
    assert store.claim_due("k1", now + 1, 360, 60) == []  # claimed: not again, not by another
    (status,) = store.statuses("anna")
    assert status.next_run == now + 60 and status.running  # coalesced: the next due time is after now
    store.finish(claim, "k1", ran_at=now, ok=True, error=None)
    assert store.claim_due("k2", now + 30, 360, 60) == []
    (following,) = store.claim_due("k2", now + 60, 360, 60)
    assert following.scheduled_at == now + 60


def test_misfire_skip_skips_a_late_due_time(store: Store) -> None:
    spec = spec_of(interval_secs=60, misfire="skip")
    now = 1_000_000.0
    store.put("anna", spec, now - 3600, by="", now=now - 3660, most=10)
    (claim,) = store.claim_due("k1", now, 360, 60)
    assert claim.misfired
    store.release(claim, "k1")
    (status,) = store.statuses("anna")
    assert status.runs == 0 and status.next_run == now + 60 and not status.running
    assert status.last_error == "skipped the run due at 1970-01-12T12:46:40.000Z (misfire: skip)"
    store.put("boris", spec, now - 5, by="", now=now - 65, most=10)
    (late_a_little,) = store.claim_due("k1", now, 360, 60)
    assert not late_a_little.misfired  # within misfire_grace_secs


def test_a_dead_kernels_claim_is_taken_over(store: Store) -> None:
    spec = spec_of(interval_secs=60)
    now = 1_000_000.0
    store.put("anna", spec, now, by="", now=now - 60, most=10)
    (claim,) = store.claim_due("dead", now, 360, 60)
    assert store.claim_due("alive", now + 359, 360, 60) == []  # the claim holds for its lease
    (again,) = store.claim_due("alive", now + 361, 360, 60)
    assert again.scheduled_at == claim.scheduled_at == now
    assert not store.finish(claim, "dead", ran_at=now, ok=True, error=None)  # the dead one's claim is gone
    assert store.finish(again, "alive", ran_at=now + 361, ok=True, error=None)
    (status,) = store.statuses("anna")
    assert status.runs == 1 and status.next_run == now + 60


def test_a_clock_set_back_brings_next_runs_in(store: Store) -> None:
    spec = spec_of(interval_secs=60)
    store.put("anna", spec, 2_000_000.0, by="", now=1_999_940.0, most=10)
    assert store.rewind(1_000_000.0) == 1
    (status,) = store.statuses("anna")
    assert status.next_run == 1_000_060.0


ANNA_WAITS = (
    "user 'anna' has 2 cron runs running, the most cron.max_running_per_user (2) allows; "
    "it starts when one of them ends"
)


def test_an_owners_due_times_past_the_cap_wait_due_and_run_when_one_of_theirs_ends(store: Store) -> None:
    """cron.max_running_per_user, counted in the store: every kernel's claims, so it holds across them."""
    now = 1_000_000.0
    for offset, (owner, name) in enumerate([("anna", "a"), ("anna", "b"), ("anna", "c"), ("boris", "x")]):
        spec = parse_job(job(name=name, interval_secs=60), 0, 0)
        store.put(owner, spec, now - 4 + min(offset, 3), by="", now=now - 60, most=10)
    claims = store.claim_due("k1", now, 360, 60, most_per_owner=2)
    assert [(c.owner, c.name, c.held_back) for c in claims] == [
        ("anna", "a", False),
        ("anna", "b", False),
        ("anna", "c", True),  # due, but two of anna's run already: it waits
        ("boris", "x", False),  # another owner's are their own
    ]
    waiting = {status.spec.name: status for status in store.statuses("anna")}["c"]
    assert waiting.waiting == ANNA_WAITS and waiting.next_run == now - 2 and not waiting.running
    assert store.next_wake(now, 2) == now + 56  # a's next due time: the waiting one wakes nobody...
    assert store.next_wake(now) == now - 2  # ...which it would without the cap
    assert [c.held_back for c in store.claim_due("k2", now + 1, 360, 60, most_per_owner=2)] == [True]
    (first, _, _, _) = claims
    store.finish(first, "k1", ran_at=now + 1, ok=True, error=None)
    (late,) = store.claim_due("k2", now + 2, 360, 60, most_per_owner=2)
    assert (late.name, late.held_back, late.scheduled_at, late.waited) == ("c", False, now - 2, ANNA_WAITS)
    assert {s.spec.name: s.waiting for s in store.statuses("anna")}["c"] is None


def test_a_skip_job_that_waited_past_the_grace_is_skipped_saying_why(store: Store) -> None:
    now = 1_000_000.0
    for name, misfire in (("a", "run_once"), ("b", "run_once"), ("c", "skip")):
        store.put(
            "anna",
            parse_job(job(name=name, interval_secs=600, misfire=misfire), 0, 0),
            now,
            by="",
            now=now - 1,
            most=10,
        )
    first, _, held = store.claim_due("k1", now, 360, 60, most_per_owner=2)
    assert held.held_back
    store.finish(first, "k1", ran_at=now + 100, ok=True, error=None)
    (skipped,) = store.claim_due("k1", now + 100, 360, 60, most_per_owner=2)
    assert skipped.misfired and skipped.waited == ANNA_WAITS
    store.release(skipped, "k1")
    status = {s.spec.name: s for s in store.statuses("anna")}["c"]
    assert (
        status.runs == 0
        and status.waiting is None
        and status.last_error
        == (
            "skipped the run due at 1970-01-12T13:46:40.000Z (misfire: skip): it waited past "
            f"cron.misfire_grace_secs because {ANNA_WAITS}"
        )
    )


# -- due times fired by an outside scheduler (a Temporal Schedule, S27.2) ----------------------------


def test_a_fired_due_time_is_claimed_once_and_taken_back_by_its_own_retry(store: Store) -> None:
    spec = spec_of(interval_secs=60)
    now = 1_000_000.0
    store.put("anna", spec, now, by="", now=now - 60, most=10)
    (stored,) = store.scheduled_jobs()
    firing = Firing("wf-1", "anna", "watch", stored.generation, now)
    claim = store.claim_fired(firing, now + 1, 360, 60)
    assert claim is not None and claim.scheduled_at == now and not claim.held_back and not claim.misfired
    other = Firing("wf-2", "anna", "watch", stored.generation, now + 60)
    assert store.claim_fired(other, now + 61, 360, 60) is None  # a run under way: never two at once
    again = store.claim_fired(firing, now + 2, 360, 60)  # the same firing's retry (its worker died)
    assert again is not None and again.scheduled_at == now
    assert store.finish(again, "wf-1", ran_at=now + 2, ok=True, error=None)
    assert store.claim_fired(firing, now + 3, 360, 60) is None  # run: a retry after that runs nothing
    (status,) = store.statuses("anna")
    assert (status.runs, status.next_run, status.running) == (1, now + 60, False)
    assert store.claim_fired(other, now + 62, 360, 60) is not None  # the last one ended: the next runs
    replaced = Firing("wf-3", "anna", "watch", stored.generation + 1, now + 120)
    assert store.claim_fired(replaced, now + 121, 360, 60) is None  # no such generation
    assert store.delete("anna", "watch")
    assert store.claim_fired(Firing("wf-4", "anna", "watch", stored.generation, now), now, 360, 60) is None


def test_a_fired_due_time_past_the_owners_cap_waits_and_a_late_skip_job_is_skipped(store: Store) -> None:
    now = 1_000_000.0
    for name in ("a", "b"):
        store.put(
            "anna",
            parse_job(job(name=name, interval_secs=60, misfire="skip"), 0, 0),
            now,
            by="",
            now=now,
            most=10,
        )
    generation = {job.spec.name: job.generation for job in store.scheduled_jobs()}
    first = store.claim_fired(Firing("wf-a", "anna", "a", generation["a"], now, 1), now, 360, 60)
    assert first is not None and not first.held_back
    held = store.claim_fired(Firing("wf-b", "anna", "b", generation["b"], now, 1), now + 1, 360, 60)
    assert held is not None and held.held_back
    assert {s.spec.name: s.waiting for s in store.statuses("anna")}["b"] == (
        "user 'anna' has 1 cron runs running, the most cron.max_running_per_user (1) allows; "
        "it starts when one of them ends"
    )
    store.finish(first, "wf-a", ran_at=now + 2, ok=True, error=None)
    late = store.claim_fired(Firing("wf-b", "anna", "b", generation["b"], now, 1), now + 61, 360, 60)
    assert late is not None and late.misfired and not late.held_back  # waited past the grace: skipped


def test_the_change_mark_moves_with_every_change_an_outside_scheduler_must_see(store: Store) -> None:
    now = 1_000_000.0
    marks = [store.changes_mark()]
    store.put("anna", spec_of(oneshot_at="2026-12-01T09:00:00Z"), now, by="", now=now, most=10)
    marks.append(store.changes_mark())
    store.put("anna", spec_of(interval_secs=60), now, by="", now=now, most=10)  # replaced: same count
    marks.append(store.changes_mark())
    store.put("boris", spec_of(oneshot_at="2026-12-01T09:00:00Z"), now, by="", now=now, most=10)
    marks.append(store.changes_mark())
    (boris,) = [job for job in store.scheduled_jobs() if job.owner == "boris"]
    at = boris.spec.timing.oneshot_at
    assert at is not None
    claim = store.claim_fired(Firing("wf", "boris", "watch", boris.generation, at), at + 1, 360, 60)
    assert claim is not None and claim.next_run is None  # the oneshot's last run
    marks.append(store.changes_mark())
    store.delete("anna", "watch")
    marks.append(store.changes_mark())
    assert len(set(marks)) == len(marks), marks


def test_an_interval_keeps_its_grid_when_a_firing_is_late(store: Store) -> None:
    spec = spec_of(interval_secs=60)
    start = 1_000_000.0
    store.put("anna", spec, start, by="", now=start - 60, most=10)
    (claim,) = store.claim_due("k1", start + 7, 360, 60)  # claimed 7 s late
    assert claim.next_run == start + 60  # not start + 67: lateness does not add up
    store.finish(claim, "k1", ran_at=start + 7, ok=True, error=None)
    (status,) = store.statuses("anna")
    assert status.next_run == start + 60
    assert spec.timing.following(start, start + 150) == start + 180  # missed ones skipped over, on the grid


# -- PostgreSQL: schedulers in two processes race for the same due times ------------------------------

CLAIMER = """
import json, sys
from agentkernel.config import load_kernel_config
from agentkernel.errors import AgentKernelError
from agentkernel.services.cron_store_pg import TABLE, PostgresCronStore, copy_from_sqlite
from tests.conftest import write_kernel_yaml
url, scheduler, now, most, finish = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
with PostgresCronStore(url) as store:
    store.statuses("nobody")  # connected
    print("ready", flush=True)
    sys.stdin.readline()
    while True:
        claims = [c for c in store.claim_due(scheduler, now, 360, 60, None if most == "-" else int(most))
                  if not c.held_back]
        if not claims:
            break
        for claim in claims:
            print(json.dumps([claim.owner, claim.name, claim.scheduled_at]), flush=True)
            if finish == "finish":
                store.finish(claim, scheduler, ran_at=now, ok=True, error=None)
"""
WAIT_SECS = 120.0
OWNERS = 300  # enough that the two processes often claim at the same moment


def race(url: str, now: float, most: str, finish: str) -> list[tuple[str, str, float]]:
    """Two processes claim the store's due times at once, each until it finds none; every claim made."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, url, f"k{each}", str(now), most, finish],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for each in range(2)
    ]
    try:
        for process in started:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in started:  # both go at once
            assert process.stdin is not None
            process.stdin.write("\n")
            process.stdin.flush()
        claims: list[tuple[str, str, float]] = []
        for process in started:
            out, err = process.communicate(timeout=WAIT_SECS)
            assert process.returncode == 0, err
            claims += [tuple(json.loads(line)) for line in out.splitlines()]
        return claims
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()


def test_two_processes_claim_each_due_time_once(pg_url: str) -> None:
    """Two schedulers (two processes, as on two machines) racing for 300 due jobs fire each once."""
    now = time.time()
    with PostgresCronStore(pg_url) as store:
        for each in range(300):
            store.put(
                f"u{each % 30}",
                spec_of(name=f"j{each}", interval_secs=3600),
                now - 1,
                by="",
                now=now,
                most=100,
            )
    claims = race(pg_url, now, "-", "finish")
    assert len(claims) == len(set(claims)) == 300, "a due time was claimed twice, or not at all"
    with PostgresCronStore(pg_url) as store:
        assert all(status.runs == 1 and not status.running for status in store.statuses())


def test_two_processes_keep_an_owners_cap(pg_url: str) -> None:
    """cron.max_running_per_user 1, two schedulers claiming at once: each owner gets one run, not two
    (without the owners' advisory locks, one run in three gave some owner two)."""
    now = time.time()
    with PostgresCronStore(pg_url) as store:
        for owner in range(OWNERS):
            for name in "abc":
                store.put(
                    f"u{owner}", spec_of(name=name, interval_secs=3600), now - 1, by="", now=now, most=10
                )
    claims = race(pg_url, now, "1", "hold")
    assert sorted(Counter(owner for owner, _, _ in claims).values()) == [1] * OWNERS


def test_copy_from_sqlite_moves_an_embedded_projects_jobs(tmp_path: Path, pg_url: str) -> None:
    """`agentkernel store migrate`'s part: the file's jobs, statuses and claims, read back through PG."""
    project = tmp_path / "project"
    config = load_kernel_config(write_kernel_yaml(project, "cron:\n  db_path: data/jobs.db\n"))
    now = 1_000_000.0
    with CronStore(config.cron.db_path) as embedded:
        for name in ("a", "b"):
            embedded.put("anna", spec_of(name=name, interval_secs=60), now, by="helper", now=now - 1, most=10)
        embedded.put(
            "ops", spec_of(name="n", interval_secs=60), now, by="kernel.yaml", now=now, most=10, static=True
        )
        (claim, _, _) = embedded.claim_due("k1", now, 360, 60, most_per_owner=1)
        embedded.finish(claim, "k1", ran_at=now + 1, ok=False, error="boom")
        expected = embedded.statuses()
    with PostgresCronStore(pg_url) as store:
        with psycopg.connect(pg_url) as target, target.transaction():
            assert copy_from_sqlite(config, target) == {TABLE: 3}
        assert store.statuses() == expected
        assert store.static_jobs() == [("ops", "n")]
        with (
            psycopg.connect(pg_url) as target,
            pytest.raises(AgentKernelError, match=f"table {TABLE} already"),
        ):
            copy_from_sqlite(config, target)
    missing = load_kernel_config(write_kernel_yaml(tmp_path / "empty", ""))
    with psycopg.connect(pg_url) as target:
        assert copy_from_sqlite(missing, target) == {}
