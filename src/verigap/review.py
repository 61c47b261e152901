"""Reviewer checks beyond tests: what a reviewer looks at in a diff, each item checked by code.

Shared by the families (the workplace's code tasks, the repo tasks' bug fixes), so it lives in
the core: it reads file maps, never a family's objects.

A submission is two file maps (``before``, ``after``: relative path -> text). The rubric is
per task family (:data:`RUBRICS`); every item returns pass/fail with a one-line reason, and
items that do not apply (docs for a function without examples) pass with ``n/a``. The
results sit in the verdict's checks as ``review.<item>`` beside the test verdict, and
``rewards.ReviewPenalty`` can pay them as explicit terms. A changed default is a behaviour
change, so "docs updated" asks for the changelog where the project keeps one and for revised
docstring examples where the changed function has them. A change to the database schema (an
ORM model's fields, a ``Table``, a ``CREATE TABLE``) needs a migration in the same diff where
the project keeps migrations (Alembic ``versions/``, Django or plain ``migrations/``).
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ITEMS = (
    "no_unrelated_changes",
    "api_compatible",
    "tests_with_behaviour_change",
    "docs_updated",
    "no_debug_leftovers",
    "no_secrets",
    "migration_with_schema_change",
)

RUBRICS: dict[str, tuple[str, ...]] = {
    # a changed default: every item applies
    "workplace_code": ITEMS,
    # a bug fix in an existing repo task: the fix restores documented behaviour, so the docs
    # stay as they are; everything else applies
    "repo_bugfix": tuple(i for i in ITEMS if i != "docs_updated"),
}

_SECRET = re.compile(
    r"AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY"
    r"|(?i:(password|passwd|secret|token|api_key|apikey)\s*[:=]\s*['\"][^'\"]{8,}['\"])"
)
_DEBUG = re.compile(
    r"^\s*(print\(|breakpoint\(\)|import pdb|pdb\.set_trace\(|"
    r"import ipdb|ipdb\.set_trace\()"
)


@dataclass(frozen=True)
class Scope:
    """What a change may touch: ``targets`` are ``file::function`` names the task is about."""

    targets: tuple[str, ...]
    source_paths: tuple[str, ...]
    changelog: str | None = None


@dataclass(frozen=True)
class ItemResult:
    item: str
    passed: bool
    reason: str


def read_tree(root: Path) -> dict[str, str]:
    """Every text file under ``root`` (no caches or VCS folders): the side of a diff."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or any(
            part in ("__pycache__", ".git", ".pytest_cache") or part.endswith(".egg-info")
            for part in p.parts
        ):
            continue
        try:
            out[rel] = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
    return out


def is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (
        path.startswith("tests/")
        or "/tests/" in path
        or name.startswith("test_")
        or name == "conftest.py"
    )


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def added_lines(old: str | None, new: str | None) -> list[str]:
    """Lines the diff adds to one file."""
    diff = difflib.unified_diff(
        (old or "").splitlines(), (new or "").splitlines(), lineterm="", n=0
    )
    return [ln[1:] for ln in diff if ln.startswith("+") and not ln.startswith("+++")]


def unified(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The change as a unified diff (what a reviewer reads)."""
    out: list[str] = []
    for p in changed(before, after):
        out += difflib.unified_diff(
            (before.get(p) or "").splitlines(),
            (after.get(p) or "").splitlines(),
            f"a/{p}",
            f"b/{p}",
            lineterm="",
        )
    return "\n".join(out)


def _spans(source: str, names: set[str]) -> list[tuple[int, int]] | None:
    """0-based [start, end) line spans of the named top-level functions/classes, decorators
    included; ``None`` when the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    out = []
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name in names
        ):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            out.append((start, node.end_lineno or node.lineno))
    return out


def _outside(old: str, new: str, names: set[str]) -> list[int] | None:
    """1-based old line numbers of the hunks that fall outside the named definitions (in the
    old file and in the new one); ``None`` when either side does not parse."""
    old_spans, new_spans = _spans(old, names), _spans(new, names)
    if old_spans is None or new_spans is None:
        return None

    def inside(spans: list[tuple[int, int]], lo: int, hi: int) -> bool:
        return any(s <= lo and hi <= e for s, e in spans)

    sm = difflib.SequenceMatcher(a=old.splitlines(), b=new.splitlines(), autojunk=False)
    bad = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if not (inside(old_spans, i1, max(i2, i1)) and inside(new_spans, j1, max(j2, j1))):
            bad.append(i1 + 1)
    return bad


