"""``RosRobot``: the robot interface over ROS topics (the contract of README "Deploying on a robot (ROS)").

The pieces:

- :class:`RosContract`: topic names and frames (one message type, one frame, one rate, units per topic).
- :class:`Ros1Transport`: the only code that touches rospy (init, publish, subscribe, is the master up?). An
  rclpy transport for ROS 2 is one class with the same five methods; ``handleit.harness.ros_messages`` is free of any
  transport.
- :class:`RosRobot`: :class:`~handleit.types.RobotInterface` over a transport. ``observe()`` assembles the
  newest Observation from the latest cloud, joint state and odometry (tool poses by forward kinematics of the
  robot's URDF); ``act(command)`` publishes the base Twist, the torso and arm velocities and the gripper
  commands. A message that breaks the contract, a master that goes away, or a bad command puts the robot in a
  fault: zero velocity is published at once, and ``observe``/``act`` raise :class:`RosBridgeError` saying why.
  ``close()`` publishes zero velocity too.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from handleit.control.actions import saturated_velocity, world_to_base_velocity
from handleit.harness import ros_messages as rm
from handleit.harness.ros_env import import_rospy
from handleit.planning.whole_body_ik import WholeBodyIK
from handleit.types import Command, Observation, RobotModel

log = logging.getLogger(__name__)


class RosBridgeError(RuntimeError):
    """The bridge stopped the robot: a message broke the contract, the link is down, or a command was bad."""


@dataclass(frozen=True)
class RosContract:
    """Topics and frames of the contract; ``{side}`` is an arm side (``right``, ``left``)."""

    points: str = "/points"  # sensor_msgs/PointCloud2, world frame, camera rate (10-30 Hz)
    joint_states: str = "/joint_states"  # sensor_msgs/JointState, control rate (100 Hz)
    odom: str = "/odom"  # nav_msgs/Odometry, world -> base link, control rate
    cmd_vel: str = "/cmd_vel"  # geometry_msgs/Twist, base frame, control rate
    torso_command: str = "/torso_velocity_controller/command"  # std_msgs/Float64MultiArray [1], m/s
    arm_command: str = "/{side}_arm_velocity_controller/command"  # std_msgs/Float64MultiArray [7], rad/s
    gripper_command: str = "/{side}_gripper/command"  # std_msgs/String: open, close, hold or an opening (m)
    clock: str = "/clock"  # rosgraph_msgs/Clock: a simulator's time (with use_sim_time)
    episode: str = "/handleit/episode"  # std_msgs/String (JSON): the simulator's success, evaluation only
    goal: str = "/goal"  # geometry_msgs/PointStamped, world frame, latched: the task's goal position
    world_frame: str = "world"


@dataclass(frozen=True)
class JointGroups:
    """How a RobotModel's joints map onto the contract's topics."""

    planar: tuple[str, ...]  # x, y, yaw: from odometry, commanded by cmd_vel (empty: no mobile base)
    torso: tuple[str, ...]  # the torso height joint (empty: none)
    arms: dict[str, tuple[str, ...]]
    state: tuple[str, ...]  # the joints in /joint_states: every joint but the planar base

    @classmethod
    def of(cls, model: RobotModel) -> JointGroups:
        planar, torso = tuple(model.base_joint_names[:3]), tuple(model.base_joint_names[3:4])
        state = tuple(n for n in model.joint_names if n not in planar)
        return cls(planar, torso, dict(model.arm_joint_names), state)


class Ros1Transport:
    """rospy behind five methods: ``publisher``, ``subscribe``, ``master_ok``, ``shutdown`` and ``types``.

    rospy allows one node per process: the first transport initialises it, later ones share it.
    """

    _node_started = False

    def __init__(self, node_name: str = "handleit", anonymous: bool = True):
        self.rospy = import_rospy()  # rospy: optional, imported when ROS is used
        import rosgraph  # noqa: PLC0415  lazy: ROS 1 (optional; importable after import_rospy)

        self.rosgraph = rosgraph
        self.types = rm.ros1_message_types()
        if not Ros1Transport._node_started:
            if not self._master_reachable():
                raise RosBridgeError(f"no ROS master at {rosgraph.get_master_uri()} "
                                     "(start roscore, set ROS_MASTER_URI)")
            # disable_signals: the CLI and the runner handle Ctrl-C and stop the robot themselves.
            self.rospy.init_node(node_name, anonymous=anonymous, disable_signals=True)
            Ros1Transport._node_started = True
        self._handles: list[Any] = []

    def publisher(self, topic: str, msg_type: type, latch: bool = False) -> Callable[[Any], None]:
        pub = self.rospy.Publisher(topic, msg_type, queue_size=2, latch=latch)
        self._handles.append(pub)
        return pub.publish

    def subscribe(self, topic: str, msg_type: type, callback: Callable[[Any], None]) -> None:
        # A queue of 1 and a buffer for one large cloud: only the newest message matters.
        self._handles.append(self.rospy.Subscriber(topic, msg_type, callback, queue_size=1, buff_size=1 << 24))

    def _master_reachable(self) -> bool:
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(1.0)  # a dead master must not block the check for long
        try:
            self.rosgraph.Master("/handleit_check").getPid()
            return True
        except Exception:  # noqa: BLE001  refused, timed out, unreachable: all mean "no master"
            return False
        finally:
            socket.setdefaulttimeout(previous)

    def master_ok(self) -> tuple[bool, str]:
        if self.rospy.is_shutdown():
            return False, "rospy is shut down"
        if not self._master_reachable():
            return False, f"ROS master at {self.rosgraph.get_master_uri()} unreachable"
        return True, ""

    def get_param(self, name: str, default=None):
        try:
            return self.rospy.get_param(name, default)
        except Exception:  # noqa: BLE001  no master: the default
            return default

    def set_param(self, name: str, value) -> None:
        self.rospy.set_param(name, value)

    def shutdown(self) -> None:
        for handle in self._handles:
            handle.unregister()
        self._handles = []


class RosRobot:
    """A :class:`~handleit.types.RobotInterface` over the contract's topics.

    Args:
        model: the robot's RobotModel (e.g. ``robot_model_of`` a bundled env: the same description files).
        transport: a :class:`Ros1Transport` (or an rclpy one with the same methods).
        contract: topic names and frames.
        mask_names: UINT8 fields every cloud must carry (the trees read ``target_handle``, ``target_link``,
            ``robot``).
        use_sim_time: stamps and ``now_s()`` follow ``/clock`` (a simulator); None: the master's
            ``/use_sim_time`` parameter, as rospy does, read when the first joint state has arrived.
        link_check_s: how often the master is checked (s).
        clock_timeout_s: wall seconds without a ``/clock`` tick before the simulated clock counts as stopped.
    """

    def __init__(self, model: RobotModel, transport, contract: RosContract = RosContract(),
                 mask_names: tuple[str, ...] = rm.MASK_NAMES, use_sim_time: bool | None = None,
                 link_check_s: float = 0.5, clock_timeout_s: float = 2.0,
                 target_prompt_W: np.ndarray | None = None):
        self.model, self.transport, self.contract = model, transport, contract
        # The operator's prompt naming the target (a world point [3] or box [2, 3]), handed on in every
        # observation for the geometric segmenter.
        self.target_prompt_W = None if target_prompt_W is None else np.asarray(target_prompt_W, dtype=np.float64)
        self.types: rm.MessageTypes = transport.types
        self.groups = JointGroups.of(model)
        self.mask_names = tuple(mask_names)
        # None: read the master's /use_sim_time once the sensors are there (wait_for_data), since a simulator
        # sets it before it publishes anything; until then the wall clock.
        self._sim_time_auto = use_sim_time is None
        self.use_sim_time = bool(use_sim_time)
        self.clock_timeout_s = clock_timeout_s
        self.base_frame = model.base_link_name
        self._kinematics = WholeBodyIK.from_robot_model(model)  # tool poses by forward kinematics
        self._lock = threading.Condition()
        self._cloud: rm.Cloud | None = None
        self._joints: rm.Joints | None = None
        self._base: rm.BaseState | None = None
        self._sim_time_s: float | None = None
        self._sim_time_wall_s = time.monotonic()
        self._order = rm.StampOrder()
        self.fault: str | None = None
        self.dropped_invalid_points = 0  # NaN/inf points dropped from clouds so far
        self.episode: dict[str, Any] = {}  # the simulator's episode topic (evaluation only, never for solvers)
        self._index = {n: i for i, n in enumerate(model.joint_names)}
        t = self.types
        c = contract
        self._pub_twist = transport.publisher(c.cmd_vel, t.Twist) if self.groups.planar else None
        self._pub_torso = transport.publisher(c.torso_command, t.Float64MultiArray) if self.groups.torso else None
        self._pub_arm = {s: transport.publisher(c.arm_command.format(side=s), t.Float64MultiArray)
                         for s in self.groups.arms}
        self._pub_gripper = {s: transport.publisher(c.gripper_command.format(side=s), t.String)
                             for s in model.finger_joint_names}
        transport.subscribe(c.points, t.PointCloud2, self._guard("points", self._on_points))
        transport.subscribe(c.joint_states, t.JointState, self._guard("joint_states", self._on_joints))
        transport.subscribe(c.odom, t.Odometry, self._guard("odom", self._on_odom))
        transport.subscribe(c.episode, t.String, self._on_episode)
        self.goal_W: np.ndarray | None = None  # the task's goal position, where one is published
        if t.PointStamped is not None:
            transport.subscribe(c.goal, t.PointStamped, self._guard("goal", self._on_goal))
        if self.use_sim_time or self._sim_time_auto:
            transport.subscribe(c.clock, t.Clock, self._guard("clock", self._on_clock))
        self._stop = threading.Event()
        self._link_thread = threading.Thread(target=self._watch_link, args=(link_check_s,), daemon=True,
                                             name="handleit-ros-link")
        self._link_thread.start()

    # -- sensors (subscriber threads) -------------------------------------------------------------------
    def _guard(self, stream: str, handler):
        def callback(msg):
            if self.fault is not None:
                return
            try:
                handler(msg)
            except Exception as error:  # noqa: BLE001  a broken contract: stop the robot, keep the reason
                self._set_fault(f"{stream}: {error}")
        return callback

    def _on_points(self, msg) -> None:
        cloud = rm.cloud_from_msg(msg, self.contract.world_frame, self.mask_names)
        with self._lock:
            self._order.check("points", cloud.stamp_s)
            self._cloud = cloud
            self.dropped_invalid_points += cloud.dropped_invalid

    def _on_joints(self, msg) -> None:
        joints = rm.joints_from_msg(msg, self.groups.state)
        with self._lock:
            self._order.check("joint_states", joints.stamp_s)
            self._joints = joints
            self._lock.notify_all()

    def _on_odom(self, msg) -> None:
        base = rm.base_from_odometry(msg, self.contract.world_frame, self.base_frame)
        with self._lock:
            self._order.check("odom", base.stamp_s)
            self._base = base

    def _on_goal(self, msg) -> None:
        goal = rm.goal_from_msg(msg, self.contract.world_frame)
        with self._lock:
            self.goal_W = goal

    def _on_clock(self, msg) -> None:
        t = rm.stamp_to_s(msg.clock)
        with self._lock:
            if self._sim_time_s is not None and t < self._sim_time_s:
                raise rm.RosMessageError(f"/clock went backwards from {self._sim_time_s:.3f} to {t:.3f} s")
            self._sim_time_s, self._sim_time_wall_s = t, time.monotonic()
            self._lock.notify_all()

    def _on_episode(self, msg) -> None:
        try:
            self.episode = json.loads(msg.data)
        except ValueError:
            log.warning("episode topic: not JSON: %r", msg.data[:100])

    # -- faults and the link ----------------------------------------------------------------------------
    def _set_fault(self, reason: str) -> None:
        with self._lock:
            first = self.fault is None
            if first:
                self.fault = reason
            self._lock.notify_all()
        if first:
            log.error("ROS bridge: %s; commanding zero velocity", reason)
        self.publish_zero()

    def _watch_link(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            ok, why = self.transport.master_ok()
            if not ok:
                self._set_fault(f"link: {why}")

    def link_ok(self) -> tuple[bool, str]:
        return self.fault is None, self.fault or ""

    # -- clock ---------------------------------------------------------------------------------------
    def now_s(self) -> float:
        if not self.use_sim_time:
            return time.time()
        with self._lock:
            if self._sim_time_s is None:
                raise RosBridgeError(f"use_sim_time and no {self.contract.clock} received yet")
            return self._sim_time_s

    def sleep_until(self, t_s: float) -> None:
        """Until ``now_s() >= t_s``; with simulated time, raises if the clock stops (the simulator is gone)."""
        if not self.use_sim_time:
            delay = t_s - time.time()
            if delay > 0:
                time.sleep(delay)
            return
        with self._lock:
            while (self._sim_time_s is None or self._sim_time_s < t_s) and self.fault is None:
                if time.monotonic() - self._sim_time_wall_s > self.clock_timeout_s:
                    raise RosBridgeError(f"simulated clock {self.contract.clock} stopped for {self.clock_timeout_s} s")
                self._lock.wait(timeout=0.05)

    def sensor_stamps_s(self) -> dict[str, float]:
        with self._lock:
            stamps = {"joint_states": self._joints, "odom": self._base, "points": self._cloud}
            return {k: v.stamp_s for k, v in stamps.items() if v is not None}

    def wait_for_data(self, timeout_s: float = 30.0) -> None:
        """Block until a cloud, a joint state and odometry (and the clock) have arrived."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            self._raise_if_fault()
            if self._sim_time_auto and self._joints is not None:
                self.use_sim_time = bool(self.transport.get_param("/use_sim_time", False))
            with self._lock:
                have = [self._cloud, self._joints, self._base] + ([self._sim_time_s] if self.use_sim_time else [])
                if all(h is not None for h in have):
                    return
                self._lock.wait(timeout=0.1)
        raise RosBridgeError(f"no complete sensor data within {timeout_s} s on {self.contract.points}, "
                             f"{self.contract.joint_states}, {self.contract.odom}"
                             + (f", {self.contract.clock}" if self.use_sim_time else ""))

    def _raise_if_fault(self) -> None:
        if self.fault is not None:
            raise RosBridgeError(f"robot stopped: {self.fault}")

    # -- RobotInterface -------------------------------------------------------------------------------
    def observe(self) -> Observation:
        self._raise_if_fault()
        with self._lock:
            cloud, joints, base = self._cloud, self._joints, self._base
        if cloud is None or joints is None or base is None:
            raise RosBridgeError("no complete observation yet (call wait_for_data() first)")
        m, g = self.model, self.groups
        qpos, qvel = np.zeros(len(m.joint_names)), np.zeros(len(m.joint_names))
        state_index = [self._index[n] for n in g.state]
        qpos[state_index], qvel[state_index] = joints.position, joints.velocity
        if g.planar:
            planar = [self._index[n] for n in g.planar]
            qpos[planar], qvel[planar] = base.xy_yaw, base.velocity_W
        # Tool poses: forward kinematics in the URDF's root frame, placed by the odometry's base pose.
        X_RB = self._kinematics.base_pose(qpos)
        X_WR = base.X_WB @ np.linalg.inv(X_RB)
        X_WT = {s: X_WR @ self._kinematics.tcp_pose(qpos, s) for s in m.tcp_link_names}
        return Observation(time_s=joints.stamp_s, points_time_s=cloud.stamp_s, points=cloud.points, colors=cloud.colors,
                           masks={k: cloud.masks[k] for k in self.mask_names}, frame=self.contract.world_frame,
                           joint_names=m.joint_names, qpos=qpos, qvel=qvel, X_WB=base.X_WB, X_WT=X_WT,
                           target_prompt_W=self.target_prompt_W, goal_W=self.goal_W, sensor_origins=cloud.sensor_origins,
                           sensor_index=cloud.sensor_index)

    def act(self, command: Command) -> None:
        """Publish one command; a bad command (shape, NaN) or a fault publishes zero velocity and raises."""
        if self.fault is not None:
            self.publish_zero()
            raise RosBridgeError(f"robot stopped: {self.fault}")
        try:
            twist, torso, arms, grippers = self.commands_of(command)
        except ValueError as error:
            self._set_fault(f"bad command: {error}")
            raise RosBridgeError(f"robot stopped: bad command: {error}") from error
        self._publish(twist, torso, arms, grippers)

    def commands_of(self, command: Command):
        """(base [vx, vy, wz] in the base frame, torso [1], arm side -> [7], gripper side -> command), clipped to
        the model's velocity limits (the planar velocity scaled as a whole, so its direction is kept)."""
        m, g = self.model, self.groups
        n = len(m.joint_names)
        limits = m.velocity_limits
        grippers = dict(command.gripper)
        if command.normalized_qvel is not None:
            a = np.asarray(command.normalized_qvel, dtype=float)
            if a.shape != (n,) or not np.isfinite(a).all():
                raise ValueError(f"normalized_qvel must be {n} finite values, got shape {a.shape}")
            qvel = np.clip(a, -1, 1) * limits  # base x/y already in the base frame (the envs' action)
            for side, fingers in m.finger_joint_names.items():
                v = float(np.mean(a[m.index(fingers)]))
                grippers[side] = "open" if v > 0.05 else "close" if v < -0.05 else "hold"
            base_in_base_frame = True
        else:
            qvel = np.asarray(command.qvel, dtype=float)
            if qvel.shape != (n,) or not np.isfinite(qvel).all():
                raise ValueError(f"qvel must be {n} finite values, got shape {qvel.shape}")
            base_in_base_frame = False
        for side, value in grippers.items():
            if side not in m.finger_joint_names:
                raise ValueError(f"gripper command for unknown side {side!r}")
            rm.gripper_to_msg(value, self.types)  # validates
        twist, planar, yaw = None, None, 0.0  # a base velocity already in the base frame: as at yaw 0
        if g.planar:
            planar = m.index(g.planar)
            if not base_in_base_frame:
                with self._lock:
                    yaw = float(self._base.xy_yaw[2]) if self._base is not None else None
                if yaw is None:
                    raise ValueError("no odometry yet: cannot turn the base velocity into the base frame")
        qvel = saturated_velocity(qvel, limits, None if planar is None else planar[:2], yaw)
        if planar is not None:
            twist = qvel[planar].copy()
            twist[:2] = world_to_base_velocity(twist[:2], yaw)
        torso = qvel[m.index(g.torso)] if g.torso else None
        arms = {s: qvel[m.index(names)] for s, names in g.arms.items()}
        return twist, torso, arms, grippers

    def _publish(self, twist, torso, arms, grippers) -> None:
        t = self.types
        if self._pub_twist is not None and twist is not None:
            self._pub_twist(rm.twist_to_msg(twist, t))
        if self._pub_torso is not None and torso is not None:
            self._pub_torso(rm.velocities_to_msg(torso, t))
        for side, v in arms.items():
            self._pub_arm[side](rm.velocities_to_msg(v, t))
        for side, value in grippers.items():
            self._pub_gripper[side](rm.gripper_to_msg(value, t))

    def publish_zero(self) -> None:
        """Zero velocity on the base, torso and arms, grippers holding; safe to call from any thread."""
        try:
            self._publish(np.zeros(3) if self.groups.planar else None, np.zeros(1) if self.groups.torso else None,
                          {s: np.zeros(len(n)) for s, n in self.groups.arms.items()},
                          {s: "hold" for s in self.model.finger_joint_names})
        except Exception as error:  # noqa: BLE001  the transport itself is gone: nothing more can be sent
            log.error("ROS bridge: zero velocity could not be published: %s", error)

    def close(self) -> None:
        """Publish zero velocity and stop listening."""
        self._stop.set()
        self.publish_zero()
        self._link_thread.join(timeout=2.0)
        self.transport.shutdown()
