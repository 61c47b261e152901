"""libcst mutation operators: the small, silent bugs a careless edit leaves inside a function.

A mutation is addressed by ``(file, qualname, op, index)``: the index-th place inside that
function where operator ``op`` applies, counted in a fixed (post-order) walk. The address is
all a task file stores; applying it again to the same tree gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import libcst as cst

#: op -> what it does, for humans and docs.
OPERATORS: dict[str, str] = {
    "cmp_flip": "flip a comparison (< vs <=, == vs !=, in vs not in, is vs is not)",
    "bool_flip": "swap `and` and `or`",
    "const_off_by_one": "add one to an integer constant",
    "range_bound": "shrink the stop bound of range() by one",
    "slice_bound": "move a slice bound by one",
    "arith_swap": "swap an arithmetic operator (+ vs -, * vs //, / vs *)",
    "drop_else": "remove an else or elif branch",
    "invert_if": "negate an if condition",
    "return_value": "change a return value (flip a bool, or return None)",
    "swap_args": "swap the first two positional arguments of a call",
}

_CMP = {
    cst.LessThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.LessThan,
    cst.GreaterThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.GreaterThan,
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
}
_ARITH = {
    cst.Add: cst.Subtract,
    cst.Subtract: cst.Add,
    cst.Multiply: cst.FloorDivide,
    cst.FloorDivide: cst.Multiply,
    cst.Divide: cst.Multiply,
}
_ATOMS = (
    cst.Name,
    cst.Integer,
    cst.Float,
    cst.SimpleString,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.List,
    cst.Tuple,
    cst.Dict,
    cst.Set,
)


@dataclass(frozen=True)
class Mutation:
    file: str
    qualname: str
    op: str
    index: int

    @property
    def function(self) -> str:
        return f"{self.file}::{self.qualname}"

    @property
    def id(self) -> str:
        return f"{self.file}::{self.qualname}:{self.op}:{self.index}"


def _paren(e: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(e, _ATOMS) or e.lpar:
        return e
    return e.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _plus(e: cst.BaseExpression, sign: int) -> cst.BaseExpression:
    if isinstance(e, cst.Integer) and e.value.isdigit():
        v = int(e.value) + sign  # 0 - 1 is written -1 (a unary minus: no negative literal)
        return (
            cst.Integer(str(v)) if v >= 0 else cst.UnaryOperation(cst.Minus(), cst.Integer(str(-v)))
        )
    op = cst.Add() if sign > 0 else cst.Subtract()
    return cst.BinaryOperation(left=_paren(e), operator=op, right=cst.Integer("1"))


def _mutate(op: str, node: cst.CSTNode) -> cst.CSTNode | None:
    """The mutated node, or None when ``op`` does not apply to ``node``."""
    if op == "cmp_flip" and isinstance(node, cst.ComparisonTarget):
        new = _CMP.get(type(node.operator))
        return node.with_changes(operator=new()) if new else None
    if op == "bool_flip" and isinstance(node, cst.BooleanOperation):
        return node.with_changes(
            operator=cst.Or() if isinstance(node.operator, cst.And) else cst.And()
        )
    if op == "const_off_by_one" and isinstance(node, cst.Integer) and node.value.isdigit():
        return cst.Integer(str(int(node.value) + 1))
    if (
        op == "range_bound"
        and isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "range"
        and 1 <= len(node.args) <= 2
        and all(a.star == "" and a.keyword is None for a in node.args)
    ):
        i = len(node.args) - 1
        args = list(node.args)
        args[i] = args[i].with_changes(value=_plus(args[i].value, -1))
        return node.with_changes(args=args)
    if op == "slice_bound" and isinstance(node, cst.Slice):
        if node.upper is not None:
            return node.with_changes(upper=_plus(node.upper, -1))
        if node.lower is not None:
            return node.with_changes(lower=_plus(node.lower, +1))
        return None
    if op == "arith_swap" and isinstance(node, cst.BinaryOperation):
        new = _ARITH.get(type(node.operator))
        return node.with_changes(operator=new()) if new else None
    if op == "drop_else" and isinstance(node, cst.If) and node.orelse is not None:
        if isinstance(node.orelse, cst.If):
            return node.with_changes(orelse=node.orelse.orelse)
        return node.with_changes(orelse=None)
    if op == "invert_if" and isinstance(node, cst.If):
        return node.with_changes(
            test=cst.UnaryOperation(operator=cst.Not(), expression=_paren(node.test))
        )
    if op == "return_value" and isinstance(node, cst.Return) and node.value is not None:
        v = node.value
        if isinstance(v, cst.Name) and v.value in ("True", "False"):
            return node.with_changes(value=cst.Name("False" if v.value == "True" else "True"))
        if isinstance(v, cst.Name) and v.value == "None":
            return None
        return node.with_changes(value=cst.Name("None"))
    if op == "swap_args" and isinstance(node, cst.Call):
        pos = [i for i, a in enumerate(node.args) if a.star == "" and a.keyword is None]
        if len(pos) < 2 or pos[:2] != [0, 1]:
            return None
        a, b = node.args[0], node.args[1]
        if cst.Module([]).code_for_node(a.value) == cst.Module([]).code_for_node(b.value):
            return None
        args = list(node.args)
        args[0] = a.with_changes(value=b.value)
        args[1] = b.with_changes(value=a.value)
        return node.with_changes(args=args)
    return None


class _Walker(cst.CSTTransformer):
    """Counts (and optionally applies) one op's sites inside the target functions."""

    def __init__(self, targets: dict[str, list[tuple[str, int]]]) -> None:
        self.targets = targets  # qualname -> [(op, index)] to apply
        self.stack: list[str] = []
        self.active: str | None = None
        self.counts: dict[str, dict[str, int]] = {}
        self.applied: set[tuple[str, str, int]] = set()

    def _push(self, name: str) -> None:
        self.stack.append(name)
        q = ".".join(self.stack)
        if self.active is None and q in self.targets:
            self.active = q

    def _pop(self) -> None:
        q = ".".join(self.stack)
        if self.active == q:
            self.active = None
        self.stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self._push(node.name.value)
        return True

    def leave_ClassDef(self, original, updated):
        self._pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._push(node.name.value if self.active is None else node.name.value)
        return True

    def leave_FunctionDef(self, original, updated):
        self._pop()
        return updated

    def on_leave(self, original, updated):
        updated = super().on_leave(original, updated)
        q = self.active
        if q is None or isinstance(original, cst.FunctionDef | cst.ClassDef | cst.Module):
            return updated
        counts = self.counts.setdefault(q, {})
        for op in OPERATORS:
            if _mutate(op, original) is None:
                continue
            i = counts.get(op, 0)
            counts[op] = i + 1
            if (op, i) in self.targets[q] and isinstance(updated, cst.CSTNode):
                new = _mutate(op, updated)
                if new is not None:
                    self.applied.add((q, op, i))
                    updated = new
        return updated


