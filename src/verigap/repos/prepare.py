"""``verigap repos prepare SOURCE``: a cached, reusable environment for one project.

Preparing fetches the tree, builds a venv with the project's dependencies and its test
dependencies (but not the project itself: tests must import the tree being graded), and runs the
suite once under the reach recorder. The result, ``prepared.json``, lists the tests that pass,
which project functions each one calls, and which functions run at import time (those are never
mutated: a bug there would break tests that do not reach it).
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from verigap.errors import ConfigError, IntegrityError
from verigap.repos import sources
from verigap.repos.pytest_run import (
    PLUGINS_FILE,
    addopts_plugins,
    cache_root,
    run_pytest,
    stripped_addopts,
)
from verigap.runs import write_json_atomic

PREPARED = "prepared.json"
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
NOT_SOURCE_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "scripts"}


class Prepared(BaseModel):
    """Everything later steps need to know about a prepared project (saved as prepared.json)."""

    model_config = ConfigDict(extra="forbid")

    spec: str
    key: str
    tree_sha256: str
    env: str  # "venv" (built here) or "current" (the running interpreter)
    test_deps: list[str]
    python: str  # interpreter of the prepared environment
    env_prefix: str  # its prefix (mounted read-only in every sandbox)
    import_root: str  # "" or "src": what goes first on sys.path
    source_paths: list[str]  # package dirs / modules an agent may edit (relative)
    test_files: list[str]
    config_file: str | None  # the project's own pytest config, pinned for every run
    stripped_addopts: list[str] = []  # reporting options of its addopts every run drops
    plugins: list[str] = []  # pytest plugins of the test deps, loaded with -p
    passing: list[str]  # test ids that pass on the pristine tree
    not_passing: dict[str, str]  # test id -> outcome, excluded from every task
    reach: dict[str, list[str]]  # function key ("file::qualname") -> test ids that call it
    import_time: list[str]  # function keys called outside any test (collection, import)
    baseline_s: float  # wall time of one plain suite run, in the sandbox
    prepare_s: float

    def suite_timeout(self) -> float:
        """Wall limit for one suite run: generous, so a loaded machine never turns a slow run
        into a rejected mutation or a failed grade; an infinite loop still ends."""
        return max(60.0, 10 * self.baseline_s + 30)

    @property
    def dir(self) -> Path:
        return cache_root() / self.key

    @property
    def tree(self) -> Path:
        return self.dir / "tree"

    def reference_hash(self, reference: Path | None = None) -> str:
        """The tree hash of ``reference`` (default: the prepared tree), checked: the prepared
        tree must still hash to ``tree_sha256``, or IntegrityError (it is never used)."""
        reference = Path(reference or self.tree)
        got = sources.tree_hash(reference)
        if reference == self.tree and got != self.tree_sha256:
            raise IntegrityError(
                f"the prepared reference tree {reference} no longer matches the hash recorded "
                f"when it was prepared ({got[:12]} != {self.tree_sha256[:12]}): it was changed "
                f"after `verigap repos prepare`; delete {self.dir} and prepare it again"
            )
        return got


def env_key(spec: str, tree_sha: str, test_deps: list[str], env: str) -> str:
    h = hashlib.sha256(
        json.dumps(
            [spec if not Path(spec).exists() else "", tree_sha, sorted(test_deps), env, sys.version]
        ).encode()
    )
    return h.hexdigest()[:16]


def find_layout(tree: Path) -> tuple[str, list[str], list[str]]:
    """(import_root, source_paths, test_files) for a plain or src-layout project."""
    files = sources.tree_files(tree)
    tests = [f for f in files if TEST_FILE.search(f)]
    import_root = (
        "src"
        if (tree / "src").is_dir()
        and any((p / "__init__.py").is_file() for p in (tree / "src").iterdir() if p.is_dir())
        else ""
    )
    base = tree / import_root if import_root else tree
    paths = []
    for p in sorted(base.iterdir()):
        rel = p.relative_to(tree).as_posix()
        if p.is_dir() and (p / "__init__.py").is_file() and p.name not in NOT_SOURCE_DIRS:
            paths.append(rel)
        elif (
            p.is_file()
            and p.suffix == ".py"
            and not TEST_FILE.search(rel)
            and p.name not in ("setup.py", "conftest.py", "versioneer.py", "noxfile.py")
        ):
            paths.append(rel)
    return import_root, paths, tests


def find_config(tree: Path) -> str | None:
    """The file pytest itself would read its config from, in pytest's order of precedence."""
    for name in ("pytest.ini", ".pytest.ini"):
        if (tree / name).is_file():
            return name
    pp = tree / "pyproject.toml"
    if pp.is_file():
        try:
            if "ini_options" in tomllib.loads(pp.read_text()).get("tool", {}).get("pytest", {}):
                return "pyproject.toml"
        except tomllib.TOMLDecodeError:
            pass
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if (tree / name).is_file():
            cp = configparser.ConfigParser(interpolation=None)
            try:
                cp.read(tree / name)
            except configparser.Error:
                continue
            if cp.has_section(section):
                return name
    return None


