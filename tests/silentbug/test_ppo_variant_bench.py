"""benchmarks/silentbug_ppo.py --variant: a changed copy of the substrates measured beside the
pristine one. The NumPy-acting variant must still apply to the pristine package and
compute the same network as Torch up to rounding but not to the bit (it is measured, not landed:
other floats mean other numbers per seed, and the bank calibrated again)."""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from verigap.silentbug.substrate import pristine_files, write_workspace

NUMPY_ACTING = Path(__file__).resolve().parents[2] / "benchmarks" / "variants" / "numpy_acting"


def test_the_numpy_acting_variant_applies_to_the_pristine_package(benchmark_script):
    bench = benchmark_script("silentbug_ppo")
    pristine = pristine_files()
    changed = bench.variant_files(NUMPY_ACTING)
    assert sorted(k for k in pristine if changed[k] != pristine[k]) == [
        "ppo_modular/policy.py",
        "ppo_modular/value.py",
        "ppo_single.py",
    ]
    assert "numpy_mlp(next_obs, actor_np)" in changed["ppo_single.py"]
    assert "self.net.numpy_forward(obs)" in changed["ppo_modular/value.py"]


@pytest.fixture
def variant_modules(benchmark_script, tmp_path):
    """(ppo_single, ppo_modular.policy) of the NumPy-acting variant, imported from a copy."""
    bench = benchmark_script("silentbug_ppo")
    parent = str(write_workspace(bench.variant_files(NUMPY_ACTING), tmp_path))

    def forget() -> None:
        for mod in [m for m in sys.modules if m == "substrates" or m.startswith("substrates.")]:
            del sys.modules[mod]

    forget()
    sys.path.insert(0, parent)
    try:
        yield (
            importlib.import_module("substrates.ppo_single"),
            importlib.import_module("substrates.ppo_modular.policy"),
        )
    finally:
        sys.path.remove(parent)
        forget()


def test_the_variant_acts_with_the_same_network_but_other_last_bits(variant_modules):
    single, policy = variant_modules
    torch.manual_seed(0)
    net = policy.TanhMLP(4, 64, 2, out_gain=0.01)
    agent = single.Agent(4, 2, 64)
    obs = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    with torch.inference_mode():
        torch_logits = net.forward(torch.from_numpy(obs)).numpy()
        torch_values = agent.get_value(torch.from_numpy(obs)).numpy()
    numpy_logits = net.numpy_forward(obs)
    numpy_values = single.numpy_mlp(obs, [w.detach().numpy() for w in agent.critic.weights])
    np.testing.assert_allclose(numpy_logits, torch_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(numpy_values[:, 0], torch_values, rtol=1e-5, atol=1e-6)
    # not the same bits: NumPy's tanh and BLAS round differently from Torch's, so every run's
    # floats differ (and, where a draw lands near a boundary, its actions and returns)
    assert not np.array_equal(numpy_logits, torch_logits)
    # the NumPy weights are views: an in-place update of a parameter is seen when acting
    with torch.no_grad():
        net.weights[5].add_(1.0)
    np.testing.assert_allclose(net.numpy_forward(obs), numpy_logits + 1.0, rtol=1e-5, atol=1e-5)


def test_a_bad_variant_directory_is_named(benchmark_script, tmp_path):
    bench = benchmark_script("silentbug_ppo")
    with pytest.raises(SystemExit, match="no \\*.diff files"):
        bench.variant_files(tmp_path)
    (tmp_path / "x.diff").write_text("--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(SystemExit, match="'nope.py', not a file of the substrates package"):
        bench.variant_files(tmp_path)


def test_the_speed_view_puts_each_row_against_both_baselines():
    from verigap.report.views import get_view

    run = {"cpu_s": 6.0, "score": 179.4}
    data = {
        "implementations": {
            "baseline (CleanRL-style)": {"cpu_s": 24.0, "speedup_cpu": 1.0, "runs": [run]},
            "ppo_single+numpy_acting_preloaded": {
                "cpu_s": 6.0,
                "speedup_cpu": 4.0,
                "speedup_cpu_vs_preloaded_baseline": 3.0,
                "same_scores_as_pristine": False,
                "runs": [run, {"cpu_s": 6.0, "score": 200.0}],
            },
        }
    }
    table = get_view("silentbug_ppo_speed")(data).splitlines()
    assert table[2] == "| baseline (CleanRL-style) | 24.0 | 1.00x | - | 179.4 | - |"
    assert table[3] == (
        "| ppo_single+numpy_acting_preloaded | 6.0 | 4.00x | 3.00x | 179.4, 200.0 | no |"
    )


def test_variant_calibration_runs_only_the_bugs_whose_patch_applies(benchmark_script):
    bench = benchmark_script("silentbug_variant_calibration")
    applies, not_applied = bench.applicable_bugs(bench._variant_files(NUMPY_ACTING))
    # the variant moves ppo_single.py's lines, so its five bugs' patches (strict, no fuzz) no
    # longer apply as written; no other bug patches a line the variant moves
    assert sorted(not_applied) == [
        "single_gae_next_done",
        "single_minibatch_adv_unshuffled",
        "single_obs_stored_after_step",
        "single_recomputed_old_logprob",
        "single_stored_action_redrawn",
    ]
    assert len(applies) == 24 and not any(i.startswith("single_") for i in applies)


def test_variant_calibration_sets_each_verdict_beside_the_committed_one(benchmark_script):
    bench = benchmark_script("silentbug_variant_calibration")
    committed = {
        "a": {"verdict": "accepted", "margin": 50.0, "threshold": 10.0},
        "b": {"verdict": "accepted", "margin": 20.0, "threshold": 10.0},
    }
    variant = [
        {
            "id": "a",
            "substrate": "s",
            "verdict": "accepted",
            "margin": 48.0,
            "threshold": 9.0,
            "reason": "clears",
        },
        {
            "id": "b",
            "substrate": "s",
            "verdict": "rejected",
            "margin": 5.0,
            "threshold": 12.0,
            "reason": "the gap is within seed noise",
        },
    ]
    rows = bench.compare(variant, committed)
    assert [(r["id"], r["same_verdict"]) for r in rows] == [("a", True), ("b", False)]
    assert rows[1]["committed_margin"] == 20.0 and rows[1]["variant_margin"] == 5.0


def test_the_variant_calibration_view_marks_changed_verdicts():
    from verigap.report.views import get_view

    data = {
        "rows": [
            {
                "id": "a",
                "committed_verdict": "accepted",
                "variant_verdict": "accepted",
                "committed_margin": 50.0,
                "committed_threshold": 10.0,
                "variant_margin": 48.25,
                "variant_threshold": 9.0,
                "same_verdict": True,
            },
            {
                "id": "b",
                "committed_verdict": "refused",
                "variant_verdict": "rejected",
                "committed_margin": None,
                "committed_threshold": None,
                "variant_margin": 5.0,
                "variant_threshold": 12.0,
                "same_verdict": False,
            },
        ]
    }
    table = get_view("silentbug_variant_calibration")(data).splitlines()
    assert table[2] == "| a | accepted | accepted | 50.0 / 10.0 | 48.2 / 9.0 |  |"
    assert table[3] == "| b | refused | rejected | - | 5.0 / 12.0 | changed |"
