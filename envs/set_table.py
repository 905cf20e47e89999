"""SetTable: take the object out of the closed drawer, put it on the table, and close the drawer.

Habitat 2.0's SetTable ("Habitat 2.0: Training Home Assistants to Rearrange their Habitat", arXiv 2106.14405,
Sec. 5: open a drawer, take an object out, place it on a table, close the drawer) without its "abstracted
grasping", on the single-arm mobile Panda. Habitat 2.0 left sense-plan-act out of this task; handleit's trees
open unknown drawers from point clouds.

Initial state (iGibson 2.0 style, arXiv 2108.03272): ``InsideOf(object, drawer) & Closed(drawer) &
HandEmpty()``; the object lies in the front part of the drawer's box, where the gripper reaches it from above
once the drawer is open. Goal: ``OnTopOf(object, table) & Closed(drawer)``, with the scene static. The scene,
its sampling, the predicates' ground truth and the observations: ``envs/long_horizon.py``.
"""

from __future__ import annotations

from .long_horizon import LongHorizonEnv


class SetTableEnv(LongHorizonEnv):
    goal_text = "OnTopOf(object, table) & Closed(drawer)"
    default_init = "InsideOf(object, drawer) & Closed(drawer) & HandEmpty()"
