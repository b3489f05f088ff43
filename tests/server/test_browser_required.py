"""The browser tests need Debian's Chromium: without it they skip, but where `CI` is set they fail.

So CI (`.ci/run`, which installs Chromium and sets `CI`) can never pass
with the page untested. Shown on a one-test file using the `browser`
fixture, run by pytest in a subprocess with the browser's path pointed at
nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

NEEDS_BROWSER = """
from tests.server.conftest import browser  # noqa: F401  (the fixture)


def test_needs_the_browser(browser):
    pass
"""


def run_without_chromium(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_browser.py"
    test.write_text(NEEDS_BROWSER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env |= {"AGENTKERNEL_TEST_CHROMIUM": str(tmp_path / "no-chromium"), "PYTHONPATH": str(REPO)}
    if ci is not None:
        env["CI"] = ci
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist"]
    argv.append(test.name)
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_without_chromium_a_browser_test_skips_saying_what_to_install(tmp_path: Path) -> None:
    ran = run_without_chromium(tmp_path, None)
    assert ran.returncode == 0 and "1 skipped" in ran.stdout, ran.stdout + ran.stderr
    assert "needs Debian's Chromium at" in ran.stdout and "(apt-get install chromium)" in ran.stdout


def test_under_ci_a_browser_test_without_chromium_fails(tmp_path: Path) -> None:
    ran = run_without_chromium(tmp_path, "true")
    assert ran.returncode == 1 and "1 error" in ran.stdout, ran.stdout + ran.stderr
    assert "CI is set, where a browser test may not skip" in ran.stdout, ran.stdout


def test_ci_installs_chromium_and_sets_ci_and_the_readme_says_so() -> None:
    ci_run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "export CI=true" in ci_run and "apt-get install -y -q chromium" in ci_run
    assert ci_run.index("export CI=true") < ci_run.index("pytest -q -n 2")
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "drive Debian's Chromium (`apt-get install chromium`, at `/usr/bin/chromium`)" in readme
    assert "Without it they skip, unless the variable `CI` is set: then they fail." in readme
