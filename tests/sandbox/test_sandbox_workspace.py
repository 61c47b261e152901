import os
from pathlib import Path

import pytest

from verigap.errors import ConfigError
from verigap.sandbox import PathOutsideWorkspace, materialize
from verigap.sandbox._workspace import resolve_inside


def test_materialize_copies_everything_and_edits_never_reach_the_source(
    src_tree: Path, tmp_path: Path
) -> None:
    (src_tree / "link").symlink_to("README.txt")
    ws = materialize(src_tree, tmp_path / "ws")
    assert (ws / "pkg" / "calc.py").read_text() == (src_tree / "pkg" / "calc.py").read_text()
    assert (ws / ".hidden").read_text() == "dot\n"
    assert os.readlink(ws / "link") == "README.txt"  # copied as a link, not followed
    # In-place writes (r+), truncating writes and deletes all stay in the copy.
    with open(ws / "README.txt", "r+") as fh:
        fh.write("HACKED")
    (ws / "pkg" / "calc.py").write_text("x = 1\n")
    (ws / ".hidden").unlink()
    assert (src_tree / "README.txt").read_text() == "hello\n"
    assert "a - b" in (src_tree / "pkg" / "calc.py").read_text()
    assert (src_tree / ".hidden").exists()
    assert os.stat(ws / "pkg" / "calc.py").st_ino != os.stat(src_tree / "pkg" / "calc.py").st_ino


def test_materialize_accepts_an_empty_existing_dir(src_tree: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    ws = materialize(src_tree, tmp_path / "empty")
    assert (ws / "README.txt").exists()


@pytest.mark.parametrize("case", ["missing_source", "nonempty_dest", "dest_inside_source"])
def test_materialize_refuses_bad_paths(src_tree: Path, tmp_path: Path, case: str) -> None:
    source, dest = src_tree, tmp_path / "ws"
    if case == "missing_source":
        source = tmp_path / "nope"
    elif case == "nonempty_dest":
        dest.mkdir()
        (dest / "f").write_text("x")
    else:
        dest = src_tree / "copy"
    with pytest.raises(ConfigError, match="materialize"):
        materialize(source, dest)


def test_resolve_inside_accepts_relative_and_aliased_paths(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    assert resolve_inside(root, "a/b.txt") == (root / "a" / "b.txt").resolve()
    assert resolve_inside(root, "a/../c") == (root / "c").resolve()
    assert (
        resolve_inside(root, "/workspace/a/x", aliases=("/workspace",))
        == (root / "a" / "x").resolve()
    )
    assert resolve_inside(root, str(root / "a")) == (root / "a").resolve()
    assert resolve_inside(root, ".") == root.resolve()


@pytest.mark.parametrize("bad", ["../x", "a/../../x", "/etc/passwd", "/workspacex/a", "", "a\x00b"])
def test_resolve_inside_refuses_escapes(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "ws"
    (root / "a").mkdir(parents=True)
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(root, bad, aliases=("/workspace",))


def test_resolve_inside_refuses_a_symlink_that_points_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret").write_text("s")
    (root / "out").symlink_to(tmp_path)
    (root / "in").symlink_to(".")
    with pytest.raises(PathOutsideWorkspace):
        resolve_inside(root, "out/secret")
    assert resolve_inside(root, "in/x") == (root / "x").resolve()
