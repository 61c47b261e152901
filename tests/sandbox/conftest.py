"""Fixtures shared by the sandbox tests: a small source tree and a sandbox factory per backend."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable, Iterator
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


@pytest.fixture(params=["bwrap", "bwrap-persistent", "unsafe"])
def backend(request: pytest.FixtureRequest) -> str:
    """A backend name for ``make_box``; "bwrap-persistent" is bwrap with persistent=True."""
    if request.param.startswith("bwrap") and not HAVE_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed")
    return request.param


@pytest.fixture(params=["bwrap", "bwrap-persistent"])
def bwrap_kind(request: pytest.FixtureRequest) -> str:
    """Both bubblewrap modes: a fresh sandbox per command, and one kept for the session."""
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap (bwrap) is not installed")
    return request.param


SandboxFactory = Callable[..., Sandbox]


@pytest.fixture
def make_box(tmp_path: Path, src_tree: Path) -> Iterator[SandboxFactory]:
    """make_box(backend, **limits) -> a sandbox over a fresh copy of ``src_tree``.

    ``backend`` may also be "bwrap-persistent" (bwrap with ``persistent=True``).
    """
    counter = iter(range(1000))
    made: list[Sandbox] = []

    def factory(backend: str, **limit_kwargs: object) -> Sandbox:
        ws = materialize(src_tree, tmp_path / f"ws{next(counter)}")
        limits = Limits(**{"wall_s": 10.0, **limit_kwargs})  # type: ignore[arg-type]
        persistent = backend == "bwrap-persistent"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnsafeSandboxWarning)
            box = make_sandbox(
                ws,
                backend="bwrap" if persistent else backend,
                limits=limits,
                persistent=persistent,
            )
        made.append(box)
        return box

    yield factory
    for box in made:
        box.close()
