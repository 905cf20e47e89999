"""The simulated robot that does not wait (handleit.harness.realtime_sim): the --perturb keys, the latency buffers and the
paced loop without an env; then the robot over the bundled PickCube in its own process (camera rate, sensor and
command latency checked on the robot's own clock, never the wall clock) and one episode through the evaluation's
real-time branch."""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

from handleit.harness.evaluation import EpisodeRecord, _EpisodeRunner, canonical_perturbation, episode_specs
from handleit.harness.realtime_runner import RealtimeRunner
from handleit.harness.realtime_sim import (
    DEFAULT_CAMERA_HZ,
    DEFAULT_REAL_TIME_FACTOR,
    DelayedCommand,
    LatencyBuffer,
    PacedStepLoop,
    RealtimeSettings,
    RealtimeSimRobot,
    runner_max_age_s,
    split_perturbation,
)
from handleit.types import Command


# -- the --perturb keys -------------------------------------------------------------------------------------
def test_real_time_keys_split_from_the_sensor_keys_in_canonical_form():
    settings, sensor = split_perturbation(" Latency=0.1, depth_noise=0.005 ,camera_hz=15,extrinsics=0.01/1deg")
    assert settings == RealtimeSettings(sensor_latency_s=0.1, camera_hz=15.0)
    assert sensor == "depth_noise=0.005,extrinsics=0.01/1deg"
    assert str(settings) == f"latency=0.1,command_latency=0,camera_hz=15,rtf={DEFAULT_REAL_TIME_FACTOR}"
    # canonical text round-trips, and milliseconds are the same latency as seconds
    assert split_perturbation(str(settings)) == (settings, "")
    assert split_perturbation("latency=100ms,command_latency=50ms")[0] == RealtimeSettings(0.1, 0.05)
    assert split_perturbation("depth_noise=0.005") == (None, "depth_noise=0.005")
    assert split_perturbation("") == (None, "") and split_perturbation("none") == (None, "")
    # where planning runs: a key of its own, in the canonical text only when not the default (the worker process)
    inline = split_perturbation("planning=Inline,latency=0")[0]
    assert not inline.background_planning and str(inline).endswith(",planning=inline")
    assert split_perturbation(str(inline))[0] == inline
    thread = split_perturbation("latency=0,planning=thread")[0]
    assert thread.background_planning and thread.planning == "thread" and str(thread).endswith(",planning=thread")
    assert split_perturbation("latency=0,planning=background")[0] == thread  # the old name of thread
    process = split_perturbation("latency=0,planning=process")[0]
    assert process.planning == "process" == RealtimeSettings().planning and "planning" not in str(process)
    with pytest.raises(ValueError, match="planning is one of"):
        split_perturbation("latency=0,planning=gpu")
    # latency=0 is a real-time run (the robustness table's 0 ms row), not "no perturbation"
    assert split_perturbation("latency=0")[0] == RealtimeSettings(camera_hz=DEFAULT_CAMERA_HZ)


def test_canonical_perturbation_accepts_sensor_only_and_mixed_text():
    assert canonical_perturbation("joint_noise=0.002,depth_noise=0.005") == "depth_noise=0.005,joint_noise=0.002"
    assert canonical_perturbation("none") == "" and canonical_perturbation("") == ""
    mixed = canonical_perturbation("rtf=0.5,camera_hz=15,latency=0.1,command_latency=0.05,depth_noise=0.005")
    assert mixed == "depth_noise=0.005,latency=0.1,command_latency=0.05,camera_hz=15,rtf=0.5"
    assert canonical_perturbation(mixed) == mixed
    assert canonical_perturbation("latency=0.1") == f"latency=0.1,command_latency=0,camera_hz=30,rtf=0.25"
    specs = episode_specs("PickCube", "test", 1, "bt", 50, perturb="camera_hz=10, latency=50ms")
    assert specs[0].perturb == "latency=0.05,command_latency=0,camera_hz=10,rtf=0.25"


@pytest.mark.parametrize("text, names", [
    ("latency=abc", "'latency=abc'"),
    ("latency", "'latency'"),
    ("latency=0.1,latency=0.2", "'latency' given twice"),
    ("latency=-0.1", "'latency=-0.1'"),
    ("camera_hz=0", "camera_hz"),
    ("rtf=20", "real_time_factor"),
    ("latency=0.1,,rtf=0.5", "empty token"),
    ("latency=0.1,depht_noise=0.1", "'depht_noise'"),
    ("planning=later", "'planning=later'"),  # a misspelt sensor key: the env's parser names it
])
def test_bad_perturbation_text_is_a_clear_error_naming_the_token(text, names):
    with pytest.raises(ValueError) as error:
        canonical_perturbation(text)
    assert names in str(error.value)


