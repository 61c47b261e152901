"""The experiment log page: counts first, refutations first, each prediction read aloud.

Reads whatever fields the verdict files hold and degrades gracefully: a prediction marked as a
sanity check (``sanity_check: true``, or ``sanity``/``role``/``kind``/``marking``/``tags``
mentioning it) is counted apart from the findings; an amended prediction (earlier entries under
``superseded``, or an ``original``) is shown beside its original.
"""

from __future__ import annotations

import html
from typing import Any

from verigap.report import figures as F
from verigap.report.site import Figure, Headline, Page, SiteInputs
from verigap.results import read_meta, read_result

ORDER = ("refuted", "inconclusive", "supported")
#: The verdict files of the pre-registered prediction registries, by the policy they test.
LOGS = {
    "MLP policy": "experiments/verdicts.json",
    "transformer": "experiments/verdicts_transformer.json",
    "multi-agent": "experiments/verdicts_multiagent.json",
}
COMPARE_WORDS = {">": "above", ">=": "at least", "<": "below", "<=": "at most"}


def is_sanity(p: dict[str, Any]) -> bool:
    """Whether the registry marks this prediction as a sanity check rather than a finding."""
    if p.get("sanity_check") is True or p.get("sanity") is True:
        return True
    for key in ("role", "kind", "marking", "tags", "category"):
        v = p.get(key)
        vals = v if isinstance(v, list) else [v]
        if any(isinstance(x, str) and "sanity" in x.lower() for x in vals):
            return True
    return False


def original_of(p: dict[str, Any]) -> dict[str, Any] | None:
    """The first recorded version of an amended prediction, if any."""
    if isinstance(p.get("original"), dict):
        return p["original"]
    sup = p.get("superseded") or []
    return sup[0] if sup and isinstance(sup[0], dict) else None


