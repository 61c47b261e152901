"""Ticket-style prompts: what a user would report, not where the bug is.

A ticket says what is wrong (the commit message's intent, for a bug mined from history) and how
it shows (observed versus expected, read from the failing tests' assertion output), and never
names the file, the function or the test: every such name is redacted, so the agent has to
explore the code to find the cause, the way an engineer works a real ticket.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from verigap.repos.schema import RepoTask

REDACTED = "the code"
GENERIC = {"tests", "test", "src", "lib", "testing", "__init__"}  # say nothing about where

TICKET = """\
Ticket for the Python project `{name}` (the repository in your current directory).

{title}
{body}
What users see:
{symptoms}

Nobody has located the cause yet. Find it and fix the project's code (not its tests) so that it
behaves as expected, then submit. Your change will be checked against tests you cannot see, so
fix the underlying problem rather than only the examples above.
"""

_ASSERT_EQ = re.compile(r"^(?:AssertionError: )?assert (.+?) == (.+)$")
_WHERE = re.compile(r"^\+\s+where (.+?) = ([\w.]+)\((.*)\)$")
_TRAILER = re.compile(r"^(Signed-off-by|Co-authored-by|Reviewed-by|Fixes|Closes|See):", re.I)


def names_of(task: RepoTask) -> set[str]:
    """Every name that would say where to look: files and modules, functions and classes of
    the broken sites, test files, test classes and test functions."""
    out: set[str] = set()
    for s in task.sites:
        out |= set(s.qualname.split("."))
        out |= _path_names(s.file)
    for t in [*task.visible_tests, *task.hidden_tests]:
        file, _, rest = t.partition("::")
        out |= _path_names(file)
        out |= {p for p in re.split(r"::|\[", rest) if p and not p.endswith("]")}
    for sp in task.source_paths:
        out |= _path_names(sp)
    return {n for n in out if len(n) >= 3 and n not in GENERIC}


def _path_names(path: str) -> set[str]:
    parts = [p for p in path.split("/") if p]
    return {path, path.removesuffix(".py")} | {p.removesuffix(".py") for p in parts} | set(parts)


_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")


def redact(text: str, names: Iterable[str], *, keep: Iterable[str] = ()) -> str:
    """``text`` with each name (longest first, whole words) replaced; a dotted name
    (``pkg.mod.func``) that holds one is replaced whole, so no "the code.the code" is left."""
    keep = set(keep)
    hidden = set(names) - keep
    text = _DOTTED.sub(
        lambda m: (
            REDACTED if set(m.group(0).removesuffix("()").split(".")) & hidden else m.group(0)
        ),
        text,
    )
    for n in sorted(hidden, key=len, reverse=True):
        text = re.sub(rf"(?<!\w){re.escape(n)}(?![\w])(\(\))?", REDACTED, text)
    text = re.sub(r"\btest_\w+", "a check", text)
    text = re.sub(r"\S+\.py\b", "a file", text)
    return text


def symptoms(output: str, *, limit: int = 3) -> list[str]:
    """Observed-versus-expected lines from pytest's short tracebacks (``E`` lines)."""
    found: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block and len(found) < limit:
            line = _symptom(block)
            if line and line not in found:
                found.append(line)
        block.clear()

    for raw in output.splitlines():
        if raw.startswith("E "):
            block.append(raw[1:].strip())
        else:
            flush()
    flush()
    return found


def _symptom(lines: list[str]) -> str | None:
    call = None
    for ln in lines[1:]:
        m = _WHERE.match(ln)
        if m and call is None:
            call = m.group(3)
    m = _ASSERT_EQ.match(lines[0])
    if m:
        got, want = m.group(1), m.group(2)
        if call is not None and call.strip():
            return f"for the input ({call}) the result is {got}, but {want} is expected"
        return f"the result is {got}, but {want} is expected"
    first = lines[0]
    if re.match(r"^\w+(Error|Exception|Warning)\b", first):
        return f"it fails with {first[:300]} where a correct result is expected"
    if first.startswith("assert "):
        return f"a check that should hold does not: {first[:300]}"
    return None