def _pip(python: str, *args: str) -> None:
    proc = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ConfigError(
            f"pip install {' '.join(args)} failed; pip said:\n"
            f"{(proc.stdout + proc.stderr).strip()}\n"
            "fix the test dependencies (--test-dep) or the source"
        )


_PLUGINS_OF = """
import json, re, sys
from importlib.metadata import entry_points
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
want = {norm(n) for n in sys.argv[1:]}
print(json.dumps(sorted({ep.value.split(":")[0] for ep in entry_points(group="pytest11")
                         if ep.dist is not None and norm(ep.dist.name) in want})))
"""


def _req_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", req.strip(), maxsplit=1)[0]


def declared_plugins(python: str, test_deps: list[str]) -> list[str]:
    """Modules of the pytest plugins (``pytest11`` entry points) the test deps provide: the
    autoload is off in every run, so these are loaded explicitly with ``-p``."""
    if not test_deps:
        return []
    proc = subprocess.run(
        [python, "-c", _PLUGINS_OF, *map(_req_name, test_deps)], capture_output=True, text=True
    )
    try:
        return list(json.loads(proc.stdout)) if proc.returncode == 0 else []
    except json.JSONDecodeError:
        return []


def build_env(dest: Path, tree: Path, test_deps: list[str], dist_name: str | None) -> str:
    """A venv holding pytest, the test deps and the project's dependencies, not the project."""
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True, capture_output=True)
    py = str(dest / "bin" / "python")
    _pip(py, "pytest", *test_deps)
    if dist_name and any((tree / f).is_file() for f in ("setup.py", "pyproject.toml")):
        with tempfile.TemporaryDirectory() as tmp:  # building writes build/, egg-info: not here
            shutil.copytree(tree, Path(tmp) / "src")
            _pip(py, str(Path(tmp) / "src"))  # pulls the project's runtime dependencies ...
        drop_code_keep_metadata(py, dist_name)  # ... then drops the project itself
        ensure_project_not_installed(py, tree)  # whatever name it was installed under
    (dest / PLUGINS_FILE).write_text(json.dumps(declared_plugins(py, test_deps)))
    return py


_METADATA_OF = """
import json, sys
from importlib.metadata import PackageNotFoundError, distribution
try:
    d = distribution(sys.argv[1])
except PackageNotFoundError:
    print("null")
else:
    print(json.dumps([str(d.locate_file(f)) for f in d.files or []
                      if f.parts and f.parts[0].endswith(".dist-info")]))
"""


def drop_code_keep_metadata(python: str, dist_name: str) -> None:
    """Uninstall the project from the venv but put its ``.dist-info`` back: the tests import
    the tree being graded, and code that asks ``importlib.metadata.version(name)`` at import
    still finds the installed version."""
    proc = subprocess.run([python, "-c", _METADATA_OF, dist_name], capture_output=True, text=True)
    files = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None
    saved = {f: Path(f).read_bytes() for f in files or [] if Path(f).is_file()}
    subprocess.run([python, "-m", "pip", "uninstall", "-y", "-q", dist_name], capture_output=True)
    for f, data in saved.items():
        if Path(f).name in ("direct_url.json", "INSTALLER", "REQUESTED"):
            continue  # metadata only: nothing says where installed code would be
        Path(f).parent.mkdir(parents=True, exist_ok=True)
        Path(f).write_bytes(data)


