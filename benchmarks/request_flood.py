"""One user floods `agentkernel serve` with cheap requests; another user's turns meanwhile, with the rate
limit (`server.requests_per_user_per_sec`, its default) and without it (`null`), in one run.

    .venv/bin/python benchmarks/request_flood.py [--turns 200] [--connections 20] [--flood-secs 5]
        [--rounds 2] [--smoke]

Why: the per-user caps bound the work a user has running at once, not how
often they ask. One token sending `POST /v1/sessions` as fast as it is
answered (each a cheap request, a session made) took the event loop from
everyone: the other user's turns went from 5 ms to 24 ms (p50).

Four processes, as benchmarks/server.py runs them: the server on a
temporary project with two users, the scripted LLM (answering at once),
this one, the victim (user 1: `--turns` messages one after the other,
each a turn with one tool call, read to `done`), and the flooder (user 0:
`--connections` connections each sending `POST /v1/sessions` the moment
the last is answered). The flooder runs at nice 19: on a machine of two
cores it would otherwise take a core from the server, the LLM and the
victim, and slow the victim however cheaply the server refused it, which a
flooder on another machine would not; it still takes every cycle the
others leave.

For each server, `--rounds` times, one server with the limit and one
without in turn: the victim's round trip p50 and p90 with nobody else
(quiet), the flood alone for `--flood-secs` (its requests a second, how
many were refused, and the server's CPU per flood request, from /proc),
then the victim's round trip again during the flood. Printed: each
server's figures, then the ratios of the two, median of the rounds and
their spread: the server's CPU per flood request with the limit over
without, and the victim's p50 during the flood over quiet, each way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import server as bench  # benchmarks/server.py: the project, the processes, a turn, the figures
from agentkernel.config.server import ServerSettings

FLOODER, VICTIM = 0, 1  # client numbers: users `user-0` and `user-1`
LIMITED = f"{ServerSettings().requests_per_user_per_sec:g}"  # the default
UNLIMITED = "null"
WARM_TURNS = 20  # the victim's first turns (chats opened, scripts compiled) are not timed
BURST_SPENT_SECS = 1.5  # the flood's first moments spend the flooder's burst; then it is measured
FLOOD_NICE = 19


@dataclass(frozen=True)
class Figures:
    """One server's figures: the victim's round trips (ms) quiet and during the flood; the flood's."""

    quiet: list[float]
    loud: list[float]
    flood_rate: float  # requests a second, the flood alone
    refused: float  # the share of them refused
    cpu_ms: float  # the server's CPU per flood request

    @property
    def slowed(self) -> float:
        """The victim's p50 during the flood over its p50 quiet."""
        return bench.percentile(self.loud, 50) / bench.percentile(self.quiet, 50)

    def line(self, label: str) -> str:
        quiet, loud, at = self.quiet, self.loud, bench.percentile
        return (
            f"{label}: victim p50 {at(quiet, 50):.2f} ms, p90 {at(quiet, 90):.2f} "
            f"ms quiet; p50 {at(loud, 50):.2f} ms, p90 {at(loud, 90):.2f} ms "
            f"during the flood ({self.slowed:.2f}x); flood {self.flood_rate:.0f} requests/s, "
            f"{100 * self.refused:.0f}% refused; server CPU {self.cpu_ms:.3f} ms a flood request"
        )


