"""Feature tasks from the to-do web app: candidates, tickets, the verdict rule, the browser in
the sandbox, and (slow) real grading with controls that must fail."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.repos.webfeatures import build
from verigap.repos.webfeatures.task import FeatureTask

TASKS = sorted((build.DATA / "tasks").glob("*.json"))
HAVE_BWRAP = shutil.which("bwrap") is not None
HAVE_BROWSER = Path(build.CHROMEDRIVER_PATH).is_file() and any(
    Path(p).is_file() for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
)
needs_sandbox = pytest.mark.skipif(not HAVE_BWRAP, reason="needs bubblewrap (apt bubblewrap)")
needs_browser = pytest.mark.skipif(
    not HAVE_BROWSER, reason="needs chromium and chromium-driver (apt)"
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build.open_bundle("flask-todolist", tmp_path_factory.mktemp("bundle"))


def _task(prefix: str) -> FeatureTask:
    found = [FeatureTask.load(p) for p in TASKS if p.stem.endswith(prefix)]
    if not found:
        pytest.fail(
            f"no committed task for {prefix}; run `python -m verigap.repos.webfeatures build`"
        )
    return found[0]


def test_candidates_are_commits_that_change_the_app_and_its_tests(repo: Path) -> None:
    cands = {c.sha[:7]: c for c in build.candidates(repo)}
    assert "aa07ecf" in cands and "0c426c4" in cands
    assert "6806140" not in cands  # a docs-only commit
    edit = cands["aa07ecf"]
    assert edit.test_files == ["tests/test_app.py"]
    assert build.layers_of(repo, edit.sha, edit.changed_files) == ["database", "frontend", "http"]
    clear = cands["0c426c4"]
    assert build.layers_of(repo, clear.sha, clear.changed_files) == ["frontend", "http"]


def test_an_unknown_project_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known projects: \\['flask-todolist'\\]"):
        build.bundle_path("nope")


def test_the_interface_notes_list_the_requests_the_chosen_tests_make() -> None:
    text = textwrap.dedent(
        """
        def _save(client):
            return client.post("/prefs", data={"theme": "dark"})

        def test_one(client):
            client.post("/edit/1", data={"title": "x", "category_id": "2"})
            client.get(f"/items/{item_id}?when=today")
            _save(client)

        def test_other(client):
            client.post("/secret")
        """
    )
    notes = build.interface({"tests/test_a.py": text}, ["tests/test_a.py::test_one"])
    assert notes == [
        "- GET /items/<id>",
        "- POST /edit/1 (form fields: category_id, title)",
        "- POST /prefs (form fields: theme)",  # made by a helper the test calls
    ]


def test_the_ticket_lists_only_imported_names_the_base_lacks(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("from flask import Flask\ndb = object()\n")
    (tmp_path / "app" / "models.py").write_text("class Todo:\n    pass\n")
    (tmp_path / "app" / "tz.py").write_text("")
    hidden = {
        "tests/conftest.py": "from app import create_app, db\nfrom app.models import (\n"
        "    Category,\n    Todo,\n)\nfrom app.models import User\nfrom app import tz\n"
    }
    names = build.new_names(hidden, tmp_path)
    assert names == ["app.create_app", "app.models.Category", "app.models.User"]
    ticket = build.full_ticket("Title: x", hidden, [], names)
    assert "- app.models.User" in ticket and "Todo" not in ticket


def _toy_task(**kw: object) -> FeatureTask:
    base = dict(
        task_id="t",
        project="flask-todolist",
        base="a" * 40,
        reference="b" * 40,
        subject="s",
        ticket="t",
        layers=["http"],
        changed_files=["app/routes.py"],
        hidden_files={"tests/test_x.py": ""},
        fail_to_pass=["tests/test_x.py::test_new"],
        pass_to_pass=["tests/test_x.py::test_old"],
        visible_tests=["tests/test_x.py::test_old"],
    )
    return FeatureTask(**{**base, **kw})


def test_the_verdict_pays_only_when_every_hidden_test_passes() -> None:
    task = _toy_task()
    both = {"tests/test_x.py::test_new": "PASSED", "tests/test_x.py::test_old": "PASSED"}
    assert build.verdict_from(task, both).reward == 1.0
    old_only = {"tests/test_x.py::test_old": "PASSED", "tests/test_x.py::test_new": "FAILED"}
    empty = build.verdict_from(task, old_only, {"tests/test_x.py::test_old": "PASSED"})
    assert empty.reward == 0.0 and not empty.correct
    assert empty.false_success  # the visible tests pass on a submission that adds nothing
    broke_old = {"tests/test_x.py::test_new": "PASSED", "tests/test_x.py::test_old": "FAILED"}
    assert build.verdict_from(task, broke_old).reward == 0.0


def test_a_failed_browser_check_is_reported_and_unpaid() -> None:
    task = _toy_task(
        browser_check="tests/test_browser_x.py",
        hidden_files={"tests/test_x.py": "", "tests/test_browser_x.py": ""},
        fail_to_pass=["tests/test_x.py::test_new", "tests/test_browser_x.py::test_sees"],
    )
    outcomes = {
        "tests/test_x.py::test_new": "PASSED",
        "tests/test_x.py::test_old": "PASSED",
        "tests/test_browser_x.py::test_sees": "FAILED",
    }
    v = build.verdict_from(task, outcomes)
    assert v.checks["browser"] is False and v.reward == 0.0


def test_a_broken_task_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"task_id": 3}')
    with pytest.raises(ConfigError, match="rebuild it with"):
        FeatureTask.load(bad)


@pytest.mark.parametrize("path", TASKS, ids=[p.stem for p in TASKS])
def test_every_committed_task_is_whole_and_its_ticket_names_no_code(path: Path) -> None:
    task = FeatureTask.load(path)
    assert task.fail_to_pass and set(task.fail_to_pass).isdisjoint(task.pass_to_pass)
    assert all(t.split("::")[0] in task.hidden_files for t in task.hidden_tests)
    for f in task.changed_files:  # the ticket says what, never where
        if f.endswith(".py"):
            assert Path(f).name not in task.ticket
    if task.browser_check:
        assert any(t.startswith(task.browser_check) for t in task.fail_to_pass)


def test_the_committed_set_has_features_across_all_three_layers_with_browser_checks() -> None:
    tasks = [FeatureTask.load(p) for p in TASKS]
    full = [t for t in tasks if set(t.layers) == {"database", "http", "frontend"}]
    assert len(full) >= 3
    assert sum(t.browser_check is not None for t in full) >= 2


def test_the_workspace_holds_no_history_and_no_hidden_test(repo: Path, tmp_path: Path) -> None:
    task = _task("aa07ecfb")
    ws = build.export(repo, task.base, tmp_path / "ws")
    assert not (ws / ".git").exists()
    assert "def test_edit_todo_title" not in (ws / "tests" / "test_app.py").read_text()


@needs_sandbox
@needs_browser
def test_the_browser_harness_sees_a_page_inside_the_sandbox(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    shutil.copyfile(build.HARNESS, tree / build.HARNESS_AS)
    (tree / "tests" / "test_page.py").write_text(
        textwrap.dedent(
            """
            from _verigap_browser import browser, serve, visible_text

            def app(environ, start_response):
                start_response("200 OK", [("Content-Type", "text/html")])
                return [b"<p>Hello <span id=n></span></p>"
                        b"<script>document.getElementById('n').textContent = 'reader'</script>"]

            def test_sees_what_the_script_wrote():
                with serve(app) as base, browser() as driver:
                    driver.get(base)
                    assert "Hello reader" in visible_text(driver)

            def test_control_a_missing_text_fails():
                with serve(app) as base, browser() as driver:
                    driver.get(base)
                    assert "Goodbye" in visible_text(driver)
            """
        )
    )
    out = build.run_tests(tree, ["tests/test_page.py"])
    assert out == {
        "tests/test_page.py::test_sees_what_the_script_wrote": "PASSED",
        "tests/test_page.py::test_control_a_missing_text_fails": "FAILED",
    }


def _sloppy_edit(ws: Path) -> None:
    """The edit route and model change without the page's edit form (no frontend)."""
    index = ws / "app" / "templates" / "index.html"
    text = index.read_text()
    start = text.index("<form action=\"{{ url_for('main.edit'")
    end = text.index("</form>", start) + len("</form>")
    index.write_text(text[:start] + "<span>{{ todo.title }}</span>" + text[end:])


