"""``handleit serve-ros``: a bundled env as a ROS robot, in real time; ``handleit run-ros``: a tree against it.

``serve-ros`` steps the env at the control rate (100 Hz of simulated time) on the wall clock, whatever
arrives, applying the newest command of each topic; a command older than ``--command-timeout`` (simulated
seconds) counts as zero, the ``cmd_vel`` timeout of real base drivers. It publishes ``/clock`` (and sets
``/use_sim_time``), joint states and odometry every step, the point cloud at ``--camera-hz`` of simulated
time, and the episode's success on ``/handleit/episode`` for the evaluation only (no solver reads it).

Real time, honestly: a step without rendering costs about 1 ms here, a step that renders the three cameras
about 55 ms (CPU, software Vulkan). The simulated clock runs at ``--real-time-factor`` times the wall
clock; when a camera step overruns, the next steps catch up (physics keeps going while a camera works), and
when the server falls more than 0.25 s behind it lets go of the schedule and counts a slip. The achieved
real-time factor is printed and published with the episode info. The stepping loop
(:class:`~handleit.harness.realtime_sim.PacedStepLoop`) is shared with the real-time robot without ROS.

``run-ros`` builds the task's RobotModel from the bundled robot description (the env's own, so the URDF and
joint groups match the simulator), connects a :class:`~handleit.harness.ros_robot.RosRobot` and ticks the task's
behavior tree in a :class:`~handleit.harness.realtime_runner.RealtimeRunner` until the episode topic says the episode
ended (or ``--max-seconds``), then prints one JSON line: success, steps, tick statistics.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np

import handleit.envs
from handleit.control.actions import base_to_world_velocity
from handleit.harness import ros_messages as rm
from handleit.harness.realtime_sim import PacedStepLoop, step_sim_robot
from handleit.harness.ros_robot import JointGroups, RosContract
from handleit.harness.sim_robot import SimRobot
from handleit.poses import pose7_to_matrix
from handleit.types import Command


class SimRobotServer:
    """One bundled env behind the contract's topics (see the module docstring)."""

    def __init__(self, task: str, transport, *, split: str = "test", seed: int = 0, max_steps: int = 200,
                 real_time_factor: float = 0.5, camera_hz: float = 10.0, command_timeout_s: float = 0.1,
                 contract: RosContract = RosContract(), sensor_perturbation: str | None = None):
        if not 0 < real_time_factor <= 10 or not 0 < camera_hz <= 100:
            raise ValueError(f"real_time_factor {real_time_factor} must be in (0, 10], "
                             f"camera_hz {camera_hz} in (0, 100]")
        # sensor_perturbation: what the robot's sensors add (the envs' option: depth noise, extrinsics, drift).
        self.env = handleit.envs.make(task, obs_mode="pointcloud", split=split, max_episode_steps=max_steps,
                                      sensor_perturbation=sensor_perturbation or None)
        self.robot = SimRobot(self.env)
        self.model = self.robot.model
        self.groups = JointGroups.of(self.model)
        self.task, self.seed, self.max_steps = task, seed, max_steps
        self.dt_s = self.model.control_dt_s
        self.loop = PacedStepLoop(self.dt_s, real_time_factor, camera_hz)
        self.camera_every = self.loop.camera_every
        self.rtf, self.command_timeout_s = real_time_factor, command_timeout_s
        self.transport, self.contract, self.types = transport, contract, transport.types
        c, t = contract, self.types
        self._pub_points = transport.publisher(c.points, t.PointCloud2)
        self._pub_joints = transport.publisher(c.joint_states, t.JointState)
        self._pub_odom = transport.publisher(c.odom, t.Odometry)
        self._pub_clock = transport.publisher(c.clock, t.Clock)
        self._pub_episode = transport.publisher(c.episode, t.String, latch=True)
        self._pub_goal = transport.publisher(c.goal, t.PointStamped, latch=True) if t.PointStamped else None
        transport.set_param("/use_sim_time", True)
        self._lock = threading.Lock()
        self._commands: dict[str, tuple[float, object]] = {}  # topic key -> (sim time received, value)
        self.command_errors: list[str] = []
        if self.groups.planar:
            transport.subscribe(c.cmd_vel, t.Twist, self._receiver("base", rm.twist_from_msg))
        if self.groups.torso:
            transport.subscribe(c.torso_command, t.Float64MultiArray,
                                self._receiver("torso", lambda m: rm.velocities_from_msg(m, 1, "torso")))
        for side, names in self.groups.arms.items():
            transport.subscribe(c.arm_command.format(side=side), t.Float64MultiArray,
                                self._receiver(f"arm:{side}", lambda m, n=len(names), s=side:
                                               rm.velocities_from_msg(m, n, f"{s} arm")))
        for side in self.model.finger_joint_names:
            transport.subscribe(c.gripper_command.format(side=side), t.String,
                                self._receiver(f"gripper:{side}", rm.gripper_from_msg))
        self.sim_time_s = 1.0  # ROS treats a zero stamp as unset; the clock never goes back, across episodes
        self.slips = 0

    def _receiver(self, key: str, parse):
        def callback(msg):
            try:
                value = parse(msg)
            except rm.RosMessageError as error:
                # A robot's driver drops a bad command and stops that group (zero after the timeout).
                with self._lock:
                    self.command_errors.append(f"{key}: {error}")
                    self._commands.pop(key, None)
                return
            with self._lock:
                self._commands[key] = (self.sim_time_s, value)
        return callback

    def command(self) -> Command:
        """The newest command of every group; older than the timeout (simulated s) -> zero (grippers hold)."""
        m, g = self.model, self.groups
        qvel = np.zeros(len(m.joint_names))
        gripper = {}
        with self._lock:
            fresh = {k: v for k, (t, v) in self._commands.items() if self.sim_time_s - t <= self.command_timeout_s}
        if "base" in fresh:
            v_B = fresh["base"]
            yaw = float(self.robot._obs["agent"]["qpos"][m.index(g.planar[2:3])[0]])
            qvel[m.index(g.planar[:2])] = base_to_world_velocity(v_B[:2], yaw)  # SimRobot turns it back
            qvel[m.index(g.planar[2:3])] = v_B[2]
        if "torso" in fresh:
            qvel[m.index(g.torso)] = fresh["torso"]
        for side, names in g.arms.items():
            if f"arm:{side}" in fresh:
                qvel[m.index(names)] = fresh[f"arm:{side}"]
        for side in m.finger_joint_names:
            gripper[side] = fresh.get(f"gripper:{side}", "hold")
        return Command(qvel=qvel, gripper=gripper)

    def _step(self, command: Command, render: bool) -> None:
        # Only camera steps render (see step_sim_robot: the others run in the env's "state" mode).
        step_sim_robot(self.robot, command, render)

    def _publish_state(self, render: bool) -> None:
        t = self.types
        agent = self.robot._obs["agent"]
        stamp = self.sim_time_s
        self._pub_clock(t.Clock(clock=t.stamp(stamp)))
        m, g = self.model, self.groups
        qpos, qvel = np.asarray(agent["qpos"], float), np.asarray(agent["qvel"], float)
        state = m.index(g.state)
        self._pub_joints(rm.joint_state_to_msg(g.state, qpos[state], qvel[state], stamp, t))
        X_WB = pose7_to_matrix(agent["base_pose"])
        v_W = qvel[m.index(g.planar)] if g.planar else np.zeros(3)
        self._pub_odom(rm.odometry_to_msg(X_WB, v_W, self.contract.world_frame, m.base_link_name, stamp, t))
        if render:
            obs = self.robot.observe()
            self._pub_points(rm.cloud_to_msg(obs.points, obs.colors, obs.masks, self.contract.world_frame, stamp, t,
                                             viewpoints=obs.point_origins()))

    def publish_episode(self, **extra) -> None:
        info = {k: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v))
                for k, v in self.robot.info.items() if isinstance(v, (bool, np.bool_, int, float, np.number))}
        payload = {"task": self.task, "seed": self.seed, "step": self.robot.steps, "sim_time_s": self.sim_time_s,
                   "success": bool(self.robot.info.get("success", False)), "done": self.robot.done,
                   "info": info, **extra}
        self._pub_episode(self.types.String(data=json.dumps(payload)))

    def serve_episode(self, stop: threading.Event | None = None, hold_s: float = 2.0,
                      wait_for_commands_s: float = 0.0) -> dict:
        """Reset (seed), then step in real time until the episode ends; returns the last episode payload.

        ``wait_for_commands_s``: hold the episode's clock at its start, sensors published, until the first
        command arrives (a tree that has started), or this many wall seconds; 0 starts at once."""
        stop = stop or threading.Event()
        self.robot.reset(seed=self.seed)
        with self._lock:
            self._commands.clear()
        goal_W = self.robot.observe().goal_W
        if goal_W is not None and self._pub_goal is not None:  # the task's instruction, as an operator gives it
            self._pub_goal(rm.goal_to_msg(goal_W, self.contract.world_frame, self.sim_time_s, self.types))
        self.publish_episode(real_time_factor=None)
        self._publish_state(render=True)
        deadline = time.monotonic() + wait_for_commands_s
        while time.monotonic() < deadline and not stop.is_set():
            with self._lock:
                if self._commands:
                    break
            time.sleep(0.05)
            self._publish_state(render=True)  # the same instant again: the clock does not move
        wall0 = time.monotonic()
        steps0 = self.robot.steps

        def step(render: bool) -> None:
            self._step(self.command(), render)
            self.sim_time_s += self.dt_s
            self._publish_state(render)
            if self.robot.steps % 10 == 0 or self.robot.done:
                achieved = (self.robot.steps - steps0) * self.dt_s / max(time.monotonic() - wall0, 1e-9)
                self.publish_episode(real_time_factor=achieved)

        pacing = self.loop.run(step, done=lambda: self.robot.done, stop=stop)
        self.slips += pacing.slips
        period_wall = self.dt_s / self.rtf
        result = {"task": self.task, "seed": self.seed, "success": bool(self.robot.info.get("success", False)),
                  "steps": self.robot.steps, "real_time_factor_target": self.rtf,
                  "real_time_factor": pacing.real_time_factor, "slips": self.slips,
                  "step_ms_median": pacing.step_ms_median, "camera_step_ms_median": pacing.camera_step_ms_median,
                  "camera_hz_sim": self.loop.camera_hz, "command_errors": self.command_errors[:5]}
        self.publish_episode(real_time_factor=pacing.real_time_factor, result=result)
        # Keep the clock and sensors alive a moment so that the client reads the end; the robot stands still.
        end = time.monotonic() + hold_s
        while time.monotonic() < end and not stop.is_set():
            self.sim_time_s += self.dt_s
            self._publish_state(render=False)
            time.sleep(period_wall)
        return result
