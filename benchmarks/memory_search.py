"""`memory_search` (S18) over a 100,000-message session: p50 per query (issue 12; target <= 5 ms).

Why: a script searches its own transcript in the middle of a turn, so the
search must stay fast however long the session has grown. The cost of an
FTS5 search ranked by bm25 grows with the number of records the query
*matches*, not with the size of the session, so the figures are given per
class of query: a word found in about 0.01 %, 0.1 %, 1 %, 10 % and 50 % of
the session's records, and two words together.

What it measures:

1. **the store**: `SqliteMessageStore.search(session, query, 5,
   owner=Owner("alice"), window=1000)`, exactly what the helper asks the
   store (it ranks the latest 1,000 matching records,
   `helpers/memory.py` `SEARCH_WINDOW`), per call, after a warm-up; p50 and
   p95 per class, and the p50 over every call of every class. Beside it,
   the p50 of the same search ranking *every* match (no window, a tenth of
   the calls), which is what the window saves.
2. **the helper from a script**: `kernel.run_tool` of a JS tool whose `run`
   calls `memory_search(query, 5)` once, for the 1 % class, beside the same
   tool returning at once: the difference is the helper's cost through the
   engine (values in and out, the records as JS objects).

The session: 100,000 records of user `alice` in session `s1`, 20,000 of
user `bob` in the *same* session id (which alice's search must skip), and
20,000 in other sessions, in one file. Records are 5 to 30 words drawn from
8,000 made-up Russian-looking words with Zipf frequencies (seeded: the same
file every run). The file is filled with one transaction of plain INSERTs
(the store's triggers keep the full-text index); the store's own `append`
commits each record alone, which is not what is measured here.

Run it by hand:

    .venv/bin/python benchmarks/memory_search.py
    .venv/bin/python benchmarks/memory_search.py --records 100000 --calls 200 --json
    .venv/bin/python benchmarks/memory_search.py --smoke   # 2,000 records: does it run?

The exit status is 0 when every search found what it should.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sqlite3
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.helpers.memory import SEARCH_WINDOW
from agentkernel.services.memory import Owner, SqliteMessageStore

SEED = 12
SYLLABLES: tuple[str, ...] = ("ка", "ло", "ми", "ре", "ст", "по", "на", "то", "ви", "за")
SYLLABLES += ("пе", "ро", "ду", "бы", "че", "шу", "ль", "ны", "ве", "ск")
CLASSES = (0.0001, 0.001, 0.01, 0.1, 0.5)
K = 5
KERNEL_YAML = "scripts:\n  tools: [config/scripts/tools]\n  hooks: [config/scripts/hooks]\n"
TOOLS = {
    "recall": "function run(args) { return {content: 'ok', data: memory_search(args.query, 5)}; }",
    "nothing": "function run(args) { return {content: 'ok', data: []}; }",
}


def vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < 8000:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def messages(rng: random.Random, words: list[str], count: int) -> list[str]:
    weights = [1 / (rank + 1) for rank in range(len(words))]
    return [" ".join(rng.choices(words, weights, k=rng.randint(5, 30))) for _ in range(count)]


def fill(path: Path, records: int) -> list[str]:
    """The store's file with alice's session and the others; alice's texts, for the query classes."""
    rng = random.Random(SEED)
    words = vocabulary(rng)
    alice = messages(rng, words, records)
    SqliteMessageStore(path).close()  # the schema, as the kernel makes it
    rows: list[tuple[str, str, str]] = [("s1", "alice", text) for text in alice]
    rows += [("s1", "bob", text) for text in messages(rng, words, records // 5)]
    rows += [(f"other-{i % 50}", "carol", text) for i, text in enumerate(messages(rng, words, records // 5))]
    rng.shuffle(rows)
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executemany(
                "INSERT INTO messages (session_id, user_id, role, kind, content, meta, created_at) "
                "VALUES (?, ?, 'user', 'user', ?, '{}', '2026-12-01T00:00:00.000Z')",
                rows,
            )
    finally:
        conn.close()
    return alice


def query_classes(alice: list[str]) -> dict[str, tuple[str, int]]:
    """For each class, the word whose share of alice's records is nearest; and a two-word query."""
    share = Counter(word for text in alice for word in set(text.split()))
    chosen: dict[str, tuple[str, int]] = {}
    for fraction in CLASSES:
        word, found = min(share.items(), key=lambda item: abs(math.log(item[1] / len(alice) / fraction)))
        chosen[f"word in ~{fraction * 100:g} % of records"] = (word, found)
    rare, common = (
        chosen[f"word in ~{CLASSES[1] * 100:g} % of records"][0],
        chosen["word in ~1 % of records"][0],
    )
    both = sum(1 for text in alice if rare in text.split() or common in text.split())
    chosen["two words (0.1 % + 1 %)"] = (f"{rare} {common}", both)
    return chosen


def timings(call: Callable[[], object], calls: int) -> list[float]:
    for _ in range(max(3, calls // 10)):
        call()
    out = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - start) / 1e6)
    return sorted(out)


def percentile(ordered: list[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def store_figures(path: Path, classes: dict[str, tuple[str, int]], calls: int, problems: list[str]) -> Any:
    figures: dict[str, Any] = {}
    every: list[float] = []
    alice = Owner("alice")
    with SqliteMessageStore(path) as store:
        for name, (query, found) in classes.items():
            hits = store.search("s1", query, K, owner=alice, window=SEARCH_WINDOW)
            if len(hits) != min(K, found) or any(h.score is None for h in hits):
                problems.append(f"{name}: {len(hits)} hits for {query!r}, expected {min(K, found)}")
            samples = timings(partial(store.search, "s1", query, K, owner=alice, window=SEARCH_WINDOW), calls)
            exact = timings(partial(store.search, "s1", query, K, owner=alice), max(3, calls // 10))
            every += samples
            figures[name] = {
                "query": query,
                "matches": found,
                "p50_ms": percentile(samples, 50),
                "p95_ms": percentile(samples, 95),
                "every_match_p50_ms": percentile(exact, 50),
            }
    figures["every class"] = {"p50_ms": percentile(sorted(every), 50), "calls": len(every)}
    return figures


def tool_figures(root: Path, query: str, calls: int, problems: list[str]) -> dict[str, float]:
    tools = root / "config" / "scripts" / "tools"
    tools.mkdir(parents=True)
    (root / "config" / "scripts" / "hooks").mkdir()
    (root / "config" / "kernel.yaml").write_text(KERNEL_YAML, encoding="utf-8")
    for name, source in TOOLS.items():
        (tools / f"{name}.js").write_text(source, encoding="utf-8")
        spec = f"kind: script_tool\nname: {name}\nscript: {name}.js\n"
        (tools / f"{name}.yaml").write_text(textwrap.dedent(spec), encoding="utf-8")
    figures: dict[str, float] = {}
    with Kernel(load_kernel_config(root / "config" / "kernel.yaml")) as kernel:
        alice = kernel.caller(user_id="alice", session_id="s1")
        result = kernel.run_tool("recall", {"query": query}, alice)
        if not (result.success and isinstance(result.data, list) and len(result.data) == K):
            problems.append(f"the recall tool returned {result.content!r}")
        for name in TOOLS:
            samples = timings(partial(kernel.run_tool, name, {"query": query}, alice), calls)
            figures[name] = percentile(samples, 50)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="alice's records (default 100,000)")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per class (default 200)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--smoke", action="store_true", help="2,000 records, 10 calls: does it run?")
    options = parser.parse_args()
    records, calls = (2_000, 10) if options.smoke else (options.records, options.calls)
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        db = root / "data" / "messages.db"
        started = time.perf_counter()
        alice = fill(db, records)
        filled = time.perf_counter() - started
        classes = query_classes(alice)
        store = store_figures(db, classes, calls, problems)
        tool = tool_figures(root, classes["word in ~1 % of records"][0], calls, problems)
    print(f"memory_search over {records:,} records of one user's session (+{records // 5 * 2:,} others'),")
    print(f"k={K}, {calls} timed calls per class; filled in {filled:.1f} s ({platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs)")  # fmt: skip
    for name, figure in store.items():
        if name == "every class":
            print(f"{'every class':34} p50 {figure['p50_ms']:8.3f} ms   (target <= 5 ms)")
            continue
        print(
            f"{name:34} p50 {figure['p50_ms']:8.3f} ms   p95 {figure['p95_ms']:8.3f} ms"
            f"   {figure['matches']:,} matches; ranking every match p50 {figure['every_match_p50_ms']:.3f} ms"
        )
    print(f"JS tool calling memory_search (1 %)  p50 {tool['recall']:8.3f} ms")
    print(f"same tool returning at once          p50 {tool['nothing']:8.3f} ms")
    if options.json:
        print(json.dumps({"records": records, "store": store, "tool": tool}, ensure_ascii=False, indent=2))
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
