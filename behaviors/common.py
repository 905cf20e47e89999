"""Building blocks shared by the task trees: the tools a tree's nodes use, a blackboard-backed node base
class, generic skills (move to a joint configuration, operate the gripper, hold still) and a timeout
counted in control steps.

Data flows through the py_trees blackboard, in a namespace per solver instance: the solver writes
``observation`` before each tick and reads ``command`` after it; nodes read and write the task's keys.
Tools (IK, PID, grasp predictor) are handed to the nodes that use them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import py_trees
from py_trees.common import Access, Status

from handleit.control.actions import world_to_base_velocity
from handleit.control.pid import PIDController
from handleit.types import Command, GripperCommand, Observation, RobotModel

from .state_history import observation_at_cloud


@dataclass
class Tools:
    """What the nodes of one solver share besides blackboard data: the robot model and the solvers."""

    model: RobotModel
    ik: object  # handleit.planning.whole_body_ik.WholeBodyIK
    pid: PIDController  # Let's Handle It (arXiv 2202.11792) gains: holds and goal-seeking skills
    tracking_pid: PIDController  # the same without integral action: follows moving references
    grasp_predictor: object  # a handleit.perception.grasp_predictors.GraspPredictor
    namespace: str
    segmenter: object = None  # a handleit.perception.segmenters.Segmenter: the masks the nodes read
    motion_planner: object = None  # () -> handleit.planning.motion_planning.ArmMotionPlanner, built on first use
    self_filter: object = None  # () -> handleit.perception.robot_self_filter.RobotSelfFilter, built on first use
    side: str = "right"  # the arm a single-arm tree uses
    sides: tuple[str, ...] = ()  # every arm the tree drives (default: just ``side``); dual-arm trees use both
    failures: list[str] = field(default_factory=list)  # names of failed checks, in order (for records)
    failure_reasons: list[str] = field(default_factory=list)  # "node: why", in the same order
    # Trees composed for a goal (behaviors/backchaining.py): (tick, skill, "started" / "succeeded" / "failed" /
    # "stopped"), in order: which skills ran, and where a chain broke.
    skill_events: list[tuple[int, str, str]] = field(default_factory=list)
    # The same events with the predicates perception believed at each (the hand-offs), and a failure's reason:
    # dicts {"tick", "skill", "event", "predicates": {predicate: bool}, "failure"?}.
    handoffs: list[dict] = field(default_factory=list)
    # Skills a composed tree stopped retrying ("<skill> attempts left?" failed), in order.
    out_of_attempts: list[str] = field(default_factory=list)
    realtime: bool = False  # planning nodes plan off the tick thread, the robot held still (behaviors/background.py)
    # Where a real-time plan runs: "thread" (a worker thread of this process) or "process" (the planning worker
    # process, behaviors/planning_worker.py: no solver holds this process's GIL). Lockstep plans in the tick.
    planning: str = "thread"
    spec: object = None  # the behaviors.solver_tools.ToolsSpec these tools were built from (the worker builds its own)
    # The segmenter as the segmentation worker process builds it: (name, target, model, kwargs), and its key there
    # ((the solver's number, its reset count): one segmenter per solver, reset with it). Set by TreeSolver.
    segmenter_spec: object = None
    segmenter_key: object = None

    def __post_init__(self):
        m = self.model
        self.sides = tuple(self.sides) or (self.side,)
        self.base_index = m.index(m.base_joint_names)
        self.arm_index = m.index(m.arm_joint_names[self.side])
        self.arm_indices = {s: m.index(m.arm_joint_names[s]) for s in self.sides}
        self.finger_indices = {s: m.index(m.finger_joint_names[s]) for s in self.sides}
        # The fingers of every driven arm (a gripper skill waits for all of them to settle).
        self.finger_index = np.concatenate([self.finger_indices[s] for s in self.sides])
        self.controlled = np.concatenate([self.base_index, *self.arm_indices.values()])


class Skill(py_trees.behaviour.Behaviour):
    """A node with blackboard access in its solver's namespace (keys declared with their access)."""

    def __init__(self, name: str, tools: Tools, reads: tuple[str, ...] = (), writes: tuple[str, ...] = ()):
        super().__init__(name)
        self.tools = tools
        self.bb = self.attach_blackboard_client(name=name, namespace=tools.namespace)
        for key in set(reads) - set(writes):
            self.bb.register_key(key, access=Access.READ)
        for key in writes:
            self.bb.register_key(key, access=Access.WRITE)

    def fail(self, why: str) -> Status:
        """Return FAILURE, saying why (shown in the printed tree, kept in the episode record)."""
        self.feedback_message = why
        self.tools.failures.append(self.name)
        self.tools.failure_reasons.append(f"{self.name}: {why}")
        return Status.FAILURE

    def observation_at_cloud(self) -> Observation | None:
        """The observation with the robot's state (joints, base and tool poses) at the moment its cloud was taken,
        from the tree solver's ``state_history`` (behaviors/state_history.py); None where the cloud carries no
        stamp or the history does not reach it. In real time the cloud is older than the state handed to the tree
        (latency compensation predicts the state to now): what compares the cloud with the robot compares it with
        the robot of the cloud's moment."""
        observation = self.bb.observation
        if observation.points_time_s is None:
            return None
        self.bb.register_key("state_history", access=Access.READ)
        if not self.bb.exists("state_history"):
            return None
        return observation_at_cloud(observation, self.bb.state_history)

    def send(self, qvel: np.ndarray, gripper: GripperCommand | dict[str, GripperCommand] = "hold") -> None:
        """Command the joints; ``gripper`` is one command for every driven arm, or one per side."""
        grippers = gripper if isinstance(gripper, dict) else {s: gripper for s in self.tools.sides}
        self.bb.command = Command(qvel=qvel, gripper=grippers)



