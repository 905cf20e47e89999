"""Nodes of the mobile robot's pick and place subtrees (the long-horizon tasks of issue 19): perceive the object,
the table and the drawer's interior from their masked points, drive the base to where the arm reaches, plan
grasps and placements with whole-body IK, and the checks "object in gripper?", "lifted?", "released?".

Entities are read through mask names (``object``, ``table``, ``target_link``, ``target_handle`` by default:
whatever the segmenter writes), prompts through ``Observation.prompts_W``. No ground truth.

Blackboard keys (besides ``TreeSolver``'s; initial values in :data:`MOBILE_PICK_BLACKBOARD`):
    object            TabletopObject: the object from its latest points (frozen while held)
    support_z         height (m) of what the object rests on
    table_top         TableTop: the table's plane and rectangle, or None
    place_region      DrawerInterior or TableTop-with-spot: where the held object goes, or None
    place_error       why no place region was estimated (the last PlaceTargetError), or None
    place_goal_W      [3] where the held object's bottom centre goes (m)
    q_base            joint target with the base joints planned and the arm held (drive first)
    q_raise           joint target with the arm and torso planned and the base held (raise the arm first)
    q_lift/X_WG_lift, q_above/X_WG_above, q_release/X_WG_release, q_retreat/X_WG_retreat: move targets
    held_points_G     [n, 3] the held object's points in the tool frame at grasp time
    cabinet_footprint (Footprint, number of points): the cabinet with its open drawer on the floor, from the view
                      that showed most of it; the base's routes keep out of it
    cabinet_front_W   [3] the cabinet front's outward normal, when the open skill found it (cabinet_front_nodes):
                      where the drawer stand-off and interior look out from while the drawer's handle is unseen
"""

from __future__ import annotations

import math

import numpy as np
from py_trees.common import Status

from handleit.perception.antipodal_grasps import evaluate_grasp_poses
from handleit.perception.handle_grasps import flipped_grasp_pose, pregrasp_pose
from handleit.perception.handle_points import HandleAccumulator
from handleit.perception.place_targets import (
    DrawerInterior,
    Footprint,
    PlaceTargetError,
    TableTop,
    estimate_cabinet_footprint,
    estimate_drawer_interior,
    estimate_table_top,
    free_spot_on_table,
    standoff_base_xy_yaw,
)
from handleit.perception.tabletop_objects import (
    TabletopObject,
    estimate_support_height,
    estimate_tabletop_object,
    top_down_grasps,
)
from handleit.planning.base_routes import route_around_rectangles, segment_hits_rectangle
from handleit.poses import rotation_of_yaw
from handleit.types import Grasp, Observation

from .background import BackgroundPlanning
from .common import (
    CARRY_RAMP_S,
    CARRY_SPEED_FRACTION,
    DRIVE_RAMP_S,
    DRIVE_SPEED_FRACTION,
    FINGER_GAP_EMPTY_M,
    JointReference,
    Skill,
    cameras_on_hands,
    finger_gap_m,
    ik_base_held,
    largest_arm_turn_rad,
    wrist_roll_starts,
)

MIN_OBJECT_POINTS = 10  # fewer object points than this: not seen
MIN_ENTITY_POINTS = 30  # a table or drawer seen with fewer points is not seen
PREGRASP_M = 0.10  # back-off along the approach before going straight in
LIFT_M = 0.15  # straight up after closing: clears the table's and the drawer's edges
MAX_GRASPS = 16  # ranked grasp candidates tried per plan
# The most any arm joint may turn on the straight joint-space move from the pregrasp to the grasp when the
# pregrasp is re-solved back from a grasp the base helped reach: more, and the hand sweeps off the approach line
# (the door's PlanGrasp keeps the same bound, DOOR_MAX_APPROACH_ARM_RAD).
MAX_APPROACH_ARM_RAD = 1.0
MIN_DOWN_COS = 0.5  # grasps approaching at least 30 degrees below horizontal: from above, away from the table
# Where the base stands while the arm is raised: this far from the target (m): the mobile Panda's arm at rest
# reaches 0.76 m ahead and 0.8 m to the right of the base, at 0.42 m, below most tables' tops.
FAR_STANDOFF_M = 1.15
# An object in an open drawer is looked at from this close along the drawer's outward direction: from the far
# stand-off the cameras (1.5 m up, 45 degrees down) saw none of its points over the drawer's front wall in 2
# of 3 test seeds (benchmarks/pick_place_skills.py, place_on).
DRAWER_LOOK_M = 0.85
EDGE_CLEARANCE_M = 0.95  # the base's origin at least this far off the table's edge at the far stand-off
BODY_CLEARANCE_M = 0.25  # IK keeps the base origin this far beyond the table edge or the drawer front
STANDOFF_TOLERANCE_M, STANDOFF_TOLERANCE_RAD = 0.06, 0.15
ROUTE_MARGIN_M = 0.6  # the base's route keeps its origin this far off the table (its body, the arm's lower links)
# ... and this much farther off the cabinet with its open drawer: the base drives facing its goal, so passing the
# cabinet it may face it, and the hand, tucked 0.5 m ahead of the base, swept into the open drawer and pushed it
# 25% shut (TidyIntoDrawer test seed 0: the base 0.42 m off the cabinet's side, facing it). Where the berth
# leaves no way round (the table close by), the route keeps the usual margin: with none, the base drove straight.
CABINET_BERTH_M = 0.3
WAYPOINT_REACHED_M = 0.15  # an intermediate waypoint this close counts as passed
BLOCKED_STEPS = 300  # the base this many steps without getting BLOCKED_PROGRESS_M nearer its waypoint: blocked
BLOCKED_PROGRESS_M = 0.01
PLACE_DROP_M = 0.015  # the held object's bottom stops this far above the place surface, then drops
ABOVE_RIM_M = 0.06  # the held object's bottom clears a drawer's rim (or the table top) by this much on the way
RETREAT_M = 0.12  # after releasing, the hand rises this far
DRAWER_MARGIN_M = 0.01  # the held object's footprint this far inside the drawer's opening, each side
# The drawer's interior is estimated from its points merged over the last views (every FUSE_EVERY_STEPS steps, the
# last FUSE_VIEWS of them: 6 s), not from one view: driving up with the object held over a low drawer, the arm and
# the object hide most of it at any one step (TidyIntoDrawer test seeds 5, 35, 41: the opening seen 1-6 cm wide).
FUSE_EVERY_STEPS = 10
FUSE_VIEWS = 60
FUSE_VOXEL_M = 0.004
# "object in gripper?" (behaviors/object_in_gripper.py): the object's points off where the hand held them for
# this many steps in a row, it is lost.
HELD_DRIFT_STEPS = 5
LIFTED_MIN_M = 0.03  # "lifted?": the object's lowest seen point this far above its support at least
RELEASED_GAP_M = 0.01  # "released?": the fingers this much wider than they clamped
CARRY_YAWS_RAD = (0.0, math.pi / 2, -math.pi / 2, math.pi / 4, -math.pi / 4, 3 * math.pi / 4, -3 * math.pi / 4, math.pi)

MOBILE_PICK_BLACKBOARD = {
    "object": None, "support_z": None, "table_top": None, "place_region": None, "place_error": None,
    "place_goal_W": None, "q_base": None, "q_raise": None, "q_lift": None, "X_WG_lift": None, "q_above": None,
    "X_WG_above": None, "q_release": None, "X_WG_release": None, "q_retreat": None, "X_WG_retreat": None,
    "held_points_G": None, "target_at_grasp": None, "failed_grasps": [], "drawer_outward_W": None, "q_tuck": None,
    "cabinet_footprint": None, "q_look": None, "q_look_raise": None, "look_interior": None, "grasp_opening": None,
    "cabinet_front_W": None,  # written by behaviors/cabinet_front_nodes.py when the open skill found the front
}