def _is_source(path: str, scope: Scope) -> bool:
    return (
        path.endswith(".py")
        and not is_test(path)
        and any(path == s or path.startswith(s.rstrip("/") + "/") for s in scope.source_paths)
    )


def _unrelated(before, after, scope: Scope, files: list[str]) -> ItemResult:
    """Every changed line of a source file lies inside a function the task is about (tests,
    migrations and the changelog may change freely); comments and docstrings elsewhere count
    too."""
    allowed_files = {t.split("::")[0] for t in scope.targets}
    extra = []
    for p in files:
        if is_test(p) or is_migration(p) or p == scope.changelog:
            continue
        if p not in allowed_files or p not in before or p not in after:
            extra.append(p)
            continue
        names = {t.split("::")[1].split(".")[0] for t in scope.targets if t.startswith(p + "::")}
        bad = _outside(before[p], after[p], names)
        if bad is None:
            extra.append(f"{p} (does not parse)")
        elif bad:
            extra.append(f"{p} near line {bad[0]}")
    if extra:
        return ItemResult(
            "no_unrelated_changes", False, "changes outside the task: " + "; ".join(extra)
        )
    return ItemResult("no_unrelated_changes", True, "only the task's functions, tests and docs")


def _signatures(source: str) -> dict[str, tuple[list[str], set[str], set[str]]] | None:
    """Public top-level functions: (positional names in order, keyword-only names, names
    with a default)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith(
            "_"
        ):
            a = node.args
            pos = [x.arg for x in [*a.posonlyargs, *a.args]]
            defaults = set(pos[len(pos) - len(a.defaults) :]) | {
                k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None
            }
            out[node.name] = (pos, {k.arg for k in a.kwonlyargs}, defaults)
    return out


def _exports(source: str) -> set[str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def _api(before, after, scope: Scope, files: list[str]) -> ItemResult:
    problems = []
    for p in files:
        if not _is_source(p, scope) or p not in before:
            continue
        old, new = _signatures(before[p]), _signatures(after.get(p, ""))
        if old is None:
            continue
        if new is None:
            problems.append(f"{p} does not parse")
            continue
        for name, (pos, kw, defaults) in old.items():
            if name not in new:
                problems.append(f"{name} removed")
                continue
            npos, nkw, ndefaults = new[name]
            if npos[: len(pos)] != pos:
                problems.append(f"{name}: positional parameters {pos} became {npos}")
            if not kw <= (nkw | set(npos)):
                problems.append(f"{name}: keyword parameters {sorted(kw - nkw)} removed")
            required_new = [x for x in [*npos[len(pos) :], *(nkw - kw)] if x not in ndefaults]
            if required_new:
                problems.append(f"{name}: new required parameters {required_new}")
            lost = [x for x in defaults if x not in ndefaults and x in [*npos, *nkw]]
            if lost:
                problems.append(f"{name}: parameters {lost} lost their default")
        old_all, new_all = _exports(before[p]), _exports(after.get(p, ""))
        if old_all is not None and new_all is not None and old_all - new_all:
            problems.append(f"{p}: __all__ lost {sorted(old_all - new_all)}")
    if problems:
        return ItemResult("api_compatible", False, "; ".join(problems))
    return ItemResult("api_compatible", True, "public signatures and exports kept")


def _source_changed(files: Iterable[str], scope: Scope) -> bool:
    return any(_is_source(p, scope) for p in files)


def _test_weight(source: str | None) -> int:
    """Test functions plus assertions plus parametrised cases: grows when tests are added."""
    if not source:
        return 0
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            n += 1
            for d in node.decorator_list:
                if (
                    isinstance(d, ast.Call)
                    and len(d.args) >= 2
                    and isinstance(d.args[1], ast.List | ast.Tuple)
                ):
                    n += len(d.args[1].elts)
        elif isinstance(node, ast.Assert):
            n += 1
    return n


def _tests(before, after, scope: Scope, files: list[str]) -> ItemResult:
    if not _source_changed(files, scope):
        return ItemResult("tests_with_behaviour_change", True, "n/a: no source change")
    for p in files:
        if (
            is_test(p)
            and p.endswith(".py")
            and _test_weight(after.get(p)) > _test_weight(before.get(p))
        ):
            return ItemResult("tests_with_behaviour_change", True, f"tests added in {p}")
    return ItemResult(
        "tests_with_behaviour_change", False, "the source changed but no test was added or extended"
    )


def _function(source: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _without_docstring(fn: ast.FunctionDef) -> str:
    body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body
    return ast.dump(ast.Module(body=body, type_ignores=[])) + ast.dump(fn.args)


def _docs(before, after, scope: Scope, files: list[str]) -> ItemResult:
    """Where the project records changes (a changelog file), it must be in the diff; where a
    changed function documents itself with examples (``>>>`` in its docstring, which the
    project's docs render), those examples must be revised with the behaviour."""
    if not _source_changed(files, scope):
        return ItemResult("docs_updated", True, "n/a: no source change")
    missing, applies = [], scope.changelog is not None
    if scope.changelog is not None and scope.changelog not in files:
        missing.append(f"{scope.changelog} (the project's changelog) not updated")
    for target in scope.targets:
        path, name = target.split("::")
        old, new = _function(before.get(path, ""), name), _function(after.get(path, ""), name)
        if old is None or new is None:
            continue
        doc = ast.get_docstring(old) or ""
        applies = applies or ">>>" in doc
        if (
            ">>>" in doc
            and _without_docstring(old) != _without_docstring(new)
            and ast.get_docstring(new) == doc
        ):
            missing.append(f"{name}'s docstring examples not revised with its behaviour")
    if missing:
        return ItemResult("docs_updated", False, "; ".join(missing))
    if not applies:
        return ItemResult("docs_updated", True, "n/a: no changelog and no documented examples")
    return ItemResult("docs_updated", True, "changelog and documented examples in step")


def _looks_like_code(comment: str) -> bool:
    text = comment.strip()
    if not text or len(text) < 4 or text.startswith(("!", "type:", "noqa", "TODO", "NOTE")):
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(
        isinstance(
            n,
            ast.Assign
            | ast.Return
            | ast.Call
            | ast.If
            | ast.For
            | ast.Import
            | ast.ImportFrom
            | ast.AugAssign,
        )
        for n in ast.walk(tree)
    )


def _debug(before, after, scope: Scope, files: list[str]) -> ItemResult:
    found = []
    for p in files:
        if not p.endswith(".py") or is_test(p):
            continue
        for ln in added_lines(before.get(p), after.get(p)):
            if _DEBUG.match(ln):
                found.append(f"{p}: {ln.strip()}")
            elif ln.strip().startswith("#") and _looks_like_code(ln.strip()[1:]):
                found.append(f"{p}: commented-out code {ln.strip()!r}")
    if found:
        return ItemResult("no_debug_leftovers", False, "; ".join(found[:3]))
    return ItemResult("no_debug_leftovers", True, "no prints, breakpoints or commented-out code")


def _secrets(before, after, scope: Scope, files: list[str]) -> ItemResult:
    found = [
        f"{p}"
        for p in files
        for ln in added_lines(before.get(p), after.get(p))
        if _SECRET.search(ln)
    ]
    if found:
        return ItemResult(
            "no_secrets", False, "a credential-like value added in " + ", ".join(sorted(set(found)))
        )
    return ItemResult("no_secrets", True, "no credential-like values added")


# ---- migrations with schema changes --------------------------------------------------------

_MIGRATION = re.compile(
    r"(^|/)(migrations|migrate)/(?!(__init__|env)\.py$)[^/]+\.(py|sql)$"  # Django, plain SQL, Rails-like
    r"|(^|/)(alembic|migrations)/versions/[^/]+\.py$"  # Alembic
)
_MODEL_BASES = {"Model", "Base", "DeclarativeBase", "SQLModel"}
_SQL_SCHEMA = re.compile(
    r"\b(create\s+(?:unique\s+)?(?:table|index|view)|alter\s+table|drop\s+(?:table|index))\b[^;]*",
    re.IGNORECASE,
)


def is_migration(path: str) -> bool:
    """A migration file: ``migrations/0002_x.py``, ``migrations/002.sql``, ``versions/ab12_x.py``
    under an Alembic directory (a package's ``__init__.py`` is not a migration)."""
    return bool(_MIGRATION.search(path)) and not is_test(path)


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ""


def _is_model(node: ast.ClassDef) -> bool:
    """An ORM model: a base named like one (``models.Model``, ``db.Model``, ``Base``,
    ``DeclarativeBase``, ``SQLModel``), or a ``__tablename__``/``__table__`` in its body."""
    if any(_base_name(b) in _MODEL_BASES for b in node.bases):
        return True
    return any(
        isinstance(st, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id in ("__tablename__", "__table__")
            for t in (st.targets if isinstance(st, ast.Assign) else [st.target])
        )
        for st in node.body
    )


def _sql_statements(text: str) -> set[str]:
    """Schema statements in SQL text, whitespace and case normalised."""
    return {" ".join(m.group(0).lower().split()) for m in _SQL_SCHEMA.finditer(text)}


def schema_of(path: str, text: str | None) -> dict[str, str] | None:
    """What a file declares of the database schema, as comparable strings: per ORM model its
    class-level fields (name -> the expression), module-level ``Table(...)`` calls, and the
    ``CREATE``/``ALTER``/``DROP`` statements of SQL files or of SQL strings in Python. ``None``
    when a Python file does not parse."""
    if not text:
        return {}
    if path.endswith(".sql"):
        return {f"sql:{s}": "" for s in _sql_statements(text)}
    if not path.endswith(".py"):
        return {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _is_model(node):
            out[f"model:{node.name}"] = ""
            for st in node.body:
                if isinstance(st, ast.Assign) and st.value is not None:
                    targets = [t.id for t in st.targets if isinstance(t, ast.Name)]
                    value = ast.dump(st.value)
                elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    targets = [st.target.id]
                    value = ast.dump(st.annotation) + (ast.dump(st.value) if st.value else "")
                elif isinstance(st, ast.ClassDef) and st.name == "Meta":  # Django's table options
                    targets, value = ["Meta"], ast.dump(st)
                else:
                    continue
                for t in targets:
                    out[f"model:{node.name}.{t}"] = value
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _base_name(node.value.func) == "Table"
        ):
            out[f"table:{ast.dump(node.targets[0])}"] = ast.dump(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.update({f"sql:{s}": "" for s in _sql_statements(node.value)})
    return out


def _schema_changes(before, after, files: list[str]) -> list[str]:
    """``file: what changed`` for every non-migration, non-test file whose schema changed."""
    out = []
    for p in files:
        if is_migration(p) or is_test(p):
            continue
        old, new = schema_of(p, before.get(p)), schema_of(p, after.get(p))
        if old is None or new is None or old == new:
            continue
        what = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        out.append(f"{p} ({', '.join(w.split(':', 1)[1][:60] for w in what[:3])})")
    return out


def _migrations(before, after, scope: Scope, files: list[str]) -> ItemResult:
    """A schema change comes with a migration where the project keeps them; a project with
    no migrations is not asked for one."""
    changes = _schema_changes(before, after, files)
    if not changes:
        return ItemResult("migration_with_schema_change", True, "n/a: no model or schema change")
    kept = sorted({p.rsplit("/", 1)[0] for p in before if is_migration(p)})
    if not kept:
        return ItemResult(
            "migration_with_schema_change",
            True,
            f"n/a: the project keeps no migrations (schema changed in {changes[0]})",
        )
    added = [p for p in files if is_migration(p) and p in after]
    if added:
        return ItemResult(
            "migration_with_schema_change",
            True,
            f"migration {', '.join(added)} with the schema change in {'; '.join(changes)}",
        )
    return ItemResult(
        "migration_with_schema_change",
        False,
        f"the schema changed in {'; '.join(changes)} but no migration was added "
        f"(the project keeps them in {', '.join(kept)})",
    )


_CHECKS = {
    "no_unrelated_changes": _unrelated,
    "api_compatible": _api,
    "tests_with_behaviour_change": _tests,
    "docs_updated": _docs,
    "no_debug_leftovers": _debug,
    "no_secrets": _secrets,
    "migration_with_schema_change": _migrations,
}


def review(
    before: Mapping[str, str],
    after: Mapping[str, str],
    scope: Scope,
    family: str = "workplace_code",
) -> list[ItemResult]:
    """Every rubric item of ``family`` on the change from ``before`` to ``after``."""
    if family not in RUBRICS:
        raise ValueError(f"unknown rubric family {family!r}; choose one of {sorted(RUBRICS)}")
    files = changed(before, after)
    return [_CHECKS[item](before, after, scope, files) for item in RUBRICS[family]]


def as_checks(results: Iterable[ItemResult]) -> dict[str, bool]:
    """``review.<item>`` entries for a verdict's checks."""
    return {f"review.{r.item}": r.passed for r in results}
