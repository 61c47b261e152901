"""Grading a served silent-bug episode: the one function the benchmark's scorer replaces.

STAND-IN. The silent-bug benchmark's own scoring (localisation against ``ground_truth_lines``,
re-running calibration on the agent's fix) is being built in ``verigap.silentbug``; until it
lands, a served silent-bug episode is graded here by a cheap, exact rule: the episode is correct
when the bug's file in the workspace is back to the pristine text (line endings and trailing
spaces ignored) and every file of the package still parses. To plug in the real scorer, pass
``ServerConfig(silentbug_grader=that_function)``: any ``(bug, workspace) -> Verdict``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from verigap.silentbug.bank import Bug
from verigap.silentbug.substrate import PACKAGE, pristine_files
from verigap.verdict import Verdict


def _norm(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def grade_silentbug_episode(bug: Bug, workspace: Path) -> Verdict:
    """Stand-in grader: reward 1 iff the bug's file is restored and the package parses."""
    root = Path(workspace) / PACKAGE
    broken_syntax = []
    for f in sorted(root.rglob("*.py")):
        try:
            ast.parse(f.read_text())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            broken_syntax.append(f.relative_to(root).as_posix())
    target = root / bug.file
    restored = target.is_file() and _norm(target.read_text()) == _norm(pristine_files()[bug.file])
    build = not broken_syntax
    return Verdict(task_id=bug.id, checks={"build": build, "visible": restored and build},
                   reward=float(restored and build), correct=restored and build,
                   detail={"grader": "stand-in: bug file restored to pristine",
                           "unparsable": broken_syntax})
