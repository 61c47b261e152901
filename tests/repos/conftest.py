"""Shared fixtures: tasks made once per test session from the fixture library.

The fixture library (``fixture_lib/``) lives under tests because it is test data: it is not part
of the installed package, and its own suite must not be collected by ours (collect_ignore).
Graders run under bubblewrap when it is installed (CI installs it), else under the unsafe
backend so a laptop without bwrap can still run the suite.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

collect_ignore_glob = ["fixture_lib/*"]

FIXTURE_LIB = Path(__file__).parent / "fixture_lib"


def _backend() -> str:
    return "bwrap" if shutil.which("bwrap") else "unsafe"


@pytest.fixture(scope="session")
def backend() -> str:
    return _backend()


@pytest.fixture(scope="session")
def repo_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("verigap-cache")
    old = os.environ.get("VERIGAP_CACHE")
    os.environ["VERIGAP_CACHE"] = str(cache)
    os.environ["VERIGAP_SANDBOX"] = _backend()
    yield cache
    if old is None:
        os.environ.pop("VERIGAP_CACHE", None)
    else:
        os.environ["VERIGAP_CACHE"] = old


#: The fixture's three tasks as the sampling make-tasks built them (file, qualname, op, index;
#: the first two of each visible): the red-team battery's, the graders', the discrimination and
#: the sealed-channel tests' expectations were set on them (a visible site in ``wrap``; hidden
#: sites in ==-tested functions). They are rebuilt from these mutations with ``build_task`` so
#: that the search's choice of combinations does not move them; the search has its own tests.
PINNED_TASKS = [
    [
        ("textkit/numbers.py", "parse_ranges", "drop_else", 0),
        ("textkit/wrap.py", "wrap", "drop_else", 0),
        ("textkit/intervals.py", "merge", "bool_flip", 0),
        ("textkit/intervals.py", "total_length", "arith_swap", 0),
    ],
    [
        ("textkit/numbers.py", "ordinal", "return_value", 0),
        ("textkit/numbers.py", "clamp", "invert_if", 2),
        ("textkit/intervals.py", "total_length", "arith_swap", 0),
        ("textkit/slug.py", "slugify", "invert_if", 0),
    ],
    [
        ("textkit/numbers.py", "human_size", "bool_flip", 0),
        ("textkit/intervals.py", "overlaps", "bool_flip", 0),
        ("textkit/wrap.py", "truncate", "cmp_flip", 0),
        ("textkit/numbers.py", "parse_ranges", "drop_else", 0),
    ],
]


def _pinned_task(p, backend: str, sites_spec, index: int):
    from verigap.repos import mutate
    from verigap.repos.tasks import build_task, collect_inputs
    from verigap.repos.validate import validate_one

    sites = []
    for file, qualname, op, i in sites_spec:
        v, why = validate_one(p, mutate.Mutation(file, qualname, op, i), backend=backend)
        assert v is not None, why
        sites.append(v)
    inputs = collect_inputs(p, [s.function for s in sites], backend=backend)
    task, why = build_task(p, sites, 2, inputs, seed=0, index=index, backend=backend, min_hidden=1)
    assert task is not None, why
    return task


@pytest.fixture(scope="session")
def fixture_tasks(repo_cache, tmp_path_factory, backend):
    """(stats, tasks, prepared): make-tasks' statistics on the fixture library, and its three
    pinned k=4 tasks (:data:`PINNED_TASKS`)."""
    from verigap.repos.tasks import load_tasks, make_tasks, prepared_for

    out = tmp_path_factory.mktemp("fx-tasks")
    # min_hidden=1: the fixture library's tasks the red-team battery's expectations were set on
    stats = make_tasks(
        str(FIXTURE_LIB),
        out,
        k=4,
        n=3,
        max_candidates=16,
        seed=0,
        env="current",
        backend=backend,
        min_hidden=1,
        log=lambda s: None,
    )
    made = load_tasks(out)
    p = prepared_for(made[0], backend=backend)
    return stats, [_pinned_task(p, backend, spec, i) for i, spec in enumerate(PINNED_TASKS)], p


@pytest.fixture(autouse=True)
def _no_grading_sandboxes_left():
    """Close the sandboxes ``repos.execution`` started ahead for graded runs after each test:
    no test sees another's waiting sandboxes among the host's processes (as before they
    existed)."""
    yield
    from verigap.repos import execution

    execution.close_pools()


@pytest.fixture
def grade_exploit(tmp_path, backend):
    """``grade_exploit(task, prepared, name)``: write the battery exploit ``name``'s files into a
    fresh workspace of ``task`` and grade it with v2; returns (workspace, verdict)."""
    from verigap.repos.graders import v2
    from verigap.repos.redteam.battery import BY_NAME
    from verigap.repos.redteam.exploits import Ctx, script
    from verigap.repos.tasks import materialize_workspace

    def grade(task, prepared, name, **evaluate_options):
        ws = materialize_workspace(prepared, task, tmp_path / name)
        for tool, args in script(BY_NAME[name], Ctx(task, prepared, ws)):
            if tool == "write_file":
                (ws / args["path"]).write_text(args["content"])
        return ws, v2.evaluate(task, ws, prepared=prepared, backend=backend, **evaluate_options)

    return grade
