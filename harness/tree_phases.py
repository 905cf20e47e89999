"""Where an episode's steps go: the behavior tree's working tip per step, run-length coded.

Both harnesses keep it, the lockstep one (``diagnostics["phases"]``) and the real-time one
(``diagnostics["realtime"]["phases"]``), so that the same episode can be compared step by step across them
(``benchmarks/realtime_phases.py``). A phase is ``[tip node name, clock s at its first step, steps]``; the name
gets " (planning)" while the node held still for a background plan and " (settling)" while a hand-eye node
waited for a cloud taken at rest (real time only, ``behaviors/background.py``).
"""

from __future__ import annotations

import py_trees
from py_trees.common import Status

from handleit.behaviors.background import HOLD_STILL_FEEDBACK, SETTLE_FEEDBACK


def working_tip(node: py_trees.behaviour.Behaviour) -> py_trees.behaviour.Behaviour | None:
    """The tree's tip as py_trees finds it (the deepest node that ran), except in a Parallel: there the tip of its
    first running child, the work its checks stand beside (py_trees takes the last child ticked, a check: the
    whole of a push or a carry would read as "backrest in grippers?"), passing over a plan that runs beside a
    move without holding the robot still (``holds_still`` False: the step is the move's)."""
    if isinstance(node, py_trees.composites.Parallel):
        running = [c for c in node.children if c.status == Status.RUNNING and getattr(c, "holds_still", True)]
        return working_tip(running[0]) if running else node.tip()
    if isinstance(node, py_trees.composites.Composite):
        return working_tip(node.current_child) if node.current_child is not None else node.tip()
    if isinstance(node, py_trees.decorators.Decorator):
        return working_tip(node.decorated) if node.decorated.status != Status.INVALID else node.tip()
    return node.tip()


class PhaseTracker:
    """The tip of a solver's tree after each of its steps, run-length coded. A solver without a ``tree``
    (a learned policy, a scripted baseline) leaves no phases."""

    def __init__(self):
        self._phases: list[list] = []

    def track(self, solver, time_s: float) -> None:
        tree = getattr(solver, "tree", None)
        tip = working_tip(tree.root) if tree is not None else None
        if tip is None:
            return
        label = tip.name
        feedback = getattr(tip, "feedback_message", "") or ""
        if feedback.startswith(SETTLE_FEEDBACK):
            label += " (settling)"
        elif feedback.startswith(HOLD_STILL_FEEDBACK):
            label += " (planning)"
        if self._phases and self._phases[-1][0] == label:
            self._phases[-1][2] += 1
        else:
            self._phases.append([label, round(float(time_s), 3), 1])

    def phases(self) -> list[list]:
        """[tip node, clock s at its first step, steps], in order."""
        return [list(p) for p in self._phases]
