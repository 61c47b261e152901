"""The sped-up PPO substrates give the same numbers, to the bit, as the code the bank was
calibrated on.

``data/ppo_reference/`` is a frozen copy of the substrates package as it was before the speed work
(commit 0399a7c: torch.optim.Adam(fused=True), torch.use_deterministic_algorithms). Every bank
patch and every calibrated score assumes those numbers per seed, so the current package must
reproduce them exactly: same episode returns, same losses, KL, clip fractions and gradient norms.
A change that moves even the last bit of one parameter shows up in these metrics.
"""

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from verigap.runs import read_jsonl
from verigap.silentbug.substrate import substrate_root
from verigap.silentbug.substrates import ppo_single
from verigap.silentbug.substrates.ppo_modular import train as modular_train
from verigap.silentbug.substrates.ppo_modular import update as modular_update

REFERENCE = Path(__file__).parent / "data" / "ppo_reference"

CASES = {  # name -> (entry, small config); the step counts keep each run under a second
    "cartpole_single": ("ppo_single", {"seed": 7, "total_timesteps": 2048}),
    "cartpole_modular": ("ppo_modular.train", {"seed": 8, "total_timesteps": 2048}),
    "acrobot_modular": (
        "ppo_modular.train",
        {
            "seed": 9,
            "env_id": "Acrobot-v1",
            "total_timesteps": 2048,
            "n_workers": 4,
            "horizon": 128,
            "lr": 1e-3,
            "reward_scale": 0.01,
        },
    ),  # 512 steps: time-limit cuts
}
CURRENT = {"ppo_single": ppo_single, "ppo_modular.train": modular_train}


def _reference(entry: str):
    """The frozen package, imported under its own name so it cannot shadow the real one."""
    name = "ppo_reference_substrates"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, REFERENCE / "__init__.py", submodule_search_locations=[str(REFERENCE)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return importlib.import_module(f"{name}.{entry}")


def _metrics(module, config: dict, run_dir: Path) -> list[dict]:
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    module.main(["--config", str(run_dir / "config.json"), "--run-dir", str(run_dir / "out")])
    records = read_jsonl(run_dir / "out" / "metrics.jsonl")
    return [{k: v for k, v in r.items() if k != "sps"} for r in records]  # sps is wall time


@pytest.mark.parametrize("case", list(CASES))
def test_current_substrates_reproduce_the_calibrated_numbers_bit_for_bit(tmp_path, case):
    entry, config = CASES[case]
    ours = _metrics(CURRENT[entry], config, tmp_path / "ours")
    reference = _metrics(_reference(entry), config, tmp_path / "reference")
    assert sum(r["kind"] == "iteration" for r in ours) == 4
    assert any(r["kind"] == "episode" for r in ours)
    assert ours == reference


class _TextbookAdam(modular_update.Adam):
    """Adam written with torch's single-tensor ops (torch.optim.Adam(foreach=False,
    fused=False)): mathematically the same update, rounded differently."""

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        lr = self.param_groups[0]["lr"]
        for p, m, v, t in zip(
            self.params, self.first_moment, self.second_moment, self.step_counts, strict=True
        ):
            t += 1
            m.lerp_(p.grad, 1 - beta1)
            v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (v.sqrt() / (1 - beta2 ** t.item()) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t.item()))


def test_the_comparison_sees_a_last_bit_change_in_the_optimizer(tmp_path, monkeypatch):
    """Control: the textbook Adam differs from the fused kernel only in rounding, and that
    already changes the logged numbers, so the comparison above is strict enough."""
    entry, config = CASES["cartpole_modular"]
    reference = _metrics(_reference(entry), config, tmp_path / "reference")
    monkeypatch.setattr(modular_train, "Adam", _TextbookAdam)
    textbook = _metrics(modular_train, config, tmp_path / "textbook")
    assert [r["kind"] for r in textbook] == [r["kind"] for r in reference]
    assert textbook != reference


def test_a_training_run_does_not_import_the_compiler_stack(tmp_path):
    """torch.optim and torch.use_deterministic_algorithms import torch._dynamo/_inductor, about
    2 CPU-s of every run; the substrates avoid both (checked in a fresh interpreter, as the
    runner starts them)."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"total_timesteps": 512}))
    code = (
        "import importlib, sys; sys.path.insert(0, sys.argv[1]); "
        "m = importlib.import_module('substrates.' + sys.argv[2]); m.main(sys.argv[3:]); "
        "print(sorted(k for k in sys.modules if k.startswith(('torch._dynamo', "
        "'torch._inductor'))))"
    )
    for entry in CURRENT:
        out = subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                code,
                str(substrate_root().parent),
                entry,
                "--config",
                str(config),
                "--run-dir",
                str(tmp_path / entry),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip().splitlines()[-1] == "[]", (entry, out.stdout[-500:])
