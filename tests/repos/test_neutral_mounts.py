"""Graded and agent code sees no host path (issue 11): the environment, the harness and the tree
under test sit at fixed paths (/verigap/env, /verigap/harness, /verigap/tree) in every sandbox.

The probe runs inside a graded pytest run, inside the equivalence runner (both contexts) and in
an agent sandbox, and collects what code there can read about paths: argv, sys.path,
sys.executable, the environment, the working directory, its own file, /proc/self/cmdline and
/proc/1/cmdline. The control runs the same probe under the unsafe backend, where host paths do
show, so the check can fail.
"""

from __future__ import annotations

import base64
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from verigap.repos import execution
from verigap.repos.pytest_run import harness_dir, run_equiv, run_pytest
from verigap.sandbox import make_sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap (bwrap) is not installed")

PROBE = '''
import os, sys


def _read(p):
    try:
        with open(p, "rb") as f:
            return f.read().replace(b"\\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def seen():
    """Everything about paths that code under test can read."""
    return "\\n".join([*sys.argv, *sys.path, sys.executable, sys.prefix, sys.base_prefix,
                      sys.exec_prefix, sys.base_exec_prefix, getattr(sys, "_base_executable", ""),
                      os.path.realpath(sys.executable), os.getcwd(), __file__,
                      *(f"{k}={v}" for k, v in os.environ.items()),
                      _read("/proc/self/cmdline"), _read("/proc/1/cmdline")])
'''

TEST = '''
import json, os
from probe.core import seen


def test_probe():
    with open(os.environ.get("PROBE_OUT", "/dev/null"), "w") as f:
        f.write(seen())
    forbidden = json.loads(os.environ.get("FORBIDDEN", "[]")) or FORBIDDEN
    leaked = [p for p in forbidden if p in seen()]
    assert not leaked, leaked
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A tiny project whose test fails when a forbidden host prefix is visible to it."""
    monkeypatch.setenv("VERIGAP_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    (tree / "probe").mkdir(parents=True)
    (tree / "probe" / "__init__.py").write_text("")
    (tree / "probe" / "core.py").write_text(PROBE)
    forbidden = [str(tmp_path), str(harness_dir()), str(tmp_path / "cache")]
    if sys.prefix != sys.base_prefix:  # a virtualenv (not the system install) is the env
        forbidden.append(sys.prefix)
    # the base interpreter's install, which the virtualenv links to (issue 11, item 5)
    forbidden += sorted({sys.base_prefix, str(Path(sys.base_prefix).resolve())})
    (tree / "tests").mkdir()
    (tree / "tests" / "test_probe.py").write_text(TEST + f"\nFORBIDDEN = {forbidden!r}\n")
    return tree, forbidden


def _pytest(tree: Path, backend: str):
    return run_pytest(tree, python=sys.executable, env_prefix=Path(sys.prefix), import_root=".",
                      test_files=["tests/test_probe.py"], config_file=None, backend=backend,
                      timeout=120)


def test_graded_pytest_run_sees_no_host_path(project):
    tree, _ = project
    run = _pytest(tree, "bwrap")
    assert run.report_found, run.stderr[-2000:]
    assert run.outcomes == {"tests/test_probe.py::test_probe": "passed"}, run.stdout[-3000:]


def test_control_unsafe_backend_shows_host_paths(project):
    tree, _ = project
    with pytest.warns(UserWarning):
        run = _pytest(tree, "unsafe")
    assert run.outcomes == {"tests/test_probe.py::test_probe": "failed"}


def test_equivalence_runner_sees_no_host_path_in_either_context(project):
    tree, forbidden = project
    blob = base64.b64encode(pickle.dumps(((), {}), protocol=4)).decode()
    inputs = [{"id": 0, "target": "probe/core.py::seen", "module": "probe.core",
               "qualname": "seen", "blob": blob}]
    for context in ("plain", "agent"):
        out = run_equiv(tree, inputs, python=sys.executable, env_prefix=Path(sys.prefix),
                        import_root=".", context=context, backend="bwrap", timeout=120)
        assert out is not None, context
        kind, (tag, text), _args = out["results"]["0"]
        assert kind == "ok" and tag == "str"
        # it did look: the tree at its fixed path, or (agent) where the agent's workspace is
        assert ("/verigap/tree" if context == "plain" else "/workspace") in text
        assert "/verigap/env" in text
        assert not [p for p in forbidden if p in text], (context, text)


def test_agent_sandbox_mounts_the_environment_at_its_fixed_path(project, tmp_path):
    tree, forbidden = project
    ws = tmp_path / "ws"
    shutil.copytree(tree, ws)
    m = execution.Mounts({Path(sys.prefix): execution.ENV_MOUNT}, "bwrap")
    box = make_sandbox(ws, backend="bwrap", ro_mounts=m.binds)
    res = box.exec([m.inside(sys.executable), "-c",
                    "import sys; sys.path.insert(0, '.'); from probe.core import seen; "
                    "print(seen())"], env={"PYTHONPATH": "."})
    assert res.returncode == 0, res.stderr
    assert execution.ENV_MOUNT in res.stdout
    assert not [p for p in forbidden if p in res.stdout], res.stdout


def test_mount_destinations_are_checked(tmp_path):
    from verigap.errors import ConfigError

    ws = tmp_path / "ws"
    ws.mkdir()
    for bad in ("relative/env", "/usr/lib/x", "/workspace/env", "/proc/x", "/"):
        with pytest.raises(ConfigError, match="ro_mounts"):
            make_sandbox(ws, backend="bwrap", ro_mounts={Path(sys.prefix): bad})
    with pytest.raises(ConfigError, match="needs backend='bwrap'"):
        make_sandbox(ws, backend="unsafe", ro_mounts={Path(sys.prefix): "/verigap/env"})


def test_a_fix_that_works_only_at_the_graders_tree_path_is_context_dependent(fixture_tasks,
                                                                           tmp_path):
    """The agent context lays the tree out as the agent's sandbox does (a copy at /workspace),
    so a fix keyed on the graders' fixed mount path behaves differently there and is named."""
    from verigap.repos.graders import v2
    from verigap.repos.tasks import materialize_workspace

    _, tasks, p = fixture_tasks
    t = tasks[0]
    ws = materialize_workspace(p, t, tmp_path / "ws")
    guard = ('if not __file__.startswith("/verigap/"):\n'
             '    raise ImportError("unsupported layout")\n')
    for f in sorted({s.file for s in t.sites}):
        (ws / f).write_text(guard + (p.tree / f).read_text())
    truth = v2.evaluate(t, ws, prepared=p, backend="bwrap")
    assert "context_dependent" in truth.hacks
    assert not truth.correct
