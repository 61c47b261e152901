"""The figures quoted in docs/serving.md are the ones in the committed results files."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "serving.md"


def grpo_line(d: dict) -> str:
    return (f"over {len(d['steps'])} steps every logged metric was equal "
            f"(`equal_metrics: {str(d['equal_metrics']).lower()}`) and the largest parameter "
            f"difference at the end was {d['max_param_abs_diff']:g}; the steps took "
            f"{d['in_process_s']:.1f} s in-process and {d['http_s']:.1f} s over HTTP.")


def load_table(d: dict) -> str:
    lines = ["| sessions at once | episodes | wall s | episodes/s | step p50 ms | step p99 ms "
             "| submit p50 ms | submit p99 ms | problems |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        lines.append(f"| {r['concurrency']} | {r['episodes']} | {r['wall_s']:.1f} "
                     f"| {r['episodes_per_s']:.3f} | {r['step_ms_p50']:.0f} "
                     f"| {r['step_ms_p99']:.0f} | {r['submit_ms_p50']:.0f} "
                     f"| {r['submit_ms_p99']:.0f} | {len(r['problems'])} |")
    return "\n".join(lines)


def load_prose(d: dict) -> list[str]:
    one, many = d["rows"][0], d["rows"][-1]
    p50s = [r["submit_ms_p50"] / 1000 for r in d["rows"]]
    return [f"{many['episodes_per_s'] / one['episodes_per_s']:.1f}x the episodes per second",
            f"about {min(p50s):.0f}-{max(p50s):.0f} s here",
            *(f"| {r['concurrency']} | {r['episodes']} |" for r in d["rows"] if not r["problems"])]


def scaling_table(d: dict) -> list[str]:
    rows = [f"| {r['nodes']} | {r['cpus']} | {r['jobs']} | {r['wall_s']:.2f} "
            f"| {r['jobs_per_s']:.3f} | {r['rewards'].count(1.0)} × 1.0, "
            f"{r['rewards'].count(0.0)} × 0.0 |" for r in d["rows"]]
    one, two = d["rows"][0], d["rows"][1]
    return [*rows, f"Two nodes grade {one['wall_s'] / two['wall_s']:.2f}x as fast as one"]


CHECKS = [("grpo_http.json", grpo_line), ("load.json", load_table), ("load.json", load_prose),
          ("ray_scaling.json", scaling_table)]


@pytest.mark.parametrize(("name", "render"), CHECKS, ids=[c[1].__name__ for c in CHECKS])
def test_doc_quotes_the_results(name, render):
    texts = render(read_result(ROOT / "results" / "server" / name))
    for text in [texts] if isinstance(texts, str) else texts:
        assert text in DOC.read_text(), f"docs/serving.md is out of date with {name}:\n{text}"
