"""Real PyPI projects, fetched by name at test time (needs PyPI; marked slow).

inflection 0.5.1 and toolz 1.0.0: small, pure Python, pytest suites shipped in their sdists.
"""

from __future__ import annotations

import os

import pytest

from verigap.repos import baselines
from verigap.repos.graders import v1, v2
from verigap.repos.tasks import load_tasks, make_tasks, materialize_workspace, prepared_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory, backend):
    old = os.environ.get("VERIGAP_CACHE")
    os.environ["VERIGAP_CACHE"] = str(tmp_path_factory.mktemp("real-cache"))
    yield
    if old is None:
        os.environ.pop("VERIGAP_CACHE")
    else:
        os.environ["VERIGAP_CACHE"] = old


def test_inflection_gives_twenty_tasks_graded_as_expected(fresh_cache, tmp_path, backend):
    out = tmp_path / "tasks"
    stats = make_tasks(
        "inflection==0.5.1",
        out,
        k=4,
        n=20,
        max_candidates=32,
        seed=0,
        backend=backend,
        log=lambda s: None,
    )
    assert stats.tasks == 20
    tasks = load_tasks(out)
    assert len(tasks) == 20
    p = prepared_for(tasks[0], backend=backend)
    for t in tasks[:1]:
        for agent in baselines.BASELINES:
            ws = materialize_workspace(p, t, tmp_path / f"{t.task_id}-{agent}")
            for f, text in baselines.edits(agent, t, p).items():
                (ws / f).write_text(text)
            g2 = v2.grade(t, ws, prepared=p, backend=backend)
            if agent == "oracle":
                assert g2.correct and g2.reward == 1.0
            elif agent == "noop":
                assert g2.reward == 0.0
            else:
                g1 = v1.grade(t, ws, prepared=p, backend=backend)
                assert g1.reward == 1.0 and g1.false_success
                assert g2.reward == 0.0 and not g2.checks["hidden"]


def test_toolz_tests_inside_the_package(fresh_cache, tmp_path, backend):
    out = tmp_path / "tasks"
    # k=2: many toolz functions take functions, so sites without picklable equivalence
    # inputs are common, and a task with such a site is rejected by default.
    stats = make_tasks(
        "toolz==1.0.0",
        out,
        k=2,
        n=2,
        max_candidates=24,
        seed=0,
        backend=backend,
        log=lambda s: None,
    )
    assert stats.tasks >= 1, stats
    t = load_tasks(out)[0]
    p = prepared_for(t, backend=backend)
    ws = materialize_workspace(p, t, tmp_path / "ws")
    assert all(f.startswith("toolz/tests/") for f in t.visible_test_files)
    for f, text in baselines.edits("oracle", t, p).items():
        (ws / f).write_text(text)
    g2 = v2.grade(t, ws, prepared=p, backend=backend)
    assert g2.correct and g2.reward == 1.0, g2.detail.get("failing_visible")
    g1 = v1.grade(t, ws, prepared=p, backend=backend)
    assert g1.reward == 1.0, g1.detail["output_tail"]