class StepTimeout(py_trees.decorators.Decorator):
    """FAILURE when the child is still RUNNING after ``max_steps`` ticks (control steps, not wall time:
    py_trees' own Timeout measures wall-clock seconds, which mean nothing in a simulation)."""

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, max_steps: int, tools: Tools):
        super().__init__(name=name, child=child)
        self.max_steps, self.tools, self.ticks = max_steps, tools, 0

    def initialise(self) -> None:
        self.ticks = 0
        self.feedback_message = ""

    def update(self) -> Status:
        self.ticks += 1
        if self.decorated.status == Status.RUNNING and self.ticks >= self.max_steps:
            self.decorated.stop(Status.INVALID)
            self.feedback_message = f"timed out after {self.max_steps} steps"
            self.tools.failures.append(self.name)
            self.tools.failure_reasons.append(f"{self.name}: {self.feedback_message}")
            return Status.FAILURE
        return self.decorated.status


FINGER_GAP_EMPTY_M = 0.004  # a Panda gripper closed tighter than this holds nothing
FINGERS_MOVED_M = 0.001  # a finger joint moved this far: OperateGripper's command has reached the fingers
# JointReference: the most control periods one advance covers after missed ticks (real time): a stall longer than
# this (a tick held up for 0.1 s) is not caught up in one jump.
MAX_CATCH_UP_STEPS = 10

RAMP_S = 0.15  # time to go from rest to full speed and back (s): the 30+ kg base cannot stop dead
# The mobile base's drives (ApproachStandoff, GoToCabinetFront), a fraction of its limits (1 m/s per planar
# axis, 3.14 rad/s): empty-handed 0.9, ramped over 0.15 s; carrying 0.7, ramped over 0.7 s (the acceleration of
# the earlier 0.5 over 0.5 s, 1 m/s^2, so that the object does not shake loose). Drives took 40-60% of
# TidyIntoDrawer's 3000 steps at 0.6 / 0.5, and the episodes that ran out of steps did so in a drive (test seed 7:
# "drive to the object" 977 steps over 5.6 m).
DRIVE_SPEED_FRACTION, DRIVE_RAMP_S = 0.9, 0.15
CARRY_SPEED_FRACTION, CARRY_RAMP_S = 0.7, 0.7
# The mobile base's velocity lags its command by about this much (s): the velocity drive's damping (1000 N s/m)
# on the ~40 kg it moves; seen as a 4-step delay of the measured velocity behind a decelerating command.
BASE_VELOCITY_LAG_S = 0.04
# MoveToConfiguration's preshaped fingers pushed this much narrower than their preshape (m): on the handle, not
# around it.
PRESHAPE_SQUEEZE_M = 0.008
SQUEEZE_NEAR_M = 0.08  # ... checked this close to the grasp (the tool centre's distance to its goal)
# Extra IK starts: the wrist (the arm's last joint) rolled by these angles from the current posture. SNOPT is
# local: a goal that needs a large wrist roll is found from a start with the wrist already rolled. The handle
# trees use all three; the pick trees the quarter turns only (pick_nodes.PICK_WRIST_ROLLS_RAD).
WRIST_ROLL_STARTS_RAD = (-math.pi / 2, math.pi / 2, math.pi)


