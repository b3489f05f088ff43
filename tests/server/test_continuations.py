"""Continuations (S6.3): opaque ids kept in the store, run as their owner through the one dispatch path.

Every test of the store but the one about the message store's file runs on
both: the SQLite file and the PostgreSQL database (S27.2, tests/pg.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.server.continuations import (
    ContinuationRows,
    ContinuationStore,
    arun_continuation,
    run_continuation,
    seal_visual,
)
from agentkernel.server.sealed_ids_pg import PostgresContinuationStore
from agentkernel.services.memory import SqliteMessageStore
from agentkernel.types import JSONObject, JSONValue, VisualBlock
from tests.conftest import ToolFactory
from tests.server.conftest import on_postgres, raw_rows

# page N of rows; the next page's args while N < 3; and who ran it, as caller() says
PAGES_JS = """
function run(args) {
    const page = args.page ?? 1;
    const blocks = [
        {
            type: "table",
            title: "page " + page,
            columns: [{ key: "n", title: "N" }],
            rows: [{ n: page * 10 + 1 }, { n: page * 10 + 2 }],
            continuation: page < 3 ? { args: { page: page + 1 } } : undefined,
        },
        { type: "text", text: JSON.stringify(caller()) },
    ];
    return { content: "page " + page, visual: blocks };
}
"""
PAGES_YAML = """\
parameters:
  type: object
  properties:
    page: { type: integer, minimum: 1 }
"""
TEMPLATE = "name: pager\ninstructions: page through tables\ntools: [pages]\n"


@pytest.fixture
def pager(make_tool: ToolFactory, project: Path) -> Path:
    make_tool("pages", PAGES_JS, yaml_extra=PAGES_YAML)
    make_tool("secret", 'function run(args) { return "the secret"; }')
    templates = project / "config" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "pager.yaml").write_text(TEMPLATE, encoding="utf-8")
    return project


@pytest.fixture
def pager_kernel(pager: Path) -> Iterator[Kernel]:
    with Kernel(load_kernel_config(pager / "config" / "kernel.yaml")) as built:
        yield built


Store = ContinuationStore | PostgresContinuationStore


def open_store(
    where: str, *, ttl_secs: float = 24 * 3600.0, clock: Callable[[], float] | None = None
) -> Store:
    """The PostgreSQL store for a postgresql:// URL, else the SQLite one on that file."""
    more: dict[str, Any] = {} if clock is None else {"clock": clock}
    if on_postgres(where):
        return PostgresContinuationStore(where, ttl_secs=ttl_secs, **more)
    return ContinuationStore(where, ttl_secs=ttl_secs, **more)


@pytest.fixture
def store(store_where: str) -> Iterator[Store]:
    with open_store(store_where) as opened:
        yield opened


def first_page(kernel: Kernel, store: ContinuationRows, *, owner: str = "ann") -> str:
    """Run `pages` as `owner` in a session of the `pager` template; the id its table leaves with."""
    who = kernel.caller(user_id=owner, session_id="s1", pid="p1", template="pager")
    result = kernel.run_tool("pages", {}, who)
    assert result.success, result.content
    sealed = seal_visual(
        result.visual, store, owner=owner, tool="pages", session_id="s1", pid="p1", template="pager"
    )
    return continuation_id(sealed)


def continuation_id(visual: list[VisualBlock]) -> str:
    continuation = visual[0]["continuation"]
    assert isinstance(continuation, dict) and set(continuation) == {"id"}
    found = continuation["id"]
    assert isinstance(found, str)
    return found


def rows(visual: list[VisualBlock]) -> list[JSONValue]:
    table = visual[0]
    assert table["type"] == "table"
    assert isinstance(table["rows"], list)
    return table["rows"]


def identity(visual: list[VisualBlock]) -> JSONObject:
    text = visual[1]["text"]
    assert isinstance(text, str)
    found = json.loads(text)
    assert isinstance(found, dict)
    return found


