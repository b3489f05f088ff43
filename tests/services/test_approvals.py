"""Approvals in the message store's file: asked once, decided once, by whom, rules, decision URLs.

Every test but those about the message store's file and its secret runs on
both stores: the SQLite file and the PostgreSQL database (S27.2, tests/pg.py).
Two stores on one file (or database) stand for two processes; the race between deciders
and the secret's creation run real ones. An expiry is made by asking with a
fraction of a second's timeout and waiting until the clock is past it,
never by timing anything.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkernel.errors import AgentKernelError
from agentkernel.services.approval_tokens import ELSEWHERE, EXPIRED, FORGED, USED
from agentkernel.services.approval_values import (
    APPROVED,
    DENIED,
    LINK,
    PENDING,
    Approval,
    ApprovalClosed,
    ApprovalNotFound,
    ApprovalStore,
    BadDecision,
    PendingApproval,
)
from agentkernel.services.approval_values import EXPIRED as EXPIRED_STATUS
from agentkernel.services.approvals import Approvals, TokenRefused
from agentkernel.services.approvals_pg import PostgresApprovals
from agentkernel.services.install_secret import SECRET_FILE, SecretRefused, install_secret
from agentkernel.services.turn_leases import TurnLeases
from tests.conftest import wait_until

SHORT = 1.0  # a decision made just after asking must land first, on a loaded machine too
WAIT_SECS = 120.0  # an upper bound for another process, never a measured time
RACES = 40

DECIDER = textwrap.dedent(
    """
    import sys
    from agentkernel.services.approval_values import ApprovalClosed
    from agentkernel.services.approvals import Approvals

    where, who, decision = sys.argv[1], sys.argv[2], sys.argv[3]
    if where.startswith("postgresql://"):
        from agentkernel.services.approvals_pg import PostgresApprovals

        store = PostgresApprovals(where)
    else:
        store = Approvals(where)
    print("ready", flush=True)
    for call in sys.stdin:  # each round: the test hands both processes the same call at once
        try:
            store.decide("r1", call.strip(), who, decision, reason="no" if decision == "deny" else None)
            print("won", flush=True)
        except ApprovalClosed as closed:  # found as the winner left it, never as it was before
            print("closed" if "was decided already" in str(closed) else str(closed), flush=True)
    """
)

REDEEMER = textwrap.dedent(
    """
    import sys
    from agentkernel.services.approval_values import ApprovalClosed
    from agentkernel.services.approvals import Approvals, TokenRefused

    where = sys.argv[1]
    if where.startswith("postgresql://"):
        from agentkernel.services.approvals_pg import PostgresApprovals

        store = PostgresApprovals(where)
    else:
        store = Approvals(where)
    print("ready", flush=True)
    for token in sys.stdin:  # each round: the test hands both processes the same token at once
        try:
            store.redeem(token.strip())
            print("won", flush=True)
        except TokenRefused as refused:
            print(refused.reason, flush=True)
    """
)

SECRET_MAKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentkernel.services.install_secret import install_secret

    print("ready", flush=True)
    sys.stdin.readline()
    print(install_secret(Path(sys.argv[1])).hex(), flush=True)
    """
)


def pending(call_id: str = "c1", run_id: str = "r1", **changes: object) -> PendingApproval:
    fields: dict[str, object] = {
        "run_id": run_id,
        "call_id": call_id,
        "session_id": "s1",
        "user_id": "alice",
        "template": "assistant",
        "tool": "send_invoice",
        "args": {"to": "bob@example.com", "amount": 12},
        "question": "send it?",
        "origin": "llm",
    }
    fields.update(changes)
    return PendingApproval(**fields)  # type: ignore[arg-type]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "messages.db"


Store = Approvals | PostgresApprovals


