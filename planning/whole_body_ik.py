"""Whole-body inverse kinematics with Drake: base x, y, yaw, torso height and the arm(s) solved together.

Let's Handle It (arXiv 2202.11792) Sec. 2.4 chose Drake's IK over PyBullet's because it respects joint limits, takes two
gripper goals at once (the dual-arm bucket task) and accepts extra constraints, notably a point-to-point distance
constraint that keeps the gripper away from the robot's body ("otherwise the arm would typically collide
with the base").

:class:`WholeBodyIK` parses the robot once; :meth:`WholeBodyIK.solve` builds one small nonlinear program
per call, constraint by constraint, and solves it with SNOPT (a few ms). Joint vectors go in and come out
in the caller's ``joint_names`` order and are mapped to Drake's own order by name. Poses are 4x4 numpy
arrays named by frames: ``X_WG`` is the pose of the gripper's tool-centre frame G in the world W.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pydrake.math import RotationMatrix
from pydrake.multibody.inverse_kinematics import InverseKinematics
from pydrake.solvers import IpoptSolver, SnoptSolver, SolverOptions

from handleit.robot_plant import welded_plant
from handleit.types import RobotModel

from .mobile_panda_names import BASE_JOINT_NAMES, BASE_LINK_NAME, ROOT_LINK_NAME, TORSO_LINK_NAME

# Cost weights of the "stay near the current configuration" term, per joint group (1/m^2 or 1/rad^2).
# The arm is the cheap, fast and precise way to move the gripper (Panda joints: 2.2-2.6 rad/s at up to
# ~1 m lever arm); the base and torso are slow (0.5 m/s) and less precise, and a 0.1 rad base yaw swings
# the gripper ~0.1 m per metre of reach. So the base is 10x dearer than the arm: small corrections
# (pregrasp -> grasp, a few cm) go to the arm, and the base moves only when the goal is out of the arm's
# reach, which the constraints, not the cost, then force.
DEFAULT_WEIGHTS = {"base_translation": 10.0, "base_rotation": 10.0, "base_height": 10.0, "arm": 1.0}

# Point C that the gripper is kept away from (Let's Handle It Sec. 2.4): on the torso's vertical axis at shoulder
# height, in the frame of the link that the torso-height joint moves (``adjustable_body``; the Panda
# shoulders sit 0.1315 + 0.2885 = 0.42 m above it). A point that rides up and down with the torso keeps the
# constraint mostly horizontal where the arm could hit the torso column; a point on the ground-level
# ``mobile_base`` would constrain little once the gripper is high. On 6000 random collision-free arm
# configurations (single-arm robot, random torso height), the arm touched the torso in 27% of those with the
# tool centre within 0.4 m of C, 19% within 0.5 m, and 2% beyond 0.5 m.
MOBILE_PANDA_CLEARANCE_LINK = TORSO_LINK_NAME
MOBILE_PANDA_P_LC_M = (0.0, 0.0, 0.42)
DEFAULT_MIN_BASE_TO_GRIPPER_M = 0.5

# The first solve asks for this fraction of the tolerances: with a posture cost alone, every solution sits on
# the edge of the tolerance (5 mm, 0.02 rad off), since using the slack lets the joints stay closer to the
# nominal. A tight first try gives 0.5 mm solutions for little extra time (measured median 2.7 ms instead of
# 2.1 ms on random goals up to 3 m away); the full tolerances are the fallback. (Goal-tracking costs instead
# made SNOPT about 3x slower for a similar effect.)
PRECISE_TOLERANCE_FRACTION = 0.1

# Feasible solves here take far fewer major iterations; the limit bounds the time spent proving a goal
# unreachable (measured: ~30 ms instead of ~170 ms with SNOPT's default of 1000).
SNOPT_MAJOR_ITERATIONS = 200
# ``solve(..., quick=True)``, for searches over many candidates (the dual-arm holds: 24 grasps and their pregrasps
# per plan, which the robot waits for in real time): SNOPT stops at this major optimality tolerance (its default
# 1e-6) and iteration limit. Feasibility is held as tightly and success is still judged by FK. Measured on the
# PushChair holds of test seeds 0-5: 0.30-0.54 s a plan instead of 0.64-1.05 s, the chosen holds' times to reach
# and push 0-1 % apart (benchmarks/hold_plan_cost.py).
QUICK_OPTIMALITY_TOLERANCE = 1e-3
QUICK_MAJOR_ITERATIONS = 60
_LIMIT_SLACK = 1e-6  # m or rad: SNOPT's feasibility tolerance; a bound violated by less than this is met


@dataclass(frozen=True)
class IKResult:
    """The outcome of one :meth:`WholeBodyIK.solve`.

    ``q`` is in the caller's ``joint_names`` order. When ``success`` is False it is the solver's best point
    (within joint limits, fixed joints at their values) for diagnosis only: do not send it to the robot.
    Errors are the worst over the goals, measured by forward kinematics of ``q``.
    """

    q: np.ndarray
    success: bool
    position_error_m: float
    angle_error_rad: float
    solve_time_s: float
    message: str = ""
    errors_by_side: dict[str, tuple[float, float]] = field(default_factory=dict)  # side -> (m, rad)


def rotation_angle_rad(R_AB: np.ndarray) -> float:
    """Angle (rad, in [0, pi]) of the rotation matrix ``R_AB``: the geodesic distance from identity."""
    cos_angle = (np.trace(R_AB) - 1.0) / 2.0
    return float(math.acos(min(1.0, max(-1.0, cos_angle))))


class WholeBodyIK:
    """Whole-body IK for a mobile manipulator (Let's Handle It Sec. 2.4), built once per robot.

    Args:
        urdf_path: robot URDF. Its root link (``root_link``) is welded to the world, so the planar base
            joints are ordinary joints of the model.
        joint_names: the caller's joint order (e.g. ``RobotModel.joint_names``); must name every joint of
            the URDF that has a position. Every ``q`` in and out of this class is in this order.
        tcp_links: arm side -> tool-centre link (e.g. ``{"right": "right_panda_hand_tcp"}``).
        base_link: the mobile base link (pose reported by :meth:`base_pose`, used to seed retries).
        base_joint_names: the base joints in the order x, y, yaw, height. The x/y joints must translate
            along the world x/y axes and the yaw joint turn about world z (the mobile Panda's layout).
            Empty for an arm bolted in place (the tabletop Panda): then the URDF's root (``root_link``) is
            the IK's world, so goals are given in the robot's root frame, and there is no body point C
            unless ``clearance_link`` is named.
        finger_joint_names: joints held at their current values in every solve (default: every joint
            whose name contains "finger").
        clearance_link, p_LC_m: the point C (m, in the frame of ``clearance_link``) that the tool centres
            keep away from, see :data:`MOBILE_PANDA_P_LC_M`; ``clearance_link=None``: no such constraint.
        root_link: the URDF link welded to the world.
        weights: cost weight per joint group ("base_translation", "base_rotation", "base_height", "arm";
            1/m^2 or 1/rad^2) or per joint name; defaults :data:`DEFAULT_WEIGHTS`.
        max_attempts: solves tried per call until one verifies: from the current configuration with a tenth
            of the tolerances (:data:`PRECISE_TOLERANCE_FRACTION`), then with the full tolerances, then from a
            seed with the base carried to the goal and the arm unchanged (:meth:`_base_carried_seed`).
    """

    def __init__(
        self,
        urdf_path: str | Path,
        joint_names: Sequence[str],
        tcp_links: Mapping[str, str],
        base_link: str = BASE_LINK_NAME,
        *,
        base_joint_names: Sequence[str] = BASE_JOINT_NAMES,
        finger_joint_names: Sequence[str] | None = None,
        clearance_link: str | None = MOBILE_PANDA_CLEARANCE_LINK,
        p_LC_m: Sequence[float] = MOBILE_PANDA_P_LC_M,
        root_link: str = ROOT_LINK_NAME,
        weights: Mapping[str, float] | None = None,
        max_attempts: int = 3,
    ):
        self.urdf_path = Path(urdf_path)
        self.joint_names = tuple(joint_names)
        # Caller's order <-> Drake's position order, by joint name (caller i -> plant).
        self.plant, self._context, self._plant_index = welded_plant(self.urdf_path, root_link, self.joint_names)
        self.nq = self.plant.num_positions()

        self.lower_limits = self.plant.GetPositionLowerLimits()[self._plant_index]
        self.upper_limits = self.plant.GetPositionUpperLimits()[self._plant_index]

        self.tcp_links = dict(tcp_links)
        self._tcp_frames = {side: self.plant.GetFrameByName(link) for side, link in self.tcp_links.items()}
        self.base_link = base_link
        self._base_frame = self.plant.GetFrameByName(base_link)
        self._clearance_frame = None if clearance_link is None else self.plant.GetFrameByName(clearance_link)
        self.p_LC_m = np.asarray(p_LC_m, dtype=float).reshape(3)

        self.base_joint_names = tuple(base_joint_names)
        if len(self.base_joint_names) not in (0, 4) or not set(self.base_joint_names) <= set(self.joint_names):
            raise ValueError(f"base_joint_names must be 4 joints (x, y, yaw, height) of joint_names, or none for "
                             f"a fixed arm, got {base_joint_names}")
        if finger_joint_names is None:
            finger_joint_names = [n for n in self.joint_names if "finger" in n]
        self.finger_joint_names = tuple(finger_joint_names)
        self._caller_index = {n: i for i, n in enumerate(self.joint_names)}
        self._finger_index_set = {self._caller_index[n] for n in self.finger_joint_names}
        self._weights = dict(weights or {})
        self._default_weights = self._joint_weights(self._weights)

        self.max_attempts = int(max_attempts)
        self._solver = SnoptSolver()
        self._solver_options = SolverOptions()
        if not self._solver.available() or not self._solver.enabled():  # pragma: no cover - drake wheels ship SNOPT
            self._solver = IpoptSolver()
        else:
            self._solver_options.SetOption(SnoptSolver.id(), "Major iterations limit", SNOPT_MAJOR_ITERATIONS)
        self._quick_options = SolverOptions()
        if isinstance(self._solver, SnoptSolver):
            self._quick_options.SetOption(SnoptSolver.id(), "Major iterations limit", QUICK_MAJOR_ITERATIONS)
            self._quick_options.SetOption(SnoptSolver.id(), "Major optimality tolerance", QUICK_OPTIMALITY_TOLERANCE)

    @classmethod
    def from_robot_model(cls, model: RobotModel, **kwargs) -> WholeBodyIK:
        """An IK for ``model``'s robot: its URDF, joint order, tool centres, base link and joint groups.
        ``kwargs`` go to the constructor (e.g. ``weights``)."""
        fingers = [n for names in model.finger_joint_names.values() for n in names]
        if not model.base_joint_names:  # an arm bolted in place: its root link is the IK's world
            kwargs.setdefault("root_link", model.base_link_name)
            kwargs.setdefault("clearance_link", None)
        return cls(model.urdf_path, model.joint_names, model.tcp_link_names, model.base_link_name,
                   base_joint_names=model.base_joint_names, finger_joint_names=fingers, **kwargs)

    # ------------------------------------------------------------------------------------------------
    # Kinematics

    def forward_kinematics(self, q: np.ndarray, link: str) -> np.ndarray:
        """Pose ``X_WL`` (4x4) of ``link`` in the world for joint positions ``q`` (caller's order, m/rad)."""
        self.plant.SetPositions(self._context, self._to_plant(q))
        return self.plant.CalcRelativeTransform(self._context, self.plant.world_frame(),
                                                self.plant.GetFrameByName(link)).GetAsMatrix4()

    def base_pose(self, q: np.ndarray) -> np.ndarray:
        """Pose ``X_WB`` (4x4) of the base link in the world for ``q`` (caller's order)."""
        return self.forward_kinematics(q, self.base_link)

    def tcp_pose(self, q: np.ndarray, side: str) -> np.ndarray:
        """Pose ``X_WG`` (4x4) of the tool centre of arm ``side`` in the world for ``q`` (caller's order)."""
        return self.forward_kinematics(q, self.tcp_links[side])

    def _to_plant(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float).reshape(-1)
        if q.shape[0] != len(self.joint_names):
            raise ValueError(f"q has {q.shape[0]} entries, joint_names {len(self.joint_names)}")
        q_plant = np.empty(self.nq)
        q_plant[self._plant_index] = q
        return q_plant

    def _from_plant(self, q_plant: np.ndarray) -> np.ndarray:
        return np.asarray(q_plant, dtype=float)[self._plant_index].copy()

    def _joint_weights(self, weights: Mapping[str, float] | None) -> np.ndarray:
        """Cost weight per joint (caller's order): a joint-name entry beats its group's entry."""
        merged = dict(DEFAULT_WEIGHTS)
        merged.update(weights or {})
        group = {}
        if self.base_joint_names:
            x, y, yaw, height = self.base_joint_names
            group = {x: "base_translation", y: "base_translation", yaw: "base_rotation", height: "base_height"}
        w = np.empty(len(self.joint_names))
        for i, name in enumerate(self.joint_names):
            if name in merged:
                w[i] = merged[name]
            elif name in self.finger_joint_names:
                w[i] = 0.0  # held fixed anyway
            else:
                w[i] = merged[group.get(name, "arm")]
        if np.any(w < 0):
            raise ValueError("cost weights must be non-negative")
        return w

    # ------------------------------------------------------------------------------------------------
    # Solve

    def solve(
        self,
        q_current: np.ndarray,
        goals: Mapping[str, np.ndarray],
        *,
        position_tolerance_m: float = 0.005,
        angle_tolerance_rad: float = 0.02,
        min_base_to_gripper_m: float | None = DEFAULT_MIN_BASE_TO_GRIPPER_M,
        max_base_to_gripper_m: float | None = None,
        fixed_joints: Sequence[str] = (),
        q_nominal: np.ndarray | None = None,
        weights: Mapping[str, float] | None = None,
        initial_guesses: Sequence[np.ndarray] = (),
        base_keep_out: tuple[Sequence[float], float] | None = None,
        closing_axis_tilt_rad: float = 0.0,
        velocity_limits: np.ndarray | None = None,
        time_weight: float = 0.0,
        quick: bool = False,
    ) -> IKResult:
        """Joint positions that put each tool centre at its goal pose, near the current configuration.

        Args:
            q_current: current joint positions (m, rad), caller's order. Initial guess; finger joints and
                ``fixed_joints`` stay at these values. Clipped into the joint limits first.
            goals: arm side -> ``X_WG`` (4x4), the goal pose of that arm's tool centre in the world. One or
                two sides (the dual-arm robot solves both together).
            position_tolerance_m: largest distance (m) between a tool centre and its goal position.
            angle_tolerance_rad: largest rotation angle (rad) between a tool centre and its goal orientation.
            min_base_to_gripper_m, max_base_to_gripper_m: bounds (m) on the distance from the torso point C
                (``clearance_link``, ``p_LC_m``) to each tool centre; None for no bound.
            fixed_joints: names of further joints held at their current values (e.g. the base joints, to
                reach with the arm alone).
            q_nominal: configuration (caller's order) the cost pulls towards; default ``q_current``.
            weights: cost weights overriding the constructor's, per group or joint name (1/m^2, 1/rad^2).
            base_keep_out: ``(p_W, radius_m)``: the base origin (ground level) keeps at least ``radius_m`` from
                the vertical line through ``p_W`` (x, y in the world), e.g. out of a swinging door's sweep.
            initial_guesses: further starting points (caller's order), tried in turn after the default
                attempts fail. SNOPT is a local method: a goal that needs a large wrist roll from the current
                posture often needs a start with the wrist already rolled. Held joints keep their values.
            closing_axis_tilt_rad: each tool may turn about its closing axis (G's y, the line between the
                fingertips) by up to this angle (rad) away from its goal orientation; only the closing axis is
                then held to ``angle_tolerance_rad``. A pinch across a flat panel or a thin rim grips the same
                when turned that way, and the freedom spares the wrist (the slowest part of a reach). The
                orientation reached is FK of ``q`` (:meth:`tcp_pose`).
            velocity_limits, time_weight: with both given (joint speeds in m/s or rad/s, caller's order; a cost
                weight per second), the cost also counts the time to go from ``q_current`` at those speeds,
                every joint arriving together (the slowest joint's displacement over its speed; joints with no
                limit given, 0, are not counted): among solutions, the quickest to reach rather than only the
                nearest in the weighted sense.
            quick: for a search over many candidates: the solver stops sooner on the cost
                (:data:`QUICK_OPTIMALITY_TOLERANCE`, :data:`QUICK_MAJOR_ITERATIONS`); the constraints and the
                success check are as without it.

        Returns:
            An :class:`IKResult`. An unreachable goal gives ``success=False``; nothing is raised for it.
            ``success`` is True only when forward kinematics of ``q`` confirms every constraint.
        """
        t0 = time.perf_counter()
        if not goals:
            raise ValueError("goals is empty")
        unknown_sides = sorted(set(goals) - set(self.tcp_links))
        if unknown_sides:
            raise ValueError(f"no tool-centre link for sides {unknown_sides}; known: {sorted(self.tcp_links)}")
        unknown_fixed = sorted(set(fixed_joints) - set(self.joint_names))
        if unknown_fixed:
            raise ValueError(f"fixed_joints {unknown_fixed} are not in joint_names")
        goals_W = {side: _as_pose(X, f"goals[{side!r}]") for side, X in goals.items()}
        q0 = np.asarray(q_current, dtype=float).reshape(-1)
        if q0.shape[0] != len(self.joint_names):
            raise ValueError(f"q_current has {q0.shape[0]} entries, joint_names {len(self.joint_names)}")
        q0 = np.clip(q0, self.lower_limits, self.upper_limits)
        q_nom = q0 if q_nominal is None else np.asarray(q_nominal, dtype=float).reshape(-1)
        if q_nom.shape != q0.shape:
            raise ValueError("q_nominal must have one entry per joint name")
        w = self._default_weights if weights is None else self._joint_weights({**self._weights, **weights})
        held = set(self.finger_joint_names) | set(fixed_joints)
        held_index = np.array(sorted(self._caller_index[n] for n in held), dtype=int)
        keep_out = None if base_keep_out is None else (np.asarray(base_keep_out[0], dtype=float), float(base_keep_out[1]))
        speeds = None
        if velocity_limits is not None and time_weight > 0.0:
            speeds = np.asarray(velocity_limits, dtype=float).reshape(-1)
            if speeds.shape != q0.shape or np.any(speeds < 0) or not np.all(np.isfinite(speeds)):
                raise ValueError("velocity_limits must hold one finite, non-negative speed per joint name")
            speeds = (speeds, float(time_weight))
        tilt = float(closing_axis_tilt_rad)
        if not 0.0 <= tilt <= math.pi / 2:
            raise ValueError(f"closing_axis_tilt_rad must be in [0, pi/2], got {closing_axis_tilt_rad}")
        min_d = 0.0 if min_base_to_gripper_m is None else float(min_base_to_gripper_m)
        max_d = math.inf if max_base_to_gripper_m is None else float(max_base_to_gripper_m)
        if self._clearance_frame is None:  # no body point C (a fixed arm): the bounds do not apply
            min_d, max_d = 0.0, math.inf
        if min_d > max_d:
            raise ValueError(f"min_base_to_gripper_m ({min_d} m) exceeds max_base_to_gripper_m ({max_d} m)")

        # Attempts: (initial guess, fraction of the tolerances asked of the solver). Success is always judged
        # against the caller's tolerances.
        attempts = [(q0, PRECISE_TOLERANCE_FRACTION), (q0, 1.0)]
        base_free = bool(self.base_joint_names) and not set(self.base_joint_names[:3]) & held
        if base_free:
            attempts.append((self._base_carried_seed(q0, goals_W, held_index), 1.0))
        best = None
        attempts = attempts[: max(1, self.max_attempts)]
        for guess in initial_guesses:
            guess = np.clip(np.asarray(guess, dtype=float).reshape(-1), self.lower_limits, self.upper_limits)
            if guess.shape != q0.shape:
                raise ValueError("each initial guess must have one entry per joint name")
            guess[held_index] = q0[held_index]
            attempts.append((guess, 1.0))
            if base_free:  # the same arm posture with the base carried over, as for the current one
                attempts.append((self._base_carried_seed(guess, goals_W, held_index), 1.0))
        for seed, fraction in attempts:
            q, solver_ok = self._solve_once(q0, seed, goals_W, fraction * position_tolerance_m,
                                            fraction * angle_tolerance_rad, min_d, max_d, held_index, q_nom, w,
                                            keep_out, tilt, speeds, quick)
            report = self._verify(q, q0, goals_W, position_tolerance_m, angle_tolerance_rad, min_d, max_d, held_index,
                                  keep_out, tilt)
            if best is None or report[0] or report[3] < best[1][3]:
                best = (q, report, solver_ok)
            if report[0]:
                break
        q, (ok, pos_err, ang_err, _violation, by_side, why), solver_ok = best
        message = "ok" if ok else (why if solver_ok else f"solver found no feasible point: {why}")
        return IKResult(q=q, success=ok, position_error_m=pos_err, angle_error_rad=ang_err,
                        solve_time_s=time.perf_counter() - t0, message=message, errors_by_side=by_side)

    def _solve_once(self, q0, seed, goals_W, pos_tol, ang_tol, min_d, max_d, held_index, q_nom, w, keep_out=None,
                    tilt=0.0, speeds=None, quick=False):
        """One SNOPT solve from ``seed``; returns (q in the caller's order, solver reported success)."""
        # with_joint_limits: the decision variables q are bounded by the URDF's joint limits (Let's Handle It
        # chose Drake because PyBullet's IK ignores them).
        ik = InverseKinematics(self.plant, self._context, with_joint_limits=True)
        q_var = ik.q()
        world = self.plant.world_frame()
        # A box of half-width tol/sqrt(3) per axis keeps the Euclidean position error within tol.
        half_width_m = pos_tol / math.sqrt(3.0)
        for side, X_WG in goals_W.items():
            frame_G = self._tcp_frames[side]
            p_WG = X_WG[:3, 3]
            # The tool centre (origin of G) reaches the goal position.
            ik.AddPositionConstraint(frameB=frame_G, p_BQ=np.zeros(3), frameA=world,
                                     p_AQ_lower=p_WG - half_width_m, p_AQ_upper=p_WG + half_width_m)
            if tilt > 0.0:
                # G's closing axis (y) within ang_tol of the goal's, and its approach (z) within the tilt: G may
                # turn about y by up to the tilt and no other way.
                ik.AddAngleBetweenVectorsConstraint(world, X_WG[:3, 1], frame_G, np.array([0.0, 1.0, 0.0]),
                                                    0.0, ang_tol)
                ik.AddAngleBetweenVectorsConstraint(world, X_WG[:3, 2], frame_G, np.array([0.0, 0.0, 1.0]),
                                                    0.0, tilt + ang_tol)
            else:
                # G's orientation is within ang_tol (rad, angle of the relative rotation) of the goal's.
                ik.AddOrientationConstraint(frameAbar=world, R_AbarA=RotationMatrix(X_WG[:3, :3]),
                                            frameBbar=frame_G, R_BbarB=RotationMatrix(), theta_bound=ang_tol)
            # Let's Handle It Sec. 2.4: keep the gripper away from the body, or the arm folds into the torso.
            if self._clearance_frame is not None and (min_d > 0.0 or math.isfinite(max_d)):
                ik.AddPointToPointDistanceConstraint(self._clearance_frame, self.p_LC_m, frame_G, np.zeros(3),
                                                     min_d, max_d)
        if keep_out is not None:
            # The base stays out of a disc (e.g. a door's sweep): the distance from its ground-level origin to
            # a point at ground level on the disc's axis.
            p_W, radius_m = keep_out
            ik.AddPointToPointDistanceConstraint(self._base_frame, np.zeros(3), world,
                                                 np.array([p_W[0], p_W[1], 0.0]), float(radius_m), math.inf)
        prog = ik.get_mutable_prog()
        q0_plant = self._to_plant(q0)
        for i in held_index:
            # Caller-fixed joints keep their current value. Fingers are left free instead: they do not move
            # the tool centre, and Drake turns the URDF's <mimic> into a coupler constraint that IK enforces,
            # so pinning both fingers at values that differ slightly (a gripper mid-motion) would make every
            # goal infeasible. They are reported unchanged below.
            if i in self._finger_index_set:
                continue
            j = self._plant_index[i]
            prog.AddBoundingBoxConstraint(q0_plant[j], q0_plant[j], q_var[j])
        # Quadratic cost (q - q_nominal)^T W (q - q_nominal): among the many solutions of a redundant robot,
        # the one closest to the nominal (current) configuration, base moves dearer than arm moves.
        W_plant = np.diag(self._to_plant(w))
        prog.AddQuadraticErrorCost(W_plant, self._to_plant(q_nom), q_var)
        seed_plant = self._to_plant(seed)
        guess = seed_plant
        if speeds is not None:
            # Time to go T >= |q_i - q0_i| / v_i for every joint with a speed (two linear constraints each),
            # weighted in the cost: the minimum over T is the slowest joint's time.
            v, time_weight = speeds
            T = prog.NewContinuousVariables(1, "T")[0]
            for i in np.flatnonzero(v > 0):
                j = self._plant_index[i]
                prog.AddLinearConstraint(q_var[j] - float(v[i]) * T <= float(q0_plant[j]))
                prog.AddLinearConstraint(q_var[j] + float(v[i]) * T >= float(q0_plant[j]))
            prog.AddLinearCost(time_weight * T)
            moving = v > 0
            t_seed = float(np.max(np.abs(seed - q0)[moving] / v[moving])) if moving.any() else 0.0
            guess = np.concatenate([seed_plant, [t_seed]])
        prog.SetInitialGuess(q_var, seed_plant)
        result = self._solver.Solve(prog, guess, self._quick_options if quick else self._solver_options)
        q = np.clip(self._from_plant(result.GetSolution(q_var)), self.lower_limits, self.upper_limits)
        q[held_index] = q0[held_index]
        return q, bool(result.is_success())

    def _verify(self, q, q0, goals_W, pos_tol, ang_tol, min_d, max_d, held_index, keep_out=None, tilt=0.0):
        """Check every constraint by forward kinematics.

        Returns (ok, worst position error m, worst angle error rad, scalar violation for ranking attempts,
        errors by side, reason)."""
        q_plant = self._to_plant(q)
        self.plant.SetPositions(self._context, q_plant)
        world = self.plant.world_frame()
        p_WC = None
        if self._clearance_frame is not None:
            p_WC = self.plant.CalcRelativeTransform(self._context, world, self._clearance_frame).multiply(self.p_LC_m)
        by_side, reasons = {}, []
        violation = 0.0
        for side, X_WG_goal in goals_W.items():
            X_WG = self.plant.CalcRelativeTransform(self._context, world, self._tcp_frames[side]).GetAsMatrix4()
            pos_err = float(np.linalg.norm(X_WG[:3, 3] - X_WG_goal[:3, 3]))
            ang_err = rotation_angle_rad(X_WG_goal[:3, :3].T @ X_WG[:3, :3])
            if tilt > 0.0:  # the closing axis is what must be met; the turn about it within the tilt
                turn_err = max(0.0, _angle_between(X_WG_goal[:3, 2], X_WG[:3, 2]) - tilt)
                ang_err = max(_angle_between(X_WG_goal[:3, 1], X_WG[:3, 1]), turn_err)
            by_side[side] = (pos_err, ang_err)
            distance_m = 0.0 if p_WC is None else float(np.linalg.norm(X_WG[:3, 3] - p_WC))
            violation += max(0.0, pos_err - pos_tol) + max(0.0, ang_err - ang_tol)
            violation += max(0.0, min_d - distance_m) + max(0.0, distance_m - max_d)
            if pos_err > pos_tol + 1e-5:
                reasons.append(f"{side}: position error {pos_err:.4f} m > {pos_tol} m")
            if ang_err > ang_tol + 1e-5:
                reasons.append(f"{side}: angle error {ang_err:.4f} rad > {ang_tol} rad")
            if distance_m < min_d - 1e-5 or distance_m > max_d + 1e-5:
                reasons.append(f"{side}: body-to-gripper distance {distance_m:.3f} m outside [{min_d}, {max_d}] m")
        if keep_out is not None:
            p_WB = self.plant.CalcRelativeTransform(self._context, world, self._base_frame).translation()
            gap_m = float(np.hypot(p_WB[0] - keep_out[0][0], p_WB[1] - keep_out[0][1]))
            violation += max(0.0, keep_out[1] - gap_m)
            if gap_m < keep_out[1] - 1e-4:
                reasons.append(f"base {gap_m:.3f} m from the keep-out centre, inside {keep_out[1]:.3f} m")
        if np.any(q < self.lower_limits - _LIMIT_SLACK) or np.any(q > self.upper_limits + _LIMIT_SLACK):
            reasons.append("joint limits violated")
        if held_index.size and np.any(np.abs(q[held_index] - q0[held_index]) > _LIMIT_SLACK):
            reasons.append("a fixed joint moved")
        pos_worst = max(e[0] for e in by_side.values())
        ang_worst = max(e[1] for e in by_side.values())
        return not reasons, pos_worst, ang_worst, violation, by_side, "; ".join(reasons)

    def _base_carried_seed(self, q0: np.ndarray, goals_W: Mapping[str, np.ndarray], held_index: np.ndarray) -> np.ndarray:
        """A second initial guess: the arm posture of ``q0``, with the base moved (x, y, yaw, height) so that
        the tool centres' mean position and the first goal's heading match the goals.

        SNOPT from the current configuration can stall when the goal is far away (the arm stretches, the
        base barely moves); carrying the base over first gives it a nearby start."""
        x, y, yaw, height = (self._caller_index[n] for n in self.base_joint_names)
        sides = list(goals_W)
        X_WT = {s: self.tcp_pose(q0, s) for s in sides}
        # Heading change: yaw of the relative rotation from the current to the goal orientation (first side).
        R_rel = goals_W[sides[0]][:3, :3] @ X_WT[sides[0]][:3, :3].T
        dyaw = math.atan2(R_rel[1, 0] - R_rel[0, 1], R_rel[0, 0] + R_rel[1, 1])
        p_WT = np.mean([X_WT[s][:3, 3] for s in sides], axis=0)
        p_WGoal = np.mean([goals_W[s][:3, 3] for s in sides], axis=0)
        p_WB = self.base_pose(q0)[:3, 3]
        c, s_ = math.cos(dyaw), math.sin(dyaw)
        Rz = np.array([[c, -s_], [s_, c]])
        # Turning the base by dyaw about its origin, then translating it, moves T to Rz (p_T - p_B) + p_B'.
        p_WB_new = p_WGoal[:2] - Rz @ (p_WT[:2] - p_WB[:2])
        seed = q0.copy()
        seed[x] += p_WB_new[0] - p_WB[0]
        seed[y] += p_WB_new[1] - p_WB[1]
        seed[yaw] = _wrap_into(q0[yaw] + dyaw, self.lower_limits[yaw], self.upper_limits[yaw], q0[yaw])
        seed[height] += p_WGoal[2] - p_WT[2]
        seed = np.clip(seed, self.lower_limits, self.upper_limits)
        seed[held_index] = q0[held_index]
        return seed


def _angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) between two vectors."""
    c = float(a @ b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12)
    return math.acos(min(1.0, max(-1.0, c)))


def _wrap_into(angle: float, lower: float, upper: float, near: float) -> float:
    """The angle equivalent to ``angle`` (mod 2 pi) within [lower, upper] closest to ``near``."""
    candidates = [angle + k * 2 * math.pi for k in range(-3, 4)]
    inside = [a for a in candidates if lower <= a <= upper]
    if not inside:
        return float(np.clip(angle, lower, upper))
    return float(min(inside, key=lambda a: abs(a - near)))


def _as_pose(X, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if X.shape != (4, 4) or not np.all(np.isfinite(X)):
        raise ValueError(f"{name} must be a finite 4x4 pose, got shape {X.shape}")
    R = X[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-4) or np.linalg.det(R) < 0:
        raise ValueError(f"{name} has no proper rotation in its upper-left 3x3 block")
    # Re-orthonormalize: Drake's RotationMatrix refuses matrices off by more than ~1e-14.
    U, _, Vt = np.linalg.svd(R)
    X = X.copy()
    X[:3, :3] = U @ Vt
    return X
