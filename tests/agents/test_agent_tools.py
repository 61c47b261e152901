import json

import pytest

from verigap.agents import ToolCall, standard_tools
from verigap.agents._loop import _dispatch
from verigap.sandbox import Sandbox


@pytest.fixture
def tools(box: Sandbox) -> dict:
    return {t.name: t for t in standard_tools(box)}


def call(tools: dict, name: str, args: dict | str) -> tuple[str, bool]:
    out, is_error, _, _ = _dispatch(ToolCall.of("c1", name, args), tools)
    return out, is_error


def test_schemas_are_plain_json_schema_and_forbid_extra_fields(tools: dict) -> None:
    assert set(tools) == {
        "list_files",
        "read_file",
        "edit_file",
        "write_file",
        "run",
        "submit",
        "report_impossible",
    }
    edit = tools["edit_file"].parameters
    assert edit["type"] == "object" and edit["additionalProperties"] is False
    assert set(edit["required"]) == {"path", "old", "new"}
    assert "title" not in json.dumps(edit)
    assert tools["read_file"].parameters["properties"]["start_line"]["anyOf"][0]["minimum"] == 1
    assert tools["submit"].ends_episode == "submit"
    assert tools["report_impossible"].ends_episode == "impossible"


def test_list_files(tools: dict) -> None:
    out, err = call(tools, "list_files", {})
    assert not err
    assert out.splitlines() == ["calc.py", "empty.txt", "pkg/", "pkg/notes.txt", "test_calc.py"]
    assert call(tools, "list_files", {"path": "pkg"}) == ("pkg/notes.txt", False)
    for bad, msg in [
        ("calc.py", "not a directory"),
        ("..", "leaves the workspace"),
        ("/etc", "outside the workspace"),
    ]:
        out, err = call(tools, "list_files", {"path": bad})
        assert err and msg in out, out


def test_read_file_with_line_ranges(tools: dict) -> None:
    out, err = call(tools, "read_file", {"path": "pkg/notes.txt", "start_line": 2, "end_line": 3})
    assert not err
    assert out == "     2\ttwo\n     3\tthree\n[lines 2-3 of 5]"
    whole, _ = call(tools, "read_file", {"path": "calc.py"})
    assert whole == "     1\tdef add(a, b):\n     2\t    return a - b"
    tail, _ = call(tools, "read_file", {"path": "pkg/notes.txt", "start_line": 4, "end_line": 99})
    assert tail.endswith("[lines 4-5 of 5]")
    assert call(tools, "read_file", {"path": "empty.txt"}) == ("(empty file)", False)


@pytest.mark.parametrize(
    "args, msg",
    [
        ({"path": "nope.py"}, "does not exist"),
        ({"path": "pkg"}, "is a directory"),
        ({"path": "../task/calc.py"}, "leaves the workspace"),
        ({"path": "/etc/passwd"}, "outside the workspace"),
        ({"path": "pkg/notes.txt", "start_line": 4, "end_line": 2}, "before start_line"),
        ({"path": "pkg/notes.txt", "start_line": 9}, "past the end"),
        ({"path": "pkg/notes.txt", "start_line": 0}, "greater than or equal to 1"),
        ({}, "path: Field required"),
        ({"path": "calc.py", "lines": "1-2"}, "Extra inputs are not permitted"),
    ],
)
def test_read_file_errors(tools: dict, args: dict, msg: str) -> None:
    out, err = call(tools, "read_file", args)
    assert err and msg in out, out


def test_edit_file_replaces_exactly_one_occurrence(tools: dict, box: Sandbox) -> None:
    out, err = call(tools, "edit_file", {"path": "calc.py", "old": "a - b", "new": "a + b"})
    assert (out, err) == ("edited calc.py: replaced 1 occurrence", False)
    assert box.read_file("calc.py") == "def add(a, b):\n    return a + b\n"


