"""``verigap repos mine REPO``: bug-fix tasks mined from a local git repository's history.

A candidate is a commit with one parent that changes project source and tests together. Its
task is built at the parent commit with the commit's changes to source and tests applied (the
*reference*: the fix and its tests) and the source change taken back out again (the *task base*:
the bug, plus the tests that catch it). Other files (docs, changelog, packaging) stay as they
were at the parent, so nothing in the tree tells the fix.

- The tests that fail on the task base and pass on the reference are FAIL_TO_PASS; every other
  test that passes on the reference is PASS_TO_PASS.
- FAIL_TO_PASS is split by test function: half visible (the agent sees them fail, so a no-op is
  never paid), the rest hidden; with a single failing test, the hidden tests are the other tests
  that call the fixed functions.
- The sites are the functions present on both sides whose code the commit changed (at least
  one); the task base holds the parent's whole file (``RepoTask.base_files``), so the task is
  the same kind of object as a mutation task: graders v1/v2, the baselines and the red-team
  battery use it unchanged.
- ``--k K`` > 1 puts K-1 validated mutations beside the mined bug, half the sites reached by
  visible tests and the rest only by hidden ones (:func:`compose`).
- The environment is a venv per dependency set (the declared dependencies and the test deps),
  shared by every commit that declares the same ones; each reference tree is prepared (baseline
  and reach map) in the usual cache.
- The workspace is built by the usual ``materialize_workspace``: a tree from ``git archive``
  (never a clone), visible tests only, and one fresh commit, so no object after the base is in
  it (SWE-bench issue #465).

Every commit walked ends as a task or as one reason in the rejection histogram.
"""

from __future__ import annotations

import ast
import configparser
import fcntl
import hashlib
import io
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from pydantic import BaseModel, ConfigDict

from verigap.errors import ConfigError
from verigap.repos import combine, equivalence, forward, mutate, sources
from verigap.repos.changes import TEST_DIRS, classify
from verigap.repos.prepare import (
    NOT_SOURCE_DIRS,
    PREPARED,
    TEST_FILE,
    Prepared,
    _dist_name,
    build_env,
    ensure_project_not_installed,
    env_key,
    find_config,
    find_layout,
    split_reach,
)
from verigap.repos.pytest_run import cache_root, run_pytest
from verigap.repos.shown_command import shown_refusal
from verigap.repos.tasks import (
    PROMPT,
    PROMPT_STYLES,
    RepoTask,
    SharedHiddenBody,
    Site,
    _clean_output,
    _visible_layout,
    collect_inputs,
    discriminated,
    materialize_workspace,
    prepared_for,
    shared_bodies,
    split_tests,
    unit_of,
)
from verigap.repos.tickets import commit_kind, feature_ticket
from verigap.repos.validate import ValidMutation, candidates, run_suite, validate
from verigap.runs import write_json_atomic

NOT_SOURCE_FILES = {"setup.py", "noxfile.py", "versioneer.py", "fabfile.py", "conf.py"}


# --------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()[:300]}")
    return proc.stdout


def _git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def open_repo(path: str | Path) -> Path:
    """The top of the git work tree at ``path``; a clear error when it is not one."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise ConfigError(
            f"{path}: no such directory; pass a local git repository "
            "(a bundle can be cloned with `git clone X.bundle DIR`)"
        )
    proc = subprocess.run(
        ["git", "-C", str(p), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ConfigError(
            f"{path} is not a git repository (git rev-parse failed); mining needs "
            "a repository with its history, e.g. `git clone URL DIR`"
        )
    return Path(proc.stdout.strip())


@dataclass
class Commit:
    sha: str
    parents: list[str]
    message: str
    changes: list[tuple[str, str]] = field(default_factory=list)  # (status letter, path)

    @property
    def subject(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else ""


def walk(
    repo: Path, rev_range: str, max_commits: int, *, first_parent: bool = False
) -> list[Commit]:
    """The newest ``max_commits`` commits of ``rev_range`` with the files each one changes.

    ``first_parent``: the main line only, a merge's files being its change against its first
    parent, so a merged pull request is one change (its feature and its tests together)."""
    fmt = "%x1e%H%x1f%P%x1f%B%x1f"
    mainline = ["--first-parent", "--diff-merges=first-parent"] if first_parent else []
    out = _git(
        repo,
        "log",
        *mainline,
        "--no-renames",
        "--name-status",
        f"--format={fmt}",
        f"--max-count={max_commits}",
        rev_range,
        "--",
    )
    commits = []
    for rec in out.split("\x1e")[1:]:
        sha, parents, message, files = rec.split("\x1f")
        changes = []
        for line in files.strip().splitlines():
            status, _, path = line.partition("\t")
            if path:
                changes.append((status[:1], path))
        commits.append(Commit(sha, parents.split(), message, changes))
    return commits


def kind_of(path: str) -> str:
    """``source``, ``test`` or ``other`` for a path in the repository."""
    parts = path.split("/")
    if not path.endswith(".py"):
        return "other"
    if (
        TEST_FILE.search(path)
        or parts[-1] == "conftest.py"
        or any(p in TEST_DIRS for p in parts[:-1])
    ):
        return "test"
    if parts[-1] in NOT_SOURCE_FILES or (len(parts) > 1 and parts[0] in NOT_SOURCE_DIRS):
        return "other"
    return "source"


#: what a mined task asks for (``RepoTask.kind``): a fix of what a commit repaired, or the
#: behaviour a commit added
KINDS = ("bugfix", "feature")


def screen(c: Commit, kind: str = "bugfix") -> str:
    """Why a commit is not a candidate ("" when it is one). Feature mining walks the main
    line, where a merge is a merged pull request and its change against its first parent is
    the candidate."""
    if len(c.parents) == 0:
        return "root commit"
    if len(c.parents) > 1 and kind != "feature":
        return "merge commit"
    kinds = {kind_of(p) for _, p in c.changes}
    if "source" not in kinds and "test" not in kinds:
        return "changes neither source nor tests"
    if "source" not in kinds:
        return "no source change"
    if "test" not in kinds:
        return "no test change"
    if any(s != "M" for s, p in c.changes if kind_of(p) == "source"):
        return "adds or removes a source file"
    return ""


def export_tree(repo: Path, rev: str, dest: Path) -> None:
    """The tree of ``rev`` at ``dest``: files only, no git data (``git archive``)."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(_git_bytes(repo, "archive", "--format=tar", rev))) as t:
        t.extractall(dest, filter="data")


