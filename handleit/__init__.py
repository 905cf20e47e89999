"""handleit: a sense-plan-act manipulation toolkit.

Layers (each importable as ``handleit.<layer>``), bottom to top: this folder, the shared types and the robot
interface (``types.py``) with the helpers every layer may use (``poses.py``, ``robot_plant.py``,
``torch_threads.py``); ``perception``, ``planning`` and ``control``; ``behaviors``; ``baselines``; and
``harness`` (evaluation, solvers, command line, adapters, data generation, robot bridges). ``envs`` (bundled
SAPIEN environments) stands beside the layers and imports only the shared types. README, "Architecture".
"""

__version__ = "0.1.0"
