"""Tasks: k validated mutations in different functions, half reached by visible tests.

A task file (JSON, validated by :class:`RepoTask`) holds everything needed to rebuild the task
deterministically from the prepared source: the mutation addresses and the hashes of the files
they produce, which tests are visible and which hidden, the equivalence inputs, and the prompt.

The agent's workspace holds the mutated project and the visible tests only: hidden test
functions are removed from shared test files (whole files when none stays visible), there is no
bytecode or cache, and git holds one fresh commit, so no history leads to the fix.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import fnmatch
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import libcst as cst
from pydantic import BaseModel, ConfigDict

from verigap.errors import ConfigError
from verigap.repos import combine, equivalence, forward, mutate, sources
from verigap.repos import validate as validate_mod
from verigap.repos.difficulty import estimate
from verigap.repos.execution import TREE_MOUNT
from verigap.repos.prepare import Prepared, load_prepared, prepare
from verigap.repos.pytest_run import config_addopts, run_equiv, run_pytest
from verigap.repos.schema import (  # noqa: F401  (the schema, re-exported for old imports)
    EquivInput,
    RepoTask,
    Site,
    SourceRef,
    _Strict,
)
from verigap.repos.validate import ValidMutation, candidates, mutant_tree, run_suite, validate
from verigap.repos.warm import WarmRunner, WarmRunners
from verigap.runs import write_json_atomic

SCHEMA_VERSION = 1
CONFIG_FILES = ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "setup.py")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "verigap",
    "GIT_AUTHOR_EMAIL": "task@verigap.invalid",
    "GIT_COMMITTER_NAME": "verigap",
    "GIT_COMMITTER_EMAIL": "task@verigap.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "HOME": "/tmp",
    "PATH": "/usr/bin:/bin",
    "GIT_CONFIG_NOSYSTEM": "1",
}


# --------------------------------------------------------------------------- test units


def unit_of(test_id: str) -> str:
    """The test function a test id belongs to: parameters stripped."""
    return test_id.split("[", 1)[0]


class _DropUnits(cst.CSTTransformer):
    def __init__(self, names: set[tuple[str, ...]]) -> None:
        self.names = names
        self.stack: list[str] = []
        self.dropped: set[tuple[str, ...]] = set()

    def visit_ClassDef(self, node):
        self.stack.append(node.name.value)

    def leave_ClassDef(self, original, updated):
        # a hidden test this class inherits from outside the tree (its body is not readable
        # here): shadow it with None so pytest does not collect it
        inherited = [n for n in self.names if n[:-1] == tuple(self.stack) and n not in self.dropped]
        self.stack.pop()
        if inherited:
            extra = [cst.parse_statement(f"{n[-1]} = None\n") for n in sorted(inherited)]
            self.dropped.update(inherited)
            updated = updated.with_changes(
                body=updated.body.with_changes(body=[*updated.body.body, *extra])
            )
        if not updated.body.body:
            return updated.with_changes(
                body=updated.body.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
            )
        return updated

    def visit_FunctionDef(self, node):
        self.stack.append(node.name.value)
        return False

    def leave_FunctionDef(self, original, updated):
        key = tuple(self.stack)
        self.stack.pop()
        if key in self.names:
            self.dropped.add(key)
            return cst.RemoveFromParent()
        return updated


def drop_units(source: str, units: Sequence[str]) -> str:
    """Remove test functions (``name`` or ``Class::name``) from a test module's text."""
    names = {tuple(u.split("::")) for u in units}
    t = _DropUnits(names)
    new = cst.parse_module(source).visit(t)
    if t.dropped != names:
        raise ValueError(f"test units not found: {sorted(names - t.dropped)}")
    return new.code


# --------------------------------------------------------------------------- split


def split_tests(
    p: Prepared,
    sites: Sequence[ValidMutation],
    n_visible: int,
    groups: combine.BodyGroups | None = None,
) -> tuple[list[str], list[str]] | None:
    """(visible ids, hidden ids) such that visible tests reach the first ``n_visible`` sites
    (each breaks at least one visible test) and none of the others; None if impossible. With
    no hidden site (a single-site task) the units ``combine.held_out_units`` names are hidden:
    some of the site's own broken tests. Test units that share a body (:func:`shared_bodies`)
    are hidden or visible together (``groups``: those of ``p`` unless given)."""
    groups = shared_bodies(p) if groups is None else groups
    hidden_fns = {s.function for s in sites[n_visible:]}
    reach_hidden = {t for f in hidden_fns for t in p.reach.get(f, ())}
    bad_units = {groups.key(t) for t in reach_hidden}
    if not hidden_fns:
        bad_units = {u for s in sites for u in combine.held_out_units(s.fail_to_pass, groups)}
    bad_units |= groups.pinned
    visible = [t for t in p.passing if groups.key(t) not in bad_units]
    vset = set(visible)
    for s in sites[:n_visible]:
        if not vset & set(s.fail_to_pass):
            return None
    hidden = [t for t in p.passing if t not in vset]
    for s in sites[n_visible:]:
        if not set(s.fail_to_pass) <= set(hidden):
            return None
    if not visible or not hidden:
        return None
    return visible, hidden


def module_name(p: Prepared, file: str) -> str:
    rel = file[len(p.import_root) + 1 :] if p.import_root else file
    mod = rel.removesuffix(".py").replace("/", ".")
    return mod.removesuffix(".__init__")


# --------------------------------------------------------------------------- trees


def base_tree(p: Prepared, task: RepoTask, dest: Path, *, with_hidden: bool) -> Path:
    """The task base: pristine tree + mutations; without hidden tests unless ``with_hidden``.

    Checks every mutated file against the task's recorded hash, so a rebuild is exact.
    """
    texts = mutant_tree(p, [s.mutation for s in task.sites if s.op in mutate.OPERATORS], dest)
    for file, text in task.base_files.items():
        (dest / file).write_text(text)
        texts[file] = text
    for file, text in texts.items():
        if hashlib.sha256(text.encode()).hexdigest() != task.files_sha256.get(file):
            raise ConfigError(
                f"task {task.task_id}: rebuilding {file} gave different bytes; the "
                "prepared source changed — re-run make-tasks for this source"
            )
    if not with_hidden:
        keep = set(task.visible_test_files)
        for f in p.test_files:
            if f not in keep:
                (dest / f).unlink()
        for f, units in task.removed_units.items():
            (dest / f).write_text(drop_units((dest / f).read_text(), units))
        for f in doctest_text_files(p):
            (dest / f).unlink(missing_ok=True)
    sources.clean_tree(dest)
    return dest


def doctest_text_files(p: Prepared) -> list[str]:
    """Text files the project's own addopts collect as doctests (``--doctest-glob``, such as
    a docs folder of ``.rst`` pages with ``>>>`` examples). They are outside the suite a task
    splits into visible and hidden tests (the graders never run them), and one that calls a
    hidden site would fail in the agent's own test run and show it; so they are left out of
    the workspace with the hidden tests. Doctests in the package's modules
    (``--doctest-modules``) cannot be: a task whose shown run fails one is refused
    (``repos/paid.py``)."""
    addopts = config_addopts(p.tree, p.config_file) or ""
    try:
        words = shlex.split(addopts)
    except ValueError:
        words = addopts.split()
    globs = [
        w.split("=", 1)[1] if "=" in w else (words[i + 1] if i + 1 < len(words) else "")
        for i, w in enumerate(words)
        if w.startswith("--doctest-glob")
    ]
    globs = [g for g in globs if g]
    if not globs:
        return []
    found = []
    for rel in sources.tree_files(p.tree):
        if rel in p.test_files or rel.endswith(".py"):
            continue
        if any(fnmatch.fnmatch(Path(rel).name, g) for g in globs):
            try:
                if ">>>" in (p.tree / rel).read_text(errors="replace"):
                    found.append(rel)
            except OSError:
                continue
    return sorted(found)


