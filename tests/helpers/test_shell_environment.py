"""Issue 9, the shell weak spot: a program a script starts cannot read the kernel's secrets (S13, S8.4).

The attack: with `SECRET_TOKEN` denied to `env_var`, a shell tool ran
`tr '\\0' '\\n' < /proc/$PPID/environ` and printed it. Now a program gets a
clean environment from an allow list, and the kernel blanks its denied
variables in its own `/proc/PID/environ` before the first program starts.
Each test runs the kernel as a user runs it, `agentkernel tool run` in a
subprocess whose environment holds the secret, with JS and Rhai tools.

As a user other than root, the kernel is also non-dumpable
(`shell.non_dumpable`, the default), so a program cannot read the secret
from the kernel's memory either; root can, which docs/scripts.md 8.6.3
says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_kernel_yaml

BIN = Path(sys.executable).parent

# Every place a program might find the secret: its own environment, its parent's (the kernel),
# every ancestor's, the kernel's by its pid, and every process's it can read.
PEEK = r"""
env
show() {
  echo "--- $1 $2: $(tr '\0' '\n' < /proc/$2/environ | wc -l) variables"
  tr '\0' '\n' < /proc/$2/environ | grep SECRET
}
show parent $PPID
p=$PPID
while [ "$p" -gt 1 ]; do
  show ancestor $p
  p=$(cut -d')' -f2 /proc/$p/stat | cut -d' ' -f3)
done
show kernel $KERNEL_PID
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null | grep SECRET_TOKEN; done
echo "--- done"
"""

TOOLS = {
    ".js": "function run(args) { return shell(args.script.replace('$KERNEL_PID', args.pid)).stdout; }",
    ".rhai": 'fn run(args) { let s = args.script; s.replace("$KERNEL_PID", `${args.pid}`); shell(s).stdout }',
}

KERNEL_YAML = """\
scripts:
  env_deny: ["SECRET_*"]
shell:
  enabled: true
