"""handleit: a sense-plan-act manipulation toolkit.

Layers (each importable as ``handleit.<layer>``): ``perception``, ``planning``, ``control``,
``behaviors``, ``envs`` (bundled SAPIEN environments) and ``baselines``. This folder holds what belongs
to no layer: the command line and set-up checks.
"""

__version__ = "0.1.0"
