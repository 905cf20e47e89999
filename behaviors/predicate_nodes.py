"""The nodes that evaluate predicates from perception and check them in a tree.

Blackboard keys (in the solver's namespace):
    predicates       dict Predicate (not negated) -> PredicateEvidence, written every tick by PerceivePredicates
    part_opening_m   dict entity -> its opening (m) or None, written by PerceivePredicates
    part_travel_m    dict entity -> the opening (m) at which a pull stalled (its end stop), written by
                     RecordTravel: what ``Open(part)`` is measured against
    front_normal_W   the target part's outward front normal (the cabinet trees' Perceive writes it)
    open_state       the target part's OpenStateEstimator (the cabinet trees' Perceive writes it)

A condition is a visible node, ``Open(drawer)?``, whose feedback message is the evidence (what perception
measured); nothing here reads simulator state.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.perception.point_cloud import estimate_front_normal
from handleit.perception.predicates import (
    OPEN_FRACTION_OF_TRAVEL,
    OpeningTracker,
    PredicateEvidence,
    evaluate_closed,
    evaluate_grasped,
    evaluate_hand_empty,
    evaluate_inside_of,
    evaluate_on_top_of,
    evaluate_open,
    object_at_hand,
)
from handleit.predicates import Predicate
from handleit.types import Observation

from .common import Skill, Tools, finger_gap_m

FLOOR_CLEARANCE_M = 0.03  # points lower than this are floor (as cabinet_nodes)
MIN_FRONT_POINTS = 30  # fewer part points give no front normal of one's own
# Which mask holds each entity's points. A part's handle (``target_handle``) is left out of its points: the
# front's layer and the box are the part's. Envs with other masks pass their own mapping.
DEFAULT_ENTITY_MASKS = {"drawer": "target_link", "object": "object", "table": "table"}
HANDLE_MASK = "target_handle"
# A predicate's value changes only once perception has said so this many ticks in a row (0.2 s at 100 Hz):
# driving away from an open drawer, the opening read from a new viewpoint flickered to Closed for 1-6 ticks
# (TidyIntoDrawer test seed 1), and each flicker started the open skill, stopping the pick.
STABLE_TICKS = 20
OPEN_HOLD_FRACTION = 0.8  # a part believed Open is Open down to this fraction of its travel (hysteresis)
# The fingers stand still when their gap changed by less than FINGERS_STILL_M over the last FINGERS_STILL_TICKS
# ticks. Their gap, not their velocity: squeezing an object (commanded closed) the fingers' measured velocities
# chatter, their sum +0.66 / -0.30 m/s on alternate ticks, the gap steady at 45 mm (TidyIntoDrawer test seed 19),
# and the gap itself by 1 mm from tick to tick (44 / 45 mm, seed 6). Closing freely, at the fingers' 0.2 m/s
# each, the gap shrinks 4 mm a tick.
FINGERS_STILL_M = 0.003
FINGERS_STILL_TICKS = 5
# An object unseen since the fingers clamped (the hand hides it) is held when, last seen, it lay within this of where
# they clamped (the tool centre's place when they came to stand still): a flat object grasped from above was hidden by
# the hand before the hand reached it, and was not believed held after its lift (TidyIntoDrawer test seed 6). A
# drawer's handle stands off the front, and the front's wall and the finger room lie between it and the object.
SEEN_AT_CLAMP_M = 0.05
GOAL_BLACKBOARD: dict[str, Any] = {"predicates": None, "part_opening_m": None, "part_travel_m": None}


def _mask(obs: Observation, name: str) -> np.ndarray | None:
    mask = obs.masks.get(name)
    return None if mask is None else np.asarray(mask, dtype=bool)


class PerceivePredicates(Skill):
    """Every tick: evaluate ``predicates`` (ground, not negated) from the observation and the blackboard.
    A predicate perception cannot see this tick (a closed drawer hides what it holds) keeps its last seen
    value, its evidence marked "remembered". A value changes once perception has said so ``stable_ticks``
    ticks in a row (the first value at once); until then the evidence says "not yet believed". Always
    SUCCESS."""

    def __init__(self, name: str, tools: Tools, predicates: tuple[Predicate, ...],
                 entity_masks: dict[str, str] | None = None, stable_ticks: int = STABLE_TICKS):
        super().__init__(name, tools, reads=("observation", "front_normal_W", "open_state", "part_travel_m",
                                             "predicates", "part_opening_m", "gripper_commanded"),
                         writes=("predicates", "part_opening_m", "part_travel_m"))
        self.predicates = tuple(dict.fromkeys(Predicate(p.name, p.args) for p in predicates))
        self.entity_masks = dict(DEFAULT_ENTITY_MASKS if entity_masks is None else entity_masks)
        self.trackers: dict[str, OpeningTracker] = {}
        self.normals: dict[str, np.ndarray] = {}
        self.last_seen: dict[Predicate, PredicateEvidence] = {}
        if stable_ticks < 1:
            raise ValueError(f"stable_ticks must be at least 1, got {stable_ticks}")
        self.stable_ticks = stable_ticks
        self.believed: dict[Predicate, bool] = {}
        self.against: dict[Predicate, int] = {}  # ticks in a row perception has said the opposite of the belief
        self.last_seen_at_hand: dict[str, bool] = {}  # entity -> its points, when last in view, at the hand
        self.gaps: deque[float] = deque(maxlen=FINGERS_STILL_TICKS)  # the finger gap (m) of the last ticks
        self.last_points: dict[str, np.ndarray] = {}  # entity -> its points when last in view
        self.p_W_clamp: np.ndarray | None = None  # the tool centre where the fingers came to stand still, closed
        self.held_apart = False  # this tick: the fingers closed on something (see _fingers_held_apart)

    def _points(self, obs: Observation, entity: str) -> np.ndarray | None:
        mask = _mask(obs, self.entity_masks.get(entity, entity))
        if mask is None:
            return None
        handle = _mask(obs, HANDLE_MASK)
        if handle is not None and self.entity_masks.get(entity) == "target_link":
            mask = mask & ~handle
        return obs.points[mask]

    def _normal(self, obs: Observation, entity: str, points: np.ndarray) -> np.ndarray | None:
        if self.entity_masks.get(entity) == "target_link" and self.bb.front_normal_W is not None:
            return np.asarray(self.bb.front_normal_W)
        if entity not in self.normals and len(points) >= MIN_FRONT_POINTS:
            try:
                self.normals[entity] = estimate_front_normal(points, toward_W=obs.X_WB[:3, 3])
            except ValueError:
                pass
        return self.normals.get(entity)

    def _opening(self, obs: Observation, entity: str) -> tuple[float | None, str]:
        part = self._points(obs, entity)
        if part is None:
            return None, f"no mask for {entity!r}"
        normal = self._normal(obs, entity, part)
        if normal is None:
            return None, "no front normal yet"
        claimed = np.zeros(len(obs.points), dtype=bool)
        for mask in obs.masks.values():
            claimed |= np.asarray(mask, dtype=bool)
        body = obs.points[~claimed & (obs.points[:, 2] > FLOOR_CLEARANCE_M)]
        state = self.bb.open_state if self.entity_masks.get(entity) == "target_link" else None
        displacement = None if state is None else state.state.displacement_m
        return self.trackers.setdefault(entity, OpeningTracker()).update(part, body, normal, displacement,
                                                                         viewpoint_W=obs.X_WB[:3, 3])

    def evaluate(self, obs: Observation, p: Predicate, openings: dict) -> PredicateEvidence:
        if p.name in ("Open", "Closed"):
            opening, source = openings.setdefault(p.args[0], self._opening(obs, p.args[0]))
            if p.name == "Closed":
                result = evaluate_closed(opening)
            else:
                # Hysteresis: a drawer believed Open stays so down to OPEN_HOLD_FRACTION of its travel (seen from
                # a robot driving away, open drawers read 5 cm short: the open skill stopped the pick three times).
                fraction = OPEN_HOLD_FRACTION if self.believed.get(p) else OPEN_FRACTION_OF_TRAVEL
                result = evaluate_open(opening, (self.bb.part_travel_m or {}).get(p.args[0]), fraction)
            return PredicateEvidence(result.holds, f"{result.evidence} ({source})", result.observed)
        side = self.tools.side
        X_WT = obs.X_WT.get(side)
        if p.name in ("Grasped", "HandEmpty"):
            gap = finger_gap_m(obs, self.tools)
            if X_WT is None:
                return PredicateEvidence(False, f"no tool pose of arm {side!r}", observed=False)
            if p.name == "HandEmpty":
                robot = _mask(obs, "robot")
                others = obs.points if robot is None else obs.points[~robot]
                return evaluate_hand_empty(gap, others, X_WT, self.held_apart)
            points = self._points(obs, p.args[0])
            if points is None:
                return PredicateEvidence(False, f"no mask for {p.args[0]!r}", observed=False)
            at_hand = object_at_hand(points, X_WT)
            if at_hand is not None:
                self.last_seen_at_hand[p.args[0]] = at_hand
                self.last_points[p.args[0]] = points
            return evaluate_grasped(gap, self.tools.model.gripper_max_opening_m, points, X_WT, self.held_apart,
                                    self.last_seen_at_hand.get(p.args[0], False) or self._seen_at_clamp(p.args[0]))
        a, b = (self._points(obs, e) for e in p.args)
        if a is None or b is None:
            missing = p.args[0] if a is None else p.args[1]
            return PredicateEvidence(False, f"no mask for {missing!r}", observed=False)
        if p.name == "InsideOf":
            normal = self._normal(obs, p.args[1], b)
            if normal is None:
                return PredicateEvidence(False, f"no front normal of {p.args[1]!r}", observed=False)
            return evaluate_inside_of(a, b, normal)
        if p.name == "OnTopOf":
            return evaluate_on_top_of(a, b)
        raise ValueError(f"no perception for predicate {p}")

    def _seen_at_clamp(self, entity: str) -> bool:
        """The entity's points, when last in view, lay within SEEN_AT_CLAMP_M of where the fingers clamped."""
        points = self.last_points.get(entity)
        if self.p_W_clamp is None or points is None:
            return False
        return bool(np.min(np.linalg.norm(points - self.p_W_clamp, axis=1)) <= SEEN_AT_CLAMP_M)

    def _fingers_held_apart(self) -> bool:
        """The tree's arm's gripper was last commanded to close ("hold" since keeps it so) and its fingers stand
        still (their gap over the last ticks): what the gap then is, it closed on."""
        commanded = (self.bb.gripper_commanded or {}).get(self.tools.side)
        if not (isinstance(commanded, str) and commanded == "close"):
            return False
        return len(self.gaps) == self.gaps.maxlen and max(self.gaps) - min(self.gaps) < FINGERS_STILL_M

    def _debounced(self, p: Predicate, result: PredicateEvidence) -> PredicateEvidence:
        if p not in self.believed or result.holds == self.believed[p]:
            self.believed[p], self.against[p] = result.holds, 0
            return result
        self.against[p] += 1
        if self.against[p] >= self.stable_ticks:
            self.believed[p], self.against[p] = result.holds, 0
            return result
        return PredicateEvidence(self.believed[p], f"{'holds' if self.believed[p] else 'does not hold'}; not yet "
                                 f"believed ({self.against[p]} of {self.stable_ticks} ticks): {result.evidence}",
                                 result.observed)

    def update(self) -> Status:
        obs: Observation = self.bb.observation
        if obs.X_WT.get(self.tools.side) is not None:
            self.gaps.append(finger_gap_m(obs, self.tools))
            self.held_apart = self._fingers_held_apart()
            if not self.held_apart:
                self.p_W_clamp = None
            elif self.p_W_clamp is None:
                self.p_W_clamp = np.asarray(obs.X_WT[self.tools.side], dtype=np.float64)[:3, 3].copy()
        values, openings = {}, {}
        for p in self.predicates:
            result = self.evaluate(obs, p, openings)
            if result.observed:
                self.last_seen[p] = result
            elif p in self.last_seen:
                last = self.last_seen[p]
                result = PredicateEvidence(last.holds, f"remembered ({result.evidence}): {last.evidence}", False)
            values[p] = self._debounced(p, result)
        self.bb.predicates = values
        self.bb.part_opening_m = {entity: value for entity, (value, _) in openings.items()}
        if self.bb.part_travel_m is None:
            self.bb.part_travel_m = {}
        self.feedback_message = "; ".join(f"{p}: {'yes' if v.holds else 'no'}" for p, v in values.items())
        return Status.SUCCESS


