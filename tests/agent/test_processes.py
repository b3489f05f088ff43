"""Processes, budget groups and the process table (S23.2, S17, S9.2, S15, S7.4)."""

from __future__ import annotations

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentkernel.agent.processes import Process, ProcessError, ProcessState, ProcessTable
from agentkernel.budget import BudgetExhausted, BudgetGroup
from agentkernel.bundle import Services
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import HelperError
from agentkernel.identity import Caller, scratch_made, session_folder_name, session_key, session_temp_dir

HELLO = TemplateSpec(
    name="hello-agent", instructions="hi", tools=("text_stats", "wordcount"), budget_tokens=100
)
REVIEW = TemplateSpec(name="review-agent", instructions="judge", tools=("wordcount",))


@pytest.fixture
def table() -> ProcessTable:
    return ProcessTable()


def spawn(table: ProcessTable, tmp_path: Path, template: TemplateSpec = HELLO, **kw: object) -> Process:
    return table.spawn(template, temp_root=tmp_path, **kw)  # type: ignore[arg-type]


# -- spawn -------------------------------------------------------------------------------------


def test_spawn_gives_a_running_process_with_a_uuid_pid(table: ProcessTable, tmp_path: Path) -> None:
    before = datetime.now(UTC)
    proc = spawn(table, tmp_path, user_id="u1", session_id="s1")
    assert str(uuid.UUID(proc.pid)) == proc.pid
    assert proc.name == "hello-agent" and proc.template_name == "hello-agent" and proc.template is HELLO
    assert (proc.user_id, proc.session_id, proc.parent_pid) == ("u1", "s1", None)
    assert proc.state is ProcessState.RUNNING and not proc.terminated
    assert before <= proc.created_at <= datetime.now(UTC)
    assert table.get(proc.pid) is proc and table.all() == [proc] and len(table) == 1


def test_spawn_takes_a_name_and_pids_are_unique(table: ProcessTable, tmp_path: Path) -> None:
    a = spawn(table, tmp_path, name="helper-1")
    b = spawn(table, tmp_path)
    assert a.name == "helper-1" and a.template_name == "hello-agent"
    assert a.pid != b.pid


def test_a_session_gets_its_scratch_folder(table: ProcessTable, tmp_path: Path) -> None:
    """Named at spawn, made by its first use (tests/helpers/test_files.py: a script writing to it)."""
    proc = spawn(table, tmp_path / "tmp", session_id="../s/1")
    assert proc.temp_dir is not None and not proc.temp_dir.exists()
    assert proc.temp_dir == session_temp_dir(tmp_path / "tmp", user_id=None, session_id="../s/1")
    assert proc.temp_dir.is_dir()
    assert proc.temp_dir.parent == (tmp_path / "tmp").resolve()
    assert proc.temp_dir.name == session_folder_name(None, "../s/1")
    assert proc.temp_dir.name.startswith("_s_1-") and "/" not in proc.temp_dir.name
    assert proc.temp_dir.stat().st_mode & 0o777 == 0o700


def test_a_session_folder_is_the_users_session_not_the_session_alone(
    table: ProcessTable, tmp_path: Path
) -> None:
    """Issue 9: user B who reuses user A's session id gets a folder of B's own."""
    alice = spawn(table, tmp_path, user_id="alice", session_id="chat-1")
    bob = spawn(table, tmp_path, user_id="bob", session_id="chat-1")
    nobody = spawn(table, tmp_path, session_id="chat-1")
    again = spawn(table, tmp_path, user_id="alice", session_id="chat-1")
    assert len({alice.temp_dir, bob.temp_dir, nobody.temp_dir}) == 3
    assert again.temp_dir == alice.temp_dir
    assert (
        session_key("a", "b") != session_key("a\x00", "b") != session_key(None, "b") == session_key("", "b")
    )
    assert session_folder_name('a", "b', "c") != session_folder_name("a", 'b", "c')


def test_using_a_session_folder_renews_its_time_stamp(tmp_path: Path) -> None:
    """The scratch clean-up removes idle folders only; each use marks a folder as in use."""
    folder = session_temp_dir(tmp_path, user_id="u", session_id="s")
    os.utime(folder, (1_000_000, 1_000_000))
    assert session_temp_dir(tmp_path, user_id="u", session_id="s") == folder
    assert folder.stat().st_mtime > 1_000_000


def test_a_session_opened_again_renews_its_folders_time_stamp(table: ProcessTable, tmp_path: Path) -> None:
    """A process of a session whose folder exists marks it as in use (the clean-up keeps it), without
    making one for a session that has none."""
    folder = session_temp_dir(tmp_path, user_id="u", session_id="s")
    os.utime(folder, (1_000_000, 1_000_000))
    assert spawn(table, tmp_path, user_id="u", session_id="s").temp_dir == folder
    assert folder.stat().st_mtime > 1_000_000
    assert not spawn(table, tmp_path, user_id="u", session_id="t").temp_dir.exists()  # type: ignore[union-attr]


