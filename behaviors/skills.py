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

    release       open the gripper and back the hand off along its approach (the arm alone): HandEmpty()
    pick(object)  the mobile pick subtree (behaviors/mobile_pick_trees.py): drive to the object, whole-body IK
                  grasp from above, close, lift; needs Open(drawer) (the object may lie in it) and HandEmpty():
                  Grasped(object)
    place inside(object, part)   carry the held object to the open part, lower it in, let go, retreat; needs
                  Open(part) and Grasped(object): InsideOf(object, part)
    place on(object, surface)    the same onto the table: OnTopOf(object, surface)

Open and close are preemptible: their effect's condition stops them as soon as it holds (a pull stopped at
Open). Pick, place and release run to their end once started (``preemptible=False``): Grasped holds from the
moment the fingers close, before the lift the place needs, and a place half done is no hand-off. Every
skill's preconditions are checked when it starts, not while it runs: a skill may undo its own precondition
(the pick closes the hand that HandEmpty wanted empty); behaviors/backchaining.py.

A skill whose ``build`` is None is declared only; a goal whose composition needs one is refused by
:func:`~handleit.behaviors.backchaining.tree_for_goal` unless it is asked for a placeholder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import py_trees
from py_trees.common import ParallelPolicy, Status

from handleit.perception.grasp_predictors import get_grasp_predictor
from handleit.predicates import Predicate
from handleit.types import Observation

from .cabinet_front_nodes import GoToCabinetFront
from .cabinet_nodes import PULL_RAMP_STEPS, HandleInGripper, MakingProgress, PullDrawer
from .cabinet_trees import MAX_ATTEMPTS, grasp_steps
from .cloud_stall import CloudStallTracker
from .common import OperateGripper, Skill, StepTimeout, Tools, ik_base_held
from .mobile_pick_nodes import MOBILE_PICK_BLACKBOARD, MoveJoints, PlanTuck
from .mobile_pick_trees import create_pick_tree, create_place_tree
from .pick_nodes import seconds_to_steps
from .pick_trees import PICK_BLACKBOARD
from .predicate_nodes import RecordTravel

# The parts the built subtrees can act on: the entities the target masks name (predicate_nodes.DEFAULT_ENTITY_MASKS).
TARGET_PART = "drawer"
OBJECT, SURFACE = "object", "table"  # the object the pick and place skills move, the surface they put it on
OBJECT_GRASP_PREDICTOR = "antipodal_6dof"  # the pick's grasps (the solver's own predictor grasps handles)
BACK_OFF_M = 0.10  # the release backs the hand off this far along its approach
# ... by the base where the arm alone cannot: the approach this much horizontal at least (its horizontal part's norm)
MIN_HORIZONTAL_BACK_OFF = 0.5
# The open and close skills look for the handle this long (steps) once in front of the cabinet (the cabinet trees'
# 150 steps assume a start 1.6-1.8 m in front; the skills' first go there, 1.4 m from the handle).
SKILL_HANDLE_TIMEOUT_STEPS = 400
# Going to the cabinet's front from behind it: about 6 m around the cabinet and the table at 0.6 m/s, turns.
FRONT_TIMEOUT_STEPS = 2000
# The blackboard keys of the pick and place subtrees (a goal solver's blackboard holds them too).
PICK_PLACE_BLACKBOARD = {**PICK_BLACKBOARD, **MOBILE_PICK_BLACKBOARD, "q_back_off": None}
# Forgotten when a pick starts (again): what the last pick saw, planned and held.
PICK_KEYS = {"object": None, "support_z": None, "grasped": False, "clamped_gap_m": None, "held_points_G": None,
             "target_at_grasp": None, "failed_grasps": [], "look_interior": None, "grasp_opening": None}
# Forgotten when a place starts (again): the region and the plan of the last place.
PLACE_KEYS = {"place_region": None, "place_error": None, "place_goal_W": None}
# Failed runs of one skill per episode before the composition gives it up (behaviors/backchaining.py's
# "<skill> attempts left?"): the open and close skills retry three grasps within each run, and TidyIntoDrawer's
# successful test episodes needed at most two runs of a skill (seed 1's place, 2 failed).
DEFAULT_MAX_ATTEMPTS = 3
# The push slows with the part's opening as if the closed pose were this much farther (m): the drawer meets
# its stop still moving (gain x 2 cm = 6 cm/s), instead of creeping up to it.
PUSH_PAST_CLOSED_M = 0.02
# The open skill's pull (m/s): a drawer may hold something. At the drawer tree's 1 m/s the drawer met its end stop
# so hard that the object in it slid 7.5 cm, against the front wall, where the base's cameras no longer saw it
# over that wall (SetTable test seed 1, traced on simulator state).
SKILL_PULL_SPEED_MPS = 0.35


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
    # True: the effect's condition stops the skill as soon as it holds; False: once started, it runs to its end.
    preemptible: bool = True
    # Failed runs allowed per episode (a run that ends without its effects believed counts as failed).
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if not self.effects:
            raise ValueError(f"skill {self.name!r} has no effects: nothing could ever choose it")
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ValueError(f"skill {self.name!r}: max_attempts must be an integer >= 1, got {self.max_attempts!r}")

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