#: First words of a commit subject that say what was changed, not what went wrong: such a
#: subject tells the fix (or is no bug at all), so a ticket does not quote it.
_CHANGE_VERBS = {
    "fix": "fix",
    "fixed": "fix",
    "fixes": "fix",
    "correct": "fix",
    "corrected": "fix",
    "handle": "fix",
    "handled": "fix",
    "raise": "fix",
    "return": "fix",
    "use": "fix",
    "make": "fix",
    "change": "fix",
    "changed": "fix",
    "prevent": "fix",
    "avoid": "fix",
    "ensure": "fix",
    "remove": "fix",
    "update": "fix",
    "don't": "fix",
    "do": "fix",
    "add": "feature",
    "added": "feature",
    "adds": "feature",
    "support": "feature",
    "implement": "feature",
    "implemented": "feature",
    "introduce": "feature",
    "allow": "feature",
    "new": "feature",
    "enable": "feature",
    "refactor": "refactor",
    "refactored": "refactor",
    "simplify": "refactor",
    "cleanup": "refactor",
    "clean": "refactor",
    "rename": "refactor",
    "tidy": "refactor",
    "move": "refactor",
    "improve": "refactor",
    "optimize": "refactor",
    "speed": "refactor",
}
_BUG_WORDS = re.compile(
    r"\b(bug|fix|fixe[sd]|broken|crash\w*|wrong|incorrect\w*|error|"
    r"regression|fail\w*|invalid|issue)\b",
    re.I,
)


def commit_kind(message: str) -> str:
    """``fix``, ``feature`` or ``refactor``: what a commit says it does (its subject's first
    word, else whether it speaks of a bug). Features and refactors are not reported as bugs."""
    title = intent(message)[0]
    first = title.split()[0].lower().rstrip(":,") if title.split() else ""
    kind = _CHANGE_VERBS.get(first)
    if kind == "feature" and _BUG_WORDS.search(title):
        return "fix"  # "Add a check for negative n": a fix worded as an addition
    return kind or "fix"


def describes_change(message: str) -> bool:
    """Whether the subject says what was changed ("Fix x()", "Add y") rather than what was
    wrong: then it gives the fix away and is not quoted."""
    title = intent(message)[0]
    first = title.split()[0].lower().rstrip(":,") if title.split() else ""
    return first in _CHANGE_VERBS


def intent(message: str) -> tuple[str, str]:
    """(title, body) of a commit message, trailers and issue links dropped."""
    lines = [ln for ln in message.strip().splitlines() if not _TRAILER.match(ln.strip())]
    title = lines[0].strip() if lines else ""
    body = "\n".join(lines[1:]).strip()
    body = re.sub(r"https?://\S+", "", body)
    return title, body[:800]


def ticket_prompt(
    task: RepoTask, output: str, *, message: str | None = None, name: str | None = None
) -> str:
    """The ticket for ``task``: ``message`` is the fix commit's message (mined tasks), ``output``
    the visible test run's output (its assertion lines give the symptoms)."""
    names = names_of(task)
    project = name or _project(task)
    found = [redact(s, names, keep={project}) for s in symptoms(output)]
    kind = commit_kind(message) if message else "fix"
    if message and not describes_change(message):  # a symptom, in the reporter's words
        title, body = intent(message)
        title = "Reported: " + redact(title, names, keep={project})
        body = redact(body, names, keep={project})
    elif kind == "feature":  # asked for, not broken: say so, and not how it was built
        title, body = (
            f"Requested: `{project}` should behave as described below; today it does not.",
            "",
        )
    elif kind == "refactor":
        title, body = (
            f"Reported: after recent work on `{project}`, some results differ from "
            "what is expected.",
            "",
        )
    else:
        title, body = f"Reported: some results of `{project}` are wrong.", ""
    if not found:
        found = ["the behaviour described above; the tests of the project do not all pass"]
    return TICKET.format(
        name=project,
        title=title,
        body=f"\n{body}\n" if body else "",
        symptoms="\n".join(f"- {s}" for s in found),
    )


def _project(task: RepoTask) -> str:
    spec = task.origin.get("project") or task.source.spec
    return re.split(r"==|/", spec.rstrip("/"))[-1].removesuffix(".git")


# --------------------------------------------------------------------------- feature requests