# -- latency buffers ----------------------------------------------------------------------------------------
def test_latency_buffer_releases_each_reading_once_after_its_latency():
    buffer = LatencyBuffer(0.03)
    for k in range(5):
        buffer.push(0.01 * k, k)
    assert buffer.release(0.02) == []
    assert [v for _, v in buffer.release(0.03)] == [0]  # 0.00 + 0.03 (float sums: a tolerance, not a miss)
    assert [v for _, v in buffer.release(0.06)] == [1, 2, 3]
    assert buffer.release(0.06) == [] and len(buffer) == 1
    with pytest.raises(ValueError):
        buffer.push(0.0, "back in time")
    no_delay = LatencyBuffer(0.0)
    no_delay.push(0.1, "now")
    assert no_delay.release(0.1) == [(0.1, "now")]


def test_delayed_command_takes_effect_after_its_latency_and_times_out():
    def cmd(v):
        return Command(qvel=np.full(2, v))

    delayed = DelayedCommand(latency_s=0.05, timeout_s=0.1)
    delayed.send(0.0, cmd(1.0))
    assert delayed.in_effect(0.04) is None  # not there yet: the robot does nothing
    assert delayed.in_effect(0.05).qvel[0] == 1.0
    delayed.send(0.06, cmd(2.0))
    assert delayed.in_effect(0.10).qvel[0] == 1.0  # the newer one is still on its way
    assert delayed.in_effect(0.11).qvel[0] == 2.0
    assert delayed.in_effect(0.21).qvel[0] == 2.0  # 0.1 s after it took effect: still on
    assert delayed.in_effect(0.2101) is None  # then the command timeout stops the robot
    # Two senders (tick, watchdog) that read the clock in the other order: the later-sent command wins.
    delayed.send(0.30, cmd(3.0))
    delayed.send(0.29, cmd(0.0))
    assert delayed.in_effect(0.40).qvel[0] == 0.0


def test_paced_loop_renders_at_the_camera_rate_and_reports_the_factor():
    loop = PacedStepLoop(dt_s=0.01, real_time_factor=5.0, camera_hz=15)  # 5x: a short test
    assert loop.camera_every == 7 and loop.camera_hz == pytest.approx(100 / 7)
    renders = []
    report = loop.run(lambda render: renders.append(render), done=lambda: len(renders) >= 30)
    assert report.steps == 30
    assert [i for i, r in enumerate(renders) if r] == [0, 6, 13, 20, 27]  # the first, then every 7th step
    assert report.real_time_factor > 0 and report.camera_step_ms_median is not None
    stop = threading.Event()
    stop.set()
    assert loop.run(lambda render: None, done=lambda: False, stop=stop).steps == 0


def test_freshness_limits_allow_for_the_known_latency():
    limits = runner_max_age_s(RealtimeSettings(sensor_latency_s=0.2))
    assert limits == pytest.approx({"joint_states": 0.3, "odom": 0.3, "points": 0.7})


# -- the robot in its own process (PickCube: a cheap env) ---------------------------------------------------
@pytest.fixture(scope="module")
def pick_robot():
    settings = RealtimeSettings(sensor_latency_s=0.05, command_latency_s=0.03, camera_hz=20, real_time_factor=0.5)
    robot = RealtimeSimRobot("PickCube", settings, max_steps=60, sim_masks=False)
    yield robot
    robot.close()


