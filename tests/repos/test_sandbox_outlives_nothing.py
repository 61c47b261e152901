"""Every sandboxed process of a grading dies with it: a grader killed mid-run (SIGTERM, as
``timeout`` sends) leaves no sandboxed runner behind, even one that ignores SIGTERM itself, and
a runner past its deadline is killed, not left running."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from verigap.repos import execution

_GRADER = """
import sys
from pathlib import Path
from verigap.repos import execution
import os
code = os.environ["VG_RUNNER_CODE"]  # not in this process's argv: only the runner shows it
print("started", flush=True)
execution.run(["python3", "-c", code], scratch=Path(sys.argv[1]), backend=sys.argv[2],
              timeout=600)
"""


def _alive(token: str) -> list[int]:
    """Pids whose command line holds ``token`` (zombies not counted)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _wait(pred, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


@pytest.mark.parametrize("backend", ["bwrap", "unsafe"])
def test_a_killed_grader_leaves_no_runner(backend, tmp_path):
    token = f"vg-orphan-{secrets.token_hex(6)}"
    code = (
        f"import signal, time  # {token}\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "VG_RUNNER_CODE": code}
    grader = subprocess.Popen(
        [sys.executable, "-c", _GRADER, str(tmp_path / "s"), backend],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _wait(lambda: bool(_alive(token)), 60), "the runner never started"
        time.sleep(1.0)  # past the launcher's execs: the runner itself, SIGTERM ignored
        grader.send_signal(signal.SIGTERM)
        grader.wait(timeout=30)
        assert _wait(lambda: not _alive(token), 10), (
            f"runner still alive after its grader died: {_alive(token)}"
        )
    finally:
        grader.kill()
        for pid in _alive(token):  # only what this test started, by its own token
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", ["bwrap", "unsafe"])
def test_a_runner_past_its_deadline_is_killed(backend, tmp_path):
    token = f"vg-deadline-{secrets.token_hex(6)}"
    code = (
        f"import signal, time  # {token}\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n"
    )
    t0 = time.monotonic()
    res = execution.run(["python3", "-c", code], scratch=tmp_path / "s", backend=backend, timeout=3)
    assert res.timed_out and time.monotonic() - t0 < 30
    assert _wait(lambda: not _alive(token), 5), _alive(token)
