"""A chat's session in the message store: the store is the truth of its history.

Several processes may serve one session (two `agentkernel serve` on one
project), so a chat's history in memory is only a cache of its transcript.
`SessionRecords` is both sides of that:

- the loop's transcript (`append_step`): every step the chat's turns write,
  under the running turn's run id (`run_id`, S25.1), fenced by its lease
  when it has one (`lease`: the store refuses the write once the lease is
  another turn's; the step that ends the run gives the lease back), and counted;
- the check before a turn (`refreshed`): the records the session has since
  the history was read (one range of the session's index), against the
  ones this chat wrote itself. Any other record (another process's turn, a
  cron job's delivery) means the history is stale: it is read again from
  the transcript, as a chat resumed after a restart reads it (the user's
  messages, the answers, the tool calls and their results). Otherwise the cache stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentkernel.llm.base import ChatMessage
from agentkernel.ports import Entry, MessageStore, Owner, Record
from agentkernel.services.memory import chat_messages, ends_run, run_journal


class SessionRecords:
    """One chat's reads and writes of its session's transcript; see the module docstring.

    Writes come from the chat's turns, on the event loop; the check runs
    between turns (the chat's lock), so they never overlap: on the event loop
    when the store answers at once (`current_at_once`), else on a worker thread.
    """

    def __init__(self, store: MessageStore, session_id: str, user_id: str | None, limit: int) -> None:
        self.store = store
        self.session_id = session_id
        self.user_id = user_id
        self.limit = limit
        self.lease: str | None = None  # the running turn's lease token: its writes are fenced by it
        self.run_id: str | None = None  # the running turn's run: its records are its steps
        self.released: str | None = None  # a lease token a step gave back with its run's end (`gave_back`)
        self._owner = Owner(user_id, unrecorded=True)
        self._mark = 0  # the last record id the history reflects
        self._written = 0  # records this chat wrote since then

    def append_step(
        self,
        session_id: str,
        entries: Sequence[Entry],
        *,
        user_id: str | None = None,
        run_update: Mapping[str, Any] | None = None,
        notes: Mapping[int, dict[str, Any]] | None = None,
    ) -> list[int]:
        """The loop's transcript: a step of the running turn, written only while the turn's lease holds."""
        if session_id != self.session_id:  # not this chat's session: nothing to fence or count
            return self.store.append_step(session_id, entries, user_id=user_id)
        ending = self.lease is not None and self.run_id is not None and ends_run(run_update)
        if ending:  # marked first: a renewal that finds the row gone meanwhile knows why (`gave_back`)
            self.released = self.lease
        try:
            ids = self.store.append_step(
                session_id,
                entries,
                user_id=user_id,
                lease=self.lease,
                run_id=self.run_id,
                run_update=run_update,
                notes=notes,
            )
        except BaseException:
            if ending:
                self.released = None
            raise
        self._written += len(ids)
        return ids

    def gave_back(self, lease: str) -> bool:
        """Whether a step of this chat ended its run under `lease`, giving the lease back with it (the
        store's `append_step`): its holder has nothing left to release, and a renewal that finds the
        row gone has not lost it."""
        return self.released == lease

    def history(self) -> list[ChatMessage]:
        """The conversation as the transcript holds it now (its last `limit` records), marked as read."""
        return chat_messages(self.records())

    def run_records(self, run_id: str) -> list[Record]:
        """The records of a run of this session, oldest first (its steps so far)."""
        return run_journal(self.store, run_id)

    def records(self) -> list[Record]:
        """The session's last `limit` records (this user's), marked as read."""
        records = self.store.history(self.session_id, self.limit, owner=self._owner)
        # a record written after this read is past the mark: the next check reads again
        self._mark, self._written = (records[-1].id if records else 0), 0
        return records

    def current_at_once(self) -> bool:
        """True when the store says at once (without waiting: `changes_at_once`) that the history is
        current, marked so; False when it is not, or the store cannot say without waiting: `refreshed`
        then, on a worker thread. Saves the event loop a worker thread's hop before most turns."""
        changed = self.store.changes_at_once(self.session_id, self._mark, owner=self._owner)
        if changed is None or changed[0] != self._written:
            return False
        self._mark, self._written = changed[1], 0
        return True

    def refreshed(self) -> list[ChatMessage] | None:
        """The history read again when the store has records this chat did not write; None if current."""
        count, last = self.store.changes(self.session_id, self._mark, owner=self._owner)
        if count == self._written:
            self._mark, self._written = last, 0
            return None
        return self.history()


__all__ = ["SessionRecords"]