class PredicateHolds(py_trees.behaviour.Behaviour):
    """Condition: ``predicate`` holds (its negation, when negated) in the ``predicates`` the perceive node
    wrote this tick; the evidence is the feedback message. A plain check: no failure record (a condition
    that fails in a PPA tree is the normal way to start a skill, not a fault)."""

    def __init__(self, predicate: Predicate, namespace: str):
        super().__init__(f"{predicate}?")
        self.predicate = predicate
        self.bb = self.attach_blackboard_client(name=self.name, namespace=namespace)
        self.bb.register_key("predicates", access=Access.READ)

    def update(self) -> Status:
        values = self.bb.predicates or {}
        result = values.get(Predicate(self.predicate.name, self.predicate.args))
        if result is None:
            self.feedback_message = "not evaluated"
            return Status.FAILURE
        self.feedback_message = result.evidence
        return Status.SUCCESS if result.holds != self.predicate.negated else Status.FAILURE


class RecordTravel(Skill):
    """After a pull stalled at the part's end stop: remember its opening then as the part's travel, what
    ``Open(part)`` is measured against. FAILURE when the opening is not measured."""

    def __init__(self, name: str, tools: Tools, entity: str):
        super().__init__(name, tools, reads=("part_opening_m", "part_travel_m"), writes=("part_travel_m",))
        self.entity = entity

    def update(self) -> Status:
        opening = (self.bb.part_opening_m or {}).get(self.entity)
        if opening is None:
            return self.fail(f"the opening of {self.entity!r} is not measured")
        self.bb.part_travel_m = {**(self.bb.part_travel_m or {}), self.entity: float(opening)}
        self.feedback_message = f"{self.entity} travel {opening * 100:.1f} cm"
        return Status.SUCCESS
