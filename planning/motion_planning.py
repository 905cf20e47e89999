"""Arm motion planning with mplib 0.1.1 (RRTConnect through OMPL, and screw motions), with the observed point
cloud as the collision world.

How this wraps mplib (0.1.1; read ``mplib/planner.py``):

- **Joint order.** mplib orders joints depth-first (pinocchio's order, ``Planner.user_joint_names``); the
  simulator orders them breadth-first, Drake its own way. Every public method here takes and returns joint
  vectors in the caller's ``joint_names`` order and maps by name.
- **Move group.** mplib plans the joints on the chain from the URDF root to ``move_group`` (the tool
  centre): for the mobile Panda the 4 base joints (x, y, yaw, torso height) and the 7 joints of one arm.
  Fingers and the other arm are outside the move group and stay where they are.
- **Base.** The URDF root is welded at the world origin and the base moves through its joints, so mplib's
  "base frame" (``set_base_pose``, goals "w.r.t. the base") *is* the world; we never call
  ``set_base_pose``. ``base_fixed=True`` freezes the base joints: in mplib's IK through its ``mask`` (True =
  joint not used), and in the RRT through ``ompl.FixedJoint`` entries, which index the *move-group* vector.
  We call ``OMPLPlanner.plan`` ourselves because ``Planner.plan_qpos_to_pose`` never passes fixed joints
  (the RRT could move the base between IK solutions) and ``Planner.plan_qpos_to_qpos`` reads a fixed
  joint's value from the full-qpos vector at its move-group index (wrong for the dual-arm robot, whose
  right-arm move group is not a prefix of the joint vector).
- **Screw motion.** ``Planner.plan_screw`` steps with the pseudo-inverse of the whole move-group Jacobian,
  so it would move the base too; :meth:`ArmMotionPlanner.plan_screw` runs the same idea (follow the screw
  from the current to the goal pose) with the frozen joints' Jacobian columns removed, tracking each
  waypoint of the screw exactly, with mplib's kinematics and collision world.
- **Point cloud.** The obstacle world is an octree of the caller's points (``update_point_cloud``, voxel
  ``voxel_size_m``). Points of the robot itself must not count: the caller should drop the points its robot
  mask marks (``Observation.masks["robot"]``), and we *also* drop every point within
  ``self_filter_margin_m`` of the robot's own collision geometry at the start configuration (catches
  unmasked robot points, depth noise around the arm, and the handle between the fingers when planning away
  from a grasp), and every point below ``ignore_below_z_m`` (the floor: the torso's collision box reaches
  below the floor by design, so floor points would collide with the base wherever it stands).
- **Self-collision.** The generated SRDF does not disable the pair of fingers of one hand, which touch
  whenever the gripper is closed on nothing: every state would be "in collision". We disable those pairs.
- **Determinism.** With ``seed`` given, we seed OMPL's RNG (``ompl::RNG::setSeed``, called through ctypes
  on mplib's bundled libompl) and the C ``rand()`` that pinocchio's random IK restarts draw from. RRTConnect
  is then repeatable as long as it finds a path before ``planning_time_s`` runs out.
- **Verification.** mplib checks RRT edges at its own resolution (1% of the state space's extent) and
  time-parameterizes the path with a spline that may cut corners, so every returned plan is re-checked
  densely (``check_step_rad`` between checks) against self-collision and the point cloud, and the last
  waypoint's tool-centre pose against the goal, before it is reported as a success.

Poses are 4x4 numpy arrays named by frames (``X_WG``: gripper tool centre G in world W); mplib's 7-vector
[x, y, z, qw, qx, qy, qz] stays inside this module.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mplib
import numpy as np
import toppra as ta
import toppra.algorithm as ta_algorithm
import toppra.constraint as ta_constraint
import trimesh
from mplib.pymp.planning import ompl
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation

from handleit.types import RobotModel

from .mobile_panda_names import BASE_JOINT_NAMES


@dataclass(frozen=True)
class Plan:
    """A joint-space path and its timing.

    ``q_path`` [T, dof] is in the caller's ``joint_names`` order (joints outside the move group held at
    their start values); ``times_s`` [T] starts at 0. On failure ``q_path`` holds just the start
    configuration and ``message`` says why.
    """

    q_path: np.ndarray
    times_s: np.ndarray
    success: bool
    message: str

    @property
    def duration_s(self) -> float:
        return float(self.times_s[-1]) if len(self.times_s) else 0.0


# -------------------------------------------------------------------------------------------------------
# Pose helpers


def pose_to_mplib(X_AB: np.ndarray) -> np.ndarray:
    """4x4 pose -> mplib's [x, y, z, qw, qx, qy, qz]."""
    x, y, z, w = Rotation.from_matrix(X_AB[:3, :3]).as_quat()
    return np.array([*X_AB[:3, 3], w, x, y, z])


