"""What the quota check before each LLM call costs (S26.3), beside the ledger write each call makes anyway.

    .venv/bin/python benchmarks/quotas.py [--users 2000] [--calls 2000] [--smoke]

A usage ledger (services/usage.py) is filled with a month of rows for
`--users` users (31 days x 3 templates x 2 models each), then one user's
check is timed with four limits to read (the user's day and month, the
template's day and month: services/quotas.py), p50 and p95 over `--calls`
after a warm-up, against the floor of one `record` (the upsert the metering
makes after every call), measured in the same run on the same file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agentkernel.config.quotas import QuotaSettings  # noqa: E402
from agentkernel.services.quotas import QuotaBook  # noqa: E402
from agentkernel.services.usage import UsageLedger  # noqa: E402

WARMUP = 20
TEMPLATES = ("writer", "reviewer", "checker")
MODELS = ("small", "large")
SETTINGS = QuotaSettings(
    default={"tokens_per_day": 10**12, "tokens_per_month": 10**12},
    templates={"writer": {"tokens_per_day": 10**12, "calls_per_month": 10**12}},
)


def times_ms(call: Callable[[], object], calls: int) -> list[float]:
    for _ in range(WARMUP):
        call()
    taken = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        taken.append((time.perf_counter() - started) * 1000)
    return sorted(taken)


def p95(sorted_ms: list[float]) -> float:
    return sorted_ms[int(len(sorted_ms) * 0.95)]


def record_one(ledger: UsageLedger) -> None:
    ledger.record(user="u1", template="writer", model="small", provider=None, input_tokens=1, output_tokens=1)


def fill(ledger: UsageLedger, users: int) -> int:
    """A month of rows for `users` users; how many rows."""
    now = datetime.now(UTC)
    rows = 0
    for day in range(31):
        at = now - timedelta(days=day)
        for user in range(users):
            for template in TEMPLATES:
                for model in MODELS:
                    ledger.record(
                        user=f"u{user}",
                        template=template,
                        model=model,
                        provider=None,
                        input_tokens=100,
                        output_tokens=10,
                        at=at,
                    )
                    rows += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--users", type=int, default=2000, help="users with a month of rows in the ledger")
    parser.add_argument("--calls", type=int, default=2000, help="timed checks and records")
    parser.add_argument("--smoke", action="store_true", help="tiny counts: only that it runs")
    options = parser.parse_args()
    users, calls = (5, 20) if options.smoke else (options.users, options.calls)
    with tempfile.TemporaryDirectory() as folder:
        ledger = UsageLedger(Path(folder) / "messages.db")
        try:
            rows = fill(ledger, users)
            book = QuotaBook(SETTINGS, lambda: ledger)
            checked = times_ms(lambda: book.check(user="u1", template="writer"), calls)
            recorded = times_ms(lambda: record_one(ledger), calls)
        finally:
            ledger.close()
    check_p50, record_p50 = statistics.median(checked), statistics.median(recorded)
    print(f"ledger of {rows:,} rows ({users:,} users x 31 days x 6); {calls:,} timed calls each")
    print(f"  quota check, 4 limits   p50 {check_p50:8.3f} ms   p95 {p95(checked):8.3f} ms")
    print(f"  ledger record (floor)   p50 {record_p50:8.3f} ms   p95 {p95(recorded):8.3f} ms")
    print(f"  check / record          {check_p50 / record_p50:8.2f}x")


if __name__ == "__main__":
    main()
