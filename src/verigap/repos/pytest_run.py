"""Run a project's tests on one tree through the sandbox and read back the harness's report.

The tree under test, the prepared environment and the harness are mounted read-only; the only
writable path is a fresh scratch directory holding the run's config and report. Pytest runs
with a clean environment (no user site, the script's directory not on the path, a fixed hash
seed so test ids built from sets are the same in every run), the plugin autoload off, no cache
provider, a pinned config file and rootdir, and the project root as working directory (tests that
open files relative to it, or start ``python -m pkg``, find them), so nothing in the caller's
environment variables, user site or caches changes the run.

Options in the project's ``addopts`` that only report (coverage, colour, xdist, junit, html,
benchmark) are dropped from every run, because their plugins are not loaded and they do not
change outcomes; :func:`stripped_addopts` says which. Plugins of the declared test dependencies
are loaded explicitly with ``-p`` (``pytest_plugins.json`` in a prepared venv).
"""

from __future__ import annotations

import base64
import configparser
import hashlib
import json
import re
import secrets
import shlex
import shutil
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verigap.repos import execution
from verigap.repos.harness import EQUIV, FORWARD, HARNESS_DIR, RUNNER, WARM

EMPTY_INI = "[pytest]\n"
#: Interpreter flags of every harness process: like ``-I`` (no user site, script dir not on
#: sys.path) but honouring the clean environment's PYTHONHASHSEED, which ``-I``/``-E`` ignore.
PY_FLAGS = ("-s", "-P", "-B")
PLUGINS_FILE = "pytest_plugins.json"
#: addopts that only report or parallelize; the first group takes a value (``--opt VALUE``)
_REPORTING_VALUE = re.compile(
    r"^(--cov|--cov-report|--cov-config|--cov-fail-under|--cov-context|--color|-n"
    r"|--numprocesses|--dist|--maxprocesses|--junitxml|--junit-xml|--html)$"
)
_REPORTING = re.compile(
    r"^(--cov(-[\w-]+)?(=.*)?|--no-cov(-on-fail)?|--color=.*|--code-highlight(=.*)?|-n\S+"
    r"|--numprocesses=.*|--dist=.*|--maxprocesses=.*|--junit-?xml=.*|--html=.*"
    r"|--self-contained-html|--benchmark-.*|--instafail|--sugar|--no-sugar)$"
)


def config_addopts(tree: Path, config_file: str | None) -> str | None:
    """The ``addopts`` string of the project's pytest config, or None when it has none."""
    if not config_file or not (tree / config_file).is_file():
        return None
    path = tree / config_file
    try:
        if path.name == "pyproject.toml":
            ini = (
                tomllib.loads(path.read_text())
                .get("tool", {})
                .get("pytest", {})
                .get("ini_options", {})
            )
            v = ini.get("addopts")
            return " ".join(map(shlex.quote, v)) if isinstance(v, list) else v
        cp = configparser.ConfigParser(interpolation=None)
        cp.read(path)
        section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
        return cp.get(section, "addopts", fallback=None)
    except (tomllib.TOMLDecodeError, configparser.Error, OSError, UnicodeDecodeError):
        return None


def split_addopts(addopts: str) -> tuple[list[str], list[str]]:
    """(kept, stripped) options: reporting/parallel options go, everything else stays."""
    try:
        words = shlex.split(addopts)
    except ValueError:
        return addopts.split(), []
    kept: list[str] = []
    stripped: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if _REPORTING_VALUE.match(w):
            n = 2 if i + 1 < len(words) and not words[i + 1].startswith("-") else 1
        elif _REPORTING.match(w):
            n = 1
        else:
            kept.append(w)
            i += 1
            continue
        stripped.append(" ".join(words[i : i + n]))
        i += n
    return kept, stripped


#: The plugin a project's addopts need, by option: its developers have it installed, and the
#: agent's own ``python -m pytest -q`` reads the addopts as they are (our runs strip them).
_ADDOPT_PLUGINS = (
    (re.compile(r"^--(no-)?cov"), "pytest-cov"),
    (re.compile(r"^(-n|--numprocesses|--dist|--maxprocesses)"), "pytest-xdist"),
    (re.compile(r"^(--html|--self-contained-html)"), "pytest-html"),
    (re.compile(r"^--benchmark-"), "pytest-benchmark"),
    (re.compile(r"^--instafail"), "pytest-instafail"),
    (re.compile(r"^--(no-)?sugar"), "pytest-sugar"),
)