# --------------------------------------------------------------------------- sites


def changed_functions(before: str, after: str) -> list[str] | None:
    """Qualnames (as ``mutate.functions`` names them) of the functions present on both sides
    whose code differs, docstrings aside: the sites. None when either side does not parse.
    A change may also touch code outside functions (a rule table, an import): the task base
    holds the parent's whole file either way, but only functions are sites."""
    try:
        a, b = _function_code(before), _function_code(after)
    except SyntaxError:
        return None
    return [q for q in a if q in b and a[q] != b[q]]


def feature_sites(before: str, after: str) -> list[str]:
    """The sites of a feature: the public functions and methods ``after`` adds or gives new
    parameters (:func:`new_behaviour`), not the private helpers that build them, which an
    agent's own implementation need not have."""
    try:
        functions = _function_code(after)
    except SyntaxError:
        return []
    return [
        q for q in (e.partition("(")[0] for e in new_behaviour(before, after)) if q in functions
    ]


def new_behaviour(before: str, after: str) -> list[str]:
    """What ``after`` adds to the public surface of a module: public functions, classes and
    methods it defines that ``before`` does not, and public functions whose parameters it
    extends, each as ``"qualname"`` (new) or ``"qualname(param, ...)"`` (new parameters).
    Empty for a change that only alters what existing calls do (a fix or a refactor)."""
    try:
        a, b = _signatures(before), _signatures(after)
    except SyntaxError:
        return []
    out = []
    for q, params in b.items():
        if any(part.startswith("_") and not part.startswith("__") for part in q.split(".")):
            continue
        if q not in a:
            out.append(q)
        elif params is not None and a[q] is not None:
            gained = [x for x in params if x not in a[q]]
            if gained:
                out.append(f"{q}({', '.join(gained)})")
    return out


def _signatures(text: str) -> dict[str, list[str] | None]:
    """qualname -> parameter names (None for a class) of the module-level functions and
    classes and the methods of module-level classes."""
    out: dict[str, list[str] | None] = {}

    def params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
        a = fn.args
        names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
        names += [f"*{a.vararg.arg}"] if a.vararg else []
        return names + ([f"**{a.kwarg.arg}"] if a.kwarg else [])

    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(node.name, params(node))
        elif isinstance(node, ast.ClassDef):
            out.setdefault(node.name, None)
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.setdefault(f"{node.name}.{sub.name}", params(sub))
    return out


def changed_test_units(path: str, before: str, after: str) -> set[str]:
    """The test functions of the test file ``path`` that ``after`` adds or whose code it
    changes (helpers and fixtures aside), as test-id units (``path::Class::test``)."""
    try:
        a = _function_code(before) if before else {}
        b = _function_code(after)
    except SyntaxError:
        return set()
    return {
        f"{path}::{q.replace('.', '::')}"
        for q, code in b.items()
        if q.rpartition(".")[2].startswith("test") and a.get(q) != code
    }


def _function_code(text: str) -> dict[str, str]:
    """qualname -> the function's code without docstrings or layout, for module-level
    functions and methods of module-level classes (the first definition of a name wins)."""
    out: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            out.setdefault(node.name, _code(node))
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.setdefault(f"{node.name}.{sub.name}", _code(sub))
    return out


def _code(fn: ast.AST) -> str:
    for node in ast.walk(fn):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(fn)


# --------------------------------------------------------------------------- environments


def declared_deps(tree: Path) -> list[str]:
    """The project's declared runtime dependencies, sorted: what ``build_env`` installs besides
    pytest and the test deps, so what decides whether two commits can share a venv."""
    found: set[str] = set()
    pp = tree / "pyproject.toml"
    if pp.is_file():
        try:
            found |= set(tomllib.loads(pp.read_text()).get("project", {}).get("dependencies", []))
        except tomllib.TOMLDecodeError:
            pass
    cfg = tree / "setup.cfg"
    if cfg.is_file():
        cp = configparser.ConfigParser(interpolation=None)
        try:
            cp.read(cfg)
            found |= {
                x.strip()
                for x in cp.get("options", "install_requires", fallback="").splitlines()
                if x.strip()
            }
        except configparser.Error:
            pass
    sp = tree / "setup.py"
    if sp.is_file():
        m = re.search(r"install_requires\s*=\s*\[([^\]]*)\]", sp.read_text(errors="replace"))
        if m:
            found |= set(re.findall(r"['\"]([^'\"]+)['\"]", m.group(1)))
    return sorted(found)


def dep_set_key(tree: Path, test_deps: list[str]) -> str:
    return hashlib.sha256(
        json.dumps([declared_deps(tree), sorted(test_deps), sys.version]).encode()
    ).hexdigest()[:16]


def env_for(
    tree: Path, test_deps: list[str], dist_name: str, env: str = "venv"
) -> tuple[str, str, bool]:
    """(python, prefix, reused) of the venv for this tree's dependency set, built once;
    ``env="current"``: the running interpreter (fast, for projects with no dependencies)."""
    if env == "current":
        return sys.executable, sys.prefix, True
    dest = cache_root() / "envs" / dep_set_key(tree, test_deps)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "w") as lock:  # one builder per env at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            python = str(dest / "bin" / "python")
            # an env built by an older verigap may still hold the newest commit's code (its
            # uninstall used the checkout's directory name): the tests would import that
            ensure_project_not_installed(python, tree)
            return python, str(dest), True
        if dest.exists():
            shutil.rmtree(dest)
        python = build_env(dest, tree, test_deps, dist_name)
        (dest / ".complete").write_text("")
    return python, str(dest), False