def pose_from_mplib(pose7: np.ndarray) -> np.ndarray:
    """mplib's [x, y, z, qw, qx, qy, qz] -> 4x4 pose."""
    pose7 = np.asarray(pose7, dtype=float)
    X = np.eye(4)
    X[:3, :3] = Rotation.from_quat([pose7[4], pose7[5], pose7[6], pose7[3]]).as_matrix()
    X[:3, 3] = pose7[:3]
    return X


def _skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def _V(w: np.ndarray) -> np.ndarray:
    """Left Jacobian of SO(3) at rotation vector w: the translation of exp([w, v]) is V(w) v."""
    theta = float(np.linalg.norm(w))
    W = _skew(w)
    if theta < 1e-9:
        return np.eye(3) + 0.5 * W
    return np.eye(3) + (1 - math.cos(theta)) / theta**2 * W + (theta - math.sin(theta)) / theta**3 * W @ W


def _screw_pose(X_start: np.ndarray, X_goal: np.ndarray, s: float) -> np.ndarray:
    """Pose at fraction s in [0, 1] of the screw motion from X_start to X_goal (both 4x4, same frame).

    With the spatial twist xi = log(X_goal X_start^-1) = (w, v): X(s) = exp(s xi) X_start. The tool centre
    travels on a helix about the screw axis: a straight line when the orientation does not change, a circular
    arc about the hinge when X_goal is X_start turned about a hinge axis."""
    T_rel = X_goal @ np.linalg.inv(X_start)
    w = Rotation.from_matrix(T_rel[:3, :3]).as_rotvec()
    v = np.linalg.solve(_V(w), T_rel[:3, 3])
    T_s = np.eye(4)
    T_s[:3, :3] = Rotation.from_rotvec(s * w).as_matrix()
    T_s[:3, 3] = _V(s * w) @ (s * v)
    return T_s @ X_start


# -------------------------------------------------------------------------------------------------------
# Robot collision geometry, for cropping the robot out of the cloud


@dataclass(frozen=True)
class _ConvexPart:
    link: str
    X_LP: np.ndarray  # pose of the part's frame P in its link L
    A_P: np.ndarray  # [F, 3] outward face normals in P
    b_P: np.ndarray  # [F] offsets: a point x is inside when A x + b <= 0


def _read_obj_vertices(path: Path) -> np.ndarray:
    vertices = []
    with open(path) as f:
        for line in f:
            if line.startswith("v "):
                vertices.append([float(t) for t in line.split()[1:4]])
    return np.array(vertices, dtype=float)


def _origin_pose(elem: ET.Element | None) -> np.ndarray:
    X = np.eye(4)
    if elem is None:
        return X
    X[:3, 3] = [float(t) for t in elem.get("xyz", "0 0 0").split()]
    X[:3, :3] = Rotation.from_euler("xyz", [float(t) for t in elem.get("rpy", "0 0 0").split()]).as_matrix()
    return X


def _collision_parts(urdf_path: Path) -> list[_ConvexPart]:
    """The convex hulls of every <collision> geometry of the URDF, as half-spaces in their link frames."""
    parts = []
    root = ET.parse(urdf_path).getroot()
    for link in root.iter("link"):
        for collision in link.findall("collision"):
            geometry = collision.find("geometry")
            if geometry is None or len(geometry) == 0:
                continue
            shape = geometry[0]
            if shape.tag == "box":
                half = np.array([float(t) for t in shape.get("size").split()]) / 2
                vertices = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * half
            elif shape.tag == "sphere":
                r = float(shape.get("radius"))
                vertices = r * _unit_sphere_points()
            elif shape.tag == "cylinder":
                r, length = float(shape.get("radius")), float(shape.get("length"))
                a = np.linspace(0, 2 * np.pi, 16, endpoint=False)
                ring = np.stack([r * np.cos(a), r * np.sin(a)], axis=1)
                vertices = np.concatenate([np.column_stack([ring, np.full(16, z)]) for z in (-length / 2, length / 2)])
            elif shape.tag == "mesh":
                mesh_path = (urdf_path.parent / shape.get("filename")).resolve()
                if mesh_path.suffix.lower() == ".obj":
                    vertices = _read_obj_vertices(mesh_path)
                else:  # STL and the rest (ManiSkill3's own Panda URDF), through trimesh
                    vertices = np.asarray(trimesh.load(mesh_path, force="mesh").vertices, dtype=float)
                scale = shape.get("scale")
                if scale:
                    vertices = vertices * np.array([float(t) for t in scale.split()])
            else:
                continue
            hull = ConvexHull(vertices)
            parts.append(_ConvexPart(link.get("name"), _origin_pose(collision.find("origin")),
                                     hull.equations[:, :3].copy(), hull.equations[:, 3].copy()))
    return parts


