"""`fs_read`, `fs_write`, `fs_list`, `fs_read_bytes`, `fs_write_bytes` (S14) from real JS and Rhai tools.

Writes are confined to the session's temp dir (S14.2); these tests are the
escapes attackers try — `..` chains, absolute paths, links planted inside
the temp dir (to files, to folders, as a parent folder), links and hard
links swapped in between the check and the write, NUL bytes, very long
names, paths through /proc/self — plus the limits on reading.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkernel import Kernel
from agentkernel.config import load_kernel_config
from agentkernel.config.templates import TemplateSpec
from agentkernel.errors import ConfigError
from agentkernel.helpers import default_helper_table
from agentkernel.ports import FILES
from agentkernel.services import confined
from agentkernel.services.files import FilesService, FilesSettings
from agentkernel.services.scratch import ScratchJanitor
from agentkernel.testing.parts import kernel_parts
from agentkernel.types import JSONValue
from tests.conftest import ToolFactory, write_kernel_yaml
from tests.helpers.probes import probe_source

OUTSIDE = "is outside the session temp dir"


def build_kernel(project: Path, kernel_yaml: str = "", *, attach: bool = True) -> Kernel:
    """A kernel with the file helpers registered and (unless `attach` is False) the service."""
    config = load_kernel_config(write_kernel_yaml(project, kernel_yaml))
    table = default_helper_table()
    service = FilesService.from_config(config) if attach else None
    return Kernel(config, helpers=table, extra_services={"files": service})


@pytest.fixture
def kernel(project: Path) -> Kernel:
    return build_kernel(project)


@pytest.fixture
def temp(kernel: Kernel) -> Path:
    """The session temp dir the probes write into."""
    path = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert path is not None
    return path


@pytest.fixture
def shared(project: Path) -> Path:
    """data/shared: a read root by default (S14.3), where the read tests put their files."""
    folder = project / "data" / "shared"
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every temp dir, holding one file an attacker wants to overwrite."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("original")
    return folder


_counter = iter(range(1_000_000))


class Probe:
    """Evaluates one helper expression in a fresh JS or Rhai tool through the real dispatch path."""

    def __init__(self, kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
        self.kernel, self.make_tool, self.engine = kernel, make_tool, engine

    def __call__(
        self, expr: str, session: str | None = "s-1", *, user: str = "u-1", **args: JSONValue
    ) -> JSONValue:
        """The value, or {"error": message} when the helper threw (caught by the script)."""
        name = f"probe{next(_counter)}"
        self.make_tool(name, probe_source(self.engine, expr), ext=self.engine)
        caller = self.kernel.caller(session_id=session, user_id=user) if session else self.kernel.caller()
        result = self.kernel.run_tool(name, args, caller)
        assert result.success, result.content
        assert isinstance(result.data, dict)
        return result.data.get("value") if result.content == "ok" else {"error": result.data["error"]}

    def error(self, expr: str, session: str | None = "s-1", *, user: str = "u-1", **args: JSONValue) -> str:
        value = self(expr, session, user=user, **args)
        assert isinstance(value, dict) and set(value) == {"error"}, f"expected an error, got {value!r}"
        return str(value["error"])

    def write(self, path: str, content: str = "pwned") -> JSONValue:
        return self("fs_write(args.path, args.content)", path=path, content=content)

    def write_error(self, path: str, content: str = "pwned") -> str:
        return self.error("fs_write(args.path, args.content)", path=path, content=content)


@pytest.fixture
def probe(kernel: Kernel, make_tool: ToolFactory, engine: str) -> Probe:
    return Probe(kernel, make_tool, engine)


def tree(folder: Path) -> list[str]:
    """Everything below `folder` but the probes' own tool files, their compiled copies and their results
    (the tool-result store: data/tool_results.db and its WAL files)."""
    cache = ("data", "cache")
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if "scripts" not in p.parts
        and p.relative_to(folder).parts[:2] != cache
        and not p.name.startswith("tool_results.db")
    )


# -- S14.1 the five helpers, round trips -----------------------------------------------------------


def test_s14_1_write_read_list_round_trip(probe: Probe, temp: Path) -> None:
    written = probe.write("report.csv", "a,b\n1,2\nжё\n")
    assert written == str(temp / "report.csv")
    assert (temp / "report.csv").read_text(encoding="utf-8") == "a,b\n1,2\nжё\n"
    assert probe("fs_read(args.path)", path=str(temp / "report.csv")) == "a,b\n1,2\nжё\n"
    assert probe.write("sub/deeper/notes.txt", "x") == str(temp / "sub" / "deeper" / "notes.txt")
    assert probe("fs_list(caller().temp_dir)") == ["report.csv", "sub/"]
    assert probe("fs_list(args.path)", path=str(temp / "sub")) == ["deeper/"]


def test_s14_1_write_replaces_a_file(probe: Probe, temp: Path) -> None:
    probe.write("a.txt", "long first version")
    probe.write("a.txt", "v2")
    assert (temp / "a.txt").read_text() == "v2"
    assert [p.name for p in temp.iterdir()] == ["a.txt"]  # no temporary file left behind


def test_s14_3_reads_come_from_the_read_roots(probe: Probe, shared: Path) -> None:
    """Relative reads start at the kernel root; they reach data/shared, the scripts folders, the temp dir."""
    (shared / "git").mkdir()
    (shared / "git" / "repos.json").write_text('{"repos": []}')
    assert probe("fs_read(args.path)", path="data/shared/git/repos.json") == '{"repos": []}'
    assert probe("fs_read(args.path)", path=str(shared / "git" / "repos.json")) == '{"repos": []}'
    assert probe("fs_list(args.path)", path="data/shared") == ["git/"]
    assert probe("fs_read(args.path)", session=None, path="data/shared/git/repos.json") == '{"repos": []}'
    assert "probe" in str(probe("fs_list(args.path)", path="config/scripts/tools"))
    probe.write("mine.txt", "kept")
    assert probe('fs_read(caller().temp_dir + "/mine.txt")') == "kept"
    assert probe("fs_read(args.path)", path="data/shared/git/../git/repos.json") == '{"repos": []}'


def test_s14_1_list_marks_folders_not_links(
    probe: Probe, outside: Path, shared: Path, tmp_path: Path
) -> None:
    """Reads never follow a link (S14.3), so a link to a folder is listed as a plain name."""
    folder = shared / "listing"
    folder.mkdir()
    for name in ("b.txt", "a.txt", "Z.md"):
        (folder / name).write_text(name)
    (folder / "sub").mkdir()
    (folder / "to_dir").symlink_to(outside)
    (folder / "to_file").symlink_to(outside / "victim.txt")
    (folder / "dangling").symlink_to(tmp_path / "nowhere")
    assert probe("fs_list(args.path)", path=str(folder)) == [
        "Z.md",
        "a.txt",
        "b.txt",
        "dangling",
        "sub/",
        "to_dir",
        "to_file",
    ]
    assert probe("fs_list(args.path)", path=str(folder) + "/") == probe(
        "fs_list(args.path)", path=str(folder)
    )


def test_s14_4_bytes_round_trip(probe: Probe, temp: Path, shared: Path) -> None:
    blob = bytes(range(256)) * 3
    (shared / "photo.png").write_bytes(blob)
    b64 = probe("fs_read_bytes(args.path)", path="data/shared/photo.png")
    assert b64 == base64.b64encode(blob).decode()
    assert probe("fs_write_bytes(args.path, args.b64)", path="copy.png", b64=b64) == str(temp / "copy.png")
    assert (temp / "copy.png").read_bytes() == blob
    wrapped = "\n".join(base64.encodebytes(b"line-wrapped base64").decode().split())
    probe("fs_write_bytes(args.path, args.b64)", path="w.bin", b64=wrapped)
    assert (temp / "w.bin").read_bytes() == b"line-wrapped base64"
    assert probe("fs_write_bytes(args.path, args.b64)", path="empty.bin", b64="") == str(temp / "empty.bin")


# -- S14.1 errors throw, name the helper and the path ----------------------------------------------


def test_s14_1_errors_are_thrown_and_catchable(probe: Probe, shared: Path) -> None:
    missing = "data/shared/missing.txt"
    assert (
        probe.error("fs_read(args.path)", path=missing)
        == f"fs_read: cannot open {missing!r}: No such file or directory"
    )
    assert probe.error("fs_list(args.path)", path=missing).startswith(f"fs_list: cannot open {missing!r}")
    assert (
        probe.error("fs_read_bytes(args.path)", path=str(shared))
        == f"fs_read_bytes: {str(shared)!r} is a folder, not a file"
    )
    (shared / "f.txt").write_text("x")
    assert probe.error("fs_list(args.path)", path=str(shared / "f.txt")).endswith("f.txt' is not a folder")
    assert (
        probe.error("fs_read(args.path)", path="data/shared/f.txt/x")
        == "fs_read: 'data/shared/f.txt/x': 'f.txt' is not a folder"
    )


def test_s14_1_bad_arguments(probe: Probe) -> None:
    assert probe.error("fs_write(42, args.c)", c="x") == "fs_write: path must be a string, got int 42"
    assert probe.error('fs_write("a.txt", args.n)', n=5) == "fs_write: content must be a string, got int 5"
    assert probe.error('fs_write_bytes("a.bin", "not base64!")').startswith(
        "fs_write_bytes: b64 is not valid base64"
    )
    assert probe.error('fs_read("")') == "fs_read: path is empty"
    assert probe.error('fs_write("a.txt")') == "fs_write: expected at least 2 argument(s), got 1"


def test_s14_1_not_utf8(probe: Probe, shared: Path) -> None:
    (shared / "bin.dat").write_bytes(b"ok\xff\xfe")
    assert probe.error("fs_read(args.path)", path=str(shared / "bin.dat")).endswith(
        "bin.dat' is not UTF-8 text (bad byte at offset 2); use fs_read_bytes"
    )


def test_s14_2_no_temp_dir_outside_a_session(probe: Probe) -> None:
    for expr, helper in (
        ('fs_write("a.txt", "x")', "fs_write"),
        ('fs_write_bytes("a.bin", "eA==")', "fs_write_bytes"),
    ):
        message = probe.error(expr, session=None)
        assert message.startswith("no temp dir: ") and helper in message


def test_no_files_service_attached(project: Path, make_tool: ToolFactory, engine: str) -> None:
    probe = Probe(build_kernel(project, attach=False), make_tool, engine)
    assert probe.error('fs_read("x")') == "fs_read: no files service attached to this kernel"
    assert probe.error('fs_write("x", "y")') == "fs_write: no files service attached to this kernel"


# -- S14.2 confinement: lexical escapes ------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "../escape.txt",
        "../../../../../../../../etc/escape.txt",
        "a/../../escape.txt",
        "a/b/../../../escape.txt",
        "./../escape.txt",
        "..",
        "../s-1-x/escape.txt",
        "/etc/escape.txt",
        "/tmp/escape.txt",
        "/proc/self/cwd/escape.txt",
        "/proc/self/root/TEMP/escape.txt",
        "TEMP/../escape.txt",
        "TEMP/../../escape.txt",
        "TEMP_sibling/escape.txt",
        "//etc/escape.txt",
    ],
)
def test_s14_2_paths_leading_out_are_refused(probe: Probe, temp: Path, tmp_path: Path, path: str) -> None:
    path = path.replace("TEMP", str(temp).lstrip("/") if path.startswith("/proc") else str(temp))
    before = tree(tmp_path)
    message = probe.write_error(path)
    # a long path (pytest's temp folder under another runner) is shown shortened
    assert message == f"fs_write: path {confined.show_path(path)} {OUTSIDE}"
    bytes_message = probe.error("fs_write_bytes(args.path, args.b64)", path=path, b64="eA==")
    assert bytes_message == f"fs_write_bytes: path {confined.show_path(path)} {OUTSIDE}"
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "path", ["a/../b.txt", "./b.txt", "a/./../b.txt", ".//b.txt", "TEMP/b.txt", "TEMP/x/../b.txt"]
)
def test_s14_2_paths_that_stay_inside_are_allowed(probe: Probe, temp: Path, path: str) -> None:
    assert probe.write(path.replace("TEMP", str(temp)), "in") == str(temp / "b.txt")
    assert (temp / "b.txt").read_text() == "in"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "fs_write: path is empty"),
        (".", "fs_write: path '.' is the session temp dir itself, not a file"),
        ("TEMP", "fs_write: path 'TEMP' is the session temp dir itself, not a file"),
        ("TEMP/", "fs_write: path 'TEMP/' is the session temp dir itself, not a file"),
        ("sub/..", "fs_write: path 'sub/..' is the session temp dir itself, not a file"),
        ("sub/", "fs_write: path 'sub/' names a folder, not a file"),
        ("existing", "fs_write: path 'existing' names a folder, not a file"),
        ("a/b/.", "fs_write: path 'a/b/.' names a folder, not a file"),
        ("file.txt/x", "fs_write: path 'file.txt/x': 'file.txt' is not a folder"),
    ],
)
def test_s14_2_writing_a_folder_is_refused(probe: Probe, temp: Path, path: str, reason: str) -> None:
    (temp / "existing").mkdir()
    (temp / "file.txt").write_text("keep")
    assert probe.write_error(path.replace("TEMP", str(temp))) == reason.replace("TEMP", str(temp))
    assert (temp / "existing").is_dir() and (temp / "file.txt").read_text() == "keep"


# -- S14.2 confinement: links ----------------------------------------------------------------------


def test_s14_2_link_to_a_file_outside(probe: Probe, temp: Path, outside: Path) -> None:
    (temp / "link.txt").symlink_to(outside / "victim.txt")
    message = probe.write_error("link.txt")
    assert message == f"fs_write: path 'link.txt' {OUTSIDE}: it is a symbolic link"
    assert (outside / "victim.txt").read_text() == "original"


def test_s14_2_link_to_a_folder_outside(probe: Probe, temp: Path, outside: Path) -> None:
    (temp / "linkdir").symlink_to(outside)
    for path in ("linkdir/victim.txt", "linkdir/new.txt", "linkdir/new/deep.txt", f"{temp}/linkdir/x"):
        assert probe.write_error(path) == f"fs_write: path {path!r} {OUTSIDE}: 'linkdir' is a symbolic link"
    assert tree(outside) == ["victim.txt"] and (outside / "victim.txt").read_text() == "original"


def test_s14_2_symlinked_parent_folder_deeper_down(probe: Probe, temp: Path, outside: Path) -> None:
    (temp / "a" / "b").mkdir(parents=True)
    (temp / "a" / "b" / "up").symlink_to("../../..")  # relative link climbing out of temp
    assert (
        probe.write_error("a/b/up/x.txt")
        == f"fs_write: path 'a/b/up/x.txt' {OUTSIDE}: 'a/b/up' is a symbolic link"
    )
    (temp / "a" / "out").symlink_to(outside)
    assert OUTSIDE in probe.write_error("a/out/victim.txt")
    assert (outside / "victim.txt").read_text() == "original"


def test_s14_2_links_are_never_followed_even_pointing_inside(probe: Probe, temp: Path) -> None:
    """Stricter than S14.2 requires: a write never goes through a link, wherever it points."""
    (temp / "real").mkdir()
    (temp / "alias").symlink_to(temp / "real")
    assert OUTSIDE in probe.write_error("alias/x.txt")
    assert list((temp / "real").iterdir()) == []


def test_s14_2_hard_link_to_a_file_outside_is_replaced_not_written_through(
    probe: Probe, temp: Path, outside: Path
) -> None:
    try:
        os.link(outside / "victim.txt", temp / "hard.txt")
    except OSError as exc:  # pragma: no cover - another filesystem, or protected_hardlinks
        pytest.skip(f"cannot make the hard link: {exc}")
    assert probe.write("hard.txt", "mine") == str(temp / "hard.txt")
    assert (temp / "hard.txt").read_text() == "mine"
    assert (outside / "victim.txt").read_text() == "original"


# -- S14.2 confinement: races ----------------------------------------------------------------------


def test_s14_2_link_swapped_in_after_the_check_is_replaced(
    probe: Probe, temp: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attacker plants `target → outside` right after the target was checked: the write replaces
    the link (rename never follows one) instead of writing through it."""
    check = confined._check_target

    def check_then_swap(folder: int, name: str, path: str) -> int | None:
        replaced = check(folder, name, path)
        os.symlink(outside / "victim.txt", name, dir_fd=folder)
        return replaced

    monkeypatch.setattr(confined, "_check_target", check_then_swap)
    probe.write("target.txt", "mine")
    assert (outside / "victim.txt").read_text() == "original"
    assert not (temp / "target.txt").is_symlink() and (temp / "target.txt").read_text() == "mine"


