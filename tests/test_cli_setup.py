"""The set-up step `make test` runs first: install missing system packages or say what to run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path: Path, packages: str) -> subprocess.CompletedProcess:
    ci = tmp_path / ".ci"
    ci.mkdir()
    shutil.copy(ROOT / ".ci" / "system-deps", ci / "system-deps")
    (ci / "system-packages").write_text(packages)
    return subprocess.run(
        ["bash", str(ci / "system-deps")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "VERIGAP_NO_APT": "1"},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_missing_package_stops_with_the_command_to_run(tmp_path: Path) -> None:
    done = _run(tmp_path, "# comment\nbash bash\nno-such-pkg no-such-command-xyz\n")
    assert done.returncode == 1
    assert done.stderr == (
        "error: missing system package(s): no-such-pkg; run: sudo apt-get install -y no-such-pkg\n"
    )


def test_nothing_happens_when_everything_is_there(tmp_path: Path) -> None:
    done = _run(tmp_path, "bash bash\ncoreutils ls\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_the_listed_packages_are_what_the_suite_needs() -> None:
    lines = [
        ln.split()
        for ln in (ROOT / ".ci" / "system-packages").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines == [
        ["bubblewrap", "bwrap"],
        ["chromium", "chromium"],
        ["chromium-driver", "chromedriver"],
    ]
    assert "system-deps" in (ROOT / "Makefile").read_text().split("\ntest:")[1].split("\n")[0]


def test_the_cli_and_the_pilot_import_only_the_core() -> None:
    # `make pilot` installs the core package alone: nothing on its path may need an extra.
    code = (
        "import sys, verigap.cli, verigap.patchworld.pilot, verigap.report.site\n"
        "print(sorted(m for m in ('torch', 'libcst', 'openai', 'anthropic', 'hypothesis',"
        " 'pytest', 'fastapi', 'uvicorn', 'httpx', 'ray') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
