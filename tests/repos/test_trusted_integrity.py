"""What grading trusts is checked on use: the prepared reference tree against the
hash recorded when it was prepared, the sealed channel's trusted tree against the decorated
reference, and the reference's cached equivalence answers against their digest. A tampered
one is refused with IntegrityError, never used. Each test changes one file, sees the refusal,
puts the file back and sees it accepted again (the control)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from verigap.errors import IntegrityError
from verigap.repos import equivalence, forward
from verigap.repos.graders import v2
from verigap.repos.redteam.tests_only import as_tests_only
from verigap.repos.tasks import materialize_workspace

SITE = "textkit/wrap.py::wrap"  # a visible site of the fixture's first task


@pytest.fixture
def site(fixture_tasks):
    _stats, tasks, p = fixture_tasks
    return next(s for s in tasks[0].sites if s.function == SITE), tasks[0], p


def _edited(path: Path, text: str):
    """Append ``text`` to ``path``; returns a function that puts the file back."""
    old = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(old + text.encode())
    return lambda: path.write_bytes(old)


def test_a_tampered_trusted_tree_is_refused(site):
    s, _task, p = site
    tree = forward.trusted_tree(p, [s])
    f = tree / "textkit" / "wrap.py"
    assert forward.DECORATOR.format(target=SITE) in f.read_text()
    undo = _edited(f, "\nwrap = lambda *a, **k: 'forged'\n")
    try:
        with pytest.raises(IntegrityError, match="trusted tree .* does not match"):
            forward.trusted_tree(p, [s])
    finally:
        undo()
    assert forward.trusted_tree(p, [s]) == tree  # the control: as built, it is accepted
    # bytecode Python would load instead of the source is refused too
    pyc = tree / "textkit" / "__pycache__" / "wrap.cpython-311.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"planted")
    try:
        with pytest.raises(IntegrityError, match="__pycache__"):
            forward.trusted_tree(p, [s])
    finally:
        shutil.rmtree(pyc.parent)
    assert forward.trusted_tree(p, [s]) == tree


def test_a_changed_prepared_reference_is_refused(site):
    s, _task, p = site
    assert p.reference_hash() == p.tree_sha256
    undo = _edited(p.tree / "textkit" / "wrap.py", "\n# changed after prepare\n")
    try:
        with pytest.raises(IntegrityError, match="prepare it again"):
            forward.trusted_tree(p, [s])
        with pytest.raises(IntegrityError, match="prepared reference tree"):
            equivalence.check(p, p.tree, p.tree, [])
    finally:
        undo()
    assert p.reference_hash() == p.tree_sha256


def test_tampered_cached_reference_answers_are_refused(site, tmp_path):
    _s, task, p = site
    inputs = [x.model_dump() for x in task.equivalence][:1]
    path = equivalence._ref_path(p.tree_sha256, inputs, "plain")
    answers = {str(inputs[0]["id"]): ["ok", ["int", 3], None]}
    equivalence._store(path, answers)
    try:
        assert equivalence._cached(path) == answers
        sealed = json.loads(path.read_text())
        sealed["results"][str(inputs[0]["id"])] = ["ok", ["int", 4], None]
        path.write_text(json.dumps(sealed))
        with pytest.raises(IntegrityError, match="do not match their digest"):
            equivalence.check(p, p.tree, p.tree, inputs, contexts=("plain",))
        # answers moved from another key's file do not match this key either
        other = tmp_path / "other.json"
        equivalence._store(other, answers)
        shutil.copy(other, path)
        with pytest.raises(IntegrityError):
            equivalence._cached(path)
        path.write_text(json.dumps(answers))  # an older verigap's file: computed again
        assert equivalence._cached(path) is None
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_grading_a_tests_only_task_refuses_a_tampered_trusted_tree(site, tmp_path, backend):
    """The refusal reaches the grader's caller as an error; no verdict is made from it."""
    s, task, p = site
    task = as_tests_only(task, {SITE})
    carried = [x for x in task.sites if x.tests_only]
    tree = forward.trusted_tree(p, carried)
    ws = materialize_workspace(p, task, tmp_path / "ws")
    undo = _edited(tree / "textkit" / "wrap.py", "\n# tampered\n")
    try:
        with pytest.raises(IntegrityError):
            v2.evaluate(task, ws, prepared=p, backend=backend)
    finally:
        undo()