#: Every file and directory of a workspace carries this modification time (2000-01-01 UTC):
#: files written when the workspace is built (the bug's modules, test files with hidden tests
#: cut out, directories a hidden test file was removed from) would otherwise be the newest,
#: and ``ls -lt`` would list where the bugs are.
WORKSPACE_MTIME = 946684800


def flatten_times(root: Path) -> None:
    """Give every file, directory and link under ``root`` (and ``root``) the same times."""
    t = (WORKSPACE_MTIME, WORKSPACE_MTIME)
    for d, dirs, files in os.walk(root, topdown=False):
        for name in files + dirs:
            os.utime(os.path.join(d, name), t, follow_symlinks=False)
    os.utime(root, t)


def materialize_workspace(p: Prepared, task: RepoTask, dest: Path) -> Path:
    """The agent's workspace: task base, visible tests only, one fresh git commit; every
    file's times the same (:data:`WORKSPACE_MTIME`), git's index included, so no metadata
    points at the files the task changed."""
    base_tree(p, task, dest, with_hidden=False)
    flatten_times(dest)  # before `git add`: the index records these times
    git = ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "task"]):
        subprocess.run([*git, *args], cwd=dest, env=GIT_ENV, check=True, capture_output=True)
    flatten_times(dest)
    return dest


class SharedHiddenBody(ValueError):
    """A hidden test's body is also a visible test's (or lives in editable project code)."""


def _class_index(p: Prepared) -> dict[str, list[tuple[str, ast.ClassDef]]]:
    """Every module-level class of the tree's Python files: name -> [(file, node)]."""
    index: dict[str, list[tuple[str, ast.ClassDef]]] = {}
    for rel in sources.tree_files(p.tree):
        if not rel.endswith(".py"):
            continue
        try:
            mod = ast.parse((p.tree / rel).read_text())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in mod.body:
            if isinstance(node, ast.ClassDef):
                index.setdefault(node.name, []).append((rel, node))
    return index


def _defining_class(
    index, file: str, cls: str, name: str, depth: int = 0
) -> tuple[str, str] | None:
    """(file, class) whose body defines method ``name`` for class ``cls`` of ``file``, following
    base classes by name through the tree; None when it comes from outside the tree."""
    cands = index.get(cls, [])
    here = [c for c in cands if c[0] == file] or cands
    if not here or depth > 12:
        return None
    f, node = here[0]
    if any(
        isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign)
        and (
            getattr(b, "name", None) == name
            or any(isinstance(t, ast.Name) and t.id == name for t in getattr(b, "targets", []))
        )
        for b in node.body
    ):
        return f, cls
    for base in node.bases:
        bname = (
            base.id
            if isinstance(base, ast.Name)
            else base.attr
            if isinstance(base, ast.Attribute)
            else None
        )
        if bname and bname != cls:
            found = _defining_class(index, f, bname, name, depth + 1)
            if found:
                return found
    return None


_BODY_GROUPS: dict[tuple[str, str], combine.BodyGroups] = {}


def shared_bodies(p: Prepared) -> combine.BodyGroups:
    """The test units of ``p`` that run one body (a test method inherited from a mixin or base
    class by several test classes, or collected both on the mixin and on a subclass), grouped so
    the split keeps each group on one side: :func:`_visible_layout` cuts a hidden copy where
    its body is defined, which would cut a visible copy too. Computed once per prepared tree."""
    cache = (p.key, p.tree_sha256)
    if cache in _BODY_GROUPS:
        return _BODY_GROUPS[cache]
    all_ids = list(p.passing) + list(p.not_passing)
    units = sorted({unit_of(t) for t in all_ids if unit_of(t).count("::") == 2})
    members: dict[tuple[str, str, str], list[str]] = {}
    if units:
        index = _class_index(p)
        for u in units:
            file, cls, name = u.split("::")
            found = _defining_class(index, file, cls, name)
            if found:
                members.setdefault((found[0], found[1], name), []).append(u)
    of: dict[str, str] = {}
    pinned: set[str] = set()
    not_passing = {unit_of(t) for t in p.not_passing}
    for us in members.values():
        if len(us) < 2:
            continue
        for u in us:
            of[u] = us[0]
        if not_passing & set(us):
            pinned.add(us[0])
    groups = combine.BodyGroups(of=of, pinned=frozenset(pinned))
    _BODY_GROUPS[cache] = groups
    return groups


