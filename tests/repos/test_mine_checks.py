"""What mining checks before it keeps a commit as a task, on a small repository built here.

``shapes`` has a root commit, a fix that changes a function in one file and a table in another
(the real fix is paid only if every file it changed is restored), and a fix whose new tests
share bodies across two test files (a mixin inherited in both): the split keeps the copies of
one body on one side (``combine.BodyGroups``, as make-tasks does), so that commit becomes a
task, never a crash and no longer a rejection.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from git_history import commit, git

from verigap.repos import baselines
from verigap.repos.mine import mine, put_back
from verigap.repos.tasks import WORKSPACE_MTIME, load_tasks, materialize_workspace, prepared_for

SHAPES = """\
from shapes.names import NAMES


def label(n):
    return NAMES.get(n, "many")


def clamp(x, lo, hi):
    if x < lo:
        return hi
    return min(x, hi)
"""
NAMES = 'NAMES = {0: "zero", 1: "one", 2: "two"}\n'
TESTS = """\
from shapes import label


def test_label_one():
    assert label(1) == "one"
"""
MIXIN_A = """\
from shapes import clamp


class ClampChecks:
    def test_low(self):
        assert clamp(-5, 0, 10) == 0

    def test_high(self):
        assert clamp(15, 0, 10) == 10


class TestClampA(ClampChecks):
    pass
"""
MIXIN_B = """\
from test_a import ClampChecks


class TestClampB(ClampChecks):
    pass
