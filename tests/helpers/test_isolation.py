"""Issue 9, item 5: user B reads none of user A's data (S14.3, S11.2, S12.4), through real JS and Rhai tools.

Before issue 9, `fs_read`, `fs_read_bytes` and `fs_list` read anywhere under
the kernel's root, and a session's scratch folder, state and `{session}`
database were keyed by the session id alone. So Bob read Alice's DuckDB
file, the state store and her scratch files, and by naming her session id
got her scratch folder and session keys outright. Each test here is one of
those attacks; each read must now be refused (or find nothing of Alice's),
whatever the spelling: relative, absolute, `..`, links.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.identity import session_folder_name
from agentkernel.ports import FILES
from agentkernel.services.files import FilesService
from agentkernel.testing.parts import kernel_parts
from tests.conftest import ToolFactory
from tests.helpers.test_files import Probe, build_kernel, race_a_link_flipper

KERNEL_YAML = "state:\n  db_path: data/state.db\n"
REFUSED = "is outside the folders scripts may read"
LINK = "is a symbolic link, and reads never follow links"
ALICE = {"user": "alice", "session": "chat-1"}
SECRET = "alice's secret"


@pytest.fixture
def kernel(project: Path) -> Kernel:
    return build_kernel(project, KERNEL_YAML)


@pytest.fixture
def probe(kernel: Kernel, make_tool: ToolFactory, engine: str) -> Probe:
    return Probe(kernel, make_tool, engine)


@pytest.fixture
def alice(probe: Probe, kernel: Kernel) -> dict[str, Path]:
    """Alice keeps a secret everywhere a script can: her temp dir, her session's and her own state,
    a `{user}` and a `{session}` database. Returns where those files are."""
    note = probe("fs_write(args.path, args.text)", path="secret.txt", text=SECRET, **ALICE)
    assert isinstance(note, str)
    for scope in ("session", "user"):
        assert probe(f'state_set("{scope}", "note", args.text)', text=SECRET, **ALICE) is None
    for db in ("{user}/notes.duckdb", "{session}/notes.duckdb"):
        probe(f'db_execute("{db}", "CREATE TABLE IF NOT EXISTS n (t TEXT)")', **ALICE)
        probe(f'db_execute("{db}", "INSERT INTO n VALUES (?)", [args.text])', text=SECRET, **ALICE)
    data = kernel.config.root / "data"
    duck_files = sorted((data / "duckdb").rglob("*.duckdb"))
    assert len(duck_files) == 2
    return {"note": Path(note), "temp": Path(note).parent, "state": data / "state.db", "duck": duck_files[0]}


def bob(probe: Probe, expr: str, session: str = "chat-2", **args: str) -> object:
    """What Bob's script gets: the value, or {"error": message}."""
    return probe(expr, session, user="bob", **args)


def refused(probe: Probe, expr: str, path: str, why: str = REFUSED, session: str = "chat-2") -> None:
    value = bob(probe, expr, session, path=path)
    assert isinstance(value, dict) and why in str(value.get("error")), f"{expr} {path!r} gave {value!r}"


READS = ["fs_read(args.path)", "fs_read_bytes(args.path)"]


# -- S14.3: the kernel's stores and Alice's files are outside every read root -----------------------


@pytest.mark.parametrize("read", READS)
def test_bob_cannot_read_the_stores_or_alices_files(
    probe: Probe, kernel: Kernel, alice: dict[str, Path], read: str
) -> None:
    root = kernel.config.root
    for path in (alice["state"], alice["duck"], alice["note"], root / "data" / "messages.db"):
        refused(probe, read, str(path))
        refused(probe, read, str(path.relative_to(root)))
    refused(probe, read, "config/kernel.yaml")


def test_bob_cannot_list_the_stores_or_alices_folders(
    probe: Probe, kernel: Kernel, alice: dict[str, Path]
) -> None:
    root = kernel.config.root
    for path in ("data", "data/duckdb", "data/tmp", str(alice["temp"]), str(alice["duck"].parent), "/", "."):
        refused(probe, "fs_list(args.path)", path)
    refused(probe, "fs_list(args.path)", str(root))


@pytest.mark.parametrize("read", [*READS, "fs_list(args.path)"])
def test_dotdot_cannot_climb_out_of_a_read_root(
    probe: Probe, kernel: Kernel, alice: dict[str, Path], read: str
) -> None:
    bobs_temp = kernel.caller(user_id="bob", session_id="chat-2").temp_dir
    alices = alice["temp"].name
    for path in (
        "data/shared/../state.db",
        "data/shared/../duckdb",
        "config/scripts/tools/../../../data/state.db",
        f"{bobs_temp}/../{alices}/secret.txt",
        f"{bobs_temp}/..",
        f"data/shared/../tmp/{alices}/secret.txt",
        "../" * 20 + str(alice["note"]).lstrip("/"),
    ):
        refused(probe, read, path)


