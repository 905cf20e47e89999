"""The cabinet behavior trees: structure and printing, whole episodes, failure checks that trigger recovery,
and the mplib re-plan branch. (The layering rule, that no layer imports the environments: test_import_layers.)"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import py_trees
import pytest

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.behaviors.cabinet_nodes import FollowPath, PlanArmPath, hooked_knob_grasp
from handleit.harness.sim_robot import SimRobot
from handleit.perception.handle_grasps import CLEARANCE_M, FINGERTIP_CLEARANCE_M
from handleit.types import Command, Grasp


def _robot(task: str, max_steps: int = 200, split: str = "train") -> SimRobot:
    return SimRobot(handleit.envs.make(task, obs_mode="pointcloud", split=split, max_episode_steps=max_steps))


def _run(robot: SimRobot, solver, seed: int, until=None):
    observation = robot.reset(seed=seed)
    solver.reset(observation)
    while not robot.done:
        robot.act(solver.step(observation))
        observation = robot.observe()
        if until is not None and until(solver):
            break
    return robot.info


@pytest.mark.parametrize("task", ["OpenCabinetDrawer", "OpenCabinetDoor"])
def test_trees_print_with_their_failure_checks(task):
    robot = _robot(task)
    solver = make_tree_solver(task, robot.model)
    solver.reset(robot.reset(seed=0))
    text = solver.unicode_tree()
    for node in ("perceive", "plan grasp", "grasp holds?", "handle in gripper?", "making progress?", "recover",
                 "re-plan around obstacles", "hold still"):
        assert node in text, node
    assert ("pull drawer" if task == "OpenCabinetDrawer" else "swing along hinge arc") in text
    dot = solver.dot_tree()
    assert dot.startswith("digraph") and '"handle in gripper?"' in dot


def test_unknown_task_has_no_tree():
    robot = _robot("OpenCabinetDrawer")
    with pytest.raises(ValueError, match="no behavior tree for task 'OpenFridge'"):
        make_tree_solver("OpenFridge", robot.model)


def test_drawer_tree_opens_a_drawer():
    # Success rates under the 200-step protocol come from `handleit eval` (docs/benchmarks.md); here a
    # longer horizon keeps the test about the tree working end to end, not about the time budget.
    robot = _robot("OpenCabinetDrawer", max_steps=400, split="test")
    solver = make_tree_solver("OpenCabinetDrawer", robot.model)
    info = _run(robot, solver, seed=3)
    assert info["success"], solver.tools.failure_reasons
    d = solver.diagnostics()
    assert d["step_ms_median"] is not None and d["step_ms_median"] > 0


def test_door_tree_opens_a_door():
    robot = _robot("OpenCabinetDoor", max_steps=1000, split="test")
    solver = make_tree_solver("OpenCabinetDoor", robot.model)
    info = _run(robot, solver, seed=5)
    assert info["success"], solver.tools.failure_reasons
    assert solver.bb.hinge is not None


class _SlippingRobot(SimRobot):
    """Opens the gripper for a few steps once the pull has started, as if the handle slipped."""

    def __init__(self, env, solver_ref):
        super().__init__(env)
        self.solver_ref, self.sabotaged, self.open_steps = solver_ref, False, 0

    def act(self, command):
        solver = self.solver_ref[0]
        pulling = any(n.name == "pull drawer" and n.status == py_trees.common.Status.RUNNING
                      for n in solver.root.iterate())
        if pulling and not self.sabotaged:
            self.sabotaged, self.open_steps = True, 15
        if self.open_steps:
            self.open_steps -= 1
            command = replace(command, gripper={"right": "open"})
        super().act(command)


def test_a_failed_check_records_its_node_and_recovery_opens_the_drawer():
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="train", max_episode_steps=600)
    holder = [None]
    robot = _SlippingRobot(env, holder)
    solver = make_tree_solver("OpenCabinetDrawer", robot.model)
    holder[0] = solver
    info = _run(robot, solver, seed=1)
    assert robot.sabotaged
    assert "handle in gripper?" in solver.tools.failures  # the check noticed the lost handle
    assert solver.bb.attempt >= 1  # and the recovery branch started another attempt
    assert info["success"], solver.tools.failure_reasons


def test_replan_branch_finds_an_arm_path_through_the_observed_cloud():
    """The mplib fallback: from where the base stands, an arm path to the pregrasp, avoiding the points."""
    robot = _robot("OpenCabinetDrawer", max_steps=400)
    solver = make_tree_solver("OpenCabinetDrawer", robot.model)
    # Stop once the grasp is planned and the base has arrived (the arm still on its way).
    _run(robot, solver, seed=2, until=lambda s: s.bb.q_pregrasp is not None and any(
        n.name == "move to grasp" and n.status == py_trees.common.Status.RUNNING for n in s.root.iterate()))
    tools = solver.tools
    plan = PlanArmPath("plan arm path (mplib)", tools, "q_pregrasp", "X_WG_pregrasp")
    follow = FollowPath("follow arm path", tools)
    # Start from the arm folded back, so that the path is not trivial.
    q = robot.env.unwrapped.robot.qpos.copy()
    q[tools.arm_index] = [0.0, 0.0, 0.0, -1.5, 0.0, 3.0, 0.78]
    robot.env.unwrapped.robot.reset(q)
    observation = robot.observe()
    observation = replace(observation, qpos=q.astype(np.float64))
    solver.bb.observation = observation
    solver.bb.reference = None
    plan.tick_once()
    assert plan.status == py_trees.common.Status.SUCCESS, plan.feedback_message
    path = solver.bb.arm_path
    assert len(path) > 2 and np.allclose(path[0][tools.controlled], q[tools.controlled], atol=1e-3)
    base = tools.base_index
    assert np.allclose(path[:, base], path[0, base])  # the arm alone moves
    for _ in range(300):
        solver.bb.observation = robot.observe()
        solver.bb.tick += 1
        follow.tick_once()
        if follow.status != py_trees.common.Status.RUNNING:
            break
        robot.act(solver.bb.command)
    assert follow.status == py_trees.common.Status.SUCCESS, follow.feedback_message
    X_WT = robot.observe().X_WT["right"]
    assert np.linalg.norm(X_WT[:3, 3] - solver.bb.X_WG_pregrasp[:3, 3]) < 0.03


def _knob_grasp(head_width_m: float):
    """A grasp approaching a door front (the plane x = 0, door facing -x) along +x, on a knob head whose
    centre stands 40 mm out; the sampler's opening is the head plus its clearance on both sides."""
    X_WG = np.eye(4)
    X_WG[:3, :3] = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # G's z along +x of W
    X_WG[:3, 3] = [-0.04, 0.0, 1.0]
    front = np.c_[np.zeros(200), np.random.default_rng(0).uniform(-0.2, 0.2, (200, 2)) + [0.0, 1.0]]
    return Grasp(X_WG=X_WG, width_m=head_width_m + 2 * CLEARANCE_M, score=1.0), front


def test_a_knob_grasp_hooks_behind_the_head_but_stays_off_the_front():
    grasp, front = _knob_grasp(0.030)
    hooked = hooked_knob_grasp(grasp, front)
    np.testing.assert_allclose(hooked.X_WG[:3, :3], grasp.X_WG[:3, :3])
    assert hooked.X_WG[0, 3] == pytest.approx(-0.04 + 0.015)  # half the head deeper, along the approach
    assert hooked.width_m == grasp.width_m

    grasp, front = _knob_grasp(0.080)  # a wide head: the move stops at the sampler's fingertip clearance
    assert hooked_knob_grasp(grasp, front).X_WG[0, 3] == pytest.approx(-FINGERTIP_CLEARANCE_M)


def test_an_opening_command_sets_the_fingers_to_that_width_in_the_simulator():
    robot = _robot("OpenCabinetDoor")
    observation = robot.reset(seed=0)
    m = robot.model
    fingers = m.index(m.finger_joint_names["right"])
    still = np.zeros(len(m.joint_names))
    for _ in range(30):
        robot.act(Command(qvel=still, gripper={"right": 0.03}))
    observation = robot.observe()
    assert observation.qpos[fingers].sum() == pytest.approx(0.03, abs=0.002)
