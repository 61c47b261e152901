"""Feature tasks from a web application's history: find, validate, grade.

A candidate is a commit that changes the application (not only its tests) and adds or edits
test files. Its task starts from the parent's tree (exported without git data, so no future
history is in the workspace) with a product-owner ticket written for it (``tickets.yaml``). The
hidden tests are the commit's test files at the commit, plus a browser check for features a
user sees in a page (``browser_checks/``). A task is kept only when, run in the sandbox:

- some hidden test fails at the base and passes at the reference (``fail_to_pass``);
- the real change (the commit's non-test files applied over the base) is paid by ``grade``;
- the unchanged base is not paid.

Tests that fail at the reference are dropped (they depend on something the sandbox lacks), and a
task whose browser check does not fail at the base is rejected with that reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from verigap.errors import ConfigError
from verigap.repos.mine import export_tree, walk
from verigap.repos.webfeatures.task import FeatureTask, Layer
from verigap.sandbox import Limits, make_sandbox, materialize
from verigap.verdict import Verdict

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TICKETS = HERE / "tickets.yaml"
BROWSER_CHECKS = HERE / "browser_checks"
HARNESS = HERE / "browser_harness.py"
HARNESS_AS = "tests/_verigap_browser.py"  # where the hidden browser checks import it from
CHROMEDRIVER_PATH = "/usr/bin/chromedriver"
#: Chromium reserves a large address space up front (its heap cages): the address-space limit is
#: lifted to 1 TiB for test runs; the wall clock and process limits still hold
BROWSER_MEMORY_MB = 1 << 20
TEST_WALL_S = 900.0
_OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+)")


def bundle_path(project: str) -> Path:
    path = DATA / f"{project}.bundle"
    if not path.is_file():
        known = sorted(p.stem for p in DATA.glob("*.bundle"))
        raise ConfigError(f"no bundle for project {project!r}; known projects: {known}")
    return path


def open_bundle(project: str, cache: Path) -> Path:
    """A bare clone of the project's bundle under ``cache`` (made once, then reused)."""
    dest = cache / f"{project}.git"
    if not dest.is_dir():
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(bundle_path(project)), str(dest)],
            check=True,
            capture_output=True,
        )
    return dest


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args)} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


# --------------------------------------------------------------------------- candidates


def is_test_path(path: str) -> bool:
    return path.startswith("tests/") and path.endswith(".py")


def layers_of(repo: Path, reference: str, files: Iterable[str]) -> list[Layer]:
    """Which layers of the app the real change touches, read from its paths and its diff."""
    out: set[Layer] = set()
    for f in files:
        if f.startswith("migrations/versions/") or f == "app/models.py":
            out.add("database")
        if f.startswith("app/templates/") or f.startswith("app/static/"):
            out.add("frontend")
    for f in files:
        if f.startswith("app/") and f.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(repo), "show", f"{reference}:{f}"], capture_output=True, text=True
            ).stdout
            if ".route(" in text:  # a module of HTTP endpoints, changed by the feature
                out.add("http")
    return sorted(out)  # type: ignore[return-value]


@dataclass(frozen=True)
class Candidate:
    sha: str
    parent: str
    subject: str
    changed_files: list[str]  # non-test
    test_files: list[str]  # tests/*.py the commit adds or edits


def candidates(repo: Path, rev_range: str = "main") -> list[Candidate]:
    """Commits that change the app and add or edit tests (oldest first)."""
    out = []
    for c in reversed(walk(repo, rev_range, 10_000)):
        if len(c.parents) != 1:
            continue
        tests = [p for s, p in c.changes if is_test_path(p) and s != "D"]
        app = [p for _, p in c.changes if p.startswith(("app/", "migrations/", "config.py"))]
        if tests and app:
            changed = [p for _, p in c.changes if not p.startswith("tests/")]
            out.append(Candidate(c.sha, c.parents[0], c.subject, changed, tests))
    return out


# --------------------------------------------------------------------------- running tests


def _venv_root() -> Path:
    import sys

    return Path(sys.prefix)


