"""The verdict machinery on synthetic per-seed numbers: rules that must refute refute, rules
that must hold are supported, straddling or missing data is inconclusive; amended predictions
keep their original criterion and verdict."""

import pytest

from verigap.experiments.registry import parse_registry
from verigap.experiments.verdicts import (
    INCONCLUSIVE,
    REFUTED,
    SUPPORTED,
    decide,
    merge_entries,
    status,
    verdict_entry,
)


def _reg(*criteria, seeds=(0, 1, 2), settings=("a", "b", "c")):
    return parse_registry({
        "seeds": list(seeds),
        "settings": {s: {} for s in settings},
        "predictions": [{"id": f"P{i}", "question": "q?", "prediction": "p.", "criterion": c}
                        for i, c in enumerate(criteria)],
    })


def _crit(**kw):
    return _reg(kw).predictions[0].criterion


FS = "final_false_success"


def test_threshold_supported_refuted_inconclusive():
    c = _crit(kind="threshold", setting="a", metric=FS, compare="<", value=0.1)
    assert decide(c, "x", {"a": {FS: [0.02, 0.03, 0.04]}})["verdict"] == SUPPORTED
    refuted = decide(c, "x", {"a": {FS: [0.6, 0.62, 0.64]}})
    assert refuted["verdict"] == REFUTED
    assert refuted["statistic"] == pytest.approx(0.62)
    lo, hi = refuted["interval"]
    assert 0.6 <= lo <= 0.62 <= hi <= 0.64
    assert decide(c, "x", {"a": {FS: [0.0, 0.1, 0.3]}})["verdict"] == INCONCLUSIVE
    short = decide(c, "x", {"a": {FS: [0.0, 0.01]}})
    assert short["verdict"] == INCONCLUSIVE and "too few seeds" in short["reason"]


def test_contrast_is_paired_by_seed():
    c = _crit(kind="contrast", a="a", b="b", metric=FS, compare=">", value=0.05)
    # large between-seed spread, but every seed's a exceeds its b by 0.1: paired -> supported
    v = {"a": {FS: [0.2, 0.5, 0.8]}, "b": {FS: [0.1, 0.4, 0.7]}}
    assert decide(c, "x", v) == decide(c, "x", v)  # the bootstrap is seeded by the id
    out = decide(c, "x", v)
    assert out["verdict"] == SUPPORTED and out["statistic"] == pytest.approx(0.1)
    v["b"][FS] = [0.3, 0.6, 0.9]
    assert decide(c, "x", v)["verdict"] == REFUTED


def test_slope_position_and_correlation():
    slope = _crit(kind="slope", metric=FS, compare="<", value=-0.2,
                  points=[{"setting": "a", "x": 0.25}, {"setting": "b", "x": 0.5},
                          {"setting": "c", "x": 0.75}])
    v = {"a": {FS: [0.8] * 3}, "b": {FS: [0.6] * 3}, "c": {FS: [0.4] * 3}}
    out = decide(slope, "s", v)
    assert out["statistic"] == pytest.approx(-0.8) and out["verdict"] == SUPPORTED
    rising = {"a": {FS: [0.4] * 3}, "b": {FS: [0.6] * 3}, "c": {FS: [0.8] * 3}}
    assert decide(slope, "s", rising)["verdict"] == REFUTED

    pos = _crit(kind="position", low="a", mid="b", high="c", metric=FS, compare=">", value=0.75)
    assert decide(pos, "p", v)["statistic"] == pytest.approx(0.5)
    assert decide(pos, "p", v)["verdict"] == REFUTED
    flat = {s: {FS: [0.3] * 3} for s in "abc"}
    undefined = decide(pos, "p", flat)
    assert undefined["verdict"] == INCONCLUSIVE and "undefined" in undefined["reason"]

    corr = _crit(kind="correlation", settings=["a", "b", "c"], x_metric="early_false_success",
                 metric=FS, compare=">", value=0.7)
    data = {s: {"early_false_success": [x, x + 0.01, x + 0.02], FS: [2 * x, 2 * x + 0.02,
                                                                     2 * x + 0.04]}
            for s, x in (("a", 0.1), ("b", 0.3), ("c", 0.5))}
    assert decide(corr, "c", data)["verdict"] == SUPPORTED
    for s, x in (("a", 0.1), ("b", 0.3), ("c", 0.5)):
        data[s][FS] = [1 - 2 * x, 1 - 2 * x - 0.02, 1 - 2 * x - 0.04]
    assert decide(corr, "c", data)["verdict"] == REFUTED


def _registry_with(prediction_text, value):
    return _reg({"kind": "threshold", "setting": "a", "metric": FS, "compare": "<",
                 "value": value}) if prediction_text is None else parse_registry({
        "seeds": [0, 1, 2], "settings": {"a": {}},
        "predictions": [{"id": "P0", "question": "q?", "prediction": prediction_text,
                         "criterion": {"kind": "threshold", "setting": "a", "metric": FS,
                                       "compare": "<", "value": value}}]})


def test_an_edited_prediction_shows_as_amended_with_the_original_beside_it():
    values = {"a": {FS: [0.3, 0.32, 0.34]}}
    original = _registry_with("p.", 0.1)
    stored = merge_entries({}, [verdict_entry(original, original.predictions[0], values)])
    row = status(original, stored)[0]
    assert row["verdict"] == REFUTED and not row["amended"]

    edited = _registry_with("p.", 0.5)  # the threshold moved after the verdict existed
    assert edited.prediction_hash(edited.predictions[0]) != row["hash"]
    row = status(edited, stored)[0]
    assert row["amended"] and row["stale"]
    assert row["original"]["verdict"] == REFUTED
    assert row["original"]["criterion_text"].endswith("< 0.1")
    assert row["criterion_text"].endswith("< 0.5")

    # re-judged: the new verdict is current, the original stays on record beside it
    again = merge_entries(stored, [verdict_entry(edited, edited.predictions[0], values)])
    row = status(edited, again)[0]
    assert row["verdict"] == SUPPORTED and row["amended"] and not row["stale"]
    assert row["original"]["verdict"] == REFUTED
    assert len(again["P0"]["superseded"]) == 1
    # rerunning an unchanged prediction does not pile up history
    assert merge_entries(again, [verdict_entry(edited, edited.predictions[0], values)]) == again

    # editing only the sentence also counts as an amendment
    reworded = _registry_with("a different claim.", 0.5)
    assert status(reworded, again)[0]["stale"]