def functions(source: str) -> list[str]:
    """Qualnames of module-level functions and methods of module-level classes."""
    mod = cst.parse_module(source)
    out = []
    for stmt in mod.body:
        if isinstance(stmt, cst.FunctionDef):
            out.append(stmt.name.value)
        elif isinstance(stmt, cst.ClassDef):
            for s in stmt.body.body:
                if isinstance(s, cst.FunctionDef):
                    out.append(f"{stmt.name.value}.{s.name.value}")
    return out


def enumerate_mutations(file: str, source: str, qualnames: Iterable[str]) -> list[Mutation]:
    """Every mutation the operators offer inside the given functions of one file."""
    targets = {q: [] for q in qualnames}
    w = _Walker(targets)
    cst.parse_module(source).visit(w)
    return [
        Mutation(file, q, op, i)
        for q in targets
        for op, n in sorted(w.counts.get(q, {}).items())
        for i in range(n)
    ]


def apply_mutations(source: str, mutations: Iterable[Mutation]) -> str:
    """The file's text with every mutation applied (all must be in this file and apply)."""
    muts = list(mutations)
    targets: dict[str, list[tuple[str, int]]] = {}
    for m in muts:
        targets.setdefault(m.qualname, []).append((m.op, m.index))
    w = _Walker(targets)
    new = cst.parse_module(source).visit(w)
    missing = {(m.qualname, m.op, m.index) for m in muts} - w.applied
    if missing:
        raise ValueError(f"mutation(s) {sorted(missing)} do not apply to this source")
    return new.code


def function_source(source: str, qualname: str) -> str:
    """The text of one function (for the task file and for humans)."""
    mod = cst.parse_module(source)
    parts = qualname.split(".")
    body = mod.body
    node = None
    for part in parts:
        node = next(
            (
                s
                for s in body
                if isinstance(s, cst.FunctionDef | cst.ClassDef) and s.name.value == part
            ),
            None,
        )
        if node is None:
            raise KeyError(qualname)
        body = node.body.body if isinstance(node, cst.ClassDef) else []
    return mod.code_for_node(node.with_changes(leading_lines=()))


class MutationRecord:
    """Mixin for records that carry file / qualname / op / index of one mutation: the
    ``Mutation`` they name and the function it sits in, derived in one place."""

    file: str
    qualname: str
    op: str
    index: int

    @property
    def mutation(self) -> Mutation:
        return Mutation(self.file, self.qualname, self.op, self.index)

    @property
    def function(self) -> str:
        return f"{self.file}::{self.qualname}"
