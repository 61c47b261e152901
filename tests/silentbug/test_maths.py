"""The PPO maths of both substrates against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from verigap.silentbug.substrates import ppo_single
from verigap.silentbug.substrates.ppo_modular import advantage, policy, update, value

REWARDS = np.array([[1.0], [1.0], [1.0]], dtype=np.float32)
VALUES = np.array([[0.5], [0.4], [0.3]], dtype=np.float32)
ENDED = np.array([[0.0], [1.0], [0.0]], dtype=np.float32)
LAST = np.array([0.2], dtype=np.float32)
# by hand, gamma 0.9, lambda 0.8: delta_2 = 1 + .9*.2 - .3 = .88; step 1 ended: delta_1 = 1 - .4
# = .6 (no trace past it); delta_0 = 1 + .9*.4 - .5 = .86, A_0 = .86 + .72*.6 = 1.292
EXPECTED_ADV = np.array([[1.292], [0.6], [0.88]])


def test_gae_single_file_by_hand():
    adv, ret = ppo_single.compute_gae(REWARDS, VALUES, ENDED, LAST, 0.9, 0.8)
    np.testing.assert_allclose(adv, EXPECTED_ADV, rtol=1e-6)
    np.testing.assert_allclose(ret, EXPECTED_ADV + VALUES, rtol=1e-6)


def test_gae_modular_by_hand_and_equal_to_single_file():
    adv = advantage.gae_advantages(REWARDS, VALUES, ENDED, LAST, 0.9, 0.8)
    np.testing.assert_allclose(adv, EXPECTED_ADV, rtol=1e-6)
    np.testing.assert_allclose(
        advantage.value_targets(adv, VALUES), EXPECTED_ADV + VALUES, rtol=1e-6
    )
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(2, 16, 3)).astype(np.float32)
    d = (rng.random((16, 3)) < 0.2).astype(np.float32)
    last = rng.normal(size=3).astype(np.float32)
    np.testing.assert_allclose(
        advantage.gae_advantages(r, v, d, last, 0.99, 0.95),
        ppo_single.compute_gae(r, v, d, last, 0.99, 0.95)[0],
        rtol=1e-6,
    )


def test_gae_with_lambda_one_is_discounted_return_minus_value():
    r = np.array([[1.0], [2.0], [3.0]], dtype=np.float32)
    v = np.zeros((3, 1), np.float32)
    adv = advantage.gae_advantages(r, v, np.zeros((3, 1), np.float32), np.array([0.0]), 0.5, 1.0)
    np.testing.assert_allclose(adv[:, 0], [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0])


@pytest.mark.parametrize("kl", [ppo_single.approx_kl_estimators, update.kl_estimates])
def test_kl_estimators_by_hand(kl):
    old, new = kl(torch.tensor([0.0, math.log(2.0)]))
    assert old == pytest.approx(-math.log(2.0) / 2)
    assert new == pytest.approx((1 - math.log(2.0)) / 2)
    assert kl(torch.zeros(5)) == (0.0, 0.0)


@pytest.mark.parametrize("ev", [ppo_single.explained_variance, value.explained_variance])
def test_explained_variance(ev):
    y = np.array([1.0, 2.0, 3.0])
    assert ev(y, y) == 1.0
    assert ev(np.full(3, 2.0), y) == pytest.approx(0.0)
    assert ev(np.zeros(3), y) == pytest.approx(1 - np.var(y) / np.var(y))
    assert math.isnan(ev(y, np.ones(3)))


def test_clipped_surrogate_by_hand():
    # A=+1, r=1.5: max(-1.5, -1.2) = -1.2;  A=-1, r=0.5: max(0.5, 0.8) = 0.8;  mean -0.2
    loss = update.clipped_surrogate(torch.tensor([1.0, -1.0]), torch.tensor([1.5, 0.5]), 0.2)
    assert loss.item() == pytest.approx(-0.2)


def test_value_loss_by_hand():
    p, t, o = torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([0.0])
    assert update.value_loss(p, t, o, clip=False, eps=0.2).item() == 0.0
    # clipped prediction 0 + 0.2 is still 0.8 from the target: 0.5 * 0.64
    assert update.value_loss(p, t, o, clip=True, eps=0.2).item() == pytest.approx(0.32)


def test_categorical_logprob_and_entropy():
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])
    for fn in (ppo_single.categorical_logprob_entropy, policy.log_probs_and_entropy):
        logp, ent = fn(logits, torch.tensor([0, 0]))
        np.testing.assert_allclose(logp.numpy(), [math.log(0.5), math.log(0.75)], rtol=1e-6)
        h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
        np.testing.assert_allclose(ent.numpy(), [math.log(2.0), h], rtol=1e-6)


@pytest.mark.parametrize("sample", [ppo_single.sample_categorical, policy.draw_actions])
def test_sampling_matches_probabilities_and_reports_log_prob(sample):
    logits = np.tile(np.array([[math.log(3.0), 0.0, -30.0]], np.float32), (20000, 1))
    actions, logp = sample(logits, np.random.default_rng(0))
    assert abs((actions == 0).mean() - 0.75) < 0.01
    assert (actions != 2).all()
    np.testing.assert_allclose(logp[actions == 0], math.log(0.75), rtol=1e-5)


def test_standardize():
    x = advantage.standardize(np.array([1.0, 2.0, 3.0]))
    assert x.mean() == pytest.approx(0.0) and x.std() == pytest.approx(1.0, rel=1e-6)
