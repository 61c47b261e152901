"""`verigap workplace`: the data is printable, bad input is one line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from verigap.cli import app


def test_show_prints_the_workplace_as_data():
    result = CliRunner().invoke(app, ["workplace", "show", "--project", "textkit", "--seed", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["project"] == "textkit" and data["seed"] == 2
    assert {t["id"] for t in data["tickets"]} and data["threads"] and data["prs"]


def test_unknown_project_and_bad_seeds_are_one_line_errors():
    result = CliRunner().invoke(app, ["workplace", "show", "--project", "nope"])
    assert result.exit_code == 2 and result.stderr.startswith("error: unknown project 'nope'")
    result = CliRunner().invoke(app, ["workplace", "context", "--seeds", "a,b"])
    assert result.exit_code == 2 and "--seeds takes integers" in result.output