def test_s14_2_folder_swapped_for_a_link_after_it_was_entered(
    probe: Probe, temp: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk holds each folder open: moving it away and planting a link in its place changes nothing."""
    (temp / "sub").mkdir()
    enter = confined._enter

    def enter_then_swap(folder: int, name: str, path: str, walked: list[str], *, create: bool) -> int | None:
        handle = enter(folder, name, path, walked, create=create)
        os.rename(name, "moved", src_dir_fd=folder, dst_dir_fd=folder)
        os.symlink(outside, name, dir_fd=folder)
        return handle

    monkeypatch.setattr(confined, "_enter", enter_then_swap)
    probe.write("sub/victim.txt", "mine")
    assert (outside / "victim.txt").read_text() == "original" and tree(outside) == ["victim.txt"]
    assert (temp / "moved" / "victim.txt").read_text() == "mine"


FLIPPER = """
import os, shutil, sys, time
sub, outside = sys.argv[1], sys.argv[2]
as_link = False
print("flipping", flush=True)
while True:
    try:
        os.unlink(sub) if os.path.islink(sub) else shutil.rmtree(sub)
    except OSError:
        pass
    try:
        os.symlink(outside, sub) if as_link else os.mkdir(sub)
    except OSError:
        pass
    time.sleep(0.0003)
    as_link = not as_link
"""


def race_a_link_flipper(
    folder: Path,
    target: Path,
    attempt: Callable[[], object],
    *,
    wanted: tuple[str, ...] = ("done", "refused"),
    attempts: int = 500,
) -> dict[str, int]:
    """Run `attempt` again and again while another process flips `folder` between a real folder
    and a link to `target`; how many attempts went through and how many were refused.

    It stops after `attempts` tries once every outcome in `wanted` has been seen
    (counted, not timed, so a loaded machine only makes it slower); the minute
    is a safety net that the caller's outcome asserts then report.
    """
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(folder), str(target)], stdout=subprocess.PIPE, text=True
    )
    outcomes = {"done": 0, "refused": 0}
    try:
        assert flipper.stdout is not None and flipper.stdout.readline() == "flipping\n"
        safety_net = time.monotonic() + 60
        while sum(outcomes.values()) < attempts or not all(outcomes[name] for name in wanted):
            if time.monotonic() > safety_net:
                break
            try:
                attempt()
                outcomes["done"] += 1
            except confined.PathRefused:
                outcomes["refused"] += 1
    finally:
        flipper.kill()
        flipper.wait()
    return outcomes


def test_s14_2_racing_a_link_flipper(kernel: Kernel, temp: Path, outside: Path) -> None:
    """Another process flips `sub` between a real folder and a link to outside while writes run:
    some writes land, some are refused, none escapes."""
    service = kernel_parts(kernel).services.get(FILES)
    assert isinstance(service, FilesService)
    outcomes = race_a_link_flipper(
        temp / "sub", outside, lambda: service.write_file(temp, "sub/victim.txt", b"pwned")
    )
    assert tree(outside) == ["victim.txt"] and (outside / "victim.txt").read_text() == "original"
    assert outcomes["done"] > 0 and outcomes["refused"] > 0, outcomes


# -- S14.2 odd paths -------------------------------------------------------------------------------


def test_nul_bytes_are_refused(probe: Probe, temp: Path) -> None:
    assert probe.write_error("a\x00b.txt") == "fs_write: path 'a\\x00b.txt' contains a NUL byte"
    assert probe.error("fs_read(args.path)", path="/etc/passwd\x00.png") == (
        "fs_read: path '/etc/passwd\\x00.png' contains a NUL byte"
    )
    assert probe.error("fs_list(args.path)", path="\x00") == "fs_list: path '\\x00' contains a NUL byte"
    assert list(temp.iterdir()) == []


def test_very_long_names_give_clean_errors(probe: Probe, temp: Path, shared: Path) -> None:
    long = "x" * 300
    assert probe.write_error(long).endswith(": File name too long")
    assert probe.write_error(f"{long}/y.txt").endswith(": File name too long")
    assert probe.error("fs_read(args.path)", path=f"data/shared/{long}").endswith(": File name too long")
    huge = "a/" * 3000 + "f.txt"
    assert probe.write_error(huge) == "fs_write: path is too long (6,005 characters, at most 4,096)"
    assert (
        probe.error("fs_read(args.path)", path=huge)
        == "fs_read: path is too long (6,005 characters, at most 4,096)"
    )
    message = probe.write_error("é" * 200)
    assert len(message) < 300 and message.endswith("File name too long")  # 400 bytes: over NAME_MAX
    assert list(temp.iterdir()) == []


def test_s14_2_writes_stay_shallow_enough_to_be_walked(probe: Probe, temp: Path) -> None:
    """A write makes at most 63 folders, and its file stays under PATH_MAX counted from `/`.

    `fs_write("a/a/…(2,000 times)/x")` made a tree the quota's count and the
    clean-up could not walk (RecursionError: every later write of the session
    failed with an internal error), and a file past PATH_MAX is neither
    counted nor removed by path.
    """
    deep = "a/" * 64 + "x.txt"
    assert probe.write_error(deep) == (
        f"fs_write: path {confined.show_path(deep)} is 65 names deep, over the limit of 64"
    )
    assert probe.write("a/" * 63 + "x.txt") == str(temp.joinpath(*["a"] * 63, "x.txt"))
    long = "/".join(["n" * 200] * 20)
    message = probe.write_error(long)
    assert message.endswith("characters long inside the session temp dir, at most 4,095"), message
    assert not (temp / ("n" * 200)).exists()


def test_proc_is_not_readable(probe: Probe, temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/self/environ would show the secrets env_var hides; no spelling of it gets through."""
    monkeypatch.setenv("TEST_HIDDEN_KEY", "s3cr3t")
    (temp / "env").symlink_to("/proc/self/environ")
    for path in ("/proc/self/environ", "/proc/self/mem", "/dev/fd/../environ", "/proc/self/cwd/x"):
        assert probe.error("fs_read_bytes(args.path)", path=path) == (
            f"fs_read_bytes: {path!r} is outside the folders scripts may read (files.read_roots: "
            "config/scripts/tools, config/scripts/hooks, data/shared; and the session temp dir)"
        )
    link = str(temp / "env")
    assert probe.error("fs_read_bytes(args.path)", path=link) == (
        f"fs_read_bytes: {link!r}: 'env' is a symbolic link, and reads never follow links"
    )
    assert "outside the folders scripts may read" in probe.error("fs_list(args.path)", path="/proc/self/fd")


def test_proc_stays_unreadable_under_a_read_root(project: Path, make_tool: ToolFactory) -> None:
    """A read root on /proc's file system (an operator's mistake) still reads nothing there."""
    probe = Probe(build_kernel(project, "files:\n  read_roots: [/proc/self]\n"), make_tool, ".js")
    assert probe.error("fs_read(args.path)", path="/proc/self/status").endswith(
        "is under /proc, which scripts may not read"
    )
    assert probe.error("fs_list(args.path)", path="/proc/self").endswith(
        "is under /proc, which scripts may not read"
    )


def test_fifos_and_devices_do_not_hang(probe: Probe, temp: Path, shared: Path) -> None:
    fifo = shared / "pipe"
    os.mkfifo(fifo)
    assert (
        probe.error("fs_read(args.path)", path=str(fifo)) == f"fs_read: {str(fifo)!r} is not a regular file"
    )
    os.mknod(temp / "pipe2", 0o600 | stat.S_IFIFO)
    assert probe.error('fs_read_bytes(caller().temp_dir + "/pipe2")').endswith("pipe2' is not a regular file")
    os.mkfifo(temp / "planted")
    assert probe.write("planted", "replaced") == str(temp / "planted")  # replaced, never opened
    assert (temp / "planted").read_text() == "replaced"


# -- limits ----------------------------------------------------------------------------------------


def test_read_and_write_limits(project: Path, make_tool: ToolFactory, engine: str, shared: Path) -> None:
    kernel = build_kernel(project, "files:\n  max_read_bytes: 100\n  max_write_bytes: 10\n")
    probe = Probe(kernel, make_tool, engine)
    (shared / "small").write_bytes(b"x" * 100)
    (shared / "big").write_bytes(b"x" * 101)
    assert probe("fs_read(args.path)", path=str(shared / "small")) == "x" * 100
    assert probe.error("fs_read_bytes(args.path)", path=str(shared / "big")).endswith(
        "/big' is 101 bytes, over the 100-byte limit (files.max_read_bytes)"
    )
    assert probe.write("ten.txt", "0123456789") is not None
    assert probe.write_error("eleven.txt", "0123456789a") == (
        "fs_write: content is 11 bytes, over the 10-byte limit (files.max_write_bytes)"
    )
    b64 = base64.b64encode(b"x" * 11).decode()
    assert "over the 10-byte limit" in probe.error("fs_write_bytes(args.path, args.b64)", path="b", b64=b64)
    assert "over the 10-byte limit" in probe.error(
        "fs_write_bytes(args.path, args.b64)", path="b", b64="QUFB" * 1000
    )


def test_list_limit(project: Path, make_tool: ToolFactory, shared: Path) -> None:
    probe = Probe(build_kernel(project, "files:\n  max_list_entries: 3\n"), make_tool, ".js")
    for name in "abc":
        (shared / "few" / name).mkdir(parents=True)
    assert probe("fs_list(args.path)", path="data/shared/few") == ["a/", "b/", "c/"]
    (shared / "few" / "d").touch()
    assert probe.error("fs_list(args.path)", path="data/shared/few").endswith(
        "has more than 3 entries (files.max_list_entries)"
    )


def test_concurrent_writes_of_one_file_never_mix(kernel: Kernel, temp: Path) -> None:
    service = kernel_parts(kernel).services.get(FILES)
    assert isinstance(service, FilesService)
    versions = [bytes([65 + i]) * 200_000 for i in range(8)]
    threads = [threading.Thread(target=service.write_file, args=(temp, "same.bin", v)) for v in versions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert (temp / "same.bin").read_bytes() in versions
    assert [p.name for p in temp.iterdir()] == ["same.bin"]


# -- configuration ---------------------------------------------------------------------------------


def test_settings_defaults_and_config(project: Path) -> None:
    assert load_kernel_config(write_kernel_yaml(project)).files == FilesSettings(
        max_read_bytes=16 << 20, max_write_bytes=16 << 20, max_list_entries=10_000
    )
    config = load_kernel_config(
        write_kernel_yaml(project, "files:\n  max_read_bytes: 5\n  max_write_bytes: 6\n")
    )
    assert config.files == FilesSettings(5, 6, 10_000)
    assert FilesService.from_config(config).root == project.resolve()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("files:\n  max_read_bytes: 0", "files.max_read_bytes: expected an integer >= 1, got 0"),
        ("files:\n  max_write_bytes: '1M'", "files.max_write_bytes: expected an integer >= 1, got '1M'"),
        ("files:\n  max_list_entries: true", "files.max_list_entries: expected an integer >= 1, got True"),
        (
            "files:\n  root: /",
            "files.root: unknown field (known: read_roots, max_read_bytes, max_write_bytes, "
            "max_list_entries, max_scratch_bytes, max_scratch_entries, scratch_ttl_hours)",
        ),
    ],
)
def test_bad_config_names_the_field(project: Path, section: str, message: str) -> None:
    """Refused when kernel.yaml loads, at the key's line (S2.4), though the service is built later."""
    path = write_kernel_yaml(project, section + "\n")
    with pytest.raises(ConfigError) as info:
        load_kernel_config(path)
    assert (info.value.path, info.value.reason) == (str(path), message)
    assert info.value.line == path.read_text().splitlines().index(section.splitlines()[-1]) + 1


