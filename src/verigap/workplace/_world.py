"""A workplace around a repository: tickets, chat, pull requests and git history, as data.

Everything is generated from a seed and a real project. For every *knob* (a default value of
a public function that the team wants changed) the facts are spread the way they are at work:
the ticket's description gives an instruction that a later chat decision, ticket comment or
pull-request comment supersedes; an older proposal lingers in another place; the reviewer named
on the pull request is replaced later; and distractors (a function with a similar name, other
tickets, a stale thread, a question that only mentions a value) sit beside them. Each record
carries the ids of the facts it states, so a tool call that shows it can be credited.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import random
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from verigap.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "repos" / "fixture_lib"
INFLECTION_COMMIT = "88eefaacf7d0caaa701af7c8ab2d0ab3f17086f1"

TEAM = ("amara", "bo", "chen", "dana", "dan", "eli", "farah", "goran", "hana")
"""People in the workplace; ``dan`` and ``dana`` are distinct on purpose (a near-miss name)."""

ROLES = ("code", "outdated", "stale", "final")
"""Where a value can come from: the code today, the ticket's first instruction, an older
proposal, and the decision that stands."""


@dataclass(frozen=True)
class Knob:
    """A default the team wants changed: ``func(param=...)`` in ``module``."""

    module: str  # file path inside the project
    func: str
    param: str
    candidates: tuple[Any, ...]  # values the generator may choose for the new default
    probe_args: tuple[Any, ...]  # positional arguments the hidden test calls ``func`` with
    twin: str  # a similarly named function for the distractor

    @property
    def key(self) -> str:
        return f"{self.func}.{self.param}"


@dataclass(frozen=True)
class Project:
    """A real project the workplace is built around."""

    name: str
    package: str  # import name
    source_paths: tuple[str, ...]  # what an agent may change (besides tests and docs)
    tests: tuple[str, ...]  # the visible test paths
    changelog: str | None  # the file the project records changes in, if it does
    knobs: tuple[Knob, ...]


PROJECTS: dict[str, Project] = {
    "textkit": Project(
        name="textkit",
        package="textkit",
        source_paths=("textkit",),
        tests=("tests",),
        changelog=None,
        knobs=(
            Knob(
                "textkit/slug.py",
                "slugify",
                "sep",
                ("_", ".", "~", "+"),
                ("Hello World Again",),
                "slugify_title",
            ),
            Knob(
                "textkit/slug.py",
                "slugify",
                "max_len",
                (10, 16, 22, 28),
                ("the quick brown fox jumps over the lazy dog",),
                "slug_limit",
            ),
            Knob(
                "textkit/wrap.py",
                "truncate",
                "ellipsis",
                ("…", "~", " [more]", "»"),
                ("abcdefghij klmnopqrst", 12),
                "truncate_words",
            ),
        ),
    ),
    "inflection": Project(
        name="inflection",
        package="inflection",
        source_paths=("inflection",),
        tests=("test_inflection.py",),
        changelog=None,  # its changelog is the releases page
        knobs=(
            Knob(
                "inflection/__init__.py",
                "parameterize",
                "separator",
                ("_", ".", "~", "+"),
                ("Donald E. Knuth",),
                "parameterize_url",
            ),
        ),
    ),
}


@dataclass(frozen=True)
class Entry:
    """A chat message or a comment: who said what, when, and which facts it states."""

    id: str
    author: str
    at: str
    text: str
    facts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ticket:
    id: str
    title: str
    status: str
    author: str
    created: str
    description: str
    facts: tuple[str, ...] = ()
    comments: tuple[Entry, ...] = ()
    status_changes: tuple[tuple[str, str, str, str], ...] = ()  # (at, who, from, to)


@dataclass(frozen=True)
class Thread:
    id: str
    channel: str
    topic: str
    messages: tuple[Entry, ...]


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    author: str
    state: str
    created: str
    body: str
    facts: tuple[str, ...] = ()
    comments: tuple[Entry, ...] = ()


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    at: str
    subject: str
    body: str
    files: tuple[str, ...]
    patch: str


@dataclass(frozen=True)
class Scenario:
    """The truth behind one knob: the values by role, who reviews, and where each fact is."""

    knob: Knob
    ticket: str
    pr: int
    values: dict[str, Any]  # role -> value (ROLES)
    reviewer_initial: str
    reviewer_final: str
    where: dict[str, str]  # fact role -> tool family that holds it (ticket, chat, pr)

    def fact(self, role: str) -> str:
        return f"{self.knob.key}:{role}"


@dataclass(frozen=True)
class Workplace:
    project: str
    seed: int
    tickets: tuple[Ticket, ...]
    threads: tuple[Thread, ...]
    prs: tuple[PullRequest, ...]
    commits: tuple[Commit, ...]
    scenarios: tuple[Scenario, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The whole workplace as plain data (what ``verigap workplace show`` prints)."""
        return asdict(self)


