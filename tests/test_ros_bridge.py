"""The ROS bridge, live: a real master on a private loopback port (started and stopped here), real messages.

Every bad input over the bridge ends in a clear error and zero velocity published, with a RealtimeRunner
ticking a solver that drives the robot; a master that goes away mid-run stops the robot; and a drawer
episode succeeds with serve-ros, run-ros and the master in separate processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from handleit.harness import ros_messages as rm
from handleit.harness.ros_env import ros_available
from handleit.types import Command

pytestmark = [pytest.mark.skipif(not ros_available(), reason="ROS 1 not installed (scripts/setup.sh installs it)"),
              pytest.mark.filterwarnings("ignore:notifyAll:DeprecationWarning")]  # rospy 1.15's own code

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from ros_bridge_helpers import (  # noqa: E402
    CommandRecorder,
    Driver,
    Master,
    MovingSolver,
    drawer_robot_model,
    free_port,
    ros_environment,
    wait_for,
)


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    port = free_port()
    home = tmp_path_factory.mktemp("ros_home")
    env = ros_environment(port, home)
    m = Master(env, port, home / "roscore.log")
    m.env = env
    yield m
    m.stop()


@pytest.fixture(scope="module")
def node(master, monkeypatch_module):
    """This process's one rospy node, on the private master."""
    for key in ("ROS_MASTER_URI", "ROS_HOSTNAME", "ROS_IP", "ROS_HOME", "ROS_LOG_DIR"):
        monkeypatch_module.setenv(key, master.env[key])
    from handleit.harness.ros_robot import Ros1Transport

    return Ros1Transport("handleit_test")


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def model():
    return drawer_robot_model()


@pytest.fixture
def rig(node, model):
    """A driver publishing good sensors, a recorder of commands, a RosRobot; closed after the test."""
    from handleit.harness.ros_robot import Ros1Transport, RosRobot

    transport = Ros1Transport()  # shares the node
    driver = Driver(transport, model)
    recorder = CommandRecorder(transport, model)
    robot = RosRobot(model, transport, use_sim_time=False, link_check_s=0.2)
    robot.wait_for_data(timeout_s=30)
    yield driver, recorder, robot
    driver.stop()
    robot.close()


def run_until_fault(robot, model, inject) -> tuple:
    """Tick a moving solver at 50 Hz; after 10 ticks call ``inject()``; return the runner's report."""
    from handleit.harness.realtime_runner import RealtimeRunner

    solver = MovingSolver(model)
    runner = RealtimeRunner(robot, solver, rate_hz=50, watchdog_timeout_s=1.0)
    threading.Thread(target=lambda: wait_for(lambda: solver.ticks >= 10) and inject(), daemon=True).start()
    return runner.run(max_ticks=3000), solver


def test_observation_through_the_bridge(rig, model):
    driver, recorder, robot = rig
    obs = robot.observe()
    np.testing.assert_array_equal(obs.points, driver.points)
    np.testing.assert_array_equal(obs.colors, driver.colors)
    for m in rm.MASK_NAMES:
        np.testing.assert_array_equal(obs.masks[m], driver.masks[m])
    assert obs.joint_names == model.joint_names and obs.frame == "world"
    # Each point's camera centre (vp_x, vp_y, vp_z) arrives as the observation's sensor origins.
    np.testing.assert_allclose(obs.point_origins(), driver.cameras[driver.camera_of_point], atol=1e-6)
    # Forward kinematics of the bundled description places the tool: in reach of the base, above the floor.
    p = obs.X_WT["right"][:3, 3]
    assert 0.2 < np.linalg.norm(p[:2]) < 1.5 and 0.0 < p[2] < 2.0
    # A command goes out as the contract's messages: world-frame base velocity -> base frame (yaw 0 here).
    qvel = np.zeros(len(model.joint_names))
    qvel[model.index(["root_x_axis_joint"])] = 0.2
    qvel[model.index(model.arm_joint_names["right"][:1])] = -0.3
    command = Command(qvel=qvel, gripper={"right": 0.04})
    # Sent each try: a message published before the subscriber's connection is up is lost (as in any ROS 1 node).
    assert wait_for(lambda: robot.act(command) or (recorder.twists and recorder.arm
                                                   and recorder.twists[-1][0] == pytest.approx(0.2)))
    assert recorder.arm[-1][0] == pytest.approx(-0.3)


BAD_INPUTS = {
    "cloud without rgb": ("points", "lacks the field", lambda d, s: _cloud(d, s, drop="rgb")),
    "cloud with an int x": ("points", "datatype", lambda d, s: _cloud(d, s, datatype=("x", rm.INT32))),
    "cloud with a short point_step": ("points", "point_step", lambda d, s: _cloud(d, s, point_step=12)),
    "truncated cloud": ("points", "truncated", lambda d, s: _cloud(d, s, truncate=7)),
    "empty cloud": ("points", "empty", lambda d, s: rm.cloud_to_msg(np.zeros((0, 3)), np.zeros((0, 3), np.uint8),
                                                                    {}, "world", s, d.types)),
    "all-NaN cloud": ("points", "no finite point", lambda d, s: rm.cloud_to_msg(
        np.full((10, 3), np.nan), np.zeros((10, 3), np.uint8), {m: np.zeros(10, bool) for m in rm.MASK_NAMES},
        "world", s, d.types)),
    "joint state with an unknown joint": ("joint_states", "unknown joints", lambda d, s: rm.joint_state_to_msg(
        list(d.groups.state) + ["wheel_joint"], list(d.qpos) + [0.0], [], s, d.types)),
    "joint state with a missing joint": ("joint_states", "missing joints", lambda d, s: rm.joint_state_to_msg(
        d.groups.state[1:], d.qpos[1:], [], s, d.types)),
    "joint state stamped in the past": ("joint_states", "went backwards",
                                        lambda d, s: d.good("joint_states", s - 5.0)),
    "odometry in another frame": ("odom", "frame_id", lambda d, s: rm.odometry_to_msg(
        np.eye(4), np.zeros(3), "map", d.model.base_link_name, s, d.types)),
}