def test_a_section_that_is_not_a_mapping(project: Path) -> None:
    with pytest.raises(ConfigError, match="files: 'big' is not of type 'object'"):
        load_kernel_config(write_kernel_yaml(project, "files: big\n"))


# -- read roots: configuration (S14.3) -------------------------------------------------------------


def test_read_roots_default_and_configured(project: Path) -> None:
    config = load_kernel_config(write_kernel_yaml(project))
    service = FilesService.from_config(config)
    assert [root.shown for root in service.roots] == [
        "config/scripts/tools",
        "config/scripts/hooks",
        "data/shared",
    ]
    config = load_kernel_config(
        write_kernel_yaml(project, f"files:\n  read_roots: [docs, {project / 'pub'}]\n")
    )
    assert [root.path for root in FilesService.from_config(config).roots] == [
        project / "docs",
        project / "pub",
    ]
    config = load_kernel_config(write_kernel_yaml(project, "files:\n  read_roots: []\n"))
    assert FilesService.from_config(config).roots == ()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            "files:\n  read_roots: [data]\nstate:\n  db_path: data/state.db\n",
            "files.read_roots: 'data' holds every session's scratch folder (paths.temp_root: data/tmp), "
            "which scripts may not read; keep the stores outside every read root",
        ),
        (
            "files:\n  read_roots: [var]\nstate:\n  db_path: var/state.db\n",
            "files.read_roots: 'var' holds the state store (state.db_path: var/state.db)",
        ),
        (
            "files:\n  read_roots: [logs]\nlogging:\n  messages_db_path: logs/messages.db\n",
            "files.read_roots: 'logs' holds the transcript (logging.messages_db_path: logs/messages.db)",
        ),
        (
            "files:\n  read_roots: [db]\nduckdb:\n  dir: ../db\n",
            "files.read_roots: 'db' holds the DuckDB folder (duckdb.dir: db)",
        ),
        (
            "files:\n  read_roots: [data/tmp/x]\n",
            "files.read_roots: 'data/tmp/x' lies inside every session's",
        ),
        (
            "files:\n  read_roots: [data/duckdb/u]\n",
            "files.read_roots: 'data/duckdb/u' lies inside the DuckDB",
        ),
        ("files:\n  read_roots: ['..']\n", "files.read_roots: '..' holds every session's scratch folder"),
        (
            "files:\n  read_roots: data\n",
            "files.read_roots: expected a list of non-empty strings, got 'data'",
        ),
        ("files:\n  read_roots: ['']\n", "files.read_roots: expected a list of non-empty strings, got ['']"),
        ("files:\n  max_scratch_bytes: 0\n", "files.max_scratch_bytes: expected an integer >= 1, got 0"),
        (
            "files:\n  scratch_ttl_hours: 0\n",
            "files.scratch_ttl_hours: expected a number of hours > 0, got 0",
        ),
        (
            "scripts:\n  tools: [data]\n",
            "files.read_roots (by default the scripts folders and paths.data_dir/shared): 'data' holds",
        ),
    ],
)
def test_a_read_root_that_holds_a_store_stops_the_kernel(project: Path, section: str, message: str) -> None:
    """Checked when kernel.yaml loads (and by `agentkernel check`), not at the first read."""
    with pytest.raises(ConfigError) as info:
        Kernel(load_kernel_config(write_kernel_yaml(project, section)))
    assert info.value.reason.startswith(message), info.value.reason


