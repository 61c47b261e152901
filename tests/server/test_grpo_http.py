"""GRPO trained through the HTTP API gives the in-process trainer's numbers, step for step."""

from __future__ import annotations

import numpy as np
import pytest

from verigap.errors import ConfigError
from verigap.patchworld.grpo import GRPOConfig
from verigap.patchworld.policy import MLP
from verigap.rewards import Audit, DeletionPenalty
from verigap.server import BackgroundServer, Client, ServerConfig
from verigap.server.grpo_http import HTTPGRPOTrainer, compare

# a random start and a deletion penalty: the rewards vary within groups from the first step,
# so the updates are not zero and a mismatch anywhere would show
CONFIG = GRPOConfig(
    k=3, steps=4, programs=8, group=8, lr=5e-2, reward=DeletionPenalty(per_deletion=0.5)
)


@pytest.mark.parametrize("reveal", [False, True])
def test_http_training_equals_in_process(tmp_path, reveal):
    start = MLP.init(np.random.default_rng(0), hidden=16)
    with (
        BackgroundServer(ServerConfig(root=tmp_path, reveal_truth=reveal)) as url,
        Client(url) as c,
        c.session("patchworld", k=3, reward="deletion:0.5") as s,
    ):
        res = compare(CONFIG, start, s)
        shifted = HTTPGRPOTrainer(CONFIG.model_copy(update={"seed": 1}), start, s)
        other = shifted.step(0)
    assert res["max_param_abs_diff"] == 0.0
    for row in res["steps"]:
        for key, value in row["http"].items():
            assert value == row["in_process"][key], (row["step"], key)
        assert ("train_correct" in row["http"]) is reveal  # the truth only when revealed
    assert res["steps"][-1]["http"]["kl"] > 0  # the policy moved
    assert other != res["steps"][0]["http"]  # control: other programs, other numbers


def test_a_scheme_that_draws_randomness_is_refused():
    with pytest.raises(ConfigError, match="visible, oracle or deletion"):
        HTTPGRPOTrainer(
            GRPOConfig(reward=Audit(rate=0.1)), MLP.init(np.random.default_rng(0)), session=None
        )  # type: ignore[arg-type]