def open_store(where: str | Path) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    return PostgresApprovals(str(where)) if str(where).startswith("postgresql://") else Approvals(where)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, path: Path) -> str:
    """Where the approvals live: the message store's file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(path)
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store(where: str) -> Iterator[Store]:
    with open_store(where) as opened:
        yield opened


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()
            process.wait()


def start(started: list[subprocess.Popen[str]], code: str, *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(process)
    return process


def line_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        assert process.stderr is not None
        pytest.fail(f"the other process ended: {process.wait(WAIT_SECS)} {process.stderr.read()}")
    return line


def go(*started: subprocess.Popen[str]) -> None:
    """Let every process (each said `ready`) go on at once."""
    for process in started:
        assert line_of(process) == "ready"
    for process in started:
        assert process.stdin is not None
        process.stdin.write("\n")
        process.stdin.flush()


def expired(approval: Approval) -> bool:
    return time.time() > approval.expires_at


# -- asking --------------------------------------------------------------------------------------------


def test_an_approval_asked_is_pending_until_its_timeout_and_asking_again_finds_it_unchanged(
    store: Store,
) -> None:
    assert isinstance(store, ApprovalStore)
    asked = store.ask(pending(timeout_secs=3600))
    assert asked.status == PENDING and asked.decision is None
    assert asked.expires_at == asked.created_at + 3600
    assert store.ask(pending(timeout_secs=10, question="another question")) == asked
    assert store.get("r1", "c1") == asked
    assert store.get("r1", "c2") is None


def test_a_call_decided_meanwhile_is_found_decided_when_its_run_asks_again(store: Store) -> None:
    store.ask(pending())
    decided = store.decide("r1", "c1", "alice", "approve")
    assert store.ask(pending()) == decided
    assert decided.status == APPROVED


def test_a_pending_approval_outlives_a_restart_with_its_expiry(where: str) -> None:
    with open_store(where) as before:
        asked = before.ask(pending())
    with open_store(where) as after:
        assert after.get("r1", "c1") == asked
        assert after.pending_of_run("r1") == [asked]
        assert after.ask(pending()).expires_at == asked.expires_at
        assert after.decide("r1", "c1", "alice", "approve").status == APPROVED


def test_the_approvals_share_the_message_stores_file_with_the_runs(path: Path) -> None:
    with TurnLeases(path) as leases, Approvals(path) as approvals:
        leases.take("s1", "alice", 600.0)
        approvals.ask(pending())
        assert leases.running("alice") == 1
        assert approvals.pending_of_run("r1")[0].call_id == "c1"


def test_a_megabyte_of_args_and_question_round_trips(store: Store) -> None:
    big = {"text": "x" * 1_000_000, "rows": list(range(1000))}
    asked = store.ask(pending(args=big, question="q" * 1_000_000))
    assert store.get("r1", "c1") == asked
    assert asked.args == big and len(asked.question) == 1_000_000
    edited = store.decide("r1", "c1", "alice", "edit", args={"text": "y" * 1_000_000})
    assert store.get("r1", "c1") == edited
    assert edited.args_to_run == {"text": "y" * 1_000_000}


def test_an_approval_asked_with_args_not_an_object_or_no_time_is_refused() -> None:
    with pytest.raises(BadDecision, match="args must be a JSON object, not list"):
        pending(args=[1, 2])
    with pytest.raises(BadDecision, match="timeout_secs must be positive, not 0"):
        pending(timeout_secs=0)


# -- deciding ------------------------------------------------------------------------------------------


def test_approve_deny_and_edit_are_recorded_with_who_and_why(store: Store) -> None:
    for call in ("c1", "c2", "c3"):
        store.ask(pending(call))
    approved = store.decide("r1", "c1", "alice", "approve")
    denied = store.decide("r1", "c2", "alice", "deny", reason="not to bob")
    edited = store.decide("r1", "c3", "alice", "edit", args={"to": "carol@example.com", "amount": 12})
    assert (approved.status, approved.decided_by, approved.args_to_run) == (
        APPROVED,
        "alice",
        {"to": "bob@example.com", "amount": 12},
    )
    assert (denied.status, denied.decision, denied.reason) == (DENIED, "deny", "not to bob")
    assert (edited.status, edited.decision, edited.args_to_run["to"]) == (
        APPROVED,
        "edit",
        "carol@example.com",
    )
    assert edited.args["to"] == "bob@example.com"  # what was asked about stays
    assert [store.get("r1", c) for c in ("c1", "c2", "c3")] == [approved, denied, edited]
    assert store.pending_of_run("r1") == []


@pytest.mark.parametrize(
    ("decision", "args", "remember", "message"),
    [
        ("maybe", None, False, "decision must be approve, deny or edit; not 'maybe'"),
        ("edit", None, False, "an edit needs args"),
        ("edit", ["a"], False, "an edit needs args"),
        ("approve", {"to": "x"}, False, "args go with an edit only, not with 'approve'"),
        ("deny", None, True, "remember goes with approve only, not with 'deny'"),
    ],
)
def test_a_decision_wrong_in_itself_is_refused_and_the_approval_stays_pending(
    store: Store, decision: str, args: object, remember: bool, message: str
) -> None:
    store.ask(pending())
    with pytest.raises(BadDecision, match=message):
        store.decide("r1", "c1", "alice", decision, args=args, remember=remember)  # type: ignore[arg-type]
    assert store.get("r1", "c1").status == PENDING  # type: ignore[union-attr]


def test_another_user_is_told_there_is_no_such_approval_in_the_same_words_as_for_none(
    store: Store,
) -> None:
    store.ask(pending())
    with pytest.raises(ApprovalNotFound) as theirs:
        store.decide("r1", "c1", "mallory", "approve")
    with pytest.raises(ApprovalNotFound) as none:
        store.decide("r1", "c9", "mallory", "approve")
    assert str(theirs.value) == "run r1 has no approval of call c1 that you may decide"
    assert str(none.value) == "run r1 has no approval of call c9 that you may decide"
    assert store.get("r1", "c1").status == PENDING  # type: ignore[union-attr]


def test_an_approver_the_tool_names_may_decide_and_sees_it_pending(store: Store) -> None:
    store.ask(pending(approvers=("bob", "carol")))
    assert [a.call_id for a in store.pending_for("bob")] == ["c1"]
    decided = store.decide("r1", "c1", "carol", "deny", reason="carol says no")
    assert (decided.decided_by, decided.approvers) == ("carol", ("bob", "carol"))
    assert store.pending_for("bob") == [] and store.pending_for("alice") == []


def test_a_second_decision_is_refused_saying_who_decided_and_when(store: Store) -> None:
    store.ask(pending(approvers=("bob",)))
    store.decide("r1", "c1", "bob", "approve")
    with pytest.raises(ApprovalClosed, match=r"was decided already: approve by bob at 20\d\d-") as closed:
        store.decide("r1", "c1", "alice", "deny")
    assert closed.value.approval.decided_by == "bob"
    assert store.get("r1", "c1").decided_by == "bob"  # type: ignore[union-attr]


def test_a_decision_after_the_expiry_is_refused_saying_when_it_expired(store: Store) -> None:
    asked = store.ask(pending(timeout_secs=SHORT))
    wait_until(lambda: expired(asked), "the approval's expiry")
    with pytest.raises(ApprovalClosed, match=r"expired at 20\d\d-.*the call is denied"):
        store.decide("r1", "c1", "alice", "approve")
    assert store.get("r1", "c1").status == PENDING  # type: ignore[union-attr]  # until expire_due


def test_two_processes_deciding_each_approval_at_once_one_wins_and_the_other_is_refused(
    where: str, store: Store, processes: list[subprocess.Popen[str]]
) -> None:
    alice = start(processes, DECIDER, where, "alice", "approve")
    bob = start(processes, DECIDER, where, "bob", "deny")
    assert line_of(alice) == line_of(bob) == "ready"
    for n in range(RACES):
        store.ask(pending(f"c{n}", approvers=("bob",)))
        for process in (alice, bob):  # both get the call before either answers
            assert process.stdin is not None
            process.stdin.write(f"c{n}\n")
            process.stdin.flush()
        answers = {"alice": line_of(alice), "bob": line_of(bob)}
        assert sorted(answers.values()) == ["closed", "won"], answers
        [winner] = [who for who, answer in answers.items() if answer == "won"]
        decided = store.get("r1", f"c{n}")
        assert decided is not None
        assert (decided.decided_by, decided.status) == (winner, APPROVED if winner == "alice" else DENIED)


# -- listing and expiring ------------------------------------------------------------------------------


def test_pending_for_lists_what_a_user_may_decide_newest_first_within_the_limit(store: Store) -> None:
    for n in range(5):
        store.ask(pending(f"c{n}"))
    store.ask(pending("b1", run_id="r2", user_id="bob", approvers=("alice",)))
    store.ask(pending("b2", run_id="r3", user_id="bob"))
    store.decide("r1", "c0", "alice", "approve")
    assert [a.call_id for a in store.pending_for("alice")] == ["b1", "c4", "c3", "c2", "c1"]
    assert [a.call_id for a in store.pending_for("alice", most=2)] == ["b1", "c4"]
    assert [a.call_id for a in store.pending_for("bob")] == ["b2", "b1"]
    assert store.pending_for("mallory") == []


def test_expire_due_marks_the_pending_ones_past_their_expiry_and_returns_them(store: Store) -> None:
    short = [store.ask(pending(f"s{n}", timeout_secs=SHORT)) for n in range(3)]
    store.ask(pending("long", timeout_secs=3600))
    decided = store.ask(pending("decided", timeout_secs=SHORT))
    store.decide("r1", "decided", "alice", "deny")
    wait_until(lambda: all(expired(a) for a in [*short, decided]), "the short approvals' expiry")
    assert [a.call_id for a in store.pending_for("alice")] == ["long"]  # past expiry: not listed
    first = store.expire_due(most=2)
    rest = store.expire_due()
    assert [a.call_id for a in first + rest] == ["s0", "s1", "s2"]
    assert {a.status for a in first + rest} == {EXPIRED_STATUS}
    assert store.get("r1", "s0").status == EXPIRED_STATUS  # type: ignore[union-attr]
    assert store.expire_due() == []
    assert [a.call_id for a in store.pending_of_run("r1")] == ["long"]
    with pytest.raises(ApprovalClosed, match="expired at"):
        store.decide("r1", "s0", "alice", "approve")


def test_expire_due_goes_by_the_time_it_is_given(store: Store) -> None:
    asked = store.ask(pending(timeout_secs=3600))
    assert store.expire_due(now=asked.expires_at - 1) == []
    assert [a.call_id for a in store.expire_due(now=asked.expires_at)] == ["c1"]


# -- rules ---------------------------------------------------------------------------------------------


def test_an_approval_remembered_is_a_rule_of_the_owner_for_that_tool_and_template(store: Store) -> None:
    store.ask(pending(approvers=("bob",)))
    assert not store.allowed_by_rule("alice", "send_invoice", "assistant")
    store.decide("r1", "c1", "bob", "approve", remember=True)
    assert store.allowed_by_rule("alice", "send_invoice", "assistant")
    assert not store.allowed_by_rule("alice", "send_invoice", "other_template")
    assert not store.allowed_by_rule("alice", "other_tool", "assistant")
    assert not store.allowed_by_rule("bob", "send_invoice", "assistant")
    [rule] = store.rules_of("alice")
    assert (rule.tool, rule.template, rule.created_by, rule.run_id, rule.call_id) == (
        "send_invoice",
        "assistant",
        "bob",
        "r1",
        "c1",
    )


def test_a_refused_decision_adds_no_rule(store: Store) -> None:
    store.ask(pending())
    store.decide("r1", "c1", "alice", "deny")
    with pytest.raises(ApprovalClosed):
        store.decide("r1", "c1", "alice", "approve", remember=True)
    assert store.rules_of("alice") == []


def test_rules_are_listed_newest_first_once_each_and_deleted_by_their_owner_only(store: Store) -> None:
    first = store.add_rule("alice", "a_tool", "t1")
    second = store.add_rule("alice", "b_tool", "t1")
    assert store.add_rule("alice", "a_tool", "t1") == first  # the same rule again: the one there
    store.add_rule("bob", "a_tool", "t1")
    assert store.rules_of("alice") == [second, first]
    assert not store.delete_rule("bob", first.id)
    assert store.delete_rule("alice", first.id)
    assert not store.delete_rule("alice", first.id)
    assert store.rules_of("alice") == [second]
    assert store.allowed_by_rule("bob", "a_tool", "t1") and not store.allowed_by_rule("alice", "a_tool", "t1")
    assert first.to_json()["tool"] == "a_tool" and "user_id" not in first.to_json()


# -- decision URLs -------------------------------------------------------------------------------------


def test_a_token_decides_once_by_link_and_a_replay_is_refused_as_used(store: Store) -> None:
    store.ask(pending())
    token = store.decision_token("r1", "c1", "approve")
    decided = store.redeem(token, run_id="r1", call_id="c1")
    assert (decided.status, decided.decided_by) == (APPROVED, LINK)
    with pytest.raises(TokenRefused, match="used at 20") as replay:
        store.redeem(token)
    assert replay.value.reason == USED


def test_of_two_tokens_for_one_call_the_first_used_decides_and_the_other_finds_it_closed(
    store: Store,
) -> None:
    store.ask(pending())
    approve, deny = store.decision_token("r1", "c1", "approve"), store.decision_token("r1", "c1", "deny")
    assert store.redeem(deny).status == DENIED
    with pytest.raises(ApprovalClosed, match="deny by link"):
        store.redeem(approve)


def test_a_deny_token_carries_its_reason_and_a_look_at_a_token_decides_nothing(store: Store) -> None:
    store.ask(pending())
    deny = store.decision_token("r1", "c1", "deny")
    granted, approval = store.granted(deny)
    assert (granted.decision, granted.run_id, granted.call_id) == ("deny", "r1", "c1")
    assert approval.status == PENDING and store.get("r1", "c1") == approval
    assert store.granted(deny)[1].status == PENDING  # looked at twice: still unused
    decided = store.redeem(deny, reason="not today")
    assert (decided.status, decided.reason) == (DENIED, "not today")
    assert store.get("r1", "c1").reason == "not today"  # type: ignore[union-attr]
    with pytest.raises(TokenRefused) as used:
        store.granted(deny)
    assert used.value.reason == USED
    with pytest.raises(TokenRefused) as forged:
        store.granted(flip(deny, 3))
    assert forged.value.reason == FORGED


def flip(text: str, at: int) -> str:
    """`text` with the character at `at` replaced by another of the url-safe alphabet."""
    return text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :]


def test_a_token_changed_anywhere_or_signed_elsewhere_is_refused_as_forged(
    tmp_path: Path, store: Store
) -> None:
    store.ask(pending())
    token = store.decision_token("r1", "c1", "approve")
    payload = token.split(".")[0]
    forged = [
        flip(token, 3),
        flip(token, len(payload) + 5),
        flip(token, len(token) - 1),
        payload,
        token + ".",
    ]
    with Approvals(tmp_path / "elsewhere" / "messages.db") as other_install:
        other_install.ask(pending())
        forged.append(other_install.decision_token("r1", "c1", "approve"))
    for text in forged:
        with pytest.raises(TokenRefused) as refused:
            store.redeem(text)
        assert refused.value.reason == FORGED, text
    assert store.get("r1", "c1").status == PENDING  # type: ignore[union-attr]


def test_a_token_rewritten_for_another_run_or_shown_at_another_calls_url_is_refused(store: Store) -> None:
    import base64

    store.ask(pending())
    store.ask(pending(run_id="r2", user_id="bob"))
    token = store.decision_token("r1", "c1", "approve")
    payload, mac = token.split(".")
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    fields[0] = "r2"
    rewritten = base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).rstrip(b"=")
    with pytest.raises(TokenRefused) as forged:
        store.redeem(f"{rewritten.decode()}.{mac}")
    assert forged.value.reason == FORGED
    with pytest.raises(TokenRefused, match="it decides call c1 of run r1") as elsewhere:
        store.redeem(token, run_id="r2", call_id="c1")
    assert elsewhere.value.reason == ELSEWHERE
    assert [store.get(r, "c1").status for r in ("r1", "r2")] == [PENDING, PENDING]  # type: ignore[union-attr]


def test_a_token_after_its_expiry_is_refused_as_expired(store: Store) -> None:
    asked = store.ask(pending(timeout_secs=SHORT))
    token = store.decision_token("r1", "c1", "approve")
    wait_until(lambda: expired(asked), "the approval's expiry")
    with pytest.raises(TokenRefused, match="valid until 20") as refused:
        store.redeem(token)
    assert refused.value.reason == EXPIRED


def test_no_token_is_made_for_a_call_not_pending_nor_for_an_edit(store: Store) -> None:
    with pytest.raises(ApprovalNotFound):
        store.decision_token("r1", "c1", "approve")
    store.ask(pending())
    with pytest.raises(BadDecision, match="a decision URL approves or denies; not 'edit'"):
        store.decision_token("r1", "c1", "edit")
    store.decide("r1", "c1", "alice", "deny")
    with pytest.raises(ApprovalClosed):
        store.decision_token("r1", "c1", "approve")


def test_a_token_verifies_in_another_process_store_on_the_same_install(where: str, store: Store) -> None:
    store.ask(pending())
    token = store.decision_token("r1", "c1", "deny")
    with open_store(where) as other:
        assert other.redeem(token).status == DENIED


def test_two_processes_redeeming_one_token_at_once_one_decides_and_the_other_is_told_it_was_used(
    where: str, store: Store, processes: list[subprocess.Popen[str]]
) -> None:
    first, second = (start(processes, REDEEMER, where) for _ in range(2))
    assert line_of(first) == line_of(second) == "ready"
    for n in range(RACES):
        store.ask(pending(f"c{n}"))
        token = store.decision_token("r1", f"c{n}", "approve")
        for process in (first, second):  # both get the token before either answers
            assert process.stdin is not None
            process.stdin.write(f"{token}\n")
            process.stdin.flush()
        assert sorted((line_of(first), line_of(second))) == [USED, "won"]
        assert store.get("r1", f"c{n}").decided_by == LINK  # type: ignore[union-attr]


# -- the secret ----------------------------------------------------------------------------------------


def test_the_secret_is_made_once_owner_only_beside_the_store_and_reused(path: Path) -> None:
    secret_file = path.parent / SECRET_FILE
    with Approvals(path) as store:
        assert not secret_file.exists()  # made on first use, not on open
        store.ask(pending())
        store.decision_token("r1", "c1", "approve")
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    made = secret_file.read_bytes()
    assert len(made) == 32
    assert install_secret(path.parent) == made
    with Approvals(path) as reopened:
        reopened.decision_token("r1", "c1", "deny")
    assert secret_file.read_bytes() == made
    assert [p.name for p in path.parent.iterdir() if "secret" in p.name] == [SECRET_FILE]


def test_processes_making_the_secret_at_once_end_with_one(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    makers = [start(processes, SECRET_MAKER, str(tmp_path / "state")) for _ in range(4)]
    go(*makers)
    secrets = {line_of(maker) for maker in makers}
    assert secrets == {(tmp_path / "state" / SECRET_FILE).read_bytes().hex()}


def test_a_secret_others_may_read_or_of_the_wrong_size_is_refused_naming_it(tmp_path: Path) -> None:
    secret_file = tmp_path / SECRET_FILE
    secret_file.write_bytes(b"k" * 32)
    secret_file.chmod(0o644)
    with pytest.raises(SecretRefused, match=r"secret.key: others may read or change it \(mode 0644"):
        install_secret(tmp_path)
    secret_file.chmod(0o600)
    assert install_secret(tmp_path) == b"k" * 32
    secret_file.write_bytes(b"short")
    with pytest.raises(SecretRefused, match="holds 5 bytes, not 32; delete it"):
        install_secret(tmp_path)


# -- clean-up ------------------------------------------------------------------------------------------


def test_sweep_removes_closed_approvals_and_spent_tokens_older_than_asked_in_bounded_steps(
    store: Store,
) -> None:
    for n in range(3):
        store.ask(pending(f"c{n}", approvers=("bob",)))
        store.decide("r1", f"c{n}", "alice", "approve")
    store.ask(pending("open"))
    short = store.ask(pending("link", timeout_secs=SHORT))
    token = store.redeem(store.decision_token("r1", "link", "deny"))
    assert token.decided_by == LINK
    wait_until(lambda: expired(short), "the used token's expiry")
    later = time.time() + 1
    assert store.sweep(later, most=2) == 2 + 1  # two approvals, the one token
    assert store.sweep(later) == 2
    assert store.sweep(later) == 0
    assert [a.call_id for a in store.pending_of_run("r1")] == ["open"]
    assert store.get("r1", "c0") is None
    assert store.pending_for("bob") == []


def test_sweep_keeps_what_was_closed_after_the_time_given(store: Store) -> None:
    store.ask(pending())
    decided = store.decide("r1", "c1", "alice", "approve")
    assert decided.decided_at is not None
    assert store.sweep(decided.decided_at) == 0
    assert store.get("r1", "c1") == decided


def test_a_file_whose_approvals_a_newer_kernel_wrote_is_refused_naming_the_version(path: Path) -> None:
    with Approvals(path):
        pass
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE approvals_schema SET version = 9")
    conn.close()
    with pytest.raises(AgentKernelError, match="approvals in the message store have schema version 9, newer"):
        Approvals(path)


def test_a_question_or_reason_with_a_lone_surrogate_is_kept_as_valid_text(store: Store) -> None:
    """A person's reason (JSON may spell `\\ud800`) and a hook's question are free text: kept with U+FFFD
    where a lone surrogate stood, never a write that fails (a 500 for the decision)."""
    asked = store.ask(pending(question="send \ud800 it?", args={"to": "\udfff"}))
    decided = store.decide("r1", "c1", "alice", "deny", "not \ud800 now")
    assert asked.question == "send \ufffd it?" and asked.args == {"to": "\udfff"}  # JSON keeps it escaped
    assert decided.reason == "not \ufffd now" and store.get("r1", "c1") == decided


def test_a_question_or_reason_with_a_nul_is_kept_where_the_database_can_hold_it(
    where: str, store: Store
) -> None:
    """PostgreSQL's text holds no NUL: U+FFFD takes its place there, never a failed write; a file keeps it."""
    asked = store.ask(pending(question="send\x00it?", args={"to": "\x00"}))
    decided = store.decide("r1", "c1", "alice", "deny", "not\x00now")
    nul = "\ufffd" if where.startswith("postgresql://") else "\x00"
    assert (asked.question, decided.reason) == (f"send{nul}it?", f"not{nul}now")
    assert asked.args == {"to": "\x00"} and store.get("r1", "c1") == decided  # JSON keeps it escaped