def addopts_plugins(tree: Path, config_file: str | None) -> list[str]:
    """The distributions the options of the project's addopts come from (``--cov`` from
    pytest-cov, ``-n`` from pytest-xdist, ...), so the test command the agent is told to run
    starts in its workspace rather than stopping on an unrecognised argument."""
    addopts = config_addopts(tree, config_file)
    stripped = split_addopts(addopts)[1] if addopts else []
    return sorted({dist for o in stripped for rx, dist in _ADDOPT_PLUGINS if rx.match(o)})


def stripped_addopts(tree: Path, config_file: str | None) -> list[str]:
    """Which of the project's addopts every run drops (to tell the user)."""
    addopts = config_addopts(tree, config_file)
    return split_addopts(addopts)[1] if addopts else []


def env_plugins(env_prefix: Path) -> list[str]:
    """Plugin modules the prepared environment loads explicitly (``-p``)."""
    f = Path(env_prefix) / PLUGINS_FILE
    if not f.is_file():
        return []
    try:
        return [str(x) for x in json.loads(f.read_text())]
    except (json.JSONDecodeError, TypeError):
        return []


def cache_root() -> Path:
    import os

    return Path(os.environ.get("VERIGAP_CACHE", Path.home() / ".cache" / "verigap")) / "repos"


def _cloudpickle_dir() -> Path:
    import cloudpickle

    return Path(cloudpickle.__file__).parent


def harness_dir() -> Path:
    """A private, content-addressed copy of the harness scripts (mounted read-only), with the
    ``cloudpickle`` package beside them (the forwarding channel's two ends import it)."""
    h = hashlib.sha256()
    cp = sorted(_cloudpickle_dir().glob("*.py"))
    for f in (RUNNER, EQUIV, FORWARD, WARM, *cp):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    dest = cache_root() / "harness" / h.hexdigest()[:16]
    if not dest.is_dir():
        cache_root().mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache_root()))
        tmp.chmod(0o755)  # readable by the unprivileged user sandboxed commands run as
        for f in (RUNNER, EQUIV, FORWARD, WARM):
            shutil.copy2(f, tmp / f.name)
        (tmp / "cloudpickle").mkdir(mode=0o755)
        for f in cp:
            shutil.copy2(f, tmp / "cloudpickle" / f.name)
        (tmp / "empty.ini").write_text(EMPTY_INI)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            tmp.rename(dest)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


@dataclass
class PytestRun:
    """What one pytest run produced: per-test outcomes, exit code, timings, raw output."""

    exit_code: int | None
    outcomes: dict[str, str]
    report_found: bool
    wall_s: float
    timed_out: bool
    stdout: str
    stderr: str
    extra: dict[str, Any] = field(default_factory=dict)
    forged: bool = False  # a report was there but without this run's nonce

    def failing(self, expected: Sequence[str]) -> set[str]:
        """Expected ids that did not pass: missing, skipped, xfail and error all count."""
        return {t for t in expected if self.outcomes.get(t) != "passed"}


def suite_options(tree: Path, config_file: str | None, env_prefix: Path) -> list[str]:
    """What makes the project's suite run under plain pytest with autoload off: ``-p`` for the
    test deps' plugins, and its addopts without the reporting options (when it has some)."""
    args: list[str] = []
    for plugin in env_plugins(env_prefix):
        args += ["-p", plugin]
    addopts = config_addopts(tree, config_file)
    if addopts:
        kept, stripped = split_addopts(addopts)
        if stripped:
            args += ["-o", "addopts=" + " ".join(map(shlex.quote, kept))]
    return args


def pytest_args(
    tree: Path,
    test_files: Sequence[str],
    config_file: str | None,
    env_prefix: Path | None = None,
    *,
    mounts: execution.Mounts | None = None,
) -> list[str]:
    """pytest's arguments for ``tree``; its paths as ``mounts`` shows them (else host paths)."""
    at = mounts.inside if mounts is not None else str
    cfg = at(tree / config_file) if config_file else at(harness_dir() / "empty.ini")
    args = [
        *(at(tree / f) for f in test_files),
        "-c",
        cfg,
        "--rootdir",
        at(tree),
        "-p",
        "no:cacheprovider",
        "-q",
        "--tb=short",
        "-o",
        "console_output_style=classic",
        "--color=no",
        # the runner imports the environment's declared plugins before pytest does (to take
        # its snapshot after them), and pytest then warns that it cannot rewrite their asserts:
        # a warning of ours, which a project's ``filterwarnings = error`` would make fatal
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
    ]
    return args + suite_options(tree, config_file, env_prefix) if env_prefix else args


