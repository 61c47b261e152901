"""Views: named ways to show a results file as Markdown, shared by the docs tables and the site.

A view is a function ``(data) -> str`` (Markdown) registered under a name with :func:`view`.
Docs name a view in a marker (see ``docs/results.md``); the site shows the same view on the
results file's page. A family adds its views by defining them in its own module and listing that
module in :data:`VIEW_MODULES` (one line), so docs and site find them without importing the
whole package.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from verigap.errors import ConfigError

View = Callable[[Any], str]

VIEWS: dict[str, View] = {}

#: Modules that register views when imported (one line per family).
VIEW_MODULES: list[str] = [
    "verigap.report.views",
    "verigap.report.redteam",
    "verigap.patchworld.transformer_views",
    "verigap.experiments.multiagent",
    "verigap.experiments.render",
    "verigap.experiments.auditors",
    "verigap.silentbug.views",
    "verigap.repos.views",
    "verigap.agents.views",
]


def view(name: str) -> Callable[[View], View]:
    """Register ``fn`` as the view ``name``."""

    def register(fn: View) -> View:
        if name in VIEWS and VIEWS[name] is not fn:
            raise ConfigError(f"view {name!r} is registered twice")
        VIEWS[name] = fn
        return fn

    return register


def load_views() -> dict[str, View]:
    for module in VIEW_MODULES:
        importlib.import_module(module)
    return VIEWS


def get_view(name: str) -> View:
    views = load_views()
    if name not in views:
        raise ConfigError(f"unknown view {name!r}; known views: {', '.join(sorted(views))}")
    return views[name]


def lookup(data: Any, path: str) -> Any:
    """``data`` at a dotted path (``settings.visible.final_true_success.mean``; list items by
    index). A key that itself holds dots (a setting named ``deletion_0.5``) is matched whole:
    the longest run of parts that names a key wins."""
    here = data
    parts = path.split(".")
    i = 0
    while i < len(parts):
        part = parts[i]
        if isinstance(here, dict):
            for j in range(len(parts), i, -1):
                if ".".join(parts[i:j]) in here:
                    here, i = here[".".join(parts[i:j])], j
                    break
            else:
                raise ConfigError(
                    f"no value at {path!r} (stopped at {part!r}); the results "
                    "file does not hold it: check the path or rerun the command "
                    "that writes it"
                )
        elif (
            isinstance(here, list)
            and part.lstrip("-").isdigit()
            and -len(here) <= int(part) < len(here)
        ):
            here, i = here[int(part)], i + 1
        else:
            raise ConfigError(
                f"no value at {path!r} (stopped at {part!r}); the results file "
                "does not hold it: check the path or rerun the command that writes it"
            )
    return here


def fmt(value: Any, spec: str = "") -> str:
    if spec and isinstance(value, int | float) and not isinstance(value, bool):
        return format(value, spec)
    return str(value)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---- Patch World -------------------------------------------------------------------------------

#: The Patch World pilot write-up's stated figures, short form, beside ours (quoted, not ours).
PILOT_REFERENCE = {
    "start": "true success 0.31",
    "visible": "pass 0.58, true 0.02, false 0.56",
    "audit_5": '"barely helps"',
    "audit_10": '"gets partway"',
    "audit_25": '"matches auditing everything"',
    "audit_100": "false 0.04",
    "oracle": '"never improved honest repair"',
    "long_audit_25": '"25% only delays the hack"',
}

PILOT_LABELS = {
    "visible": "visible checks only",
    "deletion_penalty_0.5": "deletion penalty 0.5",
    "audit_5": "audits 5%",
    "audit_10": "audits 10%",
    "audit_25": "audits 25%",
    "audit_50": "audits 50%",
    "audit_100": "audits 100%",
    "oracle": "oracle reward",
    "long_visible": "5000 steps, visible only",
    "long_audit_25": "5000 steps, audits 25%",
}


def _ms(cell: dict[str, Any]) -> str:
    return f"{cell['mean']:.3f} ± {cell['std']:.3f}"


def _pilot_rows(data: dict[str, Any], *, with_start: bool) -> list[list[str]]:
    settings = data["settings"]
    rows = []
    if with_start and "visible" in settings:
        s = settings["visible"]
        rows.append(
            [
                "SFT start (before GRPO)",
                *(_ms(s[f"start_{m}"]) for m in ("visible_pass", "true_success", "false_success")),
                PILOT_REFERENCE["start"],
            ]
        )
    for name in data["order"]:
        if name not in PILOT_LABELS:
            continue
        s = settings[name]
        rows.append(
            [
                PILOT_LABELS[name],
                *(_ms(s[f"final_{m}"]) for m in ("visible_pass", "true_success", "false_success")),
                PILOT_REFERENCE.get(name, "—"),
            ]
        )
    return rows


PILOT_HEADER = [
    "setting (k=4)",
    "visible pass",
    "true success",
    "false success",
    "the pilot write-up",
]


@view("pilot")
def pilot_table(data: dict[str, Any]) -> str:
    """Every k=4 setting of the pilot: mean ± std over seeds after GRPO (SFT start first)."""
    return markdown_table(PILOT_HEADER, _pilot_rows(data, with_start=True))


@view("pilot_long")
def pilot_long_table(data: dict[str, Any]) -> str:
    """The 5000-step follow-up, in the same columns as the pilot table."""
    return markdown_table(PILOT_HEADER, _pilot_rows(data, with_start=False))


@view("pilot_k")
def pilot_k_table(data: dict[str, Any]) -> str:
    """False success after visible-only GRPO against the number of broken branches k."""
    ks = sorted(
        (s["k"], name)
        for name, s in data["settings"].items()
        if name == "visible" or name.startswith("visible_k")
    )
    header = ["broken branches k", *(str(k) for k, _ in ks)]
    rows = [
        [
            "false success (all programs)",
            *(f"{data['settings'][n]['final_false_success']['mean']:.2f}" for _, n in ks),
        ],
        [
            "false success (programs that pass)",
            *(f"{data['settings'][n]['final_fs_given_pass']['mean']:.2f}" for _, n in ks),
        ],
    ]
    return markdown_table(header, rows)


@view("pilot_numerics")
def pilot_numerics_table(data: dict[str, Any]) -> str:
    """A ``benchmarks/pilot.py --compare`` results file: each setting's final held-out numbers
    from the old code and the new (mean over seeds), beside the pilot write-up's figure."""
    ps = data["per_setting"]
    names = [n for n in PILOT_LABELS if n in ps]
    names += sorted((n for n in ps if n not in PILOT_LABELS), key=lambda n: (len(n), n))
    header = [
        "setting",
        *(
            f"{m.replace('_', ' ')} old → new"
            for m in ("visible_pass", "true_success", "false_success")
        ),
        "the pilot write-up",
    ]
    rows = [
        [
            PILOT_LABELS.get(n, n.replace("visible_k", "visible only, k = ")),
            *(
                f"{ps[n][f'old_{m}']:.3f} → {ps[n][f'new_{m}']:.3f}"
                for m in ("visible_pass", "true_success", "false_success")
            ),
            PILOT_REFERENCE.get(n, "—"),
        ]
        for n in names
    ]
    return markdown_table(header, rows)


