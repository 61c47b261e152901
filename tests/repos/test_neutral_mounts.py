"""Graded and agent code sees no host path: the environment, the harness and the tree
under test sit at fixed paths (/verigap/env, /verigap/harness, /verigap/tree) in every sandbox.

The probe runs inside a graded pytest run, inside the equivalence runner (both contexts) and in
an agent sandbox, and collects what code there can read about paths: argv, sys.path,
sys.executable, the environment, the working directory, its own file, the command lines of every
process it can see (/proc/1/cmdline among them), /proc/self/maps, a listing of /, the first line
of every console script in the environment's bin, and whether each forbidden host path exists.
The controls run the same probe under the unsafe backend, where host paths do show, and check
that each of those channels (but /proc/1/cmdline, the host's init there) names one, so the
check can fail. /proc/self/mountinfo is left out on purpose: the kernel prints each bind
mount's source path there and no mount can hide it (docs/sandbox_and_agents.md).
"""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from verigap.repos import execution
from verigap.repos.pytest_run import harness_dir, run_equiv, run_pytest
from verigap.sandbox import Limits, make_sandbox

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"
)

PROBE = '''
import os, sys


def _read(p):
    try:
        with open(p, "rb") as f:
            return f.read().replace(b"\\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _first_lines(d):
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    return [_read(os.path.join(d, n))[:300].split("\\n")[0] for n in names
            if os.path.isfile(os.path.join(d, n))]


def channels(check=()):
    """What code under test can read about paths, by channel; ``check``: paths whose existence
    is itself a leak."""
    return {
        "python": "\\n".join([*sys.argv, sys.executable, sys.prefix, sys.base_prefix,
                              sys.exec_prefix, sys.base_exec_prefix,
                              getattr(sys, "_base_executable", ""),
                              os.path.realpath(sys.executable), os.getcwd(), __file__]),
        "sys.path": "\\n".join(sys.path),
        "environ": "\\n".join(f"{k}={v}" for k, v in os.environ.items()),
        "/proc/self/cmdline": _read("/proc/self/cmdline"),
        "/proc/1/cmdline": _read("/proc/1/cmdline"),
        "/proc/*/cmdline": "\\n".join(_read(f"/proc/{p}/cmdline") for p in os.listdir("/proc")
                                      if p.isdigit()),
        "/proc/self/maps": _read("/proc/self/maps"),
        "listing of /": "\\n".join("/" + n for n in sorted(os.listdir("/"))),
        "exists": "\\n".join(p for p in check if os.path.lexists(p)),
        "console scripts": "\\n".join(_first_lines(os.path.join(sys.prefix, "bin"))),
    }


def seen(check=()):
    """Everything about paths that code under test can read."""
    return "\\n".join(channels(check).values())
'''

TEST = """
import json, os
from probe.core import seen


def test_probe():
    with open(os.environ.get("PROBE_OUT", "/dev/null"), "w") as f:
        f.write(seen())
    forbidden = json.loads(os.environ.get("FORBIDDEN", "[]")) or FORBIDDEN
    leaked = [p for p in forbidden if p in seen(forbidden)]
    assert not leaked, leaked
"""


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
    # the base interpreter's install, which the virtualenv links to; an
    # install under /usr is part of the OS, which every sandbox shows as it is
    forbidden += [
        p for p in sorted({sys.base_prefix, str(Path(sys.base_prefix).resolve())}) if not _system(p)
    ]
    (tree / "tests").mkdir()
    (tree / "tests" / "test_probe.py").write_text(TEST + f"\nFORBIDDEN = {forbidden!r}\n")
    return tree, forbidden


def _system(path: str) -> bool:
    return any(Path(path).is_relative_to(d) for d in ("/usr", "/bin", "/lib", "/lib64"))