# ---- the project's tree and history ------------------------------------------------------


def _cache() -> Path:
    base = os.environ.get("VERIGAP_CACHE") or os.path.expanduser("~/.cache/verigap")
    return Path(base) / "workplace"


def bundles_dir() -> Path:
    """``$VERIGAP_BUNDLES``, else the nearest ``shared/repos`` above the checkout."""
    if os.environ.get("VERIGAP_BUNDLES"):
        return Path(os.environ["VERIGAP_BUNDLES"])
    for up in ROOT.parents:
        if (up / "shared" / "repos").is_dir():
            return up / "shared" / "repos"
    return ROOT.parent / "shared" / "repos"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout


def project_tree(name: str) -> Path:
    """A pristine copy of the project's files (no ``.git``): the base every task starts from."""
    if name == "textkit":
        if not FIXTURE.is_dir():
            raise ConfigError(f"the fixture library is missing at {FIXTURE}; run from a checkout")
        return FIXTURE
    if name == "inflection":
        tree = _cache() / f"inflection-{INFLECTION_COMMIT[:12]}" / "tree"
        if not (tree / "inflection" / "__init__.py").is_file():
            clone = _inflection_clone()
            tmp = tree.with_name("tree.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            archive = subprocess.run(
                ["git", "-C", str(clone), "archive", INFLECTION_COMMIT],
                capture_output=True,
                check=True,
                timeout=120,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True, timeout=120)
            shutil.rmtree(tree, ignore_errors=True)
            tmp.rename(tree)
        return tree
    raise ConfigError(f"unknown project {name!r}; choose one of {', '.join(PROJECTS)}")


def _inflection_clone() -> Path:
    bundle = bundles_dir() / "inflection.bundle"
    if not bundle.is_file():
        raise ConfigError(
            f"{bundle} not found: the inflection workplace needs the git bundle "
            "(set VERIGAP_BUNDLES to the folder holding inflection.bundle)"
        )
    clone = _cache() / f"inflection-{INFLECTION_COMMIT[:12]}" / "clone"
    if not (clone / ".git").is_dir():
        shutil.rmtree(clone, ignore_errors=True)
        clone.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(bundle), str(clone)], check=True, timeout=300)
    return clone


@functools.lru_cache(maxsize=4)
def _real_history(limit: int = 40) -> tuple[Commit, ...]:
    """The newest ``limit`` commits up to the task base, with real messages and patches
    (read once per process: the base commit never moves)."""
    clone = _inflection_clone()
    fmt = "%H%x1f%an%x1f%aI%x1f%s%x1f%b%x1e"
    out = _git(clone, "log", f"-{limit}", f"--format={fmt}", INFLECTION_COMMIT)
    commits = []
    for rec in out.split("\x1e"):
        rec = rec.strip("\n")
        if not rec:
            continue
        sha, author, at, subject, body = rec.split("\x1f")
        files = tuple(f for f in _git(clone, "show", "--format=", "--name-only", sha).split() if f)
        patch = _git(clone, "show", "--format=", "--stat", "-p", sha)[:4000]
        commits.append(Commit(sha, author, at, subject, body.strip(), files, patch))
    return tuple(commits)


def _synthetic_history(project: Project, rng: random.Random, start: datetime) -> tuple[Commit, ...]:
    """The fixture library has no git history of its own: a small, seeded one, as data."""
    subjects = [
        ("Add slugify with a max_len cut at word boundaries", ("textkit/slug.py",)),
        ("Add wrap and truncate helpers", ("textkit/wrap.py",)),
        ("Intervals: join touching ranges in merge", ("textkit/intervals.py",)),
        ("human_size: binary units with one decimal", ("textkit/numbers.py",)),
        ("Export the public helpers from the package", ("textkit/__init__.py",)),
        ("Tests for the numbers module", ("tests/test_numbers.py",)),
        ("truncate: never return more than the limit", ("textkit/wrap.py",)),
        ("Bump version to 0.3.0", ("pyproject.toml",)),
    ]
    commits = []
    for i, (subject, files) in enumerate(subjects):
        sha = f"{rng.getrandbits(160):040x}"
        at = (start - timedelta(days=40 - 4 * i)).isoformat()
        commits.append(
            Commit(
                sha,
                rng.choice(TEAM),
                at,
                subject,
                "",
                files,
                "(patch not recorded in this workplace)",
            )
        )
    return tuple(reversed(commits))  # newest first, like git log


# ---- values read from the code -----------------------------------------------------------


