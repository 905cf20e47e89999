"""TidyIntoDrawer: put the object from the table into the drawer, and close the drawer.

Habitat 2.0's TidyHouse-style rearrangement ("Habitat 2.0: Training Home Assistants to Rearrange their
Habitat", arXiv 2106.14405, Sec. 5) into a closed container, with real grasping, on the single-arm mobile
Panda. The chain a solver runs: drive to the cabinet, open the drawer, drive to the table, pick the object,
drive back, place it inside the drawer, close the drawer (or pick first and open with the object in hand).

Initial state (iGibson 2.0 style, arXiv 2108.03272): ``OnTopOf(object, table) & Closed(drawer) & HandEmpty()``.
Goal: ``InsideOf(object, drawer) & Closed(drawer)``, with the scene static. The scene, its sampling, the
predicates' ground truth and the observations: ``envs/long_horizon.py``.
"""

from __future__ import annotations

from .long_horizon import LongHorizonEnv


class TidyIntoDrawerEnv(LongHorizonEnv):
    goal_text = "InsideOf(object, drawer) & Closed(drawer)"
    default_init = "OnTopOf(object, table) & Closed(drawer) & HandEmpty()"
