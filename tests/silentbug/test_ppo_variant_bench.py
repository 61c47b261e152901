"""benchmarks/silentbug_ppo.py --variant: a changed copy of the substrates measured beside the
pristine one. The NumPy-acting variant (issue 19) must still apply to the pristine package, compute
the same network as Torch up to rounding, and really move the numbers (it is measured, not landed,
because landing it means recalibrating the bank)."""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from verigap.silentbug.substrate import pristine_files

NUMPY_ACTING = Path(__file__).resolve().parents[2] / "benchmarks" / "variants" / "numpy_acting"


def test_the_numpy_acting_variant_applies_to_the_pristine_package(benchmark_script):
    bench = benchmark_script("silentbug_ppo")
    pristine = pristine_files()
    changed = bench.variant_files(NUMPY_ACTING)
    assert sorted(k for k in pristine if changed[k] != pristine[k]) == [
        "ppo_modular/policy.py", "ppo_modular/value.py", "ppo_single.py"]
    assert "numpy_mlp(next_obs, actor_np)" in changed["ppo_single.py"]
    assert "self.net.numpy_forward(obs)" in changed["ppo_modular/value.py"]


@pytest.fixture
def variant_modules(benchmark_script, tmp_path):
    """(ppo_single, ppo_modular.policy) of the NumPy-acting variant, imported from a copy."""
    bench = benchmark_script("silentbug_ppo")
    parent = str(bench._write_package(bench.variant_files(NUMPY_ACTING), tmp_path))

    def forget() -> None:
        for mod in [m for m in sys.modules if m == "substrates" or m.startswith("substrates.")]:
            del sys.modules[mod]

    forget()
    sys.path.insert(0, parent)
    try:
        yield (importlib.import_module("substrates.ppo_single"),
               importlib.import_module("substrates.ppo_modular.policy"))
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
    # not the same bits: NumPy's tanh and BLAS round differently from Torch's, which is why the
    # variant changes every trajectory and would need the bank recalibrated
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
    data = {"implementations": {
        "baseline (CleanRL-style)": {"cpu_s": 24.0, "speedup_cpu": 1.0, "runs": [run]},
        "ppo_single+numpy_acting_preloaded": {
            "cpu_s": 6.0, "speedup_cpu": 4.0, "speedup_cpu_vs_preloaded_baseline": 3.0,
            "same_scores_as_pristine": False, "runs": [run, {"cpu_s": 6.0, "score": 200.0}]}}}
    table = get_view("silentbug_ppo_speed")(data).splitlines()
    assert table[2] == "| baseline (CleanRL-style) | 24.0 | 1.00x | - | 179.4 | - |"
    assert table[3] == ("| ppo_single+numpy_acting_preloaded | 6.0 | 4.00x | 3.00x | 179.4, 200.0 "
                        "| no |")