class Flooder:
    """The flooding process (this file with `--flood URL`); it prints its counts on SIGUSR1."""

    def __init__(self, url: str, connections: int) -> None:
        command = [sys.executable, __file__, "--flood", url, "--connections", str(connections)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self._out = self.process.stdout
        if self._out.readline().strip() != "flooding":
            raise SystemExit(f"the flooder ended (status {self.process.wait()}) before flooding")

    def counts(self) -> tuple[int, int]:
        """(requests answered, of them refused with 429) so far."""
        self.process.send_signal(signal.SIGUSR1)
        sent, refused = self._out.readline().split()
        return int(sent), int(refused)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


async def flood(url: str, connections: int) -> None:
    """POST /v1/sessions as user 0 on `connections` connections until SIGTERM; counts on SIGUSR1."""
    stop, counts = asyncio.Event(), [0, 0]
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: print(*counts, flush=True))
    limits = httpx.Limits(max_connections=connections, keepalive_expiry=bench.KEEPALIVE_SECS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def one() -> None:
            while not stop.is_set():
                answer = await client.post("/v1/sessions", json={"template": "bench"}, headers=bench.auth(0))
                counts[0] += 1
                counts[1] += answer.status_code == 429

        print("flooding", flush=True)
        await asyncio.gather(*(one() for _ in range(connections)))


async def victim(url: str, turns: int) -> list[float]:
    """User 1's `turns` messages, one after the other in one session: each round trip, ms."""
    limits = httpx.Limits(keepalive_expiry=bench.KEEPALIVE_SECS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        headers = bench.auth(VICTIM)
        session = await bench.new_session(client, headers)
        return [(await bench.send(client, session, f"message {n}", headers))[0] for n in range(turns)]


def measured(url: str, server_pid: int, options: argparse.Namespace) -> Figures:
    """The victim quiet, the flood alone, then the victim during the flood."""
    asyncio.run(victim(url, WARM_TURNS))
    quiet = asyncio.run(victim(url, options.turns))
    flooder = Flooder(url, options.connections)
    try:
        time.sleep(BURST_SPENT_SECS)
        (sent, refused), cpu = flooder.counts(), bench.cpu_seconds(server_pid)
        time.sleep(options.flood_secs)
        (sent_after, refused_after), cpu_after = flooder.counts(), bench.cpu_seconds(server_pid)
        loud = asyncio.run(victim(url, options.turns))
    finally:
        flooder.stop()
    flooded = max(1, sent_after - sent)
    return Figures(
        quiet,
        loud,
        flooded / options.flood_secs,
        (refused_after - refused) / flooded,
        (cpu_after - cpu) * 1000 / flooded,
    )


@contextlib.contextmanager
def serving(llm_url: str, rate: str) -> Iterator[tuple[str, int]]:
    """`agentkernel serve` on a fresh project with two users and `requests_per_user_per_sec: rate`."""
    with tempfile.TemporaryDirectory() as folder:
        kernel_yaml = bench.make_project(Path(folder), llm_url, 2, rate=rate)
        with bench.process(bench.serve_command(kernel_yaml, None), "agentkernel: serving on ") as (line, pid):
            yield line.split()[3], pid


def ratio_line(label: str, values: list[float]) -> str:
    return f"{label}: {statistics.median(values):.2f}x ({bench.spread(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=200, help="the victim's timed turns, each phase")
    parser.add_argument("--connections", type=int, default=20, help="the flooder's connections")
    parser.add_argument("--flood-secs", type=float, default=5.0, help="the flood alone, measured")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="tiny counts: checks the benchmark runs")
    parser.add_argument("--flood", help=argparse.SUPPRESS)  # the flooder's process: the server's URL
    options = parser.parse_args()
    if options.flood:
        os.nice(FLOOD_NICE)
        asyncio.run(flood(options.flood, options.connections))
        return
    if options.smoke:
        options.turns, options.connections, options.flood_secs, options.rounds = 5, 2, 0.5, 1
    print(f"{os.cpu_count()} cores; the flooder: {options.connections} connections at nice {FLOOD_NICE}")
    print_ratios(options.rounds, run_rounds(options))


def run_rounds(options: argparse.Namespace) -> list[dict[str, Figures]]:
    """Each round's figures, by rate: a server with the limit, then one without, each on a fresh project."""
    rounds: list[dict[str, Figures]] = []
    with bench.process([sys.executable, bench.__file__, "--llm"], "http://") as (llm_url, _):
        for number in range(1, options.rounds + 1):
            rounds.append({})
            for rate in (LIMITED, UNLIMITED):
                with serving(llm_url, rate) as (url, pid):
                    rounds[-1][rate] = measured(url, pid, options)
                print(rounds[-1][rate].line(f"round {number}, requests_per_user_per_sec {rate}"), flush=True)
    return rounds


def print_ratios(count: int, rounds: list[dict[str, Figures]]) -> None:
    print(f"median of {count} round(s) (spread):")
    cpu = [figures[LIMITED].cpu_ms / figures[UNLIMITED].cpu_ms for figures in rounds]
    print(ratio_line(f"  server CPU a flood request, requests_per_user_per_sec {LIMITED} / {UNLIMITED}", cpu))
    for rate in (LIMITED, UNLIMITED):
        label = f"  victim's p50 during the flood / quiet, requests_per_user_per_sec {rate}"
        print(ratio_line(label, [figures[rate].slowed for figures in rounds]))


if __name__ == "__main__":
    main()