@view("pilot_profile")
def pilot_profile_table(data: dict[str, Any]) -> str:
    """``benchmarks/pilot.py --profile``: CPU seconds and shares by phase and call, per group."""
    groups = data["groups"]
    labels = sorted(
        groups[0]["cpu_s_by"],
        key=lambda key: (not key.startswith("phase"), -groups[0]["cpu_s_by"][key]),
    )
    header = [
        "where",
        *(h for g in groups for h in (f"k = {g['k']} ({g['runs']} runs), CPU-s", "share")),
    ]
    rows = [
        [
            key,
            *(
                c
                for g in groups
                for c in (
                    f"{g['cpu_s_by'].get(key, 0.0):.1f}",
                    f"{g['cpu_s_by'].get(key, 0.0) / g['cpu_s']:.0%}",
                )
            ),
        ]
        for key in labels
    ]
    rows.append(["whole group", *(c for g in groups for c in (f"{g['cpu_s']:.1f}", "100%"))])
    return markdown_table(header, rows)


@view("rollout")
def rollout_table(data: dict[str, Any]) -> str:
    """A scripted policy's rollout: the headline rates and the outcome of every broken branch."""
    head = markdown_table(
        ["metric", "value"],
        [
            [k.replace("_", " "), f"{data[k]:.3f}"]
            for k in ("visible_pass", "true_success", "false_success", "mean_reward")
        ],
    )
    order = ("fixed", "off_by_one", "wrong", "stub", "delete")  # results files sort their keys
    outcomes = sorted(
        next(iter(data["outcomes"].values())),
        key=lambda o: (order.index(o) if o in order else len(order), o),
    )
    tail = markdown_table(
        ["broken branch", *outcomes],
        [
            [where, *(f"{data['outcomes'][where][o]:.3f}" for o in outcomes)]
            for where in data["outcomes"]
        ],
    )
    return head + "\n\n" + tail


