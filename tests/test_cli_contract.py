"""One CLI contract, on every leaf command: bad input prints exactly one ``error: ...`` line on
stderr, nothing on stdout, and exits 2 (errors go only through the root). Every leaf must have
an entry in BAD_INPUT, so a new command cannot skip the contract; commands that print a table
take ``--json``; old option spellings stay as hidden aliases that still work."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError

from .test_cli import COMMANDS

#: leaf command -> arguments that are bad input for it (checked before any real work);
#: ``{tmp}`` becomes a fresh temporary directory
BAD_INPUT: dict[str, list[str]] = {
    "pilot": ["--executor", "nope", "--out", "{tmp}/runs"],
    "report": ["/nope/runs"],
    "docs": ["/nope/file.md"],
    "site": ["--results", "/nope/results", "--out", "{tmp}/site"],
    "redteam": ["/nope/tasks", "--out", "{tmp}/rt"],
    "serve": ["--backend", "nope", "--root", "{tmp}/srv"],
    "numerics": ["--env", "extra-argument"],
    "patchworld show": ["--k", "0"],
    "patchworld rollout": ["--policy", "nope"],
    "patchworld probes": ["--registry", "/nope.yaml", "--save", "{tmp}/p.json"],
    "repos prepare": ["/nope/src"],
    "repos make-tasks": ["/nope/src", "--out", "{tmp}/tasks"],
    "repos run": ["/nope/tasks", "--out", "{tmp}/runs"],
    "repos mine": ["/nope/repo", "--out", "{tmp}/tasks"],
    "repos rubric": ["--n", "0", "--out", "{tmp}/r.json"],
    "silentbug list": ["extra-argument"],
    "silentbug ablate": ["--substrate", "nope", "--out", "{tmp}/a.json"],
    "silentbug calibrate": ["--bug", "nope", "--out", "{tmp}/b.json"],
    "silentbug curves": ["--substrate", "nope"],
    "silentbug substrates": ["extra-argument"],
    "silentbug eval": ["--agent", "nope:x", "--out", "{tmp}/ev"],
    "silentbug controls": ["--control", "nope"],
    "silentbug analyze": ["/nope/runs"],
    "sandbox check": ["--backend", "nope"],
    "experiments list": ["--registry", "/nope.yaml"],
    "experiments run": ["NOPE", "--out", "{tmp}/runs", "--save", "{tmp}/v.json"],
    "experiments verdicts": ["--registry", "/nope.yaml"],
    "experiments curves": ["--registry", "/nope.yaml", "--save", "{tmp}/c.json"],
    "experiments rejudge": ["--registry", "/nope.yaml", "--results", "{tmp}/v.json"],
    "monitor export": ["/nope/run", "--out", "{tmp}/t.jsonl"],
    "monitor eval": ["/nope/data.jsonl"],
    "monitor heldout": ["--out", "{tmp}"],
    "monitor leakage": ["/nope/data.jsonl"],
    "monitor summarize": ["/nope/run", "--out", "{tmp}/d.json"],
    "monitor impossible": ["/nope/tasks", "--out", "{tmp}/i.json", "--runs", "{tmp}/r"],
    "monitor trajset": ["/nope/tasks", "--out", "{tmp}/t.jsonl.xz", "--runs", "{tmp}/r"],
    "monitor lofo": ["/nope/data.jsonl", "--out", "{tmp}/l.json"],
    "workplace context": ["--seeds", "x", "--out", "{tmp}/c.json"],
    "workplace rubric": ["--seeds", ",", "--out", "{tmp}/r.json"],
    "workplace local": ["--code", "0", "--probes", "0", "--out", "{tmp}/l.json"],
    "workplace show": ["--project", "nope"],
    "monitor independent": ["--split", "nope", "--out", "{tmp}/i.json"],
    "monitor compare": ["--sample", "-1", "--out", "{tmp}/c.json"],
}

#: commands that print a table (or a long summary) and so must offer --json
JSON_COMMANDS = [
    "pilot",
    "report",
    "docs",
    "site",
    "redteam",
    "patchworld rollout",
    "patchworld probes",
    "repos make-tasks",
    "repos run",
    "repos mine",
    "silentbug list",
    "silentbug ablate",
    "silentbug calibrate",
    "silentbug curves",
    "silentbug substrates",
    "silentbug eval",
    "silentbug controls",
    "silentbug analyze",
    "sandbox check",
    "experiments run",
    "experiments verdicts",
    "monitor heldout",
    "monitor summarize",
    "monitor lofo",
]

NAMES = [" ".join(c) for c in COMMANDS]


def _one_error_line(result, what: str) -> str:
    assert result.exit_code == 2, f"{what}: exit {result.exit_code}\n{result.output}"
    assert result.stdout == "", f"{what}: printed on stdout: {result.stdout!r}"
    assert "Traceback" not in result.stderr, f"{what}: a traceback\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (
        f"{what}: stderr is not one 'error:' line: {result.stderr!r}"
    )
    return lines[0]


def test_every_leaf_command_has_a_bad_input_case() -> None:
    assert sorted(BAD_INPUT) == sorted(NAMES), (
        "give every command a bad-input case in BAD_INPUT (new commands included)"
    )


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_is_one_error_line_on_stderr_exit_2(name: str, tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in BAD_INPUT.get(name, [])]
    result = CliRunner().invoke(app, [*name.split(), *args])
    _one_error_line(result, f"verigap {name} {' '.join(args)}")


@pytest.mark.parametrize("name", NAMES)
def test_an_unknown_option_is_one_error_line_too(name: str) -> None:
    result = CliRunner().invoke(app, [*name.split(), "--no-such-option"])
    line = _one_error_line(result, f"verigap {name} --no-such-option")
    assert "--no-such-option" in line and "--help" in line


def test_a_multi_line_message_is_printed_as_one_line(monkeypatch) -> None:
    import verigap.patchworld.cli as pw

    def boom(*a, **k):
        raise ConfigError("first line\n  second line")

    monkeypatch.setattr(pw, "program_text", boom)
    result = CliRunner().invoke(app, ["patchworld", "show"])
    assert _one_error_line(result, "show") == "error: first line second line"


def test_the_control_fails_on_a_command_that_prints_its_own_error() -> None:
    """Control: a command printing 'error:' to stdout and exiting 2 fails the check."""
    import typer

    rogue = typer.Typer()

    @rogue.command()
    def cmd() -> None:
        print("error: mine")
        raise typer.Exit(2)

    result = CliRunner().invoke(rogue, [])
    with pytest.raises(AssertionError, match="printed on stdout"):
        _one_error_line(result, "rogue")


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_table_commands_take_json(name: str) -> None:
    result = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "--json" in result.output, f"verigap {name}: no --json"


@pytest.mark.parametrize(
    ("name", "old", "new", "args"),
    [
        ("silentbug eval", "--run-dir", "--out", ["--agent", "nope:x"]),
        ("experiments run", "--results", "--save", ["NOPE"]),
        ("pilot", "--results", "--save", ["--executor", "nope"]),
        ("patchworld probes", "--out", "--save", ["--registry", "/nope.yaml"]),
    ],
)
def test_old_spellings_are_hidden_aliases_that_still_work(
    name, old, new, args, tmp_path: Path
) -> None:
    help_text = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"}).output
    assert new in help_text and f"{old} " not in help_text.replace(f"{new} ", "")
    old_way = CliRunner().invoke(app, [*name.split(), *args, old, str(tmp_path / "x")])
    new_way = CliRunner().invoke(app, [*name.split(), *args, new, str(tmp_path / "x")])
    assert _one_error_line(old_way, old) == _one_error_line(new_way, new)
    both = CliRunner().invoke(
        app, [*name.split(), old, str(tmp_path / "a"), new, str(tmp_path / "b")]
    )
    assert both.exit_code == 2


def test_monitor_export_leaves_the_output_alone_on_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    out.write_text("kept\n")
    result = CliRunner().invoke(app, ["monitor", "export", "/nope/run", "--out", str(out)])
    _one_error_line(result, "monitor export")
    assert out.read_text() == "kept\n"


@pytest.mark.parametrize(
    "args",
    [
        ["--independent-split", "nope"],
        ["--independent-split", "test", "--independent-sample", "0"],
        ["--sample", "0", "--heldout-sample", "0", "--drop-final-message"],
    ],
)
def test_monitor_compare_options_reject_bad_input_in_one_line(args, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["monitor", "compare", "--monitor", "builtin", *args, "--out", str(tmp_path / "c.json")],
    )
    _one_error_line(result, f"monitor compare {' '.join(args)}")
    assert not (tmp_path / "c.json").exists()


def test_mine_names_the_kinds_when_given_an_unknown_one(tmp_path: Path) -> None:
    """``repos mine --kind``: a kind that is not one of the task kinds is one error line that
    names the kinds, before any repository is read."""
    result = CliRunner().invoke(
        app, ["repos", "mine", str(tmp_path), "--kind", "features", "--out", str(tmp_path / "t")]
    )
    line = _one_error_line(result, "verigap repos mine --kind features")
    assert "--kind 'features'" in line and "bugfix" in line and "feature " in line
    assert not (tmp_path / "t").exists()
