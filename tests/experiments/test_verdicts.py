"""The verdict machinery on synthetic per-seed numbers: rules that must refute refute, rules
that must hold are supported, straddling or missing data is inconclusive; amended predictions
keep their original criterion and verdict."""

import pytest

from verigap.errors import ConfigError
from verigap.experiments.registry import parse_registry
from verigap.experiments.render import log_counts, markdown
from verigap.experiments.verdicts import (
    BOOTSTRAP_RULE,
    INCONCLUSIVE,
    REFUTED,
    RULE,
    SUPPORTED,
    decide,
    decide_bootstrap,
    merge_entries,
    rejudge,
    rule_changes,
    status,
    t_quantile,
    tally,
    verdict_entry,
)


def _reg(*criteria, seeds=(0, 1, 2), settings=("a", "b", "c")):
    return parse_registry(
        {
            "seeds": list(seeds),
            "settings": {s: {} for s in settings},
            "predictions": [
                {"id": f"P{i}", "question": "q?", "prediction": "p.", "criterion": c}
                for i, c in enumerate(criteria)
            ],
        }
    )


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
    # Student-t over 3 seeds: mean +- t(0.95, 2) * sd / sqrt(3), wider than the seeds' range
    assert lo == pytest.approx(0.62 - 2.919986 * 0.02 / 3**0.5, abs=1e-6)
    assert hi == pytest.approx(0.62 + 2.919986 * 0.02 / 3**0.5, abs=1e-6)
    assert refuted["seed_statistics"] == pytest.approx([0.6, 0.62, 0.64])
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
    slope = _crit(
        kind="slope",
        metric=FS,
        compare="<",
        value=-0.2,
        points=[
            {"setting": "a", "x": 0.25},
            {"setting": "b", "x": 0.5},
            {"setting": "c", "x": 0.75},
        ],
    )
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

    corr = _crit(
        kind="correlation",
        settings=["a", "b", "c"],
        x_metric="early_false_success",
        metric=FS,
        compare=">",
        value=0.7,
    )
    data = {
        s: {"early_false_success": [x, x + 0.01, x + 0.02], FS: [2 * x, 2 * x + 0.02, 2 * x + 0.04]}
        for s, x in (("a", 0.1), ("b", 0.3), ("c", 0.5))
    }
    assert decide(corr, "c", data)["verdict"] == SUPPORTED
    for s, x in (("a", 0.1), ("b", 0.3), ("c", 0.5)):
        data[s][FS] = [1 - 2 * x, 1 - 2 * x - 0.02, 1 - 2 * x - 0.04]
    assert decide(corr, "c", data)["verdict"] == REFUTED


def _registry_with(prediction_text, value):
    return (
        _reg({"kind": "threshold", "setting": "a", "metric": FS, "compare": "<", "value": value})
        if prediction_text is None
        else parse_registry(
            {
                "seeds": [0, 1, 2],
                "settings": {"a": {}},
                "predictions": [
                    {
                        "id": "P0",
                        "question": "q?",
                        "prediction": prediction_text,
                        "criterion": {
                            "kind": "threshold",
                            "setting": "a",
                            "metric": FS,
                            "compare": "<",
                            "value": value,
                        },
                    }
                ],
            }
        )
    )


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


@pytest.mark.parametrize(
    "p, df, expected",
    [
        (0.95, 1, 6.313752),
        (0.95, 2, 2.919986),
        (0.95, 4, 2.131847),
        (0.975, 10, 2.228139),
    ],
)
def test_t_quantile_matches_published_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-5)


def test_a_verdict_never_goes_against_a_seed():
    """Seeds like E12's (two stub, one does not): the percentile bootstrap calls it supported,
    the current rule cannot, because one seed fails the criterion."""
    c = _crit(kind="contrast", a="a", b="b", metric=FS, compare=">", value=0.1)
    v = {"a": {FS: [0.00025, 0.39575, 0.41375]}, "b": {FS: [0.0, 0.0, 0.0]}}
    assert decide_bootstrap(c, "E12", v)["verdict"] == SUPPORTED
    out = decide(c, "E12", v)
    assert out["verdict"] == INCONCLUSIVE and "2 of 3 seeds" in out["reason"]
    assert out["rule"] == RULE


def test_all_seeds_agreeing_is_not_enough_when_the_t_interval_straddles():
    c = _crit(kind="threshold", setting="a", metric=FS, compare=">", value=0.05)
    out = decide(c, "x", {"a": {FS: [0.067, 0.06, 0.1015]}})  # E27's seeds
    assert out["verdict"] == INCONCLUSIVE and "straddles" in out["reason"]