def test_a_linked_read_root_is_checked_where_it_leads(project: Path) -> None:
    (project / "data").mkdir()
    (project / "innocent").symlink_to(project / "data")
    with pytest.raises(ConfigError, match="'innocent' holds every session's scratch folder"):
        load_kernel_config(write_kernel_yaml(project, "files:\n  read_roots: [innocent]\n"))


def test_a_linked_read_root_is_read_through_its_link(project: Path, make_tool: ToolFactory) -> None:
    """The operator's own link to a root is a way in (only links below a root are refused)."""
    (project / "elsewhere").mkdir()
    (project / "elsewhere" / "a.txt").write_text("via the link")
    (project / "pub").symlink_to(project / "elsewhere")
    probe = Probe(build_kernel(project, "files:\n  read_roots: [pub]\n"), make_tool, ".js")
    assert probe("fs_read(args.path)", path="pub/a.txt") == "via the link"
    assert "outside the folders" in probe.error("fs_read(args.path)", path="elsewhere/a.txt")


def test_empty_read_roots_leave_only_the_temp_dir(project: Path, make_tool: ToolFactory, engine: str) -> None:
    probe = Probe(build_kernel(project, "files:\n  read_roots: []\n"), make_tool, engine)
    probe.write("a.txt", "mine")
    assert probe('fs_read(caller().temp_dir + "/a.txt")') == "mine"
    assert probe.error("fs_list(args.path)", path="config/scripts/tools") == (
        "fs_list: 'config/scripts/tools' is outside the folders scripts may read "
        "(files.read_roots: none; and the session temp dir)"
    )