def declared_name(tree: Path) -> str | None:
    """The distribution name the project declares (PKG-INFO, ``[project].name``, setup.cfg's
    ``[metadata] name``, ``setup(name=...)``), or None: what pip installs it as, which a
    checkout's directory name (``toolz-1a2b3c``) need not be."""
    pkg_info = tree / "PKG-INFO"
    if pkg_info.is_file():
        m = re.search(r"^Name:\s*(\S+)", pkg_info.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    pp = tree / "pyproject.toml"
    if pp.is_file():
        try:
            name = tomllib.loads(pp.read_text()).get("project", {}).get("name")
        except tomllib.TOMLDecodeError:
            name = None
        if isinstance(name, str) and name.strip():
            return name.strip()
    cfg = tree / "setup.cfg"
    if cfg.is_file():
        cp = configparser.ConfigParser(interpolation=None)
        try:
            cp.read(cfg)
            name = cp.get("metadata", "name", fallback="").strip()
        except configparser.Error:
            name = ""
        if name:
            return name
    sp = tree / "setup.py"
    if sp.is_file():
        m = re.search(
            r"\bname\s*=\s*['\"]([A-Za-z0-9][A-Za-z0-9._-]*)['\"]", sp.read_text(errors="replace")
        )
        if m:
            return m.group(1)
    return None


_CODE_OF = """
import json, sys
from importlib.metadata import distribution
d = distribution(sys.argv[1])
print(json.dumps([str(d.locate_file(f)) for f in d.files or []
                  if not (f.parts and f.parts[0].endswith(".dist-info"))]))
"""


def _remove_code(python: str, dist_name: str) -> None:
    """Delete the files a distribution's RECORD lists outside its ``.dist-info`` (what
    ``pip uninstall`` would, metadata kept), then the directories that leaves empty."""
    proc = subprocess.run(
        [python, "-I", "-c", _CODE_OF, dist_name], capture_output=True, text=True, cwd="/"
    )
    if proc.returncode != 0:
        return
    dirs = set()
    for f in json.loads(proc.stdout):
        path = Path(f)
        if path.is_file() or path.is_symlink():
            path.unlink()
            dirs.add(path.parent)
    for d in sorted(dirs, key=lambda d: -len(d.parts)):
        for sub in sorted(d.rglob("__pycache__"), reverse=True):
            shutil.rmtree(sub, ignore_errors=True)
        while d.is_dir() and not any(d.iterdir()) and d.name != "site-packages":
            d.rmdir()
            d = d.parent


def _dist_name(tree: Path, source: sources.Source) -> str:
    return declared_name(tree) or source.name


_FIND_OUTSIDE = """
import importlib.util, json, os, sys, sysconfig
from importlib.metadata import packages_distributions
roots = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
found = {}
owners = packages_distributions()
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    where = [spec.origin] if spec is not None and spec.origin else []
    where += list(getattr(spec, "submodule_search_locations", None) or [])
    if any(os.path.realpath(w).startswith(tuple(r + os.sep for r in roots)) for w in where):
        found[name] = owners.get(name, [])
print(json.dumps(found))
"""


def importable_outside(python: str, names: Sequence[str]) -> dict[str, list[str]]:
    """{top-level name: distributions that provide it} for the project's own names that the
    environment imports from outside any checkout (run from ``/``, isolated mode): a stale
    install there would be loaded instead of the workspace's code."""
    if not names:
        return {}
    proc = subprocess.run(
        [python, "-I", "-c", _FIND_OUTSIDE, *names], capture_output=True, text=True, cwd="/"
    )
    if proc.returncode != 0:
        raise ConfigError(f"{python}: cannot inspect the environment: {proc.stderr[-300:]}")
    return json.loads(proc.stdout)


def top_level_names(tree: Path) -> list[str]:
    """The import names the project provides (its packages and top-level modules)."""
    _, paths, _ = find_layout(tree)
    return sorted({Path(p).name.removesuffix(".py") for p in paths})


def ensure_project_not_installed(python: str, tree: Path) -> None:
    """Take the project's code out of the environment wherever it is still importable from
    outside the tree (metadata kept, as in :func:`drop_code_keep_metadata`); a clear error when
    it cannot be taken out, since the tests would then grade the installed copy."""
    names = top_level_names(tree)
    found = importable_outside(python, names)
    for dist in sorted({d for ds in found.values() for d in ds}):
        drop_code_keep_metadata(python, dist)
    left = importable_outside(python, names) if found else {}
    for dist in sorted({d for ds in left.values() for d in ds}):  # no pip in the env: by hand
        _remove_code(python, dist)
    left = importable_outside(python, names) if left else {}
    if left:
        raise ConfigError(
            f"{python}: the project's {', '.join(sorted(left))} is still importable "
            "from the environment outside the checkout; rebuild the environment "
            "(delete it from the cache) or uninstall the project from it"
        )


#: The path file that puts a src-layout workspace on the environment's ``sys.path``.
WORKSPACE_PTH = "_verigap_workspace.pth"


def put_workspace_on_path(prefix: Path, import_root: str) -> None:
    """What ``pip install -e .`` gives a developer, pointed at the sandbox's workspace: a path
    file in the environment naming ``/workspace/<import_root>``, so the agent's own ``python -m
    pytest -q`` imports a src-layout project from its workspace (the project's installed copy
    is removed, :func:`ensure_project_not_installed`, and nothing else puts ``src`` on the path).
    Outside a sandbox that path does not exist and Python skips it; the graders' runs set
    ``PYTHONPATH``, which comes first. A flat layout needs none: ``python -m`` puts the working
    directory first."""
    from verigap.sandbox import WORKSPACE_MOUNT

    for site in sorted(Path(prefix).glob("lib/python3*/site-packages")):
        pth = site / WORKSPACE_PTH
        if not import_root:
            pth.unlink(missing_ok=True)
            continue
        line = f"{WORKSPACE_MOUNT}/{import_root}\n"
        if not pth.is_file() or pth.read_text() != line:
            pth.write_text(line)


def prepare(
    spec: str,
    *,
    test_deps: list[str] | None = None,
    env: str = "venv",
    force: bool = False,
    backend: str | None = None,
) -> Prepared:
    """Fetch, build the environment and record the baseline; reuse the cache when it is there.

    ``env="current"`` reuses the running interpreter (it must have pytest) instead of a new venv:
    fast, for tests of a local project with no dependencies.
    """
    t0 = time.perf_counter()
    deps = list(test_deps or [])
    source = sources.parse_source(spec)
    if source.kind == "dir":
        spec = source.location  # absolute, so a task can re-prepare from any directory
    staging = cache_root() / "staging" / f"{os.getpid()}-{time.time_ns()}"
    sources.fetch(source, staging / "tree")
    if env != "current":  # what the project's own addopts need, as its developers have it
        named = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in deps}
        tree0 = staging / "tree"
        deps += [d for d in addopts_plugins(tree0, find_config(tree0)) if d not in named]
    tree_sha = sources.tree_hash(staging / "tree")
    key = env_key(spec, tree_sha, deps, env)
    final = cache_root() / key
    if (final / PREPARED).is_file() and not force:
        try:
            cached = Prepared.model_validate_json((final / PREPARED).read_text())
            shutil.rmtree(staging, ignore_errors=True)
            if cached.env != "current":  # environments prepared before the path file existed
                put_workspace_on_path(Path(cached.env_prefix), cached.import_root)
            return cached
        except ValueError:  # written by an older verigap: prepare again
            pass
    if final.exists():
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging.rename(final)
    tree = final / "tree"
    import_root, source_paths, test_files = find_layout(tree)
    if not test_files:
        raise ConfigError(
            f"{spec}: no test files (test_*.py or *_test.py) in the source tree; "
            "a source must ship its pytest suite"
        )
    if not source_paths:
        raise ConfigError(
            f"{spec}: no importable package or module found at the top level (or under src/)"
        )
    if env == "current":
        python, prefix = sys.executable, sys.prefix
    else:
        python = build_env(final / "venv", tree, deps, _dist_name(tree, source))
        prefix = str(final / "venv")
        put_workspace_on_path(Path(prefix), import_root)
    config_file = find_config(tree)
    common = dict(
        python=python,
        env_prefix=Path(prefix),
        import_root=import_root,
        test_files=test_files,
        config_file=config_file,
        backend=backend,
    )
    if sources.tree_hash(tree) != tree_sha:
        raise ConfigError(f"{spec}: preparing changed the project tree; report this as a bug")
    plain = run_pytest(tree, **common)
    traced = run_pytest(tree, reach=True, **common)
    if not plain.report_found:
        raise ConfigError(
            f"{spec}: the test suite did not run (exit {plain.exit_code}); "
            f"pytest said:\n{pytest_output(plain)}"
        )
    passing = sorted(
        t for t, o in plain.outcomes.items() if o == "passed" and traced.outcomes.get(t) == "passed"
    )
    if not passing:
        code = plain.extra.get("exit_code", plain.exit_code)
        seen = (
            ", ".join(f"{n} {o}" for o, n in sorted(Counter(plain.outcomes.values()).items()))
            or "no test collected"
        )
        raise ConfigError(
            f"{spec}: no test passes on the unmodified project ({seen}; pytest "
            f"exit {code}{EXIT_MEANING.get(code, '')}); pytest said:\n"
            f"{pytest_output(plain)}\n{HINT}"
        )
    reach, import_time = split_reach(traced, plain, source_paths)
    prepared = Prepared(
        spec=spec,
        key=key,
        tree_sha256=tree_sha,
        env=env,
        test_deps=deps,
        python=python,
        env_prefix=prefix,
        import_root=import_root,
        source_paths=source_paths,
        test_files=test_files,
        config_file=config_file,
        passing=passing,
        stripped_addopts=stripped_addopts(tree, config_file),
        plugins=json.loads((Path(prefix) / PLUGINS_FILE).read_text())
        if (Path(prefix) / PLUGINS_FILE).is_file()
        else [],
        not_passing={t: o for t, o in plain.outcomes.items() if t not in set(passing)},
        reach=reach,
        import_time=import_time,
        baseline_s=round(plain.wall_s, 3),
        prepare_s=round(time.perf_counter() - t0, 3),
    )
    write_json_atomic(final / PREPARED, prepared.model_dump())
    return prepared