def test_robot_keeps_time_latencies_and_camera_rate_on_its_own_clock(pick_robot):
    robot = pick_robot
    first = robot.reset(seed=0)
    assert first.masks == {}  # sim_masks=False: no simulator masks reach the solver
    assert first.target_prompt_W is not None  # the operator's prompt passes through
    side = next(iter(robot.model.arm_joint_names))  # the tabletop Panda's one arm
    arm = robot.model.index(robot.model.arm_joint_names[side][:1])[0]
    q0 = first.qpos[arm]
    robot.start()
    robot.sleep_until(0.1)  # the robot's clock advances on its own: nobody ticks
    assert robot.now_s() >= 0.1 - 1e-9
    sent_at = robot.now_s()
    qvel = np.zeros(len(robot.model.joint_names))
    qvel[arm] = 0.5
    states, cloud_stamps = [], set()
    while robot.now_s() < sent_at + 0.25 and not robot.episode_over():
        robot.act(Command(qvel=qvel, gripper={side: "hold"}))  # resent like a tick: the command timeout
        obs = robot.observe()
        now = robot.now_s()
        # sensor latency: nothing younger than 0.05 s is visible, on the robot's clock
        assert obs.time_s + 0.05 <= now + 1e-9
        states.append((obs.time_s, obs.qpos[arm]))
        cloud_stamps.add(round(robot.sensor_stamps_s()["points"], 6))
        time.sleep(0.005)
    result = robot.result(timeout_s=120)  # the episode runs out (60 steps) on its own
    assert result["steps"] == 60 and result["camera_hz_reached"] == 20
    # command latency: the arm joint first moved in the step that started 0.03 s after the command was sent
    moved = [t for t, q in states if abs(q - q0) > 1e-4]
    assert moved, states
    assert min(moved) >= sent_at + 0.03 + 0.01 - 1e-9
    # camera rate: clouds only from camera steps (step 1, then every 5th: t = 0.01, 0.05, 0.10, ...)
    steps_of_clouds = sorted(round(t / 0.01) for t in cloud_stamps if t > 0)
    assert steps_of_clouds and all(k == 1 or k % 5 == 0 for k in steps_of_clouds), steps_of_clouds
    assert 0 < result["pacing"]["real_time_factor"]
    # A second episode in the same process: reset, and the clock starts again at 0.
    again = robot.reset(seed=1)
    assert again.time_s == 0.0 and robot.now_s() == 0.0 and not robot.episode_over()


def test_runner_with_the_robot_stops_when_the_episode_ends(pick_robot):
    robot = pick_robot
    robot.reset(seed=2)

    class HoldStill:
        def reset(self, observation):
            pass

        def step(self, observation):
            return Command(qvel=np.zeros(len(robot.model.joint_names)),
                           gripper={s: "open" for s in robot.model.finger_joint_names})

    runner = RealtimeRunner(robot, HoldStill(), rate_hz=100, max_age_s=runner_max_age_s(robot.settings))
    robot.start()
    report = runner.run(until=robot.episode_over)
    assert report.error is None and report.stop_reason == "until() is true"
    assert 0 < report.ticks <= 61  # at most one tick per value of the clock, 0 to 0.6 s
    assert robot.result()["steps"] == 60


def test_evaluation_runs_an_episode_in_real_time_and_records_it():
    """The evaluation's branch: a PickCube episode whose perturbation has real-time keys runs against the
    real-time robot and keeps the record's shape, with the tick statistics in diagnostics."""
    spec = episode_specs("PickCube", "test", 1, "bt", 150, perturb="latency=0.05,camera_hz=15,rtf=0.5")[0]
    runner = _EpisodeRunner()
    try:
        record = runner.run(spec)
    finally:
        runner._realtime.close()
    assert record.error is None, record.error
    assert set(dataclasses.asdict(record)) == {f.name for f in dataclasses.fields(EpisodeRecord)}
    assert record.perturb == "latency=0.05,command_latency=0,camera_hz=15,rtf=0.5"
    assert 0 < record.steps <= 150 and record.success in (True, False)
    assert record.failed_node is None if record.success else record.failed_node
    rt = record.diagnostics["realtime"]
    assert rt["settings"] == record.perturb and rt["sim_steps"] == record.steps
    assert rt["camera_hz_reached"] == pytest.approx(100 / 7)
    assert 0 < rt["ticks"] <= record.steps + 1 and len(rt["tick_wall_ms"]) == rt["ticks"]
    assert rt["tick_max_s"] >= rt["tick_median_s"] > 0 and rt["overruns"] <= rt["ticks"]
    assert rt["real_time_factor"] > 0 and rt["commands_received"] > 0


