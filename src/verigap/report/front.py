"""The front page: what verigap is, the finding it exists for, then every family's headline.

Above the fold: the pilot's gap figure (false success rising under visible-only reward) beside
the audit-rate figure (audits as the fix). Below: one card per family headline, each linking to
its page and quoting the command that reproduces it. The language-model experiment has a slot
that is filled only when its results exist.
"""

from __future__ import annotations

import html

from verigap.report.site import Page, SiteInputs, _rel

WHAT = (
    "verigap is a toolkit of reinforcement-learning environments for code agents. Every "
    "episode records the reward the training signal saw separately from the truth, so "
    "<b>false success</b> — green on every check, wrong underneath — is a measured number, "
    "not an anecdote."
)


def _figure(fig, caption: bool = True) -> str:
    if fig is None:
        return ""
    cap = f"<figcaption>{html.escape(fig.caption)}</figcaption>" if caption else ""
    return (
        f'<figure><img src="{fig.file}" alt="{html.escape(fig.alt or fig.caption)}">{cap}</figure>'
    )


def short_command(command: str, limit: int = 80) -> str:
    """The first step of a reproduce command, cut to ``limit`` characters for a card (the
    family page lists every command in full)."""
    first = command.split(" && ")[0].split("; ")[0].strip()
    more = first != command.strip()
    if len(first) > limit:
        first, more = first[:limit].rsplit(" ", 1)[0], True
    return first + (" …" if more else "")


def _card(h) -> str:
    return (
        f'<div><h3><a href="{h.page}">{html.escape(h.title)}</a></h3>'
        f"{_figure(h.figure, caption=False)}<p>{h.finding}</p>"
        f'<p class="meta"><a href="{h.page}">Read the page →</a> · reproduce: '
        f'<code title="{html.escape(h.command)}">{html.escape(short_command(h.command))}'
        "</code></p></div>"
    )


def front_page(pages: list[Page], inputs: SiteInputs) -> Page:
    """The index: the story in one screen, then a card per family."""
    headlines = [h for p in pages if not p.appendix for h in p.headlines]
    hero = [h for h in headlines if h.page == "patchworld/pilot.html"]
    rest = [h for h in headlines if h not in hero]
    out = [f'<p class="lead">{WHAT}</p>']
    if hero:
        first = hero[0]
        out.append(
            f'<p class="lead">{first.finding} '
            f'<a href="{first.page}">The Patch World pilot →</a></p>'
        )
        out.append('<div class="hero">' + "".join(_figure(h.figure) for h in hero[:2]) + "</div>")
        if len(hero) > 1:
            out.append(f"<p>{hero[1].finding}</p>")
        out.append(
            f'<p class="meta">Reproduce: <code title="{html.escape(first.command)}">'
            f"{html.escape(short_command(first.command))}</code></p>"
        )
    # Slot: the language-model experiment's card appears among the findings when
    # results/llm/ holds its results (see story.language_model); nothing is shown otherwise.
    if rest:
        out.append(
            '<h2>Findings</h2><div class="cards">' + "".join(_card(h) for h in rest) + "</div>"
        )
    runs = [p for p in pages if p.section == "Latest runs"]
    if runs:
        out.append(
            "<h2>Latest local runs</h2><ul>"
            + "".join(f'<li><a href="{p.file}">{html.escape(p.title)}</a></li>' for p in runs)
            + "</ul>"
        )
    out.append(
        '<p class="meta">Every number and figure here is read from a results file '
        "under <code>results/</code>, each of which names the command that reproduces "
        f'it; <a href="{_rel("index.html", "results/index.html")}">the appendix</a> '
        "lists them all.</p>"
        if any(p.appendix for p in pages)
        else ""
    )
    return Page("index.html", "False success, measured", "", "".join(out))