def _root(tree: Path, import_root: str, at=str) -> str:
    """Where the project's packages are imported from (the tree or its ``src``)."""
    return at(tree / import_root) if import_root not in ("", ".") else at(tree)


def _mounts(
    tree: Path, env_prefix: Path, backend: str | None, extra_ro: Sequence[Path] = ()
) -> execution.Mounts:
    """The tree, the environment and the harness at their fixed paths (``extra_ro`` under
    ``/verigap/ro/N``)."""
    m = {
        Path(tree): execution.TREE_MOUNT,
        Path(env_prefix): execution.ENV_MOUNT,
        harness_dir(): execution.HARNESS_MOUNT,
    }
    m.update({Path(x): f"/verigap/ro/{i}" for i, x in enumerate(extra_ro)})
    return execution.Mounts(m, backend)


def run_pytest(
    tree: Path,
    *,
    python: str,
    env_prefix: Path,
    import_root: str,
    test_files: Sequence[str],
    config_file: str | None,
    timeout: float = 300.0,
    reach: bool = False,
    capture: dict[str, Any] | None = None,
    extra_ro: Sequence[Path] = (),
    backend: str | None = None,
    forward: dict[str, Any] | None = None,
    memory_mb: int = 4096,
) -> PytestRun:
    """Run pytest on ``tree`` in a fresh sandbox; ``tree`` is mounted read-only (at
    ``/verigap/tree``, beside the environment and the harness: no host path shows inside).
    ``memory_mb``: the address-space limit (a run that starts a browser needs it lifted)."""
    hdir = harness_dir()
    m = _mounts(tree, env_prefix, backend, extra_ro)
    with execution.scratch(m, timeout=timeout, prefix="vg-run-") as scratch:
        out = scratch / "report.json"
        nonce = secrets.token_hex(16)
        cfg: dict[str, Any] = {
            "nonce": nonce,
            "import_root": _root(tree, import_root, m.inside),
            "out": out.name,  # relative to the sandbox's starting directory (the scratch dir)
            "cwd": m.inside(tree),  # where the tests run: the project root, as they expect
            "pytest_args": pytest_args(tree, test_files, config_file, env_prefix, mounts=m)
            # the forwarded run (no candidate code in it) reports outcomes only: plain asserts
            # pass and fail as rewritten ones do, and rewriting a whole test module at every
            # grading was about half of its CPU (toolz: 1.0 -> 0.57 CPU-s)
            + (["--assert=plain"] if forward else []),
        }
        if reach:
            cfg["reach"] = {"root": m.inside(tree)}
        if capture:
            cfg["capture"] = {"root": m.inside(tree), **capture}
        if forward:  # ``sockets``: host paths under ``extra_ro`` (one per candidate context)
            cfg["forward"] = {
                **forward,
                "root": m.inside(tree),
                "sockets": [m.inside(x) for x in forward["sockets"]],
            }
        (scratch / "run.json").write_text(json.dumps(cfg))
        res = execution.run(
            [m.inside(python), *PY_FLAGS, m.inside(hdir / RUNNER.name), "run.json"],
            scratch=scratch,
            mounts=m,
            timeout=timeout,
            backend=m.backend,
            env={"PYTHONPATH": _root(tree, import_root, m.inside)},
            memory_mb=memory_mb,
        )
        report: dict[str, Any] = {}
        if out.is_file():
            try:
                report = json.loads(out.read_text())
            except json.JSONDecodeError:
                report = {}
    forged = bool(report) and report.get("nonce") != nonce
    if forged:
        report = {}
    return PytestRun(
        forged=forged,
        exit_code=None if res.timed_out else res.returncode,
        outcomes=dict(report.get("outcomes", {})),
        report_found=bool(report),
        wall_s=res.wall_s,
        timed_out=res.timed_out,
        stdout=res.stdout,
        stderr=res.stderr,
        extra={k: v for k, v in report.items() if k not in ("outcomes", "nonce")},
    )


#: The contexts the equivalence check runs in. ``plain``: the grader's own (``python -s -P -B``
#: on the harness script, the clean environment with a fixed hash seed, the scratch directory as
#: cwd, a per-call timer, a shallow stack). ``agent``: the agent's own sandboxed run, as closely
#: as the harness can make it (``python -m pytest -q`` in a writable copy of the tree at
#: ``/workspace``, the agent sandbox's environment and no other, a random hash seed, no flags, no
#: timer, ``__main__`` made from pytest's); docs/repos.md lists what stays observable.
CONTEXTS = ("plain", "agent")
#: Where the agent context writes its answers (made only after the last call returns).
EQUIV_IO = ".verigap-eq"
#: The package the agent context starts as ``python -m pytest`` (the runner's files; deleted
#: by the runner before any project code runs).
AGENT_LAUNCH_DIR = "pytest"
#: Bumped when what the contexts look like changes (the reference's cached answers depend on it).
#: 4: the agent context calls each input through a replay of its test's frames.
#: 5: the agent context is started as ``python -m pytest -q`` with the agent's environment
#: (random hash seed, no flags, no timer); encodings trust nothing the value claims.
EQUIV_LAYOUT = 5


