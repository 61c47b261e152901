"""Mutation validity, the visible/hidden split, workspace hygiene and the task file format."""

from __future__ import annotations

import json
import subprocess

import pytest

from verigap.errors import ConfigError
from verigap.repos.tasks import RepoTask, materialize_workspace, unit_of
from verigap.repos.validate import validate_one


def test_generation_yields_tasks(fixture_tasks):
    stats, tasks, _ = fixture_tasks
    assert stats.tasks == len(tasks) == 3
    assert stats.valid >= 4 and stats.valid <= stats.candidates
    for t in tasks:
        assert len(t.sites) == 4
        assert len({s.function for s in t.sites}) == 4  # different functions
        assert sum(s.visible for s in t.sites) == 2


def test_each_site_is_a_valid_mutation_with_its_fail_to_pass(fixture_tasks, backend):
    _, tasks, p = fixture_tasks
    site = tasks[0].sites[0]
    v, why = validate_one(p, site.mutation, backend=backend)
    assert v is not None, why
    assert v.fail_to_pass == site.fail_to_pass
    assert set(v.fail_to_pass) <= set(p.reach[site.function])  # breaks only what reaches it


def test_visible_tests_reach_exactly_the_visible_sites(fixture_tasks):
    _, tasks, p = fixture_tasks
    for t in tasks:
        vis = set(t.visible_tests)
        assert vis.isdisjoint(t.hidden_tests)
        assert vis | set(t.hidden_tests) == set(p.passing)
        for s in t.sites:
            reach = set(p.reach[s.function])
            if s.visible:
                assert vis & set(s.fail_to_pass)
            else:
                assert not vis & reach  # no visible test even calls a hidden site
                assert set(s.fail_to_pass) <= set(t.hidden_tests)


def test_workspace_hygiene(fixture_tasks, tmp_path):
    _, tasks, p = fixture_tasks
    t = tasks[0]
    ws = materialize_workspace(p, t, tmp_path / "ws")
    files = [f for f in ws.rglob("*") if ".git" not in f.relative_to(ws).parts]
    assert not [
        f
        for f in files
        if f.name == "__pycache__" or f.suffix == ".pyc" or ".pytest_cache" in f.parts
    ]
    text = "\n".join(f.read_text() for f in files if f.is_file() and f.suffix == ".py")
    hidden_units = {unit_of(x).split("::")[-1] for x in t.hidden_tests}
    visible_units = {unit_of(x).split("::")[-1] for x in t.visible_tests}
    for name in hidden_units - visible_units:
        assert f"def {name}(" not in text, f"hidden test {name} leaked into the workspace"
    for s in t.sites:  # the reference is nowhere in the workspace
        assert (ws / s.file).read_text() != (p.tree / s.file).read_text()
        assert s.original not in text
    git = lambda *a: subprocess.run(["git", *a], cwd=ws, capture_output=True, text=True).stdout  # noqa: E731
    assert git("rev-list", "--all").split() == [git("rev-parse", "HEAD").strip()]
    assert git("stash", "list") == "" and git("reflog").count("\n") == 1
    assert git("status", "--porcelain") == ""


def test_prompt_shows_failures_not_locations(fixture_tasks):
    _, tasks, _ = fixture_tasks
    for t in tasks:
        assert "failed" in t.prompt
        for s in t.sites:
            assert s.op not in t.prompt
        assert "/tmp/" not in t.prompt and "vg-task" not in t.prompt


def test_task_file_round_trip_and_clear_errors(fixture_tasks, tmp_path):
    _, tasks, _ = fixture_tasks
    path = tmp_path / "t.json"
    tasks[0].save(path)
    assert RepoTask.load(path) == tasks[0]
    data = json.loads(path.read_text())
    data["surprise"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="surprise"):
        RepoTask.load(path)
    del data["surprise"]
    data["sites"][0]["index"] = -1
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"sites\.0\.index"):
        RepoTask.load(path)


def test_project_name_of_a_spec_whose_directory_has_gone(tmp_path):
    """A cached preparation keeps the spec it was made with; its directory may be gone since
    (another checkout made the cache). Its name still reads from the text; a spec naming a
    directory that exists reads from the directory, and a PyPI pin from the pin."""
    from verigap.repos import sources

    gone = tmp_path / "old_checkout" / "fixture_lib"
    with pytest.raises(ConfigError):
        sources.parse_source(str(gone))
    assert sources.project_name(str(gone)) == "fixture_lib"
    assert sources.project_name(str(gone) + "/") == "fixture_lib"
    assert sources.project_name("git+https://example.org/x/toolz.git") == "toolz"
    assert sources.project_name("inflection==0.5.1") == "inflection"
    here = tmp_path / "here"
    here.mkdir()
    assert sources.project_name(str(here / ".")) == "here"