# -- seal_visual ---------------------------------------------------------------------------------


def test_seal_replaces_the_args_with_an_opaque_id_and_leaves_other_blocks(store: Store) -> None:
    """S6.3: the block carries `continuation: {id}`, never the args; the args stay on the server."""
    args: JSONObject = {"page": 2, "cursor": "after-row-20-secret-marker"}
    visual: list[VisualBlock] = [
        {"type": "text", "text": "hello"},
        {"type": "table", "columns": [{"key": "a"}], "rows": [{"a": 1}], "continuation": {"args": args}},
        {"type": "table", "columns": [{"key": "a"}], "rows": [{"a": 2}]},
    ]
    original = json.dumps(visual)
    sealed = seal_visual(visual, store, owner="ann", tool="pages", session_id="s1", pid="p1")
    assert json.dumps(visual) == original  # the caller's blocks are untouched
    assert sealed[0] == visual[0] and sealed[2] == visual[2]
    assert {k: v for k, v in sealed[1].items() if k != "continuation"} == {
        k: v for k, v in visual[1].items() if k != "continuation"
    }
    new_id = continuation_id(sealed[1:])
    assert "secret-marker" not in json.dumps(sealed) and "page" not in new_id
    kept = store.get(new_id, "ann")
    assert kept is not None
    assert (kept.owner, kept.session_id, kept.pid, kept.tool, kept.args) == ("ann", "s1", "p1", "pages", args)


def test_a_continuation_without_object_args_is_dropped_not_passed_on(store: Store) -> None:
    visual: list[VisualBlock] = [
        {"type": "table", "columns": [], "rows": [], "continuation": {"args": [1, 2]}},
        {"type": "table", "columns": [], "rows": [], "continuation": {"id": "forged-by-a-script"}},
    ]
    sealed = seal_visual(visual, store, owner="ann", tool="pages")
    assert all("continuation" not in block for block in sealed)
    assert store.count() == 0


def test_ids_are_random_url_safe_and_never_derived_from_the_args(store: Store, store_where: str) -> None:
    args: JSONObject = {"page": 2}
    ids = {store.put(owner="ann", tool="pages", args=args) for _ in range(50)}
    assert len(ids) == 50  # the same args never give the same id
    for new_id in ids:
        assert len(new_id) >= 22  # ≥ 128 bits in base64url
        assert set(new_id) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    keys = [row[0] for row in raw_rows(store_where, "SELECT key FROM continuations")]
    assert len(keys) == 50 and not set(keys) & ids  # the store keeps a hash of each id, not the id


# -- get: one None for unknown, expired and another user's ---------------------------------------


def test_unknown_expired_and_another_users_ids_all_answer_none(store_where: str) -> None:
    clock = [1000.0]
    with open_store(store_where, ttl_secs=60, clock=lambda: clock[0]) as store:
        mine = store.put(owner="ann", tool="pages", args={"page": 2})
        assert store.get(mine, "ann") is not None
        assert store.get(mine, "bob") is None  # another user's
        assert store.get("x" * 32, "ann") is None  # unknown
        assert store.get("", "ann") is None and store.get(None, "ann") is None
        assert store.get("x" * 10_000, "ann") is None
        clock[0] += 59.5
        assert store.get(mine, "ann") is not None
        clock[0] += 1
        assert store.get(mine, "ann") is None  # expired
        assert store.get(mine, "ann", now=1001.0) is not None  # `now` given wins over the clock


def test_expired_rows_are_purged(store_where: str) -> None:
    with open_store(store_where, ttl_secs=60, clock=lambda: 0.0) as store:
        store.put(owner="ann", tool="pages", args={}, now=0.0)
        store.put(owner="ann", tool="pages", args={}, now=30.0)
        assert store.count() == 2
        store.put(owner="ann", tool="pages", args={}, now=61.0)  # the first is gone with this write
        assert store.count() == 2
        assert store.purge(now=1000.0) == 2
        assert store.count() == 0


