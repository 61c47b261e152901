"""Sealed test outcomes for ``tests_only`` sites (and for sites whose equivalence inputs do not
tell their mutation apart, ``Site.discrimination == "forwarded"``): pytest runs on the
reference, calls to the mutated functions run in the candidate's process.

A ``tests_only`` site has no equivalence input (its arguments do not pickle), so its tests are
the only evidence about it, and tests that run in a process holding the candidate's code can be
made to report anything (``docs/exploits.md``). Here the process that runs pytest and writes the
report imports the **reference** tree only, with each mutated function decorated to forward its
calls (``harness/_verigap_forward.py``) to a second sandboxed process that imports the
candidate's tree and nothing else of the run. Both start side by side, each in a sandbox of its
own; they share one Unix socket (the candidate's end listens in its scratch directory, which
the trusted sandbox sees read-only). Pytest's reports, session, hooks, JSON writer, stack frames
and nonce live where no candidate code runs; what the candidate can do is answer calls, and its
answers are decoded without running its code.

Each call is answered by two candidate processes at once, in two contexts that differ in what
their code can observe (:data:`CONTEXTS`): ``channel``, a grader-like process in which the
harness makes the call; ``test``, a process started as the agent's own ``python -m pytest -q``
(its sandbox's mounts and environment and nothing else, the tree as cwd, no flags, pytest
configured with its plugins, pytest's argv and ``__main__``, no ``cloudpickle`` in
``sys.modules``; :func:`context_end`) in which the call is made
through a replay of the trusted run's stack, so its direct caller is the test function at the
line of the call. Answers that differ fail the test and are named ``context_dependent``: a fix
that is right only where it can tell it is answering the channel is wrong in one of them.

What the channel cannot carry fails the test (never a silent fallback): see the harness module.
:func:`carries` checks at task-build time that a site's tests pass with the reference and fail
with the task base through the channel; a site that does not is rejected.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from verigap.errors import IntegrityError
from verigap.repos import execution, sources
from verigap.repos.prepare import Prepared
from verigap.repos.pytest_run import (
    PY_FLAGS,
    PytestRun,
    cache_root,
    harness_dir,
    run_pytest,
)

CHANNEL = ".verigap-fwd"
#: The candidate's contexts (``harness/_verigap_forward.py``): ``channel``, the call made by the
#: harness in a grader-like process; ``test``, the call made as the agent's own pytest run makes
#: it. Every call goes to both; answers that differ are ``context_dependent``.
CONTEXTS = ("channel", "test")
#: what the decorator line looks like in the trusted tree
DECORATOR = '@__import__("_verigap_forward").forward({target!r})'


def _module(import_root: str, file: str) -> str:
    rel = file[len(import_root) + 1 :] if import_root not in ("", ".") else file
    return rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _def_line(source: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = ast.parse(source).body
    node = None
    for part in qualname.split("."):
        node = next(
            (
                n
                for n in body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == part
            ),
            None,
        )
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None


def decorate(source: str, targets: dict[str, str]) -> str:
    """``source`` with ``DECORATOR`` as the innermost decorator of each function in
    ``targets`` (qualname -> target); raises ValueError when one is not a plain ``def``."""
    lines = source.splitlines(keepends=True)
    found = []
    for qualname, target in targets.items():
        node = _def_line(source, qualname)
        if node is None or isinstance(node, ast.AsyncFunctionDef):
            raise ValueError(f"{qualname}: not a plain function definition")
        found.append((node.lineno, node.col_offset, target))
    for lineno, col, target in sorted(found, reverse=True):
        lines.insert(lineno - 1, " " * col + DECORATOR.format(target=target) + "\n")
    return "".join(lines)


def targets_of(p: Prepared, sites: Sequence[Any]) -> dict[str, list[str]]:
    """site function ("file::qualname") -> [module, qualname] in the candidate's tree."""
    return {s.function: [_module(p.import_root, s.file), s.qualname] for s in sites}


def _decorated(f: Path, want: dict[str, str]) -> bytes:
    return decorate(f.read_text(encoding="utf-8"), want).encode("utf-8")


def _check_trusted(tree: Path, expected: str) -> None:
    """Refuse a trusted tree that is not exactly the decorated reference: a file changed,
    added or removed, or bytecode or caches planted that Python would load instead."""
    junk = [
        q
        for q in tree.rglob("*")
        if q.name in sources.JUNK_DIRS or q.name.endswith(sources.JUNK_SUFFIXES)
    ]
    if junk or sources.tree_hash(tree) != expected:
        raise IntegrityError(
            f"the trusted tree {tree} does not match the reference it was built from "
            f"(tampered or corrupted{', e.g. ' + str(junk[0]) if junk else ''}); it is not "
            "used: delete it and grade again to rebuild it"
        )