def _num(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "—"


def reading(p: dict[str, Any]) -> str:
    """The verdict in plain words: what was predicted, what was measured, what that means."""
    c = p.get("criterion") or {}
    iv = p.get("interval") or [None, None]
    conf = c.get("confidence")
    measured = (
        f"Measured {html.escape(str(c.get('metric', 'the statistic')))} = "
        f"{_num(p.get('statistic'))}"
        + (
            f" ({int(round(100 * conf))}% interval {_num(iv[0])} to {_num(iv[1])}"
            f" over {p.get('n_seeds', '?')} seeds)"
            if conf
            else ""
        )
        + "."
    )
    want = COMPARE_WORDS.get(str(c.get("compare")), str(c.get("compare", "")))
    target = f"{want} {c['value']}" if "value" in c else html.escape(p.get("criterion_text", ""))
    verdict = p.get("verdict", "?")
    meaning = {
        "supported": f"The whole interval is {target}, as predicted.",
        "refuted": f"The prediction needed {target}; the data rule that out "
        f"({html.escape(p.get('reason', ''))}).",
        "inconclusive": f"The interval straddles the threshold ({target}); more seeds or a "
        "larger effect would be needed to decide.",
    }.get(verdict, html.escape(p.get("reason", "")))
    return f"{measured} {meaning}"


def _card(p: dict[str, Any], log: str) -> str:
    v = p.get("verdict", "?")
    orig = original_of(p)
    side = ""
    if orig:
        side = (
            f'<div class="original"><b>Original ({html.escape(str(orig.get("verdict")))})'
            f"</b><br><code>{html.escape(str(orig.get('criterion_text', '')))}</code><br>"
            f"{reading(orig)}</div>"
        )
    return (
        f'<div class="card {v.replace(" ", "-")}" id="{html.escape(p["id"])}">'
        f'<div class="current"><span class="badge {v}">{html.escape(v)}'
        f"{' · amended' if orig else ''}</span> <b>{html.escape(p['id'])}</b> "
        f'<span class="meta">({html.escape(log)})</span>'
        f'<p class="q">{html.escape(p.get("question", ""))}</p>'
        f"<p>Predicted: {html.escape(p.get('prediction', ''))}</p>"
        f"<p>{reading(p)}</p>"
        f'<p class="meta">criterion <code>{html.escape(p.get("criterion_text", ""))}'
        f"</code></p></div>{side}</div>"
    )


def log_page(inputs: SiteInputs, story: Any) -> None:
    """Add the experiment log page (and its headline) when verdict files exist."""
    logs = {name: rel for name, rel in LOGS.items() if (inputs.results_dir / rel).is_file()}
    if not logs:
        return
    preds: list[tuple[str, dict[str, Any]]] = []
    counts: dict[str, dict[str, int]] = {}
    for name, rel in logs.items():
        data = read_result(inputs.results_dir / rel)
        c = counts.setdefault(name, {})
        for p in data.get("predictions", {}).values():
            kind = "sanity check" if is_sanity(p) else p.get("verdict", "?")
            c[kind] = c.get(kind, 0) + 1
            preds.append((name, p))
    total = {k: sum(c.get(k, 0) for c in counts.values()) for k in (*ORDER, "sanity check")}
    n = sum(total.values())
    amended = sum(1 for _, p in preds if original_of(p))
    path = F.verdict_counts(counts, inputs.out / "figures" / "log_counts.png")
    fig = (
        Figure(
            "figures/log_counts.png",
            "Verdicts per registry of pre-registered predictions, "
            "each computed in code from its criterion.",
            "Stacked bars per registry: refuted, inconclusive and supported predictions.",
        )
        if path
        else None
    )
    head = ", ".join(f"<b>{total[k]} {k}</b>" for k in ORDER if total[k])
    if total["sanity check"]:
        head += f", and {total['sanity check']} sanity checks counted apart"
    finding = (
        f"{n} predictions, each with the result that would refute it, committed before it "
        f"ran: {head}"
        + (f"; {amended} amended, shown beside the original" if amended else "")
        + "."
    )
    table = (
        "<table><tr><th>registry</th>"
        + "".join(f"<th>{k}</th>" for k in ORDER)
        + "<th>sanity checks</th><th>results file</th></tr>"
        + "".join(
            f"<tr><td>{html.escape(name)}</td>"
            + "".join(f"<td>{counts[name].get(k, 0)}</td>" for k in ORDER)
            + f"<td>{counts[name].get('sanity check', 0)}</td>"
            f'<td><a href="../results/{rel.removesuffix(".json")}.html">'
            f"{html.escape(rel)}</a></td></tr>"
            for name, rel in logs.items()
        )
        + "</table>"
    )
    sections = []
    for kind, title in (
        ("refuted", "Refuted"),
        ("inconclusive", "Inconclusive"),
        ("supported", "Supported"),
        ("sanity check", "Sanity checks"),
    ):
        rows = [
            (name, p)
            for name, p in preds
            if ("sanity check" if is_sanity(p) else p.get("verdict")) == kind
        ]
        if rows:
            sections.append(
                f'<h2 id="{kind.replace(" ", "-")}">{title} ({len(rows)})</h2>'
                + "".join(_card(p, name) for name, p in rows)
            )
    intro = (
        f"<p>{finding}</p><p>Each entry gives the question, the prediction, what was "
        "measured and what it means. Refutations come first: several of the interesting "
        "results are refutations. The raw verdict files are linked from the table as an "
        "appendix.</p>" + table
    )
    page = Page(
        "experiments/log.html",
        "Experiment log",
        "Experiment log",
        intro,
        "".join(sections),
        [fig] if fig else [],
        list(logs.values()),
    )
    story.pages.append(page)
    cmd = str(read_meta(inputs.results_dir / next(iter(logs.values()))).get("command", "?"))
    story.headlines.append(
        Headline(
            "Pre-registered predictions, refutations first",
            "experiments/log.html",
            finding,
            fig,
            cmd,
        )
    )
