"""Mining on a real project's history (the inflection bundle): walking and screening only, no
test runs, so it is fast. Skipped when the bundles (``../shared/repos``) are not there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from verigap.repos.mine import changed_functions, kind_of, screen, walk

BUNDLES = Path(
    os.environ.get(
        "VERIGAP_BUNDLES", Path(__file__).resolve().parents[2].parent / "shared" / "repos"
    )
)
BUNDLE = BUNDLES / "inflection.bundle"


@pytest.fixture(scope="module")
def inflection(tmp_path_factory) -> Path:
    if not BUNDLE.is_file():
        pytest.skip(
            f"{BUNDLE} not found: the git bundles live in ../shared/repos next to the "
            "repository (set VERIGAP_BUNDLES to point elsewhere)"
        )
    dest = tmp_path_factory.mktemp("bundle") / "inflection"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(dest)], check=True)
    return dest


def test_walk_and_screen_inflection(inflection):
    commits = walk(inflection, "HEAD", 1000)
    assert len(commits) == 136  # the bundle's README says 136 commits
    assert sum(len(c.parents) == 0 for c in commits) == 1
    cands = [c for c in commits if not screen(c)]
    assert 5 <= len(cands) < 40
    for c in cands:
        kinds = {kind_of(p) for _, p in c.changes}
        assert {"source", "test"} <= kinds


def test_titleize_commit_has_function_sites(inflection):
    (c,) = [c for c in walk(inflection, "HEAD", 1000) if c.sha.startswith("b6926e888d")]
    assert not screen(c)

    def show(rev: str) -> str:
        return subprocess.run(
            ["git", "show", f"{rev}:inflection.py"],
            cwd=inflection,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    sites = changed_functions(show(c.parents[0]), show(c.sha))
    assert sites == ["titleize"]  # docstring-only edits elsewhere in the file are no sites


def test_docs_table_matches_the_results_file(benchmark_script):
    from verigap.results import read_result

    root = Path(__file__).resolve().parents[2]
    res = root / "results" / "repos" / "mining.json"
    if not res.is_file():
        pytest.skip("results/repos/mining.json not written yet")
    mod = benchmark_script("repos_mining")
    data = read_result(res)
    assert mod.table(data) in (root / "docs" / "mining.md").read_text()
    assert data["summary"]["oracle"] == {"v1": 1.0, "v2": 1.0}
    assert data["summary"]["noop"] == {"v1": 0.0, "v2": 0.0}


TITLEIZE_FIX = "e32443bb7dc1ba91a15336b5baab908d25f4b93a"  # "Fix titleize() capitalizing ..."


@pytest.mark.slow
def test_a_mined_task_from_the_bundle_is_paid_and_leaks_nothing(
    inflection, repo_cache, tmp_path, backend
):
    """The whole pipeline on a real fix: mining keeps the task only after grading its real fix
    (paid by v1 and v2, the no-op by neither), and its workspace imports the project from the
    workspace only, carries one modification time, and runs the shown test command."""
    from verigap.repos import execution
    from verigap.repos.mine import mine
    from verigap.repos.shown_command import shown_command_failures
    from verigap.repos.tasks import (
        WORKSPACE_MTIME,
        load_tasks,
        materialize_workspace,
        prepared_for,
    )
    from verigap.sandbox import Limits, make_sandbox

    stats = mine(
        inflection,
        tmp_path / "t",
        rev_range=f"{TITLEIZE_FIX}^..{TITLEIZE_FIX}",
        env="current",
        backend=backend,
        log=lambda s: None,
    )
    assert stats.tasks == 1, stats.rejected
    (t,) = load_tasks(tmp_path / "t")
    assert "paid by v1 and v2" in t.origin["checked"] and t.origin["change"] == "fix"
    assert all(s.discrimination in ("comparison", "forwarded") for s in t.sites)
    p = prepared_for(t, backend=backend)
    ws = materialize_workspace(p, t, tmp_path / "ws")
    assert {f.lstat().st_mtime for f in [ws, *ws.rglob("*")]} == {WORKSPACE_MTIME}
    m = execution.Mounts({Path(p.env_prefix): execution.ENV_MOUNT}, backend)
    box = make_sandbox(
        ws,
        backend=m.backend,
        limits=Limits(wall_s=60.0),
        ro_mounts=m.binds if m.neutral else None,
        ro_binds=[] if m.neutral else [Path(p.env_prefix)],
    )
    try:
        r = box.exec(
            [m.inside(p.python), "-c", "import inflection; print(inflection.__file__)"], timeout=60
        )
    finally:
        box.close()
    where = r.stdout.strip()
    assert where.endswith("/inflection.py") and "site-packages" not in where, where
    assert where.startswith(("/workspace", str(ws))), where
    rc, failing, _ = shown_command_failures(p, ws, backend=backend)
    assert rc == 1 and failing == set(t.fail_to_pass) & set(t.visible_tests)