def run_tests(tree: Path, files: list[str], *, backend: str = "bwrap") -> dict[str, str]:
    """Run pytest on ``files`` of ``tree`` in a sandbox (network unshared); test id -> outcome.

    The tree is copied first, so a run never changes it.
    """
    with tempfile.TemporaryDirectory(prefix="verigap-webfeature-") as tmp:
        tmp_path = Path(tmp)
        tmp_path.chmod(0o755)
        ws = materialize(tree, tmp_path / "ws")
        ws.chmod(0o755)
        box = make_sandbox(
            ws,
            backend=backend,
            limits=Limits(wall_s=TEST_WALL_S, memory_mb=BROWSER_MEMORY_MB, processes=512),
            ro_binds=[_venv_root()],
        )
        try:
            argv = [
                f"{_venv_root()}/bin/python",
                "-m",
                "pytest",
                "-q",
                "-rA",
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=",
                *files,
            ]
            r = box.exec(argv)
        finally:
            box.close()
    outcomes: dict[str, str] = {}
    for line in r.stdout.splitlines():
        m = _OUTCOME.match(line)
        if m:
            outcomes[m.group(2)] = m.group(1)
    if not outcomes and r.returncode not in (0, 1):
        outcomes["<collection>"] = f"ERROR rc={r.returncode} {r.reason or ''}".strip()
    return outcomes


def passed(outcomes: dict[str, str], ids: Iterable[str]) -> bool:
    return all(outcomes.get(i) in ("PASSED", "XFAIL") for i in ids)


# --------------------------------------------------------------------------- workspaces


def export(repo: Path, rev: str, dest: Path) -> Path:
    export_tree(repo, rev, dest)
    dest.chmod(0o755)
    return dest


def apply_reference(repo: Path, task: FeatureTask, workspace: Path) -> None:
    """The real change: the commit's non-test files written over (or removed from) a base tree."""
    for path in task.changed_files:
        target = workspace / path
        blob = subprocess.run(
            ["git", "-C", str(repo), "show", f"{task.reference}:{path}"], capture_output=True
        )
        if blob.returncode != 0:  # deleted by the commit
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)


def hidden_tree(repo: Path, task: FeatureTask, workspace: Path, dest: Path) -> Path:
    """The submission with the base's tests restored and the hidden tests laid over them.

    Restoring first means an edited or deleted test in the submission changes nothing.
    """
    shutil.copytree(workspace, dest, symlinks=True)
    dest.chmod(0o755)
    shutil.rmtree(dest / "tests", ignore_errors=True)
    base_tests = dest.parent / "base-tests"
    export_tree(repo, f"{task.base}:tests", base_tests)
    shutil.copytree(base_tests, dest / "tests")
    for rel, text in task.hidden_files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    if task.browser_check:
        shutil.copyfile(HARNESS, dest / HARNESS_AS)
    return dest


def hidden_outcomes(
    repo: Path, task: FeatureTask, workspace: Path, *, backend: str = "bwrap"
) -> dict[str, str]:
    """The hidden test files run on a submission (base tests restored, hidden ones laid over)."""
    with tempfile.TemporaryDirectory(prefix="verigap-webgrade-") as tmp:
        tmp_path = Path(tmp)
        tmp_path.chmod(0o755)
        tree = hidden_tree(repo, task, workspace, tmp_path / "tree")
        return run_tests(tree, sorted(task.hidden_files), backend=backend)


def visible_outcomes(task: FeatureTask, workspace: Path, *, backend: str = "bwrap") -> dict:
    """What the agent could run itself: the base's versions of the touched test files."""
    files = sorted({t.split("::")[0] for t in task.visible_tests})
    return run_tests(workspace, files, backend=backend) if files else {}


def verdict_from(
    task: FeatureTask, hidden: dict[str, str], visible: dict[str, str] | None = None
) -> Verdict:
    """Paid (reward 1) when every hidden test passes; ``visible`` reported beside it."""
    checks: dict[str, bool | float] = {
        "hidden": passed(hidden, task.hidden_tests),
        "fail_to_pass": passed(hidden, task.fail_to_pass),
        "pass_to_pass": passed(hidden, task.pass_to_pass),
    }
    if visible is not None and task.visible_tests:  # no visible tests: nothing to report
        checks["visible"] = passed(visible, task.visible_tests)
    browser = [t for t in task.hidden_tests if t.startswith(task.browser_check or "\0")]
    if browser:
        checks["browser"] = passed(hidden, browser)
    correct = bool(checks["hidden"])
    return Verdict(
        task_id=task.task_id,
        checks=checks,
        reward=1.0 if correct else 0.0,
        correct=correct,
        detail={"failed": sorted(t for t in task.hidden_tests if hidden.get(t) != "PASSED")},
    )


