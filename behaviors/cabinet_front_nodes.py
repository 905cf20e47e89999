"""Going to a cabinet's front from wherever the robot starts, before the handle search of the open and close skills.

A long-horizon scene starts the robot 1-2.2 m from the cabinet-table midpoint at any bearing (TidyIntoDrawer):
beside or behind the cabinet as often as in front. The cabinet trees' handle search (``ApproachPart``) assumes a
start 1.6-1.8 m in front; from elsewhere it drove toward the target, saw no handle for 400 steps, or latched a
front normal estimated from a grazing view (test seeds 0, 3 and 4 of the first TidyIntoDrawer runs).

``GoToCabinetFront`` first finds the front (perception/cabinet_front.py): the cabinet's floor rectangle from the
points near the operator's prompt (merged over the drive), the front as the side the target handle stands out of
once the handle is seen, and meanwhile the sides looked at squarely without a handle point ruled out. A side
looked at from its look-out with the handle in view but the front not named (the handle seen at a slant, too few
points) is left for the side the handle stands farthest out of: standing there with the handle in view had
neither ruled the side out nor named the front, and the base waited out the skill's 2000 steps (TidyIntoDrawer
test seeds 8, 15 and 18). It drives
(base routes around the table and the cabinet, planning/base_routes.py) to a look-out in front of the nearest
side not ruled out, then to a stand-off in front of the handle, and ends there: the handle search starts from
where the cabinet trees expect it to.
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.cabinet_front import (
    estimate_cabinet_rectangle,
    front_side,
    side_normals,
    side_standoff_xy_yaw,
    sides_seen_from,
)
from handleit.perception.place_targets import Footprint, PlaceTargetError, estimate_table_top
from handleit.perception.point_cloud import voxel_downsample
from handleit.planning.base_routes import route_around_rectangles
from handleit.types import Observation

from .common import DRIVE_RAMP_S, DRIVE_SPEED_FRACTION, JointReference, Skill

FLOOR_Z_M = 0.03  # points lower than this are the floor
CABINET_RADIUS_M = 1.0  # cabinet points lie this close to the prompt (xy): the cabinet is at most 1.2 m wide
CABINET_VOXEL_M = 0.03  # the cabinet's points merged over the drive on this grid
LOOKOUT_M = 1.3  # the base's origin this far out from a side it looks at
FRONT_STANDOFF_M = 1.4  # ... and from the handle, along the front's normal, where the handle search starts
# In front already: this far out along the front's normal from the handle, and within this lateral fraction of it.
IN_FRONT_MIN_M, IN_FRONT_LATERAL = 0.5, 0.6
MIN_HANDLE_POINTS, MIN_PART_POINTS = 5, 20  # a view with fewer of these does not name the front
FRONT_VIEWS = 3  # views in a row that name the same side before it is the front
VIEW_TICKS = 20  # a side looked at squarely this many ticks without a handle point is not the front
ROUTE_MARGIN_M = 0.6  # the base's origin keeps this far off the table and the cabinet (as the pick's routes)
WAYPOINT_REACHED_M = 0.15
ARRIVED_M, ARRIVED_RAD = 0.1, 0.2
BLOCKED_STEPS = 300  # the base standing still (< 1 cm/s) this many steps short of its goal: blocked
TABLE_MIN_POINTS = 30


def _among(normal: np.ndarray, normals: list[np.ndarray]) -> bool:
    return any(float(normal @ n) > 0.9 for n in normals)


def _mask(obs: Observation, name: str) -> np.ndarray:
    m = obs.masks.get(name)
    return np.zeros(len(obs.points), dtype=bool) if m is None else np.asarray(m, dtype=bool)


def prompt_point_W(obs: Observation, entity: str = "drawer") -> np.ndarray | None:
    """The operator's prompt of ``entity`` as a point (a box's centre); the target prompt for the drawer."""
    prompt = obs.prompts_W.get(entity)
    if prompt is None and entity == "drawer":
        prompt = obs.target_prompt_W
    if prompt is None:
        return None
    prompt = np.asarray(prompt, dtype=np.float64)
    return prompt if prompt.ndim == 1 else prompt.mean(axis=0)


class GoToCabinetFront(Skill):
    """Drive the base, arm held, to a stand-off :data:`FRONT_STANDOFF_M` in front of the target part's handle,
    finding the cabinet's front on the way (module docstring). SUCCESS at the stand-off, or at once when the
    robot already stands in front of the handle. FAILURE: no prompt nor part in view, every side looked at
    without a handle, or the base blocked. Writes ``cabinet_front_W`` (the front's outward normal, [3]) and,
    when the front normal the perceive node latched disagrees with it (estimated from a grazing view), clears
    ``front_normal_W`` and ``open_state`` once in front so that they are estimated again from there."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "tick", "handle"),
                         writes=("command", "reference", "cabinet_front_W", "front_normal_W", "open_state"))
        self.reference = JointReference(tools, speed_fraction=DRIVE_SPEED_FRACTION, ramp_s=DRIVE_RAMP_S)
        self.front_W = None  # latched for the episode: the front does not move
        self.handle_xy = None
        self.cabinet_points = np.zeros((0, 3))

    def initialise(self):
        self.q_hold = None
        self.ruled_out: list[np.ndarray] = []
        self.seen_ticks = np.zeros(4, dtype=int)
        self.front_votes: list[int] = []
        # Sides looked at from their look-out with the handle in view but the front not named (seen at a slant,
        # too few points, or a corner): go and look at another (the one the handle stands farthest out of).
        self.undecided: list[np.ndarray] = []
        self.undecided_ticks = 0
        self.best, self.since_best = math.inf, 0
        self.reference.restart()

    # Perception -------------------------------------------------------------------------------------
    def _update_cabinet(self, obs: Observation, prompt: np.ndarray) -> Footprint | None:
        others = np.zeros(len(obs.points), dtype=bool)
        for name, mask in obs.masks.items():
            if name not in ("target_link", "target_handle"):
                others |= np.asarray(mask, dtype=bool)
        near = np.linalg.norm(obs.points[:, :2] - prompt[:2], axis=1) < CABINET_RADIUS_M
        cabinet = obs.points[~others & near & (obs.points[:, 2] > FLOOR_Z_M)]
        if len(cabinet):
            self.cabinet_points = voxel_downsample(np.concatenate([self.cabinet_points, cabinet]), CABINET_VOXEL_M)
        try:
            return estimate_cabinet_rectangle(self.cabinet_points, prompt, viewpoint_xy=obs.X_WB[:2, 3])
        except PlaceTargetError:
            return None

    def _find_front(self, obs: Observation, rect: Footprint) -> None:
        handle, part = obs.points[_mask(obs, "target_handle")], obs.points[_mask(obs, "target_link")]
        if len(handle) < MIN_HANDLE_POINTS or len(part) < MIN_PART_POINTS:
            return
        try:
            side = front_side(rect, handle, part)
        except PlaceTargetError:
            side = None
        self.front_votes = (self.front_votes + [side])[-FRONT_VIEWS:]
        if side is not None and self.front_votes == [side] * FRONT_VIEWS:
            normals, _ = side_normals(rect)
            self.front_W = np.array([normals[side][0], normals[side][1], 0.0])
            self.handle_xy = handle.mean(axis=0)[:2]
            self.bb.cabinet_front_W = self.front_W

    def _rule_out_sides(self, obs: Observation, rect: Footprint) -> None:
        """Sides looked at squarely for :data:`VIEW_TICKS` ticks while no target-handle point was in view."""
        if _mask(obs, "target_handle").any():
            self.seen_ticks[:] = 0
            return
        normals, _ = side_normals(rect)
        seen = sides_seen_from(rect, obs.X_WB[:2, 3])
        self.seen_ticks = np.where(seen, self.seen_ticks + 1, 0)
        for k in np.flatnonzero(self.seen_ticks >= VIEW_TICKS):
            if not self._ruled_out(normals[k]):
                self.ruled_out.append(normals[k].copy())

    def _ruled_out(self, normal: np.ndarray) -> bool:
        return _among(normal, self.ruled_out)

    def _obstacles(self, obs: Observation, rect: Footprint | None) -> list:
        obstacles = []
        table = obs.points[_mask(obs, "table")]
        top = None
        if len(table) >= TABLE_MIN_POINTS:
            try:
                top = estimate_table_top(table)
            except PlaceTargetError:
                top = None
        if top is not None:
            obstacles.append((top.center_W[:2], top.axes_W, top.half_extent_m))
        elif obs.prompts_W.get("table") is not None and np.ndim(obs.prompts_W["table"]) == 2:
            box = np.asarray(obs.prompts_W["table"], dtype=np.float64)  # the operator's box: axis-aligned
            obstacles.append((box.mean(axis=0)[:2], np.eye(2), 0.5 * np.abs(box[1, :2] - box[0, :2])))
        if rect is not None:
            obstacles.append((rect.center_W, rect.axes_W, rect.half_extent_m))
        return obstacles

    # The drive --------------------------------------------------------------------------------------
    def _drive(self, obs: Observation, goal_xy: np.ndarray, goal_yaw: float, obstacles: list,
               what: str) -> Status:
        i = self.tools.base_index
        here = obs.qpos[i[:2]]
        route = route_around_rectangles(here, goal_xy, obstacles, ROUTE_MARGIN_M)
        k = 0
        while k < len(route) - 1 and np.linalg.norm(route[k] - here) < WAYPOINT_REACHED_M:
            k += 1
        xy = route[k]
        last = k == len(route) - 1
        yaw_now = float(obs.qpos[i[2]])
        # The goal's heading all the way: the three cameras see all around the base, the cabinet stays in view.
        yaw = yaw_now + math.remainder(goal_yaw - yaw_now, 2 * math.pi)
        distance = float(np.linalg.norm(here - goal_xy))
        self.feedback_message = (f"{what}: {distance:.2f} m, {math.degrees(abs(yaw - yaw_now)):.0f} deg away"
                                 + ("" if last else f" (waypoint {k + 1} of {len(route)})"))
        if last and distance < ARRIVED_M and abs(yaw - yaw_now) < ARRIVED_RAD:
            return Status.SUCCESS
        speed = float(np.linalg.norm(obs.qvel[i[:2]])) + 0.3 * abs(float(obs.qvel[i[2]]))
        self.since_best = self.since_best + 1 if speed < 0.01 else 0
        if self.since_best > BLOCKED_STEPS:
            return self.fail(f"blocked: {self.feedback_message}")
        q_target = self.q_hold.copy()
        q_target[i[0]], q_target[i[1]], q_target[i[2]] = xy[0], xy[1], yaw
        qvel, _ = self.reference.follow(q_target, obs, self.bb, continue_handover=False)
        self.send(qvel, "open")
        return Status.RUNNING

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        prompt = prompt_point_W(obs)
        if prompt is None:
            part = obs.points[_mask(obs, "target_link")]
            if not len(part):
                return self.fail("no prompt and no target part in view: nowhere to look for the cabinet")
            prompt = part.mean(axis=0)
        rect = self._update_cabinet(obs, prompt)
        if rect is not None and self.front_W is None:
            self._find_front(obs, rect)
        robot_xy = obs.X_WB[:2, 3]
        if self.front_W is not None:
            out = self.front_W[:2]
            r = robot_xy - self.handle_xy
            along, lateral = float(r @ out), abs(float(r @ np.array([-out[1], out[0]])))
            in_front = along >= IN_FRONT_MIN_M and lateral <= IN_FRONT_LATERAL * along
            goal = self.handle_xy + FRONT_STANDOFF_M * out
            if not in_front:
                status = self._drive(obs, goal, math.atan2(-out[1], -out[0]), self._obstacles(obs, rect),
                                     "to the front")
                if status != Status.SUCCESS:
                    return status
            self._check_front_normal()
            self.feedback_message = f"in front of the handle: {along:.2f} m out, {lateral:.2f} m aside"
            return Status.SUCCESS
        if rect is None:  # the cabinet not in view yet: toward the prompt
            d = robot_xy - prompt[:2]
            n = float(np.linalg.norm(d))
            d = d / n if n > 1e-6 else np.array([1.0, 0.0])
            return self._drive(obs, prompt[:2] + 2.0 * d, math.atan2(-d[1], -d[0]), self._obstacles(obs, None),
                               "toward the prompt")
        self._rule_out_sides(obs, rect)
        normals, dist = side_normals(rect)
        candidates = [k for k in range(4) if not self._ruled_out(normals[k])]
        if not candidates:
            return self.fail("looked at every side of the cabinet: no target handle seen")
        candidates = [k for k in candidates if not _among(normals[k], self.undecided)] or candidates
        obstacles = self._obstacles(obs, rect)
        handle = obs.points[_mask(obs, "target_handle")]
        handle_seen = len(handle) >= MIN_HANDLE_POINTS
        if handle_seen:  # seen, the front not named yet: toward the side the handle stands farthest out of
            beyond = (handle.mean(axis=0)[:2] - np.asarray(rect.center_W)[:2]) @ normals.T - dist
            k = max(candidates, key=lambda c: beyond[c])
            xy, yaw = side_standoff_xy_yaw(rect, k, LOOKOUT_M, target_W=prompt)
        else:
            best = None
            for c in candidates:
                c_xy, c_yaw = side_standoff_xy_yaw(rect, c, LOOKOUT_M, target_W=prompt)
                route = route_around_rectangles(robot_xy, c_xy, obstacles, ROUTE_MARGIN_M)
                length = float(np.sum(np.linalg.norm(np.diff(np.vstack([robot_xy, *route]), axis=0), axis=1)))
                if best is None or length < best[0]:
                    best = (length, c, c_xy, c_yaw)
            _, k, xy, yaw = best
        status = self._drive(obs, xy, yaw, obstacles, f"to look at side {k} ({len(self.ruled_out)} ruled out"
                             + (f", {len(self.undecided)} undecided)" if self.undecided else ")"))
        if status == Status.SUCCESS:  # there and the front still not named
            if handle_seen:
                self.undecided_ticks += 1
                if self.undecided_ticks >= VIEW_TICKS:
                    self.undecided.append(normals[k].copy())
                    self.undecided_ticks = 0
            else:  # looked at squarely now, no handle
                self.seen_ticks[k] = max(self.seen_ticks[k], VIEW_TICKS - 1)
            return Status.RUNNING
        return status

    def _check_front_normal(self) -> None:
        normal = self.bb.front_normal_W
        if normal is None:
            return
        n = np.array([normal[0], normal[1]], dtype=np.float64)
        if np.linalg.norm(n) < 1e-9 or float(n @ self.front_W[:2]) / float(np.linalg.norm(n)) < 0.9:
            self.bb.front_normal_W, self.bb.open_state = None, None
