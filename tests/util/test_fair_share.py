"""Who goes next (fair_share.py): the waiting user with the fewest running, then the longest waiter."""

from __future__ import annotations

import pytest

from agentkernel.util.fair_share import FairQueue


def test_a_user_with_none_running_goes_before_one_with_many() -> None:
    queue: FairQueue[str] = FairQueue()
    for _ in range(3):
        queue.start("alice")
    queue.push("alice", "a1")
    queue.push("bob", "b1")  # came later, but bob has nothing running
    assert queue.pop() == ("bob", "b1")
    assert queue.pop() == ("alice", "a1")
    assert queue.pop() is None
    assert (queue.running("alice"), queue.running("bob")) == (4, 1)


def test_equal_shares_take_turns_round_robin() -> None:
    queue: FairQueue[str] = FairQueue()
    for item in ("a1", "a2", "a3"):
        queue.push("alice", item)
    for item in ("b1", "b2"):
        queue.push("bob", item)
    queue.push(None, "k1")  # the kernel's own calls are one more user
    order = [queue.pop() for _ in range(6)]
    assert order == [
        ("alice", "a1"),
        ("bob", "b1"),
        (None, "k1"),
        ("alice", "a2"),
        ("bob", "b2"),
        ("alice", "a3"),
    ]


def test_finishing_moves_a_user_up_again() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.start("alice")
    queue.start("bob")
    queue.start("bob")
    queue.push("bob", "b")
    queue.push("alice", "a")
    queue.finish("bob")
    queue.finish("bob")  # bob now has none running, alice one
    assert queue.pop() == ("bob", "b")


def test_per_key_holds_a_user_back_while_others_run() -> None:
    queue: FairQueue[str] = FairQueue(per_key=2)
    for item in ("a1", "a2", "a3"):
        queue.push("alice", item)
    assert [queue.pop(), queue.pop(), queue.pop()] == [("alice", "a1"), ("alice", "a2"), None]
    queue.push("bob", "b1")
    assert queue.pop() == ("bob", "b1")
    queue.finish("alice")
    assert queue.pop() == ("alice", "a3")
    assert len(queue) == 0


def test_removed_items_never_come_out_and_others_keep_their_place() -> None:
    queue: FairQueue[object] = FairQueue()
    first, gone, last = object(), object(), object()
    for item in (first, gone, last):
        queue.push("alice", item)
    assert queue.remove("alice", gone) and not queue.remove("alice", gone)
    assert not queue.remove("bob", gone)
    assert [queue.pop(), queue.pop(), queue.pop()] == [("alice", first), ("alice", last), None]
    assert queue.waiting("alice") == 0 and len(queue) == 0


def test_a_chosen_item_cannot_be_removed() -> None:
    queue: FairQueue[str] = FairQueue()
    queue.push("alice", "a")
    assert queue.pop() == ("alice", "a")
    assert not queue.remove("alice", "a")  # its waiter must hand on what it was given instead


def test_drain_takes_every_waiting_item_capped_ones_too() -> None:
    queue: FairQueue[str] = FairQueue(per_key=1)
    queue.start("alice")
    queue.push("alice", "a1")
    queue.push("bob", "b1")
    assert sorted(queue.drain(), key=str) == [("alice", "a1"), ("bob", "b1")]
    assert len(queue) == 0 and queue.pop() is None
    assert queue.running("alice") == 1  # what runs still counts until it finishes


def test_finishing_what_never_ran_is_a_bug_said_so() -> None:
    queue: FairQueue[str] = FairQueue()
    with pytest.raises(RuntimeError, match="without a running item"):
        queue.finish("alice")
    with pytest.raises(ValueError, match="at least 1"):
        FairQueue(per_key=0)