def grade(repo: Path, task: FeatureTask, workspace: Path, *, backend: str = "bwrap") -> Verdict:
    """The grader: the hidden tests (and browser check) on the submission, the visible beside."""
    hidden = hidden_outcomes(repo, task, workspace, backend=backend)
    return verdict_from(task, hidden, visible_outcomes(task, workspace, backend=backend))


# --------------------------------------------------------------------------- building


def load_tickets(path: Path = TICKETS) -> dict[str, str]:
    """Commit sha prefix -> ticket text (written for the commit; never names the code)."""
    data = yaml.safe_load(path.read_text()) or {}
    return {str(k): str(v).strip() for k, v in data.items()}


def ticket_for(tickets: dict[str, str], sha: str) -> str | None:
    found = [t for k, t in tickets.items() if sha.startswith(k)]
    return found[0] if found else None


def browser_check_for(sha: str) -> tuple[str, str] | None:
    """The hidden browser check written for commit ``sha`` (file name, text), if there is one."""
    for p in sorted(BROWSER_CHECKS.glob("check_*.py")):
        if sha.startswith(p.stem.removeprefix("check_")):
            return f"tests/test_browser_{p.stem.removeprefix('check_')}.py", p.read_text()
    return None


_ROUTE_CALL = re.compile(r"""\.(get|post|put|patch|delete)\(\s*f?["'](/[^"']*)["']""", re.I)
_FORM_KEYS = re.compile(r"""data\s*=\s*\{([^}]*)\}""", re.S)
_KEY = re.compile(r"""["'](\w+)["']\s*:""")


def _url(raw: str) -> str:
    """A request path with every formatted part (``{...}``, cut or whole) shown as <id>."""
    url = re.sub(r"\{[^}]*\}", "<id>", raw.split("?")[0])
    return re.sub(r"\{.*$", "<id>", url)


_IMPORT = re.compile(r"^from ((?:app|config)(?:\.\w+)*) import (?:\(([^)]*)\)|([\w, ]+)$)", re.M)


def new_names(hidden_files: dict[str, str], base: Path) -> list[str]:
    """Names the hidden tests import from the app that the base does not define.

    A ticket lists them (``app.models.User``) so the checks can import what the agent builds;
    they are the app's public surface to its tests, not how the feature works.
    """
    out = set()
    for text in hidden_files.values():
        for m in _IMPORT.finditer(text):
            module = m.group(1)
            rel = module.replace(".", "/")
            files = [base / f"{rel}.py", base / rel / "__init__.py"]
            source = "\n".join(f.read_text() for f in files if f.is_file())
            names = (m.group(2) or m.group(3)).replace("\n", " ").split(",")
            for name in (n.strip() for n in names):
                if not name:
                    continue
                defined = re.search(
                    rf"^(?:class|def)\s+{name}\b|^{name}\s*[:=]|import .*\b{name}\b",
                    source,
                    re.M,
                )
                submodule = (base / rel / f"{name}.py").is_file() or (base / rel / name).is_dir()
                if not defined and not submodule:
                    out.add(f"{module}.{name}")
    return sorted(out)


def interface(hidden_files: dict[str, str], tests: Iterable[str]) -> list[str]:
    """The HTTP requests and form fields the given tests make, as a ticket's interface notes.

    A product owner's ticket names what the outside world calls (a path, a form field) so that
    the hidden tests are reachable; it never names a function, a file or a column.
    """
    import ast

    wanted: dict[str, set[str]] = {}
    for t in tests:
        path, _, name = t.partition("::")
        wanted.setdefault(path, set()).add(name.split("[")[0])
    lines: dict[str, set[str]] = {}
    for path, names in wanted.items():
        text = hidden_files.get(path, "")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        chosen = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in names]
        # the module's helpers a chosen test calls make requests on its behalf
        called = {
            c.func.id
            for n in chosen
            for c in ast.walk(n)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in helpers
        }
        for node in [*chosen, *(helpers[h] for h in sorted(called))]:
            src = ast.get_source_segment(text, node) or ""
            for m in _ROUTE_CALL.finditer(src):
                lines.setdefault(f"{m.group(1).upper()} {_url(m.group(2))}", set())
            for m in _FORM_KEYS.finditer(src):
                keys = set(_KEY.findall(m.group(1)))
                for call in _ROUTE_CALL.finditer(src[: m.start()][-200:]):
                    req = f"{call.group(1).upper()} {_url(call.group(2))}"
                    lines.setdefault(req, set()).update(keys)
    out = []
    for req in sorted(lines):
        fields = sorted(lines[req])
        out.append(f"- {req}" + (f" (form fields: {', '.join(fields)})" if fields else ""))
    return out