class JointReference:
    """A reference that moves the base and arm joints toward a target along a straight line in joint space,
    all joints arriving together, at ``speed_fraction`` of the velocity limits with a trapezoidal speed
    profile (``ramp_s`` from rest to full speed and back); the tracking command is P on the reference plus its velocity fed forward.

    A PID on the target alone moves each joint at its own pace: the arm outruns the base and the hand sweeps
    into the cabinet on its way. The reference is handed from one skill to the next through the blackboard
    key ``reference`` (tick, q, feed-forward, speed factor), so that consecutive moves continue smoothly:
    the robot lags its reference while moving, and restarting from the measured configuration would pull it
    back."""

    def __init__(self, tools: Tools, speed_fraction: float | np.ndarray, ramp_s: float = RAMP_S, independent=(),
                 base_frame_budget: bool = False, base_lead_s: float = 0.0):
        self.tools, self.speed_fraction, self.ramp_s = tools, speed_fraction, ramp_s
        # The base's velocity follows a command with a lag (its drive: a first-order response): commanding the
        # reference's velocity this far ahead (its acceleration times the lag) keeps the base on the reference
        # when it slows down, instead of overshooting and being pulled back.
        self.base_lead_s = base_lead_s
        # The base's x/y velocity limits hold per axis of its own frame: a move diagonal to its heading may run
        # at up to sqrt(2) times one axis' limit. Budgeted so when set (the base's heading fixed during the
        # move); else as one vector at the lower limit, which is safe whatever the heading does.
        self.base_frame_budget = base_frame_budget
        # Joints that move on their own trapezoid at full speed instead of arriving with the rest (the torso
        # lifting a held bucket while the base carries it: neither waits for the other).
        self.independent = np.asarray(independent, dtype=int)
        self.k_independent = np.zeros(len(self.independent))
        self.q = None
        self.following = False

    def restart(self) -> None:
        """Forget the running move: the next :meth:`follow` starts a new one (a skill's ``initialise``)."""
        self.following = False

    def follow(self, q_target: np.ndarray, obs: Observation, bb, continue_handover: bool = True):
        """One step of a skill's move toward ``q_target``: on the first call after :meth:`restart`, start
        from the previous skill's reference on the blackboard ``bb`` (``continue_handover``) or from the
        measured configuration; advance; hand the reference over. Returns (velocity command, arrived)."""
        if not self.following:
            self.start(obs, bb.reference if continue_handover else None, bb.tick)
            self.following = True
        qvel, arrived = self.advance(q_target, obs)
        bb.reference = self.handover(bb.tick)
        return qvel, arrived

    def start(self, obs: Observation, handover, tick: int) -> None:
        # A reference handed over in the last tick, or in this one (a move that ends "held short by contact"
        # advanced its reference before it returned SUCCESS): continue it, or a squeeze or a hold is let go.
        if handover is not None and handover[0] in (tick - 1, tick):
            self.q, self.ff, self.k = handover[1].copy(), handover[2].copy(), handover[3]
        else:
            self.q, self.ff, self.k = obs.qpos.copy(), np.zeros_like(obs.qpos), 0.0
        if len(self.independent):  # each continues at the speed it had
            full = self._speeds()[self.independent]
            self.k_independent = np.minimum(1.0, np.abs(self.ff[self.independent]) / np.maximum(full, 1e-9))
        self._t = None

    _t: float | None = None  # the robot's clock at the last advance

    def _step_s(self, obs: Observation) -> float:
        """The robot's time this advance covers: one control period, or, where ticks were missed (real time on a
        busy computer: the robot went on at the last command meanwhile), the time since the last advance, at most
        MAX_CATCH_UP_STEPS periods. In lockstep every tick is one period."""
        dt = self.tools.model.control_dt_s
        t = getattr(obs, "state_time_s", None)  # a bare state without a clock (a test's): one period
        last, self._t = self._t, None if t is None else float(t)
        if last is None or self._t is None or not self._t - last > 1.5 * dt:
            return dt
        return min(self._t - last, MAX_CATCH_UP_STEPS * dt)

    def advance(self, q_target: np.ndarray, obs: Observation) -> tuple[np.ndarray, bool]:
        """One control step toward ``q_target``: returns (velocity command, arrived)."""
        tools = self.tools
        if self.q is None:
            self.start(obs, None, 0)
        dt = self._step_s(obs)
        remaining = q_target - self.q
        remaining[~np.isin(np.arange(len(remaining)), tools.controlled)] = 0.0  # fingers: the gripper's job
        speed = self._speeds()
        remaining_independent = remaining[self.independent].copy()
        remaining[self.independent] = 0.0
        xy = tools.base_index[:2]
        per_joint = np.abs(remaining) / np.maximum(speed, 1e-9)
        if len(xy):  # an arm bolted in place has no base to budget
            per_joint[xy] = 0.0
        time_left = float(np.max(per_joint))
        # The base's x/y limits bound its velocity in its own frame: budget the planar move there (heading fixed
        # during the move) or as one vector at the lower limit (any heading); budgeting the world's x and y
        # separately would let a diagonal reference run ~1.4x faster than the base can follow.
        if len(xy):
            d = remaining[xy]
            if self.base_frame_budget:
                d_B = world_to_base_velocity(d, float(self.q[tools.base_index[2]]))  # a displacement, rotated alike
                planar_time = float(np.max(np.abs(d_B) / np.maximum(speed[xy], 1e-9)))
            else:
                planar_time = float(np.linalg.norm(d)) / max(float(np.min(speed[xy])), 1e-9)
            time_left = max(time_left, planar_time)
        self.k = float(self._speed_factor(self.k, time_left, dt))
        step = remaining if time_left <= self.k * dt else remaining * (self.k * dt / time_left)
        arrived = time_left <= tools.model.control_dt_s
        if len(self.independent):
            full = speed[self.independent]
            times = np.abs(remaining_independent) / np.maximum(full, 1e-9)
            self.k_independent = self._speed_factor(self.k_independent, times, dt)
            done = times <= self.k_independent * dt
            step[self.independent] = np.where(done, remaining_independent,
                                              np.sign(remaining_independent) * self.k_independent * full * dt)
            arrived = arrived and bool(np.all(times <= tools.model.control_dt_s))
        self.q = self.q + step
        ff_before, self.ff = self.ff, step / dt
        # P + feed-forward: the lag behind a moving reference must not wind up an integral that the arm then
        # pays back as overshoot when the reference stops.
        qvel = tools.tracking_pid.step(self.q, obs.qpos) + self.ff
        if self.base_lead_s > 0.0 and len(tools.base_index):
            base = tools.base_index
            qvel[base] += self.base_lead_s * (self.ff[base] - ff_before[base]) / dt
        return qvel, arrived

    def _speeds(self) -> np.ndarray:
        """Full speed per joint: ``speed_fraction`` (one for all, or one per joint) of the velocity limits."""
        return np.asarray(self.speed_fraction) * self.tools.model.velocity_limits

    def _speed_factor(self, k, time_left, dt: float):
        """Trapezoidal profile: the speed factor k in [0, 1] of full speed (scalar or per joint), raised by at
        most dt / ramp per step and low enough to stop in the time left at full speed (k^2 ramp / 2 <= t)."""
        return np.minimum(np.minimum(1.0, k + dt / self.ramp_s), np.sqrt(2.0 * np.asarray(time_left) / self.ramp_s))

    def handover(self, tick: int):
        return (tick, self.q, self.ff, self.k)