def _front_steps(tools: Tools) -> tuple[py_trees.behaviour.Behaviour, ...]:
    """Before the handle search: go to the cabinet's front from wherever the robot stands."""
    return (StepTimeout("front reached in time?", GoToCabinetFront("go to the cabinet's front", tools),
                        FRONT_TIMEOUT_STEPS, tools),)


def open_part_subtree(tools: Tools, part: str) -> py_trees.behaviour.Behaviour:
    """Grasp the handle and pull the part open to its end stop (the drawer tree's attempts), then record
    its travel. FAILURE after ``MAX_ATTEMPTS`` failed attempts."""
    _check_target("open", part)
    pull_drawer = PullDrawer("pull drawer", tools, speed_mps=SKILL_PULL_SPEED_MPS)
    pull = py_trees.composites.Parallel(
        "pull open", policy=ParallelPolicy.SuccessOnSelected(children=[pull_drawer]),
        children=[pull_drawer, HandleInGripper("handle in gripper?", tools), MakingProgress("making progress?", tools)],
    )
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        *grasp_steps(tools, handle_timeout_steps=SKILL_HANDLE_TIMEOUT_STEPS, before_find=_front_steps(tools)), pull,
        RecordTravel(f"remember travel of {part}", tools, part)])
    return py_trees.decorators.Retry("grasp and pull", attempt, MAX_ATTEMPTS)


class PushDrawer(Skill):
    """Drive the base toward the cabinet, against the part's outward normal, arm and gripper locked, at a
    speed that falls with the part's opening (``gain_per_s`` times it plus ``PUSH_PAST_CLOSED_M``, within
    ``min_speed_mps`` and ``max_speed_mps``), so that the drawer meets its closed stop gently. SUCCESS when
    the part stops moving after having moved at least ``min_travel_m`` (its stop, or blocked: the condition
    above says which): its opening, measured on ``stall_steps`` new clouds (not ticks, as the pull), changed
    by less than ``stall_m``."""

    def __init__(self, name: str, tools: Tools, part: str, max_speed_mps: float = 0.5, min_speed_mps: float = 0.05,
                 gain_per_s: float = 3.0, stall_steps: int = 6, stall_m: float = 0.002, min_travel_m: float = 0.01):
        super().__init__(name, tools, reads=("observation", "front_normal_W", "open_state", "part_opening_m"),
                         writes=("command",))
        self.part = part
        self.max_speed_mps, self.min_speed_mps, self.gain_per_s = max_speed_mps, min_speed_mps, gain_per_s
        self.stall_steps, self.stall_m, self.min_travel_m = stall_steps, stall_m, min_travel_m

    def initialise(self):
        self.q_hold, self.start, self.ticks = None, None, 0
        self.stall = CloudStallTracker(self.stall_steps)

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        normal = np.array([self.bb.front_normal_W[0], self.bb.front_normal_W[1], 0.0])
        outward = normal / np.linalg.norm(normal)
        displacement = self.bb.open_state.state.displacement_m if self.bb.open_state else 0.0
        if self.start is None:
            self.start = displacement
        self.ticks += 1
        changed = self.stall.change(obs.points, displacement)
        opening = (self.bb.part_opening_m or {}).get(self.part)
        self.feedback_message = f"pushed {(self.start - displacement) * 100:.1f} cm" + (
            "" if opening is None else f", {opening * 100:.1f} cm open")
        if changed is not None and self.start - displacement > self.min_travel_m and abs(changed) < self.stall_m:
            return Status.SUCCESS
        speed = self.max_speed_mps if opening is None else float(
            np.clip(self.gain_per_s * (opening + PUSH_PAST_CLOSED_M), self.min_speed_mps, self.max_speed_mps))
        # As the pull: ramp up, a jerk would tear the handle out of the fingers.
        speed *= min(1.0, self.ticks / PULL_RAMP_STEPS)
        qvel = self.tools.pid.step(self.q_hold, obs.qpos)
        qvel[self.tools.base_index[:2]] = -speed * outward[:2]
        self.send(qvel, "close")
        return Status.RUNNING


