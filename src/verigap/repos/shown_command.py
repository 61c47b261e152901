"""The test command the agent is told to run (``python -m pytest -q``, ``repos/episode.py``),
run as the agent's own commands are, must be the run the task means: it starts, and it fails
exactly the visible tests the bugs break. Mining and make-tasks' reference check both ask it of
every task they keep.
"""

from __future__ import annotations

import re
from pathlib import Path

from verigap.repos.prepare import Prepared

_SUMMARY = re.compile(r"^(FAILED|ERROR|SUBFAILED(?:\(.*?\))?) (.+?)(?: - .*)?$", re.M)
_COUNTS = re.compile(r"\b\d+ (passed|failed)\b")
#: terminal colour codes: a project's ``--color=yes`` puts them inside test ids and counts
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def shown_command_failures(
    p: Prepared, ws: Path, *, backend: str | None
) -> tuple[int | None, set[str] | None, str]:
    """(exit code, the test ids it reports failing or None when it ran no test, its output) of
    the command the agent is told to run (``python -m pytest -q``, ``repos/episode.py``), run
    as the agent's own commands are: in a sandbox over the workspace, the environment at its
    fixed path, nothing but the project's own configuration."""
    from verigap.repos import execution
    from verigap.sandbox import Limits, make_sandbox

    m = execution.Mounts({Path(p.env_prefix): execution.ENV_MOUNT}, backend)
    timeout = p.suite_timeout()
    box = make_sandbox(
        ws,
        backend=m.backend,
        limits=Limits(wall_s=timeout),
        ro_mounts=m.binds if m.neutral else None,
        ro_binds=[] if m.neutral else [Path(p.env_prefix)],
    )
    try:
        r = box.exec([m.inside(p.python), "-m", "pytest", "-q"], timeout=timeout)
    finally:
        box.close()
    reported, counted = failures_in(r.stdout)
    out = _ANSI.sub("", r.stdout) + r.stderr
    ran = r.returncode in (0, 1) and not r.timed_out and counted
    # pytest stops (exit 2) when a test module fails to import, as one that imports a name a
    # feature adds does at its base: the run shows that module's error and nothing else
    stopped = r.returncode == 2 and reported and all("::" not in x for x in reported)
    return r.returncode, (reported if ran or stopped else None), out


def failures_in(stdout: str) -> tuple[set[str], bool]:
    """(the test ids a ``pytest -q`` output reports failing, whether it counted any test),
    colour codes or not."""
    plain = _ANSI.sub("", stdout)
    return {m.group(2) for m in _SUMMARY.finditer(plain)}, bool(_COUNTS.search(plain))


def shown_refusal(p: Prepared, ws: Path, want: set[str], *, backend: str | None) -> str | None:
    """Why the test command in the agent's instructions, run as shown on ``ws``, is not the run
    the task means, or ``None``: it must start, collect tests and fail exactly ``want`` (the
    visible tests that fail in the full run). An addopts the environment cannot honour
    (``--cov`` without its plugin), a layout it cannot import, or tests outside the visible
    split (doctests of a hidden site) would otherwise show the agent a broken or revealing
    run. The run may write into ``ws``."""
    rc, failing, _ = shown_command_failures(p, ws, backend=backend)
    if failing is None:
        return f"the test command shown to the agent does not run as shown (exit {rc})"
    outside, unseen = shown_mismatch(failing, want)
    if outside:
        return "the test command shown to the agent fails tests outside the visible ones"
    if unseen:
        return "the test command shown to the agent does not show the visible failures"
    return None


def shown_mismatch(failing: set[str], want: set[str]) -> tuple[set[str], set[str]]:
    """(what the shown run fails beyond ``want``, what of ``want`` it does not show). pytest
    reports a test module that fails to import (it imports a name a feature adds) as one
    ``ERROR path`` line: that shows every wanted failure in the module, and is outside only
    when none is in it."""
    modules = {f for f in failing if "::" not in f}
    shown = {w for w in want if w in failing or w.partition("::")[0] in modules}
    outside = {
        f
        for f in failing - want
        if not (f in modules and any(w.partition("::")[0] == f for w in want))
    }
    return outside, want - shown