def trapezoid_time_s(distance_m: float, speed_mps: float, ramp_s: float, stop: bool = True) -> float:
    """Seconds a trapezoidal move (rest to ``speed_mps`` in ``ramp_s``, and back to rest in ``ramp_s`` when
    ``stop``) takes to cover ``distance_m``: the profile of :class:`JointReference`."""
    d, v = abs(float(distance_m)), float(speed_mps)
    ramps = float(ramp_s) * (2.0 if stop else 1.0)  # seconds spent ramping at full speed
    if d >= 0.5 * v * ramps:  # reaches full speed
        return d / v + 0.5 * ramps
    # A triangle: the peak speed u is reached after ramp_s * u / v, and d = u * ramps * (u / v) / 2.
    return math.sqrt(2.0 * d * ramps / v)


def largest_arm_turn_rad(tools: Tools, q_from: np.ndarray, q_to: np.ndarray) -> float:
    """The largest turn (rad) of any of the tree's arm joints between two postures (the model's joint order): a
    joint-space move that turns one far takes the hand far off the straight line between its two poses."""
    arm = tools.arm_index
    return float(np.max(np.abs(q_to[arm] - q_from[arm])))


def wrist_roll_starts(tools: Tools, q: np.ndarray, rolls_rad: tuple[float, ...] = WRIST_ROLL_STARTS_RAD
                      ) -> list[np.ndarray]:
    """IK starts: ``q`` (joint positions, the model's order) with the tree's wrist rolled by each of
    ``rolls_rad`` (rad)."""
    wrist = tools.arm_index[-1]
    starts = []
    for roll in rolls_rad:
        start = q.copy()
        start[wrist] += roll
        starts.append(start)
    return starts


