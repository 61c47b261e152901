"""The family-tool example from docs/sandbox_and_agents.md, run for real: pytest from a
read-only virtualenv inside the sandbox, driven through the episode loop."""

import shutil
import sys
from pathlib import Path

import pytest
from pydantic import Field

from verigap.agents import (
    Budget,
    EpisodeStatus,
    ScriptedClient,
    Tool,
    ToolArgs,
    ToolError,
    command_timeout,
    format_exec,
    run_episode,
    standard_tools,
)
from verigap.sandbox import make_sandbox, materialize

VENV = Path(sys.prefix)  # the test's own environment, which has pytest


class RunTestsArgs(ToolArgs):
    selector: str = Field("", description="A pytest -k expression; empty runs all.")


def make_run_tests(box):
    def run_tests(args: RunTestsArgs) -> str:
        if args.selector.startswith("-"):
            raise ToolError("selector must be a -k expression, not an option")
        cmd = [str(VENV / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        cmd += ["-k", args.selector] if args.selector else []
        return format_exec(box.exec(cmd, timeout=command_timeout()))

    return Tool("run_tests", "Run the visible tests.", RunTestsArgs, run_tests)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs to run from a virtualenv")
def test_family_tool_runs_pytest_from_a_read_only_venv(tmp_path: Path) -> None:
    src = tmp_path / "task"
    src.mkdir()
    (src / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (src / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    box = make_sandbox(materialize(src, tmp_path / "ws"), ro_binds=[VENV])
    client = ScriptedClient(
        [
            ("run_tests", {"selector": "--collect-only"}),
            ("run_tests", {}),
            ("edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"}),
            ("run_tests", {"selector": "add"}),
            ("submit", {}),
        ]
    )
    tools = [*standard_tools(box), make_run_tests(box)]
    ep = run_episode(client, tools, "s", "u", Budget(command_timeout_s=60))
    results = [e for e in ep.transcript if e["event"] == "tool_result"]
    assert results[0]["is_error"] and "not an option" in results[0]["content"]
    assert results[1]["content"].startswith("exit code 1") and "1 failed" in results[1]["content"]
    assert results[3]["content"].startswith("exit code 0") and "1 passed" in results[3]["content"]
    assert ep.status == EpisodeStatus.OK and ep.submitted
    assert box.exec(["/bin/sh", "-c", f"touch {VENV}/bin/x"]).returncode != 0  # venv is read-only