def _cloud(driver, stamp_s, drop=None, datatype=None, point_step=None, truncate=None):
    msg = driver.good("points", stamp_s)
    if drop:
        msg.fields = [f for f in msg.fields if f.name != drop]
    if datatype:
        next(f for f in msg.fields if f.name == datatype[0]).datatype = datatype[1]
    if point_step:
        msg.point_step = point_step
        msg.row_step = point_step * msg.width
        msg.data = msg.data[: msg.row_step]
    if truncate:
        msg.data = msg.data[:-truncate]
    return msg


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_stops_the_robot_with_a_clear_error(rig, model, case):
    import time

    driver, recorder, robot = rig
    stream, text, make = BAD_INPUTS[case]
    report, solver = run_until_fault(robot, model, lambda: driver.overrides.__setitem__(
        stream, make(driver, time.time())))
    assert report.stop_reason == "error" and text in report.error, report.error
    assert text in robot.fault and solver.ticks >= 10
    # Zero velocity reached the robot's side after the moving commands: base and arm.
    assert wait_for(recorder.moving_then_stopped), (recorder.twists[-3:], recorder.arm[-3:])


def test_nan_points_are_dropped_and_counted_not_an_error(rig, model):
    driver, recorder, robot = rig
    points = driver.points.copy()
    points[::4] = np.nan  # an organized camera's invalid pixels
    n_nan = len(points[::4])
    before = robot.dropped_invalid_points
    driver.points = points
    assert wait_for(lambda: robot.dropped_invalid_points > before)
    obs = robot.observe()
    assert len(obs.points) == len(points) - n_nan and np.isfinite(obs.points).all()
    assert all(len(mask) == len(obs.points) for mask in obs.masks.values()) and robot.fault is None


def test_sensors_that_stop_stop_the_robot(rig, model):
    """The link stays up but joint states stop: the runner's freshness check and watchdog command zero."""
    from handleit.harness.realtime_runner import FRESHNESS_CHECK, RealtimeRunner

    driver, recorder, robot = rig
    solver = MovingSolver(model)
    runner = RealtimeRunner(robot, solver, rate_hz=50, watchdog_timeout_s=1.0)
    threading.Thread(target=lambda: wait_for(lambda: solver.ticks >= 10) and driver.silent.add("joint_states"),
                     daemon=True).start()
    report = runner.run(max_ticks=3000, until=lambda: runner.report.stale_ticks >= 5)
    assert report.error is None and report.failures[0]["check"] == FRESHNESS_CHECK
    assert "joint_states" in report.failures[0]["reason"]
    assert wait_for(recorder.moving_then_stopped)


def test_master_that_goes_away_stops_the_robot(tmp_path):
    """A node with its own master, driver and runner; the master is killed under it mid-run."""
    port = free_port()
    env = ros_environment(port, tmp_path / "ros_home")
    master = Master(env, port, tmp_path / "roscore.log")
    node = subprocess.Popen([sys.executable, str(HERE / "ros_bridge_helpers.py")], env={**env, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = node.stdout.readline()
        assert line.strip() == "ticking", line + node.stderr.read()[-3000:]
        master.stop()
        out, err = node.communicate(timeout=120)
    finally:
        if node.poll() is None:
            node.kill()
        master.stop()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["stop_reason"] == "error" and "master" in result["error"], (result, err[-2000:])
    assert result["moving_then_stopped"], result


@pytest.mark.slow  # ~65-85 s, and in real time: on a loaded 2-core machine 1 of 3 runs at factor 0.25 failed
def test_drawer_episode_succeeds_through_ros(tmp_path):
    """Master, `handleit serve-ros` and `handleit run-ros` in three processes; the drawer opens through ROS
    (1000-step horizon, simulated clock at 0.25 of the wall clock)."""
    port = free_port()
    env = ros_environment(port, tmp_path / "ros_home")
    master = Master(env, port, tmp_path / "roscore.log")
    handleit = str(Path(sys.executable).parent / "handleit")
    serve_log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([handleit, "serve-ros", "--task", "OpenCabinetDrawer", "--max-steps", "1000",
                               "--seed", "0", "--real-time-factor", "0.25"], env=env, stdout=serve_log,
                              stderr=subprocess.STDOUT)
    try:
        run = subprocess.run([handleit, "run-ros", "--task", "OpenCabinetDrawer", "--max-seconds", "400"], env=env,
                             capture_output=True, text=True, timeout=600)
        result = json.loads(run.stdout.strip().splitlines()[-1])
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)
        serve_log.close()
        master.stop()
    served = (tmp_path / "serve.log").read_text()
    (tmp_path.parent / "e2e_result.json").write_text(json.dumps(result, default=str))
    assert result["success"] is True, (result, run.stderr[-3000:], served[-2000:])
    assert result["error"] is None and 0 < result["steps"] < 1000
    assert result["ticks"] > 0 and result["tick_max_s"] >= result["tick_median_s"]
    server_result = json.loads([line for line in served.splitlines() if line.startswith("{")][-1])
    assert server_result["success"] is True and server_result["real_time_factor"] > 0
