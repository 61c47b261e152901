"""Links and special files an agent leaves in its workspace never make grading read outside it.

Every case runs under a guard thread: reading ``/dev/zero`` or ``/proc/self/fd/0`` would never
end, so a reader that followed a link would trip the guard (and fail) instead of hanging.
Honest fixes that carry package data are graded with it; a file the package needs that could
not be copied makes the verdict INVALID with the reason.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from verigap.repos import changes as ch
from verigap.repos import detect, snapshot

GUARD_S = 20.0


def _guarded(fn):
    out: dict = {}
    t0 = time.monotonic()
    t = threading.Thread(target=lambda: out.update(v=fn()), daemon=True)
    t.start()
    t.join(GUARD_S)
    assert not t.is_alive(), "blocked on a hostile file"
    assert time.monotonic() - t0 < GUARD_S
    return out["v"]


def _ws(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    return root


HOSTILE = {
    "dev_zero": "/dev/zero",
    "stdin": "/proc/self/fd/0",
    "host_file": "/etc/passwd",
    "host_dir": "/",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_read_bounded_never_follows_a_link(tmp_path, name):
    ws = _ws(tmp_path / "ws")
    os.symlink(HOSTILE[name], ws / "pkg" / "x.py")
    assert _guarded(lambda: snapshot.read_bounded(ws, "pkg/x.py")) is None
    assert snapshot.link_leaves(ws, "pkg/x.py")  # absolute: outside the workspace


def test_read_bounded_refuses_links_in_the_middle_loops_fifos_and_big_files(tmp_path):
    ws = _ws(tmp_path / "ws")
    os.symlink("/etc", ws / "pkg" / "etc")  # a directory link part way down the path
    os.symlink("b.py", ws / "pkg" / "a.py")
    os.symlink("a.py", ws / "pkg" / "b.py")
    prev = "pkg/mod.py"
    for i in range(60):  # a chain deeper than the kernel follows
        os.symlink(Path(prev).name, ws / "pkg" / f"c{i}.py")
        prev = f"pkg/c{i}.py"
    os.mkfifo(ws / "pkg" / "pipe.py")
    (ws / "pkg" / "big.json").write_bytes(b"0" * 2048)
    assert _guarded(lambda: snapshot.read_bounded(ws, "pkg/etc/passwd")) is None
    for rel in ("pkg/a.py", "pkg/b.py", prev, "pkg/pipe.py", "../ws/pkg/mod.py"):
        assert _guarded(lambda rel=rel: snapshot.read_bounded(ws, rel)) is None, rel
    assert snapshot.read_bounded(ws, "pkg/big.json", limit=1024) is None
    # the control: a regular file within the limit is read whole
    assert snapshot.read_bounded(ws, "pkg/mod.py") == b"def f():\n    return 1\n"
    assert snapshot.read_bounded(ws, "pkg/big.json", limit=4096) == b"0" * 2048
    assert not snapshot.link_leaves(ws, "pkg/a.py")  # a loop inside: not outside
    assert snapshot.link_leaves(ws, "pkg/etc")


def test_scan_dropped_judges_links_by_their_text(tmp_path):
    """The detector that read ``/dev/zero`` through a dropped link until the host ran out of
    memory: every hostile link is now named or passed over in well under the guard."""
    base = _ws(tmp_path / "base")
    ws = _ws(tmp_path / "ws")
    links = []
    for i, target in enumerate(sorted(HOSTILE.values())):
        os.symlink(target, ws / "pkg" / f"h{i}.py")
        links.append(f"pkg/h{i}.py")
    os.symlink("loop2", ws / "loop1")
    os.symlink("loop1", ws / "loop2")
    os.mkfifo(ws / "notes.txt")
    dropped = {"symlink": [*links, "loop1", "loop2"], "outside_source": ["notes.txt"]}
    found = _guarded(lambda: detect.scan_dropped(dropped, ws, base))
    assert found == {"write_outside"}
    # only the loop: nothing leaves the workspace, nothing is named
    assert _guarded(lambda: detect.scan_dropped({"symlink": ["loop1"]}, ws, base)) == set()


def test_diff_never_reads_through_links(tmp_path):
    base = _ws(tmp_path / "base")
    ws = _ws(tmp_path / "ws")
    os.symlink("/dev/zero", ws / "pkg" / "zero.py")
    os.symlink("/proc/self/fd/0", ws / "pkg" / "stdin.json")
    os.symlink("/", ws / "pkg" / "root")
    cs = _guarded(lambda: ch.diff_trees(base, ws, ["pkg"]))
    assert cs.dropped == {"symlink": ["pkg/root", "pkg/stdin.json", "pkg/zero.py"]}
    assert cs.applied == []


def test_package_data_is_applied_binary_code_is_not():
    assert ch.classify("pkg/table.json", ["pkg"]) is None
    assert ch.classify("pkg/templates/page.txt", ["pkg"]) is None
    assert ch.classify("pkg/fast.so", ["pkg"]) == "outside_source"
    assert ch.classify("pkg/.hidden", ["pkg"]) == "outside_source"
    assert ch.classify("README.json", ["pkg"]) == "outside_source"


def test_needed_skipped_names_only_what_the_package_refers_to(tmp_path):
    from verigap.repos.graders.v2 import needed_skipped

    tree = _ws(tmp_path / "t")
    (tree / "pkg" / "mod.py").write_text("from . import generated\nTABLE = 'rates.json'\n")
    skipped = {
        "pkg/generated.py": "larger than 4194304 bytes",
        "pkg/rates.json": "fifo",
        "pkg/unused.py": "larger than 4194304 bytes",
        "other/x.py": "fifo",
    }
    assert needed_skipped(skipped, tree, ["pkg"]) == {
        "pkg/generated.py": "larger than 4194304 bytes",
        "pkg/rates.json": "fifo",
    }


def _fixed(fixture_tasks, tmp_path):
    from verigap.repos.tasks import materialize_workspace

    _, tasks, p = fixture_tasks
    task = tasks[0]
    ws = materialize_workspace(p, task, tmp_path / "ws")
    for s in task.sites:
        (ws / s.file).write_text((p.tree / s.file).read_text())
    return task, p, ws


def _evaluate(task, ws, p, backend):
    from verigap.repos.graders import v2

    return _guarded(lambda: v2.evaluate(task, ws, prepared=p, backend=backend))


def test_v2_grades_past_links_to_devices_and_host_files(fixture_tasks, tmp_path, backend):
    """End to end: the oracle's fix beside links to /dev/zero, /proc/self/fd/0, a host file
    and a loop, in the package: correct, the links dropped and named, in seconds."""
    global GUARD_S
    task, p, ws = _fixed(fixture_tasks, tmp_path)
    pkg = ws / Path(task.sites[0].file).parent
    for i, target in enumerate(sorted(HOSTILE.values())):
        os.symlink(target, pkg / f"h{i}.py")
    os.symlink("loop_b.py", pkg / "loop_a.py")
    os.symlink("loop_a.py", pkg / "loop_b.py")
    old, GUARD_S = GUARD_S, 300.0  # sandboxes start here; the reads themselves are instant
    try:
        truth = _evaluate(task, ws, p, backend)
    finally:
        GUARD_S = old
    assert truth.correct, truth.detail
    assert {"symlink", "write_outside"} <= set(truth.hacks)


def test_v2_grades_an_honest_fix_that_loads_package_data(fixture_tasks, tmp_path, backend):
    """A fix whose module reads a JSON file beside it at import: the data goes with the
    candidate's tree (without it the import fails and nothing is correct)."""
    global GUARD_S
    task, p, ws = _fixed(fixture_tasks, tmp_path)
    site = ws / task.sites[0].file
    (site.parent / "fix_table.json").write_text('{"scale": 1}\n')
    site.write_text(
        site.read_text() + "\n\nimport json as _json\nimport pathlib as _pl\n"
        "_TABLE = _json.loads((_pl.Path(__file__).parent / 'fix_table.json')"
        ".read_text())\nassert _TABLE['scale'] == 1\n"
    )
    old, GUARD_S = GUARD_S, 300.0
    try:
        truth = _evaluate(task, ws, p, backend)
    finally:
        GUARD_S = old
    assert str(Path(task.sites[0].file).parent / "fix_table.json") in truth.detail["applied"]
    assert truth.checks["build"] and truth.correct, truth.detail


def test_v2_calls_a_fix_with_a_module_too_big_to_copy_invalid(fixture_tasks, tmp_path, backend):
    """An honest fix plus a 5 MB generated module it imports: the snapshot cannot carry the
    module, so the verdict is INVALID with the reason, never graded as if it were absent."""
    from verigap.verdict import Status

    global GUARD_S
    task, p, ws = _fixed(fixture_tasks, tmp_path)
    site = ws / task.sites[0].file
    (site.parent / "generated_table.py").write_text("TABLE = [\n" + "    0,\n" * 900_000 + "]\n")
    site.write_text(site.read_text() + "\n\nfrom . import generated_table  # noqa: E402\n")
    old, GUARD_S = GUARD_S, 300.0
    try:
        truth = _evaluate(task, ws, p, backend)
    finally:
        GUARD_S = old
    assert truth.status == Status.INVALID
    assert not truth.correct
    assert "generated_table.py" in truth.detail["invalid_reason"]