def split_reach(traced, plain, source_paths: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """From a reach-traced run: each project function -> the tests that reach it, and the
    functions reached only outside any test (at import or collection), both sorted. Functions
    outside ``source_paths`` (the test files, helpers) are dropped."""
    reach: dict[str, set[str]] = {}
    import_time: set[str] = set()
    for test, funcs in traced.extra.get("reach", {}).items():
        for f in funcs:
            if not any(f.startswith(p + "/") or f.startswith(p + "::") for p in source_paths):
                continue
            if test in plain.outcomes:
                reach.setdefault(f, set()).add(test)
            else:
                import_time.add(f)
    return {f: sorted(t) for f, t in sorted(reach.items())}, sorted(import_time)


EXIT_MEANING = {
    1: ": tests failed",
    2: ": interrupted (collection errors)",
    3: ": internal error",
    4: ": usage error (unknown option or plugin?)",
    5: ": no tests collected",
}
HINT = (
    "declare what the tests need with --test-dep (pytest plugins among them are loaded with "
    "-p), or pass a directory whose tests run under plain pytest"
)


def pytest_output(run, limit: int = 4000) -> str:
    """Pytest's own words (stdout then stderr), verbatim; only a very long text is shortened,
    keeping its start (usage errors) and its end (summary)."""
    text = "\n".join(x.strip("\n") for x in (run.stdout, run.stderr) if x.strip())
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n[... output shortened ...]\n" + text[-limit // 2 :]


def load_prepared(key: str) -> Prepared:
    path = cache_root() / key / PREPARED
    if not path.is_file():
        raise ConfigError(
            f"no prepared environment {key!r} under {cache_root()}; "
            "run `verigap repos prepare SOURCE` first"
        )
    p = Prepared.model_validate_json(path.read_text())
    if p.env != "current":  # environments prepared before the path file existed
        put_workspace_on_path(Path(p.env_prefix), p.import_root)
    return p