ON_HAND_M = 0.2  # a camera centre this close to a tool centre rides on the hand (the Panda's hand camera: 11 cm)


def cameras_on_hands(obs: Observation, sides=None) -> np.ndarray:
    """[C] bool over ``Observation.sensor_origins``: the cameras that ride on a hand of ``sides`` (default every
    hand with a tool pose), their centre within ``ON_HAND_M`` of its tool centre. Empty without camera centres."""
    if obs.sensor_origins is None:
        return np.zeros(0, dtype=bool)
    origins_W = np.asarray(obs.sensor_origins, dtype=np.float64).reshape(-1, 3)
    on_hand = np.zeros(len(origins_W), dtype=bool)
    for side, X_WT in obs.X_WT.items():
        if sides is None or side in sides:
            on_hand |= np.linalg.norm(origins_W - X_WT[:3, 3], axis=1) < ON_HAND_M
    return on_hand


def ik_base_held(tools: Tools, q: np.ndarray, X_WG: np.ndarray):
    """IK for the tree's hand at ``X_WG`` with the base where it stands (x, y and heading held, the torso free),
    from ``q`` and from ``q`` with the wrist rolled (:func:`wrist_roll_starts`): a planning.whole_body_ik.IKResult."""
    return tools.ik.solve(q, {tools.side: X_WG}, fixed_joints=tools.model.base_joint_names[:3],
                          initial_guesses=wrist_roll_starts(tools, q))


def finger_gap_m(obs: Observation, tools: Tools, side: str | None = None) -> float:
    """Distance between the two fingers of a gripper (m, the sum of its finger joints); ``side`` defaults to
    the tree's arm."""
    return float(np.sum(obs.qpos[tools.finger_indices[side or tools.side]]))


class GraspIsHolding(Skill):
    """Check after closing: the fingers stopped on something (not on each other). Records the clamped gap and
    marks the target grasped."""

    def __init__(self, name, tools):
        super().__init__(name, tools, reads=("observation", "grasp"), writes=("grasped", "clamped_gap_m"))

    def update(self):
        gap = finger_gap_m(self.bb.observation, self.tools)
        if gap < FINGER_GAP_EMPTY_M:
            return self.fail(f"fingers closed on nothing (gap {gap * 1000:.1f} mm)")
        self.bb.grasped = True
        self.bb.clamped_gap_m = gap
        planned = self.bb.grasp
        self.feedback_message = f"holding, gap {gap * 1000:.1f} mm" + (
            f" (planned {planned.width_m * 1000:.0f} mm)" if planned is not None else "")
        return Status.SUCCESS


class ProgressWatch:
    """Whether a move is still getting closer: the best error so far, and the steps since it last improved
    (by at least ``min_gain``) counted once the move's reference has arrived. ``stalled`` after ``patience``
    such steps: the robot is blocked (or held short by a contact)."""

    def __init__(self, patience: int, min_gain: float = 1e-3):
        self.patience, self.min_gain = patience, min_gain
        self.reset()

    def reset(self) -> None:
        self.best, self.steps_since_best = math.inf, 0

    def stalled(self, error: float, arrived: bool) -> bool:
        if error < self.best - self.min_gain:
            self.best, self.steps_since_best = error, 0
        elif arrived:
            self.steps_since_best += 1
        return self.steps_since_best > self.patience