# -- planning off the tick thread (behaviors/background.py) -------------------------------------------------
def _tools(realtime: bool):
    from pathlib import Path

    from handleit.behaviors.common import Tools
    from handleit.types import RobotModel

    joints = ("base_x", "arm_1", "arm_2", "finger_1", "finger_2")
    model = RobotModel(urdf_path=Path("none.urdf"), srdf_path=Path("none.srdf"), joint_names=joints,
                       joint_limits=np.tile([-1.0, 1.0], (5, 1)), velocity_limits=np.ones(5),
                       base_joint_names=("base_x",), arm_joint_names={"right": ("arm_1", "arm_2")},
                       finger_joint_names={"right": ("finger_1", "finger_2")}, tcp_link_names={"right": "tcp"},
                       base_link_name="base")
    return Tools(model=model, ik=None, pid=None, tracking_pid=None, grasp_predictor=None,
                 namespace=f"/bg_test_{realtime}_{time.monotonic_ns()}", realtime=realtime)


def _planning_node(tools, release: threading.Event):
    from py_trees.common import Status

    from handleit.behaviors.background import BackgroundPlanning
    from handleit.behaviors.common import Skill

    class DoublePlan(BackgroundPlanning, Skill):
        """Reads ``value``, plans 2 * value (waiting for ``release``), writes ``result``."""

        def __init__(self):
            super().__init__("double plan", tools, reads=("value",), writes=("result",))  # as PlanGrasp's
            self.plan_threads: list[str] = []

        def snapshot(self):
            return self.bb.value

        def plan(self, value):
            self.plan_threads.append(threading.current_thread().name)
            release.wait(timeout=60)
            return 2 * value

        def apply(self, result):
            self.bb.result = result
            return Status.SUCCESS

    import py_trees

    writer = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("value", "result", "command"):
        writer.register_key(key, access=py_trees.common.Access.WRITE)
    writer.value, writer.result, writer.command = 1, None, None
    return DoublePlan(), writer


def test_planning_node_in_lockstep_plans_in_the_tick():
    from py_trees.common import Status

    release = threading.Event()
    release.set()
    node, bb = _planning_node(_tools(realtime=False), release)
    node.tick_once()
    assert node.status == Status.SUCCESS and bb.result == 2 and bb.command is None
    assert node.plan_threads == [threading.current_thread().name]


def test_planning_node_in_real_time_holds_still_until_the_plan_is_done_and_cancels_when_stopped():
    from py_trees.common import Status

    from handleit.behaviors.background import HOLD_STILL_FEEDBACK

    release = threading.Event()
    node, bb = _planning_node(_tools(realtime=True), release)
    node.tick_once()
    assert node.status == Status.RUNNING and node.planning()
    assert HOLD_STILL_FEEDBACK in node.feedback_message
    assert not np.any(bb.command.qvel) and bb.command.gripper == {"right": "hold"}  # hold still, said so
    bb.value = 100  # the blackboard moves on; the plan works on its snapshot
    node.tick_once()
    assert node.status == Status.RUNNING and bb.result is None
    job = node._job
    release.set()
    assert job.join(timeout_s=30)
    node.tick_once()
    assert node.status == Status.SUCCESS and bb.result == 2 and not node.planning()
    assert node.plan_threads[0] != threading.current_thread().name and len(node.plan_wall_s) == 1
    # Interrupted while planning: terminate() cancels, the dropped result is never written.
    release.clear()
    bb.result = None
    node.tick_once()
    job = node._job
    node.stop(Status.INVALID)
    assert job.cancelled and not node.planning()
    release.set()
    assert job.join(timeout_s=30)
    assert bb.result is None


def test_evaluation_keeps_only_the_simulated_robots_it_used_last():
    """One simulated robot process (~0.7 GB, its env built) per env configuration, kept between episodes: only the
    ``max_robots`` used last stay; the process of the one used longest ago ends when another is needed. Unbounded,
    a grid of 60 real-time configurations filled the machine's memory."""
    from handleit.harness.realtime_sim import RealtimeEpisodes

    spec = episode_specs("PickCube", "test", 1, "bt", 50)[0]
    fast, slow = RealtimeSettings(camera_hz=30.0), RealtimeSettings(sensor_latency_s=0.1, camera_hz=10.0)
    episodes = RealtimeEpisodes(max_robots=1)
    try:
        first = episodes.robot(spec, fast, None, True, None)
        assert episodes.robot(spec, fast, None, True, None) is first  # the same configuration: kept
        second = episodes.robot(spec, slow, None, True, None)
        assert second is not first and first._process.poll() is not None  # the older one's process has ended
        assert second._process.poll() is None and list(episodes._robots.values()) == [second]
    finally:
        episodes.close()
    assert second._process.poll() is not None
    with pytest.raises(ValueError, match="max_robots"):
        RealtimeEpisodes(max_robots=0)