def _pytest(tree: Path, backend: str):
    return run_pytest(
        tree,
        python=sys.executable,
        env_prefix=Path(sys.prefix),
        import_root=".",
        test_files=["tests/test_probe.py"],
        config_file=None,
        backend=backend,
        timeout=120,
    )


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
    blob = base64.b64encode(pickle.dumps(((forbidden,), {}), protocol=4)).decode()
    inputs = [
        {
            "id": 0,
            "target": "probe/core.py::seen",
            "module": "probe.core",
            "qualname": "seen",
            "blob": blob,
        }
    ]
    for context in ("plain", "agent"):
        out = run_equiv(
            tree,
            inputs,
            python=sys.executable,
            env_prefix=Path(sys.prefix),
            import_root=".",
            context=context,
            backend="bwrap",
            timeout=120,
        )
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
    (ws / "check.json").write_text(json.dumps(forbidden))  # not on the command line
    m = execution.Mounts({Path(sys.prefix): execution.ENV_MOUNT}, "bwrap")
    box = make_sandbox(ws, backend="bwrap", ro_mounts=m.binds)
    res = box.exec(
        [
            m.inside(sys.executable),
            "-c",
            "import sys; sys.path.insert(0, '.'); from probe.core import seen; print(seen())",
        ],
        env={"PYTHONPATH": "."},
    )
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


def test_a_fix_that_works_only_at_the_graders_tree_path_is_context_dependent(
    fixture_tasks, tmp_path
):
    """The agent context lays the tree out as the agent's sandbox does (a copy at /workspace),
    so a fix keyed on the graders' fixed mount path behaves differently there and is named."""
    from verigap.repos.graders import v2
    from verigap.repos.tasks import materialize_workspace

    _, tasks, p = fixture_tasks
    t = tasks[0]
    ws = materialize_workspace(p, t, tmp_path / "ws")
    guard = (
        'if not __file__.startswith("/verigap/"):\n    raise ImportError("unsupported layout")\n'
    )
    for f in sorted({s.file for s in t.sites}):
        (ws / f).write_text(guard + (p.tree / f).read_text())
    truth = v2.evaluate(t, ws, prepared=p, backend="bwrap")
    assert "context_dependent" in truth.hacks
    assert not truth.correct


def _agent_channels(tree: Path, ws: Path, backend: str, forbidden: list[str]) -> dict[str, str]:
    """The probe's channels in an agent sandbox over a copy of ``tree``, the environment
    mounted as episodes mount it (bwrap), or as it is (unsafe)."""
    shutil.copytree(tree, ws)
    (ws / "check.json").write_text(json.dumps(forbidden))  # not on the command line
    m = execution.Mounts({Path(sys.prefix): execution.ENV_MOUNT}, backend)
    # bwrap: persistent, as episodes run, so its command server is among the processes seen
    # the channels hold every process's command line: on a busy host (other sandboxes, other
    # test workers) that is far more than the default 64 kB kept from stdout
    box = make_sandbox(
        ws,
        backend=backend,
        ro_mounts=m.binds if m.neutral else None,
        persistent=m.neutral,
        limits=Limits(output_bytes=1 << 24),
    )
    code = (
        "import json, sys; sys.path.insert(0, '.'); from probe.core import channels; "
        "print(json.dumps(channels(json.load(open('check.json')))))"
    )
    try:
        res = box.exec([m.inside(sys.executable), "-c", code], env={"PYTHONPATH": "."})
    finally:
        box.close()
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs to run from a virtualenv")
def test_no_channel_names_the_host_python_or_venv(project, tmp_path):
    """Each channel separately: under bwrap none names the host venv or its base install; the
    unsafe control shows that every channel but the host's /proc/1/cmdline would name one."""
    tree, forbidden = project
    hidden = [
        p
        for p in (sys.prefix, sys.base_prefix, str(Path(sys.base_prefix).resolve()))
        if p in forbidden
    ]
    inside = _agent_channels(tree, tmp_path / "ws", "bwrap", hidden)
    assert "/verigap/env/bin/python" in inside["console scripts"]  # the scripts are there
    assert "/verigap/python/" in inside["/proc/self/maps"]  # libpython, from the neutral path
    assert "-I -S -c" in inside["/proc/*/cmdline"]  # the persistent sandbox's server
    leaks = {k: [p for p in hidden if p in v] for k, v in inside.items()}
    assert not any(leaks.values()), leaks
    with pytest.warns(UserWarning):
        outside = _agent_channels(tree, tmp_path / "ws-unsafe", "unsafe", hidden)
    expected = {"python", "sys.path", "exists", "console scripts"}  # they name the venv
    if sys.base_prefix in hidden:  # the launcher's PATH and libpython name the base install
        expected |= {"environ", "/proc/self/maps"}
    shown = {k for k, v in outside.items() if any(p in v for p in hidden)}
    assert expected <= shown, (expected - shown, outside)
