"""Feature tasks mined from git history: a small repository built here, whose commits add
behaviour with and without tests, fix a bug, and merge a feature branch.

Every commit walked must end as a feature task or as its reason; a kept task hides the
feature's new tests, holds no history after its base, pays the real change and not the no-op,
and asks for the feature in a ticket that never quotes the implementation.
"""

from __future__ import annotations

import subprocess

import pytest
from git_history import commit, git

from verigap.errors import ConfigError
from verigap.repos.mine import (
    changed_test_units,
    feature_sites,
    mine,
    new_behaviour,
    put_back,
    split_feature_tests,
)
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for
from verigap.repos.tickets import implementation_lines

LIB_V1 = '''\
"""A tiny library."""


def mean(xs):
    return sum(xs) / len(xs)


def sign(x):
    if x > 0:
        return 1
    if x < 0:
        return 1
    return 0
'''

CLAMP = '''

def clamp(x, lo, hi):
    """``x`` limited to the closed range from ``lo`` to ``hi``.

    >>> clamp(-5, 0, 10)
    0
    >>> clamp(12, 0, 10)
    10
    """
    smallest_allowed = lo
    if x < smallest_allowed:
        return smallest_allowed
    return hi if x > hi else x
'''

TESTS_V1 = """\
import calc


def test_mean():
    assert calc.mean([1, 2, 3]) == 2


def test_sign_positive():
    assert calc.sign(4) == 1
"""

CLAMP_TESTS = """

def test_clamp_below():
    assert calc.clamp(-5, 0, 10) == 0


def test_clamp_inside():
    assert calc.clamp(4, 0, 10) == 4


def test_clamp_above():
    assert calc.clamp(12, 0, 10) == 10
"""

SPAN = '''

def span(xs):
    """The distance between the largest and the smallest of ``xs``: ``span([3, 9, 4])`` is 6."""
    ordered = sorted(xs)
    return ordered[-1] - ordered[0]
'''

SPAN_TESTS = """

def test_span():
    assert span([3, 9, 4]) == 6


def test_span_single():
    assert span([5]) == 0
"""


@pytest.fixture(scope="module")
def calc_repo(tmp_path_factory) -> dict[str, object]:
    repo = tmp_path_factory.mktemp("calc")
    git(repo, "init", "-q")
    lib, tests = LIB_V1, TESTS_V1
    shas = {
        "root": commit(
            repo, "Initial import", {"calc/__init__.py": lib, "tests/test_calc.py": tests}
        )
    }
    lib += CLAMP
    tests += CLAMP_TESTS
    shas["feature"] = commit(
        repo, "Add clamp()", {"calc/__init__.py": lib, "tests/test_calc.py": tests}
    )
    lib += "\n\ndef double(x):\n    return 2 * x\n"
    shas["untested"] = commit(repo, "Add double()", {"calc/__init__.py": lib})
    lib += "\n\ndef halve(x):\n    return x / 2\n"
    tests += "\n\ndef test_mean_two():\n    assert calc.mean([2, 4]) == 3\n"
    shas["passes_at_base"] = commit(
        repo, "Add halve()", {"calc/__init__.py": lib, "tests/test_calc.py": tests}
    )
    lib = lib.replace("    if x < 0:\n        return 1", "    if x < 0:\n        return -1")
    tests += "\n\ndef test_sign_negative():\n    assert calc.sign(-4) == -1\n"
    shas["fix"] = commit(
        repo, "Negative numbers had sign 1", {"calc/__init__.py": lib, "tests/test_calc.py": tests}
    )
    # a feature branch, code and tests in two commits, merged as a pull request
    git(repo, "checkout", "-q", "-b", "span")
    commit(repo, "Write span", {"calc/__init__.py": lib + SPAN})
    # the tests import the new name: the whole module fails to import at the base
    spanned = tests.replace("import calc\n", "import calc\nfrom calc import span\n", 1)
    commit(repo, "Test span", {"tests/test_calc.py": spanned + SPAN_TESTS})
    git(repo, "checkout", "-q", "main")
    git(
        repo,
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge pull request #7 from someone/span\n\nAdd span(): how far apart the values lie",
        "span",
    )
    shas["merge"] = git(repo, "rev-parse", "HEAD").strip()
    return {"path": repo, "shas": shas}


@pytest.fixture(scope="module")
def mined(calc_repo, repo_cache, tmp_path_factory, backend):
    out = tmp_path_factory.mktemp("features")
    stats = mine(
        calc_repo["path"], out, env="current", backend=backend, kind="feature", log=lambda s: None
    )
    return stats, {t.origin["commit"]: t for t in load_tasks(out)}


