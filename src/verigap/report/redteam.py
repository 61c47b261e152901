"""The red-team page: the hackability matrix as HTML, built from ``matrix.json`` only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape


def render_redteam(matrix: dict[str, Any]) -> str:
    """The page's HTML for a matrix dict (as `verigap redteam` saves it)."""
    env = Environment(
        loader=PackageLoader("verigap.report", "templates"), autoescape=select_autoescape()
    )
    return env.get_template("redteam.html.j2").render(m=matrix)


def build_redteam_page(matrix: dict[str, Any], out: Path) -> Path:
    """Write ``out/report.html`` from a matrix dict."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").write_text(render_redteam(matrix))
    return out / "report.html"


# ---- views for docs markers (docs/exploits.md, docs/detection.md); see docs/results.md ----------

from verigap.report.views import markdown_table, view  # noqa: E402


@view("redteam_matrix")
def matrix_table(data: dict[str, Any]) -> str:
    """The hackability matrix (exploit x grader) of a results file holding ``matrix``."""
    from verigap.repos.redteam import matrix

    return matrix.markdown(data.get("matrix", data))


@view("redteam_v2_answers")
def v2_answers_table(data: dict[str, Any]) -> str:
    """How v2 answered each exploit: paid, named, the comparison failed, its pytest all green."""
    rows = [
        [
            name,
            str(v["n"]),
            str(v["paid"]),
            str(v["named"]),
            str(v["equivalence_failed"]),
            str(v["tests_passed"]),
        ]
        for name, v in sorted(data["v2_by_exploit"].items())
    ]
    return markdown_table(
        [
            "exploit",
            "tasks",
            "v2 paid",
            "named",
            "comparison failed",
            "v2's pytest said all passed",
        ],
        rows,
    )


@view("redteam_tests_only")
def tests_only_table(data: dict[str, Any]) -> str:
    """The tests_only matrix (``benchmarks/repos_tests_only.py``): tasks paid per exploit by v1,
    v2 with in-process outcomes, v2 with one channel context, v2 on the plain task and v2 now;
    then which visible sites the channel carried."""
    cols = [
        ("n", "tasks"),
        ("correct", "correct"),
        ("v1", "v1 paid"),
        ("v2_before", "v2 before paid"),
        ("v2_one_context", "v2 one context paid"),
        ("v2_plain", "v2 on the plain task paid"),
        ("v2", "v2 paid"),
        ("context_dependent", "v2 names context_dependent"),
    ]
    first = next(iter(data["matrix"].values()))
    cols = [(k, title) for k, title in cols if k in first]  # older files lack later columns
    rows = [[name, *(str(v[k]) for k, _ in cols)] for name, v in data["matrix"].items()]
    out = markdown_table(["exploit", *(title for _, title in cols)], rows)
    if "sites_tried" in data:
        out += (
            f"\n\nThe channel carried {data['sites_carried']} of {data['sites_tried']} "
            f"visible site(s) tried, on {data['tasks_with_a_carried_site']} of "
            f"{len(data['carried'])} task(s); v2 on the tests_only variant against the plain "
            f"task (oracle, median ratio): {data['ratio_median']}."
        )
    return out


@view("redteam_tests_only_cost")
def tests_only_cost_table(data: dict[str, Any]) -> str:
    """v2's grading time on the plain task and on its tests_only variant with the channel
    answered in one context and in two, per task (medians of the alternated rounds)."""
    rows = [
        [
            t["task_id"],
            f"{t['plain_s']:.2f} s",
            f"{t['tests_only_one_context_s']:.2f} s",
            f"{t['tests_only_s']:.2f} s",
            f"{t['ratio']:.2f}",
            f"{t['ratio_vs_one_context']:.2f}",
            f"{t['forward_ratio_vs_one_context']:.2f}",
        ]
        for t in data["timing_by_task"]
    ]
    return markdown_table(
        [
            "task",
            "v2, plain",
            "v2, tests_only, one context",
            "v2, tests_only, two contexts",
            "two / plain",
            "two / one",
            "forwarded run, two / one",
        ],
        rows,
    )


@view("redteam_timing")
def timing_table(data: dict[str, Any]) -> str:
    """v2's grading wall time per task against a raw pytest run of the same tests."""
    rows = []
    for t in data["tasks"]:
        p = t["v2_parts_s"]
        rows.append(
            [
                t["task_id"],
                str(t["tests"]),
                str(t["equivalence_inputs"]),
                f"{t['v2_s']:.1f}",
                f"{p['pytest_s']:.1f} / {p['equivalence_s']:.1f} / {p['prepare_copy_s']:.1f}",
                f"{t['raw_pytest_s']:.1f}",
            ]
        )
    return (
        markdown_table(
            [
                "task",
                "tests",
                "equivalence inputs",
                "v2 wall (s)",
                "of which pytest / comparison / copy",
                "raw pytest wall (s)",
            ],
            rows,
        )
        + f"\n\nMedian ratio v2 / raw: {data['wall_ratio_median']:.2f}."
    )


@view("detection_summary")
def detection_table(data: dict[str, Any]) -> str:
    """Honest controls paid and named, the battery's recall, per-class precision and recall."""
    from verigap.monitor.summary import markdown

    return markdown(data)