def _up(X: np.ndarray, dz_m: float) -> np.ndarray:
    X = X.copy()
    X[2, 3] += dz_m
    return X


def _mask(obs: Observation, name: str) -> np.ndarray:
    m = obs.masks.get(name)
    return np.zeros(len(obs.points), dtype=bool) if m is None else np.asarray(m, dtype=bool)


def _on_table(obj: TabletopObject | None, top: TableTop | None) -> bool:
    """Whether the object's estimate lies over the table top seen; False where either is unknown."""
    return (obj is not None and top is not None
            and bool(np.all(np.abs(top.local_xy(obj.center_W)) <= top.half_extent_m)))


def _drawer_interior_seen(obs: Observation) -> DrawerInterior:
    """The target drawer's interior from this observation's part and handle masks; PlaceTargetError when it is not
    seen well enough."""
    return estimate_drawer_interior(obs.points[_mask(obs, "target_link")],
                                    handle_points_W=obs.points[_mask(obs, "target_handle")])


def _base_split(tools, q_from: np.ndarray, q_to: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(arm and torso of ``q_to`` with the planar base of ``q_from``; ``q_to``): raise the arm, then drive."""
    raise_q = q_to.copy()
    raise_q[tools.base_index[:3]] = q_from[tools.base_index[:3]]
    return raise_q, q_to


# ----------------------------------------------------------------------------------------------------
# Perception
# ----------------------------------------------------------------------------------------------------
FLOOR_Z_M = 0.03  # points lower than this are the floor


def update_cabinet_footprint(bb, obs: Observation, part_mask: str = "target_link",
                             handle_mask: str = "target_handle") -> None:
    """The cabinet's footprint (body, target part, handle) from this view when it shows more of the cabinet
    than the one ``bb.cabinet_footprint`` was made from. The body: points no mask claims, above the floor (in
    the long-horizon scene the cabinet is all there is besides the masked table, object and robot)."""
    outward = bb.drawer_outward_W if bb.drawer_outward_W is not None else _outward_of_part(obs, part_mask, handle_mask)
    if outward is None:
        return
    claimed = np.zeros(len(obs.points), dtype=bool)
    for mask in obs.masks.values():
        claimed |= np.asarray(mask, dtype=bool)
    cabinet = (~claimed & (obs.points[:, 2] > FLOOR_Z_M)) | _mask(obs, part_mask) | _mask(obs, handle_mask)
    n = int(cabinet.sum())
    if bb.cabinet_footprint is not None and bb.cabinet_footprint[1] >= n:
        return
    try:
        bb.cabinet_footprint = (estimate_cabinet_footprint(obs.points[cabinet], outward), n)
    except PlaceTargetError:
        pass


class PerceiveObject(Skill):
    """Every tick: the object (``object_mask``) from its points while not held, the height of what it rests
    on (the scene's points around it), and the table's top (``table_mask``: plane and rectangle) when seen.
    Always SUCCESS; the feedback says what was seen."""

    def __init__(self, name, tools, object_mask: str = "object", table_mask: str = "table"):
        super().__init__(name, tools, reads=("observation", "grasped", "drawer_outward_W"),
                         writes=("object", "support_z", "table_top", "cabinet_footprint"))
        self.object_mask, self.table_mask = object_mask, table_mask

    def update(self):
        obs: Observation = self.bb.observation
        update_cabinet_footprint(self.bb, obs)
        obj_mask = _mask(obs, self.object_mask)
        table = obs.points[_mask(obs, self.table_mask)]
        if len(table) >= MIN_ENTITY_POINTS:
            try:
                self.bb.table_top = estimate_table_top(table)
            except PlaceTargetError:
                pass
        n = int(obj_mask.sum())
        if not self.bb.grasped and n >= MIN_OBJECT_POINTS:
            points = obs.points[obj_mask]
            scene = ~obj_mask & ~_mask(obs, "robot")
            support = estimate_support_height(obs.points[scene], points)
            if support is not None:
                self.bb.support_z = support
            self.bb.object = estimate_tabletop_object(points, self.bb.support_z)
        o: TabletopObject | None = self.bb.object
        self.feedback_message = f"{n} object points" + ("" if o is None else f", centre {np.round(o.center_W, 3)}")
        return Status.SUCCESS


class PerceivePlaceRegion(Skill):
    """Every tick until the placement is planned: where the held object can go. ``where="inside"``: the open
    drawer's interior from the drawer part's points (``part_mask``; the front from ``handle_mask``).
    ``where="on"``: the table's top (``table_mask``) and a free spot on it, clear of what stands there.
    Writes ``place_region`` or, when the points do not support one, ``place_error``. Always SUCCESS."""

    def __init__(self, name, tools, where: str, part_mask: str = "target_link", handle_mask: str = "target_handle",
                 table_mask: str = "table", object_mask: str = "object"):
        super().__init__(name, tools,
                         reads=("observation", "tick", "place_goal_W", "held_points_G", "cabinet_front_W"),
                         writes=("place_region", "place_error", "drawer_outward_W", "cabinet_footprint"))
        if where not in ("inside", "on"):
            raise ValueError(f"where must be 'inside' or 'on', got {where!r}")
        self.where, self.part_mask, self.handle_mask = where, part_mask, handle_mask
        self.table_mask, self.object_mask = table_mask, object_mask
        self.outward_W = None
        self.part_views = HandleAccumulator(min_points=1, min_steps=1, voxel_m=FUSE_VOXEL_M, max_steps=FUSE_VIEWS)
        self.handle_views = HandleAccumulator(min_points=1, min_steps=1, voxel_m=FUSE_VOXEL_M, max_steps=FUSE_VIEWS)
        self.views_since, self.last_view = None, None  # ticks: the merged views began, the last view added

    def update(self):
        if self.bb.place_goal_W is not None:  # planned: keep the region the plan was made on
            self.views_since = None  # the next placement (another attempt) looks afresh
            return Status.SUCCESS
        obs: Observation = self.bb.observation
        update_cabinet_footprint(self.bb, obs, self.part_mask, self.handle_mask)
        try:
            if self.where == "inside":
                part = obs.points[_mask(obs, self.part_mask)]
                handle = obs.points[_mask(obs, self.handle_mask)]
                if self.outward_W is None and len(handle) >= 5 and len(part) >= MIN_ENTITY_POINTS:
                    self.outward_W = handle.mean(axis=0) - part.mean(axis=0)
                    self.bb.drawer_outward_W = self.outward_W
                # No handle in view (the arm or the drawer's own walls in the way; TidyIntoDrawer test seed 0): the
                # cabinet's front normal, found on the way to open it, says which way is out.
                outward = self.outward_W if self.outward_W is not None else self.bb.cabinet_front_W
                part, handle = self._merged_views(part, handle)
                region = estimate_drawer_interior(part, outward_W=outward, handle_points_W=handle)
                self.feedback_message = (f"drawer opening {np.round(region.size_m, 2)} m at "
                                         f"{np.round(region.center_W, 2)}, rim {region.rim_z:.2f} m")
            else:
                table = obs.points[_mask(obs, self.table_mask)]
                top = estimate_table_top(table)
                others = ~_mask(obs, self.table_mask) & ~_mask(obs, "robot") & ~_mask(obs, self.object_mask)
                radius = _held_radius_m(self.bb.held_points_G)
                spot = free_spot_on_table(top, radius, obs.points[others], prefer_W=obs.X_WB[:3, 3])
                region = (top, spot)
                self.feedback_message = f"table top at {top.height_z:.2f} m, free spot {np.round(spot, 2)}"
            self.bb.place_region, self.bb.place_error = region, None
        except PlaceTargetError as error:
            self.bb.place_error = str(error)
            self.feedback_message = str(error)
        return Status.SUCCESS

    def _merged_views(self, part_W: np.ndarray, handle_W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The drawer's and its handle's points of this view merged with those of the last views (world, m)."""
        tick = int(self.bb.tick)
        if self.views_since is None or tick < self.views_since:  # a new placement, or a new episode
            self.part_views.reset()
            self.handle_views.reset()
            self.views_since, self.last_view = tick, None
        if self.last_view is None or tick - self.last_view >= FUSE_EVERY_STEPS:
            self.part_views.add(part_W)
            self.handle_views.add(handle_W)
            self.last_view = tick
        merged_part, merged_handle = self.part_views.points, self.handle_views.points
        return (merged_part if len(merged_part) else part_W), (merged_handle if len(merged_handle) else handle_W)


def _held_radius_m(points_G) -> float:
    """Half the largest horizontal extent of the held object (m; 5 cm when unknown)."""
    if points_G is None or len(points_G) == 0:
        return 0.05
    return float(0.5 * np.max(np.ptp(points_G, axis=0)))


class PlaceRegionSeen(Skill):
    """Check: a place region was estimated (FAILURE with the estimator's reason otherwise)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("place_region", "place_error"))

    def update(self):
        if self.bb.place_region is not None:
            self.feedback_message = "seen"
            return Status.SUCCESS
        return self.fail(self.bb.place_error or "no points of the place target")


class ObjectSeen(Skill):
    """Check: the object was seen (its estimate exists); holds still up to ``wait_steps`` for it (the view
    settling after a drive), then FAILURE saying so."""

    def __init__(self, name, tools, object_mask: str = "object", wait_steps: int = 100):
        super().__init__(name, tools, reads=("observation", "object"), writes=("command",))
        self.object_mask, self.wait_steps = object_mask, wait_steps

    def initialise(self):
        self.ticks, self.q_hold = 0, None

    def update(self):
        if self.bb.object is not None:
            self.feedback_message = f"{len(self.bb.object.points_W)} points"
            return Status.SUCCESS
        obs: Observation = self.bb.observation
        n = int(_mask(obs, self.object_mask).sum())
        self.ticks += 1
        if self.ticks < self.wait_steps:
            if self.q_hold is None:
                self.q_hold = obs.qpos.copy()
            self.send(self.tools.pid.step(self.q_hold, obs.qpos), "open")
            self.feedback_message = f"waiting: {n} object points"
            return Status.RUNNING
        return self.fail(f"no object points (mask {self.object_mask!r}: {n} points, need {MIN_OBJECT_POINTS})")


# ----------------------------------------------------------------------------------------------------
# Base moves
# ----------------------------------------------------------------------------------------------------
class ApproachStandoff(Skill):
    """Drive the base (arm held) to a far stand-off from the target, facing it: SUCCESS when there. The target
    is ``entity``'s estimate (the object, the place region) when there is one, else its prompt
    (``Observation.prompts_W``); FAILURE when neither is known. Off the table's edge when the table is seen,
    along a drawer's outward direction for a drawer."""

    def __init__(self, name, tools, entity: str, gripper="open"):
        super().__init__(name, tools, reads=("observation", "tick", "object", "table_top", "place_region",
                                             "drawer_outward_W", "cabinet_footprint", "cabinet_front_W"),
                         writes=("command", "reference"))
        self.entity, self.gripper = entity, gripper
        # Carrying (gripper closed on the object, arm tucked): slower and ramped longer (behaviors/common.py).
        carrying = gripper == "close"
        self.reference = JointReference(tools, CARRY_SPEED_FRACTION if carrying else DRIVE_SPEED_FRACTION,
                                        ramp_s=CARRY_RAMP_S if carrying else DRIVE_RAMP_S)

    def initialise(self):
        self.q_hold = None
        self.latched = None  # the stand-off, fixed once computed from an estimate (not a prompt)
        self.reference.restart()

    def _target(self, obs: Observation):
        region = self.bb.place_region
        if self.entity == "object" and self.bb.object is not None:
            centre, top = self.bb.object.center_W, self.bb.table_top
            if _on_table(self.bb.object, top):
                return centre, top, None  # on the table: off its nearest edge
            return centre, None, _outward_of_part(obs)  # in a drawer: in front of it (when its handle is seen)
        if self.entity == "drawer" and isinstance(region, DrawerInterior):
            return region.center_W, None, region.outward_W
        if self.entity == "table" and region is not None:
            return region[1], region[0], None
        if self.entity == "table" and self.bb.table_top is not None:
            return self.bb.table_top.center_W, self.bb.table_top, None
        prompt = obs.prompts_W.get(self.entity)
        if prompt is None:
            return None, None, None
        prompt = np.asarray(prompt, dtype=np.float64)
        point = prompt if prompt.ndim == 1 else prompt.mean(axis=0)
        # A drawer not seen since it was opened: in front of the cabinet's front (the open skill found it), not
        # towards the drawer's prompt from wherever the base stands, which can leave it behind or beside the
        # cabinet with the drawer out of view ("drawer: 0 points", TidyIntoDrawer test seed 6).
        outward = None
        if self.entity == "drawer":
            outward = self.bb.drawer_outward_W if self.bb.drawer_outward_W is not None else self.bb.cabinet_front_W
        if self.entity == "object":  # prompted inside a drawer: look into it from the drawer's front
            part = obs.points[_mask(obs, "target_link")]
            if len(part) >= MIN_ENTITY_POINTS and np.linalg.norm(part.mean(axis=0)[:2] - point[:2]) < 0.6:
                outward = _outward_of_part(obs)
                # The prompt was given where the object was, the drawer then shut; it rode out with the drawer.
                # Looked at from the prompt, the base stood the drawer's travel too close, and the tucked hand,
                # at the drawer's height, pushed it 40% shut (SetTable test seed 1). The drawer's open box as
                # seen now is where the object is.
                try:
                    interior = _drawer_interior_seen(obs)
                    point, outward = interior.center_W, interior.outward_W
                except PlaceTargetError:
                    pass
        return point, None, outward

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        i = tools.base_index
        if self.latched is not None:
            route, yaw = self.latched
        else:
            target, top, outward = self._target(obs)
            if target is None:
                return self.fail(f"{self.entity}: neither seen nor prompted")
            distance = DRAWER_LOOK_M if self.entity == "object" and outward is not None else FAR_STANDOFF_M
            xy, yaw = standoff_base_xy_yaw(target, obs.X_WB[:2, 3], distance, top=top, outward_W=outward,
                                           clearance_m=EDGE_CLEARANCE_M)
            # Around what the base must not drive into: the table, and the cabinet with its open drawer (it
            # pushed an open drawer 5 cm shut on its way past, TidyIntoDrawer test seed 1).
            table, cabinet = self.bb.table_top, self.bb.cabinet_footprint
            obstacles = [] if table is None else [(table.center_W[:2], table.axes_W, table.half_extent_m)]
            route = None
            if cabinet is not None:
                footprint: Footprint = cabinet[0]
                wide = [*obstacles, (footprint.center_W, footprint.axes_W, footprint.half_extent_m + CABINET_BERTH_M)]
                route = route_around_rectangles(obs.qpos[i[:2]], xy, wide, ROUTE_MARGIN_M)
                blocked = len(route) == 1 and any(
                    segment_hits_rectangle(obs.qpos[i[:2]], xy, c, a, h + 0.5 * ROUTE_MARGIN_M) for c, a, h in wide)
                if blocked:  # no way round with the berth (the table close by; seed 0 drove straight through)
                    route = None
                obstacles.append((footprint.center_W, footprint.axes_W, footprint.half_extent_m))
            if route is None:
                route = route_around_rectangles(obs.qpos[i[:2]], xy, obstacles, ROUTE_MARGIN_M)
            if top is not None or outward is not None:  # from the estimate: keep it (it refines as it nears)
                self.latched = (route, yaw)
                self.waypoint, self.best, self.since_best = 0, math.inf, 0
        waypoint = min(getattr(self, "waypoint", 0), len(route) - 1)
        distance = float(np.linalg.norm(obs.qpos[i[:2]] - route[waypoint]))
        if waypoint < len(route) - 1 and distance < WAYPOINT_REACHED_M:
            # Passed: on to the next waypoint, this tick. Its distance is what the blocked check below compares
            # with from now on; the passed waypoint's (under 0.15 m) counted every later tick of a long leg as no
            # progress, and the drive failed "blocked" 3 s into any leg not done by then, at 0.7 m/s, 0.61 m short
            # (TidyIntoDrawer test seed 7, traced: benchmarks/base_blocked_trace.py).
            waypoint += 1
            self.waypoint, self.best, self.since_best = waypoint, math.inf, 0
            distance = float(np.linalg.norm(obs.qpos[i[:2]] - route[waypoint]))
        xy = route[waypoint]
        yaw_now = float(obs.qpos[i[2]])
        yaw = yaw_now + math.remainder(yaw - yaw_now, 2 * math.pi)
        q_target = self.q_hold.copy()
        q_target[i[0]], q_target[i[1]], q_target[i[2]] = xy[0], xy[1], yaw
        turn = abs(yaw - yaw_now)
        self.feedback_message = (f"{distance:.2f} m, {math.degrees(turn):.0f} deg from "
                                 + (f"waypoint {waypoint + 1} of {len(route)}" if len(route) > 1 else "the stand-off"))
        if waypoint == len(route) - 1 and distance < STANDOFF_TOLERANCE_M and turn < STANDOFF_TOLERANCE_RAD:
            return Status.SUCCESS
        if self.latched is not None:
            # Blocked: the base gets no nearer its waypoint (planar distance and turn) while it is not reached.
            # Not its speed: pressed against a cabinet it crept at 1 cm/s for 4 s (TidyIntoDrawer test seed 3).
            remaining = distance + 0.3 * turn
            if remaining < self.best - BLOCKED_PROGRESS_M:
                self.best, self.since_best = remaining, 0
            else:
                self.since_best += 1
            if self.since_best > BLOCKED_STEPS:
                return self.fail(f"blocked: {self.feedback_message}")
        qvel, _ = self.reference.follow(q_target, obs, self.bb, continue_handover=False)
        self.send(qvel, self.gripper)
        return Status.RUNNING


def _outward_of_part(obs: Observation, part_mask: str = "target_link", handle_mask: str = "target_handle"):
    """The horizontal direction out of a cabinet part, from its points to its handle's; None when not seen."""
    part, handle = obs.points[_mask(obs, part_mask)], obs.points[_mask(obs, handle_mask)]
    if len(part) < MIN_ENTITY_POINTS or len(handle) < 5:
        return None
    d = handle.mean(axis=0) - part.mean(axis=0)
    d[2] = 0.0
    return d if np.linalg.norm(d) > 1e-3 else None


TUCK_B_M = (0.5, -0.2)  # the hand's tuck for carrying: this far ahead and to the side of the base (m, base frame)


class PlanTuck(Skill):
    """The arm and torso tucked for a drive with the object held: the hand :data:`TUCK_B_M` from the base (at
    its height, its orientation kept, or, after a look from the hand, turned about the vertical where IK finds
    none so), so that the arm does not sweep a metre out as the base turns. IK with the base fixed; writes
    ``q_tuck``. FAILURE: no IK."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "look_interior"), writes=("q_tuck",))

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        X_WT = obs.X_WT[tools.side]
        X_tuck = X_WT.copy()
        X_tuck[:2, 3] = obs.X_WB[:2, 3] + obs.X_WB[:2, :2] @ np.asarray(TUCK_B_M)
        X_tuck[2, 3] = max(X_WT[2, 3], 0.5)
        # Its turn kept; after a pick seen from the hand (low in a drawer), else turned about the vertical.
        for yaw in LOOK_YAWS_RAD if self.bb.look_interior is not None else (0.0,):
            X_tuck[:3, :3] = rotation_of_yaw(yaw) @ X_WT[:3, :3]
            result = ik_base_held(tools, obs.qpos, X_tuck)
            if result.success:
                break
        if not result.success:
            return self.fail(f"no IK for the tuck: {result.message}")
        self.bb.q_tuck = result.q
        self.feedback_message = f"hand to {np.round(X_tuck[:3, 3], 2)}"
        return Status.SUCCESS


class MoveJoints(Skill):
    """Move to the joint target under ``target_key`` along a :class:`JointReference`; SUCCESS when every
    controlled joint is within ``tolerance`` (m or rad) of it, FAILURE when it stops getting closer."""

    def __init__(self, name, tools, target_key: str, gripper="open", tolerance: float = 0.02,
                 speed_fraction: float = 0.6):
        super().__init__(name, tools, reads=("observation", "tick", "reference", target_key),
                         writes=("command", "reference"))
        self.target_key, self.gripper, self.tolerance = target_key, gripper, tolerance
        self.reference = JointReference(tools, speed_fraction)

    def initialise(self):
        self.reference.restart()
        self.best, self.since_best = math.inf, 0

    def update(self):
        obs: Observation = self.bb.observation
        q_target = self.bb.get(self.target_key)
        c = self.tools.controlled
        errors = np.abs((q_target - obs.qpos)[c])
        error = float(np.max(errors))
        self.feedback_message = (f"{error:.3f} from the target "
                                 f"({self.tools.model.joint_names[int(c[int(np.argmax(errors))])]})")
        qvel, arrived = self.reference.follow(q_target, obs, self.bb)
        if error < self.tolerance and arrived:
            return Status.SUCCESS
        if error < self.best - 1e-3:
            self.best, self.since_best = error, 0
        elif arrived:
            self.since_best += 1
            if self.since_best > 30:
                if error < 2 * self.tolerance:  # settled just short (the base's friction): close enough
                    self.feedback_message = f"settled {self.feedback_message}"
                    return Status.SUCCESS
                return self.fail(f"no progress: {self.feedback_message}")
        self.send(qvel, self.gripper)
        return Status.RUNNING


# ----------------------------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------------------------
def _keep_out(target_W: np.ndarray, top: TableTop | None, body_m: float = BODY_CLEARANCE_M):
    """(p_W, radius): the base origin keeps beyond the table's edge nearest the target, or ``body_m`` + 0.3 m
    from the target when the table is not known."""
    if top is None:
        return (np.asarray(target_W, dtype=np.float64), body_m + 0.3)
    local = np.abs(top.local_xy(target_W))
    edge = float(np.min(top.half_extent_m - local))
    return (np.asarray(target_W, dtype=np.float64), max(edge, 0.0) + body_m)


LOOK_ABOVE_FLOOR_M = 0.30  # the hand's camera looks into a drawer with the tool centre this high above its floor
LOOK_YAWS_RAD = (0.0, math.pi / 2, -math.pi / 2, math.pi)  # the hand's turns about the vertical tried for the look
LOOK_SETTLE_STEPS = 20  # at the look pose, hold still at least this many ticks for the hand's view
LOOK_WAIT_S = 1.0  # ... and at most this long for the object in it


DRAWER_PRESHAPE_M = 0.02  # in a drawer the fingers come in this much wider than the grasp (1 cm a side)
FRONT_DISC_M = 2.0  # the half-plane beyond a drawer's front, for IK's disc-shaped keep-out: a disc this wide


def _front_keep_out(interior: DrawerInterior, clearance_m: float = BODY_CLEARANCE_M):
    """(p_W, radius): IK's keep-out for the base origin, standing for the half-plane ``clearance_m`` beyond the
    open drawer's front (its box and the cabinet behind it): a disc of radius ``FRONT_DISC_M`` + ``clearance_m``
    centred ``FRONT_DISC_M`` behind the front. 0.4 m to the side its edge comes 4 cm nearer the front."""
    centre = np.asarray(interior.front_W, dtype=np.float64) - FRONT_DISC_M * np.asarray(interior.outward_W)
    return (centre, FRONT_DISC_M + clearance_m)


class ObjectOnTable(Skill):
    """Check: the object's estimate lies on the table top seen (SUCCESS), else FAILURE (in a drawer, or not
    seen): whether the pick must first look into a drawer from the hand."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("object", "table_top"), writes=())

    def update(self):
        if _on_table(self.bb.object, self.bb.table_top):
            self.feedback_message = "on the table"
            return Status.SUCCESS
        self.feedback_message = "not seen" if self.bb.object is None else "not on the table"
        return Status.FAILURE


class PlanHandLook(BackgroundPlanning, Skill):
    """Where the hand's camera looks straight down into the open drawer: the tool centre
    ``LOOK_ABOVE_FLOOR_M`` above the drawer's floor, over the object's estimate (or, unseen, the middle of the
    drawer's opening seen), the hand pointing down; whole-body IK, the base kept beyond the drawer's front.
    Writes ``q_look``, ``q_look_raise`` (its arm and torso, the base where it is: raise the arm, then drive) and
    ``look_interior`` (the drawer's interior seen from here, with its handle: where its front is, for the grasp's
    plan once the hand hides the handle). FAILURE saying why: no drawer interior seen, or no IK."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "object"),
                         writes=("q_look", "q_look_raise", "look_interior"))

    def snapshot(self) -> dict:
        return {"observation": self.bb.observation, "object": self.bb.object}

    def plan(self, snap: dict):
        obs: Observation = snap["observation"]
        obj: TabletopObject | None = snap["object"]
        tools = self.tools
        try:
            interior = _drawer_interior_seen(obs)
        except PlaceTargetError as error:
            return "fail", f"no drawer interior to look into: {error}"
        target_W = np.array(interior.center_W if obj is None else obj.center_W, dtype=np.float64)
        target_W[2] = interior.floor_z + LOOK_ABOVE_FLOOR_M
        keep_out = _front_keep_out(interior)
        starts = wrist_roll_starts(tools, obs.qpos)
        heading = math.atan2(obs.X_WB[1, 0], obs.X_WB[0, 0])
        for yaw in LOOK_YAWS_RAD:
            X_WL = np.eye(4)
            # z (the approach, along which the hand's camera looks) straight down; x along the turned heading.
            X_WL[:3, :3] = rotation_of_yaw(heading + yaw) @ np.diag([1.0, -1.0, -1.0])
            X_WL[:3, 3] = target_W
            look = tools.ik.solve(obs.qpos, {tools.side: X_WL}, initial_guesses=starts, base_keep_out=keep_out)
            if look.success:
                where = "over the object seen" if obj is not None else "the object unseen"
                return "plan", (*_base_split(tools, obs.qpos, look.q), interior,
                                f"hand {np.round(target_W, 2)}, looking down ({where})")
        return "fail", f"no IK for a look down from {np.round(target_W, 2)}"

    def apply(self, result):
        kind, value = result
        if kind == "fail":
            self.bb.look_interior = None  # no look now: the grasp's plan must not take the last one's drawer
            return self.fail(value)
        self.bb.q_look_raise, self.bb.q_look, self.bb.look_interior, self.feedback_message = value
        return Status.SUCCESS


class SeenFromHand(Skill):
    """Check: holds still at the look pose at least ``LOOK_SETTLE_STEPS`` ticks, then SUCCESS once the hand's
    camera sees ``MIN_OBJECT_POINTS`` of the object; after ``LOOK_WAIT_S``, SUCCESS if the object is seen at all
    (the base's cameras), saying that the hand saw none, else FAILURE."""

    def __init__(self, name, tools, object_mask: str = "object"):
        super().__init__(name, tools, reads=("observation", "object"), writes=("command",))
        self.object_mask = object_mask

    def initialise(self):
        self.ticks, self.q_hold = 0, None

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        self.ticks += 1
        cameras = np.flatnonzero(cameras_on_hands(obs, (self.tools.side,)))
        seen = _mask(obs, self.object_mask)
        if obs.sensor_index is not None and len(cameras):
            seen = seen & np.isin(obs.sensor_index, cameras)
        n = int(seen.sum())
        self.feedback_message = f"{n} object points from the hand's camera"
        if self.ticks >= LOOK_SETTLE_STEPS and n >= MIN_OBJECT_POINTS:
            return Status.SUCCESS
        if self.ticks * self.tools.model.control_dt_s >= LOOK_WAIT_S:
            if self.bb.object is not None:
                self.feedback_message = f"the hand's camera saw {n} object points: the base cameras' view it is"
                return Status.SUCCESS
            return self.fail(f"no object point from the hand's camera nor the base's ({n})")
        self.send(self.tools.pid.step(self.q_hold, obs.qpos), "open")
        return Status.RUNNING


class PlanMobileGrasp(BackgroundPlanning, Skill):
    """Antipodal grasps on the object's points (the tree's grasp predictor, ranked; those approaching from
    above or at an angle, at least 30 degrees below horizontal; in a drawer, where there are none, as when only
    the object's top is seen, straight down across its footprint: ``top_down_grasps``, those whose fingers touch
    no other point seen first; on a table,
    the footprint's grasps after the predicted ones), then the first for which whole-body IK finds
    the pregrasp (base free, its origin kept off the table: a disc about the object out to the nearest table
    edge plus the body's clearance), the grasp and the lift (arm alone from the pregrasp). FAILURE ("no
    reachable grasp") saying how many failed where."""

    def __init__(self, name, tools, object_mask: str = "object", grasp_predictor=None):
        """``grasp_predictor``: a predictor of its own (a tree whose ``tools.grasp_predictor`` grasps handles,
        as the goal trees' open skill does); None: ``tools.grasp_predictor``."""
        super().__init__(name, tools, reads=("observation", "object", "support_z", "table_top", "attempt",
                                             "failed_grasps", "look_interior"),
                         writes=("grasp", "X_WG_pregrasp", "X_WG_grasp", "q_pregrasp", "q_grasp", "q_lift",
                                 "X_WG_lift", "q_raise", "target_at_grasp", "grasp_opening"))
        self.object_mask = object_mask
        self.grasp_predictor = grasp_predictor

    def snapshot(self) -> dict:
        return {"observation": self.bb.observation, "object": self.bb.object, "support_z": self.bb.support_z,
                "table_top": self.bb.table_top, "attempt": int(self.bb.attempt), "look_interior": self.bb.look_interior}

    def plan(self, snap: dict):
        obs: Observation = snap["observation"]
        obj: TabletopObject | None = snap["object"]
        tools = self.tools
        if obj is None:
            return "fail", "no object points to grasp"
        masks = {"target": _mask(obs, self.object_mask), "robot": _mask(obs, "robot")}
        if not masks["target"].any():
            masks["target"] = np.zeros(len(obs.points), dtype=bool)
            points = np.vstack([obs.points, obj.points_W])
            masks = {k: np.concatenate([v, np.zeros(len(obj.points_W), dtype=bool)]) for k, v in masks.items()}
            masks["target"][len(obs.points):] = True
        else:
            points = obs.points
        try:
            predictor = self.grasp_predictor or tools.grasp_predictor
            grasps = predictor.predict(points, masks, table_z=snap["support_z"], seed=snap["attempt"])
        except ValueError as error:
            return "fail", f"grasp predictor: {error}"
        grasps = [g for g in grasps if -g.X_WG[2, 2] >= MIN_DOWN_COS][:MAX_GRASPS]
        source = "predicted"
        top = snap["table_top"]
        on_table = _on_table(obj, top)
        if not grasps and not on_table:
            # Only the top seen (an object in a drawer, seen from the hand's camera or over the drawer's front
            # from the base's: the sides behind the drawer's walls): no antipodal pair to sample. Close straight
            # down across the footprint instead (SetTable test seed 1: 100 object points, all on its top).
            grasps, source = top_down_grasps(obj, tools.model.gripper_max_opening_m), "footprint"
            if grasps:  # those whose fingers, coming straight down, touch no other point seen (a drawer's walls)
                others = points[~masks["target"] & ~masks["robot"]]
                check = evaluate_grasp_poses(np.stack([g.X_WG for g in grasps]), obj.points_W,
                                             obstacle_points_W=others, table_z=snap["support_z"],
                                             clearance_m=0.5 * DRAWER_PRESHAPE_M, approach_distance_m=0.2)
                free = [Grasp(X_WG=check.X_WG[i], width_m=g.width_m, score=g.score)
                        for i, g in enumerate(grasps) if not check.collides[i] and not check.below_table[i]]
                grasps = free or grasps
        sources = [source] * len(grasps)
        if on_table:
            # On a table, after the predicted grasps: straight down across the footprint (the tabletop pick's
            # fallback). The predictor found one grasp from above, or none, on three test objects whose picks
            # then ran out of attempts at "no reachable grasp" (TidyIntoDrawer test seeds 7, 11, 16).
            footprint = top_down_grasps(obj, tools.model.gripper_max_opening_m)
            grasps, sources = grasps + footprint, sources + ["footprint"] * len(footprint)
        if not grasps:
            tried = f" (nor across its footprint, {np.round(100 * obj.footprint_extent_m, 1)} cm)"
            return "fail", "no grasp from above fits the object's points" + ("" if source == "predicted" else tried)
        keep_out = _keep_out(obj.center_W, top)
        clear_z = None  # in a drawer: the height its rim or front panel sets for the pregrasp and the lift
        looked = False  # the hand's camera looked into the drawer from over the object
        if not on_table:
            # In a drawer. After a look from the hand's camera: the drawer as seen before it (with its handle,
            # which the hand may hide now); the base kept beyond the drawer's front line, the hand in and out
            # over its rim.
            looked = snap["look_interior"] is not None
            if looked:
                interior = snap["look_interior"]
                keep_out = _front_keep_out(interior)
                clear_z = interior.top_z + ABOVE_RIM_M
            else:
                # The base keeps beyond the drawer's front (the table's edge rule would let it drive into the
                # drawer), when the drawer's inside is seen; the hand comes in over the drawer's front, as after a
                # look: at 10 cm above the grasp, the fingers drove into the front panel and pushed the drawer
                # shut (SetTable test seed 1, traced on simulator state).
                try:
                    interior = _drawer_interior_seen(obs)
                    front_m = float(np.linalg.norm(interior.front_W[:2] - obj.center_W[:2]))
                    keep_out = (np.asarray(obj.center_W, dtype=np.float64), front_m + BODY_CLEARANCE_M)
                    clear_z = interior.top_z + ABOVE_RIM_M
                except PlaceTargetError:
                    pass
        starts = wrist_roll_starts(tools, obs.qpos)
        counts = {"pregrasp": 0, "grasp": 0, "lift": 0}
        base = tools.model.base_joint_names
        for grasp, source in zip(grasps, sources):
            twins = (grasp.X_WG, flipped_grasp_pose(grasp.X_WG))
            if looked:  # the hand over the object already: the twin nearer its present turn first
                R_WT = obs.X_WT[tools.side][:3, :3]
                twins = sorted(twins, key=lambda X: -float(np.trace(R_WT.T @ X[:3, :3])))
            for X_WG in twins:
                back_m = PREGRASP_M
                if clear_z is not None:  # the hand comes in over the drawer's walls, not through them
                    back_m = max(back_m, (clear_z - X_WG[2, 3]) / max(-X_WG[2, 2], MIN_DOWN_COS))
                X_WP = pregrasp_pose(X_WG, back_m)
                pre = None
                if looked:  # the hand over the object already: reach down from where the base stands
                    pre = tools.ik.solve(obs.qpos, {tools.side: X_WP}, initial_guesses=starts, fixed_joints=base[:3])
                if pre is None or not pre.success:
                    pre = tools.ik.solve(obs.qpos, {tools.side: X_WP}, initial_guesses=starts,
                                         base_keep_out=keep_out)
                if not pre.success:
                    counts["pregrasp"] += 1
                    continue
                held, base_helped = base, False
                final = tools.ik.solve(pre.q, {tools.side: X_WG}, fixed_joints=held)
                if not final.success and looked:
                    # Low in a drawer the arm alone does not reach 10 cm further down: the torso lowers too
                    # (straight down, along a grasp from above), the planar base still held.
                    held = base[:3]
                    final = tools.ik.solve(pre.q, {tools.side: X_WG}, fixed_joints=held)
                if not final.success and not looked:
                    # The base-free pregrasp left the arm stretched (its IK keeps the base near where it stands,
                    # so the base stops where the arm just reaches), and the grasp 10 cm further is out of the
                    # arm's reach: the pick's commonest failure, "IK failed at the grasp" with every pregrasp
                    # found (TidyIntoDrawer and SetTable test seeds 3, 6, 7). Then the grasp with the base free,
                    # and the pregrasp backed off from it with the base held, so that the approach is still the
                    # arm's alone along the line, unless that turns an arm joint far (the hand off the line).
                    grasp_free = tools.ik.solve(pre.q, {tools.side: X_WG}, initial_guesses=starts,
                                                base_keep_out=keep_out)
                    if grasp_free.success:
                        back = tools.ik.solve(grasp_free.q, {tools.side: X_WP}, fixed_joints=base)
                        if back.success and largest_arm_turn_rad(tools, back.q, grasp_free.q) <= MAX_APPROACH_ARM_RAD:
                            pre, final, base_helped = back, grasp_free, True
                if not final.success:
                    counts["grasp"] += 1
                    continue
                # Lifted clear of the drawer's rim (the object's bottom ABOVE_RIM_M over it), or LIFT_M.
                X_lift = _up(X_WG, LIFT_M if clear_z is None else max(LIFT_M, clear_z - obj.support_z))
                lift = tools.ik.solve(final.q, {tools.side: X_lift}, fixed_joints=held)
                if not lift.success:
                    counts["lift"] += 1
                    continue
                q_raise, _ = _base_split(tools, obs.qpos, pre.q)
                why = (f"{source} grasp {grasp.width_m * 100:.1f} cm wide at {np.round(X_WG[:3, 3], 3)}, approach "
                       f"{np.round(X_WG[:3, 2], 2)}" + (" (the base placed for the grasp)" if base_helped else ""))
                # Among a drawer's walls (after a look) the fingers come in opened to the grasp's width and a
                # margin, not wide.
                # Across a footprint in a drawer, too: the fingers' clearance to the walls was checked for that width.
                narrow = clear_z is not None or (source == "footprint" and not on_table)
                opening = (min(grasp.width_m + DRAWER_PRESHAPE_M, tools.model.gripper_max_opening_m) if narrow
                           else None)
                return "plan", (grasp, X_WG, X_WP, pre.q, final.q, lift.q, X_lift, q_raise, obj, opening, why)
        return "fail", (f"no reachable grasp: {len(grasps)} grasps (and their turned twins), IK failed at the "
                        f"pregrasp {counts['pregrasp']}, grasp {counts['grasp']}, lift {counts['lift']} times")

    def apply(self, result):
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        grasp, X_WG, X_WP, q_pre, q_grasp, q_lift, X_lift, q_raise, obj, opening, why = value
        bb = self.bb
        bb.grasp_opening = opening
        bb.grasp, bb.X_WG_grasp, bb.X_WG_pregrasp, bb.q_pregrasp, bb.q_grasp = grasp, X_WG, X_WP, q_pre, q_grasp
        bb.q_lift, bb.X_WG_lift, bb.q_raise, bb.target_at_grasp = q_lift, X_lift, q_raise, obj
        self.feedback_message = why
        return Status.SUCCESS


class PlanPlace(BackgroundPlanning, Skill):
    """The placement: the held object (its points in the hand, ``held_points_G``) above the place region's
    target (the drawer opening's centre; the table's free spot), turned about the vertical so that its
    footprint fits the drawer's opening, its bottom :data:`PLACE_DROP_M` above the floor or top. Whole-body IK
    for the pose above (the object's bottom :data:`ABOVE_RIM_M` over the rim or top; base free, kept off the
    drawer's front or the table's edge), then the arm alone for the release and the retreat. FAILURE: no fit,
    or no IK."""

    def __init__(self, name, tools, where: str):
        super().__init__(name, tools, reads=("observation", "place_region", "held_points_G", "table_top"),
                         writes=("place_goal_W", "q_above", "X_WG_above", "q_release", "X_WG_release", "q_retreat",
                                 "X_WG_retreat", "q_raise"))
        self.where = where

    def snapshot(self) -> dict:
        return {"observation": self.bb.observation, "region": self.bb.place_region,
                "points_G": self.bb.held_points_G}

    def plan(self, snap: dict):
        obs: Observation = snap["observation"]
        region, points_G = snap["region"], snap["points_G"]
        tools = self.tools
        if region is None:
            return "fail", "no place region"
        if points_G is None or not len(points_G):
            return "fail", "the held object's shape in the hand is unknown"
        X_WT = obs.X_WT[tools.side]
        if self.where == "inside":
            interior: DrawerInterior = region
            target = interior.center_W.copy()
            surface_z, pass_z = interior.floor_z, interior.top_z
            front_gap = float(np.linalg.norm(interior.front_W[:2] - interior.center_W[:2]))
            keep_out = (interior.center_W, front_gap + BODY_CLEARANCE_M)
        else:
            top, spot = region
            target = spot.copy()
            surface_z, pass_z = top.height_z, top.height_z
            keep_out = _keep_out(spot, top)
        base = tools.model.base_joint_names
        starts = wrist_roll_starts(tools, obs.qpos)
        why = "no carry yaw"
        for yaw in CARRY_YAWS_RAD:
            R = rotation_of_yaw(yaw) @ X_WT[:3, :3]
            pts = points_G @ R.T  # the object's points about the tool centre, world-aligned
            if self.where == "inside":
                footprint = np.array([np.ptp(pts @ interior.outward_W), np.ptp(pts @ interior.lateral_W)])
                if not interior.fits(footprint, DRAWER_MARGIN_M):
                    why = f"footprint {np.round(footprint, 3)} m does not fit the opening {np.round(interior.size_m, 3)} m"
                    continue
            centre_xy = 0.5 * (pts[:, :2].min(axis=0) + pts[:, :2].max(axis=0))
            X_release = np.eye(4)
            X_release[:3, :3] = R
            X_release[:3, 3] = [target[0] - centre_xy[0], target[1] - centre_xy[1],
                                surface_z + PLACE_DROP_M - pts[:, 2].min()]
            X_above = _up(X_release, max(0.0, pass_z + ABOVE_RIM_M - surface_z - PLACE_DROP_M))
            above = tools.ik.solve(obs.qpos, {tools.side: X_above}, initial_guesses=starts, base_keep_out=keep_out)
            if not above.success:
                why = f"above: {above.message}"
                continue
            # Lowering and retreating: the arm and the torso, the base where it stands.
            release = tools.ik.solve(above.q, {tools.side: X_release}, fixed_joints=base[:3])
            if not release.success:
                why = f"release: {release.message}"
                continue
            retreat = None
            for rise in (X_above[2, 3] - X_release[2, 3] + RETREAT_M, X_above[2, 3] - X_release[2, 3], RETREAT_M / 2):
                X_retreat = _up(X_release, rise)
                retreat = tools.ik.solve(release.q, {tools.side: X_retreat}, fixed_joints=base[:3])
                if retreat.success:
                    break
            if not retreat.success:
                why = f"retreat: {retreat.message}"
                continue
            q_raise, _ = _base_split(tools, obs.qpos, above.q)
            goal = np.array([target[0], target[1], surface_z])
            return "plan", (goal, above.q, X_above, release.q, X_release, retreat.q, X_retreat, q_raise, yaw)
        return "fail", f"no placement at {np.round(target, 3)}: {why}"

    def apply(self, result):
        kind, value = result
        if kind == "fail":
            return self.fail(value)
        goal, q_above, X_above, q_release, X_release, q_retreat, X_retreat, q_raise, yaw = value
        bb = self.bb
        bb.place_goal_W, bb.q_above, bb.X_WG_above, bb.q_release, bb.X_WG_release = goal, q_above, X_above, q_release, X_release
        bb.q_retreat, bb.X_WG_retreat, bb.q_raise = q_retreat, X_retreat, q_raise
        self.feedback_message = f"object to {np.round(goal, 3)}, hand turned {math.degrees(yaw):.0f} deg"
        return Status.SUCCESS


# ----------------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------------
class RecordHeldObject(Skill):
    """After the grasp closed: the object's points (as last seen before the grasp) in the tool frame, for
    placing it later. Always SUCCESS."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "target_at_grasp", "object"), writes=("held_points_G",))

    def update(self):
        obs: Observation = self.bb.observation
        obj = self.bb.target_at_grasp or self.bb.object
        X_WT = obs.X_WT[self.tools.side]
        self.bb.held_points_G = (obj.points_W - X_WT[:3, 3]) @ X_WT[:3, :3]
        self.feedback_message = f"{len(obj.points_W)} points, {np.round(np.ptp(self.bb.held_points_G, axis=0), 3)} m"
        return Status.SUCCESS


class Lifted(Skill):
    """Check after the lift: the fingers still clamp something and the object's lowest seen point is
    :data:`LIFTED_MIN_M` above what it rested on (when in view; else the hand's rise is trusted)."""

    def __init__(self, name, tools, object_mask: str = "object"):
        super().__init__(name, tools, reads=("observation", "support_z", "target_at_grasp"))
        self.object_mask = object_mask

    def update(self):
        obs: Observation = self.bb.observation
        gap = finger_gap_m(obs, self.tools)
        if gap < FINGER_GAP_EMPTY_M:
            return self.fail(f"fingers closed on nothing after the lift (gap {gap * 1000:.1f} mm)")
        points = obs.points[_mask(obs, self.object_mask)]
        support = self.bb.support_z
        if len(points) >= MIN_OBJECT_POINTS and support is not None:
            clearance = float(points[:, 2].min() - support)
            if clearance < LIFTED_MIN_M:
                return self.fail(f"object still down: its lowest point {100 * clearance:.1f} cm above the support")
            self.feedback_message = f"lowest point {100 * clearance:.1f} cm above the support"
        else:
            self.feedback_message = f"object not in view; fingers clamped at {gap * 1000:.0f} mm"
        return Status.SUCCESS


class Released(Skill):
    """Check after opening: the fingers opened wider than they clamped (by :data:`RELEASED_GAP_M`)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "clamped_gap_m"), writes=("grasped",))

    def update(self):
        gap = finger_gap_m(self.bb.observation, self.tools)
        clamped = self.bb.clamped_gap_m or 0.0
        if gap < clamped + RELEASED_GAP_M:
            return self.fail(f"fingers at {gap * 1000:.0f} mm, clamped at {clamped * 1000:.0f} mm: not open")
        self.bb.grasped = False
        self.feedback_message = f"open at {gap * 1000:.0f} mm"
        return Status.SUCCESS


class HeldOverPlace(Skill):
    """Check, after a lowering that stalled short (the held object resting on something it was not planned to
    meet: TidyIntoDrawer test seeds 1 and 2 stalled 10-22 cm above the plan): the hand is over the place
    region (inside the drawer opening's rectangle, or the table top's), so that letting go there still puts
    the object in or on it. FAILURE otherwise."""

    def __init__(self, name, tools, where: str):
        super().__init__(name, tools, reads=("observation", "place_region"))
        self.where = where

    def update(self):
        obs: Observation = self.bb.observation
        region = self.bb.place_region
        if region is None:
            return self.fail("no place region")
        p_WT = obs.X_WT[self.tools.side][:3, 3]
        if self.where == "inside":
            interior: DrawerInterior = region
            d = p_WT - interior.center_W
            local = np.array([d @ interior.outward_W, d @ interior.lateral_W])
            half = interior.size_m / 2
        else:
            top: TableTop = region[0]
            local, half = top.local_xy(p_WT), top.half_extent_m
        if np.all(np.abs(local) <= half):
            self.feedback_message = f"hand over the {'opening' if self.where == 'inside' else 'top'}: let go here"
            return Status.SUCCESS
        return self.fail(f"hand {np.round(np.abs(local) - half, 3)} m outside the place region: not over it")


class ReplanArmFromBase(Skill):
    """The base stopped short of the pose planned for it (the drive over the place stalled 3-4.5 cm short in
    TidyIntoDrawer test seeds 1 and 2, by the drawer's front or friction): the arm's configurations over the
    place and for the release solved again with the base where it stands (IK, base fixed), so that the hand
    still reaches the planned poses ``X_WG_above`` and ``X_WG_release``. Writes ``q_above`` and ``q_release``.
    FAILURE: no IK (the base too far off for the arm)."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "X_WG_above", "X_WG_release"),
                         writes=("q_above", "q_release"))

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        X_above, X_release = self.bb.X_WG_above, self.bb.X_WG_release
        if X_above is None or X_release is None:
            return self.fail("no planned place poses to reach")
        base = tools.model.base_joint_names[:3]
        above = ik_base_held(tools, obs.qpos, X_above)
        if not above.success:
            return self.fail(f"above, the base where it stands: {above.message}")
        release = tools.ik.solve(above.q, {tools.side: X_release}, fixed_joints=base)
        if not release.success:
            return self.fail(f"release, the base where it stands: {release.message}")
        self.bb.q_above, self.bb.q_release = above.q, release.q
        i = tools.base_index[:2]
        self.feedback_message = f"arm re-planned, the base {100 * np.linalg.norm(obs.qpos[i] - above.q[i]):.1f} cm off"
        return Status.SUCCESS


class PlanRetreat(Skill):
    """After the release: the hand straight up by the torso alone, from where the robot stands now (arm and
    base held): over the rim or top by :data:`RETREAT_M` more than the hand was above the release. A joint-
    space line to an IK retreat swung the hand sideways into the drawer's walls (test seed 1: stalled 0.32 rad
    short). Falls back to the planned ``q_retreat`` (IK) when the torso's range is short; writes ``q_retreat``.
    Always SUCCESS."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "X_WG_above", "X_WG_release", "q_retreat"),
                         writes=("q_retreat",))

    def update(self):
        obs: Observation = self.bb.observation
        torso = self.tools.base_index[3]
        X_above, X_release = self.bb.X_WG_above, self.bb.X_WG_release
        rise = RETREAT_M + (0.0 if X_above is None or X_release is None else max(0.0, X_above[2, 3] - X_release[2, 3]))
        upper = float(self.tools.model.joint_limits[torso, 1])
        if obs.qpos[torso] + rise <= upper or self.bb.q_retreat is None:
            q = obs.qpos.copy()
            q[torso] = min(upper, obs.qpos[torso] + rise)
            self.bb.q_retreat = q
            self.feedback_message = f"torso up {100 * (q[torso] - obs.qpos[torso]):.0f} cm"
        else:
            self.feedback_message = "torso range short: the planned retreat (IK)"
        return Status.SUCCESS


class ObjectLeftBehind(Skill):
    """Check after the retreat: the object's points (when in view) stayed where they were put, not with the
    hand: their lowest point within 5 cm of the place surface."""

    def __init__(self, name, tools, object_mask: str = "object"):
        super().__init__(name, tools, reads=("observation", "place_goal_W"))
        self.object_mask = object_mask

    def update(self):
        obs: Observation = self.bb.observation
        points = obs.points[_mask(obs, self.object_mask)]
        goal = self.bb.place_goal_W
        if len(points) < MIN_OBJECT_POINTS or goal is None:
            self.feedback_message = "object not in view"
            return Status.SUCCESS
        low = float(points[:, 2].min() - goal[2])
        horizontal = float(np.linalg.norm(points[:, :2].mean(axis=0) - goal[:2]))
        if low > 0.05 or horizontal > 0.15:
            return self.fail(f"object not where it was put: lowest point {100 * low:.1f} cm above the surface, "
                             f"{100 * horizontal:.0f} cm aside")
        self.feedback_message = f"object down, {100 * horizontal:.1f} cm from the goal"
        return Status.SUCCESS
