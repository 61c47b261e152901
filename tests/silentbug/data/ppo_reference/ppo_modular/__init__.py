"""PPO split by concern: config, policy, value, rollout, advantage, update, train.

The same algorithm as ``ppo_single`` with different structure and names, so that a bug has to be
found by reasoning across modules. Every stability mechanism has a switch in ``Config`` so the
ablation can remove it on the clean code before a bug that omits it is accepted.
Entry point: ``python -m substrates.ppo_modular.train --config c.json --run-dir out/``.
"""