def full_ticket(
    story: str, hidden_files: dict[str, str], tests: Iterable[str], names: Iterable[str] = ()
) -> str:
    """The story written for the commit, then the requests the checks will make."""
    notes = interface(hidden_files, tests)
    text = story.strip() + "\n"
    if notes:
        text += "\nThe acceptance checks will exercise the app through these requests:\n"
        text += "\n".join(notes) + "\n"
    names = list(names)
    if names:
        text += "\nThe checks import these names from the app, which do not exist yet:\n"
        text += "\n".join(f"- {n}" for n in names) + "\n"
    text += (
        "\nWork in the repository in your current directory. Existing behaviour must keep "
        "working; your change will be checked against tests you cannot see.\n"
    )
    return text


@dataclass
class Built:
    task: FeatureTask | None
    reason: str  # "" when kept
    detail: dict


def build_one(
    repo: Path, cand: Candidate, ticket: str, *, backend: str = "bwrap", work: Path
) -> Built:
    """Validate one candidate; a task when it holds, else the reason it was rejected."""
    hidden_files = {
        f: _git(repo, "show", f"{cand.sha}:{f}") for f in cand.test_files if f.endswith(".py")
    }
    check = browser_check_for(cand.sha)
    if check:
        hidden_files[check[0]] = check[1]
    base = export(repo, cand.parent, work / "base")
    draft = FeatureTask(
        task_id=f"flask-todolist-{cand.sha[:8]}",
        project="flask-todolist",
        base=cand.parent,
        reference=cand.sha,
        subject=cand.subject,
        ticket=ticket,
        layers=layers_of(repo, cand.sha, cand.changed_files),
        changed_files=cand.changed_files,
        hidden_files=hidden_files,
        browser_check=check[0] if check else None,
        fail_to_pass=["<pending>"],
        pass_to_pass=[],
        visible_tests=[],
    )
    at_base = hidden_outcomes(repo, draft, base, backend=backend)
    ref = export(repo, cand.parent, work / "ref")
    apply_reference(repo, draft, ref)
    at_ref = hidden_outcomes(repo, draft, ref, backend=backend)
    ok_ref = {t for t, o in at_ref.items() if o == "PASSED"}
    f2p = sorted(t for t in ok_ref if at_base.get(t) != "PASSED")
    p2p = sorted(t for t in ok_ref if at_base.get(t) == "PASSED")
    detail: dict = {
        "reference_failed": sorted(t for t, o in at_ref.items() if o != "PASSED"),
        "hidden_tests_at_reference": len(at_ref),
    }
    if not f2p:
        return Built(None, "no hidden test fails at the base and passes at the reference", detail)
    if check and not any(t.startswith(check[0]) for t in f2p):
        return Built(None, "the browser check does not fail at the base", detail)
    existing = [f for f in cand.test_files if (base / f).is_file()]
    visible = run_tests(base, existing, backend=backend) if existing else {}
    task = draft.model_copy(
        update={
            "ticket": full_ticket(ticket, hidden_files, f2p, new_names(hidden_files, base)),
            "fail_to_pass": f2p,
            "pass_to_pass": p2p,
            "visible_tests": sorted(t for t, o in visible.items() if o == "PASSED"),
        }
    )
    task = FeatureTask.model_validate(task.model_dump())
    # the graders' own verdict code on the two runs above: the real change, and no change
    paid = verdict_from(task, at_ref)
    unpaid = verdict_from(task, at_base, visible)
    detail.update(reference=paid.to_dict(), empty=unpaid.to_dict())
    if not paid.correct:
        return Built(None, "the real change is not paid by the grader", detail)
    if unpaid.correct:
        return Built(None, "the unchanged base is paid by the grader", detail)
    return Built(task, "", detail)