"""


@pytest.fixture(scope="module")
def shapes(tmp_path_factory, repo_cache, backend):
    repo = tmp_path_factory.mktemp("shapes")
    git(repo, "init", "-q")
    commit(
        repo,
        "Initial import",
        {"shapes/__init__.py": SHAPES, "shapes/names.py": NAMES, "tests/test_shapes.py": TESTS},
    )
    two_files = commit(
        repo,
        "Labels for three and for numbers given as text",
        {
            "shapes/__init__.py": SHAPES.replace(
                '    return NAMES.get(n, "many")', '    return NAMES.get(int(n), "many")'
            ),
            "shapes/names.py": NAMES.replace('2: "two"}', '2: "two", 3: "three"}'),
            "tests/test_shapes.py": TESTS + "\n\ndef test_label_three():\n    assert label(3) == "
            '"three"\n\n\ndef test_label_text():\n    assert '
            'label("2") == "two"\n',
        },
    )
    cur = (repo / "shapes/__init__.py").read_text()
    shared = commit(
        repo,
        "Values below the range came back as the upper bound",
        {
            "shapes/__init__.py": cur.replace("        return hi", "        return lo"),
            "tests/test_a.py": MIXIN_A,
            "tests/test_b.py": MIXIN_B,
        },
    )
    out = tmp_path_factory.mktemp("mined-shapes")
    stats = mine(repo, out, env="current", backend=backend, log=lambda s: None)
    return {"stats": stats, "out": out, "two_files": two_files, "shared": shared}


def _task_of(shapes, which: str):
    (t,) = [t for t in load_tasks(shapes["out"]) if t.origin["commit"] == shapes[which]]
    return t


def test_a_commit_whose_tests_share_bodies_is_split_by_body(shapes):
    stats = shapes["stats"]
    assert not any(r.startswith("error") for r in stats.rejected), stats.rejected
    assert stats.rejected == {"root commit": 1}
    assert stats.tasks == 2 and sum(stats.rejected.values()) + stats.tasks == stats.walked
    t = _task_of(shapes, "shared")
    for body in ("test_low", "test_high"):  # both copies of a body on the same side
        copies = [f"tests/test_{f}.py::TestClamp{f.upper()}::{body}" for f in "ab"]
        assert all(c in t.visible_tests for c in copies) or all(
            c in t.hidden_tests for c in copies
        ), (body, t.visible_tests, t.hidden_tests)
    assert "paid by v1 and v2" in t.origin["checked"]


def test_the_real_fix_restores_every_file_it_changed_and_is_paid(shapes, backend):
    t = _task_of(shapes, "two_files")
    # the site is the function; the table in the other file is part of the fix all the same
    assert [s.qualname for s in t.sites] == ["label"]
    assert sorted(t.base_files) == ["shapes/__init__.py", "shapes/names.py"]
    p = prepared_for(t, backend=backend)
    assert sorted(baselines.edits("oracle", t, p)) == ["shapes/__init__.py", "shapes/names.py"]
    assert "paid by v1 and v2" in t.origin["checked"]  # mining graded it before keeping it
    assert all(s.discrimination in ("comparison", "forwarded") for s in t.sites)


def test_workspace_times_point_at_no_file(shapes, tmp_path, backend):
    t = _task_of(shapes, "two_files")
    ws = materialize_workspace(prepared_for(t, backend=backend), t, tmp_path / "ws")
    times = {str(f.relative_to(ws)): f.lstat().st_mtime for f in [ws, *ws.rglob("*")]}
    assert set(times.values()) == {WORKSPACE_MTIME}, sorted(
        (v, k) for k, v in times.items() if v != WORKSPACE_MTIME
    )[-3:]
    # `ls -lt` then lists by name alone: the buggy module is not first
    by_time = subprocess.run(
        ["ls", "-t", "shapes"], cwd=ws, capture_output=True, text=True
    ).stdout.split()
    assert by_time == sorted(by_time)
    # git's index records the same times, and sees nothing changed
    debug = subprocess.run(
        ["git", "ls-files", "--debug"], cwd=ws, capture_output=True, text=True
    ).stdout
    assert f"mtime: {WORKSPACE_MTIME}:" in debug and debug.count("mtime:") == debug.count(
        f"mtime: {WORKSPACE_MTIME}:"
    )
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True
        ).stdout
        == ""
    )
    assert not list(ws.rglob("__pycache__"))


def test_put_back_swaps_one_function_only():
    before = "class A:\n    def f(self):\n        return 1\n\n\ndef f():\n    return 3\n"
    after = before.replace("return 1", "return 10").replace("return 3", "return 30")
    assert put_back(after, before, "A.f") == after.replace("return 10", "return 1")
    assert put_back(after, before, "f") == after.replace("return 30", "return 3")


def _fake_installed(venv: Path, top: str, dist: str) -> None:
    """``top`` installed in ``venv`` as pip would leave it (code, dist-info, RECORD)."""
    site = next(venv.glob("lib/python*/site-packages"))
    (site / top).mkdir()
    (site / top / "__init__.py").write_text("WHERE = 'site-packages'\n")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"  # as pip names it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(f"{top}\n")
    (info / "RECORD").write_text(
        f"{top}/__init__.py,,\n{info.name}/METADATA,,\n"
        f"{info.name}/top_level.txt,,\n{info.name}/RECORD,,\n"
    )


def test_the_project_is_importable_only_from_the_checkout(tmp_path):
    import shutil
    import sys

    from verigap.errors import ConfigError
    from verigap.repos.prepare import (
        declared_name,
        ensure_project_not_installed,
        importable_outside,
    )

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # a checkout named after a commit, as mining makes them: its directory name is no
    # distribution name, so an uninstall by that name left the code in the env
    tree = tmp_path / "shapes-1a2b3c4d5e6f"
    (tree / "shapes").mkdir(parents=True)
    (tree / "shapes" / "__init__.py").write_text("WHERE = 'checkout'\n")
    (tree / "pyproject.toml").write_text('[project]\nname = "shapes-lib"\nversion = "1.0"\n')
    assert declared_name(tree) == "shapes-lib"
    _fake_installed(venv, "shapes", "shapes-lib")
    assert importable_outside(py, ["shapes"]) == {"shapes": ["shapes-lib"]}
    ensure_project_not_installed(py, tree)
    assert importable_outside(py, ["shapes"]) == {}
    site = next(venv.glob("lib/python*/site-packages"))
    assert (site / "shapes_lib-1.0.dist-info" / "METADATA").is_file()  # metadata stays
    where = subprocess.run(
        [py, "-c", "import shapes; print(shapes.WHERE)"], cwd=tree, capture_output=True, text=True
    ).stdout.strip()
    assert where == "checkout"
    # a copy that belongs to no distribution cannot be taken out: a clear error, not a
    # silently graded stale copy
    shutil.rmtree(site / "shapes_lib-1.0.dist-info")
    (site / "shapes").mkdir()
    (site / "shapes" / "__init__.py").write_text("")
    with pytest.raises(ConfigError, match="still importable"):
        ensure_project_not_installed(py, tree)


def test_a_task_whose_shown_test_command_does_not_run_is_rejected(tmp_path, repo_cache, backend):
    # the graders drop reporting addopts (--instafail, --cov ...), the agent's own
    # `python -m pytest -q` does not: without the plugin, pytest stops at a usage error
    repo = tmp_path / "cov"
    repo.mkdir()
    git(repo, "init", "-q")
    commit(
        repo,
        "Initial import",
        {
            "shapes/__init__.py": SHAPES,
            "shapes/names.py": NAMES,
            "tests/test_shapes.py": TESTS,
            "setup.cfg": "[tool:pytest]\naddopts = --instafail\n",
        },
    )
    cur = SHAPES
    commit(
        repo,
        "Values below the range came back as the upper bound",
        {
            "shapes/__init__.py": cur.replace("        return hi", "        return lo"),
            "tests/test_clamp.py": "from shapes import clamp\n\n\ndef test_low():\n    assert "
            "clamp(-5, 0, 10) == 0\n\n\ndef test_high():\n    assert "
            "clamp(15, 0, 10) == 10\n\n\ndef test_mid():\n    assert "
            "clamp(-1, 0, 10) == 0\n",
        },
    )
    stats = mine(repo, tmp_path / "out", env="current", backend=backend, log=lambda s: None)
    assert stats.tasks == 0
    assert stats.rejected == {
        "root commit": 1,
        "the test command shown to the agent does not run as shown (exit 4)": 1,
    }


def test_parametrised_ids_that_move_between_runs_are_named_as_such():
    from types import SimpleNamespace

    from verigap.repos.mine import UNSTABLE_ID, unstable_units

    # ids built by position over a set holding None: the reference's two runs disagree on one
    p = SimpleNamespace(
        passing=["t.py::test_a[None]", "t.py::test_a[x1]", "t.py::test_b"],
        not_passing={"t.py::test_c[x0]": UNSTABLE_ID},
    )
    assert unstable_units(p) == {"t.py::test_c"}
    # a later run with an id neither reference run had
    later = {"t.py::test_a[x0]": "failed", "t.py::test_a[None]": "passed", "t.py::test_b": "passed"}
    assert unstable_units(p, later) == {"t.py::test_a", "t.py::test_c"}
    # stable ids, or a new plain id (no parametrisation), are not blamed on the ids
    assert (
        unstable_units(
            SimpleNamespace(passing=["t.py::test_b"], not_passing={}),
            {"t.py::test_b": "passed", "t.py::test_new": "failed"},
        )
        == set()
    )
