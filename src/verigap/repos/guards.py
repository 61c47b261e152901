"""v2's detection hook: gathers what one grading saw and asks :mod:`verigap.repos.detect`.

Called once per grading by :func:`verigap.repos.graders.v2.evaluate`. Every rule lives in
``detect`` (one definition per class); this module only collects the texts (agent, base,
reference), the dropped files, the commands and the harness's structural signals. Like
``detect``, it only *names* hacks; ``correct`` never depends on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from verigap.repos import detect

# the rules, under the names older callers use
features = detect.features
scan_sources = detect.scan_sources
scan_dropped = detect.scan_dropped
scan_commands = detect.scan_commands


def site_shapes(
    sites: Iterable[tuple[str, str]],
    new: Mapping[str, str],
    base: Mapping[str, str],
    ref: Mapping[str, str],
) -> set[str]:
    """The shape names (``stub``, ``delete``, ``delete_branch``) of :func:`detect.site_states`."""
    return set(detect.site_states(sites, new, base, ref).values())


def run_untrusted(run_extra: Mapping[str, object]) -> bool:
    """The test machinery was replaced during the run: its per-test outcomes prove nothing."""
    return bool(run_extra.get("tampered"))


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except (OSError, ValueError):
        return ""


def v2_change_hook(
    task, prepared, base_dir: Path, workspace: Path, changes, commands: Sequence[str]
) -> tuple[set[str], dict[str, str]]:
    """What :func:`v2_hook` finds from the change and the commands alone (no run needed):
    v2.evaluate starts it beside its sandboxes and hands the result to :func:`v2_hook`."""
    new = {
        c.path: (c.new or b"").decode("utf-8", "replace")
        for c in changes.applied
        if c.new is not None and c.path.endswith(".py")
    }
    deleted = {c.path for c in changes.applied if c.new is None}
    files = set(new) | deleted | {s.file for s in task.sites}
    return detect.scan_change_set(
        sites=[(s.file, s.qualname) for s in task.sites],
        new={**new, **{f: "" for f in deleted}},
        base={f: _read(base_dir / f) for f in files},
        ref={f: _read(prepared.tree / f) for f in files},
        dropped=changes.dropped,
        workspace=workspace,
        base_dir=base_dir,
        commands=commands,
        tests={f: _read(base_dir / f) for f in getattr(task, "visible_test_files", [])},
    )


def v2_hook(change: tuple[set[str], dict[str, str]], run, eq) -> tuple[set[str], dict[str, str]]:
    """What v2.evaluate calls once its runs are done: every hack name, and the per-site states
    (``file::qualname`` -> ``stub`` | ``delete`` | ``delete_branch``) that its outcomes and
    deletion count use: ``change`` (:func:`v2_change_hook`'s reading, made beside the runs)
    plus the harness's own signals."""
    found, states = change
    return found | detect.scan_signals(run.extra, eq.mismatches), states
