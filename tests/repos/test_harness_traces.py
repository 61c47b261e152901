"""Traces the pytest harness reports as ``tampered``: a lingering ``Thread``
subclass started by project code, and a plugin object registered mid-run whose class only
claims to come from a conftest module. Controls: the same project without the tricks reports
nothing, and a plugin class really defined in the project's conftest stays exempt."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verigap.repos.pytest_run import run_pytest

PKG = '''
import threading

_stop = threading.Event()


class Keeper(threading.Thread):
    """A Thread subclass: no target, its work is in run()."""

    def run(self):
        _stop.wait(30)


def start():
    Keeper(daemon=True).start()
'''

CONFTEST = """
class Honest:
    def pytest_runtest_logreport(self, report):
        pass


def pytest_configure(config):
    config._honest = Honest()
"""

TEST = """
import pkg


class Claims:
    def pytest_runtest_logreport(self, report):
        pass


def test_it(request):
    request.config.pluginmanager.register(request.config._honest, "honest")
    if TRICKS:
        pkg.start()
        Claims.__module__ = "tests.conftest"  # a name is not where the code comes from
        request.config.pluginmanager.register(Claims(), "claims")
"""


def _project(root: Path, tricks: bool) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text(PKG)
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "tests" / "test_it.py").write_text(TEST + f"\nTRICKS = {tricks}\n")
    return root


def _run(tree: Path, backend: str):
    return run_pytest(
        tree,
        python=sys.executable,
        env_prefix=Path(sys.prefix),
        import_root=".",
        test_files=["tests/test_it.py"],
        config_file=None,
        backend=backend,
        timeout=120,
    )


@pytest.mark.parametrize("tricks", [False, True])
def test_thread_subclass_and_fake_conftest_plugin_are_traced(
    tmp_path, monkeypatch, backend, tricks
):
    monkeypatch.setenv("VERIGAP_CACHE", str(tmp_path / "cache"))
    run = _run(_project(tmp_path / "t", tricks), backend)
    assert run.outcomes == {"tests/test_it.py::test_it": "passed"}, run.stdout[-2000:]
    tampered = run.extra["tampered"]
    if not tricks:  # the control: the project's own conftest plugin is not a trace
        assert tampered == []
    else:
        assert "threads left running" in tampered
        assert [t for t in tampered if t.startswith("plugin ")] == ["plugin tests.conftest.Claims"]