def run_equiv(
    tree: Path,
    inputs: list[dict[str, Any]],
    *,
    python: str,
    env_prefix: Path,
    import_root: str,
    mode: str = "call",
    context: str = "plain",
    timeout: float = 120.0,
    backend: str | None = None,
) -> dict[str, Any] | None:
    """Call functions of ``tree`` on pickled inputs in a fresh sandboxed process.

    ``plain``: the tree read-only at ``/verigap/tree``, the scratch directory as cwd. ``agent``:
    laid out as the agent's own sandbox is: a copy of the tree is the writable workspace
    (``/workspace``, the cwd) and the environment sits at ``/verigap/env``, so code that looks at
    where it lives sees what it sees in the agent's runs, and something else in ``plain``."""
    if context not in CONTEXTS:
        raise ValueError(f"context {context!r}: use one of {CONTEXTS}")
    hdir = harness_dir()
    agent = context == "agent"
    # the agent context mounts what the agent's sandbox mounts, the environment only (a
    # harness mount would tell every grading context from the agent's runs): the runner
    # starts from a copy beside its files
    m = (
        _mounts(tree, env_prefix, backend)
        if not agent
        else execution.Mounts({Path(env_prefix): execution.ENV_MOUNT}, backend)
    )
    root = (
        _root(tree, import_root, m.inside)
        if not agent
        else (import_root if import_root not in ("", ".") else ".")
    )
    python_in = m.inside(python)
    runner = m.inside(hdir / EQUIV.name)
    with execution.scratch(m, timeout=timeout, prefix="vg-eq-") as scratch:
        # agent: the runner's files sit in a ``pytest`` package first on the path, so the
        # command is the agent's own ``python -m pytest -q``; the runner deletes them before
        # project code runs and writes its answers under EQUIV_IO only after every call
        io = scratch / AGENT_LAUNCH_DIR if agent else scratch
        if agent:
            shutil.copytree(tree, scratch, symlinks=True, dirs_exist_ok=True)
            io.mkdir()
            (io / "__init__.py").write_text("")
            shutil.copy2(hdir / EQUIV.name, io / "__main__.py")
            shutil.copy2(hdir / FORWARD.name, io / FORWARD.name)  # its frame replay
            if any(b"cloudpickle" in base64.b64decode(x["blob"]) for x in inputs):
                shutil.copytree(hdir / "cloudpickle", io / "cloudpickle")  # to load those
        (io / "inputs.json").write_text(json.dumps(inputs))
        out = scratch / EQUIV_IO / "out.json" if agent else scratch / "out.json"
        rel = "" if not agent else AGENT_LAUNCH_DIR + "/"
        nonce = secrets.token_hex(16)
        cfg: dict[str, Any] = {
            "nonce": nonce,
            "import_root": root,
            "inputs": rel + "inputs.json",
            "out": f"{EQUIV_IO}/{out.name}" if agent else out.name,
            "mode": mode,
        }
        cmd = [python_in, *PY_FLAGS, runner, "eq.json"]
        env: dict[str, str] = {"PYTHONPATH": root}
        if agent:
            # nothing but what the agent's sandbox sets: no hash seed (random, as for the
            # agent), no PYTHONPATH, no plugin switch; no interpreter flags
            cfg["context"] = {"import_pytest": True, "depth": 40, "replay": True}
            cmd = [python_in, "-m", "pytest", "-q"]
            env = {}
        (io / "eq.json").write_text(json.dumps(cfg))
        execution.run(
            cmd,
            scratch=scratch,
            mounts=m,
            timeout=timeout,
            backend=m.backend,
            env=env,
            clean_env=not agent,
        )
        if not out.is_file():
            return None
        try:
            data = json.loads(out.read_text())
        except json.JSONDecodeError:
            return None
        return data if isinstance(data, dict) and data.get("nonce") == nonce else None


__all__ = [
    "CONTEXTS",
    "PytestRun",
    "run_pytest",
    "run_equiv",
    "cache_root",
    "harness_dir",
    "HARNESS_DIR",
]