def trusted_tree(p: Prepared, sites: Sequence[Any], reference: Path | None = None) -> Path:
    """The reference tree with the sites' functions decorated to forward (built once per
    reference tree, sites and harness; kept in the cache and only read).

    Checked on every use: the prepared reference must still have its recorded hash, and the
    cached tree must hash to what decorating that reference gives (IntegrityError if not)."""
    reference = Path(reference or p.tree)
    ref_sha = p.reference_hash(reference)
    tg = sorted((s.file, s.qualname, s.function) for s in sites)
    by_file: dict[str, dict[str, str]] = {}
    for file, qualname, function in tg:
        by_file.setdefault(file, {})[qualname] = function
    decorated = {file: _decorated(reference / file, want) for file, want in by_file.items()}
    expected = sources.tree_hash(reference, decorated)
    key = hashlib.sha256(json.dumps([ref_sha, tg, harness_dir().name]).encode()).hexdigest()
    dest = cache_root() / "forward-ref" / key[:32]
    if not dest.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=dest.parent))
        try:
            shutil.copytree(reference, tmp / "t", symlinks=True)
            for file, data in decorated.items():
                (tmp / "t" / file).write_bytes(data)
            sources.clean_tree(tmp / "t")
            try:
                (tmp / "t").rename(dest)
            except OSError:  # another grading made it first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    _check_trusted(dest, expected)
    return dest


#: The package the ``test`` context starts as ``python -m pytest -q``: the harness's files (its
#: ``__main__``, cloudpickle, the config and the socket), deleted once the trusted end is
#: connected and before any candidate code runs.
TEST_LAUNCH_DIR = "pytest"


def context_end(
    python: str,
    env_prefix: Path,
    import_root: str,
    candidate: Path,
    tmp: Path,
    context: str,
    targets: dict,
    timeout: float,
    backend: str | None,
    seed: str,
):
    """(command, scratch, mounts, env, socket directory) of the candidate's end in ``context``.

    ``channel`` is laid out as the graders' processes are (harness mounted, ``-s -P -B``, the
    clean environment with this grading's hash seed). ``test`` is the agent's own run: the
    command is ``python -m pytest -q`` in the copy of the tree, the sandbox's own environment
    and nothing else (a random hash seed, no plugin switch), the environment as the only mount."""
    scratch = tmp / context
    shutil.copytree(candidate, scratch, symlinks=True)
    hdir = harness_dir()
    root = import_root if import_root not in ("", ".") else "."
    ctx: dict[str, Any] = {"name": context}
    if context == "channel":  # the graders' layout: the harness mounted where they have it
        chan = scratch / CHANNEL
        chan.mkdir(mode=0o755)
        m = execution.Mounts(
            {Path(env_prefix): execution.ENV_MOUNT, hdir: execution.HARNESS_MOUNT}, backend
        )
        ctx["cwd"] = CHANNEL
        rel = CHANNEL
        cmd = [
            m.inside(python),
            *PY_FLAGS,
            m.inside(hdir / "_verigap_forward.py"),
            "serve",
            f"{CHANNEL}/cfg.json",
        ]
        # the grader's own hash seed, removed from os.environ before candidate code runs
        env, clean = {"PYTHONPATH": root, "PYTHONHASHSEED": seed}, True
    else:  # the agent's sandbox's layout: the harness starts as ``python -m pytest -q`` from
        # a ``pytest`` package of its files, which it removes before any candidate code runs
        chan = scratch / TEST_LAUNCH_DIR
        if chan.exists():
            raise ValueError(
                f"the candidate's tree has a top-level {TEST_LAUNCH_DIR!r} "
                "directory, where the test context starts: rename it"
            )
        chan.mkdir(mode=0o755)
        m = execution.Mounts({Path(env_prefix): execution.ENV_MOUNT}, backend)
        (chan / "__init__.py").write_text("")
        shutil.copy2(hdir / "_verigap_forward.py", chan / "__main__.py")
        shutil.copytree(hdir / "cloudpickle", chan / "cloudpickle")
        rel = TEST_LAUNCH_DIR
        cmd = [m.inside(python), "-m", "pytest", "-q"]
        env, clean = {}, False
    (chan / "cfg.json").write_text(
        json.dumps(
            {
                "socket": f"{rel}/sock",
                "import_root": root,
                "targets": targets,
                "accept_timeout": timeout,
                "context": ctx,
            }
        )
    )
    return cmd, scratch, m, env, chan, clean


