"""Planning in the worker process (behaviors/planning_worker.py): the same plan as in the tick, a cancelled job's result
dropped, a killed worker restarted with the node failing visibly, and every tree's planning nodes able to go there.

No timed assertions: waits have generous limits (the worker imports the toolkit and builds the robot's IK once per
test session, seconds on a loaded machine)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import py_trees
import pytest
from py_trees.common import Access, Status

import handleit.envs
from handleit.behaviors import TREES, TREE_OPTIONS, make_tree_solver
from handleit.behaviors.background import BackgroundPlanning
from handleit.behaviors.cabinet_nodes import PlanGrasp
from handleit.behaviors.common import Tools
from handleit.behaviors.planning_worker import (PlanningCancelled, calibration_worker, node_copy, planning_worker,
                                                 segmentation_worker)
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.behaviors.state_history import StateHistory
from handleit.harness.sim_robot import SimRobot, robot_model_of
from handleit.types import Observation

from .planning_nodes import DoubleOnACloudAtRest, DoubleOnTheStateOfItsCloud, FreezeCountOfTheWorker, SleepThenDouble

WAIT_S = 300.0  # generous: the first job waits for the worker's start and IK on a loaded 2-core machine


def _sleep_node(model, node_class=SleepThenDouble):
    tools = make_tools(ToolsSpec(model), namespace=f"/worker_test_{time.monotonic_ns()}", realtime=True,
                       planning="process")
    writer = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("value", "sleep_s", "result", "command"):
        writer.register_key(key, access=Access.WRITE)
    writer.value, writer.sleep_s, writer.result, writer.command = 1, 0.0, None, None
    node = node_class("sleep then double", tools)
    planning_worker().warm_up(tools.spec, [node], timeout_s=WAIT_S)
    return node, writer


def _tick_until_done(node, limit_s: float = WAIT_S) -> Status:
    deadline = time.monotonic() + limit_s
    node.tick_once()
    while node.status == Status.RUNNING and time.monotonic() < deadline:
        time.sleep(0.02)
        node.tick_once()
    return node.status


def test_a_process_plan_holds_still_then_applies_its_result(drawer_model):
    node, bb = _sleep_node(drawer_model)
    bb.sleep_s = 0.5
    node.tick_once()
    assert node.status == Status.RUNNING and node.planning()
    assert not np.any(bb.command.qvel) and "holding still" in node.feedback_message  # hold still, said so
    bb.value = 100  # the blackboard moves on; the worker plans on the snapshot
    assert _tick_until_done(node) == Status.SUCCESS
    assert bb.result == 2 and not node.planning() and len(node.plan_wall_s) == 1


def test_the_worker_freezes_what_its_warm_up_built_out_of_the_garbage_collector(drawer_model):
    node, writer = _sleep_node(drawer_model, FreezeCountOfTheWorker)
    assert _tick_until_done(node) == Status.SUCCESS
    # the toolkit and the robot's IK, imported and built by the warm-up: far more than a bare interpreter's objects
    assert writer.result > 50_000


def test_a_cancelled_job_drops_its_result_and_a_queued_one_is_skipped(drawer_model):
    node, bb = _sleep_node(drawer_model)
    bb.sleep_s = 1.0
    node.tick_once()
    running = node._job
    node.stop(Status.INVALID)  # interrupted while planning: terminate() cancels
    assert running.cancelled and not node.planning()
    node.tick_once()  # a new plan, queued behind the abandoned one, then cancelled before it starts
    queued = node._job
    node.stop(Status.INVALID)
    assert running.join(WAIT_S) and queued.join(WAIT_S)
    assert bb.result is None  # neither result was written
    with pytest.raises(PlanningCancelled):
        queued.result()


def test_a_killed_worker_is_restarted_and_the_node_fails_visibly(drawer_model):
    node, bb = _sleep_node(drawer_model)
    worker = planning_worker()
    restarts, pid = worker.restarts, worker.pid
    bb.sleep_s = 60.0
    node.tick_once()
    job = node._job
    time.sleep(0.5)
    os.kill(pid, signal.SIGKILL)
    assert job.join(WAIT_S)
    node.tick_once()
    assert node.status == Status.FAILURE
    assert "planning worker died" in node.feedback_message and "killed by signal 9" in node.feedback_message
    assert node.tools.failures == [node.name]
    assert worker.restarts == restarts + 1 and worker.pid != pid
    bb.sleep_s, bb.value = 0.0, 21  # the next plan goes to the new worker
    assert _tick_until_done(node) == Status.SUCCESS and bb.result == 42


def test_the_process_plan_equals_the_plan_in_the_tick_for_a_fixed_snapshot():
    """PlanGrasp of the drawer tree (grasp prediction and whole-body IK) on a snapshot taken in a lockstep
    episode: in the tick and in the worker process, the same grasp and joint targets."""
    robot = SimRobot(handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="test", max_episode_steps=200))
    solver = make_tree_solver("OpenCabinetDrawer", robot.model)
    observation = robot.reset(seed=0)
    solver.reset(observation)
    node = next(n for n in solver.root.iterate() if isinstance(n, PlanGrasp))
    while not robot.done and solver.bb.q_pregrasp is None:
        robot.act(solver.step(observation))
        observation = robot.observe()
    assert solver.bb.q_pregrasp is not None, solver.tools.failure_reasons
    robot.env.close()
    snap = node.snapshot()
    inline = node.plan(snap)
    planning_worker().warm_up(solver.tools.spec, [node], timeout_s=WAIT_S)
    job = planning_worker().submit(node, snap)
    assert job.join(WAIT_S)
    remote = job.result()
    assert remote[0] == inline[0] == "grasp"
    for a, b in zip(remote[1][1:], inline[1][1:]):  # X_WG, X_WP, tolerance_G, q_pregrasp, q_grasp, stretched
        np.testing.assert_allclose(a, b, atol=1e-9)
    assert remote[1][0].width_m == inline[1][0].width_m


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor", "PushChair", "MoveBucket", "PickCube"])
def test_every_planning_node_of_the_trees_can_go_to_the_worker(task):
    """Each tree's planning nodes pickle without the tree (no lambdas among their attributes)."""
    env = handleit.envs.make(task, obs_mode="pointcloud")
    model = robot_model_of(env)
    env.close()
    options = TREE_OPTIONS.get(task, {})
    side = options.get("side", "right")
    tools = Tools(model=model, ik=None, pid=None, tracking_pid=None, grasp_predictor=None,
                  namespace=f"/copy_test_{task}", side=side, sides=options.get("sides", ()))
    nodes = [n for n in TREES[task](tools).iterate() if isinstance(n, BackgroundPlanning)]
    assert nodes
    for node in nodes:
        data, digest = node_copy(node)
        assert data and digest