def test_every_commit_is_a_feature_task_or_a_reason(mined, calc_repo):
    stats, tasks = mined
    shas = calc_repo["shas"]
    assert stats.kind == "feature"
    assert stats.walked == 6  # the main line: the branch's own commits are the merge's change
    assert set(tasks) == {shas["feature"], shas["merge"]}
    assert stats.rejected == {
        "root commit": 1,
        "no test change": 1,
        "the feature's new tests pass without it": 1,
        "adds no public function, class, method or parameter (not a feature)": 1,
    }
    assert sum(stats.rejected.values()) + stats.tasks == stats.walked
    for t in tasks.values():
        assert t.kind == "feature" and t.origin["kind"] == "mined feature"


def test_the_new_tests_are_hidden_but_one_acceptance_test(mined, calc_repo):
    t = mined[1][calc_repo["shas"]["feature"]]
    new = {f"tests/test_calc.py::test_clamp_{w}" for w in ("above", "below", "inside")}
    assert set(t.hidden_tests) == new - {"tests/test_calc.py::test_clamp_above"}
    assert "tests/test_calc.py::test_clamp_above" in t.visible_tests  # first by name
    assert {"tests/test_calc.py::test_mean", "tests/test_calc.py::test_sign_positive"} <= set(
        t.visible_tests
    )
    assert set(t.fail_to_pass) == new  # a missing name fails every new test at the base
    assert [(s.qualname, s.mutated) for s in t.sites] == [("clamp", "")]


def test_the_merged_pull_request_is_one_task(mined, calc_repo):
    t = mined[1][calc_repo["shas"]["merge"]]
    # the old tests fail at the base (their module imports the new name): they show what is
    # missing, so every new test is hidden
    assert t.hidden_tests == [
        "tests/test_calc.py::test_span",
        "tests/test_calc.py::test_span_single",
    ]
    assert "tests/test_calc.py::test_mean" in t.visible_tests
    assert "tests/test_calc.py::test_mean" in t.fail_to_pass
    assert "Requested: Add span(): how far apart the values lie" in t.prompt
    assert "#7" not in t.prompt and "Merge" not in t.prompt


def test_workspace_is_the_parent_without_later_history(mined, calc_repo, tmp_path, backend):
    t = mined[1][calc_repo["shas"]["feature"]]
    p = prepared_for(t, backend=backend)
    ws = materialize_workspace(p, t, tmp_path / "ws")
    assert git(ws, "rev-list", "--all").split() == [git(ws, "rev-parse", "HEAD").strip()]
    for rev in (calc_repo["shas"]["feature"], calc_repo["shas"]["merge"]):
        blob = git(calc_repo["path"], "rev-parse", f"{rev}:calc/__init__.py").strip()
        gone = subprocess.run(["git", "cat-file", "-e", blob], cwd=ws, capture_output=True)
        assert gone.returncode != 0, f"the workspace holds {rev[:8]}'s file"
    assert "def clamp" not in (ws / "calc/__init__.py").read_text()
    visible_tests = (ws / "tests/test_calc.py").read_text()
    assert "test_clamp_above" in visible_tests
    assert "test_clamp_below" not in visible_tests and "test_clamp_inside" not in visible_tests


def test_real_change_paid_noop_not_under_v1_and_v2(mined, calc_repo, tmp_path, backend):
    from verigap.repos import baselines
    from verigap.repos.graders import v1, v2

    t = mined[1][calc_repo["shas"]["feature"]]
    assert "paid by v1 and v2" in t.origin["checked"]
    p = prepared_for(t, backend=backend)
    for name, paid in (("oracle", True), ("noop", False)):
        ws = materialize_workspace(p, t, tmp_path / name)
        for f, text in baselines.edits(name, t, p).items():
            (ws / f).write_text(text)
        truth = v2.evaluate(t, ws, prepared=p, backend=backend)
        assert truth.correct is paid, (name, truth.detail.get("failing"))
        assert (v2.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0) is paid
        assert (v1.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0) is paid


def test_ticket_asks_for_the_feature_and_never_quotes_its_body(mined, calc_repo):
    t = mined[1][calc_repo["shas"]["feature"]]
    prompt = t.prompt
    assert prompt.startswith("Feature request")
    assert "Requested: Add clamp()" in prompt
    assert "`clamp(x, lo, hi)` in `calc`" in prompt  # name, signature, where it lives
    assert ">>> clamp(12, 0, 10)" in prompt  # the documented example
    assert "bug" not in prompt.lower() and "wrong" not in prompt.lower()
    body = implementation_lines(t.sites[0].original, "clamp")
    assert "smallest_allowed = lo" in body  # the check below can fail
    assert not [ln for ln in body if ln in prompt]
    assert "smallest_allowed" not in prompt


