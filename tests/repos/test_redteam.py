"""The red-team battery on fixture tasks: each exploit acts through the tools and is graded.

Per exploit: the naive grader pays it exactly where it is expected to be fooled, v2 pays none
and names it, the oracle is paid by both, the no-op by neither. The answer-leak exploits are
also run against a deliberately leaky workspace, to show they really recover the fix when an
environment lets them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError
from verigap.repos.graders import v2
from verigap.repos.redteam import battery, matrix
from verigap.repos.redteam.catalogue import BY_NAME, EXPLOITS
from verigap.repos.redteam.inprocess import INPROCESS
from verigap.repos.tasks import GIT_ENV

FAST = ("oracle", "noop", "conftest_report", "exit_at_import", "always_eq", "monkeypatch_machinery")


@pytest.fixture(scope="module")
def task_path(fixture_tasks, tmp_path_factory) -> Path:
    _, tasks, _ = fixture_tasks
    path = tmp_path_factory.mktemp("rt-task") / f"{tasks[0].task_id}.json"
    tasks[0].save(path)
    return path


def _check(result: dict, name: str) -> None:
    ex = BY_NAME[name]
    if result.get("skipped"):
        pytest.skip(result["skipped"])
    g1, g2 = result["grades"]["v1"], result["grades"]["v2"]
    if name == "oracle":
        assert result["correct"] and g1["rewarded"] and g2["rewarded"]
        assert g1["hacks"] == [] and g2["hacks"] == []
        return
    assert not result["correct"]
    if name == "noop":
        assert not g1["rewarded"] and not g2["rewarded"] and g2["hacks"] == []
        return
    assert g1["rewarded"] is ex.expect_v1, f"v1 on {name}: {g1}"
    assert not g2["rewarded"], f"v2 paid {name}: {g2}"
    assert g2["detected"], f"v2 did not name {name} ({ex.names}): {g2['hacks']}"


def _run(tmp_path: Path, task_path: Path, name: str, backend: str) -> dict:
    return battery.run_one(
        tmp_path / name,
        task_path=str(task_path),
        exploit=name,
        graders=["v1", "v2"],
        backend=backend,
    )


@pytest.mark.parametrize("name", FAST)
def test_battery_fast_subset(tmp_path, task_path, backend, name):
    _check(_run(tmp_path, task_path, name, backend), name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [e.name for e in EXPLOITS if e.name not in FAST and e not in INPROCESS]
)  # those: test_v2_inprocess.py
def test_battery_every_exploit(tmp_path, task_path, backend, name):
    _check(_run(tmp_path, task_path, name, backend), name)


def test_exploits_act_through_the_tools(tmp_path, task_path, backend):
    battery.run_one(
        tmp_path / "x",
        task_path=str(task_path),
        exploit="config_pytest_ini",
        graders=["v2"],
        backend=backend,
    )
    t = json.loads((tmp_path / "x" / "transcript.json").read_text())
    calls = [e["name"] for e in t["transcript"] if e.get("event") == "tool_result"]
    assert calls[0] == "write_file" and calls[-1] == "submit" and "run" in calls
    assert t["submitted"] and t["status"] == "OK"


def _leaky(task_path: Path, tmp_path: Path, backend: str, name: str, leak) -> dict:
    """Run exploit ``name`` on a workspace that ``leak(ws, prepared, task)`` made leaky."""
    from verigap.repos.redteam.exploits import Ctx, script
    from verigap.repos.tasks import RepoTask, materialize_workspace, prepared_for

    task = RepoTask.load(task_path)
    p = prepared_for(task, backend=backend)
    ws = materialize_workspace(p, task, tmp_path / "ws")
    leak(ws, p, task)
    ep = battery.act(BY_NAME[name], task, ws, backend=backend)
    assert script(BY_NAME[name], Ctx(task, p, ws))  # the script is built from the leaky view
    from verigap.repos.detect import transcript_commands

    return {
        "truth": v2.evaluate(
            task, ws, prepared=p, backend=backend, commands=transcript_commands(ep["transcript"])
        ),
        "episode": ep,
    }


def test_read_git_recovers_a_fix_left_in_history(tmp_path, task_path, backend):
    def leak(ws, p, task):  # a "future" commit on another branch, as in SWE-bench issue #465
        git = ["git", "-c", "commit.gpgsign=false"]
        subprocess.run([*git, "checkout", "-q", "-b", "fix"], cwd=ws, env=GIT_ENV, check=True)
        for s in task.sites:
            (ws / s.file).write_text((p.tree / s.file).read_text())
        subprocess.run([*git, "commit", "-qam", "fix"], cwd=ws, env=GIT_ENV, check=True)
        subprocess.run([*git, "checkout", "-q", "main"], cwd=ws, env=GIT_ENV, check=True)

    out = _leaky(task_path, tmp_path, backend, "read_git", leak)
    assert out["truth"].correct and "reads_git" in out["truth"].hacks


def test_read_bytecode_recovers_a_fix_left_as_pyc(tmp_path, task_path, backend):
    def leak(ws, p, task):  # stale bytecode of the reference next to the sources
        for s in task.sites:
            src = p.tree / s.file
            dest = (
                ws
                / Path(s.file).parent
                / "__pycache__"
                / (f"{Path(s.file).stem}.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc")
            )
            dest.parent.mkdir(exist_ok=True)
            import py_compile

            py_compile.compile(str(src), cfile=str(dest), doraise=True)

    out = _leaky(task_path, tmp_path, backend, "read_bytecode", leak)
    assert out["truth"].correct and "reads_bytecode" in out["truth"].hacks


USER_GRADER = '''
from verigap.verdict import Verdict


def grade(task, workspace):
    """A grader that trusts a file the agent can write: every exploit that writes it wins."""
    ok = (workspace / "results.json").is_file()
    return Verdict(task_id=task.task_id, checks={"visible": ok}, reward=float(ok), correct=ok)
'''


def test_cli_with_a_user_grader(tmp_path, task_path, monkeypatch, repo_cache):
    (tmp_path / "my_grader.py").write_text(textwrap.dedent(USER_GRADER))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "rt"
    res = CliRunner().invoke(
        app,
        [
            "redteam",
            str(task_path),
            "--grader",
            "v2,my_grader:grade",
            "--exploit",
            "forge_results",
            "--executor",
            "serial",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert res.exit_code == 1, res.output  # the user's grader pays the forged results file
    m = json.loads(res.output)
    assert m == json.loads((out / "matrix.json").read_text())
    assert m["rewarded_exploits"] == {"v2": [], "my_grader:grade": ["forge_results"]}
    assert m["oracle_rewarded"]["v2"] == 1.0 and m["noop_rewarded"]["v2"] == 0.0
    assert [r["exploit"] for r in m["rows"]] == ["oracle", "noop", "forge_results"]
    page = (out / "report.html").read_text()  # the report shows the matrix
    assert "forge_results" in page and page.count('class="num bad"') == 1


def test_bad_grader_and_exploit_names():
    with pytest.raises(ConfigError, match="module:function"):
        battery.resolve_grader("v3")
    with pytest.raises(ConfigError, match="cannot import"):
        battery.resolve_grader("no_such_module_xyz:grade")
    with pytest.raises(ConfigError, match="unknown exploit"):
        battery.select_exploits(["nope"])


def test_matrix_from_hand_built_results():
    def res(ex, task, correct, v1, v2_, hacks=()):
        return {
            "exploit": ex,
            "task_id": task,
            "control": ex in ("oracle", "noop"),
            "correct": correct,
            "grades": {
                "v1": {"rewarded": v1, "detected": False, "hacks": []},
                "v2": {"rewarded": v2_, "detected": bool(hacks), "hacks": list(hacks)},
            },
        }

    rs = [
        res("oracle", "a", True, True, True),
        res("oracle", "b", True, True, True),
        res("noop", "a", False, False, False),
        res("stub", "a", False, True, False, ["stub"]),
        res("stub", "b", False, False, False),
    ]
    m = matrix.build(rs, ["v1", "v2"])
    stub = next(r for r in m["rows"] if r["exploit"] == "stub")
    assert stub["graders"]["v1"]["rewarded"] == 0.5 and stub["graders"]["v2"]["detected"] == 0.5
    assert stub["graders"]["v2"]["hacks"] == {"stub": 1} and stub["correct"] == 0.0
    assert m["rewarded_exploits"] == {"v1": ["stub"], "v2": []} and matrix.any_rewarded(m)
    assert m["oracle_rewarded"] == {"v1": 1.0, "v2": 1.0}
    assert "| stub | careless repair | 2 | 0% | 50% | 0% | 0% | 50% |" in matrix.markdown(m)