# -- segmentation off the tick (behaviors/segment_nodes.Segment in real time) -----------------------------------
class _GatedSegmenter:
    """Marks the points with x > 0 as the target once ``gate`` is set (the test steps it along)."""

    mask_names = ("target_handle", "target_link", "robot")

    def __init__(self, gate):
        self.gate, self.clouds = gate, 0

    def reset(self):
        pass

    def segment(self, obs):
        assert self.gate.wait(60)
        self.clouds += 1
        target = obs.points[:, 0] > 0
        return {"target_handle": target, "target_link": target.copy(), "robot": ~target}


def _observation(t_s: float, points: np.ndarray):
    return Observation(time_s=t_s, points=points, colors=np.zeros((len(points), 3), np.uint8), masks={},
                       frame="world", joint_names=("a",), qpos=np.array([t_s]), qvel=np.zeros(1), X_WB=np.eye(4))


def test_segmentation_on_a_thread_hands_on_the_newest_finished_cloud_and_fails_visibly_when_stale(drawer_model):
    import threading

    from handleit.behaviors.segment_nodes import SEGMENTATION_MAX_AGE_S, Segment, TargetFound

    gate = threading.Event()
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/seg_test_{time.monotonic_ns()}", realtime=True,
                       planning="thread", segmenter=_GatedSegmenter(gate))
    writer = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "segmentation_error"):
        writer.register_key(key, access=Access.WRITE)
    segment, found = Segment("segment", tools), TargetFound("target found?", tools)
    cloud_a = np.array([[1.0, 0, 0], [-1.0, 0, 0]])
    writer.observation, writer.segmentation_error = _observation(0.0, cloud_a), None
    segment.tick_once()
    assert segment.status == Status.RUNNING and "holding still" in segment.feedback_message
    gate.set()
    assert segment._job.result(timeout=60) is not None
    writer.observation = _observation(0.01, cloud_a)
    segment.tick_once()
    assert segment.status == Status.SUCCESS and writer.segmentation_error is None
    assert writer.observation.masks["target_handle"].tolist() == [True, False]
    assert writer.observation.qpos[0] == 0.01  # the newest joint states with the segmented cloud
    # A new cloud whose segmentation does not finish: the tick keeps the newest finished one...
    gate.clear()
    cloud_b = np.array([[-1.0, 0, 0], [1.0, 0, 0], [2.0, 0, 0]])
    writer.observation = _observation(0.02, cloud_b)
    segment.tick_once()
    assert writer.observation.points is cloud_a and writer.segmentation_error is None
    # ...until it is stale: its target masks are emptied and "target found?" fails, saying so.
    writer.observation = _observation(SEGMENTATION_MAX_AGE_S + 0.05, cloud_b)
    segment.tick_once()
    found.tick_once()
    assert not writer.observation.masks["target_handle"].any() and writer.observation.masks["robot"].tolist() == [
        False, True]
    assert found.status == Status.FAILURE and "segmentation stale" in found.feedback_message
    gate.set()
    segment.wait_idle()