"""
BASE_NAMES = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
    "PWD",
}  # PWD: sh's own


def run_tool(project: Path, name: str, args: dict[str, object], env: dict[str, str]) -> str:
    """`agentkernel tool run NAME -` with `args` (and the kernel's own pid) on stdin; the content."""
    command = [str(BIN / "agentkernel"), "--config", str(project / "config" / "kernel.yaml"), "tool", "run"]
    with subprocess.Popen(
        [*command, name, "-"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as kernel:
        out, err = kernel.communicate(json.dumps({**args, "pid": kernel.pid}), timeout=120)
    assert kernel.returncode == 0, err
    content = json.loads(out)["content"]
    assert isinstance(content, str)
    return content


def tool(project: Path, ext: str, source: str) -> None:
    tools = project / "config" / "scripts" / "tools"
    (tools / f"peek{ext}").write_text(source, encoding="utf-8")
    (tools / "peek.yaml").write_text(f"kind: script_tool\nname: peek\nscript: peek{ext}\n")


@pytest.mark.parametrize("ext", [".js", ".rhai"])
def test_no_program_finds_the_kernels_secret_in_any_environ(project: Path, ext: str) -> None:
    write_kernel_yaml(project, KERNEL_YAML)
    tool(project, ext, TOOLS[ext])
    secret = f"hunter2-{uuid.uuid4().hex}"
    env = {**os.environ, "SECRET_TOKEN": secret, "OTHER_VALUE": "unlisted"}
    seen = run_tool(project, "peek", {"script": PEEK}, env)
    assert seen.rstrip().endswith("--- done"), seen[-500:]
    assert secret not in seen  # was: SECRET_TOKEN=hunter2-… in /proc/$PPID/environ
    kernel = re.search(r"^--- kernel \d+: (\d+) variables$", seen, re.MULTILINE)
    assert kernel and int(kernel[1]) > 3, seen  # its environ was read: only the secret is gone from it
    own = {line.split("=", 1)[0] for line in seen.split("--- parent", 1)[0].splitlines()}
    assert "PATH" in own and "OTHER_VALUE" not in own  # an allow list: what nobody denied stays home too
    assert own <= BASE_NAMES | {name for name in own if name.startswith("LC_")}


def test_env_allow_passes_more_names_but_never_a_denied_one(project: Path) -> None:
    write_kernel_yaml(project, KERNEL_YAML + '  env_allow: ["PLAIN_*", "SECRET_TOKEN"]\n')
    tool(project, ".js", 'function run() { return shell("env").stdout; }')
    env = {**os.environ, "SECRET_TOKEN": "s3cr3t", "PLAIN_VALUE": "visible", "OTHER_VALUE": "unlisted"}
    own = run_tool(project, "peek", {}, env).splitlines()
    assert "PLAIN_VALUE=visible" in own
    assert not [line for line in own if line.startswith(("SECRET_TOKEN=", "OTHER_VALUE="))]


def test_the_program_environment_is_an_allow_list_and_denied_names_never_pass() -> None:
    from agentkernel.services.program_environment import program_environment

    source = {
        "PATH": "/bin",
        "LC_ALL": "C",
        "HOME": "/h",
        "API_KEY": "k",
        "PLAIN_A": "a",
        "PLAIN_SECRET": "s",
    }
    built = program_environment(source, ["PLAIN_*"], lambda name: name.endswith("SECRET"))
    assert built == {"PATH": "/bin", "LC_ALL": "C", "HOME": "/h", "PLAIN_A": "a"}


# -- the kernel's memory, for a kernel that does not run as root ----------------------------------------

MEMORY_SCAN = r"""
import sys
pid, needle = int(sys.argv[1]), sys.argv[2][::-1].encode()  # given reversed: the tool's args hold no secret
try:
    regions = [line.split() for line in open(f"/proc/{pid}/maps")]
    memory = open(f"/proc/{pid}/mem", "rb", buffering=0)
except OSError as exc:
    print("refused:", exc.strerror)
    raise SystemExit
for region in regions:
    start, end = (int(x, 16) for x in region[0].split("-"))
    if "r" in region[1] and end - start < 1 << 29:
        try:
            memory.seek(start)
            if needle in memory.read(end - start):
                print("found")
                raise SystemExit
        except OSError:
            pass
print("not found")
"""

MEMORY_TOOL = """
function run(args) {
    const r = shell(args.python + " " + args.scan + " $PPID " + args.secret);
    return r.stdout + r.stderr;
}
"""


AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def python_for_nobody() -> str:
    """A Python the user `nobody` may run, for the scan the tool starts."""
    for python in (sys.executable, "/usr/bin/python3"):
        check = [*AS_NOBODY, "/bin/sh", "-c", f"{python} -c pass"]  # started as the tool's shell will
        if subprocess.run(check, capture_output=True, timeout=60).returncode == 0:
            return python
    pytest.skip("no Python that the user nobody may run")


@pytest.fixture
def nobodys_project() -> Iterator[Path]:
    """A project the unprivileged user `nobody` can read, for a kernel run as that user."""
    if os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("runs the kernel as another user: needs root and setpriv")
    folder = Path(tempfile.mkdtemp(prefix="ak-nobody-"))
    try:
        write_kernel_yaml(folder, KERNEL_YAML)
        tool(folder, ".js", MEMORY_TOOL)
        (folder / "scan.py").write_text(MEMORY_SCAN, encoding="utf-8")
        for path in (folder, *folder.rglob("*")):
            os.chown(path, 65534, 65534)
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    ("non_dumpable", "expected"), [(True, "refused: Permission denied"), (False, "found")]
)
def test_a_non_dumpable_kernel_keeps_its_memory_from_its_programs(
    nobodys_project: Path, non_dumpable: bool, expected: str
) -> None:
    """What really works here, as an unprivileged user: with `non_dumpable: false` the secret is in reach."""
    config = nobodys_project / "config" / "kernel.yaml"
    config.write_text(KERNEL_YAML + f"  non_dumpable: {str(non_dumpable).lower()}\n", encoding="utf-8")
    secret = f"hunter2-{uuid.uuid4().hex}"
    command = [*AS_NOBODY, str(BIN / "agentkernel")]
    args = {"python": python_for_nobody(), "scan": str(nobodys_project / "scan.py"), "secret": secret[::-1]}
    done = subprocess.run(
        [*command, "--config", str(config), "tool", "run", "peek", json.dumps(args)],
        cwd=nobodys_project,
        env={**os.environ, "SECRET_TOKEN": secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"].strip() == expected
