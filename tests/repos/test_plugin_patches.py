"""A test dependency's pytest plugin that patches pytest at import (hypothesis replaces
``FixtureFunctionMarker.__call__``) is the environment's state, not tampering: the untouched
suite of a hypothesis-tested project must not report ``tampered`` (v2 would name
``monkeypatch`` on the real fix)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig

import pytest

from verigap.repos.pytest_run import PLUGINS_FILE, run_pytest


def test_a_declared_plugins_import_time_patch_is_not_tampering(tmp_path):
    pytest.importorskip("hypothesis")
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = next(env.glob("lib/python*/site-packages"))
    # the env sees the running interpreter's packages (pytest, hypothesis) through a .pth
    (site / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (env / PLUGINS_FILE).write_text(json.dumps(["_hypothesis_pytestplugin"]))
    tree = tmp_path / "tree"
    (tree / "hp").mkdir(parents=True)
    (tree / "tests").mkdir()
    (tree / "hp" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (tree / "tests" / "test_hp.py").write_text(
        "from hypothesis import given, strategies as st\nfrom hp import add\n\n\n"
        "@given(st.integers(), st.integers())\ndef test_add(a, b):\n"
        "    assert add(a, b) == add(b, a)\n"
    )
    # unsafe backend: this is about the runner's own snapshot, not about containment
    run = run_pytest(
        tree,
        python=str(env / "bin" / "python"),
        env_prefix=env,
        import_root="",
        test_files=["tests/test_hp.py"],
        config_file=None,
        backend="unsafe",
        timeout=120,
    )
    assert run.outcomes == {"tests/test_hp.py::test_add": "passed"}, run.stdout[-2000:]
    assert run.extra.get("tampered") == []
