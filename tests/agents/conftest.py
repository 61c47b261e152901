"""Fixtures for the agent tests: a sandboxed workspace holding a tiny buggy package."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigap.sandbox import Limits, Sandbox, make_sandbox, materialize

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\nassert add(2, 3) == 5, 'add is wrong'\nprint('tests passed')\n"


@pytest.fixture
def task_src(tmp_path: Path) -> Path:
    src = tmp_path / "task"
    (src / "pkg").mkdir(parents=True)
    (src / "calc.py").write_text(CALC)
    (src / "test_calc.py").write_text(TEST_CALC)
    (src / "pkg" / "notes.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    (src / "empty.txt").write_text("")
    return src


@pytest.fixture
def box(task_src: Path, tmp_path: Path) -> Sandbox:
    """A bubblewrap sandbox (tests/conftest.py makes sure bwrap is installed)."""
    ws = materialize(task_src, tmp_path / "ws")
    return make_sandbox(ws, backend="bwrap", limits=Limits(wall_s=20))