def prepare_reference(
    spec_dir: Path,
    python: str,
    prefix: str,
    test_deps: list[str],
    backend: str | None,
    env: str = "venv",
) -> Prepared:
    """``prepare`` for a mined reference tree, in a shared venv: the same cache key, layout,
    baseline and reach map as ``verigap repos prepare`` (which rebuilds it on a new machine)."""
    t0 = time.perf_counter()
    spec = str(spec_dir.resolve())
    tree_sha = sources.tree_hash(spec_dir)
    key = env_key(spec, tree_sha, test_deps, env)
    final = cache_root() / key
    if (final / PREPARED).is_file():  # the same tree, maybe mined into another --out before:
        cached = Prepared.model_validate_json((final / PREPARED).read_text())
        if cached.spec != spec:  # point it at the copy that exists now
            cached = cached.model_copy(update={"spec": spec})
            write_json_atomic(final / PREPARED, cached.model_dump())
        return cached
    if final.exists():
        shutil.rmtree(final)
    final.mkdir(parents=True)
    tree = sources.fetch(sources.parse_source(spec), final / "tree")
    import_root, source_paths, test_files = find_layout(tree)
    if not test_files or not source_paths:
        raise ConfigError("no tests or no package at the fix")
    common = dict(
        python=python,
        env_prefix=Path(prefix),
        import_root=import_root,
        test_files=test_files,
        config_file=find_config(tree),
        backend=backend,
    )
    plain = run_pytest(tree, timeout=900.0, **common)  # generous: a loaded machine is slow
    if plain.timed_out:
        raise ConfigError("the suite timed out at the fix")
    if not plain.report_found:
        raise ConfigError("the suite does not run at the fix")
    # tracing every call is several times slower than the plain run: give it room
    traced = run_pytest(tree, reach=True, timeout=max(300.0, 20 * plain.wall_s), **common)
    if traced.timed_out:
        raise ConfigError("the reach-traced suite timed out at the fix")
    passing = sorted(
        t for t, o in plain.outcomes.items() if o == "passed" and traced.outcomes.get(t) == "passed"
    )
    if not passing:
        raise ConfigError("no test passes at the fix")
    reach, import_time = split_reach(traced, plain, source_paths)
    # an id one run has and the other lacks: a parametrisation whose ids follow an unordered
    # collection (a set holding None hashes by address, whatever the hash seed)
    unstable = {t: UNSTABLE_ID for t in set(plain.outcomes) ^ set(traced.outcomes)}
    p = Prepared(
        spec=spec,
        key=key,
        tree_sha256=tree_sha,
        env=env,
        test_deps=test_deps,
        python=python,
        env_prefix=prefix,
        import_root=import_root,
        source_paths=source_paths,
        test_files=test_files,
        config_file=common["config_file"],
        passing=passing,
        not_passing={
            **{t: o for t, o in plain.outcomes.items() if t not in set(passing)},
            **unstable,
        },
        reach=reach,
        import_time=import_time,
        baseline_s=round(plain.wall_s, 3),
        prepare_s=round(time.perf_counter() - t0, 3),
    )
    write_json_atomic(final / PREPARED, p.model_dump())
    return p


# --------------------------------------------------------------------------- one commit


class Rejected(Exception):
    """A candidate that does not make a task; the message is its histogram bucket."""


#: ``Prepared.not_passing``'s outcome for a test id that not every run of the reference has
UNSTABLE_ID = "unstable id"


def unstable_units(p: Prepared, *runs: dict[str, str]) -> set[str]:
    """Test functions whose parametrised ids are not the same in every run: ids the reference's
    runs disagreed on, and ids a later run (``runs``: outcomes) has that they had not. Their
    outcomes cannot be matched by id, so they must not decide a task."""
    known = set(p.passing) | set(p.not_passing)
    ids = {t for t, o in p.not_passing.items() if o == UNSTABLE_ID}
    for outcomes in runs:
        ids |= set(outcomes) - known
    return {unit_of(t) for t in ids if "[" in t}