class MoveToConfiguration(Skill):
    """Drive the base and arm to the joint configuration under ``target_key`` along a :class:`JointReference`.

    SUCCESS when the tool centre is within ``lateral_tolerance_m`` of the goal's approach line (the z axis
    of the pose under ``pose_key``), within ``axial_tolerance_m`` along it, and within
    ``angle_tolerance_rad`` of its orientation (a task-space goal: joint targets on a limit need not be
    met exactly), with the base within ``base_tolerance_m``. When the error stops shrinking for
    ``patience`` steps after the reference arrived, the move ends: SUCCESS if the tool centre is within
    ``accept_stall_m`` aside and ``accept_stall_axial_m`` along (held short by contact, e.g. fingers already
    around a handle), else FAILURE (blocked). ``preshape_margin_m``: on the first attempt, set the fingers to
    the planned grasp's opening plus this margin on the way instead of ``gripper`` (a short close at the
    handle, for short episodes); a retry comes in with ``gripper`` (wide open: narrow fingers stall on the
    handle more often). ``gripper_key``: a blackboard key whose value, when not None, is the gripper's command
    instead (a plan's choice).
    """

    def __init__(self, name, tools, target_key: str, pose_key: str, lateral_tolerance_m=0.01,
                 axial_tolerance_m=0.01, angle_tolerance_rad=0.05, base_tolerance_m=0.03, gripper="open",
                 patience=12, accept_stall_m=0.0, accept_stall_axial_m=0.0, speed_fraction=0.9,
                 tolerance_key: str | None = None, preshape_margin_m: float | None = None,
                 gripper_key: str | None = None, base_frame_budget: bool = False,
                 close_within_m: float | None = None, base_speed_fraction: float | None = None,
                 slow_base_key: str | None = None, fail_on_squeeze: bool = False):
        reads = ("observation", "tick", target_key, pose_key) + ((tolerance_key,) if tolerance_key else ())
        reads += (gripper_key,) if gripper_key else ()
        reads += (slow_base_key,) if slow_base_key else ()
        reads += ("grasp", "attempt") if preshape_margin_m is not None else ()
        writes = ("command", "reference") + (("close_started",) if close_within_m is not None else ())
        super().__init__(name, tools, reads=reads, writes=writes)
        self.tolerance_key = tolerance_key  # optional per-axis tolerances (m) in the goal's frame
        self.target_key, self.pose_key = target_key, pose_key
        self.lateral_tolerance_m, self.axial_tolerance_m = lateral_tolerance_m, axial_tolerance_m
        self.angle_tolerance_rad, self.base_tolerance_m = angle_tolerance_rad, base_tolerance_m
        self.gripper, self.accept_stall_m = gripper, accept_stall_m
        self.progress = ProgressWatch(patience)
        self.accept_stall_axial_m = accept_stall_axial_m
        self.preshape_margin_m, self.gripper_key = preshape_margin_m, gripper_key
        # The gripper closes once the reference has arrived and the tool centre is within this distance of the goal
        # along its approach axis (aside within the lateral tolerance): the fingers close while the hand settles
        # onto the grasp instead of after it. (Closing before the reference arrived, the hand still coming in at
        # up to 0.4 m/s, pushed doors open during the close and let 2 of 4 traced handles slip out mid-swing.)
        # The fingers at that moment go to the blackboard's ``close_started``, for the OperateGripper that follows.
        self.close_within_m = close_within_m
        # Fingers that stood at their preshape during this move and are then pushed this much narrower than it are
        # on the handle, not around it (a jaw on its end, or on a mount wider than the handle seen): the move fails
        # at once, and the retry backs off and comes in wide open, instead of the hand stalling there for the
        # progress watch's patience (15-40 steps on train doors 30 and 38).
        # ``fail_on_squeeze`` (with ``preshape_margin_m``): the move to a grasp only, within SQUEEZE_NEAR_M of it,
        # where a jaw can meet the handle (on the move to the pregrasp the hand's swings alone pushed the fingers
        # 8 mm together, on 10 of 58 doors).
        self.fail_on_squeeze = fail_on_squeeze and preshape_margin_m is not None
        # ``base_frame_budget``: the base's x/y limits budgeted per axis of its own frame (a move diagonal to the
        # heading runs up to sqrt(2) faster than one vector at one axis' limit), and the yaw turning on its own
        # trapezoid at full speed, so that the heading the move ends at is the one its budget soon holds for.
        independent = tools.base_index[2:3] if base_frame_budget else ()
        # ``base_speed_fraction``: the base's joints at this fraction of their limits instead of ``speed_fraction``, for
        # a move whose hand must keep to its line while the base carries it (the last centimetres to a grasp the arm
        # alone does not reach: the arm, stretched, sways with the base's acceleration). With ``slow_base_key``, only
        # while the blackboard's value under that key is true (PlanGrasp's ``grasp_arm_stretched``).
        self.speed_fraction, self.base_speed_fraction = speed_fraction, base_speed_fraction
        self.slow_base_key = slow_base_key
        self.reference = JointReference(tools, speed_fraction, base_frame_budget=base_frame_budget,
                                        independent=independent)

    def initialise(self):
        self.progress.reset()
        self.reference.restart()
        if self.close_within_m is not None:
            self.bb.close_started = None
        self.preshape_reached = False  # the fingers have stood at their preshape during this move

    def update(self):
        obs: Observation = self.bb.observation
        tools = self.tools
        q_target = self.bb.get(self.target_key)
        X_WG_goal = self.bb.get(self.pose_key)
        X_WT = obs.X_WT[tools.side]
        offset = X_WT[:3, 3] - X_WG_goal[:3, 3]
        offset_G = X_WG_goal[:3, :3].T @ offset  # the same in the goal's frame (z: along the approach)
        axial_error = float(abs(offset @ X_WG_goal[:3, 2]))
        lateral_error = float(np.linalg.norm(offset - (offset @ X_WG_goal[:3, 2]) * X_WG_goal[:3, 2]))
        position_error = float(np.linalg.norm(offset))
        cos = (np.trace(X_WT[:3, :3].T @ X_WG_goal[:3, :3]) - 1) / 2
        angle_error = math.acos(max(-1.0, min(1.0, cos)))
        base_xy = tools.base_index[:2]
        base_error = float(np.linalg.norm(q_target[base_xy] - obs.qpos[base_xy]))
        self.feedback_message = (f"tcp {100 * lateral_error:.1f} cm aside, {100 * axial_error:.1f} cm along, "
                                 f"{math.degrees(angle_error):.0f} deg off")
        within = lateral_error < self.lateral_tolerance_m and axial_error < self.axial_tolerance_m
        tolerance_G = self.bb.get(self.tolerance_key) if self.tolerance_key else None
        if tolerance_G is not None:
            within = bool(np.all(np.abs(offset_G) < tolerance_G))
        if within and angle_error < self.angle_tolerance_rad and base_error < self.base_tolerance_m:
            return Status.SUCCESS

        if not self.reference.following:
            self.reference.speed_fraction = self._speed_fractions(q_target)
        qvel, arrived = self.reference.follow(q_target, obs, self.bb)

        if self.progress.stalled(position_error + 0.2 * angle_error, arrived):
            held_short = lateral_error < self.accept_stall_m and axial_error < self.accept_stall_axial_m
            if tolerance_G is not None:  # short along the approach only, aligned otherwise
                held_short = bool(np.all(np.abs(offset_G[:2]) < tolerance_G[:2])
                                  and abs(offset_G[2]) < self.accept_stall_axial_m)
            if held_short and angle_error < 2 * self.angle_tolerance_rad:
                self.feedback_message = f"held short by contact: {self.feedback_message}"
                return Status.SUCCESS
            return self.fail(f"no progress: {self.feedback_message}")
        gripper = self.gripper
        if self.preshape_margin_m is not None and self.bb.grasp is not None and not self.bb.attempt:
            gripper = min(self.bb.grasp.width_m + self.preshape_margin_m, tools.model.gripper_max_opening_m)
            if self.fail_on_squeeze and self._squeezed(obs, gripper, position_error):
                opening_m = finger_gap_m(obs, tools)
                return self.fail(f"fingers squeezed on the way, {1000 * opening_m:.0f} mm apart, told "
                                 f"{1000 * gripper:.0f}: {self.feedback_message}")
        if self.gripper_key and self.bb.get(self.gripper_key) is not None:
            gripper = self.bb.get(self.gripper_key)
        if self.close_within_m is not None:
            aside_ok = (bool(np.all(np.abs(offset_G[:2]) < tolerance_G[:2]))
                        if tolerance_G is not None else lateral_error < self.lateral_tolerance_m)
            if self.bb.close_started is None and arrived and axial_error < self.close_within_m and aside_ok:
                self.bb.close_started = obs.qpos[tools.finger_index].copy()
            if self.bb.close_started is not None:
                gripper = "close"
        self.send(qvel, gripper)
        return Status.RUNNING

    def _squeezed(self, obs: Observation, preshape_m: float, position_error_m: float) -> bool:
        """The preshaped fingers, once at their preshape, pushed PRESHAPE_SQUEEZE_M under it within SQUEEZE_NEAR_M of
        the grasp, with no close begun (``fail_on_squeeze``)."""
        opening_m = finger_gap_m(obs, self.tools)
        self.preshape_reached |= opening_m > preshape_m - PRESHAPE_SQUEEZE_M / 2
        closing = self.close_within_m is not None and self.bb.close_started is not None  # told to close
        return (self.preshape_reached and not closing and position_error_m < SQUEEZE_NEAR_M
                and opening_m < preshape_m - PRESHAPE_SQUEEZE_M)

    def _speed_fractions(self, q_target: np.ndarray) -> float | np.ndarray:
        """The move's speed fraction: one for all joints, or the base's own (``base_speed_fraction``)."""
        if self.base_speed_fraction is None or (self.slow_base_key and not self.bb.get(self.slow_base_key)):
            return self.speed_fraction
        fractions = np.full(len(q_target), float(self.speed_fraction))
        fractions[self.tools.base_index] = self.base_speed_fraction
        return fractions


