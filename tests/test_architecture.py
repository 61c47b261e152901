"""The house's shape, read statically from the source: no import loops between modules or
between top-level packages beyond an explicit allow-list that may only shrink, and the three
families (patchworld, repos, silentbug) never import one another. Imports inside functions
count (they are loops all the same, only deferred); imports under ``if TYPE_CHECKING:`` do not
(they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
FAMILIES = ("verigap.patchworld", "verigap.repos", "verigap.silentbug", "verigap.workplace")

#: module loops still standing, each with why it is there; remove an entry when its loop goes
#: (the test fails on a stale entry, so the list can only shrink)
ALLOWED_MODULE_LOOPS: dict[frozenset[str], str] = {
    frozenset(
        {
            "verigap.sandbox",
            "verigap.sandbox._check",
            "verigap.sandbox._pool",
            "verigap.sandbox._prestart",
        }
    ): "make_sandbox lives in the package and its helpers look it up at call time, so a "
    "test can patch verigap.sandbox.make_sandbox",
    frozenset(
        {"verigap.repos.episode", "verigap.repos.impossible", "verigap.repos.redteam.battery"}
    ): "the episode lists and dispatches the scripted agents of the other two; they share "
    "its system prompt and command log",
    frozenset(
        {"verigap.patchworld.grpo", "verigap.patchworld.transformer_policy"}
    ): "GRPO dispatches to the torch trainer at call time (torch is optional) and the "
    "trainer subclasses GRPO's",
}

#: loops between top-level packages (each with why); same rule
ALLOWED_PACKAGE_LOOPS: dict[frozenset[str], str] = {
    frozenset(
        {"verigap.patchworld", "verigap.experiments", "verigap.trl"}
    ): "the experiments run Patch World (the NumPy trainer directly, the language model through "
    "verigap.trl, which renders Patch World as text); Patch World's CLI and views read the "
    "experiment registry",
    frozenset(
        {"verigap.agents", "verigap.monitor", "verigap.report", "verigap.repos"}
    ): "report holds both the view base every family's views import (report.views) and the "
    "red-team page that reads repos and monitor results (report.redteam); splitting the "
    "base out of report breaks it",
}


def modules(src: Path) -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in src.rglob("*.py"):
        parts = list(p.relative_to(src).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(src: Path, top: str = "verigap") -> dict[str, set[str]]:
    """module -> the project modules it imports (``from pkg import mod`` names the module)."""
    mods = modules(src)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, (path, is_pkg) in mods.items():
        pkg = m if is_pkg else m.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names
                ]
            for t in targets:
                r = resolve(t)
                if r and r != m and (r == top or r.startswith(top + ".")):
                    edges[m].add(r)
    return edges


def loops(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def package_graph(edges: dict[str, set[str]], src: Path) -> dict[str, set[str]]:
    """Top-level package -> the top-level packages its modules import."""
    mods = modules(src)

    def top(m: str) -> str:
        name = ".".join(m.split(".")[:2])
        return name if mods.get(name, (None, False))[1] else m

    out: dict[str, set[str]] = {}
    for a, bs in edges.items():
        out.setdefault(top(a), set()).update(top(b) for b in bs if top(b) != top(a))
    return out


def _report(found: list[frozenset[str]], allowed: dict[frozenset[str], str]) -> list[str]:
    new = [sorted(c) for c in found if c not in allowed]
    stale = [sorted(c) for c in allowed if c not in found]
    return [f"new import loop {c}: break it (move the shared names down a layer)" for c in new] + [
        f"loop {c} is gone: remove it from the allow-list" for c in stale
    ]


def test_no_module_import_loops_beyond_the_allow_list() -> None:
    assert _report(loops(import_graph(SRC)), ALLOWED_MODULE_LOOPS) == []


def test_no_package_import_loops_beyond_the_allow_list() -> None:
    edges = import_graph(SRC)
    assert _report(loops(package_graph(edges, SRC)), ALLOWED_PACKAGE_LOOPS) == []


def test_families_do_not_import_each_other() -> None:
    edges = import_graph(SRC)
    crossing = sorted(
        (a, b)
        for a, bs in edges.items()
        for b in bs
        for fa in FAMILIES
        for fb in FAMILIES
        if fa != fb and (a == fa or a.startswith(fa + ".")) and (b == fb or b.startswith(fb + "."))
    )
    assert crossing == []


def test_the_checker_finds_a_planted_loop(tmp_path: Path) -> None:
    """Control: a loop through an import inside a function, and one under TYPE_CHECKING."""
    pkg = tmp_path / "verigap"
    (pkg / "fam").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fam" / "__init__.py").write_text("")
    (pkg / "fam" / "a.py").write_text("from verigap.fam import b\n")
    (pkg / "fam" / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "fam" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from verigap.fam import a\n"
    )
    (pkg / "core.py").write_text("import verigap.fam.c\n")
    found = loops(import_graph(tmp_path))
    assert found == [frozenset({"verigap.fam.a", "verigap.fam.b"})]
    assert _report(found, {}) and _report([], {frozenset({"x", "y"}): "gone"})