def split_fail_to_pass(
    p: Prepared,
    broken: set[str],
    functions: list[str],
    groups: combine.BodyGroups | None = None,
) -> tuple[list[str], list[str]]:
    """(visible ids, hidden ids): half the failing test functions visible (at least one), the
    rest hidden; with one failing function, the other tests that call the fix are hidden, and
    when none does, every other test is (the agent then sees only the failing test).

    Test functions that run one shared body count as one, as in make-tasks' split
    (``combine.BodyGroups``, :func:`shared_bodies`, or ``groups``): they are hidden or visible
    together, and a group with a copy that never passes is never visible, so the split can
    always be cut from the workspace instead of ending in ``SharedHiddenBody``."""
    groups = shared_bodies(p) if groups is None else groups
    key = groups.key
    units = sorted({key(t) for t in broken})
    free = [u for u in units if u not in groups.pinned]
    if not free:
        raise Rejected("every failing test shares its body with a test that never passes")
    vis_units = set(free[: max(1, len(units) // 2)])

    def passing_in(chosen: set[str]) -> list[str]:
        return [t for t in p.passing if key(t) in chosen - vis_units]

    hidden = passing_in(set(units))
    if not hidden:  # one failing test function: the other tests that call the fix ...
        hidden = passing_in({key(t) for f in functions for t in p.reach.get(f, ())})
    if not hidden:  # ... or else the rest of the suite, as a regression guard
        hidden = passing_in({key(t) for t in p.passing})
    if not hidden:
        raise Rejected("the suite is one test function")
    hidden_set = set(hidden)
    visible = [t for t in p.passing if t not in hidden_set]
    return visible, hidden


def mine_commit(
    repo: Path,
    c: Commit,
    out: Path,
    *,
    project: str,
    test_deps: list[str],
    prompt_style: str,
    backend: str | None,
    equivalence: bool = True,
    env: str = "venv",
    kind: str = "bugfix",
) -> RepoTask:
    """The validated task of one candidate commit, or :class:`Rejected`.

    ``kind="feature"``: the commit adds behaviour (a public function, class, method or
    parameter) with its tests; the task base is the parent's source, the tests the commit adds
    or changes that fail there are the feature's (:func:`split_feature_tests`), the sites are
    the functions it adds or changes, and the prompt is a feature request
    (:func:`verigap.repos.tickets.feature_ticket`)."""
    feature = kind == "feature"
    parent = c.parents[0]
    src_dir = out / "sources" / f"{project}-{c.sha[:12]}"
    if src_dir.exists():
        shutil.rmtree(src_dir)
    export_tree(repo, parent, src_dir)
    base_files: dict[str, str] = {}
    fixed: dict[str, str] = {}
    new_units: set[str] = set()  # test functions the commit adds or changes
    for status, path in c.changes:
        path_kind = kind_of(path)
        if path_kind == "other":
            continue
        if status == "D":
            (src_dir / path).unlink(missing_ok=True)
            continue
        data = _git_bytes(repo, "show", f"{c.sha}:{path}")
        (src_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (src_dir / path).write_bytes(data)
        if path_kind == "test" and feature:
            before = "" if status == "A" else _git_bytes(repo, "show", f"{parent}:{path}")
            new_units |= changed_test_units(
                path,
                before.decode(errors="replace") if before else "",
                data.decode(errors="replace"),
            )
        if path_kind == "source":
            try:
                fixed[path] = data.decode()
                base_files[path] = _git_bytes(repo, "show", f"{parent}:{path}").decode()
            except UnicodeDecodeError:
                raise Rejected("source is not UTF-8") from None
    _, source_paths, test_files = find_layout(src_dir)
    if not test_files:
        raise Rejected("no test files at the fix")
    if any(classify(f, source_paths) is not None for f in base_files):
        raise Rejected("source change outside the package")
    if feature and not any(new_behaviour(base_files[f], fixed[f]) for f in base_files):
        raise Rejected("adds no public function, class, method or parameter (not a feature)")
    sites: list[tuple[str, str]] = []
    for f in sorted(base_files):
        if base_files[f] == fixed[f]:
            continue
        if feature:  # the public surface it adds: how it is built (helpers) is the agent's choice
            qs = feature_sites(base_files[f], fixed[f])
        else:
            qs = changed_functions(base_files[f], fixed[f])
        if qs is None:
            raise Rejected("source does not parse")
        sites += [(f, q) for q in qs]
    if not sites:
        raise Rejected(
            "adds no public function or method (a class or constant alone)"
            if feature
            else "no function changed (the change is outside functions)"
        )
    if feature and not new_units:
        raise Rejected("adds or changes no test function")
    python, prefix, _ = env_for(
        src_dir,
        test_deps,
        _dist_name(src_dir, sources.Source(str(src_dir), "dir", str(src_dir))),
        env,
    )
    try:
        p = prepare_reference(src_dir, python, prefix, test_deps, backend, env)
    except ConfigError as e:
        raise Rejected(str(e)) from None
    with tempfile.TemporaryDirectory(prefix="vg-mine-") as tmp:
        base = Path(tmp) / "base"
        shutil.copytree(p.tree, base, symlinks=True)
        for f, text in base_files.items():
            (base / f).write_text(text)
        run = run_suite(p, base, backend=backend)
    if run.timed_out:
        raise Rejected("timeout without the fix")
    if not run.report_found:
        raise Rejected("the suite does not run without the fix")
    broken = run.failing(p.passing)
    shaky = unstable_units(p, run.outcomes)
    if {unit_of(t) for t in broken} & shaky:
        raise Rejected("test ids change between runs (parametrised over an unordered collection)")
    if not broken:
        raise Rejected(
            "the feature's new tests pass without it"
            if feature
            else "no test fails without the fix"
        )
    functions = [f"{f}::{q}" for f, q in sites]
    visible, hidden = (
        split_feature_tests(p, broken, new_units)
        if feature
        else split_fail_to_pass(p, broken, functions)
    )
    if {unit_of(t) for t in [*visible, *hidden]} & shaky:
        raise Rejected("test ids change between runs (parametrised over an unordered collection)")
    vset = set(visible)
    inputs = (
        collect_inputs(
            p, [fn for fn in functions if fn in p.reach], per_function=20, backend=backend
        )
        if equivalence
        else {}
    )
    site_objs = []
    for i, (f, q) in enumerate(sites):
        reach = set(p.reach.get(f"{f}::{q}", ()))
        f2p = sorted(broken & reach) or sorted(broken)
        site_objs.append(
            Site(
                site_id=f"site{i}",
                file=f,
                qualname=q,
                op="mined",
                index=0,
                visible=bool(vset & set(f2p)),
                fail_to_pass=f2p,
                original=mutate.function_source(fixed[f], q),
                # a feature's new function is absent from the task base
                mutated=_source_or_empty(base_files[f], q),
                tests_only=not inputs.get(f"{f}::{q}"),
            )
        )
    equiv = [
        {**x, "id": i} for i, x in enumerate(x for fn in functions for x in inputs.get(fn, []))
    ]
    site_objs = check_sites(p, site_objs, base_files, fixed, equiv, backend=backend)
    vfiles, removed = _layout_or_reject(p, visible)
    task = RepoTask(
        task_id=f"{project}-{'feature-' if feature else ''}{c.sha[:12]}",
        kind="feature" if feature else "bugfix",
        source={
            "spec": p.spec,
            "key": p.key,
            "tree_sha256": p.tree_sha256,
            "env": env,
            "test_deps": test_deps,
        },
        seed=0,
        sites=site_objs,
        files_sha256={f: hashlib.sha256(t.encode()).hexdigest() for f, t in base_files.items()},
        visible_tests=sorted(visible),
        hidden_tests=sorted(hidden),
        fail_to_pass=sorted(broken),
        visible_test_files=vfiles,
        removed_units=removed,
        source_paths=p.source_paths,
        equivalence=equiv,
        prompt="",
        base_files=base_files,
        origin={
            "kind": "mined feature" if feature else "mined",
            "project": project,
            "repository": str(repo),
            "commit": c.sha,
            "parent": parent,
            "subject": c.subject[:200],
            "change": commit_kind(c.message),
        },
    )
    output = check_workspace(p, task, fixed, broken, backend=backend)
    if feature:
        wanted = {f: new_behaviour(base_files[f], fixed[f]) for f in sorted(base_files)}
        task.prompt = feature_ticket(
            fixed, wanted, message=c.message, project=project, source_paths=p.source_paths
        )
    else:
        task.prompt = make_prompt(task, output, prompt_style, message=c.message, project=project)
    return task


def _source_or_empty(text: str, qualname: str) -> str:
    try:
        return mutate.function_source(text, qualname)
    except KeyError:
        return ""


def split_feature_tests(
    p: Prepared, broken: set[str], new_units: set[str]
) -> tuple[list[str], list[str]]:
    """(visible ids, hidden ids) of a feature task: the tests the commit adds or changes that
    fail without the feature are hidden, except that when no old test fails there (a test
    file that imports the new name fails whole) the first of them stays visible as the
    acceptance check, so the agent sees what is missing and a no-op fails a visible test.
    Every hidden test function fails on the task base; a new test that already passes there
    stays visible as a regression test."""
    failing = {unit_of(t) for t in broken}
    wanted = sorted(failing & new_units)
    if not wanted:
        raise Rejected("the feature's new tests pass without it")
    if failing - new_units:  # old tests fail too: they show the agent what is missing
        hide = set(wanted)
    elif len(wanted) > 1:
        hide = set(wanted[1:])
    else:
        raise Rejected(
            "one new test function fails without the feature and no old test does: "
            "none left to hide beside the visible one"
        )
    hidden = [t for t in p.passing if unit_of(t) in hide]
    if not hidden:
        raise Rejected("the feature's new tests do not pass with it")
    visible = [t for t in p.passing if unit_of(t) not in hide]
    return visible, hidden


def put_back(fixed: str, before: str, qualname: str) -> str:
    """``fixed`` with the one function ``qualname`` as it was in ``before``: the reference with
    a single site's bug, so that a site's evidence is checked on that site alone. A function
    that ``before`` lacks (a feature's new code) is taken out."""
    if not _source_or_empty(before, qualname):
        return _without(fixed, qualname)
    old = cst.parse_module(before)
    node: cst.CSTNode | None = None
    body: Sequence[cst.CSTNode] = old.body
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in body
                if isinstance(n, cst.FunctionDef | cst.ClassDef) and n.name.value == part
            ),
            None,
        )
        if node is None:
            raise KeyError(qualname)
        body = node.body.body if isinstance(node, cst.ClassDef) else []
    assert isinstance(node, cst.FunctionDef)
    want = qualname.split(".")

    class _Swap(cst.CSTTransformer):
        def __init__(self) -> None:
            self.stack: list[str] = []

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            self.stack.append(n.name.value)
            return True

        def leave_ClassDef(self, o: cst.ClassDef, u: cst.ClassDef) -> cst.ClassDef:
            self.stack.pop()
            return u

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            self.stack.append(n.name.value)
            return False  # a nested function is not a site

        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef) -> cst.FunctionDef:
            here = self.stack.pop()
            return node if [*self.stack, here] == want else u

    return cst.parse_module(fixed).visit(_Swap()).code


def _without(text: str, qualname: str) -> str:
    """``text`` without the function or method ``qualname`` (a class left empty gets ``pass``)."""
    want = qualname.split(".")

    class _Drop(cst.CSTTransformer):
        def __init__(self) -> None:
            self.stack: list[str] = []

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            self.stack.append(n.name.value)
            return True

        def leave_ClassDef(self, o: cst.ClassDef, u: cst.ClassDef) -> cst.ClassDef:
            self.stack.pop()
            if not u.body.body:
                return u.with_changes(body=u.body.with_changes(body=[cst.parse_statement("pass")]))
            return u

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

        def leave_FunctionDef(self, o: cst.FunctionDef, u: cst.FunctionDef):
            if [*self.stack, u.name.value] == want:
                return cst.RemoveFromParent()
            return u

    return cst.parse_module(text).visit(_Drop()).code


def check_sites(
    p: Prepared,
    sites: list[Site],
    base_files: dict[str, str],
    fixed: dict[str, str],
    equiv: list[dict],
    *,
    backend: str | None,
) -> list[Site]:
    """The checks a mutated task's sites get (``build_task``), for mined ones: a site whose
    inputs tell its bug apart (the reference with that one function put back as before the
    fix fails the comparison on them) is ``comparison``; any other site's tests must cross the
    sealed channel (pass on the reference, fail on the task base: ``forward.carries``) and it
    is ``forwarded``, or the commit is rejected, since v2 could then never pay its fix."""
    told: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="vg-mine-disc-") as tmp:
        for i, s in enumerate(sites):
            if not any(x["target"] == s.function for x in equiv):
                told[s.function] = False
                continue
            tree = Path(tmp) / f"s{i}"
            shutil.copytree(p.tree, tree, symlinks=True)
            (tree / s.file).write_text(put_back(fixed[s.file], base_files[s.file], s.qualname))
            eq = equivalence.check(
                p, p.tree, tree, equiv, backend=backend, contexts=equivalence.CONTEXTS[:1]
            )
            told[s.function] = eq.candidate_ran and not eq.target_ok(s.function)
            shutil.rmtree(tree, ignore_errors=True)
        unseen = [s for s in sites if not told[s.function]]
        if unseen:
            base = Path(tmp) / "base"
            shutil.copytree(p.tree, base, symlinks=True)
            for f, text in base_files.items():
                (base / f).write_text(text)
            why = forward.carries(p, unseen, base, backend=backend)
            if why is not None:  # the bucket keeps the kind of failure, not the site's name
                kind = why.split(": ", 1)[1] if "::" in why.split(": ", 1)[0] else why
                raise Rejected(
                    "a site's inputs do not tell its bug apart and its tests cannot "
                    f"be carried to a separate process ({kind[:80]})"
                ) from None
    return [
        s.model_copy(update={"discrimination": "comparison" if told[s.function] else "forwarded"})
        for s in sites
    ]


