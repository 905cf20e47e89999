"""Skills as reusable subtrees with predicates: what a skill needs (preconditions), what it makes true
(effects), and the function that builds its subtree. Backchaining (behaviors/backchaining.py) composes a
goal's tree from them.

Predicates are written with the skill's parameters as arguments, ``Open(part)``; the composition grounds
them on the goal's entities (``part`` -> ``drawer``). Built subtrees (for the single-arm mobile robot, the
target part named by the ``target_link`` / ``target_handle`` masks):

    open(part)    grasp the handle and pull until the part stops following (today's OpenCabinetDrawer tree
                  without its final hold), then remember the opening as the part's travel: Open(part)
    close(part)   grasp the handle and push the part shut, slowing as it closes, with the checks "handle in
                  gripper?" and "making progress?": Closed(part)

Declared only, with no subtree yet (the long-horizon tasks of issue 19 need them on the mobile robot): pick,
place on, place inside, release. A goal whose composition needs one of them is refused by
:func:`~handleit.behaviors.backchaining.tree_for_goal` unless it is asked for a placeholder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import py_trees
from py_trees.common import ParallelPolicy, Status

from handleit.predicates import Predicate
from handleit.types import Observation

from .cabinet_nodes import PULL_RAMP_STEPS, HandleInGripper, MakingProgress, PullDrawer
from .cabinet_trees import MAX_ATTEMPTS, grasp_steps
from .common import Skill, Tools
from .predicate_nodes import RecordTravel

# The parts the built subtrees can act on: the entities the target masks name (predicate_nodes.DEFAULT_ENTITY_MASKS).
TARGET_PART = "drawer"
# The push slows with the part's opening as if the closed pose were this much farther (m): the drawer meets
# its stop still moving (gain x 2 cm = 6 cm/s), instead of creeping up to it.
PUSH_PAST_CLOSED_M = 0.02


@dataclass(frozen=True)
class SkillSpec:
    """A skill: its name, parameters, preconditions and effects (predicates over the parameters), and
    ``build(tools, **binding) -> subtree`` (None: declared, not built yet).

    (``behaviors.common.Skill`` is the blackboard node base class; this is a skill in the planning sense.)
    """

    name: str
    parameters: tuple[str, ...]
    preconditions: tuple[Predicate, ...]
    effects: tuple[Predicate, ...]
    build: Callable[..., py_trees.behaviour.Behaviour] | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.effects:
            raise ValueError(f"skill {self.name!r} has no effects: nothing could ever choose it")

    def match(self, goal: Predicate) -> dict[str, str] | None:
        """The binding of this skill's parameters under which one of its effects is ``goal``, or None. An
        effect that leaves a parameter unbound does not make the skill an achiever of it."""
        for effect in self.effects:
            if effect.name != goal.name or effect.negated != goal.negated:
                continue
            binding: dict[str, str] = {}
            for template, value in zip(effect.args, goal.args, strict=True):
                if template in self.parameters:
                    if binding.setdefault(template, value) != value:
                        break
                elif template != value:  # a constant entity in the effect
                    break
            else:
                if set(binding) == set(self.parameters):
                    return binding
        return None

    def ground(self, predicates: tuple[Predicate, ...], binding: dict[str, str]) -> tuple[Predicate, ...]:
        """``predicates`` with the parameters replaced by the entities of ``binding``."""
        return tuple(Predicate(p.name, tuple(binding.get(a, a) for a in p.args), p.negated) for p in predicates)

    def signature(self, binding: dict[str, str]) -> str:
        """``open(drawer)``."""
        return f"{self.name}({', '.join(binding[p] for p in self.parameters)})"


def _check_target(skill: str, part: str) -> None:
    if part != TARGET_PART:
        raise ValueError(f"the {skill} skill acts on the target part the masks name ({TARGET_PART!r}); got {part!r}")


def open_part_subtree(tools: Tools, part: str) -> py_trees.behaviour.Behaviour:
    """Grasp the handle and pull the part open to its end stop (the drawer tree's attempts), then record
    its travel. FAILURE after ``MAX_ATTEMPTS`` failed attempts."""
    _check_target("open", part)
    pull_drawer = PullDrawer("pull drawer", tools)
    pull = py_trees.composites.Parallel(
        "pull open", policy=ParallelPolicy.SuccessOnSelected(children=[pull_drawer]),
        children=[pull_drawer, HandleInGripper("handle in gripper?", tools), MakingProgress("making progress?", tools)],
    )
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        *grasp_steps(tools), pull, RecordTravel(f"remember travel of {part}", tools, part)])
    return py_trees.decorators.Retry("grasp and pull", attempt, MAX_ATTEMPTS)


class PushDrawer(Skill):
    """Drive the base toward the cabinet, against the part's outward normal, arm and gripper locked, at a
    speed that falls with the part's opening (``gain_per_s`` times it plus ``PUSH_PAST_CLOSED_M``, within
    ``min_speed_mps`` and ``max_speed_mps``), so that the drawer meets its closed stop gently. SUCCESS when
    the part stops moving after having moved at least ``min_travel_m`` (its stop, or blocked: the condition
    above says which)."""

    def __init__(self, name: str, tools: Tools, part: str, max_speed_mps: float = 0.5, min_speed_mps: float = 0.05,
                 gain_per_s: float = 3.0, stall_steps: int = 6, stall_m: float = 0.002, min_travel_m: float = 0.01):
        super().__init__(name, tools, reads=("observation", "front_normal_W", "open_state", "part_opening_m"),
                         writes=("command",))
        self.part = part
        self.max_speed_mps, self.min_speed_mps, self.gain_per_s = max_speed_mps, min_speed_mps, gain_per_s
        self.stall_steps, self.stall_m, self.min_travel_m = stall_steps, stall_m, min_travel_m

    def initialise(self):
        self.q_hold, self.history = None, []

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        normal = np.array([self.bb.front_normal_W[0], self.bb.front_normal_W[1], 0.0])
        outward = normal / np.linalg.norm(normal)
        displacement = self.bb.open_state.state.displacement_m if self.bb.open_state else 0.0
        self.history.append(displacement)
        opening = (self.bb.part_opening_m or {}).get(self.part)
        self.feedback_message = f"pushed {(self.history[0] - displacement) * 100:.1f} cm" + (
            "" if opening is None else f", {opening * 100:.1f} cm open")
        if len(self.history) > self.stall_steps and self.history[0] - displacement > self.min_travel_m:
            if abs(displacement - self.history[-1 - self.stall_steps]) < self.stall_m:
                return Status.SUCCESS
        speed = self.max_speed_mps if opening is None else float(
            np.clip(self.gain_per_s * (opening + PUSH_PAST_CLOSED_M), self.min_speed_mps, self.max_speed_mps))
        # As the pull: ramp up, a jerk would tear the handle out of the fingers.
        speed *= min(1.0, len(self.history) / PULL_RAMP_STEPS)
        qvel = self.tools.pid.step(self.q_hold, obs.qpos)
        qvel[self.tools.base_index[:2]] = -speed * outward[:2]
        self.send(qvel, "close")
        return Status.RUNNING


class MakingClosingProgress(Skill):
    """Check: the part closes by at least ``min_closing_m`` (or half its opening at the start, if less)
    within ``within_steps`` of the start of a push."""

    def __init__(self, name: str, tools: Tools, part: str, within_steps: int = 30, min_closing_m: float = 0.02):
        super().__init__(name, tools, reads=("open_state", "part_opening_m"))
        self.part, self.within_steps, self.min_closing_m = part, within_steps, min_closing_m

    def initialise(self):
        self.ticks, self.start, self.needed = 0, None, self.min_closing_m

    def update(self):
        state = self.bb.open_state
        if state is None:
            return Status.RUNNING
        if self.start is None:
            self.start = state.state.displacement_m
            opening = (self.bb.part_opening_m or {}).get(self.part)
            if opening is not None:
                self.needed = min(self.min_closing_m, 0.5 * max(opening, 0.0))
        self.ticks += 1
        moved = self.start - state.state.displacement_m
        self.feedback_message = f"closed {moved * 100:.1f} cm in {self.ticks} steps"
        if self.ticks >= self.within_steps and moved < self.needed:
            return self.fail(f"no progress: {self.feedback_message}")
        return Status.RUNNING


def close_part_subtree(tools: Tools, part: str) -> py_trees.behaviour.Behaviour:
    """Grasp the handle (as the open skill does) and push the part shut, with the checks "handle in
    gripper?" and "making progress?". FAILURE after ``MAX_ATTEMPTS`` failed attempts."""
    _check_target("close", part)
    push_drawer = PushDrawer("push drawer", tools, part)
    push = py_trees.composites.Parallel(
        "push closed", policy=ParallelPolicy.SuccessOnSelected(children=[push_drawer]),
        children=[push_drawer, HandleInGripper("handle in gripper?", tools),
                  MakingClosingProgress("making progress?", tools, part)],
    )
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[*grasp_steps(tools), push])
    return py_trees.decorators.Retry("grasp and push", attempt, MAX_ATTEMPTS)