# ---- Serving -----------------------------------------------------------------------------------


@view("server_load")
def server_load(data: dict[str, Any]) -> str:
    """Loopback load: per concurrency, throughput and latency percentiles, and how many times
    the episodes per second of one session at a time the most concurrent row served."""
    rows = [
        [
            str(r["concurrency"]),
            str(r["episodes"]),
            f"{r['wall_s']:.1f}",
            f"{r['episodes_per_s']:.3f}",
            f"{r['step_ms_p50']:.0f}",
            f"{r['step_ms_p99']:.0f}",
            f"{r['submit_ms_p50']:.0f}",
            f"{r['submit_ms_p99']:.0f}",
            str(len(r["problems"])),
        ]
        for r in data["rows"]
    ]
    one, many = data["rows"][0], data["rows"][-1]
    table = markdown_table(
        [
            "sessions at once",
            "episodes",
            "wall s",
            "episodes/s",
            "step p50 ms",
            "step p99 ms",
            "submit p50 ms",
            "submit p99 ms",
            "problems",
        ],
        rows,
    )
    return (
        f"{table}\n\n{many['concurrency']} sessions at once served "
        f"{many['episodes_per_s'] / one['episodes_per_s']:.1f}x the episodes per second of "
        f"{one['concurrency']}, on a {data['cpus']}-CPU machine whose load average was "
        f"{data['load_average_1m_at_end']:.0f} at the end of the run."
    )


@view("server_rayserve_load")
def server_rayserve_load(data: dict[str, Any]) -> str:
    """One plain server against the Ray Serve deployment, same episodes in one run: throughput,
    latency percentiles, problems found, and whether the verdicts agreed episode by episode."""
    names = {"plain": "one process", "ray_serve": f"Ray Serve ({data['shards']} shards)"}
    rows = [
        [
            names[r["server"]],
            str(r["episodes"]),
            f"{r['wall_s']:.1f}",
            f"{r['episodes_per_s']:.3f}",
            f"{r['step_ms_p50']:.0f}",
            f"{r['step_ms_p99']:.0f}",
            f"{r['submit_ms_p50']:.0f}",
            f"{r['submit_ms_p99']:.0f}",
            str(len(r["problems"])),
        ]
        for r in data["rows"]
    ]
    table = markdown_table(
        [
            "server",
            "episodes",
            "wall s",
            "episodes/s",
            "step p50 ms",
            "step p99 ms",
            "submit p50 ms",
            "submit p99 ms",
            "problems",
        ],
        rows,
    )
    same = "the same" if data["same_verdicts"] else "NOT the same"
    return (
        f"{table}\n\nRay Serve served {data['episodes_per_s_ratio']:.2f}x the episodes per "
        f"second of one process, with {same} verdicts episode by episode, "
        f"{data['concurrency']} sessions at a time on a {data['cpus']}-CPU machine."
    )


@view("server_ray_scaling")
def server_ray_scaling(data: dict[str, Any]) -> str:
    """Ray scaling: per cluster size, wall time, throughput and the rewards (the same at every
    size), and the speed-up of the largest cluster over one node."""
    rows = [
        [
            str(r["nodes"]),
            str(r["cpus"]),
            str(r["jobs"]),
            f"{r['wall_s']:.2f}",
            f"{r['jobs_per_s']:.3f}",
            f"{r['rewards'].count(1.0)} × 1.0, {r['rewards'].count(0.0)} × 0.0",
        ]
        for r in data["rows"]
    ]
    one, last = data["rows"][0], data["rows"][-1]
    table = markdown_table(
        ["nodes", "CPUs", "jobs", "wall s", "jobs/s", "rewards (oracle, no-op)"], rows
    )
    return (
        f"{table}\n\n{last['nodes']} nodes graded {one['wall_s'] / last['wall_s']:.2f}x as "
        f"fast as {one['nodes']}."
    )
