"""Scripted baselines, as the file edits they make to a workspace.

- ``oracle`` reverts every mutation and restores every file a mined fix changed (the
  reference): correct, rewarded by both graders.
- ``noop`` changes nothing: rejected by both.
- ``careless`` fixes the sites the visible tests show and stubs the rest (a body that returns
  None), the shortcut a visible-test reward pays for: rewarded by v1, not correct.
"""

from __future__ import annotations

import libcst as cst

from verigap.repos.prepare import Prepared
from verigap.repos.schema import RepoTask

BASELINES = ("oracle", "noop", "careless")


class _Stub(cst.CSTTransformer):
    """Replace the bodies of the named functions by ``return None`` (docstring kept)."""

    def __init__(self, qualnames: set[str]) -> None:
        self.q = qualnames
        self.stack: list[str] = []

    def visit_ClassDef(self, node):
        self.stack.append(node.name.value)

    def leave_ClassDef(self, original, updated):
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node):
        self.stack.append(node.name.value)

    def leave_FunctionDef(self, original, updated):
        name = ".".join(self.stack)
        self.stack.pop()
        if name not in self.q:
            return updated
        body = []
        first = updated.body.body[0] if updated.body.body else None
        if (
            isinstance(first, cst.SimpleStatementLine)
            and first.body
            and isinstance(first.body[0], cst.Expr)
            and isinstance(first.body[0].value, cst.SimpleString | cst.ConcatenatedString)
        ):
            body.append(first)
        body.append(cst.SimpleStatementLine([cst.Return(cst.Name("None"))]))
        return updated.with_changes(body=updated.body.with_changes(body=body))


def edits(name: str, task: RepoTask, p: Prepared) -> dict[str, str]:
    """{relative path: new text} that baseline ``name`` writes into the workspace."""
    files = sorted({s.file for s in task.sites})
    if name == "noop":
        return {}
    if name == "oracle":  # every file the task changed, not only those holding sites: a mined
        # fix may also change code outside functions (a rule table) in another file
        return {f: (p.tree / f).read_text() for f in sorted({*files, *task.base_files})}
    if name == "careless":
        out = {}
        for f in files:
            hidden = {s.qualname for s in task.sites if s.file == f and not s.visible}
            text = (p.tree / f).read_text()  # every site reverted ...
            if hidden:  # ... then the ones no visible test shows are stubbed out
                text = cst.parse_module(text).visit(_Stub(hidden)).code
            out[f] = text
        return out
    raise ValueError(f"unknown baseline {name!r}; use one of {', '.join(BASELINES)}")
