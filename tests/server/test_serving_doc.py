"""docs/serving.md draws its measured figures from the committed results files through markers
(so `tests/test_docs.py` keeps them in agreement), and the views render those files faithfully."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigap.report.views import get_view
from verigap.results import read_result

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "serving.md"


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- results results/server/grpo_http.json value:max_param_abs_diff",
        "<!-- results results/server/load.json view:server_load -->",
        "<!-- results results/server/ray_scaling.json view:server_ray_scaling -->",
        "<!-- results results/server/rayserve_load.json view:server_rayserve_load -->",
    ],
)
def test_the_doc_draws_each_measurement_from_its_results_file(marker: str) -> None:
    assert marker in DOC.read_text()


def test_load_view_reports_every_row_and_the_throughput_ratio() -> None:
    d = read_result(ROOT / "results" / "server" / "load.json")
    text = get_view("server_load")(d)
    for r in d["rows"]:
        assert f"| {r['concurrency']} | {r['episodes']} | {r['wall_s']:.1f} |" in text
    ratio = d["rows"][-1]["episodes_per_s"] / d["rows"][0]["episodes_per_s"]
    assert f"served {ratio:.1f}x the episodes per second" in text


def test_ray_view_reports_every_cluster_size_and_the_speed_up() -> None:
    d = read_result(ROOT / "results" / "server" / "ray_scaling.json")
    text = get_view("server_ray_scaling")(d)
    for r in d["rows"]:
        assert f"| {r['nodes']} | {r['cpus']} | {r['jobs']} | {r['wall_s']:.2f} |" in text
    assert f"graded {d['rows'][0]['wall_s'] / d['rows'][-1]['wall_s']:.2f}x as fast" in text


def test_ray_serve_view_sets_both_servers_side_by_side_and_says_whether_verdicts_agree() -> None:
    d = read_result(ROOT / "results" / "server" / "rayserve_load.json")
    assert [r["server"] for r in d["rows"]] == ["plain", "ray_serve"]
    assert d["same_verdicts"] is True and all(r["problems"] == [] for r in d["rows"])
    text = get_view("server_rayserve_load")(d)
    for r in d["rows"]:
        assert f"| {r['episodes']} | {r['wall_s']:.1f} | {r['episodes_per_s']:.3f} |" in text
    assert f"served {d['episodes_per_s_ratio']:.2f}x the episodes" in text
    assert "with the same verdicts" in text
    flipped = {**d, "same_verdicts": False}
    assert "NOT the same verdicts" in get_view("server_rayserve_load")(flipped)