FEATURE_TICKET = """\
Feature request for the Python project `{name}` (the repository in your current directory).

{title}

What is wanted:
{items}
{context}
Everything the project already does must keep working as it does. Build the behaviour described
above in the project's code (not in its tests), then submit. It will be checked against tests
you cannot see, so implement what is described rather than only the examples.
"""

_PR_REF = re.compile(r"\s*\(?#\d+\)?|\bpull request\b", re.I)


def feature_ticket(
    after: dict[str, str],
    wanted: dict[str, list[str]],
    *,
    message: str,
    project: str,
    source_paths: Iterable[str] = (),
) -> str:
    """A feature request, as a product owner would write it, for a commit that adds behaviour:
    each new public function, class or method, or new parameter (``wanted``: file -> entries
    as ``mine.new_behaviour`` lists them), with its signature, where it lives and its
    documentation (which usually shows an example), read from the code after the change
    (``after``: file -> text). Never a line of an implementation's body: signatures and
    docstrings only."""
    items: list[str] = []
    for f in sorted(wanted):
        tree = ast.parse(after[f])
        module = _module_name(f, source_paths)
        found = wanted[f]
        new_classes = {q for q in found if "(" not in q and "." not in q}
        for entry in found:
            q, _, gained = entry.partition("(")
            if "." in q and q.split(".")[0] in new_classes:
                continue  # described with its class
            node = _find(tree, q)
            if node is None:
                continue
            items.append(_describe(q, node, module, gained.rstrip(")")))
    title, body = intent(message)
    if title.lower().startswith("merge") and body:  # a merged pull request: its own title
        title, _, rest = body.partition("\n")
        body = rest.strip()
    title = _PR_REF.sub("", title).strip().rstrip(".") or f"new behaviour in `{project}`"
    has_docs = any("\n    " in i for i in items)
    return FEATURE_TICKET.format(
        name=project,
        title=f"Requested: {title}",
        items="\n".join(items) or f"- the behaviour named in the title, in `{project}`",
        context=f"\nMore context from the requester:\n{body}\n" if body and not has_docs else "",
    )


def _module_name(path: str, source_paths: Iterable[str]) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    for root in ("src", "lib"):
        if len(parts) > 1 and parts[0] == root and root not in set(source_paths):
            parts = parts[1:]
    return ".".join(parts)


def _find(tree: ast.Module, qualname: str) -> ast.AST | None:
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
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
        body = node.body if isinstance(node, ast.ClassDef) else []
    return node


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"({ast.unparse(node.args)}){ret}"


def _describe(qualname: str, node: ast.AST, module: str, gained: str) -> str:
    """One item of the request: what to add (or which parameters), its signature and its
    documentation, indented under it."""
    if isinstance(node, ast.ClassDef):
        init = _find(ast.Module(body=node.body, type_ignores=[]), "__init__")
        sig = _signature(init) if isinstance(init, ast.FunctionDef) else "()"
        sig = sig.replace("(self, ", "(", 1).replace("(self)", "()", 1)
        head = f"- a new class `{qualname}{sig}` in `{module}`"
    elif gained:
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        head = (
            f"- `{qualname}` in `{module}` should accept the new parameter(s) {gained}; "
            f"its signature becomes `{qualname}{_signature(node)}`"
        )
    else:
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        what = "method" if "." in qualname else "function"
        head = f"- a new {what} `{qualname}{_signature(node)}` in `{module}`"
    doc = ast.get_docstring(node, clean=True)  # type: ignore[arg-type]
    if not doc:
        return head
    lines = doc.splitlines()[:60]
    return head + ", documented as:\n\n" + "\n".join(f"      {ln}".rstrip() for ln in lines) + "\n"


def implementation_lines(text: str, qualname: str) -> list[str]:
    """The stripped code lines of the body of ``qualname`` in ``text`` (docstrings left
    out): what a feature request must never quote."""
    node = _find(ast.parse(text), qualname)
    if node is None:
        return []
    out: list[str] = []
    body = list(getattr(node, "body", []))
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    src = text.splitlines()
    for stmt in body:
        for ln in src[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)]:
            if ln.strip():
                out.append(ln.strip())
    return out
