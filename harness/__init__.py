"""The harness: the top layer, which runs the layers below on robots and records what they do.

- ``evaluation.py`` (episodes, records, tables), ``executor.py`` (the one episode executor of eval, compare,
  demos and grasp-data: this process, supervised local processes, or Ray actors; ``ray_loopback.py``: a Ray
  cluster of several nodes on one machine's loopback addresses, for tests and benchmarks), ``solvers.py`` (solvers by
  name), ``cli.py`` (the ``handleit`` command line), ``compare.py`` and ``baseline_commands.py`` (the learned
  baselines' commands);
- robots: ``sim_robot.py`` (the robot interface over a bundled env), ``ms3_adapter.py`` (over ManiSkill3),
  ``realtime_runner.py`` and ``realtime_sim.py`` (ticking on a clock; a simulated robot that does not wait),
  the ROS bridge (``ros_messages.py``, ``ros_robot.py``, ``ros_sim_server.py``, ``ros_commands.py``,
  ``ros_env.py``);
- data generation: ``demos.py`` and ``convert_demos.py`` (demonstrations for the baselines), ``grasp_data.py``
  (grasp trials for the learned scorer); ``render_check.py`` (a set-up check).

Nothing below imports this package (tests/test_import_layers.py). Importing it imports nothing: its modules
are imported by name.
"""
