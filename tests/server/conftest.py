"""A real server on loopback per test module, and one small repo task made once per session."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

FIXTURE_LIB = Path(__file__).parent.parent / "repos" / "fixture_lib"
TOKEN = "test-token"


def backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="session")
def repo_task_dir(tmp_path_factory) -> Path:
    """One k=2 task from the fixture library (the repo tests' library), in its own cache."""
    from verigap.repos.tasks import make_tasks

    cache = tmp_path_factory.mktemp("server-cache")
    old = {k: os.environ.get(k) for k in ("VERIGAP_CACHE", "VERIGAP_SANDBOX")}
    os.environ["VERIGAP_CACHE"], os.environ["VERIGAP_SANDBOX"] = str(cache), backend()
    out = tmp_path_factory.mktemp("server-tasks")
    make_tasks(
        str(FIXTURE_LIB),
        out,
        k=2,
        n=1,
        max_candidates=6,
        seed=0,
        env="current",
        backend=backend(),
        log=lambda s: None,
    )
    yield out
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
