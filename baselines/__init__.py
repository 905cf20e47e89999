"""Learned baselines trained on demonstrations of the behavior trees, run by the same harness as the trees.

- ``demo_files.py``: the demonstration files (ManiSkill's trajectory layout, HDF5 + JSON) and the observation
  layout they store, read back as arrays. The harness records them (``handleit demos``,
  ``harness/demos.py``) and converts them between controllers (``handleit convert-demos``,
  ``harness/convert_demos.py``, ManiSkill2 (arXiv 2302.04659) Sec. 2.2).
- ``features.py``: what a policy sees (points in the base or tool frame, colours, masks; proprioception, goal).
- ``networks.py``: PointNet and PointNet + transformer encoders (ManiSkill-Learn), actor and twin critic,
  named configs (``cpu_small``, ``gpu_large``, ...).
- ``dataset.py``: demonstration files as training arrays; ``training.py``: batches, seeding, loss logs.
- ``bc.py``: behavior cloning; ``td3bc.py``: TD3+BC (Fujimoto & Gu 2021); ``checkpoint.py``: checkpoints.
- ``policy.py``: ``PolicySolver``, a checkpoint as a solver (``handleit eval --solver bc:ckpt.pt``).

The comparison table (``handleit compare``, ``harness/compare.py``) and the ``handleit train`` command
(``harness/baseline_commands.py``) run through the harness, above this layer.
"""