def _unit_sphere_points(n: int = 64) -> np.ndarray:
    i = np.arange(n) + 0.5
    phi = np.arccos(1 - 2 * i / n)
    theta = np.pi * (1 + 5**0.5) * i
    return np.stack([np.cos(theta) * np.sin(phi), np.sin(theta) * np.sin(phi), np.cos(phi)], axis=1)


# -------------------------------------------------------------------------------------------------------
# Seeding mplib's random sources


def _ompl_set_seed(seed: int) -> bool:
    """Seed OMPL's RNG seed generator (the RNGs of the planners built afterwards); False if unavailable."""
    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(mplib.__file__)), "mplib.libs", "libompl*.so*"))
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib)._ZN4ompl3RNG7setSeedEm
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_ulong]
        fn.restype = None
        fn(max(1, int(seed)))  # OMPL refuses 0
        return True
    return False


def _seed_random_sources(seed: int) -> None:
    # pinocchio's randomConfiguration (mplib's IK restarts) and mplib's start-state repair use C rand().
    ctypes.CDLL(None).srand(ctypes.c_uint(int(seed) & 0xFFFFFFFF))
    _ompl_set_seed(seed)


# -------------------------------------------------------------------------------------------------------
# Planner


class ArmMotionPlanner:
    """Collision-free arm motion plans with mplib 0.1.1, built once per robot and move group.

    Args:
        urdf_path, srdf_path: robot description (the SRDF lists link pairs never checked for collision).
        joint_names: the caller's joint order (e.g. ``RobotModel.joint_names``); must name every joint
            mplib sees. All joint vectors in and out are in this order.
        move_group: the link to move (the tool centre, e.g. "right_panda_hand_tcp").
        base_joint_names: the base joints (frozen when ``base_fixed``).
        joint_vel_limits, joint_acc_limits: per-joint speed (m/s or rad/s) and acceleration limits for
            time parameterization, caller's order (default 1.0 for every joint, mplib's default).
        time_step_s: spacing of the time-parameterized waypoints (s).
        voxel_size_m: octree voxel (m) of the point-cloud obstacle world; use at least the cloud's point
            spacing, or thin obstacles have holes.
        self_filter_margin_m: points closer than this (m) to the robot's collision geometry at the start
            configuration are dropped from the obstacles.
        ignore_below_z_m: points with world z below this (m) are dropped (the floor).
        check_step_rad: largest joint step (rad or m) between two collision checks of a returned path.
    """

    def __init__(
        self,
        urdf_path: str | Path,
        srdf_path: str | Path,
        joint_names: Sequence[str],
        move_group: str = "right_panda_hand_tcp",
        *,
        base_joint_names: Sequence[str] = BASE_JOINT_NAMES,
        joint_vel_limits: Sequence[float] | None = None,
        joint_acc_limits: Sequence[float] | None = None,
        time_step_s: float = 0.1,
        voxel_size_m: float = 0.01,
        self_filter_margin_m: float = 0.02,
        ignore_below_z_m: float = 0.02,
        check_step_rad: float = 0.02,
    ):
        self.urdf_path, self.srdf_path = Path(urdf_path), Path(srdf_path)
        self.joint_names = tuple(joint_names)
        self.move_group = move_group
        self.planner = mplib.Planner(urdf=str(self.urdf_path), srdf=str(self.srdf_path), move_group=move_group)
        self._disable_finger_pair_collisions()

        mp_names = list(self.planner.user_joint_names)
        missing = sorted(set(mp_names) - set(self.joint_names))
        unknown = sorted(set(self.joint_names) - set(mp_names))
        if missing or unknown:
            raise ValueError(f"joint_names must name mplib's joints: missing {missing}, unknown {unknown}")
        caller_index = {n: i for i, n in enumerate(self.joint_names)}
        self._mp_from_caller = np.array([caller_index[n] for n in mp_names], dtype=int)  # mplib i <- caller
        self._mg_index = np.array(self.planner.move_group_joint_indices, dtype=int)  # move group -> mplib index
        self.move_group_joint_names = tuple(mp_names[i] for i in self._mg_index)
        self.base_joint_names = tuple(n for n in base_joint_names if n in mp_names)
        self._limits_mp = np.asarray(self.planner.joint_limits, dtype=float)  # [dof, 2], mplib order
        self._revolute_mp = np.array([t.startswith("JointModelR") for t in self.planner.joint_types])
        self._tcp_link_index = self.planner.link_name_2_idx[move_group]

        dof = len(self.joint_names)
        vel = np.ones(dof) if joint_vel_limits is None else np.asarray(joint_vel_limits, dtype=float)
        acc = np.ones(dof) if joint_acc_limits is None else np.asarray(joint_acc_limits, dtype=float)
        if vel.shape != (dof,) or acc.shape != (dof,):
            raise ValueError("joint_vel_limits and joint_acc_limits need one entry per joint name")
        self._vel_mg = vel[self._mp_from_caller][self._mg_index]
        self._acc_mg = acc[self._mp_from_caller][self._mg_index]
        self.time_step_s = float(time_step_s)
        self.voxel_size_m = float(voxel_size_m)
        self.self_filter_margin_m = float(self_filter_margin_m)
        self.ignore_below_z_m = float(ignore_below_z_m)
        self.check_step_rad = float(check_step_rad)
        self._parts = _collision_parts(self.urdf_path)
        self._link_index = dict(self.planner.link_name_2_idx)

    @classmethod
    def from_robot_model(cls, model: RobotModel, side: str = "right", **kwargs) -> ArmMotionPlanner:
        """A planner for arm ``side`` of ``model``'s robot: its description files, joint order, base joints,
        and its velocity limits for time parameterization. ``kwargs`` go to the constructor."""
        kwargs.setdefault("joint_vel_limits", np.where(model.velocity_limits > 0, model.velocity_limits, 1.0))
        return cls(model.urdf_path, model.srdf_path, model.joint_names, move_group=model.tcp_link_names[side],
                   base_joint_names=model.base_joint_names, **kwargs)

    def _disable_finger_pair_collisions(self) -> None:
        links = self.planner.user_link_names
        pairs = [(a, a.replace("leftfinger", "rightfinger")) for a in links if "leftfinger" in a]
        pairs = [(a, b) for a, b in pairs if b in links]
        if not pairs:
            return
        root = ET.Element("robot", name="finger_pairs")
        for a, b in pairs:
            ET.SubElement(root, "disable_collisions", link1=a, link2=b, reason="Never")
        with tempfile.NamedTemporaryFile("w", suffix=".srdf", delete=False) as f:
            f.write(ET.tostring(root, encoding="unicode"))
        try:
            self.planner.robot.get_fcl_model().remove_collision_pairs_from_srdf(f.name)
        finally:
            os.unlink(f.name)

    # ---------------------------------------------------------------------------------------------------
    # Order conversion and kinematics

    def _to_mp(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.shape[0] != len(self.joint_names):
            raise ValueError(f"q has {q.shape[0]} entries, joint_names {len(self.joint_names)}")
        return q[self._mp_from_caller].copy()

    def _from_mp(self, q_mp: np.ndarray) -> np.ndarray:
        q = np.empty(len(self.joint_names))
        q[self._mp_from_caller] = q_mp
        return q

    def tcp_pose(self, q: np.ndarray) -> np.ndarray:
        """Pose ``X_WG`` (4x4) of the move-group link in the world for ``q`` (caller's order, m/rad)."""
        return self._link_pose_mp(self._to_mp(q), self._tcp_link_index)

    def link_poses(self, q: np.ndarray) -> dict[str, np.ndarray]:
        """Pose ``X_WL`` (4x4) of every link in the world for ``q`` (caller's order)."""
        q_mp = self._to_mp(q)
        pin = self.planner.pinocchio_model
        pin.compute_forward_kinematics(q_mp)
        return {name: pose_from_mplib(pin.get_link_pose(i)) for name, i in self._link_index.items()}

    def _link_pose_mp(self, q_mp: np.ndarray, link_index: int) -> np.ndarray:
        pin = self.planner.pinocchio_model
        pin.compute_forward_kinematics(q_mp)
        return pose_from_mplib(pin.get_link_pose(link_index))

    # ---------------------------------------------------------------------------------------------------
    # Collision world

    def obstacle_points(self, point_cloud_W: np.ndarray | None, q: np.ndarray,
                        margin_m: float | None = None) -> np.ndarray:
        """The points of ``point_cloud_W`` [N, 3] (m, world) that count as obstacles with the robot at ``q``
        (caller's order): those not within ``margin_m`` (default ``self_filter_margin_m``) of the robot's
        own collision geometry (convex hulls of the URDF's collision shapes) and not below
        ``ignore_below_z_m``. Returns [M, 3]."""
        margin_m = self.self_filter_margin_m if margin_m is None else float(margin_m)
        if point_cloud_W is None:
            return np.zeros((0, 3))
        points = np.asarray(point_cloud_W, dtype=float).reshape(-1, 3)
        points = points[np.all(np.isfinite(points), axis=1) & (points[:, 2] >= self.ignore_below_z_m)]
        if len(points) == 0:
            return points
        keep = np.ones(len(points), dtype=bool)
        X_WL = self.link_poses(q)
        for part in self._parts:
            X_WP = X_WL[part.link] @ part.X_LP
            p_P = (points - X_WP[:3, 3]) @ X_WP[:3, :3]  # points in the part's frame
            signed = p_P @ part.A_P.T + part.b_P  # per face: > 0 outside that face's plane
            inside = np.max(signed, axis=1) <= margin_m
            keep &= ~inside
        return points[keep]

    def _set_obstacles(self, point_cloud_W: np.ndarray | None, q: np.ndarray) -> int:
        obstacles = self.obstacle_points(point_cloud_W, q)
        if len(obstacles):
            self.planner.update_point_cloud(obstacles, radius=self.voxel_size_m)
        self.planner.planning_world.set_use_point_cloud(len(obstacles) > 0)
        self.planner.planning_world.set_use_attach(False)
        return len(obstacles)

    def collisions(self, q: np.ndarray, point_cloud_W: np.ndarray | None = None,
                   q_filter: np.ndarray | None = None) -> list[tuple[str, str]]:
        """Colliding pairs (link, link or "point_cloud"-like object name) for the robot at ``q`` (caller's
        order): self-collisions, and collisions with the obstacle points of ``point_cloud_W`` (cropped around
        the robot at ``q_filter``, default ``q``)."""
        self._set_obstacles(point_cloud_W, q if q_filter is None else q_filter)
        return self._collisions_mp(self._to_mp(q))

    def first_collision(self, q_path: np.ndarray, point_cloud_W: np.ndarray | None = None) -> str | None:
        """Where the piecewise-linear joint path ``q_path`` [T, dof] (caller's order) first collides, checked
        every ``check_step_rad``: with itself, or with the obstacle points of ``point_cloud_W`` (m, world;
        cropped around the robot at ``q_path[0]``). None when the whole path is free."""
        q_path = np.atleast_2d(np.asarray(q_path, dtype=float))
        self._set_obstacles(point_cloud_W, q_path[0])
        path_mp = np.array([self._to_mp(q) for q in q_path])
        if self._collisions_mp(path_mp[0]):
            return f"at the start: {self._collisions_mp(path_mp[0])[:3]}"
        return self._first_collision(path_mp, skip_start=False)

    def _collisions_mp(self, q_mp: np.ndarray) -> list[tuple[str, str]]:
        robot = self.planner.robot
        old = robot.get_qpos()
        robot.set_qpos(q_mp, True)
        found = [(c.link_name1, c.link_name2) for c in self.planner.planning_world.collide_full()]
        robot.set_qpos(old, True)
        return found

    # ---------------------------------------------------------------------------------------------------
    # Planning

    def plan_to_pose(
        self,
        q_current: np.ndarray,
        X_WG: np.ndarray,
        point_cloud_W: np.ndarray | None = None,
        planning_time_s: float = 1.0,
        base_fixed: bool = True,
        *,
        seed: int | None = None,
        position_tolerance_m: float = 0.005,
        angle_tolerance_rad: float = 0.02,
        rrt_range: float = 0.1,
        ik_restarts: int = 20,
    ) -> Plan:
        """RRTConnect plan that brings the move-group link from its pose at ``q_current`` to ``X_WG``.

        The goal configurations come from mplib's IK (``ik_restarts`` random restarts, collision-free ones
        kept); the RRT connects the start to any of them.

        Args:
            q_current: start joint positions (m, rad), caller's order.
            X_WG: goal pose (4x4) of the move-group link (tool centre G) in the world W.
            point_cloud_W: [N, 3] observed points (m, world frame), robot points preferably removed by the
                caller's robot mask; see :meth:`obstacle_points` for the cropping done here. None: no
                obstacles but the robot itself.
            planning_time_s: RRTConnect time limit (s).
            base_fixed: True: plan the arm alone, base joints frozen at their current values.
            seed: seeds mplib's random sources for a repeatable plan.
            position_tolerance_m, angle_tolerance_rad: how close the last waypoint's tool centre must be.
            rrt_range: RRT step (joint-space norm, rad/m).
            ik_restarts: random restarts of mplib's IK.

        Returns:
            A :class:`Plan`; ``success`` False with a message when no IK solution, no path, or a path that
            fails the dense re-check.
        """
        X_WG = _as_pose(X_WG)
        q_mp = self._clip_into_limits(self._to_mp(q_current))
        if seed is not None:
            _seed_random_sources(seed)
        self._set_obstacles(point_cloud_W, self._from_mp(q_mp))
        self.planner.robot.set_qpos(q_mp, True)
        mask = self._frozen_mp(base_fixed)
        goal7 = pose_to_mplib(X_WG)
        status, goals_mp = self.planner.IK(goal7, q_mp.copy(), mask=list(mask), n_init_qpos=int(ik_restarts))
        if status != "Success" or not goals_mp:
            return self._failure(q_mp, f"mplib IK found no collision-free configuration for the goal: {status}")
        goals_mp = [self._snap_goal(q_mp, g, mask) for g in goals_mp]
        return self._plan_between(q_mp, goals_mp, mask, planning_time_s, rrt_range, X_WG,
                                  position_tolerance_m, angle_tolerance_rad)

    def plan_to_configuration(
        self,
        q_current: np.ndarray,
        q_goal: np.ndarray,
        point_cloud_W: np.ndarray | None = None,
        planning_time_s: float = 1.0,
        base_fixed: bool = True,
        *,
        seed: int | None = None,
        rrt_range: float = 0.1,
    ) -> Plan:
        """RRTConnect plan from ``q_current`` to the move-group joints of ``q_goal`` (both caller's order),
        e.g. a :class:`~handleit.planning.whole_body_ik.WholeBodyIK` solution. With ``base_fixed`` the base
        joints stay at their current values whatever ``q_goal`` says. Other arguments as
        :meth:`plan_to_pose`."""
        q_mp = self._clip_into_limits(self._to_mp(q_current))
        if seed is not None:
            _seed_random_sources(seed)
        self._set_obstacles(point_cloud_W, self._from_mp(q_mp))
        mask = self._frozen_mp(base_fixed)
        goal_mp = self._snap_goal(q_mp, self._clip_into_limits(self._to_mp(q_goal)), mask)
        if self._collisions_mp(goal_mp):
            return self._failure(q_mp, f"goal configuration in collision: {self._collisions_mp(goal_mp)}")
        return self._plan_between(q_mp, [goal_mp], mask, planning_time_s, rrt_range, None, 0.0, 0.0)

    def plan_screw(
        self,
        q_current: np.ndarray,
        X_WG: np.ndarray,
        point_cloud_W: np.ndarray | None = None,
        base_fixed: bool = True,
        *,
        step_m: float = 0.01,
        step_rad: float = 0.03,
        position_tolerance_m: float = 0.002,
        angle_tolerance_rad: float = 0.01,
    ) -> Plan:
        """Screw motion: the move-group link follows the screw from its pose at ``q_current`` to ``X_WG``
        (a straight line when the orientation does not change), joint positions tracking each waypoint by
        damped least squares on mplib's Jacobian. No search: fails (success False) at the first waypoint
        that is out of joint limits, unreachable or in collision.

        Args:
            q_current: start joint positions (m, rad), caller's order.
            X_WG: goal pose (4x4) of the move-group link in the world.
            point_cloud_W: [N, 3] observed points (m, world), as :meth:`plan_to_pose`.
            base_fixed: True: only the arm joints move.
            step_m, step_rad: largest tool-centre translation (m) and rotation (rad) between waypoints.
            position_tolerance_m, angle_tolerance_rad: how closely each waypoint must be tracked.
        """
        X_WG = _as_pose(X_WG)
        q_mp = self._clip_into_limits(self._to_mp(q_current))
        self._set_obstacles(point_cloud_W, self._from_mp(q_mp))
        active_mp = np.flatnonzero(~self._frozen_mp(base_fixed))  # mplib indices of the joints that move
        X_start = self._link_pose_mp(q_mp, self._tcp_link_index)
        # Waypoint count from the distances the tool centre travels and turns (the helix is no shorter than
        # its chord, so this may be a little coarse on strongly curved screws; the tracking tolerance holds).
        angle_rad = float(np.linalg.norm(Rotation.from_matrix(X_WG[:3, :3] @ X_start[:3, :3].T).as_rotvec()))
        travel_m = float(np.linalg.norm(X_WG[:3, 3] - X_start[:3, 3]))
        n = max(1, int(math.ceil(max(travel_m / step_m, angle_rad / step_rad))))
        path = [q_mp.copy()]
        q = q_mp.copy()
        lower, upper = self._limits_mp[:, 0], self._limits_mp[:, 1]
        for k in range(1, n + 1):
            X_target = _screw_pose(X_start, X_WG, k / n)
            q, pos_err, ang_err = self._track(q, X_target, active_mp)
            if pos_err > position_tolerance_m or ang_err > angle_tolerance_rad:
                return self._failure(q_mp, f"screw motion: waypoint {k}/{n} unreachable "
                                           f"(error {pos_err:.4f} m, {ang_err:.4f} rad)")
            if np.any(q < lower - 1e-6) or np.any(q > upper + 1e-6):
                return self._failure(q_mp, f"screw motion: waypoint {k}/{n} leaves the joint limits")
            hits = self._collisions_mp(q)
            if hits:
                return self._failure(q_mp, f"screw motion: waypoint {k}/{n} in collision: {hits[:3]}")
            path.append(q.copy())
        return self._timed_plan(np.array(path), "screw motion")

    # ---------------------------------------------------------------------------------------------------
    # Internals

    def _frozen_mp(self, base_fixed: bool) -> np.ndarray:
        """mplib-order mask, True for joints that must not move: outside the move group, or base joints
        when ``base_fixed``."""
        mp_names = self.planner.user_joint_names
        frozen = np.ones(len(mp_names), dtype=bool)
        frozen[self._mg_index] = False
        if base_fixed:
            for i, name in enumerate(mp_names):
                if name in self.base_joint_names:
                    frozen[i] = True
        return frozen

    def _clip_into_limits(self, q_mp: np.ndarray) -> np.ndarray:
        # As mplib does: a start a hair outside its limits (simulator drift) is moved 1 mm / mrad inside.
        lower, upper = self._limits_mp[:, 0], self._limits_mp[:, 1]
        q = q_mp.copy()
        q = np.where(q < lower, lower + 1e-3, q)
        return np.where(q > upper, upper - 1e-3, q)

    def _snap_goal(self, q_mp: np.ndarray, goal_mp: np.ndarray, frozen: np.ndarray) -> np.ndarray:
        """Frozen joints exactly at their start values; revolute joints at the 2 pi-equivalent angle
        nearest the start within limits (mplib's IK wraps angles into [lower, lower + 2 pi), which for the
        +-2 pi base yaw can mean a full turn)."""
        goal = np.asarray(goal_mp, dtype=float).copy()
        goal[frozen] = q_mp[frozen]
        for i in np.flatnonzero(self._revolute_mp & ~frozen):
            lo, hi = self._limits_mp[i]
            candidates = goal[i] + 2 * np.pi * np.arange(-2, 3)
            candidates = candidates[(candidates >= lo - 1e-9) & (candidates <= hi + 1e-9)]
            if len(candidates):
                goal[i] = candidates[np.argmin(np.abs(candidates - q_mp[i]))]
        return goal

    def _plan_between(self, q_mp, goals_mp, frozen, planning_time_s, rrt_range, X_WG, pos_tol, ang_tol) -> Plan:
        self.planner.robot.set_qpos(q_mp, True)
        start_hits = self._collisions_mp(q_mp)
        # Fixed joints index the move-group vector (mplib's FixedJoint, articulation 0).
        fixed = {ompl.FixedJoint(0, k, float(q_mp[i])) for k, i in enumerate(self._mg_index) if frozen[i]}
        start_mg = q_mp[self._mg_index]
        goals_mg = [g[self._mg_index] for g in goals_mp]
        self.planner.robot.set_qpos(q_mp, True)
        status, path_mg = self.planner.planner.plan(
            start_mg, goals_mg, planner_name="RRTConnect", time=float(planning_time_s), range=float(rrt_range),
            fixed_joints=fixed, verbose=False)
        if not str(status).startswith("Exact solution") or len(path_mg) == 0:
            note = f" (start in collision: {start_hits[:3]})" if start_hits else ""
            return self._failure(q_mp, f"RRTConnect found no path: {status}{note}")
        path = np.repeat(q_mp[None], len(path_mg), axis=0)
        path[:, self._mg_index] = path_mg
        path[:, frozen] = q_mp[frozen]  # exactly, not up to OMPL's arithmetic
        plan = self._timed_plan(path, "RRTConnect")
        if not plan.success:
            return plan
        # Dense re-check of the time-parameterized path: every segment, at check_step_rad.
        final_mp = self._to_mp(plan.q_path[-1])
        hit = self._first_collision(np.array([self._to_mp(q) for q in plan.q_path]), skip_start=bool(start_hits))
        if hit is not None:
            return self._failure(q_mp, f"RRTConnect path collides after time parameterization: {hit}")
        if X_WG is not None:
            X_end = self._link_pose_mp(final_mp, self._tcp_link_index)
            pos_err = float(np.linalg.norm(X_end[:3, 3] - X_WG[:3, 3]))
            ang_err = float(np.linalg.norm(Rotation.from_matrix(X_WG[:3, :3].T @ X_end[:3, :3]).as_rotvec()))
            if pos_err > pos_tol or ang_err > ang_tol:
                return self._failure(q_mp, f"last waypoint misses the goal by {pos_err:.4f} m, {ang_err:.4f} rad")
        return plan

    def _first_collision(self, path_mp: np.ndarray, skip_start: bool) -> str | None:
        """The first collision along the piecewise-linear path (checked every ``check_step_rad``).

        With ``skip_start``, the contacts present at the start (a start in collision, which OMPL repairs by
        stepping to a nearby free state) are tolerated until the path first gets free of all contact."""
        allowed = set(self._collisions_mp(path_mp[0])) if skip_start else set()
        escaped = not allowed
        for a, b in zip(path_mp[:-1], path_mp[1:]):
            n = max(1, int(math.ceil(np.max(np.abs(b - a)) / self.check_step_rad)))
            for s in np.linspace(0.0, 1.0, n + 1)[1:]:
                hits = set(self._collisions_mp(a + s * (b - a)))
                if not hits:
                    escaped = True
                elif escaped or not hits <= allowed:
                    return f"{sorted(hits)[:3]}"
        return None

    def _track(self, q_mp: np.ndarray, X_target: np.ndarray, active_mp: np.ndarray, iterations: int = 20):
        """Damped least squares on the active joints until the move-group link reaches X_target."""
        pin = self.planner.pinocchio_model
        q = q_mp.copy()
        pos_err = ang_err = math.inf
        for _ in range(iterations):
            pin.compute_forward_kinematics(q)
            X = pose_from_mplib(pin.get_link_pose(self._tcp_link_index))
            e_p = X_target[:3, 3] - X[:3, 3]
            e_w = Rotation.from_matrix(X_target[:3, :3] @ X[:3, :3].T).as_rotvec()  # world frame
            pos_err, ang_err = float(np.linalg.norm(e_p)), float(np.linalg.norm(e_w))
            if pos_err < 1e-4 and ang_err < 1e-3:
                break
            pin.compute_full_jacobian(q)
            J = np.asarray(pin.get_link_jacobian(self._tcp_link_index, local=False))  # world-frame spatial
            # Spatial Jacobian rows (v at the world origin, w) -> velocity of the tool centre point p.
            J_p = J[:3] - _skew(X[:3, 3]) @ J[3:]
            J_a = np.vstack([J_p, J[3:]])[:, active_mp]
            e = np.concatenate([e_p, e_w])
            damping = 1e-4
            dq = J_a.T @ np.linalg.solve(J_a @ J_a.T + damping * np.eye(6), e)
            q[active_mp] += dq
        return q, pos_err, ang_err

    def _timed_plan(self, path_mp: np.ndarray, what: str) -> Plan:
        """Time-parameterize a joint path (mplib order) with TOPP-RA under the velocity/acceleration limits
        and return it in the caller's order, sampled every ``time_step_s`` (start and end included)."""
        path_mg = path_mp[:, self._mg_index]
        # Drop repeated waypoints: TOPP-RA needs a strictly increasing path parameter.
        keep = np.concatenate([[True], np.any(np.abs(np.diff(path_mg, axis=0)) > 1e-9, axis=1)])
        path_mg, path_mp = path_mg[keep], path_mp[keep]
        if len(path_mg) < 2:
            q = self._from_mp(path_mp[0])
            return Plan(q[None], np.zeros(1), True, f"{what}: already at the goal")
        ta.setup_logging("WARNING")
        s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(path_mg, axis=0), axis=1))])
        s /= s[-1]
        # A cubic spline through the waypoints (as mplib's TOPP): smooth, but it may cut the corners of an RRT
        # path, hence the dense re-check of the timed samples in _plan_between.
        spline = ta.SplineInterpolator(s, path_mg)
        instance = ta_algorithm.TOPPRA([ta_constraint.JointVelocityConstraint(self._vel_mg),
                                        ta_constraint.JointAccelerationConstraint(self._acc_mg)],
                                       spline, parametrizer="ParametrizeConstAccel")
        trajectory = instance.compute_trajectory()
        if trajectory is None:
            return self._failure(path_mp[0], f"{what}: time parameterization failed")
        n = max(2, int(math.ceil(trajectory.duration / self.time_step_s)) + 1)
        times = np.linspace(0.0, trajectory.duration, n)
        q_mg = np.asarray(trajectory(times))
        q_mg[-1] = path_mg[-1]  # end exactly on the goal
        path = np.repeat(path_mp[:1], n, axis=0)
        path[:, self._mg_index] = q_mg
        return Plan(np.array([self._from_mp(q) for q in path]), times, True, f"{what}: ok")

    def _failure(self, q_mp: np.ndarray, message: str) -> Plan:
        return Plan(self._from_mp(q_mp)[None], np.zeros(1), False, message)


def _as_pose(X) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.shape != (4, 4) or not np.all(np.isfinite(X)):
        raise ValueError(f"a pose must be a finite 4x4 array, got shape {X.shape}")
    return X
