"""A chat's session in the message store: the store is the truth of its history.

Several processes may serve one session (two `agentkernel serve` on one
project), so a chat's history in memory is only a cache of its transcript.
`SessionRecords` is both sides of that:

- the loop's transcript (`append`): every record the chat's turns write,
  fenced by the running turn's lease when it has one (`lease`: the store
  refuses the write once the lease is another turn's), and counted;
- the check before a turn (`refreshed`): the records the session has since
  the history was read (one range of the session's index), against the
  ones this chat wrote itself. Any other record (another process's turn, a
  cron job's delivery) means the history is stale: it is read again from
  the transcript, as a chat resumed after a restart reads it (the user's
  messages and the answers). Otherwise the cache stands, tool calls and all.
"""

from __future__ import annotations

from typing import Any

from agentkernel.llm.base import ChatMessage
from agentkernel.ports import MessageStore, Owner
from agentkernel.services.memory import chat_messages


class SessionRecords:
    """One chat's reads and writes of its session's transcript; see the module docstring.

    Writes come from the chat's turns, on the event loop; the check runs on
    a worker thread between turns (the chat's lock), so they never overlap.
    """

    def __init__(self, store: MessageStore, session_id: str, user_id: str | None, limit: int) -> None:
        self.store = store
        self.session_id = session_id
        self.user_id = user_id
        self.limit = limit
        self.lease: str | None = None  # the running turn's lease token: its writes are fenced by it
        self._owner = Owner(user_id, unrecorded=True)
        self._mark = 0  # the last record id the history reflects
        self._written = 0  # records this chat wrote since then

    def append(
        self,
        session_id: str,
        role: str,
        kind: str,
        content: str,
        meta: dict[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> int:
        """The loop's transcript: a record of the session, written only while the turn's lease holds."""
        if session_id != self.session_id:  # not this chat's session: nothing to fence or count
            return self.store.append(session_id, role, kind, content, meta, user_id=user_id)
        record = self.store.append(session_id, role, kind, content, meta, user_id=user_id, lease=self.lease)
        self._written += 1
        return record

    def history(self) -> list[ChatMessage]:
        """The conversation as the transcript holds it now (its last `limit` records), marked as read."""
        records = self.store.history(self.session_id, self.limit, owner=self._owner)
        # a record written after this read is past the mark: the next check reads again
        self._mark, self._written = (records[-1].id if records else 0), 0
        return chat_messages(records)

    def refreshed(self) -> list[ChatMessage] | None:
        """The history read again when the store has records this chat did not write; None if current."""
        count, last = self.store.changes(self.session_id, self._mark, owner=self._owner)
        if count == self._written:
            self._mark, self._written = last, 0
            return None
        return self.history()


__all__ = ["SessionRecords"]