def run_forwarded(
    p: Prepared,
    candidate: Path,
    sites: Sequence[Any],
    tests: Sequence[str],
    *,
    backend: str | None = None,
    timeout: float | None = None,
    reference: Path | None = None,
) -> PytestRun:
    """Run ``tests`` on the reference with calls to ``sites`` answered by ``candidate``, in
    every context of :data:`CONTEXTS` at once (one candidate process each).

    The report comes from the trusted process only (nonce-checked as every run's); a test whose
    calls could not cross, whose candidate answer differs from what it expects, or whose
    answers differ between the contexts fails; the last are listed in the report's
    ``forward_context_dependent``."""
    timeout = float(timeout or p.suite_timeout())
    trusted = trusted_tree(p, sites, reference)
    targets = targets_of(p, sites)
    seed = str(secrets.randbelow(2**32 - 2) + 1)
    contexts = tuple(CONTEXTS)
    with tempfile.TemporaryDirectory(prefix="vg-fwd-") as tmp:
        ends = [
            context_end(
                p.python,
                Path(p.env_prefix),
                p.import_root,
                candidate,
                Path(tmp),
                c,
                targets,
                timeout,
                backend,
                seed,
            )
            for c in contexts
        ]
        m = ends[0][2]
        with ThreadPoolExecutor(max_workers=len(ends)) as pool:
            servers = [
                pool.submit(
                    execution.run,
                    cmd,
                    scratch=scratch,
                    mounts=mm,
                    timeout=timeout,
                    backend=mm.backend,
                    env=env,
                    clean_env=clean,
                )
                for cmd, scratch, mm, env, _chan, clean in ends
            ]
            try:
                run = run_pytest(
                    trusted,
                    python=p.python,
                    env_prefix=Path(p.env_prefix),
                    import_root=p.import_root,
                    test_files=list(tests),
                    config_file=p.config_file,
                    backend=m.backend,
                    timeout=timeout,
                    extra_ro=[e[4] for e in ends],
                    forward={
                        "sockets": [str(e[4] / "sock") for e in ends],
                        "targets": targets,
                        "packages": _packages(p),
                    },
                )
            finally:
                for server, e in zip(servers, ends, strict=True):
                    _release(server, e[4] / "sock")
            for server in servers:
                server.result()
    return run


def _packages(p: Prepared) -> list[str]:
    """Top-level names of the project's own packages and modules (they cross by reference)."""
    out = set()
    for sp in p.source_paths:
        rel = (
            sp[len(p.import_root) + 1 :]
            if p.import_root not in ("", ".") and sp.startswith(p.import_root + "/")
            else sp
        )
        out.add(rel.split("/")[0].removesuffix(".py"))
    return sorted(out)


def _release(server, sock: Path) -> None:
    """Let the candidate's end exit when the trusted run never connected (it waits for one
    peer): connect and close until it has ended."""
    while not server.done():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(str(sock))
        except OSError:
            time.sleep(0.02)
        finally:
            with contextlib.suppress(OSError):
                s.close()


def carries(
    p: Prepared, sites: Sequence[Any], base: Path, *, backend: str | None = None
) -> str | None:
    """None when the channel carries every site: each site's tests pass with the reference as
    the candidate, and some fail with the task base (the mutation reaches them through the
    channel). Otherwise why not."""
    tests = sorted({t for s in sites for t in s.fail_to_pass})
    for tree, want in ((p.tree, True), (base, False)):
        try:
            run = run_forwarded(p, tree, sites, tests, backend=backend)
        except (ValueError, SyntaxError) as e:  # a function the decorator cannot wrap
            return str(e)
        if not run.report_found:
            return "the forwarded run wrote no report"
        if want and run.extra.get("forward_context_dependent"):
            return (
                f"{', '.join(run.extra['forward_context_dependent'])}: the reference "
                "answers differently in the channel's contexts"
            )
        for s in sites:
            passed = not run.failing(s.fail_to_pass)
            if want and not passed:
                return f"{s.function}: its tests fail on the reference through the channel"
            if not want and passed:
                return f"{s.function}: the mutation does not reach its tests through the channel"
    return None


__all__ = ["run_forwarded", "carries", "trusted_tree", "decorate"]