def test_no_session_means_no_scratch_folder(table: ProcessTable, tmp_path: Path) -> None:
    proc = spawn(table, tmp_path / "tmp")
    assert proc.temp_dir is None
    assert not (tmp_path / "tmp").exists()


def test_processes_of_one_session_share_its_folder(table: ProcessTable, tmp_path: Path) -> None:
    a = spawn(table, tmp_path, session_id="s")
    b = spawn(table, tmp_path, session_id="s")
    c = spawn(table, tmp_path, session_id="t")
    assert a.temp_dir == b.temp_dir != c.temp_dir


# -- children -------------------------------------------------------------------------------------


def test_a_child_inherits_session_user_and_budget_group(table: ProcessTable, tmp_path: Path) -> None:
    parent = spawn(table, tmp_path, user_id="u", session_id="s")
    child = spawn(table, tmp_path, REVIEW, parent=parent)
    assert (child.user_id, child.session_id, child.parent_pid) == ("u", "s", parent.pid)
    assert child.temp_dir == parent.temp_dir
    assert child.budget is parent.budget
    assert table.children(parent.pid) == [child]
    assert table.children(child.pid) == []


def test_a_child_may_be_given_its_own_session_and_user(table: ProcessTable, tmp_path: Path) -> None:
    parent = spawn(table, tmp_path, user_id="u", session_id="s")
    child = spawn(table, tmp_path, REVIEW, parent=parent, user_id="v", session_id="t")
    assert (child.user_id, child.session_id) == ("v", "t")
    assert child.temp_dir == session_temp_dir(tmp_path, user_id="v", session_id="t")
    assert child.budget is parent.budget


def test_a_child_of_a_terminated_parent_is_refused(table: ProcessTable, tmp_path: Path) -> None:
    parent = spawn(table, tmp_path)
    table.terminate(parent.pid)
    with pytest.raises(ProcessError, match=f"parent process {parent.pid} is not running"):
        spawn(table, tmp_path, REVIEW, parent=parent)
    assert table.all() == []


# -- terminate ----------------------------------------------------------------------------------------


def test_terminate_ends_the_process_and_all_its_descendants(table: ProcessTable, tmp_path: Path) -> None:
    root = spawn(table, tmp_path, session_id="s")
    child = spawn(table, tmp_path, REVIEW, parent=root)
    grandchild = spawn(table, tmp_path, REVIEW, parent=child)
    other = spawn(table, tmp_path, session_id="s")
    ended = table.terminate(root.pid)
    assert ended == [root, child, grandchild]
    assert all(p.state is ProcessState.TERMINATED and p.terminated for p in ended)
    assert table.all() == [other] and other.state is ProcessState.RUNNING
    assert table.get(child.pid) is None and table.children(root.pid) == []


def test_terminating_a_child_leaves_its_parent(table: ProcessTable, tmp_path: Path) -> None:
    parent = spawn(table, tmp_path)
    a = spawn(table, tmp_path, REVIEW, parent=parent)
    b = spawn(table, tmp_path, REVIEW, parent=parent)
    assert table.terminate(a.pid) == [a]
    assert table.children(parent.pid) == [b]
    assert not parent.terminated


def test_terminate_is_idempotent_and_ignores_unknown_pids(table: ProcessTable, tmp_path: Path) -> None:
    proc = spawn(table, tmp_path)
    assert table.terminate(proc.pid) == [proc]
    assert table.terminate(proc.pid) == []
    assert table.terminate("no-such-pid") == []


def test_terminate_keeps_the_session_folder(table: ProcessTable, tmp_path: Path) -> None:
    proc = spawn(table, tmp_path, session_id="s")
    assert proc.temp_dir is not None
    (scratch_made(proc.temp_dir) / "notes.txt").write_text("kept", encoding="utf-8")
    table.terminate(proc.pid)
    assert (proc.temp_dir / "notes.txt").read_text(encoding="utf-8") == "kept"


def test_concurrent_spawns_and_terminations_keep_the_table_consistent(
    table: ProcessTable, tmp_path: Path
) -> None:
    root = spawn(table, tmp_path)

    def churn(_: int) -> None:
        for _ in range(50):
            table.terminate(spawn(table, tmp_path, REVIEW, parent=root).pid)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(churn, range(8)))
    assert table.all() == [root] and table.children(root.pid) == []


# -- budgets -------------------------------------------------------------------------------------------


def test_parent_and_child_spend_one_budget(table: ProcessTable, tmp_path: Path) -> None:
    parent = spawn(table, tmp_path)
    child = spawn(table, tmp_path, REVIEW, parent=parent)
    parent.charge(30)
    child.charge(50)
    assert parent.budget.used == 80 and parent.budget.remaining == 20
    assert (parent.tokens_used, child.tokens_used) == (30, 50)
    child.charge(20)
    with pytest.raises(BudgetExhausted) as caught:
        parent.budget.reserve(1, 1)
    assert str(caught.value) == "caller budget exhausted"
    with pytest.raises(BudgetExhausted, match=r"^caller budget exhausted$"):
        child.budget.reserve(1, 1)