# -- the quota of a temp dir (issue 9) -------------------------------------------------------------


def test_a_temp_dir_holds_at_most_max_scratch_bytes(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    kernel = build_kernel(project, "files:\n  max_scratch_bytes: 1000\n")
    probe = Probe(kernel, make_tool, engine)
    probe.write("a.txt", "x" * 400)
    probe.write("sub/b.txt", "x" * 400)
    assert probe.write_error("c.txt", "x" * 400) == (
        "fs_write: the session temp dir would hold 1,200 bytes, over its 1,000-byte quota "
        "(files.max_scratch_bytes); it holds 800"
    )
    b64 = base64.b64encode(b"x" * 300).decode()
    assert "quota (files.max_scratch_bytes)" in probe.error(
        "fs_write_bytes(args.path, args.b64)", path="c.bin", b64=b64
    )
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None and sorted(p.name for p in temp.rglob("*")) == ["a.txt", "b.txt", "sub"]
    probe.write("a.txt", "x" * 500)  # replacing counts only the difference: 900 bytes
    probe.write("a.txt", "small")  # a smaller version always fits
    probe.write("c.txt", "x" * 500)  # 5 + 400 + 500
    assert "would hold 1,001 bytes" in probe.write_error("d.txt", "x" * 96)
    other = probe("fs_write(args.path, args.c)", "s-2", path="big.txt", c="x" * 1000)
    assert isinstance(other, str)  # each temp dir has its own quota


def test_folders_and_empty_files_count_against_max_scratch_entries(
    project: Path, make_tool: ToolFactory, engine: str
) -> None:
    """Empty files and folders hold no bytes, yet fill a disk: they stop at the entry quota (S14.2)."""
    kernel = build_kernel(project, "files:\n  max_scratch_entries: 10\n")
    probe = Probe(kernel, make_tool, engine)
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    probe.write("a/b/c/d/e.txt", "")  # 5 entries
    probe.write("a/b/c/d/e.txt", "x")  # replacing makes none
    assert probe.write_error("f/g/h/i/j/k.txt", "") == (
        "fs_write: the session temp dir would hold 11 files and folders, over its 10-entry quota "
        "(files.max_scratch_entries)"
    )
    assert not (temp / "f").exists()  # refused before any folder was made
    for name in ("f.txt", "g.txt", "a/h.txt", "a/b/i.txt", "a/b/c/j.txt"):
        probe.write(name, "")
    assert "10-entry quota" in probe.write_error("k.txt", "")
    (temp / "f.txt").unlink()  # removed behind the service's back: counted again before refusing
    probe.write("k.txt", "")


def test_a_failed_write_is_counted_again(project: Path, make_tool: ToolFactory) -> None:
    """A write that made its folders, then failed (a name too long), cannot pile up uncounted folders."""
    kernel = build_kernel(project, "files:\n  max_scratch_entries: 5\n")
    probe = Probe(kernel, make_tool, ".js")
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    messages = [probe.write_error(f"d{i}/{'x' * 300}", "") for i in range(8)]
    assert all(m.endswith("File name too long") for m in messages[:4]), messages  # a folder and a file each
    assert all("5-entry quota (files.max_scratch_entries)" in m for m in messages[4:]), messages
    assert len(list(temp.iterdir())) == 4


def nearly_full(project: Path, make_tool: ToolFactory) -> tuple[Kernel, Probe, Path]:
    """A kernel whose temp dirs hold 1,000 bytes, and the probes' temp dir with 900 of them used."""
    kernel = build_kernel(project, "files:\n  max_scratch_bytes: 1000\n")
    probe = Probe(kernel, make_tool, ".js")
    probe.write("a.txt", "x" * 900)
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    return kernel, probe, temp


def test_the_quota_counts_again_before_refusing(project: Path, make_tool: ToolFactory) -> None:
    """Files removed behind the service's back (by `shell`, or by hand) are not held against the dir."""
    _, probe, temp = nearly_full(project, make_tool)
    (temp / "a.txt").unlink()
    assert probe.write("b.txt", "x" * 900) == str(temp / "b.txt")
    (temp / "planted.bin").write_bytes(b"x" * 50)  # written by other means: counted when it matters
    assert probe.write_error("c.txt", "x" * 150).endswith(
        "would hold 1,100 bytes, over its 1,000-byte quota (files.max_scratch_bytes); it holds 950"
    )


def test_the_quota_holds_against_concurrent_writers(project: Path) -> None:
    kernel = build_kernel(project, "files:\n  max_scratch_bytes: 10000\n")
    service = kernel_parts(kernel).services.get(FILES)
    assert isinstance(service, FilesService)
    temp = kernel.caller(session_id="s", user_id="u").temp_dir
    assert temp is not None
    refused: list[str] = []

    def write(i: int) -> None:
        try:
            service.write_file(temp, f"f{i}.bin", b"x" * 1000)
        except confined.PathRefused as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(refused) == 10 and sum(p.stat().st_size for p in temp.iterdir()) == 10_000


# -- old scratch folders are removed (issue 9) -----------------------------------------------------

DAY = 24 * 3600.0


def _age(path: Path, seconds: float) -> None:
    """Set the time stamps of `path` and everything below it `seconds` in the past."""
    when = time.time() - seconds
    for item in [path, *path.rglob("*")]:
        os.utime(item, (when, when), follow_symlinks=False)


def test_clean_scratch_removes_only_folders_idle_past_the_ttl(project: Path) -> None:
    kernel = build_kernel(project)
    old = kernel.caller(user_id="a", session_id="old").temp_dir
    fresh = kernel.caller(user_id="a", session_id="fresh").temp_dir
    touched = kernel.caller(user_id="b", session_id="old").temp_dir
    assert old is not None and fresh is not None and touched is not None
    (old / "deep" / "deeper").mkdir(parents=True)
    (old / "deep" / "deeper" / "f.txt").write_text("x")
    (touched / "sub").mkdir()
    (touched / "sub" / "new.txt").write_text("x")
    _age(old, 2 * DAY)
    _age(touched, 2 * DAY)
    os.utime(touched / "sub" / "new.txt")  # one file written just now keeps its folder
    root = kernel.config.temp_root
    (root / "stray-file").write_text("not a folder")
    (root / "link").symlink_to(project)
    _age(root / "stray-file", 3 * DAY)
    assert kernel.clean_scratch() == [old]
    assert not old.exists() and fresh.is_dir() and touched.is_dir()
    assert (root / "stray-file").exists() and (root / "link").is_symlink() and project.is_dir()
    assert kernel.clean_scratch(now=time.time() + DAY - 60) == []  # not yet a day idle
    assert sorted(kernel.clean_scratch(now=time.time() + DAY + 60)) == sorted([fresh, touched])


def test_the_ttl_is_a_setting(project: Path) -> None:
    kernel = build_kernel(project, "files:\n  scratch_ttl_hours: 0.5\n")
    temp = kernel.caller(user_id="a", session_id="s").temp_dir
    assert kernel.clean_scratch(now=time.time() + 1700) == []
    assert kernel.clean_scratch(now=time.time() + 1900) == [temp]


def test_the_kernel_cleans_when_it_hands_out_its_first_session_folder(project: Path) -> None:
    first = build_kernel(project)
    left = first.caller(user_id="a", session_id="yesterday").temp_dir
    assert left is not None
    _age(left, 2 * DAY)
    second = build_kernel(project)  # a new kernel: a restart, or the next `tool run`
    assert left.exists()  # nothing happens before a session asks for its folder
    mine = second.caller(user_id="b", session_id="today").temp_dir
    assert not left.exists() and mine is not None and mine.is_dir()


def test_a_session_in_use_keeps_its_folder(project: Path, make_tool: ToolFactory) -> None:
    """Using a session renews its folder's time: an old folder that is used again is not removed."""
    kernel = build_kernel(project)
    probe = Probe(kernel, make_tool, ".js")
    probe.write("keep.txt", "x")
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    _age(temp, 2 * DAY)
    assert probe('fs_read(caller().temp_dir + "/keep.txt")') == "x"  # the call renews it
    assert kernel.clean_scratch() == [] and (temp / "keep.txt").exists()


def _deep_tree(top: Path, depth: int, *, leaf: bytes = b"", link_to: Path | None = None) -> None:
    """`top/d/d/…/d/leaf.bin`, `depth` folders deep, made as `shell` could (`mkdir -p`), by descriptors."""
    folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=folder)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
        handle = os.open("leaf.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=folder)
        os.write(handle, leaf)
        os.close(handle)
        if link_to is not None:
            os.symlink(link_to, "link", dir_fd=folder)
    finally:
        os.close(folder)


def test_a_very_deep_folder_neither_breaks_the_quota_nor_the_clean_up(
    project: Path, make_tool: ToolFactory, outside: Path
) -> None:
    """A tree deeper than Python's recursion limit, left by `shell`: counted, then removed (S14.2)."""
    kernel = build_kernel(project, "files:\n  max_scratch_bytes: 1000\n")
    probe = Probe(kernel, make_tool, ".js")
    temp = kernel.caller(session_id="s-1", user_id="u-1").temp_dir
    assert temp is not None
    _deep_tree(temp, 1500, leaf=b"x" * 300, link_to=outside)
    assert probe.write_error("a.txt", "x" * 800).endswith(
        "would hold 1,100 bytes, over its 1,000-byte quota (files.max_scratch_bytes); it holds 300"
    )
    assert kernel.clean_scratch(now=time.time() + 2 * DAY) == [temp]
    assert not temp.exists()
    assert (outside / "victim.txt").read_text() == "original"  # the link was removed, not followed


def test_passes_after_the_first_wait_for_the_interval(tmp_path: Path) -> None:
    janitor = ScratchJanitor(tmp_path, ttl_secs=DAY, interval=3600)
    assert janitor.due(1000.0)
    assert not janitor.due(1000.0 + 3599)
    assert janitor.due(1000.0 + 3600)
    assert ScratchJanitor(tmp_path, ttl_secs=60).interval == 60  # never less often than the ttl


def test_a_removed_folder_starts_its_quota_afresh(project: Path, make_tool: ToolFactory) -> None:
    kernel, probe, temp = nearly_full(project, make_tool)
    _age(temp, 2 * DAY)
    assert kernel.clean_scratch() == [temp]
    assert probe.write("b.txt", "x" * 900) == str(temp / "b.txt")


# -- a process's scratch folder, made on first use ---------------------------------------------------


def in_a_process(kernel: Kernel, make_tool: ToolFactory, engine: str, session: str, expr: str) -> JSONValue:
    """`expr` in a fresh tool called for a process of `session`, as a chat's tool call is (the process's
    scratch folder, not the one `kernel.caller` makes)."""
    tool = f"probe{next(_counter)}"
    make_tool(tool, probe_source(engine, expr), ext=engine)
    template = TemplateSpec(name="scratchy", instructions="", tools=(tool,))
    process = kernel.spawn(template, user_id="u-1", session_id=session)
    try:
        result = kernel.run_tool(tool, {}, process)
    finally:
        kernel.terminate(process.pid)
    assert result.success and result.content == "ok", (result.content, result.data)
    assert isinstance(result.data, dict)
    return result.data["value"]


def test_a_session_that_writes_nothing_has_no_scratch_folder(kernel: Kernel) -> None:
    """A process names its session's folder but makes it only when a helper uses it: a chat turn that
    writes no file costs no folder."""
    process = kernel.spawn(TemplateSpec(name="scratchy", instructions=""), user_id="u-1", session_id="idle")
    assert process.temp_dir is not None and not process.temp_dir.exists()
    assert process.temp_dir.parent == kernel.config.temp_root.resolve()


def test_a_script_finds_the_folder_it_writes_to(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    """The first fs_write of a session makes its folder, private to the kernel user; what it wrote is
    there for the next call (another process of the session) to list and read."""
    written = in_a_process(kernel, make_tool, engine, "writes", 'fs_write("notes/a.txt", "kept")')
    assert isinstance(written, str) and Path(written).read_text(encoding="utf-8") == "kept"
    folder = Path(written).parent.parent
    assert folder.stat().st_mode & 0o777 == 0o700
    assert in_a_process(kernel, make_tool, engine, "writes", "fs_list(caller().temp_dir)") == ["notes/"]
    read = 'fs_read(caller().temp_dir + "/notes/a.txt")'
    assert in_a_process(kernel, make_tool, engine, "writes", read) == "kept"


def test_a_fresh_session_lists_an_empty_folder(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    """Reading a session's folder before anything wrote to it is reading an empty folder, not an error."""
    assert in_a_process(kernel, make_tool, engine, "fresh", "fs_list(caller().temp_dir)") == []


def test_caller_names_a_folder_that_is_there(kernel: Kernel, make_tool: ToolFactory, engine: str) -> None:
    """`caller().temp_dir` is a folder that exists (a script may hand it to a program or a tool)."""
    named = in_a_process(kernel, make_tool, engine, "named", "caller().temp_dir")
    assert isinstance(named, str) and Path(named).is_dir()