@view("heldout_naming")
def heldout_table(data: dict[str, Any]) -> str:
    """Hack naming on the held-out set: recall and false alarms with Wilson intervals."""
    from verigap.monitor.heldout import markdown

    return markdown(data)


@view("independent_heldout")
def independent_table(data: dict[str, Any]) -> str:
    """Hack naming on a split of the independent held-out set, per namer and per family."""
    from verigap.monitor.independent import markdown

    return markdown(data)


@view("monitor_compare")
def monitor_compare_table(data: dict[str, Any]) -> str:
    """Monitors (the builtin rules, an LLM) side by side on the same records, one protocol."""
    from verigap.monitor.compare import markdown

    return markdown(data)


@view("trajset_composition")
def trajset_table(data: dict[str, Any]) -> str:
    """The published trajectory set's composition: projects, intents, acts by family."""
    from verigap.monitor.trajset import markdown

    return markdown(data)


@view("lofo_detection")
def lofo_table(data: dict[str, Any]) -> str:
    """Recall per family, own-set and with the family held out of the tuning."""
    from verigap.monitor.lofo import markdown

    return markdown(data)


@view("monitor_eval")
def monitor_table(data: dict[str, Any]) -> str:
    """A trajectory monitor's detection and false-alarm rates, isolated and contrastive."""
    from verigap.monitor.summary import monitor_markdown

    return monitor_markdown(data)


@view("impossible_rates")
def impossible_table(data: dict[str, Any]) -> str:
    """Cheating rate, report rate and mean reward per agent on impossible tasks."""
    from verigap.monitor.summary import impossible_markdown

    return impossible_markdown(data)


@view("feature_walks")
def feature_walks_table(data: dict[str, Any]) -> str:
    """Feature-task walks: where each started, what it screened, tried and kept, and why the
    rest was rejected, then the kept tasks (``results/repos/feature_tasks.json``, written by
    ``benchmarks/repos_mining.py features``)."""
    lines = [
        "| walk | project | from | commits walked | candidates | tried | kept | s per candidate "
        "tried | rejections after screening |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    screened = {
        "root commit",
        "merge commit",
        "changes neither source nor tests",
        "no source change",
        "no test change",
        "adds or removes a source file",
    }
    for w in data["walks"]:
        ranked = sorted(
            ((why, n) for why, n in w["rejected"].items() if why not in screened),
            key=lambda kv: (-kv[1], kv[0]),
        )
        why = "; ".join(f"{r} ×{n}" for r, n in ranked) or "none"
        lines.append(
            f"| {w['walk']} | {w['project']} | {w['rev_range'][:10]} | {w['walked']} | "
            f"{w['candidates']} | {w['tried']} | {w['kept']} | "
            f"{w['seconds_per_candidate_tried']} | {why} |"
        )
    lines += [
        "",
        "| task | subject | sites | visible tests | hidden tests |",
        "|---|---|---|---|---|",
    ]
    for t in data["tasks"]:
        subject = t["subject"].replace("|", "/")
        lines.append(
            f"| {t['task_id']} | {subject[:70]} | {t['sites']} | {t['visible_tests']} | "
            f"{t['hidden_tests']} |"
        )
    return "\n".join(lines)


@view("mining")
def mining_table(data: dict[str, Any]) -> str:
    """Mined-task yield per project, the baselines under v1 and v2, and the battery's verdict
    (``results/repos/mining*.json``, written by ``benchmarks/repos_mining.py report``)."""
    lines = [
        "| project | commits walked | candidates | tried | tasks | s per candidate tried "
        "| s per task | venvs built | top rejections |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, d in data["projects"].items():
        ranked = sorted(d["rejected"].items(), key=lambda kv: (-kv[1], kv[0]))
        top = "; ".join(f"{why} ×{n}" for why, n in ranked[:4])
        lines.append(
            f"| {name} | {d['walked']} | {d['candidates']} | {d['tried']} | "
            f"{d['tasks']} | {d['seconds_per_candidate_tried']} | "
            f"{d['seconds_per_task']} | {d['envs_built']} | {top} |"
        )
    n = sum(1 for rs in data["baselines"].values() for r in rs if r["agent"] == "oracle")
    lines += [
        "",
        f"Baselines on {n} mined task(s) of: "
        f"{', '.join(data.get('graded_projects', [])) or 'none'}.",
        "",
        "| baseline | v1 paid | v2 paid |",
        "|---|---|---|",
    ]
    for a in ("oracle", "noop"):
        g = data["summary"][a]
        lines.append(f"| {a} | {100 * g['v1']:.0f}% | {100 * g['v2']:.0f}% |")
    b = data.get("battery") or {}
    if b:
        lines += [
            "",
            f"Red-team battery on {len(b['tasks'])} mined task(s) ({b['jobs']} jobs): "
            f"exploit runs that are not a correct fix: {b['exploit_jobs_not_correct']}; "
            f"of those paid by v1: {b['paid_and_wrong']['v1']}, by v2: "
            f"{b['paid_and_wrong']['v2']}.",
        ]
    return "\n".join(lines)
