"""Sealed test outcomes for ``tests_only`` sites: pytest runs on the reference, calls to the
mutated functions run in the candidate's process.

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

The candidate's end is laid out like the agent's own runs (a writable copy of the tree as cwd,
no interpreter flags, pytest imported, pytest's argv), so a fix that behaves only under the
graders' flags fails here too.

What the channel cannot carry fails the test (never a silent fallback): see the harness module.
:func:`carries` checks at task-build time that a site's tests pass with the reference and fail
with the task base through the channel; a site that does not is rejected.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
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
    PytestRun,
    cache_root,
    harness_dir,
    run_pytest,
)

CHANNEL = ".verigap-fwd"
#: what the decorator line looks like in the trusted tree
DECORATOR = '@__import__("_verigap_forward").forward({target!r})'


def _module(import_root: str, file: str) -> str:
    rel = file[len(import_root) + 1:] if import_root not in ("", ".") else file
    return rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _def_line(source: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = ast.parse(source).body
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                        | ast.ClassDef) and n.name == part), None)
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
    junk = [q for q in tree.rglob("*")
            if q.name in sources.JUNK_DIRS or q.name.endswith(sources.JUNK_SUFFIXES)]
    if junk or sources.tree_hash(tree) != expected:
        raise IntegrityError(
            f"the trusted tree {tree} does not match the reference it was built from "
            f"(tampered or corrupted{', e.g. ' + str(junk[0]) if junk else ''}); it is not "
            "used: delete it and grade again to rebuild it")


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


def run_forwarded(p: Prepared, candidate: Path, sites: Sequence[Any], tests: Sequence[str], *,
                  backend: str | None = None, timeout: float | None = None,
                  reference: Path | None = None) -> PytestRun:
    """Run ``tests`` on the reference with calls to ``sites`` answered by ``candidate``.

    The report comes from the trusted process only (nonce-checked as every run's); a test whose
    calls could not cross, or whose candidate answer differs from what it expects, fails."""
    timeout = float(timeout or p.suite_timeout())
    trusted = trusted_tree(p, sites, reference)
    targets = targets_of(p, sites)
    hdir = harness_dir()
    with tempfile.TemporaryDirectory(prefix="vg-fwd-") as tmp:
        scratch = Path(tmp) / "cand"
        shutil.copytree(candidate, scratch, symlinks=True)
        chan = scratch / CHANNEL
        chan.mkdir(mode=0o755)
        m = execution.Mounts({Path(p.env_prefix): execution.ENV_MOUNT,
                              hdir: execution.HARNESS_MOUNT}, backend)
        root = p.import_root if p.import_root not in ("", ".") else "."
        python_in = m.inside(p.python)
        (chan / "cfg.json").write_text(json.dumps({
            "socket": f"{CHANNEL}/sock", "import_root": root, "targets": targets,
            "accept_timeout": timeout,
            "context": {"argv": [f"{python_in} -m pytest", "-q"], "import_pytest": True}}))
        cmd = [python_in, m.inside(hdir / "_verigap_forward.py"), "serve", f"{CHANNEL}/cfg.json"]
        with ThreadPoolExecutor(max_workers=1) as pool:
            server = pool.submit(execution.run, cmd, scratch=scratch, mounts=m, timeout=timeout,
                                 backend=m.backend, env={"PYTHONPATH": root, "TERM": "xterm",
                                                         "COLUMNS": "80"})
            try:
                run = run_pytest(trusted, python=p.python, env_prefix=Path(p.env_prefix),
                                 import_root=p.import_root, test_files=list(tests),
                                 config_file=p.config_file, backend=m.backend, timeout=timeout,
                                 extra_ro=[chan],
                                 forward={"socket": str(chan / "sock"), "targets": targets,
                                          "packages": _packages(p)})
            finally:
                _release(server, chan / "sock")
            server.result()
    return run


def _packages(p: Prepared) -> list[str]:
    """Top-level names of the project's own packages and modules (they cross by reference)."""
    out = set()
    for sp in p.source_paths:
        rel = sp[len(p.import_root) + 1:] if p.import_root not in ("", ".") and \
            sp.startswith(p.import_root + "/") else sp
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


def carries(p: Prepared, sites: Sequence[Any], base: Path, *, backend: str | None = None
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
        for s in sites:
            passed = not run.failing(s.fail_to_pass)
            if want and not passed:
                return f"{s.function}: its tests fail on the reference through the channel"
            if not want and passed:
                return f"{s.function}: the mutation does not reach its tests through the channel"
    return None


__all__ = ["run_forwarded", "carries", "trusted_tree", "decorate"]
