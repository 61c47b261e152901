"""Fixtures shared by the sandbox tests: a small source tree and a sandbox factory per backend."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from verigap.sandbox import Limits, Sandbox, UnsafeSandboxWarning, make_sandbox, materialize

HAVE_BWRAP = shutil.which("bwrap") is not None


@pytest.fixture
def src_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (src / "README.txt").write_text("hello\n")
    (src / ".hidden").write_text("dot\n")
    return src


@pytest.fixture(params=["bwrap", "unsafe"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "bwrap" and not HAVE_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed")
    return request.param


SandboxFactory = Callable[..., Sandbox]


@pytest.fixture
def make_box(tmp_path: Path, src_tree: Path) -> SandboxFactory:
    """make_box(backend, **limits) -> a sandbox over a fresh copy of ``src_tree``."""
    counter = iter(range(1000))

    def factory(backend: str, **limit_kwargs: object) -> Sandbox:
        ws = materialize(src_tree, tmp_path / f"ws{next(counter)}")
        limits = Limits(**{"wall_s": 10.0, **limit_kwargs})  # type: ignore[arg-type]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsafeSandboxWarning)
            return make_sandbox(ws, backend=backend, limits=limits)

    return factory
