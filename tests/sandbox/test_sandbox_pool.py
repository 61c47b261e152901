"""WorkspacePool and discard: workspaces made ahead and deleted behind, still private copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.sandbox import WorkspacePool, discard, make_sandbox, wait_discarded
from verigap.sandbox._pool import TRASH, fingerprint

from .conftest import HAVE_BWRAP


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_pooled_workspaces_are_private_copies(src_tree: Path, tmp_path: Path) -> None:
    (src_tree / "link").symlink_to("README.txt")
    with WorkspacePool(src_tree, tmp_path / "pool", size=2) as pool:
        assert pool.wait_ready(timeout=60)
        a = pool.take(tmp_path / "a")
        b = pool.take(tmp_path / "b")
        assert pool.stats.copied_on_the_spot == 0  # both came ready-made
        assert _tree(a) == _tree(src_tree) == _tree(b)
        assert os.readlink(a / "link") == "README.txt"
        assert (a / "pkg" / "calc.py").stat().st_mode == (
            src_tree / "pkg" / "calc.py"
        ).stat().st_mode
        # in-place writes, truncation and deletion stay in their own workspace
        with open(a / "README.txt", "r+") as fh:
            fh.write("HACKED")
        (a / "pkg" / "calc.py").write_text("x = 1\n")
        (a / ".hidden").unlink()
        assert (src_tree / "README.txt").read_text() == "hello\n"
        assert (b / "README.txt").read_text() == "hello\n"
        assert "a - b" in (b / "pkg" / "calc.py").read_text()
        assert (b / ".hidden").exists() and (src_tree / ".hidden").exists()
        for rel in ("README.txt", "pkg/calc.py"):
            inodes = {os.stat(d / rel).st_ino for d in (src_tree, a, b)}
            assert len(inodes) == 3  # no hard link to the source or to each other
            assert os.stat(b / rel).st_nlink == 1
        # the next copies for later takes: made again in the background
        assert pool.wait_ready(timeout=60)
        c = pool.take(tmp_path / "c")
        assert _tree(c) == _tree(src_tree)
    assert not any((tmp_path / "pool").glob("ready-*"))  # close() discards what was left
    assert wait_discarded(timeout=60)


def test_a_copy_of_an_older_source_is_never_handed_out(src_tree: Path, tmp_path: Path) -> None:
    with WorkspacePool(src_tree, tmp_path / "pool", size=1) as pool:
        assert pool.wait_ready(timeout=60)
        before = fingerprint(src_tree)
        (src_tree / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        assert fingerprint(src_tree) != before
        ws = pool.take(tmp_path / "ws")
        assert "a + b" in (ws / "pkg" / "calc.py").read_text()
        assert pool.stats.stale_dropped == 1 and pool.stats.copied_on_the_spot == 1


def test_take_refuses_a_used_destination_and_pool_checks_its_paths(
    src_tree: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="inside the source"):
        WorkspacePool(src_tree, src_tree / "pool")
    with WorkspacePool(src_tree, tmp_path / "pool", size=1) as pool:
        (tmp_path / "used").mkdir()
        (tmp_path / "used" / "f").write_text("mine")
        with pytest.raises(ConfigError, match="not an empty directory"):
            pool.take(tmp_path / "used")
        assert (tmp_path / "used" / "f").read_text() == "mine"
        (tmp_path / "empty").mkdir()
        assert (pool.take(tmp_path / "empty") / "README.txt").read_text() == "hello\n"
    with pytest.raises(ConfigError, match="closed"):
        pool.take(tmp_path / "late")


def test_discard_frees_the_name_at_once_and_deletes_in_the_background(tmp_path: Path) -> None:
    tree = tmp_path / "episode-1"
    (tree / "deep" / "er").mkdir(parents=True)
    (tree / "deep" / "er" / "f.txt").write_text("x")
    (tree / "link").symlink_to(tmp_path / "keep.txt")
    (tmp_path / "keep.txt").write_text("outside")
    discard(tree)
    assert not tree.exists()  # the path is free for the next episode right away
    tree.mkdir()
    assert wait_discarded(timeout=60)
    assert not (tmp_path / TRASH).exists()  # the trash is gone once empty
    assert tree.is_dir()  # the new tree of the same name is untouched
    assert (tmp_path / "keep.txt").read_text() == "outside"  # a link is not followed
    discard(tmp_path / "never-was")  # nothing to do


@pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap (bwrap) is not installed")
def test_sandboxes_over_pooled_workspaces_do_not_see_each_others_writes(
    src_tree: Path, tmp_path: Path
) -> None:
    with WorkspacePool(src_tree, tmp_path / "pool", size=2) as pool:
        pool.wait_ready(timeout=60)
        boxes = [make_sandbox(pool.take(tmp_path / f"ws{i}")) for i in range(2)]
        try:
            r = boxes[0].exec("echo agent0 > README.txt && echo new > new.txt && cat README.txt")
            assert r.ok and r.stdout == "agent0\n"
            r = boxes[1].exec("cat README.txt; ls new.txt")
            assert r.stdout.startswith("hello\n") and r.returncode != 0
        finally:
            for b in boxes:
                b.close()
    assert (src_tree / "README.txt").read_text() == "hello\n"
    assert not (src_tree / "new.txt").exists()