def test_feature_helpers_read_the_change() -> None:
    assert new_behaviour(LIB_V1, LIB_V1 + CLAMP) == ["clamp"]
    assert (
        new_behaviour(LIB_V1, LIB_V1.replace("return 1\n    return 0", "return -1\n    return 0"))
        == []
    )
    wider = LIB_V1.replace("def mean(xs):", "def mean(xs, weights=None):")
    assert new_behaviour(LIB_V1, wider) == ["mean(weights)"]
    assert new_behaviour(LIB_V1, LIB_V1 + "\n\ndef _private(x):\n    return x\n") == []
    # a helper the feature is built from is not a site: another implementation need not have it
    helped = LIB_V1 + CLAMP + "\n\ndef _order(lo, hi):\n    return min(lo, hi), max(lo, hi)\n"
    assert feature_sites(LIB_V1, helped) == ["clamp"]
    assert feature_sites(LIB_V1, LIB_V1 + "\n\nclass Box:\n    size = 1\n") == []
    assert changed_test_units("t.py", TESTS_V1, TESTS_V1 + CLAMP_TESTS) == {
        f"t.py::test_clamp_{w}" for w in ("below", "inside", "above")
    }
    # the reference with one new function taken out: how a site's inputs are shown to tell
    assert "def clamp" not in put_back(LIB_V1 + CLAMP, LIB_V1, "clamp")
    assert "def mean" in put_back(LIB_V1 + CLAMP, LIB_V1, "clamp")


def test_a_lone_new_test_is_not_hidden_when_nothing_else_fails() -> None:
    from types import SimpleNamespace

    from verigap.repos.mine import Rejected

    p = SimpleNamespace(passing=["t.py::test_old", "t.py::test_new[1]", "t.py::test_new[2]"])
    with pytest.raises(Rejected, match="none left to hide"):
        split_feature_tests(p, {"t.py::test_new[1]"}, {"t.py::test_new"})
    with pytest.raises(Rejected, match="pass without it"):
        split_feature_tests(p, {"t.py::test_old"}, {"t.py::test_new"})
    # an old test that fails too (the test file imports the new name): every new test hidden
    vis, hid = split_feature_tests(p, {"t.py::test_old", "t.py::test_new[2]"}, {"t.py::test_new"})
    assert vis == ["t.py::test_old"] and hid == ["t.py::test_new[1]", "t.py::test_new[2]"]


def test_an_unknown_kind_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="--kind 'features': use bugfix"):
        mine(tmp_path, tmp_path / "out", kind="features", log=lambda s: None)
    with pytest.raises(ConfigError, match="--k applies to bug fixes only"):
        mine(tmp_path, tmp_path / "out", kind="feature", k=2, log=lambda s: None)


def test_a_module_that_fails_to_import_shows_its_failures() -> None:
    """The shown command reports a test module that imports a missing name as one
    ``ERROR path``: it shows the wanted failures in that module and nothing outside them;
    a module error with no wanted failure in it is outside, and a missing id is unseen."""
    from verigap.repos.shown_command import shown_mismatch

    want = {"t/test_a.py::test_old", "t/test_a.py::test_new"}
    assert shown_mismatch({"t/test_a.py"}, want) == (set(), set())
    assert shown_mismatch(want, want) == (set(), set())
    assert shown_mismatch({"t/test_b.py", *want}, want) == ({"t/test_b.py"}, set())
    assert shown_mismatch({"t/test_a.py::test_old"}, want) == (set(), {"t/test_a.py::test_new"})


def test_failing_subtests_count_as_shown_failures() -> None:
    """pytest reports a failing ``unittest`` subTest as ``SUBFAILED(params) id`` with no
    FAILED line (more-itertools' suites use subTest): the shown run must read it as failing."""
    from verigap.repos.shown_command import _SUMMARY

    out = (
        "SUBFAILED(r=0) pkg/tests/test_more.py::CombTests::test_basic\n"
        "SUBFAILED(x=(1, 2)) pkg/tests/test_more.py::CombTests::test_pairs - AttributeError\n"
        "FAILED pkg/tests/test_more.py::Other::test_x - assert 1 == 2\n"
        "PASSED pkg/tests/test_more.py::Other::test_y\n"
    )
    assert [m.group(2) for m in _SUMMARY.finditer(out)] == [
        "pkg/tests/test_more.py::CombTests::test_basic",
        "pkg/tests/test_more.py::CombTests::test_pairs",
        "pkg/tests/test_more.py::Other::test_x",
    ]


def test_a_coloured_shown_run_is_read_like_a_plain_one() -> None:
    """humanize's ``--color=yes`` addopts colour the agent's own run: the ids and the counts
    carry escape codes (``\\x1b[1m34 failed``), and read raw no test seemed to have run."""
    from verigap.repos.shown_command import failures_in

    out = (
        "\x1b[31mFAILED\x1b[0m tests/test_number.py::\x1b[1mtest_metric[[100]-100]\x1b[0m"
        " - AssertionError: assert '1.00 x 10' == '100'\n"
        "\x1b[31m\x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m472 passed\x1b[0m\x1b[31m in 5.83s\x1b[0m\n"
    )
    assert failures_in(out) == ({"tests/test_number.py::test_metric[[100]-100]"}, True)
    assert failures_in("no tests ran in 0.01s\n") == (set(), False)