def test_links_planted_in_a_read_root_are_never_followed(
    probe: Probe, kernel: Kernel, alice: dict[str, Path]
) -> None:
    """A link to a store in data/shared (an operator's slip), a link in Bob's own temp dir to
    Alice's (made with `shell`, say), a linked folder in the scripts folder: none is followed."""
    root = kernel.config.root
    shared = root / "data" / "shared"
    shared.mkdir(parents=True)
    (shared / "state.db").symlink_to(alice["state"])
    (shared / "duck").symlink_to(alice["duck"].parent)
    (root / "config" / "scripts" / "tools" / "data").symlink_to(root / "data")
    bobs_temp = kernel.caller(user_id="bob", session_id="chat-2").temp_dir
    assert bobs_temp is not None
    (bobs_temp / "alice").symlink_to(alice["temp"])
    for read in READS:
        refused(probe, read, "data/shared/state.db", LINK)
        refused(probe, read, f"data/shared/duck/{alice['duck'].name}", LINK)
        refused(probe, read, "config/scripts/tools/data/state.db", LINK)
        refused(probe, read, f"{bobs_temp}/alice/secret.txt", LINK)
    refused(probe, "fs_list(args.path)", "data/shared/duck", LINK)
    refused(probe, "fs_list(args.path)", f"{bobs_temp}/alice", LINK)
    assert bob(probe, "fs_list(args.path)", path="data/shared") == ["duck", "state.db"]  # no "/": not entered


def test_a_link_flipped_in_and_out_never_lets_a_read_through(kernel: Kernel, alice: dict[str, Path]) -> None:
    """Another process flips data/shared/sub between a real folder and a link to data/ while reads
    run: each read finds the real (empty) folder or is refused, never what the link leads to."""
    service = kernel_parts(kernel).services.get(FILES)
    assert isinstance(service, FilesService)
    data = kernel.config.root / "data"
    (data / "shared").mkdir(parents=True)
    (data / "probe.txt").write_text("outside")  # what the link would reach
    outcomes = race_a_link_flipper(
        data / "shared" / "sub",
        data,
        lambda: service.read_file("data/shared/sub/probe.txt"),
        wanted=("refused",),
    )
    assert outcomes == {"done": 0, "refused": outcomes["refused"]} and outcomes["refused"] > 0


def test_bob_reads_what_is_his_to_read(probe: Probe, kernel: Kernel, alice: dict[str, Path]) -> None:
    """The confinement takes nothing away from Bob's own files and the shared folder."""
    shared = kernel.config.root / "data" / "shared"
    shared.mkdir(parents=True)
    (shared / "prices.md").write_text("tea: 3")
    assert bob(probe, "fs_read(args.path)", path="data/shared/prices.md") == "tea: 3"
    assert bob(probe, 'fs_write("mine.txt", "bob")') is not None
    assert bob(probe, 'fs_read(caller().temp_dir + "/mine.txt")') == "bob"
    assert bob(probe, "fs_list(caller().temp_dir)") == ["mine.txt"]
    assert probe("fs_read(args.path)", path=str(alice["note"]), **ALICE) == SECRET


# -- one user's session is not another's, whatever the session id ----------------------------------


def test_bob_reusing_alices_session_id_gets_his_own_session(
    probe: Probe, kernel: Kernel, alice: dict[str, Path]
) -> None:
    same = "chat-1"
    bobs_temp = bob(probe, "caller().temp_dir", same)
    assert bobs_temp != str(alice["temp"]) and Path(str(bobs_temp)).name == session_folder_name("bob", same)
    assert bob(probe, "fs_list(caller().temp_dir)", same) == []
    assert "No such file" in str(bob(probe, 'fs_read(caller().temp_dir + "/secret.txt")', same))
    assert bob(probe, 'state_get("session", "note")', same) is None
    assert bob(probe, 'state_keys("session")', same) == []
    assert bob(probe, 'state_get("user", "note")', same) is None
    missing = bob(probe, 'db_query("{session}/notes.duckdb", "SELECT * FROM n")', same)
    assert isinstance(missing, dict) and "no such database" in str(missing["error"])
    # and Alice still has all of it
    assert probe('state_get("session", "note")', **ALICE) == SECRET
    rows = probe('db_query("{session}/notes.duckdb", "SELECT t FROM n").rows', **ALICE)
    assert rows == [{"t": SECRET}]


def test_bob_writing_in_the_same_session_id_leaves_alices_files_alone(
    probe: Probe, alice: dict[str, Path]
) -> None:
    assert bob(probe, 'fs_write("secret.txt", "bob was here")', "chat-1") is not None
    assert bob(probe, 'state_set("session", "note", "bob was here")', "chat-1") is None
    assert alice["note"].read_text() == SECRET
    assert probe('state_get("session", "note")', **ALICE) == SECRET


def test_reads_without_a_session_reach_only_the_read_roots(
    probe: Probe, kernel: Kernel, alice: dict[str, Path]
) -> None:
    value = probe("fs_read(args.path)", None, path=str(alice["note"]))
    assert isinstance(value, dict) and REFUSED in str(value["error"])
    listing = probe("fs_list(args.path)", None, path="config/scripts/tools")
    assert isinstance(listing, list) and listing  # the probes' own tools


def test_files_the_kernel_keeps_stay_private_to_its_user(kernel: Kernel, alice: dict[str, Path]) -> None:
    """What the read roots leave out, the operating system's modes keep from other local users."""
    assert alice["temp"].stat().st_mode & 0o777 == 0o700
    assert os.stat(alice["duck"].parent).st_mode & 0o077 == 0
