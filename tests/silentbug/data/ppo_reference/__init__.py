"""PPO substrates that the bug bank patches.

Everything under this package is copied, as is, into each calibration workspace and run there
in a separate ``python -I`` process, so modules here import only the standard library, NumPy,
PyTorch and each other (relative imports), never the rest of verigap.

- ``ppo_single``: PPO in one readable file, CleanRL style.
- ``ppo_modular``: the same algorithm split into config, policy, value, rollout, advantage,
  update and train modules, with switches for the stability machinery the ablation removes.
- ``envs``: hand-vectorized CartPole-v1 and Acrobot-v1.
"""