@pytest.mark.parametrize(
    "args, msg",
    [
        ({"path": "calc.py", "old": "a * b", "new": "x"}, "not found"),
        ({"path": "calc.py", "old": "a", "new": "x"}, "occurs 3 times"),
        ({"path": "calc.py", "old": "", "new": "x"}, "old is empty"),
        ({"path": "calc.py", "old": "a - b", "new": "a - b"}, "identical"),
        ({"path": "missing.py", "old": "a", "new": "b"}, "does not exist"),
        ({"path": "../../etc/hosts", "old": "a", "new": "b"}, "leaves the workspace"),
    ],
)
def test_edit_file_errors_leave_the_file_alone(
    tools: dict, box: Sandbox, args: dict, msg: str
) -> None:
    out, err = call(tools, "edit_file", args)
    assert err and msg in out, out
    assert box.read_file("calc.py") == "def add(a, b):\n    return a - b\n"


def test_write_file(tools: dict, box: Sandbox) -> None:
    out, err = call(tools, "write_file", {"path": "new/deep/mod.py", "content": "X = 1\n"})
    assert (out, err) == ("wrote new/deep/mod.py (6 characters)", False)
    assert box.read_file("new/deep/mod.py") == "X = 1\n"
    for bad, msg in [
        ("pkg", "is a directory"),
        ("../escape.py", "leaves the workspace"),
        ("/tmp/escape.py", "outside the workspace"),
    ]:
        out, err = call(tools, "write_file", {"path": bad, "content": "x"})
        assert err and msg in out, out
    assert not (box.root.parent / "escape.py").exists()


def test_run_reports_exit_code_output_and_limits(tools: dict) -> None:
    out, err = call(tools, "run", {"command": "python test_calc.py"})
    assert not err  # a failing command is an observation, not a tool error
    assert out.startswith("exit code 1 (")
    assert "AssertionError: add is wrong" in out
    out, _ = call(tools, "run", {"command": "echo hi; echo oops >&2"})
    assert out.splitlines()[1:] == ["--- stdout ---", "hi", "--- stderr ---", "oops"]
    out, _ = call(tools, "run", {"command": "sleep 5", "timeout_s": 0.5})
    assert out.startswith("timed out") and "wall-clock limit of 0.5s" in out
    out, err = call(tools, "run", {"command": "true", "timeout_s": -1})
    assert err and "greater than 0" in out
    out, err = call(tools, "run", {"cmd": "ls"})
    assert err and "command: Field required" in out


def test_finishing_tools_validate_their_arguments(tools: dict) -> None:
    assert call(tools, "submit", {}) == ("submitted", False)
    assert call(tools, "report_impossible", {"reason": "spec contradicts the tests"}) == (
        "reported as impossible",
        False,
    )
    out, err = call(tools, "report_impossible", {"reason": ""})
    assert err and "reason" in out


def test_long_listings_and_huge_files_are_bounded(tools: dict, box: Sandbox, monkeypatch) -> None:
    (box.root / "many").mkdir()
    for i in range(600):
        (box.root / "many" / f"f{i:03d}").write_text("")
    out, err = call(tools, "list_files", {"path": "many"})
    assert not err and out.splitlines()[0] == "many/f000"
    assert out.splitlines()[-1] == "[... 100 more entries not shown ...]"
    monkeypatch.setattr("verigap.agents._tools.MAX_WALKED", 50)
    out, _ = call(tools, "list_files", {})
    assert out.endswith("[... listing stopped: too many entries; list a subdirectory ...]")
    (box.root / "big.bin").write_bytes(b"x" * (10 * 1024 * 1024 + 1))
    out, err = call(tools, "read_file", {"path": "big.bin"})
    assert err and "larger than 10 MB" in out


def test_a_planted_fifo_is_refused_instead_of_hanging(tools: dict, box: Sandbox) -> None:
    assert box.exec("mkfifo trap").ok
    for name, args in [
        ("read_file", {"path": "trap"}),
        ("edit_file", {"path": "trap", "old": "a", "new": "b"}),
        ("write_file", {"path": "trap", "content": "x"}),
    ]:
        out, err = call(tools, name, args)
        assert err and "not a regular file" in out, (name, out)
    with pytest.raises(ValueError, match="not a regular file"):
        box.read_file("trap")
