"""Helpers of the live ROS tests (tests/test_ros_bridge.py): a private master, a stand-in driver that
publishes the robot's sensors on the wall clock, and a recorder of the commands it receives.

Run as a script (``python tests/ros_bridge_helpers.py``), it is one node holding a driver, a RosRobot and a
RealtimeRunner against the master in ROS_MASTER_URI: the master-loss test kills that master under it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from handleit.harness import ros_messages as rm
from handleit.harness.ros_robot import JointGroups, RosContract
from handleit.types import Command, RobotModel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ros_environment(port: int, home: Path) -> dict[str, str]:
    """Loopback only: the master's URI and this host's name are 127.0.0.1."""
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "ROS_MASTER_URI": f"http://127.0.0.1:{port}", "ROS_HOSTNAME": "127.0.0.1",
            "ROS_IP": "127.0.0.1", "ROS_HOME": str(home), "ROS_LOG_DIR": str(home / "log")}


class Master:
    """``roscore -p PORT`` in its own process group, stopped by that group's id."""

    def __init__(self, env: dict[str, str], port: int, log: Path):
        self.port = port
        self._log = open(log, "wb")
        self.process = subprocess.Popen(["roscore", "-p", str(port)], env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"roscore exited: {log.read_text()[-2000:]}")
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"roscore did not listen on 127.0.0.1:{port} within 60 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # roscore and its rosmaster child
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self._log.close()


def drawer_robot_model() -> RobotModel:
    """The bundled single-arm mobile Panda's model, as the drawer env builds it (its description files)."""
    import handleit.envs
    from handleit.harness.sim_robot import robot_model_of

    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud")
    model = robot_model_of(env)
    env.close()
    return model


class Driver:
    """A stand-in robot driver: sensors at 50 Hz stamped on the wall clock; ``replace`` swaps in a message."""

    def __init__(self, transport, model: RobotModel, contract: RosContract = RosContract()):
        self.types, self.model, self.contract = transport.types, model, contract
        self.groups = JointGroups.of(model)
        t = self.types
        self.pub = {"points": transport.publisher(contract.points, t.PointCloud2),
                    "joint_states": transport.publisher(contract.joint_states, t.JointState),
                    "odom": transport.publisher(contract.odom, t.Odometry)}
        self.overrides: dict[str, object] = {}  # stream -> a message to send once instead of the good one
        self.silent: set[str] = set()  # streams that stopped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        rng = np.random.default_rng(0)
        self.points = rng.uniform(-1, 1, (2000, 3)).astype(np.float32)
        self.colors = rng.integers(0, 255, (2000, 3)).astype(np.uint8)
        self.masks = {m: rng.random(2000) < 0.2 for m in rm.MASK_NAMES}
        self.cameras = np.array([[0.0, 0.0, 1.5], [0.05, 0.0, 1.5]])  # two cameras' centres (m, world)
        self.camera_of_point = rng.integers(0, 2, 2000)
        self.qpos = np.zeros(len(self.groups.state))
        self._thread.start()

    def good(self, stream: str, stamp_s: float):
        t, c = self.types, self.contract
        if stream == "points":
            return rm.cloud_to_msg(self.points, self.colors, self.masks, c.world_frame, stamp_s, t,
                                   viewpoints=self.cameras[self.camera_of_point])
        if stream == "joint_states":
            return rm.joint_state_to_msg(self.groups.state, self.qpos, np.zeros_like(self.qpos), stamp_s, t)
        return rm.odometry_to_msg(np.eye(4), np.zeros(3), c.world_frame, self.model.base_link_name, stamp_s, t)

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            now = time.time()
            for stream, publish in self.pub.items():
                if stream in self.silent:
                    continue
                msg = self.overrides.pop(stream, None)
                publish(msg if msg is not None else self.good(stream, now))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class CommandRecorder:
    """Records every base Twist and arm command that reaches the robot's side of the topics."""

    def __init__(self, transport, model: RobotModel, contract: RosContract = RosContract()):
        t = transport.types
        self.lock = threading.Lock()
        self.twists: list[np.ndarray] = []
        self.arm: list[np.ndarray] = []
        transport.subscribe(contract.cmd_vel, t.Twist, lambda m: self._add(self.twists, rm.twist_from_msg(m)))
        side = next(iter(model.arm_joint_names))
        transport.subscribe(contract.arm_command.format(side=side), t.Float64MultiArray,
                            lambda m: self._add(self.arm, np.asarray(m.data)))

    def _add(self, where, value) -> None:
        with self.lock:
            where.append(value)

    def moving_then_stopped(self) -> bool:
        """Some non-zero base and arm command arrived, and the last of each was zero."""
        with self.lock:
            return (any(np.any(v) for v in self.twists) and any(np.any(v) for v in self.arm)
                    and not np.any(self.twists[-1]) and not np.any(self.arm[-1]))


class MovingSolver:
    """Drives the base and the arm slowly: any non-zero command will do, the bridge's stop is under test."""

    def __init__(self, model: RobotModel):
        self.n = len(model.joint_names)
        self.ticks = 0

    def reset(self, observation) -> None:
        pass

    def step(self, observation) -> Command:
        self.ticks += 1
        return Command(qvel=np.full(self.n, 0.05), gripper={"right": "open"})


def wait_for(predicate, timeout_s: float = 30.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def master_loss_node() -> int:
    """One node: driver, recorder, RosRobot, runner. Prints "ticking", then the outcome as JSON."""
    from handleit.harness.realtime_runner import RealtimeRunner
    from handleit.harness.ros_robot import Ros1Transport, RosRobot

    model = drawer_robot_model()
    transport = Ros1Transport("master_loss_test")
    driver = Driver(transport, model)
    recorder = CommandRecorder(transport, model)
    robot = RosRobot(model, transport, use_sim_time=False, link_check_s=0.2)
    robot.wait_for_data(timeout_s=30)
    solver = MovingSolver(model)
    runner = RealtimeRunner(robot, solver, rate_hz=50, watchdog_timeout_s=0.5)
    announced = threading.Event()

    def announce():
        wait_for(lambda: solver.ticks >= 20, 60)
        print("ticking", flush=True)
        announced.set()

    threading.Thread(target=announce, daemon=True).start()
    report = runner.run(max_ticks=50_000)  # ~16 min at 50 Hz: only the master's loss should end it
    stopped = wait_for(recorder.moving_then_stopped, 10)
    driver.stop()
    print(json.dumps({"error": report.error, "stop_reason": report.stop_reason, "ticks": report.ticks,
                      "moving_then_stopped": stopped, "fault": robot.fault}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(master_loss_node())