class OperateGripper(Skill):
    """Open or close the gripper while holding the rest of the robot where it is; SUCCESS once the
    fingers have moved and stopped (closed on something, or at their limit), or were at that limit already."""

    def __init__(self, name, tools, action: str, min_steps: int = 4, max_steps: int = 40):
        reads = ("observation",) + (("close_started",) if action == "close" else ())
        super().__init__(name, tools, reads=reads, writes=("command", "q_hold"))
        self.action, self.min_steps, self.max_steps = action, min_steps, max_steps

    def initialise(self):
        self.ticks = 0
        self.q_hold = None
        # A close the move before began (MoveToConfiguration's ``close_within_m``): the fingers have moved since then.
        started = self.bb.get("close_started") if self.action == "close" and self.bb.exists("close_started") else None
        self.fingers = [] if started is None else [np.asarray(started)]

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
            self.bb.q_hold = self.q_hold
        self.ticks += 1
        # Settled: the finger positions (their velocities are noisy in contact) moved < 0.3 mm in 2 steps, after
        # they moved at all, or at the limit the action drives them to (already there: they never move). In real
        # time the finger states come late (sensor latency; they are not predicted, their commands not being
        # velocities): fingers not yet seen moving are not settled; at 100 ms "close gripper" ended after 3
        # steps on the fingers still open, and the pull left without the handle.
        self.fingers.append(obs.qpos[self.tools.finger_index].copy())
        settled = len(self.fingers) > 2 and np.max(np.abs(self.fingers[-1] - self.fingers[-3])) < 3e-4
        moved = np.max(np.abs(self.fingers[-1] - self.fingers[0])) > FINGERS_MOVED_M
        if self.ticks >= self.max_steps or (self.ticks >= self.min_steps and settled
                                            and (moved or self._at_limit(self.fingers[-1]))):
            return Status.SUCCESS
        self.send(self.tools.pid.step(self.q_hold, obs.qpos), self.action)
        return Status.RUNNING

    def _at_limit(self, fingers: np.ndarray) -> bool:
        """Every finger joint at the end ``action`` drives it to (open: its upper limit; close: its lower)."""
        limits = self.tools.model.joint_limits[self.tools.finger_index]
        if self.action == "open":
            return bool(np.all(fingers > limits[:, 1] - FINGERS_MOVED_M))
        if self.action == "close":
            return bool(np.all(fingers < limits[:, 0] + FINGERS_MOVED_M))
        return True  # a width: no limit to tell apart; as before, settled is enough


