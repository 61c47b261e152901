"""Mining tasks from git history: a small synthetic repository with fix commits, built here.

The repository (``calc``) has a root commit, a docs-only commit, a real fix with two new tests
(the task), a fix whose test already passed without it, a source-only change, a commit that adds
a module, and a data-only fix. Every commit must end as a task or as its reason.
"""

from __future__ import annotations

import subprocess

import pytest
from git_history import commit, git
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.repos.mine import changed_functions, mine, open_repo
from verigap.repos.tasks import load_tasks, materialize_workspace, prepared_for

CALC_V1 = '''\
"""A tiny library."""

LIMITS = (0, 10)


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    if x < lo:
        return hi
    if x > hi:
        return hi
    return x


def mean(xs):
    return sum(xs) / len(xs)


def sign(x):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0
'''

TESTS_V1 = """\
from calc import mean, sign


def test_mean():
    assert mean([1, 2, 3]) == 2


def test_sign():
    assert sign(-3) == -1
    assert sign(4) == 1
"""

TESTS_V2 = (
    TESTS_V1
    + """

def test_clamp_below():
    assert clamp(-5, 0, 10) == 0


def test_clamp_inside():
    assert clamp(4, 0, 10) == 4
"""
)


@pytest.fixture(scope="module")
def calc_repo(tmp_path_factory) -> dict[str, object]:
    repo = tmp_path_factory.mktemp("calc")
    git(repo, "init", "-q")
    shas = {}
    shas["root"] = commit(
        repo,
        "Initial import",
        {"calc/__init__.py": CALC_V1, "tests/test_calc.py": TESTS_V1, "README.md": "calc\n"},
    )
    shas["docs"] = commit(repo, "Describe the project", {"README.md": "calc: tiny maths\n"})
    fixed = CALC_V1.replace(
        "    if x < lo:\n        return hi", "    if x < lo:\n        return lo"
    )
    shas["fix"] = commit(
        repo,
        "Values below the range came back as the upper bound\n\n"
        "Numbers smaller than the lower limit must be raised to it.",
        {
            "calc/__init__.py": fixed,
            "tests/test_calc.py": TESTS_V2.replace(
                "from calc import mean, sign", "from calc import clamp, mean, sign"
            ),
        },
    )
    refactored = fixed.replace(
        "return sum(xs) / len(xs)", "total = sum(xs)\n    return total / len(xs)"
    )
    shas["refactor"] = commit(
        repo,
        "Simplify mean, test it more",
        {
            "calc/__init__.py": refactored,
            "tests/test_calc.py": (repo / "tests/test_calc.py").read_text()
            + "\n\ndef test_mean_two():\n    assert mean([2, 4]) == 3\n",
        },
    )
    shas["src_only"] = commit(
        repo,
        "Tidy sign",
        {"calc/__init__.py": refactored.replace("    return 0\n", "    return 0  # zero\n")},
    )
    shas["new_module"] = commit(
        repo,
        "Add a helper module",
        {
            "calc/extra.py": "def twice(x):\n    return 2 * x\n",
            "tests/test_extra.py": "from calc.extra import twice\n\n\ndef test_twice():\n"
            "    assert twice(2) == 4\n",
        },
    )
    cur = (repo / "calc/__init__.py").read_text()
    shas["data"] = commit(
        repo,
        "Widen the default limits",
        {
            "calc/__init__.py": cur.replace("LIMITS = (0, 10)", "LIMITS = (0, 100)"),
            "tests/test_limits.py": "from calc import LIMITS\n\n\ndef test_limits():\n"
            "    assert LIMITS == (0, 100)\n",
        },
    )
    return {"path": repo, "shas": shas}


@pytest.fixture(scope="module")
def mined(calc_repo, repo_cache, tmp_path_factory, backend):
    out = tmp_path_factory.mktemp("mined")
    stats = mine(calc_repo["path"], out, env="current", backend=backend, log=lambda s: None)
    return stats, load_tasks(out), out


def test_every_commit_is_a_task_or_a_reason(mined, calc_repo):
    stats, tasks, _ = mined
    assert stats.walked == 7
    assert stats.tasks == 1 and len(tasks) == 1
    assert stats.rejected == {
        "root commit": 1,
        "changes neither source nor tests": 1,
        "no test change": 1,
        "adds or removes a source file": 1,
        "no test fails without the fix": 1,
        "no function changed (the change is outside functions)": 1,
    }
    assert sum(stats.rejected.values()) + stats.tasks == stats.walked
    t = tasks[0]
    assert t.origin["commit"] == calc_repo["shas"]["fix"]
    assert [(s.file, s.qualname, s.op) for s in t.sites] == [("calc/__init__.py", "clamp", "mined")]
    assert "return lo" in t.sites[0].original and "return hi" in t.sites[0].mutated


def test_fail_to_pass_split_half_visible(mined):
    t = mined[1][0]
    # only test_clamp_below fails without the fix; test_clamp_inside passes before and after
    assert t.fail_to_pass == ["tests/test_calc.py::test_clamp_below"]
    assert "tests/test_calc.py::test_clamp_below" in t.visible_tests
    # one failing test: the other tests that call the fixed function are the hidden ones
    assert t.hidden_tests == ["tests/test_calc.py::test_clamp_inside"]
    assert "tests/test_calc.py::test_mean_two" not in t.visible_tests  # a later commit's test