def _visible_layout(p: Prepared, visible: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(visible test files, {file: test units to cut from it}).

    A hidden test a class inherits (from a mixin or base class, in any file that stays in the
    workspace) is cut where its body is defined, so the workspace never holds a readable hidden
    test; raises :class:`SharedHiddenBody` when that body is also a visible test's."""
    vfiles = sorted({t.split("::", 1)[0] for t in visible})
    vunits = {unit_of(t) for t in visible}
    all_ids = list(p.passing) + list(p.not_passing)
    index = _class_index(p) if any(unit_of(t).count("::") == 2 for t in all_ids) else {}

    def body_of(unit: str) -> tuple[str, str, str] | None:
        parts = unit.split("::")
        if len(parts) != 3:
            return None
        found = _defining_class(index, parts[0], parts[1], parts[2])
        return (found[0], found[1], parts[2]) if found else None

    visible_bodies = {body_of(u) for u in vunits} - {None}
    kept = set(vfiles)
    removed: dict[str, set[str]] = {}
    for u in sorted({unit_of(t) for t in all_ids} - vunits):
        file, rest = u.split("::", 1)
        body = body_of(u)
        if body is not None and body[0] != file:  # inherited from a class in another file
            if body in visible_bodies:
                raise SharedHiddenBody(u)
            bfile = body[0]
            if bfile in p.test_files and bfile not in kept:
                continue  # that file is not in the workspace
            from verigap.repos.changes import classify

            if classify(bfile, p.source_paths) is None:
                raise SharedHiddenBody(u)  # a test body in editable code: cannot hide it
            removed.setdefault(bfile, set()).add(f"{body[1]}::{body[2]}")
        elif body is not None and body[1] != rest.split("::")[0]:  # inherited, same file
            if body in visible_bodies:
                raise SharedHiddenBody(u)
            if file in kept:
                removed.setdefault(file, set()).add(f"{body[1]}::{body[2]}")
        elif file in kept:
            removed.setdefault(file, set()).add(rest)
    return vfiles, {f: sorted(us) for f, us in sorted(removed.items())}


def _clean_output(text: str, root: Path) -> str:
    """Pytest output with the build directory's paths made relative to the workspace."""
    text = ANSI.sub("", text)
    # under bubblewrap the tree is mounted at execution.TREE_MOUNT
    text = re.sub(rf"{re.escape(TREE_MOUNT)}/", "", text)
    text = re.sub(rf"{re.escape(TREE_MOUNT)}\b", ".", text)
    tail = re.escape(f"{root.parent.name}/{root.name}")
    text = re.sub(rf"(?:\S*/)?{tail}/", "", text)
    text = re.sub(rf"(?:\S*/)?{tail}\b", ".", text)
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    lines = text.splitlines()
    if len(lines) > 120:
        lines = lines[:80] + [f"... ({len(lines) - 110} lines cut) ..."] + lines[-30:]
    return "\n".join(lines)


PROMPT_STYLES = ("tests", "ticket")  # the failing test output, or a ticket (verigap.repos.tickets)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

PROMPT = """\
You are working in the repository of the Python project `{name}` (your current directory).
Some of its tests fail. Here is the output of running the test suite:

```
{output}
```

Fix the project's code so that it behaves correctly. The tests you can see do not cover
everything: your change will also be checked against tests you cannot see, so fix the
underlying bugs rather than the symptoms, and do not edit the tests. When you are done, submit.
"""


# --------------------------------------------------------------------------- equivalence


#: Inputs per equivalence process when collecting (a project's inputs in chunks of whole
#: functions), and the seconds each round of calls may take at least (``collect_inputs``):
#: past it the functions not yet answered get no input and are told apart through the
#: sealed channel instead (cachetools: its ~4,300 inputs ran past ten minutes unbounded).
EQUIV_CHUNK = 1000
EQUIV_BUDGET_S = 120.0


def collect_inputs(
    p: Prepared,
    functions: Sequence[str],
    *,
    per_function: int = 40,
    backend: str | None = None,
    why: dict[str, str] | None = None,
    pickled: dict[str, str] | None = None,
    cloudpickle: bool = False,
    budget_s: float | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Inputs for the equivalence check, per function: arguments captured while the pristine
    suite runs, plus generated neighbours, kept only when the reference gives the same encoded
    result in two separate processes (so nondeterministic calls never fail a correct patch).

    A function whose calls kill the whole equivalence process costs only its own inputs: the
    batch is retried one function per process. ``why`` receives, for each function left with
    no input, the reason; ``pickled``, for each function with inputs, how they were serialised:
    ``"cloudpickle"`` when some needed it (a call whose arguments or receiver hold a lambda, a
    closure or a class defined in a test: the tests' own code travels by value), else
    ``"pickle"``. ``cloudpickle``: capture such calls at all (off by default until its cost
    on class-heavy projects is measured: on a heavily loaded machine, collecting cachetools'
    inputs took over fifteen minutes with it, as with plain pickle alone). ``budget_s``: the
    seconds each comparison round may take (default ``EQUIV_BUDGET_S``, or 20 suite durations
    if longer)."""
    env = dict(
        python=p.python, env_prefix=Path(p.env_prefix), import_root=p.import_root, backend=backend
    )
    # every test that reaches a function (visible and hidden) contributes up to 3 calls
    cap = run_pytest(
        p.tree,
        test_files=p.test_files,
        config_file=p.config_file,
        capture={
            "targets": list(functions),
            "limit": 4 * per_function,
            "per_test": 3,
            "cloudpickle": cloudpickle,
        },
        timeout=p.suite_timeout(),
        **env,
    )
    captured = cap.extra.get("captured", {})
    callers = cap.extra.get("captured_callers", {})
    raw = []
    for target, blobs in captured.items():
        file, q = target.split("::", 1)
        who = callers.get(target, [])
        for i, b in enumerate(blobs):
            w = who[i] if i < len(who) and isinstance(who[i], dict) else {}
            raw.append(
                {
                    "id": len(raw),
                    "target": target,
                    "module": module_name(p, file),
                    "qualname": q,
                    "blob": b,
                    "generated": False,
                    "caller": w.get("stack"),
                    "test": w.get("test"),
                }
            )

    late: set[str] = set()  # functions whose calls did not finish within the time budget

    def equiv(
        items: list[dict[str, Any]], mode: str, context: str = "plain"
    ) -> dict[str, Any] | None:
        """Calls of ``items`` in chunks of whole functions, within ``budget_s`` seconds: a
        chunk that dies or runs past its share is retried one function per process, and a
        function still unanswered when the budget is spent gets no input (``late``)."""
        deadline = time.monotonic() + budget_s
        targets = sorted({x["target"] for x in items})
        chunks: list[list[str]] = [[]]
        size = 0
        for t in targets:
            n_t = sum(1 for x in items if x["target"] == t)
            if chunks[-1] and size + n_t > EQUIV_CHUNK:
                chunks.append([])
                size = 0
            chunks[-1].append(t)
            size += n_t
        merged: dict[str, Any] = {}

        def one(ts: list[str], share: float, cap: float) -> bool:
            left = deadline - time.monotonic()
            if left < 2:
                late.update(ts)
                return True
            part = [x for x in items if x["target"] in ts]
            out = run_equiv(
                p.tree, part, mode=mode, context=context, timeout=min(left, cap, share), **env
            )
            if out is None:
                return False
            for k, v in out.items():
                if isinstance(v, list):
                    merged.setdefault(k, []).extend(v)
                elif isinstance(v, dict):
                    merged.setdefault(k, {}).update(v)
            return True

        for chunk in chunks:
            n_chunk = sum(1 for x in items if x["target"] in chunk)
            share = max(budget_s * n_chunk / max(1, len(items)), 10.0)
            # several functions: half of what is left stays for their retries
            if one(chunk, share, (deadline - time.monotonic()) / (2 if len(chunk) > 1 else 1)):
                continue
            if len(chunk) < 2:  # already one function: it died or ran long alone
                late.update(chunk)
                continue
            # the process died or ran long: one function per process, each its share of what
            # is left, so one slow function cannot take the others' time
            sizes = {t: sum(1 for x in items if x["target"] == t) for t in chunk}
            todo = sum(sizes.values())
            for t in chunk:
                cap = (deadline - time.monotonic()) * sizes[t] / max(1, todo)
                todo -= sizes[t]
                if not one([t], max(cap, 2.0), cap):
                    late.add(t)
        return merged

    if budget_s is None:
        budget_s = max(EQUIV_BUDGET_S, 20 * p.baseline_s)
    expanded = equiv(raw, "expand") or {"inputs": []}
    items = [{**x, "id": i} for i, x in enumerate(expanded["inputs"])]
    r1 = (equiv(items, "call") or {}).get("results", {})
    items2 = [x for x in items if str(x["id"]) in r1]  # the second call checks the first
    # the check call runs where v2 calls a candidate (the agent's context: its layout, a random
    # hash seed): a result that differs there (the order of a set of strings, a path) would
    # fail even the reference's own code, so such an input is dropped as nondeterministic
    r2 = (equiv(items2, "call", "agent") or {}).get("results", {})
    out: dict[str, list[dict[str, Any]]] = {f: [] for f in functions}
    drops: dict[str, Counter] = {f: Counter() for f in functions}
    for x in items:
        a, b = r1.get(str(x["id"])), r2.get(str(x["id"]))
        if (a is None or b is None) and x["target"] in late:
            drops[x["target"]][
                "its calls did not finish: the equivalence process died or ran past the "
                f"{budget_s:.0f}s budget"
            ] += 1
        elif a is None or b is None:
            drops[x["target"]]["the equivalence process died"] += 1
        elif a != b:
            drops[x["target"]]["nondeterministic result"] += 1
        elif a[0] in ("unloadable", "timeout"):
            drops[x["target"]][f"{a[0]} ({a[1]})" if len(a) > 1 else a[0]] += 1
        else:
            bucket = out[x["target"]]
            n_gen = sum(1 for y in bucket if y["generated"])
            if not x["generated"] or n_gen < per_function:  # captured ones are all kept
                bucket.append(x)
    if pickled is not None:
        for f in functions:
            if out[f]:
                pickled[f] = (
                    "cloudpickle"
                    if any(b"cloudpickle" in base64.b64decode(x["blob"]) for x in out[f])
                    else "pickle"
                )
    if why is not None:
        for f in functions:
            if out[f]:
                continue
            if not captured.get(f):
                why[f] = (
                    "no call was captured (the suite did not run)"
                    if not cap.report_found
                    else "no call with picklable arguments was captured"
                )
            elif not any(x["target"] == f for x in items):
                why[f] = "its captured arguments could not be loaded back"
            else:
                why[f] = "every input was dropped: " + ", ".join(
                    f"{n} {r}" for r, n in drops[f].most_common()
                )
    return out


def discriminated(
    p: Prepared,
    sites: Sequence[Any],
    inputs: Sequence[dict[str, Any]],
    *,
    backend: str | None = None,
) -> dict[str, bool]:
    """Per site (``.function``, ``.mutation``): whether the out-of-process comparison tells its
    mutation apart, i.e. the reference tree with that mutation alone fails the comparison on
    the site's own inputs.

    Having inputs is not enough: inputs that never reach the mutated branch (on toolz, the
    calls that reach ``curry._should_curry``'s broken branch come from a function defined in a
    test and are not captured) leave a site "covered" whose only evidence is a pytest outcome
    computed in the candidate's process. A candidate run that does not complete counts as
    not telling it apart.

    Every tree is called on all the task's inputs in the comparison's first context only: the
    reference's answers are then computed once and cached under the key grading uses, and a
    mutation (a plain code change) answers alike in every context; fewer contexts can only
    leave more sites to the sealed channel."""
    out: dict[str, bool] = {}
    every = [dict(x) for x in inputs]
    with tempfile.TemporaryDirectory(prefix="vg-disc-") as tmp:
        for i, s in enumerate(sites):
            if not any(x["target"] == s.function for x in every):
                out[s.function] = False
                continue
            tree = Path(tmp) / f"s{i}"
            mutant_tree(p, [s.mutation], tree)
            eq = equivalence.check(
                p, p.tree, tree, every, backend=backend, contexts=equivalence.CONTEXTS[:1]
            )
            out[s.function] = eq.candidate_ran and not eq.target_ok(s.function)
            shutil.rmtree(tree, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- make-tasks


#: candidates validated at a time before asking whether the search has enough sites
VALIDATE_CHUNK = 16


def enough_sites(
    pool: combine.Pool, ks: Sequence[int], n: int, functions: int | None = None
) -> bool:
    """Whether the valid mutations so far are enough for the search to make ``n`` tasks of each
    size in ``ks``, so the remaining candidates need not be validated (validation is a suite run
    each, the largest cost before the first task): sites in at least ``max(3 k, n + k)``
    distinct functions for the largest k (room for the sites the search sets aside and the
    combinations a build rejects), or in every one of the ``functions`` the candidates mutate
    when there are fewer, and at least ``10 n`` possible tasks for every k."""
    k = max(ks)
    want = max(3 * k, n + k)
    if len(pool.by_fn) < (want if functions is None else min(want, functions)):
        return False
    return all(pool.upper_bound(kk)[0] >= 10 * n for kk in ks)


class SiteChecks:
    """The checks a site passes or fails alone, whatever it is combined with, run once per site
    when the search first wants it (:meth:`usable`): a site whose equivalence inputs tell its
    mutation apart (:func:`discriminated`) serves as it is; otherwise its tests must be carried
    through the sealed channel (``forward.carries``: pass on the reference, fail on the mutant),
    the route v2 grades a site with no telling input by; a site neither tells is set aside
    (kept only under ``allow_tests_only``). Methods of classes count apart in :meth:`routes`,
    since their inputs (a receiver object) are the ones most often not captured."""

    def __init__(
        self,
        p: Prepared,
        pool: combine.Pool,
        inputs: dict[str, list[dict[str, Any]]],
        *,
        backend: str | None = None,
        allow_tests_only: bool = False,
        pickled: dict[str, str] | None = None,
        log=lambda s: None,
    ) -> None:
        self.p, self.pool, self.inputs = p, pool, inputs
        self.log = log
        self.pickled = pickled or {}
        self.backend, self.allow_tests_only = backend, allow_tests_only
        self.told: dict[int, bool] = {}
        self.route: dict[int, str] = {}
        self.rejected: Counter = Counter()
        self._index = {id(s): i for i, s in enumerate(pool.sites)}

    def usable(self, i: int) -> bool:
        """Whether site ``i`` passes its own checks; run once per site, however many searches
        (one per k asked) want it: a site's checks do not depend on what it is combined with."""
        if i in self.route:
            return self.route[i] != "rejected"
        ok = self._usable(i)
        s = self.pool.sites[i]
        self.log(f"  site {s.function} ({s.op}): {self.route[i]}")
        return ok

    def _usable(self, i: int) -> bool:
        s = self.pool.sites[i]
        own = self.inputs.get(s.function, [])
        told = bool(own) and discriminated(self.p, [s], own, backend=self.backend)[s.function]
        self.told[i] = told
        if told:
            self.route[i] = f"comparison ({self.pickled.get(s.function, 'pickle')})"
            return True
        with tempfile.TemporaryDirectory(prefix="vg-site-") as tmp:
            mutant_tree(self.p, [s.mutation], Path(tmp) / "t")
            why = forward.carries(self.p, [s], Path(tmp) / "t", backend=self.backend)
        if why is None:
            self.route[i] = "sealed channel"
            return True
        if self.allow_tests_only and own:  # (a site with no input must be carried)
            self.route[i] = "in process"
            return True
        self.route[i] = "rejected"
        self.rejected[
            ("its inputs do not tell its mutation apart" if own else "it has no equivalence input")
            + " and its tests cannot be carried to a "
            "separate process"
        ] += 1
        return False

    def told_for(self, sites: Sequence[ValidMutation]) -> dict[str, bool]:
        """{function: told apart by its inputs} for sites already checked."""
        return {
            s.function: self.told[self._index[id(s)]]
            for s in sites
            if self._index.get(id(s)) in self.told
        }

    def routes(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {"methods": {}, "functions": {}}
        for i, r in sorted(self.route.items()):
            kind = "methods" if "." in self.pool.sites[i].qualname else "functions"
            out[kind][r] = out[kind].get(r, 0) + 1
        return out


class GenStats(BaseModel):
    """How task generation went (saved as index.json next to the task files)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    candidates: int
    valid: int
    rejected: dict[str, int]
    combos_tried: int
    tasks: int
    task_rejected: dict[str, int]
    prepare_s: float
    validate_s: float
    tasks_s: float
    total_s: float
    task_files: list[str]
    crashy_valid: int = 0  # valid mutations that crash at first call (dropped unless allowed)
    warnings: list[str] = []  # e.g. a site with no equivalence input, and why
    hints: list[str] = []  # what to try when fewer tasks than asked came out
    coverage: float = 1.0  # share of the tasks' sites with out-of-process (equivalence) inputs
    #: share of the tasks' sites whose mutation the out-of-process comparison tells apart (the
    #: others have their tests carried through the sealed channel); None: not checked
    discrimination: float | None = None
    command: str = ""  # the make-tasks command that makes these tasks again (add --out DIR)
    #: distinct tasks the valid mutations could make (every choice of sites in distinct
    #: functions that splits into visible and hidden: ``combine.Pool.upper_bound``), summed
    #: over the k asked for; capped: past ``combine.MAX_GROUPS`` hidden groups, a lower bound
    upper_bound: int | None = None
    upper_bound_capped: bool = False
    #: sites the search looked at and set aside before any build, by reason
    site_rejected: dict[str, int] = {}
    #: how the sites the search looked at are told apart out of the candidate's process, split
    #: into methods and functions: "comparison (pickle)" or "comparison (cloudpickle)"
    #: (equivalence inputs that tell the mutation apart, and how they were serialised),
    #: "sealed channel" (their tests, calls carried to the candidate), "in process" (neither;
    #: kept under allow_tests_only), "rejected"
    site_routes: dict[str, dict[str, int]] = {}
    #: the tasks made, by number of sites; how many span files; their sites that are methods
    k_made: dict[str, int] = {}
    cross_file: int = 0
    method_sites: int = 0
    #: candidates whose validation was remembered from an earlier run (validate_s is then less
    #: than a fresh run's)
    validated_cached: int = 0
    #: where the tasks stage's seconds went: ``capture`` (recording equivalence inputs),
    #: ``site_checks`` (each site's own checks, on the search's thread), ``build`` (building and
    #: checking combinations: summed over the builder threads, so it can exceed the wall time)
    phase_s: dict[str, float] = {}
    #: candidates validated: fewer than ``candidates`` when the first chunks already gave the
    #: search enough sites (:func:`enough_sites`); ``upper_bound`` counts the tasks these make
    validated: int | None = None
    #: empty when make-tasks ran to its end; else where a time limit stopped it and what was
    #: done by then ("time limit 300 s reached in validation: ...")
    stopped: str = ""


def rejection_lines(stats: GenStats) -> list[str]:
    """The rejection histogram, one line per reason, most frequent first."""
    lines = [
        f"  mutation rejected ({n}): {r}"
        for r, n in sorted(stats.rejected.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    lines += [
        f"  task rejected ({n}): {r}"
        for r, n in sorted(stats.task_rejected.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    return lines


def hints_for(
    stats: GenStats, *, k: int, n_functions: int, combos: int, min_hidden: int
) -> list[str]:
    """What to try when make-tasks made fewer tasks than asked, from where candidates went."""
    h: list[str] = []
    rej = stats.rejected
    if stats.valid == 0 and rej.get("no test fails", 0) >= stats.candidates // 2:
        h.append("most mutations break no test: the suite is thin here; raise --max-candidates")
    if rej.get(validate_mod.CRASHY):
        h.append(
            f"{rej[validate_mod.CRASHY]} valid mutation(s) only crash at first call "
            "(TypeError/AttributeError/NameError) and were dropped; --allow-crashy keeps "
            "them"
        )
    if rej.get("breaks unreached tests", 0) >= max(1, stats.candidates // 3):
        h.append(
            f"{rej['breaks unreached tests']} mutation(s) broke tests that, per the reach "
            "map, never call the mutated function: results kept across tests by other "
            "means than functools caches (module-level tables, hand-made memos), or "
            "calls made in a subprocess, hide them; such functions cannot be sites"
        )
    if rej.get("timeout"):
        h.append(
            "some suite runs timed out: a mutation that loops (remembered per prepared tree, "
            "so a second run does not wait for it again), or a machine too loaded for "
            "validate.validation_timeout"
        )
    if rej.get("no report (the suite crashed)"):
        h.append(
            "some mutants crash the whole suite (import-time code?); nothing to do, they "
            "are not bugs tests can localize"
        )
    if n_functions < k:
        h.append(
            f"only {n_functions} function(s) have a valid mutation but --k is {k}: raise "
            f"--max-candidates or lower --k"
        )
    elif combos == 0:
        h.append(
            f"no split of the tests where visible tests avoid the hidden sites and each "
            f"hidden site breaks >= {min_hidden} hidden test(s): try a smaller --k, "
            "--min-hidden 1, or more candidates"
        )
    if stats.task_rejected:
        h.append(
            "combinations were built but rejected (see the reasons above): try another "
            "--seed or more --max-candidates"
        )
    return h


def make_tasks_command(
    spec: str,
    *,
    k: int | str,
    n: int,
    seed: int,
    max_candidates: int,
    test_deps: list[str],
    env: str,
    prompt_style: str,
    allow_tests_only: bool,
    allow_crashy: bool,
    min_hidden: int,
    cloudpickle_inputs: bool = False,
) -> str:
    """The ``verigap repos make-tasks`` command line for these settings (without ``--out``)."""
    args = [
        "verigap",
        "repos",
        "make-tasks",
        spec,
        "--k",
        str(k),
        "--n",
        str(n),
        "--seed",
        str(seed),
        "--max-candidates",
        str(max_candidates),
        "--min-hidden",
        str(min_hidden),
    ]
    args += [x for d in test_deps for x in ("--test-dep", d)]
    args += ["--env", env] if env != "venv" else []
    args += ["--prompt-style", prompt_style] if prompt_style != "tests" else []
    args += ["--allow-tests-only"] if allow_tests_only else []
    args += ["--allow-crashy"] if allow_crashy else []
    args += ["--cloudpickle-inputs"] if cloudpickle_inputs else []
    return shlex.join(args)


def make_tasks(
    spec: str,
    out: Path,
    *,
    k: int | str = 4,
    n: int = 20,
    seed: int = 0,
    max_candidates: int = 80,
    workers: int = 2,
    test_deps: list[str] | None = None,
    env: str = "venv",
    backend: str | None = None,
    max_tries: int | None = None,
    prompt_style: str = "tests",
    allow_tests_only: bool = False,
    allow_crashy: bool = False,
    min_hidden: int = 2,
    cloudpickle_inputs: bool = False,
    time_limit_s: float | None = None,
    keep=None,
    on_stage=None,
    log=print,
) -> GenStats:
    """Prepare ``spec`` and write up to ``n`` validated tasks of ``k`` sites into ``out``
    (``k`` a number or a range such as ``"2-4"``: the tasks then take each size in turn).

    The combinations are searched, not sampled: only sets of sites that split into visible and
    hidden are built (:mod:`verigap.repos.combine`), each site's own checks run once, before it
    enters any combination (:class:`SiteChecks`), and at most ``max_tries`` (default ``3n+6``)
    combinations are built. Mutations that crash at first call are left out unless
    ``allow_crashy``; every hidden site must break at least ``min_hidden`` hidden tests;
    ``cloudpickle_inputs`` captures calls pickle cannot serialise (:func:`collect_inputs`).

    ``time_limit_s`` (counted once the project is prepared, as ``total_s - prepare_s`` is) ends
    each stage with what it has once passed: unvalidated candidates are counted as not run, the capture gets what time is
    left, and no new combination is built; the tasks written so far stay, and
    ``GenStats.stopped`` says where it stopped. ``on_stage(name)`` is told each stage as it
    starts ("prepare", "validation", "capture", "combinations"), so a caller that is stopped
    from outside knows where. ``keep(task, prepared)`` is asked about each built task before it
    is written and returns why it must not be kept, or ``None``: the command and the benchmark
    pass :func:`verigap.repos.paid.keep_if_paid`, so no task whose reference is unpaid is
    ever written (the grader is a layer above this module)."""
    ks = combine.k_values(k)
    if prompt_style not in PROMPT_STYLES:
        raise ConfigError(f"--prompt-style {prompt_style!r}: use one of {', '.join(PROMPT_STYLES)}")
    if time_limit_s is not None and time_limit_s <= 0:
        raise ConfigError(f"time limit {time_limit_s}: give a positive number of seconds")
    stage = on_stage or (lambda _name: None)
    deadline: float | None = None
    stopped: list[str] = []

    def past(where: str) -> bool:
        """Whether the time limit has passed; the first stage that sees it is recorded."""
        if deadline is None or time.monotonic() <= deadline:
            return False
        if not stopped:
            stopped.append(where)
        return True

    t0 = time.perf_counter()
    stage("prepare")
    p = prepare(spec, test_deps=test_deps, env=env, backend=backend)
    t_prep = time.perf_counter() - t0
    if time_limit_s is not None:
        deadline = time.monotonic() + time_limit_s
    log(
        f"prepared {spec}: {len(p.passing)} passing tests, {len(p.reach)} reached functions, "
        f"suite {p.baseline_s:.2f}s"
    )
    t1 = time.perf_counter()
    cands = candidates(p, max_candidates=max_candidates, seed=seed)
    if p.stripped_addopts:
        log(f"dropped from the project's addopts (reporting only): {' '.join(p.stripped_addopts)}")
    cached = sum(1 for m in cands if validate_mod.cache_path(p, m).is_file())
    stage("validation")
    groups = shared_bodies(p)
    n_functions = len({m.function for m in cands})
    runners = WarmRunners(p, backend)
    valid: list[ValidMutation] = []
    rejected: dict[str, int] = {}
    seen: set[str] = set()
    done = 0
    try:  # in chunks, until the valid mutations are enough for the search (enough_sites)
        while done < len(cands):
            chunk = cands[done : done + VALIDATE_CHUNK]
            done += len(chunk)
            got, why = validate(
                p,
                chunk,
                workers=workers,
                backend=backend,
                allow_crashy=allow_crashy,
                deadline=deadline,
                runners=runners,
            )
            for r, c in why.items():
                rejected[r] = rejected.get(r, 0) + c
            for v in got:  # a duplicate of a mutation from an earlier chunk
                if v.sha256 in seen:
                    rejected["duplicate"] = rejected.get("duplicate", 0) + 1
                else:
                    seen.add(v.sha256)
                    valid.append(v)
            pool = combine.Pool(valid, p.reach, min_hidden=min_hidden, groups=groups)
            if done < len(cands) and enough_sites(pool, ks, n, n_functions):
                break
    finally:
        runners.close()
    if rejected.get(validate_mod.NOT_RUN):
        past("validation")
    t_val = time.perf_counter() - t1
    log(
        f"validated {done} of {len(cands)} candidates in {t_val:.1f}s"
        + (" (enough for the search)" if done < len(cands) else "")
        + f": {len(valid)} valid; rejected: {rejected}"
    )
    t2 = time.perf_counter()
    pool = combine.Pool(valid, p.reach, min_hidden=min_hidden, groups=groups)
    bounds = {kk: pool.upper_bound(kk) for kk in ks}
    upper = sum(b for b, _ in bounds.values())
    log(
        f"{len(valid)} valid mutation(s) in {len(pool.by_fn)} function(s) could make "
        f"{'at least ' if any(c for _, c in bounds.values()) else ''}{upper} task(s) "
        f"({', '.join(f'k={kk}: {b}' for kk, (b, _) in bounds.items())})"
    )
    out.mkdir(parents=True, exist_ok=True)
    no_input: dict[str, str] = {}
    pickled: dict[str, str] = {}
    t_cap = time.perf_counter()
    stage("capture")
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        past("capture")
    inputs = (
        collect_inputs(
            p,
            sorted(pool.by_fn),
            backend=backend,
            why=no_input,
            pickled=pickled,
            cloudpickle=cloudpickle_inputs,
            # each of its comparison rounds gets a third of the time left
            budget_s=None if left is None else max(1.0, min(EQUIV_BUDGET_S, left / 3)),
        )
        if upper and (left is None or left > 0)
        else {}
    )
    phase: dict[str, float] = {"capture": time.perf_counter() - t_cap, "site_checks": 0.0}
    phase["build"] = 0.0
    warnings = [f"no equivalence input for {f}: {w}" for f, w in sorted(no_input.items())]
    for w in warnings:
        log(f"warning: {w}")
    quality = SiteChecks(
        p,
        pool,
        inputs,
        backend=backend,
        allow_tests_only=allow_tests_only,
        pickled=pickled,
        log=log,
    )

    def usable(i: int) -> bool:
        t = time.perf_counter()
        try:
            return quality.usable(i)
        finally:
            phase["site_checks"] += time.perf_counter() - t

    gens = [pool.combinations(kk, seed=seed, usable=usable) for kk in ks]

    task_files: list[str] = []
    task_rejected: dict[str, int] = {}
    n_sites = n_covered = n_told = cross = methods = 0
    k_made: dict[str, int] = {}
    tries = 0
    budget = max_tries or 3 * n + 6

    def combos():
        """Combinations in turn from each k (a spread of difficulty), until the budget."""
        nonlocal tries
        while gens and tries < budget and not past("combinations"):
            for g in list(gens):
                sites = next(g, None) if tries < budget else None
                if sites is None:
                    gens.remove(g)
                    continue
                tries += 1
                yield tries, sites

    def build(number: int, sites: list[ValidMutation]):
        t = time.perf_counter()
        try:
            return _build(number, sites)
        finally:
            with phase_lock:
                phase["build"] += time.perf_counter() - t

    phase_lock = threading.Lock()
    build_runners = WarmRunners(p, backend)

    def _build(number: int, sites: list[ValidMutation]):
        task, why = _build_unchecked(number, sites)
        if task is not None and keep is not None:
            t = time.perf_counter()
            why = keep(task, p)
            with phase_lock:  # part of the build's time, reported on its own as well
                phase["reference"] = phase.get("reference", 0.0) + time.perf_counter() - t
            if why:
                return None, why
        return task, why

    def _build_unchecked(number: int, sites: list[ValidMutation]):
        return build_task(
            p,
            sites,
            combine.visible_count(len(sites)),
            inputs,
            seed=seed,
            index=number,
            backend=backend,
            prompt_style=prompt_style,
            allow_tests_only=allow_tests_only,
            min_hidden=min_hidden,
            told=quality.told_for(sites),
            warm=build_runners.get(),
        )

    # ``workers`` builds at a time (each is sandboxed runs: the cores wait on them), never more
    # than could still be needed; results are taken in the order the combinations came, so the
    # tasks kept and their numbering do not depend on which build finishes first
    stage("combinations")
    source = combos()
    flight: deque = deque()
    with (
        contextlib.closing(build_runners),
        ThreadPoolExecutor(max_workers=max(1, workers)) as builders,
    ):
        while True:
            while len(flight) < max(1, workers) and len(task_files) + len(flight) < n:
                nxt = next(source, None)
                if nxt is None:
                    break
                flight.append((nxt[0], nxt[1], builders.submit(build, *nxt)))
            if not flight:
                break
            number, sites, fut = flight.popleft()
            task, why = fut.result()
            if task is None:
                task_rejected[why] = task_rejected.get(why, 0) + 1
                log(f"  combination {number} (k={len(sites)}) rejected: {why}")
                continue
            if len(task_files) >= n:
                continue
            task.task_id = re.sub(
                rf"-s{seed}-\d+-([0-9a-f]+)$",
                lambda mt: f"-s{seed}-{len(task_files):03d}-{mt.group(1)}",
                task.task_id,
            )
            path = out / f"{task.task_id}.json"
            task.save(path)
            task_files.append(path.name)
            k_made[str(len(task.sites))] = k_made.get(str(len(task.sites)), 0) + 1
            cross += bool(task.difficulty and task.difficulty.cross_file)
            methods += sum(1 for s in task.sites if "." in s.qualname)
            n_sites += len(task.sites)
            n_covered += sum(1 for s in task.sites if not s.tests_only)
            n_told += sum(1 for s in task.sites if s.discrimination == "comparison")
            told = [s.site_id for s in task.sites if s.discrimination != "comparison"]
            log(
                f"  task {task.task_id} (k={len(task.sites)}): {len(task.visible_tests)} "
                f"visible / {len(task.hidden_tests)} hidden tests, {len(task.equivalence)} "
                "equivalence inputs"
                + (f"; not told apart by the comparison: {', '.join(told)}" if told else "")
            )
    stats = GenStats(
        validated=done,
        command=make_tasks_command(
            spec,
            k=k,
            n=n,
            seed=seed,
            max_candidates=max_candidates,
            test_deps=test_deps or [],
            env=env,
            prompt_style=prompt_style,
            allow_tests_only=allow_tests_only,
            allow_crashy=allow_crashy,
            min_hidden=min_hidden,
            cloudpickle_inputs=cloudpickle_inputs,
        ),
        source=spec,
        candidates=len(cands),
        valid=len(valid),
        rejected=rejected,
        combos_tried=tries,
        tasks=len(task_files),
        task_rejected=task_rejected,
        upper_bound=upper,
        upper_bound_capped=any(c for _, c in bounds.values()),
        site_rejected=dict(quality.rejected),
        site_routes=quality.routes(),
        k_made=k_made,
        cross_file=cross,
        method_sites=methods,
        validated_cached=cached,
        phase_s={k2: round(v, 2) for k2, v in phase.items()},
        prepare_s=round(t_prep, 2),
        validate_s=round(t_val, 2),
        tasks_s=round(time.perf_counter() - t2, 2),
        total_s=round(time.perf_counter() - t0, 2),
        task_files=task_files,
        coverage=round(n_covered / n_sites, 4) if n_sites else 1.0,
        discrimination=round(n_told / n_sites, 4) if n_sites else 1.0,
        crashy_valid=rejected.get(validate_mod.CRASHY, 0) + sum(1 for v in valid if v.crash),
        warnings=warnings,
    )
    if stopped:
        stats.stopped = (
            f"time limit {time_limit_s:g} s reached in {stopped[0]}: "
            f"{done - rejected.get(validate_mod.NOT_RUN, 0)} of {len(cands)} candidates "
            f"validated, {tries} combination(s) built, {len(task_files)} task(s) written"
        )
        log(stats.stopped)
    if stats.tasks < n:
        stats.hints = hints_for(
            stats, k=min(ks), n_functions=len(pool.by_fn), combos=upper, min_hidden=min_hidden
        )
        log(f"{stats.tasks} of {n} tasks; where the candidates went:")
        for line in rejection_lines(stats):
            log(line)
        for h in stats.hints:
            log(f"  try: {h}")
    write_json_atomic(out / "index.json", stats.model_dump())
    return stats


def _slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", sources.project_name(spec)).strip("-").lower()


def build_task(
    p: Prepared,
    sites: Sequence[ValidMutation],
    n_vis: int,
    inputs: dict[str, list[dict[str, Any]]],
    *,
    seed: int,
    index: int,
    backend: str | None = None,
    prompt_style: str = "tests",
    allow_tests_only: bool = False,
    min_hidden: int = 1,
    told: dict[str, bool] | None = None,
    warm: WarmRunner | None = None,
) -> tuple[RepoTask | None, str]:
    """Build and check one task: the combined mutant must break a visible test per visible site
    and a hidden test per hidden site, and the workspace must collect exactly the visible tests.
    A site with no usable equivalence input is kept and marked ``tests_only`` when its calls can
    be carried from a pytest run on the reference to the candidate's process
    (``forward.carries``; ``discrimination="forwarded"``), and rejects the task otherwise. A site
    whose inputs do not
    tell its mutation apart (:func:`discriminated`) has its tests carried the same way (marked
    ``discrimination="forwarded"``); if they cannot be, the task is rejected, unless
    ``allow_tests_only`` (kept as ``tests_only``, ``discrimination="in_process"``). ``told``:
    the discrimination of these sites when already checked (:class:`SiteChecks`); a mutation
    answers alike alone and in combination, so it is not checked again. ``warm``: run the
    combined mutant's whole suite in that runner's fork server (the cold run's verdicts, without
    a sandbox, an interpreter and pytest's import to start: most of a small suite's run).

    Every test the combined mutant breaks must reach one of its sites (validation runs only the
    tests that reach the mutated function, so this full run is where a mutation that breaks
    other tests, through state kept across tests, is caught)."""
    uncovered = {s.function for s in sites if not inputs.get(s.function)}
    split = split_tests(p, sites, n_vis)
    if split is None:
        return None, "no visible/hidden split"
    visible, hidden = split
    try:  # depends on the split alone: checked before any suite runs
        vfiles, removed = _visible_layout(p, visible)
    except SharedHiddenBody:
        return None, "a hidden test's body is shared with a visible test"
    with tempfile.TemporaryDirectory(prefix="vg-task-") as tmp:
        full = Path(tmp) / "full"
        texts = mutant_tree(p, [s.mutation for s in sites], full)
        run = (
            warm.run(texts, p.test_files, p.suite_timeout())
            if warm is not None
            else run_suite(p, full, backend=backend)
        )
        if run.timed_out or not run.report_found:
            return None, "combined mutant did not run"
        broken = run.failing(p.passing)
        vset, hset = set(visible), set(hidden)
        if any(not (set(s.fail_to_pass) & broken & vset) for s in sites[:n_vis]):
            return None, "a visible site is masked in combination"
        if any(not (set(s.fail_to_pass) & broken & hset) for s in sites[n_vis:]):
            return None, "a hidden site is masked in combination"
        if any(len(set(s.fail_to_pass) & broken & hset) < min_hidden for s in sites[n_vis:]):
            return None, f"a hidden site breaks fewer than {min_hidden} hidden tests"
        if n_vis == len(sites) and len(broken & hset) < min_hidden:  # a single site's held-out
            return None, f"the held-out tests break fewer than {min_hidden} times"
        if (broken & vset) - {t for s in sites[:n_vis] for t in p.reach.get(s.function, ())}:
            return None, "visible failures not explained by visible sites"
        if broken - {t for s in sites for t in p.reach.get(s.function, ())}:
            return None, "breaks tests that do not reach its sites"
        if uncovered:  # their tests will run on the reference with calls carried (forward.py)
            why = forward.carries(
                p, [s for s in sites if s.function in uncovered], full, backend=backend
            )
            if why is not None:
                return None, f"a tests_only site cannot be carried to a separate process ({why})"
        equiv = []
        for s in sites:
            for x in inputs.get(s.function, []):
                equiv.append(EquivInput(**{**x, "id": len(equiv)}))
        # inputs that do not tell a site's mutation apart are no evidence about it: its tests
        # go through the sealed channel as well, or the task is rejected
        todo = [s for s in sites if s.function not in uncovered and s.function not in (told or {})]
        told = {
            **(told or {}),
            **(
                discriminated(p, todo, [x.model_dump() for x in equiv], backend=backend)
                if todo
                else {}
            ),
        }
        unseen = [s for s in sites if s.function not in uncovered and not told[s.function]]
        in_process: set[str] = set()
        if unseen:
            why = forward.carries(p, unseen, full, backend=backend)
            if why is not None and not allow_tests_only:
                return None, (
                    "a site's equivalence inputs do not tell its mutation apart and "
                    f"its tests cannot be carried to a separate process ({why})"
                )
            if why is not None:  # kept, marked tests_only: only in-process outcomes tell it
                in_process = {s.function for s in unseen}

        def discrimination(f: str) -> str:
            return "in_process" if f in in_process else "comparison" if told.get(f) else "forwarded"

        src_texts = {s.file: (p.tree / s.file).read_text() for s in sites}
        name = _slug(p.spec)
        digest = hashlib.sha256(
            "".join(sorted(s.sha256 + s.function for s in sites)).encode()
        ).hexdigest()[:8]
        task = RepoTask(
            task_id=f"{name}-s{seed}-{index:03d}-{digest}",
            source={
                "spec": p.spec,
                "key": p.key,
                "tree_sha256": p.tree_sha256,
                "env": p.env,
                "test_deps": p.test_deps,
            },
            seed=seed,
            sites=[
                Site(
                    site_id=f"site{i}",
                    file=s.file,
                    qualname=s.qualname,
                    op=s.op,
                    index=s.index,
                    visible=i < n_vis,
                    fail_to_pass=s.fail_to_pass,
                    original=mutate.function_source(src_texts[s.file], s.qualname),
                    mutated=mutate.function_source(texts[s.file], s.qualname),
                    tests_only=s.function in uncovered | in_process,
                    discrimination=discrimination(s.function),
                )
                for i, s in enumerate(sites)
            ],
            files_sha256={f: hashlib.sha256(t.encode()).hexdigest() for f, t in texts.items()},
            visible_tests=sorted(visible),
            hidden_tests=sorted(hidden),
            fail_to_pass=sorted(broken),
            visible_test_files=vfiles,
            removed_units=removed,
            source_paths=p.source_paths,
            equivalence=equiv,
            prompt="",
        )
        try:
            ws = materialize_workspace(p, task, Path(tmp) / "ws")
        except ValueError:
            return None, "hidden tests cannot be cut from the visible files"
        vis = run_pytest(
            ws,
            python=p.python,
            env_prefix=Path(p.env_prefix),
            import_root=p.import_root,
            test_files=vfiles,
            config_file=p.config_file,
            backend=backend,
            timeout=p.suite_timeout(),
        )
        got = {t for t in vis.outcomes if t not in p.not_passing}
        if got != vset:
            return None, "workspace does not collect exactly the visible tests"
        if vis.failing(visible) != broken & vset:
            return None, "workspace visible failures differ from the full run"
        # the fixed workspace must pass every visible test: cutting hidden tests must not break
        # a visible one (e.g. a hidden test function that visible tests call as a helper)
        fixed = Path(tmp) / "fixed"
        shutil.copytree(ws, fixed, ignore=shutil.ignore_patterns(".git"))
        for f in {s.file for s in sites}:
            (fixed / f).write_text((p.tree / f).read_text())
        ok = run_pytest(
            fixed,
            python=p.python,
            env_prefix=Path(p.env_prefix),
            import_root=p.import_root,
            test_files=vfiles,
            config_file=p.config_file,
            backend=backend,
            timeout=p.suite_timeout(),
        )
        if ok.failing(visible):
            return None, "the fixed workspace fails a visible test"
        task.difficulty = estimate(task.sites, broken, visible, hidden)
        task.prompt = PROMPT.format(
            name=sources.project_name(p.spec), output=_clean_output(vis.stdout, ws)
        )
        if prompt_style == "ticket":
            from verigap.repos.tickets import ticket_prompt

            task.prompt = ticket_prompt(task, _clean_output(vis.stdout, ws))
    return task, ""


def unchecked(task: RepoTask) -> list[str]:
    """The build-time checks a task file predates (made by an older verigap, or mined from
    history): ``"discrimination"``, a site never checked to be told apart by the comparison
    (:func:`discriminated`); ``"callers"``, no input records its test's caller, so the
    comparison cannot call from a test's frame. v2 grades such a file on weaker evidence, and
    every verdict lists what it lacks."""
    out = []
    if any(s.discrimination is None for s in task.sites):
        out.append("discrimination")
    if task.equivalence and all(x.caller is None for x in task.equivalence):
        out.append("callers")
    return out


def load_tasks(path: Path) -> list[RepoTask]:
    """One task file, or every task file in a directory (index.json excluded). Warns when
    files predate the build-time checks (:func:`unchecked`)."""
    path = Path(path)
    files = (
        [path]
        if path.is_file()
        else sorted(f for f in path.glob("*.json") if f.name != "index.json")
    )
    if not files:
        raise ConfigError(f"no task files at {path}; create them with `verigap repos make-tasks`")
    tasks = [RepoTask.load(f) for f in files]
    lacking = [(t, unchecked(t)) for t in tasks]
    for mined, why, fix in (
        (
            False,
            "predate",
            "make them again with `verigap repos make-tasks` (the command is "
            "in the set's index.json)",
        ),
        (
            True,
            "predate",
            "mine them again with `verigap repos mine`, which checks "
            "mined sites as it checks mutated ones",
        ),
    ):
        old = [lacks for t, lacks in lacking if lacks and bool(t.origin) == mined]
        if old:
            lacks = sorted({c for task_lacks in old for c in task_lacks})
            warnings.warn(
                f"{len(old)} of {len(tasks)} {'mined ' * mined}task file(s) at {path} "
                f"{why} the build-time checks ({', '.join(lacks)}): v2 grades them "
                f"on weaker evidence (docs/repos.md); {fix}",
                UserWarning,
                stacklevel=2,
            )
    return tasks


def prepared_for(task: RepoTask, *, backend: str | None = None) -> Prepared:
    """The prepared environment a task was built from, re-preparing it on a fresh machine."""
    try:
        p = load_prepared(task.source.key)
    except ConfigError:
        p = prepare(
            task.source.spec, test_deps=task.source.test_deps, env=task.source.env, backend=backend
        )
    if p.tree_sha256 != task.source.tree_sha256:
        raise ConfigError(
            f"task {task.task_id}: source {task.source.spec} changed since the task "
            "was made (tree hash differs); re-run make-tasks"
        )
    return p


def task_json_schema() -> dict[str, Any]:
    return RepoTask.model_json_schema()


__all__ = [
    "RepoTask",
    "Site",
    "EquivInput",
    "make_tasks",
    "load_tasks",
    "materialize_workspace",
    "base_tree",
    "prepared_for",
]