class MakingClosingProgress(MakingProgress):
    """Check: the part closes by at least ``min_closing_m`` (or half its opening at the start, if less)
    within ``within_steps`` of the start of a push (measured as :class:`MakingProgress` measures)."""

    sign = -1.0
    verb = "closed"

    def __init__(self, name: str, tools: Tools, part: str, within_steps: int = 30, min_closing_m: float = 0.02):
        super().__init__(name, tools, within_steps=within_steps, min_opening_m=min_closing_m,
                         reads=("part_opening_m",))
        self.part = part

    def started(self, state) -> None:
        opening = (self.bb.part_opening_m or {}).get(self.part)
        if opening is not None:
            self.needed = min(self.min_opening_m, 0.5 * max(opening, 0.0))


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
    attempt = py_trees.composites.Sequence("attempt", memory=True, children=[
        *grasp_steps(tools, handle_timeout_steps=SKILL_HANDLE_TIMEOUT_STEPS, before_find=_front_steps(tools)), push])
    return py_trees.decorators.Retry("grasp and push", attempt, MAX_ATTEMPTS)


class Forget(Skill):
    """Set ``keys`` back to their initial values: a skill started again does not act on what its last run
    saw and planned. SUCCESS at once."""

    def __init__(self, name: str, tools: Tools, keys: dict):
        super().__init__(name, tools, writes=tuple(keys))
        self.keys = dict(keys)

    def update(self) -> Status:
        for key, value in self.keys.items():
            self.bb.set(key, list(value) if isinstance(value, list) else value, overwrite=True)
        self.feedback_message = f"forgot {', '.join(self.keys)}"
        return Status.SUCCESS


class PlanBackOff(Skill):
    """The arm's configuration with the hand :data:`BACK_OFF_M` back along its approach (its z axis), the base
    where it stands (IK), or, with no IK so, the arm held and the base backed off as far along the approach's
    horizontal part; written to ``q_back_off``. Also forgets the grasp (``grasped``, ``clamped_gap_m``): the
    gripper has been opened. FAILURE: no IK and an approach too steep for the base to back off along."""

    def __init__(self, name: str, tools: Tools):
        super().__init__(name, tools, reads=("observation",), writes=("q_back_off", "grasped", "clamped_gap_m"))

    def update(self) -> Status:
        obs: Observation = self.bb.observation
        tools = self.tools
        self.bb.grasped, self.bb.clamped_gap_m = False, None
        X_WT = obs.X_WT[tools.side]
        X_back = X_WT.copy()
        X_back[:3, 3] -= BACK_OFF_M * X_WT[:3, 2]
        result = ik_base_held(tools, obs.qpos, X_back)
        if result.success:
            self.bb.q_back_off = result.q
            self.feedback_message = f"hand back to {np.round(X_back[:3, 3], 2)}"
            return Status.SUCCESS
        # The arm stretched out (a drawer pulled to its end): no IK for the hand back with the base held, and the
        # release ran out of attempts (SetTable test seeds 19, 29). The base backs off instead, the arm held: the
        # open hand comes straight back along the approach's horizontal part.
        away = -np.asarray(X_WT[:2, 2], dtype=np.float64)
        if np.linalg.norm(away) < MIN_HORIZONTAL_BACK_OFF:
            return self.fail(f"no IK for the back-off: {result.message}")
        q = obs.qpos.copy()
        q[tools.base_index[:2]] += BACK_OFF_M * away / np.linalg.norm(away)
        self.bb.q_back_off = q
        self.feedback_message = f"no IK for the arm alone ({result.message}): the base backs off {BACK_OFF_M:.2f} m"
        return Status.SUCCESS


def release_subtree(tools: Tools) -> py_trees.behaviour.Behaviour:
    """Open the gripper, then back the hand off along its approach, arm alone."""
    return py_trees.composites.Sequence("release", memory=True, children=[
        OperateGripper("open gripper", tools, "open", max_steps=seconds_to_steps(tools, 0.6)),
        PlanBackOff("plan back-off (IK)", tools),
        MoveJoints("back off", tools, "q_back_off", gripper="open", speed_fraction=0.5),
    ])


# The arm's tuck before a drive with the hand empty: twice the carrying tuck's 0.3 (nothing in the fingers to
# shake loose); at 0.3 it took 220-240 steps of TidyIntoDrawer's 3000 (test seeds 4, 7).
EMPTY_TUCK_SPEED_FRACTION = 0.6


def clear_hand_steps(tools: Tools) -> py_trees.behaviour.Behaviour:
    """Before a drive away from where the hand worked: back the hand off along its approach, then tuck the arm
    (behaviors/mobile_pick_nodes.py's carry tuck), base held. After an open whose grasp slipped at its end, the
    hand stayed by the handle believed empty; the pick's drive swept the arm into the drawer and pushed it
    shut, again and again (TidyIntoDrawer test seed 0). Without IK for either move the pick goes on from
    where the arm is (visible: "clear the hand" succeeds anyway)."""
    return py_trees.decorators.FailureIsSuccess("clear the hand", py_trees.composites.Sequence(
        "back off and tuck", memory=True, children=[
            PlanBackOff("plan back-off (IK)", tools),
            MoveJoints("back off", tools, "q_back_off", gripper="open", speed_fraction=0.5),
            PlanTuck("plan tuck (IK)", tools),
            MoveJoints("tuck arm", tools, "q_tuck", gripper="open", speed_fraction=EMPTY_TUCK_SPEED_FRACTION)]))


