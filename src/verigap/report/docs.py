"""Numbers in Markdown that come from ``results/``: markers that `verigap docs` fills in.

A block marker holds a table drawn by a view (:mod:`verigap.report.views`)::

    <!-- results results/patchworld/pilot.json view:pilot -->
    (generated; do not edit)
    <!-- /results -->

An inline marker holds one value, with an optional Python format spec::

    <!-- results results/patchworld/careless.json value:true_success fmt:.1% -->30.8%<!-- /results -->

Paths are relative to the repository root. Markers inside fenced code blocks are left alone, so
a document can show the syntax. ``verigap docs`` rewrites what sits between the markers;
``verigap docs --check`` only reports files whose numbers disagree with ``results/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from verigap.errors import ConfigError
from verigap.report.views import fmt, get_view, lookup
from verigap.results import read_result

MARKER = re.compile(r"<!-- results (?P<args>[^>]*?) -->(?P<body>.*?)<!-- /results -->", re.S)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)


def doc_files(root: Path) -> list[Path]:
    """The documents whose numbers must match ``results/``: README.md and docs/*.md."""
    root = Path(root)
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    return files + sorted((root / "docs").glob("*.md"))


@dataclass(frozen=True)
class Marker:
    path: str
    view: str | None = None
    value: str | None = None
    fmt: str = ""

    @classmethod
    def parse(cls, args: str, where: str) -> Marker:
        tokens = args.split()
        if not tokens:
            raise ConfigError(
                f"{where}: a results marker needs a file: <!-- results results/x.json view:NAME -->"
            )
        opts = {}
        for tok in tokens[1:]:
            key, sep, val = tok.partition(":")
            if not sep or key not in ("view", "value", "fmt"):
                raise ConfigError(
                    f"{where}: marker option {tok!r} is not view:NAME, value:PATH or fmt:SPEC"
                )
            opts[key] = val
        m = cls(tokens[0], **opts)
        if (m.view is None) == (m.value is None):
            raise ConfigError(
                f"{where}: a results marker takes exactly one of view:NAME or value:PATH"
            )
        return m

    def render(self, root: Path, where: str, *, inline: bool = False) -> str:
        """The marker's content; an ``inline`` view (a marker written on one line, for a count
        or a list inside a sentence or a table cell) must draw a single line."""
        try:
            data = read_result(root / self.path)
            if self.view is not None:
                drawn = get_view(self.view)(data).strip()
                if not inline:
                    return "\n" + drawn + "\n"
                if "\n" in drawn:
                    raise ConfigError(
                        f"view {self.view!r} draws several lines: put its marker "
                        "on lines of its own"
                    )
                return drawn
            return fmt(lookup(data, self.value or ""), self.fmt)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def regenerate(text: str, root: Path, name: str = "<doc>") -> str:
    """``text`` with every marker's content drawn again from the results files."""
    fences = [(m.start(), m.end()) for m in FENCE.finditer(text)]

    def fill(m: re.Match[str]) -> str:
        if any(a <= m.start() < b for a, b in fences):
            return m.group(0)
        where = f"{name}:{_line(text, m.start())}"
        body = Marker.parse(m.group("args"), where).render(
            Path(root), where, inline="\n" not in m.group("body")
        )
        return f"<!-- results {m.group('args')} -->{body}<!-- /results -->"

    return MARKER.sub(fill, text)


def sync(files: list[Path], root: Path, *, write: bool) -> list[Path]:
    """The files whose markers disagree with ``results/`` (rewritten when ``write``)."""
    stale = []
    for f in files:
        text = f.read_text()
        new = regenerate(text, root, str(f))
        if new != text:
            stale.append(f)
            if write:
                f.write_text(new)
    return stale


#: Documents in which no figure may be typed by hand: every number comes through a marker.
NO_HAND_NUMBERS = (
    "README.md",
    "docs/README.md",
    "docs/architecture.md",
    "docs/detection.md",
    "docs/experiments.md",
    "docs/exploits.md",
    "docs/independent_heldout.md",
    "docs/language_model.md",
    "docs/mining.md",
    "docs/multiagent.md",
    "docs/repos.md",
    "docs/results.md",
    "docs/sandbox_and_agents.md",
    "docs/sandbox_speed.md",
    "docs/serving.md",
    "docs/silentbug.md",
    "docs/speed.md",
    "docs/trajectories.md",
    "docs/transformer.md",
    "docs/web_features.md",
    "docs/workplace.md",
)

# What is not prose: code, comments (and so every marker, with what it draws), link targets.
_NOT_PROSE = (
    FENCE,
    re.compile(r"<!-- experiments:verdicts:begin.*?<!-- experiments:verdicts:end -->", re.S),
    MARKER,
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"`[^`\n]*`"),
    re.compile(r"\]\([^)\s]*\)"),
)
# Numbers that are names, not figures: the brief's seed documents ("Seed 002"), section and
# list numbers, dates, a citation's year, and text quoted in double quotes (the write-ups'
# own figures, quoted as theirs).
_ALLOWED = (
    re.compile(r"\bseed \d{3}\b", re.I),
    re.compile(r"^\s*(#+ .*|\d+\. )"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),
    re.compile(r", (19|20)\d\d\)"),
    re.compile(r'"[^"\n]*"'),
)
# A digit run hyphened onto a name that starts with a letter (AVX-512, x86-64) or after a ``#``
# (a pull request's number) is part of a name.
_NUMBER = re.compile(
    r"(?<![\w.])(?<![A-Za-z]-)(?<![A-Za-z]\d-)(?<![A-Za-z]\d\d-)(?<!#)"
    r"[-−+]?\d+(?:[.,]\d+)*(?:e-?\d+)?"
)


def bare_numbers(text: str) -> list[tuple[int, str]]:
    """(line, number) for every figure typed into ``text``'s prose instead of drawn by a
    results marker; names that hold digits (E06, v2, p50, AVX-512, #465) are not figures."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    for rx in _NOT_PROSE:
        text = rx.sub(blank, text)
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for rx in _ALLOWED:
            line = rx.sub(blank, line)
        out += [(i, m.group(0)) for m in _NUMBER.finditer(line)]
    return out