class StopAndHold(Skill):
    """Brake, then hold: zero velocity commanded until the base and arm joints move slower than
    ``settled_speed`` (m/s or rad/s; at most ``max_brake_steps``), then the configuration where the robot
    stopped held (PID), gripper ``gripper``. RUNNING for ever. For a skill stopped mid-move (a goal's
    condition came true during a pull at 1 m/s): holding where it was stopped would pull it back."""

    def __init__(self, name, tools, gripper="close", settled_speed: float = 0.02, max_brake_steps: int = 30):
        super().__init__(name, tools, reads=("observation",), writes=("command",))
        self.gripper, self.settled_speed, self.max_brake_steps = gripper, settled_speed, max_brake_steps

    def initialise(self):
        self.q_hold, self.ticks = None, 0

    def update(self):
        obs: Observation = self.bb.observation
        self.ticks += 1
        if self.q_hold is None:
            speed = float(np.max(np.abs(obs.qvel[self.tools.controlled])))
            if speed > self.settled_speed and self.ticks <= self.max_brake_steps:
                self.feedback_message = f"braking ({speed:.2f})"
                self.send(np.zeros_like(obs.qpos), self.gripper)
                return Status.RUNNING
            self.q_hold = obs.qpos.copy()
            self.feedback_message = f"holding (braked in {self.ticks - 1} steps)"
        self.send(self.tools.pid.step(self.q_hold, obs.qpos), self.gripper)
        return Status.RUNNING


class HoldStill(Skill):
    """Hold the current configuration (what ``static`` success needs); RUNNING for ever."""

    def __init__(self, name, tools, gripper="close"):
        super().__init__(name, tools, reads=("observation",), writes=("command",))
        self.gripper = gripper

    def initialise(self):
        self.q_hold = None

    def update(self):
        obs: Observation = self.bb.observation
        if self.q_hold is None:
            self.q_hold = obs.qpos.copy()
        qvel = self.tools.pid.step(self.q_hold, obs.qpos)
        self.send(qvel, self.gripper)
        return Status.RUNNING
