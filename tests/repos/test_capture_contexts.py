"""Equivalence inputs are kept only when the reference answers them alike where v2 will call
a candidate: in the agent's context (its layout, a random hash seed), not only twice in the
grader's. A result in the order of a set of strings differs there, so even the reference's own
code (the oracle) would fail the comparison; such an input is dropped as nondeterministic
(pathspec's ``PathSpec.check_files`` over a set of paths was one, and v2 refused its oracle)."""

from __future__ import annotations

import textwrap

from verigap.repos.prepare import prepare
from verigap.repos.tasks import collect_inputs

FILES = {
    "bag/__init__.py": "",
    "bag/ops.py": """
        def in_set_order(names):
            return [n.upper() for n in names]


        def total(xs):
            return sum(xs)
        """,
    "tests/test_ops.py": """
        from bag.ops import in_set_order, total

        def test_upper_of_a_set():
            names = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
            assert sorted(in_set_order(names)) == sorted(n.upper() for n in names)

        def test_total():
            assert total([1, 2, 3]) == 6
        """,
}


def test_a_result_in_hash_order_is_no_input_but_a_stable_one_is(repo_cache, tmp_path, backend):
    root = tmp_path / "proj"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    p = prepare(str(root), env="current", backend=backend)
    why: dict[str, str] = {}
    fns = ["bag/ops.py::in_set_order", "bag/ops.py::total"]
    inputs = collect_inputs(p, fns, backend=backend, why=why)
    assert inputs["bag/ops.py::total"]  # the control: a stable result keeps its inputs
    captured = [x for x in inputs["bag/ops.py::in_set_order"] if not x["generated"]]
    assert captured == [], captured
    assert "nondeterministic result" in why.get("bag/ops.py::in_set_order", ""), why