def test_correlation_and_slope_are_computed_within_each_seed():
    corr = _crit(
        kind="correlation",
        settings=["a", "b", "c"],
        x_metric="early_false_success",
        metric=FS,
        compare=">",
        value=0.5,
    )
    # seed 0 and 1 correlate positively across settings, seed 2 negatively
    data = {
        "a": {"early_false_success": [0.1, 0.1, 0.1], FS: [0.1, 0.1, 0.5]},
        "b": {"early_false_success": [0.3, 0.3, 0.3], FS: [0.3, 0.3, 0.3]},
        "c": {"early_false_success": [0.5, 0.5, 0.5], FS: [0.5, 0.5, 0.1]},
    }
    out = decide(corr, "c", data)
    assert out["seed_statistics"] == pytest.approx([1.0, 1.0, -1.0])
    assert out["verdict"] == INCONCLUSIVE
    two = _crit(
        kind="correlation",
        settings=["a", "b"],
        x_metric="early_false_success",
        metric=FS,
        compare=">",
        value=0.5,
        min_seeds=2,
    )
    assert "undefined" in decide(two, "c", data)["reason"]

    slope = _crit(
        kind="slope",
        metric=FS,
        compare=">",
        value=0.0,
        points=[{"setting": "a", "x": 1}, {"setting": "b", "x": 3}],
    )
    # seed-paired: every seed rises by 0.02 although the seeds' levels differ widely
    v = {"a": {FS: [0.1, 0.4, 0.7]}, "b": {FS: [0.12, 0.42, 0.72]}}
    out = decide(slope, "s", v)
    assert out["verdict"] == SUPPORTED
    assert out["seed_statistics"] == pytest.approx([0.01, 0.01, 0.01])


def test_one_seed_is_never_enough():
    c = _crit(kind="threshold", setting="a", metric=FS, compare="<", value=0.1, min_seeds=1)
    out = decide(c, "x", {"a": {FS: [0.0]}})
    assert out["verdict"] == INCONCLUSIVE and "too few seeds" in out["reason"]


def _old_rule_entry(reg, values):
    """An entry as the log stored it before rules were named: judged by the bootstrap."""
    p = reg.predictions[0]
    e = verdict_entry(reg, p, values)
    for k in ("rule", "seed_statistics", "sanity_check"):
        e.pop(k)
    return merge_entries({}, [{**e, **decide_bootstrap(p.criterion, p.id, values)}])


def test_rejudging_keeps_the_first_rule_verdict_beside_the_new_one():
    reg = _reg({"kind": "contrast", "a": "a", "b": "b", "metric": FS, "compare": ">", "value": 0.1})
    values = {"a": {FS: [0.00025, 0.39575, 0.41375]}, "b": {FS: [0.0, 0.0, 0.0]}}
    stored = _old_rule_entry(reg, values)
    assert stored["P0"]["verdict"] == SUPPORTED
    again = rejudge(reg, stored)
    e = again["P0"]
    assert e["verdict"] == INCONCLUSIVE and e["rule"] == RULE
    assert [s["verdict"] for s in e["superseded"]] == [SUPPORTED]
    assert rule_changes(again) == [
        {
            "id": "P0",
            "sanity_check": False,
            "rule": BOOTSTRAP_RULE,
            "before": SUPPORTED,
            "after": INCONCLUSIVE,
        }
    ]
    row = status(reg, again)[0]
    assert row["rule_original"]["verdict"] == SUPPORTED and not row["amended"]
    assert rejudge(reg, again) == again  # judging again by the same rule changes nothing
    # a rerun under the current rule does not pile up history either
    assert merge_entries(again, [verdict_entry(reg, reg.predictions[0], values)]) == again
    text = markdown(status(reg, again))
    assert "**1 of 1** prediction verdicts changed (P0 supported → inconclusive)" in text
    assert "| P0 | **inconclusive** | supported |" in text


def _with_sanity_check(why):
    return parse_registry(
        {
            "seeds": [0, 1, 2],
            "settings": {"a": {}},
            "predictions": [
                {
                    "id": "P0",
                    "question": "q?",
                    "prediction": "p.",
                    "sanity_check": why,
                    "criterion": {
                        "kind": "threshold",
                        "setting": "a",
                        "metric": FS,
                        "compare": "<",
                        "value": 0.1,
                    },
                },
                {
                    "id": "P1",
                    "question": "q?",
                    "prediction": "p.",
                    "criterion": {
                        "kind": "threshold",
                        "setting": "a",
                        "metric": FS,
                        "compare": ">",
                        "value": 0.1,
                    },
                },
            ],
        }
    )


def test_sanity_checks_are_counted_apart_from_predictions():
    reg = _with_sanity_check("Passing implies correct here, so false success is zero.")
    values = {"a": {FS: [0.0, 0.0, 0.0]}}
    entries = merge_entries({}, [verdict_entry(reg, p, values) for p in reg.predictions])
    t = tally(entries.values())
    assert t["predictions"] == {REFUTED: 1} and t["sanity_checks"] == {SUPPORTED: 1}
    line = log_counts({"predictions": entries})
    assert line.startswith("**1 refuted of 1 predictions; 1 sanity check apart (1 held)**")
    text = markdown(status(reg, entries))
    assert "| P0 | **sanity check: supported** |" in text
    assert text.index("| P1 |") < text.index("| P0 |")  # controls come last
    # marking a criterion as a control does not amend it: its hash is unchanged
    plain = _reg({"kind": "threshold", "setting": "a", "metric": FS, "compare": "<", "value": 0.1})
    assert plain.prediction_hash(plain.predictions[0]) == reg.prediction_hash(reg.predictions[0])


@pytest.mark.parametrize("why", ["", "obvious", "it is a control"])
def test_a_sanity_check_must_say_why_it_cannot_fail(why):
    with pytest.raises(ConfigError, match="prediction P0, field sanity_check"):
        _with_sanity_check(why)
