"""Validation in a warm, sandboxed fork server gives the cold path's verdicts.

Each validation worker keeps one bubblewrap sandbox with pytest imported and forks a child per
mutation (``verigap.repos.warm``). These tests need bubblewrap itself (the point is that the
warm runs stay sandboxed), so they are skipped where it is missing rather than run unsandboxed.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from verigap.repos.prepare import prepare
from verigap.repos.validate import candidates, run_suite, validate, validate_one
from verigap.repos.warm import WarmRunner

from .conftest import FIXTURE_LIB

pytestmark = pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bubblewrap")


def _verdict(v) -> tuple:
    valid, why = v
    return (valid.model_dump() if valid else None, why)


def test_warm_verdicts_match_the_cold_path_on_the_fixture_library(repo_cache):
    p = prepare(str(FIXTURE_LIB), env="current", backend="bwrap")
    muts = candidates(p, max_candidates=14, seed=0)
    warm = WarmRunner(p)
    try:
        pairs = [(validate_one(p, m, "bwrap"), validate_one(p, m, "bwrap", warm)) for m in muts]
        pristine = all(
            (warm.tree / f).read_bytes() == (p.tree / f).read_bytes()
            for f in {m.file for m in muts}
        )
    finally:
        warm.close()
    assert pristine  # every mutated file was restored after its run
    cold = [_verdict(a) for a, _ in pairs]
    hot = [_verdict(b) for _, b in pairs]
    assert hot == cold
    # the comparison means something only if both kinds of verdict are among them
    assert any(v for v, _ in cold) and any(not v for v, _ in cold), cold
    assert any(v and len(v["fail_to_pass"]) > 1 for v, _ in cold)


def test_validate_uses_warm_runners_and_keeps_the_verdicts(repo_cache, monkeypatch):
    p = prepare(str(FIXTURE_LIB), env="current", backend="bwrap")
    muts = candidates(p, max_candidates=8, seed=1)
    started: list[WarmRunner] = []
    real_init = WarmRunner.__init__

    def spy(self, *a, **k):
        real_init(self, *a, **k)
        started.append(self)

    monkeypatch.setattr(WarmRunner, "__init__", spy)
    warm_valid, warm_why = validate(p, muts, workers=2, backend="bwrap", warm=True)
    assert started and all(r.runs > 0 for r in started)
    assert all(not r.dir.exists() for r in started)  # closed
    cold = [_verdict(validate_one(p, m, "bwrap")) for m in muts]
    assert sorted(v.sha256 for v in warm_valid) == sorted(
        {v["sha256"] for v, _ in cold if v and not v["crash"]}
    )


PROBE = {
    "probe/__init__.py": "",
    "probe/core.py": "def value():\n    return 1\n",
    "tests/test_probe.py": """
        import os, time
        from probe.core import value

        def test_value():
            assert value() == 1

        def test_tree_is_read_only():
            try:
                open("written-by-a-test", "w").close()
            except OSError:
                return
            raise AssertionError("the tree under test was writable")

        def test_no_network_but_loopback():
            with open("/proc/net/dev") as f:
                names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
            assert names == ["lo"], names

        def test_sees_the_neutral_tree_path():
            assert os.getcwd() == "/verigap/tree"

        def test_slow():
            if os.path.exists("slow.flag"):
                time.sleep(60)
        """,
}


def _probe(tmp_path: Path):
    root = tmp_path / "probe-proj"
    for rel, text in PROBE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return prepare(str(root), env="current", backend="bwrap")


def test_warm_runs_are_sandboxed_fresh_and_killed_on_timeout(repo_cache, tmp_path):
    p = _probe(tmp_path)
    assert len(p.passing) == 5
    warm = WarmRunner(p)
    try:
        run = warm.run({}, p.test_files, timeout=60)
        assert run.report_found and run.failing(p.passing) == set(), run.stdout[-2000:]
        cold = run_suite(p, p.tree, backend="bwrap")
        assert cold.outcomes == run.outcomes
        # a mutated file is what the next child imports, and the tree is restored after it
        broken = warm.run({"probe/core.py": "def value():\n    return 2\n"}, p.test_files, 60)
        assert broken.failing(p.passing) == {"tests/test_probe.py::test_value"}
        assert "assert 2 == 1" in broken.stdout
        again = warm.run({}, p.test_files, timeout=60)
        assert again.failing(p.passing) == set()
        # a run past its timeout is killed, and the server answers the next request
        slow = warm.run({"slow.flag": ""}, ["tests/test_probe.py::test_slow"], timeout=3)
        assert slow.timed_out and not slow.report_found
        assert not (warm.tree / "slow.flag").exists()  # the tree is pristine again
        after = warm.run({}, ["tests/test_probe.py::test_value"], timeout=60)
        assert after.outcomes == {"tests/test_probe.py::test_value": "passed"}
    finally:
        warm.close()


def test_a_combination_built_with_a_warm_runner_is_the_cold_build(repo_cache):
    """make-tasks runs each combination's whole-suite check in a warm runner: the task built
    is the one the cold run gives."""
    from verigap.repos import mutate
    from verigap.repos.tasks import build_task, collect_inputs

    from .conftest import PINNED_TASKS

    p = prepare(str(FIXTURE_LIB), env="current", backend="bwrap")
    combos = PINNED_TASKS[:2]
    warm = WarmRunner(p)
    try:
        for spec in combos:
            sites = [validate_one(p, mutate.Mutation(*s), backend="bwrap")[0] for s in spec]
            inputs = collect_inputs(p, [s.function for s in sites], backend="bwrap")
            kw = dict(seed=0, index=0, backend="bwrap", min_hidden=1)
            cold = build_task(p, sites, 2, inputs, **kw)
            hot = build_task(p, sites, 2, inputs, warm=warm, **kw)
            assert (hot[0] is None) == (cold[0] is None) and hot[1] == cold[1], (hot, cold)
            if cold[0] is not None:  # the same task; the prompt's pytest output differs in
                # its timing alone (the visible run is a separate run each time)
                h, c = hot[0].model_dump(), cold[0].model_dump()
                assert re.sub(r" in [\d.]+s", "", h.pop("prompt")) == re.sub(
                    r" in [\d.]+s", "", c.pop("prompt")
                )
                assert h == c
        assert warm.runs >= 2  # the warm path was taken
    finally:
        warm.close()