def _p(text: str, *args: str, negated: bool = False) -> Predicate:
    return Predicate(text, tuple(args), negated)


OPEN = SkillSpec("open", ("part",), (), (_p("Open", "part"),), open_part_subtree,
                 "grasp the handle, pull to the end stop")
CLOSE = SkillSpec("close", ("part",), (), (_p("Closed", "part"),), close_part_subtree,
                  "grasp the handle, push shut")
# Declared for the long-horizon tasks; no subtree yet on the mobile robot.
RELEASE = SkillSpec("release", (), (), (_p("HandEmpty"),), None, "open the gripper, back away")
PICK = SkillSpec("pick", ("object",), (_p("HandEmpty"),), (_p("Grasped", "object"),), None,
                 "grasp the object and lift it")
PLACE_ON = SkillSpec("place on", ("object", "surface"), (_p("Grasped", "object"),),
                     (_p("OnTopOf", "object", "surface"),), None, "carry the held object over the surface, let go")
# Open first: the open skill grasps the handle, so the object is picked after it (a precondition the
# action undoes would be re-achieved for ever).
PLACE_INSIDE = SkillSpec("place inside", ("object", "part"), (_p("Open", "part"), _p("Grasped", "object")),
                         (_p("InsideOf", "object", "part"),), None, "carry the held object into the open part, let go")

DRAWER_SKILLS: tuple[SkillSpec, ...] = (OPEN, CLOSE)
MOBILE_SKILLS: tuple[SkillSpec, ...] = (OPEN, CLOSE, RELEASE, PICK, PLACE_ON, PLACE_INSIDE)