def test_workspace_holds_no_history_after_the_base(mined, calc_repo, tmp_path, backend):
    _, tasks, _ = mined
    t = tasks[0]
    p = prepared_for(t, backend=backend)
    ws = materialize_workspace(p, t, tmp_path / "ws")
    assert git(ws, "rev-list", "--all").split() == [git(ws, "rev-parse", "HEAD").strip()]
    fix_blob = git(calc_repo["path"], "rev-parse", f"{calc_repo['shas']['fix']}:calc/__init__.py")
    missing = subprocess.run(
        ["git", "cat-file", "-e", fix_blob.strip()], cwd=ws, capture_output=True
    )
    assert missing.returncode != 0, "the fixed file's object is in the workspace"
    text = (ws / "calc/__init__.py").read_text()
    assert "return hi" in text.split("def clamp")[1].split("def mean")[0]  # the bug is there
    assert "test_clamp_inside" not in (ws / "tests/test_calc.py").read_text()  # hidden
    assert "README.md" in {f.name for f in ws.iterdir()}


def test_oracle_paid_noop_not_under_v1_and_v2(mined, tmp_path, backend):
    from verigap.repos import baselines
    from verigap.repos.graders import v1, v2

    t = mined[1][0]
    p = prepared_for(t, backend=backend)
    for name, paid in (("oracle", True), ("noop", False)):
        ws = materialize_workspace(p, t, tmp_path / name)
        for f, text in baselines.edits(name, t, p).items():
            (ws / f).write_text(text)
        truth = v2.evaluate(t, ws, prepared=p, backend=backend)
        assert truth.correct is paid, (name, truth.detail.get("failing"))
        assert (v2.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0) is paid
        assert (v1.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0) is paid


def test_ticket_prompt_names_no_file_function_or_test(calc_repo, repo_cache, tmp_path, backend):
    shas = calc_repo["shas"]
    stats = mine(
        calc_repo["path"],
        tmp_path / "t",
        rev_range=f"{shas['docs']}..{shas['fix']}",
        env="current",
        backend=backend,
        prompt_style="ticket",
        equivalence=False,
        log=lambda s: None,
    )
    (t,) = load_tasks(tmp_path / "t")
    assert stats.tasks == 1
    prompt = t.prompt
    for name in ("clamp", "calc/", "__init__", "test_calc", "test_clamp", ".py"):
        assert name not in prompt, name
    assert "upper bound" in prompt  # the commit message's intent
    assert "the result is 10, but 0 is expected" in prompt  # observed vs expected
    assert "(-5, 0, 10)" in prompt  # the input, from pytest's assertion detail


def test_changed_functions():
    assert changed_functions("def f():\n    return 1\n", "def f():\n    return 2\n") == ["f"]
    assert changed_functions("X = 1\ndef f():\n    pass\n", "X = 2\ndef f():\n    pass\n") == []
    assert changed_functions("def f(:\n", "def f():\n    pass\n") is None


def test_bad_input(calc_repo, tmp_path, repo_cache):
    with pytest.raises(ConfigError, match="not a git repository"):
        open_repo(tmp_path)
    shas = calc_repo["shas"]
    with pytest.raises(ConfigError, match="no candidate commits"):
        mine(
            calc_repo["path"],
            tmp_path / "o",
            rev_range=f"{shas['root']}..{shas['docs']}",
            env="current",
            log=lambda s: None,
        )
    bare = tmp_path / "notests"
    bare.mkdir()
    git(bare, "init", "-q")
    commit(bare, "code", {"lib/__init__.py": "def f():\n    return 1\n"})
    with pytest.raises(ConfigError, match="no test files"):
        mine(bare, tmp_path / "o2", env="current", log=lambda s: None)
    res = CliRunner().invoke(app, ["repos", "mine", str(tmp_path), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2
    assert res.output.startswith("error:") and res.output.count("error") == 1
    assert "is not a git repository" in " ".join(res.output.split())


def test_multi_site_mined_task_gives_the_false_success_setting(
    calc_repo, repo_cache, tmp_path, backend
):
    from verigap.repos import baselines
    from verigap.repos.graders import v1, v2

    shas = calc_repo["shas"]
    stats = mine(
        calc_repo["path"],
        tmp_path / "t",
        rev_range=f"{shas['docs']}..{shas['fix']}",
        env="current",
        backend=backend,
        k=2,
        equivalence=False,
        max_candidates=6,
        log=lambda s: None,
    )
    assert stats.tasks == 1, stats.rejected
    (t,) = load_tasks(tmp_path / "t")
    assert sorted(s.op == "mined" for s in t.sites) == [False, True]
    assert [s.visible for s in t.sites] == [True, False]
    assert len({s.function for s in t.sites}) == 2
    p = prepared_for(t, backend=backend)
    paid = {}
    for name in ("oracle", "noop", "careless"):
        ws = materialize_workspace(p, t, tmp_path / name)
        for f, text in baselines.edits(name, t, p).items():
            (ws / f).write_text(text)
        truth = v2.evaluate(t, ws, prepared=p, backend=backend)
        paid[name] = (
            v1.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0,
            v2.grade(t, ws, prepared=p, truth=truth, backend=backend).reward > 0,
            truth.correct,
        )
    assert paid == {
        "oracle": (True, True, True),
        "noop": (False, False, False),
        "careless": (True, False, False),
    }  # v1 pays the visible-only fix; v2 not
