"""Making many tasks fast: validation runs only the tests that reach a mutation, calls whose
arguments or receiver hold test code are captured with cloudpickle (so methods of stateful
objects get equivalence inputs), and every task file records its difficulty."""

from __future__ import annotations

import base64
import tempfile
import textwrap
from pathlib import Path
from types import SimpleNamespace

from verigap.repos import equivalence, mutate
from verigap.repos.difficulty import estimate, lines_touched
from verigap.repos.prepare import prepare
from verigap.repos.tasks import collect_inputs
from verigap.repos.validate import mutant_tree, run_reaching, run_suite, validate_one


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    return root


PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": """
        def add(a, b):
            return a + b


        def clamp(x, lo, hi):
            if x < lo:
                return lo
            if x > hi:
                return hi
            return x


        def apply(f, x):
            return f(x) + 1


        class Acc:
            def __init__(self, key):
                self.key = key
                self.items = []

            def push(self, x):
                self.items.append(self.key(x))
                return sum(self.items)
        """,
    "tests/test_ops.py": """
        import pytest
        from calc.ops import Acc, add, apply, clamp


        def double(v):
            return 2 * v


        def test_add():
            assert add(2, 3) == 5

        @pytest.mark.parametrize("x", [5, 9])
        def test_clamp_high(x):
            assert clamp(x, 0, 3) == 3

        def test_clamp_low():
            assert clamp(-1, 0, 3) == 0

        def test_apply_lambda():
            assert apply(lambda v: v * 3, 2) == 7

        def test_apply_helper():
            assert apply(double, 4) == 9

        def test_acc():
            acc = Acc(lambda v: v + 1)
            assert acc.push(1) == 2
            assert acc.push(2) == 5
        """,
}


def prep(tmp_path: Path, backend: str):
    return prepare(str(write(tmp_path / "proj", PROJECT)), env="current", backend=backend)


def test_validation_runs_only_the_tests_that_reach_the_mutation(repo_cache, tmp_path, backend):
    p = prep(tmp_path, backend)
    src = (p.tree / "calc/ops.py").read_text()
    m = next(
        x for x in mutate.enumerate_mutations("calc/ops.py", src, ["clamp"]) if x.op == "invert_if"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "t"
        mutant_tree(p, [m], tree)
        run, ran = run_reaching(p, tree, m.function, backend=backend)
        full = run_suite(p, tree, backend=backend)
    assert sorted(ran) == sorted(p.reach[m.function])  # every parameter case of each unit
    assert set(run.outcomes) == set(ran)  # no other test ran
    assert len(full.outcomes) > len(run.outcomes)  # the control: the whole suite has more
    v, why = validate_one(p, m, backend=backend)
    assert v is not None, why
    assert set(v.fail_to_pass) == full.failing(p.passing)  # the same decision as the whole suite


def test_calls_holding_test_code_are_captured_by_value_and_tell_a_mutation(
    repo_cache, tmp_path, backend
):
    p = prep(tmp_path, backend)
    fns = ["calc/ops.py::apply", "calc/ops.py::Acc.push", "calc/ops.py::add"]
    why: dict[str, str] = {}
    pickled: dict[str, str] = {}
    plain = collect_inputs(p, fns, backend=backend)
    # the control: without cloudpickle, neither the lambda nor the receiver holding one loads
    assert not plain["calc/ops.py::apply"] and not plain["calc/ops.py::Acc.push"]
    assert plain["calc/ops.py::add"]
    got = collect_inputs(p, fns, backend=backend, why=why, pickled=pickled, cloudpickle=True)
    assert got["calc/ops.py::apply"] and got["calc/ops.py::Acc.push"], why
    # a lambda, a test module's function, a receiver holding a lambda: cloudpickle, by value
    assert pickled["calc/ops.py::apply"] == pickled["calc/ops.py::Acc.push"] == "cloudpickle"
    assert pickled["calc/ops.py::add"] == "pickle"  # plain arguments stay plain pickle
    assert any(b"cloudpickle" in base64.b64decode(x["blob"]) for x in got["calc/ops.py::Acc.push"])
    inputs = [x for f in fns for x in got[f]]
    same = equivalence.check(p, p.tree, p.tree, inputs, backend=backend)
    assert same.candidate_ran and same.score == 1.0 and not same.context_dependent
    src = (p.tree / "calc/ops.py").read_text()
    for fn in ("apply", "Acc.push"):  # the comparison tells each method's mutation apart
        m = next(
            x
            for x in mutate.enumerate_mutations("calc/ops.py", src, [fn])
            if x.op in ("arith_swap", "return_value")
        )
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "t"
            mutant_tree(p, [m], tree)
            eq = equivalence.check(p, p.tree, tree, inputs, backend=backend)
        assert eq.candidate_ran and not eq.target_ok(m.function), (fn, m.op)
        assert eq.target_ok("calc/ops.py::add")  # the control: an unmutated function agrees


def test_difficulty_estimate():
    original = "def f(x):\n    if x < 0:\n        return 0\n    return x\n"
    mutated = "def f(x):\n    if x <= 0:\n        return 0\n    return x\n"
    assert lines_touched(original, mutated) == 1
    assert lines_touched(original, original) == 0
    site = SimpleNamespace
    sites = [
        site(
            file="a.py",
            qualname="f",
            op="cmp_flip",
            visible=True,
            original=original,
            mutated=mutated,
            discrimination="comparison",
        ),
        site(
            file="b.py",
            qualname="C.g",
            op="return_value",
            visible=False,
            original="x\ny\n",
            mutated="x\nz\nw\n",
            discrimination="forwarded",
        ),
    ]
    d = estimate(
        sites, broken={"v1", "h1", "h2"}, visible={"v1", "v2"}, hidden={"h1", "h2", "h3", "h4"}
    )
    assert (d.k, d.visible_sites, d.hidden_sites, d.files, d.cross_file) == (2, 1, 1, 2, True)
    assert d.methods == 1 and d.kinds == ["cmp_flip", "return_value"]
    assert d.lines_touched == 1 + 2
    assert (d.visible_failing, d.hidden_failing, d.hidden_failing_share) == (1, 2, 0.5)
    assert d.forwarded_sites == 1


def test_make_tasks_reports_the_upper_bound_and_records_difficulty(fixture_tasks):
    stats, tasks, _ = fixture_tasks
    assert stats.upper_bound is not None and stats.upper_bound >= stats.tasks > 0
    assert stats.k_made == {"4": stats.tasks}
    assert sum(sum(v.values()) for v in stats.site_routes.values()) > 0
    for t in tasks:
        d = t.difficulty
        assert d is not None and d.k == len(t.sites) == 4
        assert d.visible_sites == d.hidden_sites == 2
        assert d.kinds == [s.op for s in t.sites]
        assert d.hidden_failing == len(set(t.fail_to_pass) & set(t.hidden_tests)) > 0


SLOW_PROJECT = {
    "calc/__init__.py": "",
    "calc/ops.py": """
        import sys, time

        def add(a, b):
            return a + b

        def crawl(x):
            if "pytest" not in sys.modules:  # quick under the tests, slow when compared alone
                time.sleep(1.5)
            return x + 1
        """,
    "tests/test_ops.py": """
        import pytest
        from calc.ops import add, crawl

        @pytest.mark.parametrize("a", range(6))
        def test_add(a):
            assert add(a, 1) == a + 1

        @pytest.mark.parametrize("x", range(12))
        def test_crawl(x):
            assert crawl(x) == x + 1
        """,
}


def test_collecting_inputs_keeps_to_its_budget(repo_cache, tmp_path, backend, monkeypatch):
    """A function whose comparison calls run long loses its own inputs, with the reason, once
    the time budget is spent; the others keep theirs, and collecting ends near the budget."""
    import time

    from verigap.repos import tasks

    p = prepare(str(write(tmp_path / "proj", SLOW_PROJECT)), env="current", backend=backend)
    monkeypatch.setattr(tasks, "EQUIV_BUDGET_S", 20.0)
    p = p.model_copy(update={"baseline_s": 0.01})  # the budget is then 20 s, whatever the load
    fns = ["calc/ops.py::add", "calc/ops.py::crawl"]
    why: dict[str, str] = {}
    t0 = time.perf_counter()
    got = collect_inputs(p, fns, backend=backend, why=why)
    took = time.perf_counter() - t0
    assert got["calc/ops.py::add"], why
    assert not got["calc/ops.py::crawl"], why
    assert "did not finish" in why["calc/ops.py::crawl"], why
    budget = 20.0
    # expand and two call rounds, each within its budget (plus sandbox starts): never the
    # dozens of seconds the slow calls would take unbounded
    assert took < 3 * budget + 30, took


def test_single_site_tasks_hold_out_some_of_their_own_failing_tests(repo_cache, tmp_path, backend):
    """k=1: one visible site, some of the tests it breaks visible and some hidden; the oracle
    is paid and the no-op is not, by v1 and v2."""
    from verigap.repos import baselines
    from verigap.repos.graders import v1, v2
    from verigap.repos.tasks import load_tasks, make_tasks, materialize_workspace, prepared_for

    from .conftest import FIXTURE_LIB

    out = tmp_path / "k1"
    stats = make_tasks(
        str(FIXTURE_LIB),
        out,
        k=1,
        n=2,
        max_candidates=16,
        seed=0,
        env="current",
        backend=backend,
        min_hidden=1,
        log=lambda s: None,
    )
    assert stats.tasks == 2 and stats.k_made == {"1": 2}, stats
    assert stats.upper_bound >= 2
    for t in load_tasks(out):
        (site,) = t.sites
        assert site.visible
        broken = set(site.fail_to_pass)
        assert broken & set(t.visible_tests) and broken & set(t.hidden_tests)
        p = prepared_for(t, backend=backend)
        for agent, paid in (("oracle", True), ("noop", False)):
            ws = materialize_workspace(p, t, tmp_path / f"ws-{t.task_id}-{agent}")
            for f, text in baselines.edits(agent, t, p).items():
                (ws / f).write_text(text)
            truth = v2.evaluate(t, ws, prepared=p)
            assert (v2.grade(t, ws, prepared=p, truth=truth).reward > 0) is paid, agent
            assert (v1.grade(t, ws, prepared=p, truth=truth).reward > 0) is paid, agent