def test_segmentation_in_the_worker_process_gives_the_masks_of_the_tick():
    """The geometric segmenter on a drawer's first cloud: in the segmentation worker process, the masks it gives
    in this process."""
    from handleit.behaviors.planning_worker import segmentation_worker
    from handleit.perception.segmenters import get_segmenter

    robot = SimRobot(handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="test"), sim_masks=False)
    obs = robot.reset(seed=0)
    robot.env.close()
    spec = ("geometric", "cabinet_part", robot.model, {})
    here = get_segmenter(*spec[:3])
    here.reset()
    expected = here.segment(obs)
    worker = segmentation_worker()
    key = (f"test {time.monotonic_ns()}", 1)
    worker.prepare_segmenter(key, spec, timeout_s=WAIT_S)
    job = worker.segment(key, spec, obs)
    assert job.join(WAIT_S)
    keep, masks, error = job.result()
    assert error is None and keep is None
    assert set(masks) == set(expected)
    for name in expected:
        assert np.array_equal(masks[name], expected[name]), name


def test_a_hand_eye_node_plans_on_a_cloud_taken_at_rest(drawer_model):
    """In real time the newest cloud is older than the joint states: a node that compares the hand seen with the
    model's holds still until the robot is at rest and two new clouds have come, and only then plans."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/rest_test_{time.monotonic_ns()}", realtime=True,
                       planning="thread")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("value", "sleep_s", "result", "command", "observation"):
        bb.register_key(key, access=Access.WRITE)
    bb.value, bb.sleep_s, bb.result, bb.command = 3, 0.0, None, None
    dof = len(drawer_model.joint_names)

    def observe(points, speed):
        qvel = np.zeros(dof)
        qvel[0] = speed
        return Observation(time_s=0.0, points=points, colors=np.zeros((1, 3), np.uint8), masks={}, frame="world",
                           joint_names=drawer_model.joint_names, qpos=np.zeros(dof), qvel=qvel, X_WB=np.eye(4))

    node = DoubleOnACloudAtRest("double on a cloud at rest", tools)
    cloud = np.zeros((1, 3))
    bb.observation = observe(cloud, 0.5)  # the base still moving
    for _ in range(3):
        node.tick_once()
        assert node.status == Status.RUNNING and not node.planning()
        assert not np.any(bb.command.qvel) and "moving" in node.feedback_message
    bb.observation = observe(cloud, 0.0)  # at rest, the same (older) cloud
    node.tick_once()
    assert not node.planning() and "at rest, 0 clouds" in node.feedback_message
    for k in range(2):  # two clouds taken since
        bb.observation = observe(np.full((1, 3), k + 1.0), 0.0)
        node.tick_once()
    assert node.planning() or node.status == Status.SUCCESS
    assert _tick_until_done(node) == Status.SUCCESS and bb.result == 6


def test_a_hand_eye_node_plans_at_once_on_the_state_at_its_clouds_stamp(drawer_model):
    """A cloud that carries its stamp, with the tree's state history reaching it: no waiting for rest; the plan
    sees the robot's state at the cloud's stamp (the base 10 cm back from where it is now), not the newest."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/stamp_test_{time.monotonic_ns()}", realtime=True,
                       planning="thread")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("value", "sleep_s", "result", "command", "observation", "state_history"):
        bb.register_key(key, access=Access.WRITE)
    bb.value, bb.sleep_s, bb.result, bb.command = 3, 0.0, None, None
    bb.state_history = StateHistory()
    dof = len(drawer_model.joint_names)

    def observe(t, points_time_s):
        qpos, qvel = np.zeros(dof), np.zeros(dof)
        qpos[0], qvel[0] = t, 1.0  # the base moving at 1 m/s
        return Observation(time_s=t, points=np.zeros((1, 3)), colors=np.zeros((1, 3), np.uint8), masks={},
                           frame="world", joint_names=drawer_model.joint_names, qpos=qpos, qvel=qvel, X_WB=np.eye(4),
                           points_time_s=points_time_s)

    for k in range(21):
        bb.state_history.add(observe(0.01 * k, None))
    bb.observation = observe(0.2, 0.1)
    node = DoubleOnTheStateOfItsCloud("double on the state of its cloud", tools)
    node.tick_once()
    assert node.planning() or node.status == Status.SUCCESS  # no settling while the base moves
    assert _tick_until_done(node) == Status.SUCCESS
    value, x = bb.result
    assert value == 6 and x == pytest.approx(0.1)
    # A cloud older than the history reaches: the node waits for rest as before.
    bb.observation = observe(0.2, -5.0)
    node = DoubleOnTheStateOfItsCloud("double on an old cloud", tools)
    node.tick_once()
    assert node.status == Status.RUNNING and not node.planning() and "moving" in node.feedback_message


def test_a_plan_does_not_wait_behind_a_camera_fit(drawer_model):
    """Camera calibration fits (0.3-2 s) have a worker process of their own: a short plan sent after a long fit
    comes back first (in the planning worker it queued behind the fits: 20 ms plans held the robot for 1.3 s)."""
    node, bb = _sleep_node(drawer_model)
    assert len({planning_worker().pid, calibration_worker().pid, segmentation_worker().pid}) == 3
    calibration_worker().warm_up(node.tools.spec, [node], timeout_s=WAIT_S)
    slow = calibration_worker().submit(node, {"value": 5, "sleep_s": 3.0})
    quick = planning_worker().submit(node, {"value": 7, "sleep_s": 0.0})
    assert quick.join(WAIT_S) and quick.result() == 14
    assert not slow.done()  # still fitting
    assert slow.join(WAIT_S) and slow.result() == 10