def test_one_user_s_rows_are_capped_and_the_oldest_go_first(store_where: str) -> None:
    """Each transcript read seals its tables anew, so reading again and again grew the file for a whole
    TTL: a user keeps at most `max_rows_per_owner` rows (checked every TRIM_EVERY rows of theirs), the
    oldest deleted first; another user's rows are not touched."""
    from agentkernel.server.sealed_ids import TRIM_EVERY

    clock = [0.0]
    with open_store(store_where, clock=lambda: clock[0]) as store:
        store.max_rows_per_owner = 10
        bobs = [store.put(owner="bob", tool="pages", args={"n": n}) for n in range(5)]
        anns = []
        for n in range(10 + 3 * TRIM_EVERY):
            clock[0] += 1.0
            anns.append(store.put(owner="ann", tool="pages", args={"n": n}))
        assert 5 + 10 <= store.count() < 5 + 10 + TRIM_EVERY
        assert store.get(anns[0], "ann") is None  # the oldest: gone, as an expired one is
        newest = anns[-(store.count() - 5) :]
        assert all(store.get(kept, "ann") is not None for kept in newest)
        assert all(store.get(kept, "bob") is not None for kept in bobs)


def test_two_stores_sweeping_at_once_delete_each_expired_row_once(store_where: str) -> None:
    """Two replicas on one store purge together: every expired row goes, none twice, nothing fails."""
    with open_store(store_where, ttl_secs=60) as one, open_store(store_where, ttl_secs=60) as other:
        for n in range(200):
            (one if n % 2 else other).put(owner=f"u{n % 7}", tool="pages", args={"n": n}, now=n / 1000)
        assert one.count() == 200
        start = threading.Barrier(2)
        purged: list[int] = []

        def sweep(store: Store) -> None:
            start.wait()
            purged.append(store.purge(now=3000.0))

        threads = [threading.Thread(target=sweep, args=(store,)) for store in (one, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(purged) == 200 and len(purged) == 2 and one.count() == 0


def test_a_continuation_survives_a_restart(store_where: str) -> None:
    with open_store(store_where) as store:
        kept = store.put(owner="ann", tool="pages", args={"page": 2}, session_id="s1")
    with open_store(store_where) as reopened:
        found = reopened.get(kept, "ann")
    assert found is not None and found.args == {"page": 2} and found.session_id == "s1"


@pytest.mark.embedded_only  # the message store's file itself
def test_it_shares_the_transcript_file_with_the_message_store(pager_kernel: Kernel) -> None:
    """Beside the transcript: one SQLite file, each store with its own schema version, in either order."""
    path = pager_kernel.config.messages_db
    with ContinuationStore(path) as store:
        kept = store.put(owner="ann", tool="pages", args={"page": 2})
    with SqliteMessageStore(path) as messages:
        messages.append("s1", "user", "message", "hi")
    with ContinuationStore(path) as store:
        assert store.get(kept, "ann") is not None
    assert [r.content for r in pager_kernel.transcript("s1")] == ["hi"]


def test_bad_input_to_put_is_refused_with_the_reason(store: Store, store_where: str) -> None:
    with pytest.raises(ValueError, match="args must be a JSON object, got list"):
        store.put(owner="ann", tool="pages", args=[1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="owner must be a non-empty string"):
        store.put(owner="", tool="pages", args={})
    with pytest.raises(ValueError, match="not plain JSON"):
        store.put(owner="ann", tool="pages", args={"x": float("nan")})
    with pytest.raises(ValueError, match="ttl_secs must be positive"):
        open_store(store_where, ttl_secs=0)


def test_concurrent_puts_from_threads_all_land(store: Store) -> None:
    per_thread = 40
    made: dict[int, list[str]] = {}
    start = threading.Barrier(8)

    def work(n: int) -> None:
        start.wait()
        made[n] = [store.put(owner=f"u{n}", tool="pages", args={"page": i}) for i in range(per_thread)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [i for ids in made.values() for i in ids]
    assert len(set(everything)) == 8 * per_thread == store.count()
    for n, ids in made.items():
        found = [store.get(i, f"u{n}") for i in ids]
        assert [c.args["page"] for c in found if c is not None] == list(range(per_thread))
        assert all(store.get(i, f"u{(n + 1) % 8}") is None for i in ids)


# -- running a continuation through the kernel -----------------------------------------------------


def test_paging_through_a_table_as_its_owner(pager_kernel: Kernel, store: Store) -> None:
    """S6.3: the stored call runs through dispatch with the owner's identity; new pages get fresh ids."""
    page2_id = first_page(pager_kernel, store)
    page2 = run_continuation(pager_kernel, store, page2_id, "ann")
    assert page2 is not None and page2.success
    assert rows(page2.visual) == [{"n": 21}, {"n": 22}]
    who = identity(page2.visual)
    assert (who["user_id"], who["session_id"], who["pid"], who["template"]) == ("ann", "s1", "p1", "pager")
    page3_id = continuation_id(page2.visual)
    assert page3_id != page2_id
    page3 = run_continuation(pager_kernel, store, page3_id, "ann")
    assert page3 is not None and rows(page3.visual) == [{"n": 31}, {"n": 32}]
    assert "continuation" not in page3.visual[0]  # the last page
    again = run_continuation(pager_kernel, store, page2_id, "ann")  # an id may be asked again (a reload)
    assert again is not None and rows(again.visual) == [{"n": 21}, {"n": 22}]


def test_another_user_cannot_run_it(pager_kernel: Kernel, store: Store) -> None:
    page2_id = first_page(pager_kernel, store, owner="ann")
    assert run_continuation(pager_kernel, store, page2_id, "bob") is None
    assert run_continuation(pager_kernel, store, "no-such-id", "ann") is None


def test_the_rerun_keeps_the_templates_rights(pager_kernel: Kernel, store: Store) -> None:
    """The rerun may call only the tools of the template it was made under: `secret` is not in its list."""
    kept = store.put(owner="ann", tool="secret", args={}, session_id="s1", template="pager")
    refused = run_continuation(pager_kernel, store, kept, "ann")
    assert refused is not None and not refused.success
    assert refused.content == "tool 'secret' is not allowed for pager"
    without_template = store.put(owner="ann", tool="secret", args={})  # a run with no tool list
    allowed = run_continuation(pager_kernel, store, without_template, "ann")
    assert allowed is not None and allowed.content == "the secret"


def test_a_template_gone_ends_its_continuations(pager: Path, pager_kernel: Kernel, store_where: str) -> None:
    with open_store(store_where) as store:
        page2_id = first_page(pager_kernel, store)
        (pager / "config" / "templates" / "pager.yaml").unlink()
        assert run_continuation(pager_kernel, store, page2_id, "ann") is None


def test_a_restarted_kernel_runs_a_stored_continuation(pager: Path, store_where: str) -> None:
    config = load_kernel_config(pager / "config" / "kernel.yaml")
    with Kernel(config) as kernel, open_store(store_where) as store:
        page2_id = first_page(kernel, store)
    with Kernel(config) as kernel, open_store(store_where) as store:
        page2 = run_continuation(kernel, store, page2_id, "ann")
    assert page2 is not None and rows(page2.visual) == [{"n": 21}, {"n": 22}]


def test_the_async_face_gives_the_same_page(pager_kernel: Kernel, store: Store) -> None:
    page2_id = first_page(pager_kernel, store)

    async def both() -> tuple[object, object]:
        return (
            await arun_continuation(pager_kernel, store, page2_id, "ann"),
            await arun_continuation(pager_kernel, store, page2_id, "bob"),
        )

    page2, refused = asyncio.run(both())
    assert refused is None
    assert page2 is not None and rows(page2.visual) == [{"n": 21}, {"n": 22}]  # type: ignore[attr-defined]