def _layout_or_reject(p: Prepared, visible: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``_visible_layout``, with a split it cannot cut (a hidden test inherits the body of a
    visible one) turned into a rejection: the commit ends in the funnel, not in a crash."""
    try:
        return _visible_layout(p, visible)
    except SharedHiddenBody:
        raise Rejected("a hidden test's body is shared with a visible test") from None


def check_workspace(
    p: Prepared, task: RepoTask, fixed: dict[str, str], broken: set[str], *, backend: str | None
) -> str:
    """The checks ``make-tasks`` makes on a workspace: it collects exactly the visible tests,
    they fail as in the full run, and with ``fixed`` (file -> text) they all pass. Returns the
    visible run's output (for the prompt)."""
    visible = task.visible_tests
    with tempfile.TemporaryDirectory(prefix="vg-mine-") as tmp:
        try:
            ws = materialize_workspace(p, task, Path(tmp) / "ws")
        except ValueError:
            raise Rejected("hidden tests cannot be cut from the visible files") from None
        env = dict(
            python=p.python,
            env_prefix=Path(p.env_prefix),
            import_root=p.import_root,
            test_files=task.visible_test_files,
            config_file=p.config_file,
            backend=backend,
            timeout=p.suite_timeout(),
        )
        vis = run_pytest(ws, **env)
        got = {t for t in vis.outcomes if t not in p.not_passing}
        # a test module that imports a name a feature adds fails to import: its tests do not
        # run (they fail, as the next check requires of them)
        unimportable = set(vis.extra.get("collect_errors") or ())
        unrun = {t for t in set(visible) - got if t.partition("::")[0] in unimportable}
        if got | unrun != set(visible):
            raise Rejected("workspace does not collect exactly the visible tests")
        if vis.failing(visible) != broken & set(visible):
            raise Rejected("workspace visible failures differ from the full run")
        check_shown_command(p, Path(tmp) / "shown", ws, broken & set(visible), backend=backend)
        ok_ws = Path(tmp) / "fixed"
        shutil.copytree(ws, ok_ws, ignore=shutil.ignore_patterns(".git"))
        for f, text in fixed.items():
            (ok_ws / f).write_text(text)
        if run_pytest(ok_ws, **env).failing(visible):
            raise Rejected("the fixed workspace fails a visible test")
        return _clean_output(vis.stdout, ws)


#: pytest's short summary lines of a failure; a failing ``unittest`` subTest is reported as
#: ``SUBFAILED(params) id`` (pytest 9), with no separate FAILED line for its test
def check_shown_command(
    p: Prepared, scratch: Path, ws: Path, want: set[str], *, backend: str | None
) -> None:
    """:class:`Rejected` unless the test command in the agent's instructions, run as shown on a
    copy of the workspace, is the run the task means (:func:`shown_refusal`)."""
    shutil.copytree(ws, scratch, symlinks=True)
    why = shown_refusal(p, scratch, want, backend=backend)
    shutil.rmtree(scratch, ignore_errors=True)
    if why:
        raise Rejected(why)


def make_prompt(
    task: RepoTask, output: str, style: str, *, message: str | None, project: str
) -> str:
    if style == "ticket":
        from verigap.repos.tickets import ticket_prompt

        return ticket_prompt(task, output, message=message, name=project)
    return PROMPT.format(name=project, output=output)


# --------------------------------------------------------------------------- multi-site


@dataclass
class _MinedBug:
    """A mined one-function bug, in the shape ``split_tests`` reads."""

    function: str
    fail_to_pass: list[str]


def compose(
    p: Prepared,
    mined: RepoTask,
    k: int,
    *,
    seed: int,
    message: str | None,
    prompt_style: str,
    backend: str | None,
    equivalence: bool = True,
    max_candidates: int = 40,
) -> RepoTask:
    """A k-site task at the mined task's reference: the mined bug plus k-1 validated mutations
    in other functions, half the sites reached by visible tests and the other half only by
    hidden ones (the mutation-task contract), the mined bug on whichever side the seed gives."""
    if len(mined.sites) != 1:
        raise Rejected("multi-site: the fix spans several functions")
    ms = mined.sites[0]
    bug = _MinedBug(ms.function, list(mined.fail_to_pass))
    cands = [
        m
        for m in candidates(p, max_candidates=max_candidates, seed=seed)
        if m.function != ms.function
    ]
    valid, _ = validate(p, cands, workers=1, backend=backend)
    by_fn: dict[str, list[ValidMutation]] = {}
    for v in valid:
        by_fn.setdefault(v.function, []).append(v)
    n_vis = combine.visible_count(k)
    rng = random.Random(seed)
    chosen: list | None = None
    for _ in range(200):
        if len(by_fn) < k - 1:
            break
        muts = [rng.choice(by_fn[f]) for f in rng.sample(sorted(by_fn), k - 1)]
        for pos in rng.sample([0, n_vis], 2):
            sites = [*muts[:pos], bug, *muts[pos:]]
            if split_tests(p, sites, n_vis) is not None:
                chosen = sites
                break
        if chosen:
            break
    if chosen is None:
        raise Rejected("multi-site: no non-interacting mutations to add")
    visible, hidden = split_tests(p, chosen, n_vis)
    vset, hset = set(visible), set(hidden)
    muts = [s for s in chosen if s is not bug]
    files = sorted({ms.file, *(m.file for m in muts)})
    ref = {f: (p.tree / f).read_text() for f in files}
    texts = {}
    for f in files:
        start = mined.base_files.get(f, ref[f])
        try:
            texts[f] = mutate.apply_mutations(start, [m.mutation for m in muts if m.file == f])
        except ValueError:  # the fix also edited that function (a docstring): not the same
            raise Rejected("multi-site: a mutation does not apply beside the mined bug") from None
    with tempfile.TemporaryDirectory(prefix="vg-mine-") as tmp:
        full = Path(tmp) / "full"
        shutil.copytree(p.tree, full, symlinks=True)
        for f, text in texts.items():
            (full / f).write_text(text)
        run = run_suite(p, full, backend=backend)
    if run.timed_out or not run.report_found:
        raise Rejected("multi-site: the combined bugs do not run")
    broken = run.failing(p.passing)
    if any(not (set(s.fail_to_pass) & broken & vset) for s in chosen[:n_vis]):
        raise Rejected("multi-site: a visible site is masked in combination")
    if any(not (set(s.fail_to_pass) & broken & hset) for s in chosen[n_vis:]):
        raise Rejected("multi-site: a hidden site is masked in combination")
    inputs = (
        collect_inputs(p, sorted({s.function for s in chosen}), per_function=20, backend=backend)
        if equivalence
        else {}
    )
    equiv = [
        {**x, "id": i} for i, x in enumerate(x for s in chosen for x in inputs.get(s.function, []))
    ]
    told = discriminated(p, muts, equiv, backend=backend)
    unseen = [m for m in muts if not told[m.function]]
    if unseen:
        with tempfile.TemporaryDirectory(prefix="vg-mine-") as tmp:
            full = Path(tmp) / "full"
            shutil.copytree(p.tree, full, symlinks=True)
            for f, text in texts.items():
                (full / f).write_text(text)
            if forward.carries(p, unseen, full, backend=backend) is not None:
                raise Rejected(
                    "multi-site: a mutation's inputs do not tell it apart and its "
                    "tests cannot be carried to a separate process"
                )
    site_objs = []
    for i, s in enumerate(chosen):
        if s is bug:
            site_objs.append(
                ms.model_copy(
                    update={
                        "site_id": f"site{i}",
                        "visible": i < n_vis,
                        "tests_only": not inputs.get(s.function),
                    }
                )
            )
        else:
            site_objs.append(
                Site(
                    site_id=f"site{i}",
                    file=s.file,
                    qualname=s.qualname,
                    op=s.op,
                    index=s.index,
                    visible=i < n_vis,
                    fail_to_pass=s.fail_to_pass,
                    original=mutate.function_source(ref[s.file], s.qualname),
                    mutated=mutate.function_source(texts[s.file], s.qualname),
                    tests_only=not inputs.get(s.function),
                    discrimination="comparison" if told[s.function] else "forwarded",
                )
            )
    vfiles, removed = _layout_or_reject(p, visible)
    task = mined.model_copy(
        update=dict(
            task_id=f"{mined.task_id}-k{k}s{seed}",
            seed=seed,
            sites=site_objs,
            files_sha256={f: hashlib.sha256(t.encode()).hexdigest() for f, t in texts.items()},
            visible_tests=sorted(visible),
            hidden_tests=sorted(hidden),
            fail_to_pass=sorted(broken),
            visible_test_files=vfiles,
            removed_units=removed,
            equivalence=equiv,
            base_files=texts,
            prompt="",
            origin={**mined.origin, "kind": "mined+mutations"},
        )
    )
    task = RepoTask.model_validate(task.model_dump())
    output = check_workspace(p, task, ref, broken, backend=backend)
    task.prompt = make_prompt(
        task, output, prompt_style, message=message, project=mined.origin.get("project", "")
    )
    return task


# --------------------------------------------------------------------------- the oracle is paid


def check_paid(task: RepoTask, *, backend: str | None) -> RepoTask:
    """The task, once the real fix (``scripted:oracle``) and the no-op are graded by v1 and v2
    on its workspace (noted in ``origin["checked"]``, each verdict in ``origin["verdicts"]``
    as JSON: agent -> {correct, v1, v2}); :class:`Rejected` unless the fix is correct and
    paid by both and the no-op by neither (:func:`verigap.repos.paid.grade_reference`)."""
    from verigap.repos.paid import grade_reference

    paid, why = grade_reference(task, backend=backend)
    if why:
        raise Rejected(why)
    return task.model_copy(
        update={
            "origin": {
                **task.origin,
                "checked": "the real fix is correct and paid by v1 and v2; the no-op is "
                "paid by neither",
                "verdicts": json.dumps(paid, sort_keys=True),
            }
        }
    )


# --------------------------------------------------------------------------- mining


class MineStats(BaseModel):
    """How mining went (saved as index.json next to the task files)."""

    model_config = ConfigDict(extra="forbid")

    repository: str
    rev_range: str
    kind: str = "bugfix"  # what the tasks ask for (``KINDS``)
    walked: int
    candidates: int
    tried: int
    tasks: int
    rejected: dict[str, int]  # every commit walked that is not a task, by reason
    envs_built: int
    seconds_per_candidate: list[float]
    total_s: float
    task_files: list[str]


def mine(
    repo_path: str | Path,
    out: Path,
    *,
    rev_range: str = "HEAD",
    max_commits: int = 300,
    n: int = 20,
    test_deps: list[str] | None = None,
    prompt_style: str = "tests",
    backend: str | None = None,
    equivalence: bool = True,
    env: str = "venv",
    k: int = 1,
    seed: int = 0,
    max_candidates: int = 40,
    kind: str = "bugfix",
    log: Callable[[str], None] = print,
) -> MineStats:
    """Walk ``rev_range`` newest first, write up to ``n`` validated tasks into ``out``.

    ``k`` > 1: each mined bug becomes a k-site task with k-1 mutations beside it, drawn from
    ``max_candidates`` validated candidates (see :func:`compose`). ``kind="feature"``: tasks
    from commits (or merged pull requests) that add behaviour with its tests, asked for as a
    feature request (see :func:`mine_commit`)."""
    if kind not in KINDS:
        raise ConfigError(
            f"--kind {kind!r}: use bugfix (commits that fix behaviour) or feature "
            "(commits that add behaviour with its tests)"
        )
    if kind == "feature" and k != 1:
        raise ConfigError("--k applies to bug fixes only; drop it with --kind feature")
    if prompt_style not in PROMPT_STYLES:
        raise ConfigError(f"--prompt-style {prompt_style!r}: use one of {', '.join(PROMPT_STYLES)}")
    if k < 1:
        raise ConfigError("--k must be at least 1 (1: the mined bug alone)")
    if env not in ("venv", "current"):
        raise ConfigError(f"--env {env!r}: use venv (one per dependency set) or current")
    t0 = time.perf_counter()
    repo = open_repo(repo_path)
    deps = list(test_deps or [])
    tip = rev_range.split("..")[-1] or "HEAD"
    try:
        files = _git(repo, "ls-tree", "-r", "--name-only", tip).splitlines()
    except ConfigError:
        raise ConfigError(
            f"{repo}: revision {tip!r} not found; pass a branch, tag or commit "
            "range that exists (e.g. HEAD, v1.0..main)"
        ) from None
    if not any(TEST_FILE.search(f) for f in files):
        raise ConfigError(
            f"{repo}: no test files (test_*.py or *_test.py) at {tip}; mining needs "
            "a repository with a pytest suite"
        )
    commits = walk(repo, rev_range, max_commits, first_parent=kind == "feature")
    reasons: Counter[str] = Counter()
    cands = []
    for c in commits:
        why = screen(c, kind)
        if why:
            reasons[why] += 1
        else:
            cands.append(c)
    if not cands:
        raise ConfigError(
            f"{repo}: no candidate commits in {rev_range!r} ({len(commits)} walked: "
            f"{dict(reasons)}); a candidate changes source and tests together — "
            "widen the range or raise --max-commits"
        )
    project = sources.parse_source(str(repo)).name
    log(f"{len(cands)} candidate commits of {len(commits)} walked in {rev_range}")
    out.mkdir(parents=True, exist_ok=True)
    envs_before = _n_envs()
    per: list[float] = []
    task_files: list[str] = []
    tried = 0
    for c in cands:
        if len(task_files) >= n:
            break
        tried += 1
        t1 = time.perf_counter()
        try:
            task = mine_commit(
                repo,
                c,
                out,
                project=project,
                test_deps=deps,
                prompt_style=prompt_style,
                backend=backend,
                equivalence=equivalence,
                env=env,
                kind=kind,
            )
            if k > 1:
                task = compose(
                    prepared_for(task, backend=backend),
                    task,
                    k,
                    seed=seed,
                    message=c.message,
                    prompt_style=prompt_style,
                    backend=backend,
                    equivalence=equivalence,
                    max_candidates=max_candidates,
                )
            task = check_paid(task, backend=backend)
        except Exception as e:  # noqa: BLE001 - one odd commit must not end the walk
            why = str(e) if isinstance(e, Rejected) else f"error: {type(e).__name__}"
            if not isinstance(e, Rejected):
                log(f"  {c.sha[:10]} error: {e}")
            reasons[why] += 1
            shutil.rmtree(out / "sources" / f"{project}-{c.sha[:12]}", ignore_errors=True)
            log(f"  {c.sha[:10]} rejected: {e}")
        else:
            path = out / f"{task.task_id}.json"
            task.save(path)
            task_files.append(path.name)
            log(
                f"  {c.sha[:10]} task: {len(task.sites)} site(s), {len(task.visible_tests)} "
                f"visible / {len(task.hidden_tests)} hidden tests — {c.subject[:60]}"
            )
        per.append(round(time.perf_counter() - t1, 2))
        # after every candidate: a walk stopped by a time limit keeps what it finished
        stats = _stats(
            repo, rev_range, commits, cands, tried, task_files, reasons, envs_before, per, t0, kind
        )
        write_json_atomic(out / "index.json", stats.model_dump())
    stats = _stats(
        repo, rev_range, commits, cands, tried, task_files, reasons, envs_before, per, t0, kind
    )
    write_json_atomic(out / "index.json", stats.model_dump())
    return stats


def _stats(
    repo: Path,
    rev_range: str,
    commits: list[Commit],
    cands: list[Commit],
    tried: int,
    task_files: list[str],
    reasons: Counter[str],
    envs_before: int,
    per: list[float],
    t0: float,
    kind: str = "bugfix",
) -> MineStats:
    return MineStats(
        repository=str(repo),
        rev_range=rev_range,
        kind=kind,
        walked=len(commits),
        candidates=len(cands),
        tried=tried,
        tasks=len(task_files),
        rejected=dict(reasons.most_common()),
        envs_built=_n_envs() - envs_before,
        seconds_per_candidate=per,
        total_s=round(time.perf_counter() - t0, 2),
        task_files=task_files,
    )


def _n_envs() -> int:
    d = cache_root() / "envs"
    return sum(1 for x in d.iterdir() if (x / ".complete").is_file()) if d.is_dir() else 0