@pytest.mark.slow
@needs_sandbox
@needs_browser
def test_grading_pays_the_real_change_and_the_browser_catches_a_missing_page(
    repo: Path, tmp_path: Path
) -> None:
    task = _task("aa07ecfb")
    assert task.browser_check and set(task.layers) == {"database", "http", "frontend"}
    ref = build.export(repo, task.base, tmp_path / "ref")
    build.apply_reference(repo, task, ref)
    hidden = build.hidden_outcomes(repo, task, ref)
    assert build.verdict_from(task, hidden).reward == 1.0
    sloppy = build.export(repo, task.base, tmp_path / "sloppy")
    build.apply_reference(repo, task, sloppy)
    _sloppy_edit(sloppy)
    v = build.verdict_from(task, build.hidden_outcomes(repo, task, sloppy))
    unit = [t for t in task.fail_to_pass if not t.startswith(task.browser_check)]
    assert v.reward == 0.0 and v.checks["browser"] is False
    assert all(t not in v.detail["failed"] for t in unit)  # the HTTP tests alone would pay it


@pytest.mark.slow
@needs_sandbox
def test_edited_tests_in_a_submission_do_not_reach_the_grader(repo: Path, tmp_path: Path) -> None:
    task = _task("0c426c41")
    ws = build.export(repo, task.base, tmp_path / "ws")
    (ws / "tests" / "test_app.py").write_text("def test_clear_completed():\n    pass\n")
    v = build.grade(repo, task, ws)
    assert v.reward == 0.0 and "tests/test_app.py::test_clear_completed" in v.detail["failed"]
