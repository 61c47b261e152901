"""The CLI's shared contract: every command's help has an example, one error path, --json."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from verigap.cli import app
from verigap.errors import ConfigError


def _leaf_commands() -> list[tuple[str, ...]]:
    root = typer.main.get_command(app)
    out = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "commands"):  # a group (typer vendors its own click)
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        else:
            out.append(path)

    walk(root, ())
    return out


COMMANDS = _leaf_commands()


def test_the_walk_finds_every_family() -> None:
    tops = {c[0] for c in COMMANDS}
    assert {
        "pilot",
        "report",
        "docs",
        "site",
        "patchworld",
        "repos",
        "redteam",
        "silentbug",
        "sandbox",
    } <= tops
    assert len(COMMANDS) >= 15


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_help_shows_an_example(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Example: verigap " + " ".join(command) in text, (
        f"`verigap {' '.join(command)} --help` shows no example: end the command's docstring "
        f"with a line 'Example: verigap {' '.join(command)} ...'"
    )


def test_a_verigap_error_from_any_command_is_one_line_on_stderr_exit_2() -> None:
    result = CliRunner().invoke(app, ["patchworld", "rollout", "--policy", "nope", "--n", "10"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: unknown policy 'nope'; choose one of careless")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_the_root_catches_errors_raised_by_library_code(monkeypatch) -> None:
    import verigap.report.pilot as pilot_mod

    def boom(runs_dir):
        raise ConfigError("runs/x is not a directory; pass the folder `verigap pilot` wrote")

    monkeypatch.setattr(pilot_mod, "load_runs", boom)
    result = CliRunner().invoke(app, ["report", "runs/x", "--json"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: runs/x is not a directory; pass the folder `verigap pilot` wrote\n"
    )


def test_a_missing_optional_package_names_the_extra_to_install(monkeypatch) -> None:
    import verigap.report.docs as docs_mod

    def needs_libcst(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'libcst'", name="libcst")

    monkeypatch.setattr(docs_mod, "sync", needs_libcst)
    result = CliRunner().invoke(app, ["docs", "--check"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith("error: this command needs the Python package 'libcst'")
    assert "pip install -e '.[repos]'" in result.stderr and result.stderr.count("\n") == 1


def test_a_bad_option_value_is_bad_input() -> None:
    result = CliRunner().invoke(app, ["patchworld", "show", "--k", "99"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")


def test_usage_errors_exit_2_as_well() -> None:
    result = CliRunner().invoke(app, ["patchworld", "rollout", "--n", "many"])
    assert result.exit_code == 2


def test_rollout_json_and_saved_result_agree(tmp_path) -> None:
    from verigap.results import read_meta, read_result

    path = tmp_path / "careless.json"
    result = CliRunner().invoke(
        app, ["patchworld", "rollout", "--n", "200", "--json", "--save", str(path)]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert read_result(path) == printed
    assert 0 < printed["false_success"] < printed["visible_pass"]
    assert read_meta(path)["command"] == (
        f"verigap patchworld rollout --policy careless --n 200 --k 4 --seed 0 --reward visible "
        f"--save {path}"
    )


def test_sandbox_check_prints_json(monkeypatch) -> None:
    import verigap.sandbox._check as check_mod
    from verigap.sandbox import Check

    monkeypatch.setattr(
        check_mod,
        "self_check",
        lambda backend: [Check("a", True, "fine"), Check("b", False, "leaked")],
    )
    result = CliRunner().invoke(app, ["sandbox", "check", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == [
        {"check": "a", "passed": True, "seen": "fine"},
        {"check": "b", "passed": False, "seen": "leaked"},
    ]