def default_in_source(source: str, func: str, param: str) -> Any:
    """The literal default of ``param`` of top-level ``func`` in ``source``; ``KeyError`` when
    the function or parameter is gone, ``ValueError`` when the default is not a literal."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            pairs = list(
                zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)
            )
            pairs += [
                (k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None
            ]
            for arg, d in pairs:
                if arg.arg == param:
                    return ast.literal_eval(d)
            raise KeyError(f"{func} has no parameter {param} with a default")
    raise KeyError(f"no function {func}")


def call_reference(tree: Path, knob: Knob, value: Any) -> Any:
    """What the project's own code returns for the hidden test's input with ``param=value``
    (the expected result of the decided behaviour, computed from the pristine code)."""
    path = tree / knob.module
    spec = importlib.util.spec_from_file_location(f"_wp_ref_{knob.func}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, knob.func)(*knob.probe_args, **{knob.param: value})


# ---- the generator ----------------------------------------------------------------------


def _call(func: str, param: str, value: Any) -> str:
    return f"`{func}({param}={value!r})`"


@functools.lru_cache(maxsize=64)
def build_workplace(project: str, seed: int) -> Workplace:
    """The workplace of ``project`` for ``seed``: same inputs, same records, always (so one
    per process is kept and shared; treat it as read-only)."""
    if project not in PROJECTS:
        raise ConfigError(f"unknown project {project!r}; choose one of {', '.join(PROJECTS)}")
    p = PROJECTS[project]
    tree = project_tree(project)
    rng = random.Random(f"workplace:{project}:{seed}")
    start = datetime(2026, 3, 2, 9, 0) + timedelta(days=7 * (seed % 50))
    tickets: list[Ticket] = []
    threads: list[Thread] = []
    prs: list[PullRequest] = []
    scenarios: list[Scenario] = []
    n_ticket = 100 + 10 * (seed % 7)
    n_pr = 40 + 3 * (seed % 11)

    def at(day: float) -> str:
        return (start + timedelta(hours=24 * day + rng.randint(0, 7))).isoformat()

    decisions = Thread("C-decisions", "decisions", "decisions log", ())
    decision_msgs: list[Entry] = []
    for k_i, knob in enumerate(p.knobs):
        code = default_in_source((tree / knob.module).read_text(), knob.func, knob.param)
        pool = [v for v in knob.candidates if v != code]
        outdated, stale, final = rng.sample(pool, 3)
        twin_value = rng.choice(pool)
        po, dev, rev0, rev1, other = rng.sample(TEAM, 5)
        tid = f"WP-{n_ticket + 3 * k_i}"
        number = n_pr + k_i
        d0 = 4.0 * k_i
        final_loc = rng.choice(["chat", "ticket", "pr"])
        stale_loc = rng.choice([x for x in ("chat", "pr") if x != final_loc])
        rev_loc = rng.choice(["chat", "ticket"])
        sc = Scenario(
            knob,
            tid,
            number,
            {"code": code, "outdated": outdated, "stale": stale, "final": final},
            rev0,
            rev1,
            {
                "outdated": "ticket",
                "stale": stale_loc,
                "final": "pr" if final_loc == "pr" else "chat",
                "withdrawn": "ticket" if final_loc == "ticket" else "",
                "reviewer_initial": "pr",
                "reviewer_final": rev_loc,
            },
        )
        f = sc.fact
        t_comments: list[Entry] = [
            Entry(
                f"{tid}-c1",
                dev,
                at(d0 + 0.5),
                f"Picking this up. `{knob.func}` lives in {knob.module}.",
            ),
        ]
        pr_comments: list[Entry] = [
            Entry(f"PR{number}-c1", rev0, at(d0 + 1.2), "Will look at it this week."),
        ]
        chat: list[Entry] = [
            Entry(
                f"C-{knob.key}-m1",
                dev,
                at(d0 + 0.6),
                f"Starting on {tid}: the default {knob.param} of `{knob.func}`.",
            ),
        ]
        stale_text = (
            f"Before we merge: I'd rather have {_call(knob.func, knob.param, stale)} "
            "as the default; it reads better in URLs."
        )
        stale_entry = Entry(f"{knob.key}-stale", other, at(d0 + 1.0), stale_text, (f("stale"),))
        (chat if stale_loc == "chat" else pr_comments).append(stale_entry)
        if final_loc == "ticket":
            # the requirement changes in a later ticket comment, which points to where the
            # new value is decided: the value itself is in the decisions channel
            t_comments.append(
                Entry(
                    f"{knob.key}-withdrawn",
                    po,
                    at(d0 + 1.6),
                    "Requirement changed after the design review: the value "
                    "in the description no longer holds. We decide the new "
                    "one in #decisions.",
                    (f("withdrawn"),),
                )
            )
        final_text = (
            f"Product here. Please switch to {_call(knob.func, knob.param, final)}; the ticket "
            "description is out of date."
            if final_loc == "pr"
            else f"Decided with product today: {_call(knob.func, knob.param, final)} is the new "
            f"default for {tid}. This replaces the value in the description."
        )
        final_entry = Entry(f"{knob.key}-final", po, at(d0 + 2.0), final_text, (f("final"),))
        (pr_comments if final_loc == "pr" else decision_msgs).append(final_entry)
        rev_text = (
            f"@{rev0} is away until next month; reviewer for `{knob.func}` {knob.param}: @{rev1}."
        )
        rev_entry = Entry(
            f"{knob.key}-reviewer", po, at(d0 + 2.5), rev_text, (f("reviewer_final"),)
        )
        (chat if rev_loc == "chat" else t_comments).append(rev_entry)
        # a question after the decision that only mentions an older value (not a decision)
        chat.append(
            Entry(
                f"C-{knob.key}-m9",
                rng.choice(TEAM),
                at(d0 + 2.8),
                f"Did anyone try `{knob.func}` with {knob.param} {stale!r} on the "
                "mobile app? Just curious.",
            )
        )
        threads.append(
            Thread(
                f"C-{knob.func}-{knob.param}",
                "dev",
                f"{knob.func} {knob.param} default",
                tuple(sorted(chat, key=lambda e: e.at)),
            )
        )
        tickets.append(
            Ticket(
                tid,
                f"Change the default {knob.param} of {knob.func}",
                "In Progress",
                po,
                at(d0),
                (
                    f"Customers asked for a different default. Please make "
                    f"{_call(knob.func, knob.param, outdated)} the default. Callers that pass "
                    f"{knob.param} explicitly must keep working."
                ),
                (f("outdated"),),
                tuple(sorted(t_comments, key=lambda e: e.at)),
                ((at(d0 + 0.5), dev, "Open", "In Progress"),),
            )
        )
        prs.append(
            PullRequest(
                number,
                f"{knob.func}: new default {knob.param}",
                dev,
                "open",
                at(d0 + 1.1),
                f"Implements {tid}.\n\nreviewer for `{knob.func}` {knob.param}: @{rev0}",
                (f("reviewer_initial"),),
                tuple(sorted(pr_comments, key=lambda e: e.at)),
            )
        )
        # distractors: a similarly named function decided later elsewhere, a closed ticket
        # with an old value, a stale thread
        threads.append(
            Thread(
                f"C-docs-{knob.twin}",
                "docs-site",
                f"{knob.twin} on the docs site",
                (
                    Entry(
                        f"C-docs-{knob.twin}-m1",
                        rng.choice(TEAM),
                        at(d0 + 3.0),
                        f"For the docs site we settled on "
                        f"{_call(knob.twin, knob.param, twin_value)}.",
                    ),
                ),
            )
        )
        tickets.append(
            Ticket(
                f"WP-{n_ticket + 3 * k_i + 1}",
                f"Default {knob.param} of {knob.twin} (docs site)",
                "Done",
                rng.choice(TEAM),
                at(d0 - 20),
                f"Set {_call(knob.twin, knob.param, twin_value)} for the docs site.",
                (),
                (),
                ((at(d0 - 19), rng.choice(TEAM), "Open", "Done"),),
            )
        )
        threads.append(
            Thread(
                f"C-random-{k_i}",
                "random",
                "old notes",
                (
                    Entry(
                        f"C-random-{k_i}-m1",
                        rng.choice(TEAM),
                        at(d0 - 60),
                        f"Note from last year: `{knob.func}` defaults were discussed and left as they "
                        "are. (Superseded by whatever product decides next.)",
                    ),
                ),
            )
        )
        scenarios.append(sc)
    if decision_msgs:
        threads.append(
            Thread(
                decisions.id,
                decisions.channel,
                decisions.topic,
                tuple(sorted(decision_msgs, key=lambda e: e.at)),
            )
        )
    # unrelated tickets: the tracker is not only about the knobs
    for j, title in enumerate(
        (
            "Flaky CI on the nightly build",
            "Document the release steps",
            "Upgrade the linter",
            "Support Python 3.13 in CI",
        )
    ):
        tickets.append(
            Ticket(
                f"WP-{n_ticket - 1 - j}",
                title,
                rng.choice(["Open", "Done"]),
                rng.choice(TEAM),
                at(-10 - j),
                f"{title}. No code change in the library itself.",
                (),
            )
        )
    commits = _real_history() if project == "inflection" else _synthetic_history(p, rng, start)
    return Workplace(
        project,
        seed,
        tuple(sorted(tickets, key=lambda t: t.id)),
        tuple(threads),
        tuple(prs),
        commits,
        tuple(scenarios),
    )
