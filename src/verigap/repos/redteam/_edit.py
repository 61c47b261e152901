"""Source surgery the exploit agents use to write their edits (libcst, formatting kept).

These helpers only compute the text an exploit writes; the exploit still writes it into the
workspace through the agent's tools, like any model would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

FnEdit = Callable[[cst.FunctionDef], cst.FunctionDef | cst.RemovalSentinel]


class _Functions(cst.CSTTransformer):
    """Apply an edit to every function whose qualname is a key of ``edits``."""

    def __init__(self, edits: dict[str, FnEdit]) -> None:
        self.edits = edits
        self.stack: list[str] = []
        self.done: set[str] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_ClassDef(self, original, updated):
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_FunctionDef(self, original, updated):
        name = ".".join(self.stack)
        self.stack.pop()
        fn = self.edits.get(name)
        if fn is None:
            return updated
        self.done.add(name)
        return fn(updated)


def edit_functions(source: str, edits: dict[str, FnEdit]) -> str:
    """``source`` with each named function replaced by what its edit returns."""
    t = _Functions(edits)
    new = cst.parse_module(source).visit(t)
    missing = set(edits) - t.done
    if missing:
        raise KeyError(f"functions not found: {sorted(missing)}")
    return new.code


def find_function(source: str, qualname: str) -> cst.FunctionDef:
    found: list[cst.FunctionDef] = []

    def grab(fn: cst.FunctionDef) -> cst.FunctionDef:
        found.append(fn)
        return fn

    edit_functions(source, {qualname: grab})
    return found[0]


def statements(code: str) -> list[cst.BaseStatement]:
    """Parse ``code`` (at module indentation) into statements for a function body."""
    return list(cst.parse_module(code).body)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def split_docstring(fn: cst.FunctionDef) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    body = list(fn.body.body)
    if body and _is_docstring(body[0]):
        return body[:1], body[1:]
    return [], body


def prepend(code: str) -> FnEdit:
    """An edit that runs ``code`` first (after the docstring)."""

    def edit(fn: cst.FunctionDef) -> cst.FunctionDef:
        doc, rest = split_docstring(fn)
        return fn.with_changes(body=fn.body.with_changes(body=[*doc, *statements(code), *rest]))

    return edit


def replace_body(code: str) -> FnEdit:
    """An edit that keeps the signature and docstring and replaces the rest by ``code``."""

    def edit(fn: cst.FunctionDef) -> cst.FunctionDef:
        doc, _ = split_docstring(fn)
        return fn.with_changes(body=fn.body.with_changes(body=[*doc, *statements(code)]))

    return edit


def decorate(name: str) -> FnEdit:
    def edit(fn: cst.FunctionDef) -> cst.FunctionDef:
        deco = cst.Decorator(cst.Name(name))
        return fn.with_changes(decorators=[deco, *fn.decorators])

    return edit


def replace_with(node: cst.FunctionDef) -> FnEdit:
    """An edit that swaps the whole function for ``node`` (e.g. the reference's version)."""

    def edit(fn: cst.FunctionDef) -> cst.FunctionDef:
        return node.with_changes(leading_lines=fn.leading_lines)

    return edit


def param_names(fn: cst.FunctionDef) -> list[str] | None:
    """Plain parameter names in order, or None when there are *args / **kwargs."""
    p = fn.params
    if isinstance(p.star_arg, cst.Param) or p.star_kwarg is not None:
        return None
    return [x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)]


def insert_top(source: str, code: str) -> str:
    """``code`` inserted after the module docstring and ``from __future__`` imports."""
    mod = cst.parse_module(source)
    body = list(mod.body)
    i = 0
    if body and _is_docstring(body[0]):
        i = 1
    while (
        i < len(body)
        and isinstance(body[i], cst.SimpleStatementLine)
        and any(
            isinstance(s, cst.ImportFrom)
            and isinstance(s.module, cst.Name)
            and s.module.value == "__future__"
            for s in body[i].body
        )
    ):
        i += 1
    return mod.with_changes(body=[*body[:i], *statements(code), *body[i:]]).code


def drop_first_if(fn: cst.FunctionDef) -> cst.FunctionDef:
    """Delete the first ``if`` statement of the body (searching nested blocks too)."""

    class _Drop(cst.CSTTransformer):
        def __init__(self) -> None:
            self.done = False

        def leave_If(self, original, updated):
            if self.done:
                return updated
            self.done = True
            return cst.RemoveFromParent()

        def leave_IndentedBlock(self, original, updated):
            if not updated.body:
                return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
            return updated

    t = _Drop()
    doc, rest = split_docstring(fn)
    # visit statement by statement so the outermost first `if` goes, not an inner one
    out: list[cst.BaseStatement] = []
    for s in rest:
        if not t.done and isinstance(s, cst.If):
            t.done = True
            continue
        out.append(s)
    if not t.done:
        out = [s.visit(t) for s in rest]  # type: ignore[misc]
        out = [s for s in out if isinstance(s, cst.BaseStatement)]
    if not out:
        out = [cst.SimpleStatementLine([cst.Pass()])]
    return fn.with_changes(body=fn.body.with_changes(body=[*doc, *out]))


def test_bodies(source: str, units: Iterable[str], code: str) -> str:
    """Replace the bodies of test units (``name`` or ``Class::name``) by ``code``."""
    return edit_functions(source, {u.replace("::", "."): replace_body(code) for u in units})


class _Weaken(cst.CSTTransformer):
    """``assert x`` -> ``assert (x) or True``; ``pytest.raises(...)`` -> suppress anything."""

    def leave_Assert(self, original, updated):
        return updated.with_changes(
            test=cst.BooleanOperation(
                left=cst.parse_expression(f"({cst.Module([]).code_for_node(updated.test)})"),
                operator=cst.Or(),
                right=cst.Name("True"),
            )
        )

    def leave_Call(self, original, updated):
        f = cst.Module([]).code_for_node(updated.func)
        if f in ("pytest.raises", "raises", "pytest.warns"):
            return cst.parse_expression('__import__("contextlib").suppress(BaseException)')
        return updated


def weaken_asserts(source: str) -> str:
    return cst.parse_module(source).visit(_Weaken()).code