def test_budget_exhausted_is_a_helper_error_with_the_exact_text() -> None:
    error = BudgetExhausted()
    assert isinstance(error, HelperError)
    assert str(error) == "caller budget exhausted"


def test_charging_never_refuses_tokens_already_spent() -> None:
    group = BudgetGroup(10)
    group.release(group.reserve(1, 10))
    group.charge(25)  # an answer that came back bigger than what was left still counts
    assert group.used == 25 and group.remaining == 0 and group.exhausted
    with pytest.raises(BudgetExhausted):
        group.reserve(1, 10)


def test_tokens_held_by_calls_in_flight_do_not_exhaust_a_budget() -> None:
    """A call holding everything left makes `remaining` 0, yet the budget is only busy: a new
    sub-agent must wait for the hold to come back, not be refused (S17)."""
    outer = BudgetGroup(100)
    inner = BudgetGroup(None, outer=outer)
    held = inner.reserve(1, 100)
    assert outer.remaining == 0 and not outer.exhausted and not inner.exhausted
    inner.charge(30)
    inner.release(held)
    assert outer.remaining == 70 and not outer.exhausted
    outer.charge(70)
    assert outer.exhausted and inner.exhausted  # spent, in the group or one around it


def test_an_unlimited_group_never_runs_out() -> None:
    group = BudgetGroup()
    group.charge(10**9)
    assert group.reserve(1, 10**6) == 10**6
    assert group.remaining is None and not group.exhausted


def test_bad_limits_and_charges_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 token"):
        BudgetGroup(0)
    with pytest.raises(ValueError, match="negative"):
        BudgetGroup(5).charge(-1)


def test_a_child_template_budget_is_a_group_inside_the_parents(table: ProcessTable, tmp_path: Path) -> None:
    capped = TemplateSpec(name="review-agent", instructions="judge", budget_tokens=30)
    parent = spawn(table, tmp_path)  # 100 tokens
    child = spawn(table, tmp_path, capped, parent=parent)
    assert child.budget is not parent.budget and child.budget.outer is parent.budget
    child.charge(20)
    assert parent.budget.used == 20 and child.budget.remaining == 10  # held to its own cap
    parent.charge(75)
    assert child.budget.remaining == 5  # and to what the parent has left
    child.charge(10)
    with pytest.raises(BudgetExhausted):
        child.budget.reserve(1, 1)
    with pytest.raises(BudgetExhausted):
        parent.budget.reserve(1, 1)


def test_a_root_from_an_unbudgeted_template_is_unlimited(table: ProcessTable, tmp_path: Path) -> None:
    proc = spawn(table, tmp_path, REVIEW)
    assert proc.budget.limit is None and proc.budget.remaining is None


def test_concurrent_charges_never_lose_tokens(table: ProcessTable, tmp_path: Path) -> None:
    template = TemplateSpec(name="t", instructions="x", budget_tokens=10**9)
    parent = spawn(table, tmp_path, template)
    children = [spawn(table, tmp_path, REVIEW, parent=parent) for _ in range(3)]
    procs = [parent, *children]
    start = threading.Barrier(16)

    def work(i: int) -> None:
        start.wait()
        for _ in range(2000):
            procs[i % 4].charge(3)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(work, range(16)))
    assert parent.budget.used == 16 * 2000 * 3
    assert [p.tokens_used for p in procs] == [4 * 2000 * 3] * 4


# -- identity ------------------------------------------------------------------------------------------


def test_caller_carries_the_process_identity_and_allowed_tools(table: ProcessTable, tmp_path: Path) -> None:
    services = Services()
    proc = spawn(table, tmp_path, user_id="u", session_id="s", name="Алиса")
    caller = proc.caller(services)
    assert caller == Caller(
        pid=proc.pid,
        agent="Алиса",
        session_id="s",
        user_id="u",
        template="hello-agent",
        temp_dir=proc.temp_dir,
        allowed_tools=frozenset({"text_stats", "wordcount"}),
        services=services,
        process=proc,  # what llm() charges (S9.2)
    )
    assert caller.identity() == {
        "pid": proc.pid,
        "session_id": "s",
        "user_id": "u",
        "template": "hello-agent",
        "temp_dir": str(proc.temp_dir),
    }


def test_a_template_without_tools_allows_none(table: ProcessTable, tmp_path: Path) -> None:
    proc = spawn(table, tmp_path, TemplateSpec(name="bare", instructions="x"))
    caller = proc.caller(Services())
    assert caller.allowed_tools == frozenset()  # not None, which would mean every tool
    assert caller.identity() == {
        "pid": proc.pid,
        "session_id": None,
        "user_id": None,
        "template": "bare",
        "temp_dir": None,
    }