def pick_subtree(tools: Tools, object: str) -> py_trees.behaviour.Behaviour:
    """Forget the last pick, clear the hand (:func:`clear_hand_steps`), then the mobile pick subtree
    (behaviors/mobile_pick_trees.py) with the object grasp predictor :data:`OBJECT_GRASP_PREDICTOR`."""
    if object != OBJECT:
        raise ValueError(f"the pick skill moves the object the masks name ({OBJECT!r}); got {object!r}")
    predictor = get_grasp_predictor(OBJECT_GRASP_PREDICTOR)
    return py_trees.composites.Sequence(f"pick {object}", memory=True, children=[
        Forget("forget the last pick", tools, PICK_KEYS), clear_hand_steps(tools),
        create_pick_tree(tools, grasp_predictor=predictor)])


def place_inside_subtree(tools: Tools, object: str, part: str) -> py_trees.behaviour.Behaviour:
    """Forget the last place, then carry the held object into the open drawer (behaviors/mobile_pick_trees.py)."""
    if object != OBJECT:
        raise ValueError(f"the place skills move the object the masks name ({OBJECT!r}); got {object!r}")
    _check_target("place inside", part)
    return py_trees.composites.Sequence(f"place {object} inside {part}", memory=True, children=[
        Forget("forget the last place", tools, PLACE_KEYS), create_place_tree(tools, "inside")])


def place_on_subtree(tools: Tools, object: str, surface: str) -> py_trees.behaviour.Behaviour:
    """Forget the last place, then carry the held object onto the table (behaviors/mobile_pick_trees.py)."""
    if object != OBJECT:
        raise ValueError(f"the place skills move the object the masks name ({OBJECT!r}); got {object!r}")
    if surface != SURFACE:
        raise ValueError(f"the place-on skill puts the object on the surface the masks name ({SURFACE!r}); "
                         f"got {surface!r}")
    return py_trees.composites.Sequence(f"place {object} on {surface}", memory=True, children=[
        Forget("forget the last place", tools, PLACE_KEYS), create_place_tree(tools, "on")])


def _p(text: str, *args: str, negated: bool = False) -> Predicate:
    return Predicate(text, tuple(args), negated)


# Both grasp the handle: the hand empty first (TidyIntoDrawer test seed 2 started the close with the object
# still held after a place that stalled low; the close's approach let it fall).
OPEN = SkillSpec("open", ("part",), (_p("HandEmpty"),), (_p("Open", "part"),), open_part_subtree,
                 "grasp the handle, pull to the end stop")
CLOSE = SkillSpec("close", ("part",), (_p("HandEmpty"),), (_p("Closed", "part"),), close_part_subtree,
                  "grasp the handle, push shut")
# The long-horizon tasks' skills on the mobile robot: run to their end once started.
RELEASE = SkillSpec("release", (), (), (_p("HandEmpty"),), release_subtree, "open the gripper, back away",
                    preemptible=False)
# The pick also needs the drawer open: in the long-horizon scene the object rests on the table or in the target
# drawer, and a closed drawer hides it (the vocabulary has no "reachable"; InsideOf is not seen through a closed
# front, so it cannot say which). A pick from the table is then preceded by the opening TidyIntoDrawer needs
# anyway; SetTable's pick from the drawer needs it.
PICK = SkillSpec("pick", ("object",), (_p("Open", TARGET_PART), _p("HandEmpty")), (_p("Grasped", "object"),),
                 pick_subtree, "grasp the object and lift it", preemptible=False)
PLACE_ON = SkillSpec("place on", ("object", "surface"), (_p("Grasped", "object"),),
                     (_p("OnTopOf", "object", "surface"),), place_on_subtree,
                     "carry the held object over the surface, let go", preemptible=False)
# Open first: the open skill grasps the handle, so the object is picked after it (a precondition the
# action undoes would be re-achieved for ever).
PLACE_INSIDE = SkillSpec("place inside", ("object", "part"), (_p("Open", "part"), _p("Grasped", "object")),
                         (_p("InsideOf", "object", "part"),), place_inside_subtree,
                         "carry the held object into the open part, let go", preemptible=False)

DRAWER_SKILLS: tuple[SkillSpec, ...] = (OPEN, CLOSE, RELEASE)
MOBILE_SKILLS: tuple[SkillSpec, ...] = (OPEN, CLOSE, RELEASE, PICK, PLACE_ON, PLACE_INSIDE)
