"""Learned baselines trained on demonstrations of the behavior trees, run by the same harness as the trees.

- ``demos.py``: record the trees' successful episodes to HDF5 (ManiSkill's trajectory layout); ``convert.py``:
  convert demonstrations between controllers (papers/000 Sec. 2.2).
- ``features.py``: what a policy sees (points in the base or tool frame, colours, masks; proprioception, goal).
- ``networks.py``: PointNet and PointNet + transformer encoders (ManiSkill-Learn), actor and twin critic,
  named configs (``cpu_small``, ``gpu_large``, ...).
- ``dataset.py``: demonstration files as training arrays; ``training.py``: batches, seeding, loss logs.
- ``bc.py``: behavior cloning; ``td3bc.py``: TD3+BC (Fujimoto & Gu 2021); ``checkpoint.py``: checkpoints.
- ``policy.py``: ``PolicySolver``, a checkpoint as a solver (``handleit eval --solver bc:ckpt.pt``).
- ``compare.py``: the comparison table (markdown, CSV, bar chart); ``commands.py``: ``handleit train`` and
  ``handleit compare``.
"""
