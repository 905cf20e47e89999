"""The door tree's quicker pieces (issue 17): the fingers closing on the move's last centimetre, the base's
heading during the swing turned diagonal to its way round the hinge, a low handle's grasp reached with the
base's help instead of by an arm folding over, and a move whose preshaped fingers land on the handle ended at
once."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import py_trees
import pytest
from py_trees.common import Access

from handleit.behaviors.cabinet_nodes import PlanGrasp
from handleit.behaviors.cabinet_trees import DOOR_MAX_APPROACH_ARM_RAD
from handleit.behaviors.common import MoveToConfiguration
from handleit.behaviors.door_nodes import diagonal_heading_nominal
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _move(model, close_within_m):
    tools = make_tools(ToolsSpec(model), namespace=f"/door_speed_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "command", "tick", "reference", "q_grasp", "X_WG_grasp", "close_started"):
        bb.register_key(key, access=Access.WRITE)
    bb.command, bb.tick, bb.reference, bb.close_started = None, 0, None, None
    node = MoveToConfiguration("move to grasp", tools, "q_grasp", "X_WG_grasp", lateral_tolerance_m=0.012,
                               axial_tolerance_m=0.004, close_within_m=close_within_m)
    return node, bb, tools


def _observe(model, tools, p_WT):
    qpos = np.zeros(len(model.joint_names))
    qpos[tools.finger_index] = 0.03
    X_WT = np.eye(4)
    X_WT[:3, 3] = p_WT
    return Observation(time_s=0.0, points=np.zeros((1, 3)), colors=np.zeros((1, 3), np.uint8), masks={},
                       frame="world", joint_names=model.joint_names, qpos=qpos, qvel=np.zeros(len(qpos)),
                       X_WB=np.eye(4), X_WT={tools.side: X_WT})


@pytest.mark.parametrize("close_within_m", [0.012, None])
def test_the_fingers_close_on_the_last_centimetre_of_the_move(drawer_model, close_within_m):
    node, bb, tools = _move(drawer_model, close_within_m)
    goal = np.eye(4)  # approach along the goal's z: the tool centre comes in from -z
    bb.X_WG_grasp = goal
    bb.q_grasp = np.zeros(len(drawer_model.joint_names))
    commands = []
    for depth, aside in ((0.05, 0.0), (0.02, 0.0), (0.008, 0.03), (0.008, 0.005), (0.006, 0.005)):
        bb.tick += 1
        bb.observation = _observe(drawer_model, tools, [aside, 0.0, -depth])
        node.tick_once()
        commands.append(bb.command.gripper[tools.side])
    if close_within_m is None:
        assert commands == ["open"] * 5 and bb.close_started is None
        return
    # Far, then near but 3 cm aside: still open; within 1.2 cm along and aside within tolerance: closing, and it
    # stays closing; the fingers where the close began are kept for the gripper node that follows.
    assert commands == ["open", "open", "open", "close", "close"]
    assert np.allclose(bb.close_started, 0.03)
    node.initialise()  # a new attempt forgets it
    assert bb.close_started is None
    # While the reference is still on its way (the joints' target 0.5 rad off), the hand coming in is not closed on.
    bb.q_grasp = np.full(len(drawer_model.joint_names), 0.5)
    bb.tick += 1
    bb.observation = _observe(drawer_model, tools, [0.005, 0.0, -0.006])
    node.tick_once()
    assert bb.command.gripper[tools.side] == "open" and bb.close_started is None


def test_the_swing_turns_the_heading_diagonal_to_the_way_round_the_hinge():
    base = np.array([0, 1, 2, 3])
    hinge, up = np.zeros(3), np.array([0.0, 0.0, 1.0])
    q = np.zeros(5)
    q[:2] = (0.0, -1.0)  # the base 1 m from the hinge along -y: a positive turn about z moves it along +x
    q[2] = 0.05  # heading nearly along the way round
    nominal = diagonal_heading_nominal(q, base, hinge, up, step_rad=0.1)
    assert nominal[2] == pytest.approx(0.15)  # toward +45 degrees (the nearer), by one step
    assert np.array_equal(np.delete(nominal, 2), np.delete(q, 2))
    for _ in range(20):
        q = diagonal_heading_nominal(q, base, hinge, up, step_rad=0.1)
    assert q[2] == pytest.approx(math.pi / 4)  # reached, and held there
    q[2] = -0.3  # nearer -45 degrees
    assert diagonal_heading_nominal(q, base, hinge, up, step_rad=1.0)[2] == pytest.approx(-math.pi / 4)
    # The other sense of opening (axis down): the way round is -x; the headings 45 degrees off it are +-135.
    q[2] = 3.0
    assert diagonal_heading_nominal(q, base, hinge, -up, step_rad=1.0)[2] == pytest.approx(3 * math.pi / 4)


# A low door handle (test door 001, seed 11: a vertical bar 0.2 m up) and the pregrasp posture whole-body IK chose
# for it: the elbow straight (joint 4 at -0.07), the wrist at its stop (joint 6 at 3.75).
LOW_HANDLE_Q_PREGRASP = np.array([-1.37781, 0.00762, 0.79957, 0.0, -0.43189, 1.18866, -0.26554, -0.07041, -0.2981,
                                  3.7525, 0.02043, 0.024, 0.024])
LOW_HANDLE_X_WG = np.array([[0.0, -0.00028, 1.0, -0.20554], [0.0, -1.0, -0.00028, 0.05913],
                            [1.0, 0.0, 0.0, 0.19857], [0.0, 0.0, 0.0, 1.0]])


def test_a_grasp_the_arm_reaches_only_by_folding_over_is_reached_with_the_base(drawer_model):
    """From a stretched pregrasp the arm alone reaches 10 cm further in only in another branch of its IK (joints 3
    and 7 turned by ~2.9 rad: the straight joint-space move sweeps the hand off the approach line). The planner's
    rule (PlanGrasp ``max_approach_arm_rad``) sees that, and the solve with the base free keeps the arm's posture."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/door_fold_{time.monotonic_ns()}")
    plan = PlanGrasp("plan grasp", tools, max_approach_arm_rad=DOOR_MAX_APPROACH_ARM_RAD)
    q_pre = LOW_HANDLE_Q_PREGRASP
    arm_only = tools.ik.solve(q_pre, {tools.side: LOW_HANDLE_X_WG}, fixed_joints=drawer_model.base_joint_names)
    with_base = tools.ik.solve(q_pre, {tools.side: LOW_HANDLE_X_WG})
    assert arm_only.success and with_base.success
    assert plan._folds_over(q_pre, arm_only.q)
    assert not plan._folds_over(q_pre, with_base.q)
    assert np.linalg.norm(with_base.q[tools.base_index[:2]] - q_pre[tools.base_index[:2]]) > 0.05  # the base goes in
    assert not PlanGrasp("plan grasp", tools)._folds_over(q_pre, arm_only.q)  # the drawer's default: no check


def _peak_speeds(model, base_fraction, arm_stretched):
    """Peak reference speeds per joint of a move to a grasp 0.3 m ahead of the base (x) and 0.3 rad of joint 1."""
    tools = make_tools(ToolsSpec(model), namespace=f"/door_base_speed_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "command", "tick", "reference", "q_grasp", "X_WG_grasp", "grasp_arm_stretched"):
        bb.register_key(key, access=Access.WRITE)
    bb.command, bb.tick, bb.reference = None, 0, None
    bb.q_grasp = np.zeros(len(model.joint_names))
    bb.q_grasp[tools.base_index[0]] = 0.3
    bb.q_grasp[tools.arm_index[0]] = 0.3
    bb.grasp_arm_stretched = arm_stretched
    bb.X_WG_grasp = np.eye(4)
    bb.X_WG_grasp[:3, 3] = (5.0, 0.0, 0.0)  # far from the tool centre: the move never succeeds here
    node = MoveToConfiguration("move to grasp", tools, "q_grasp", "X_WG_grasp", speed_fraction=0.7,
                               base_speed_fraction=base_fraction, slow_base_key="grasp_arm_stretched")
    feed_forward = []
    for _ in range(150):  # the robot stands still; the reference runs on
        bb.tick += 1
        bb.observation = _observe(model, tools, [0.0, 0.0, 0.0])
        node.tick_once()
        feed_forward.append(bb.reference[2].copy())
    return tools, np.max(np.abs(feed_forward), axis=0)


def test_the_base_moves_at_its_own_speed_fraction_when_the_arm_is_stretched(drawer_model):
    limits = drawer_model.velocity_limits
    tools, full = _peak_speeds(drawer_model, None, True)
    x, joint1 = tools.base_index[0], tools.arm_index[0]
    assert full[x] == pytest.approx(0.7 * limits[x], rel=0.02)
    _, slow = _peak_speeds(drawer_model, 0.3, True)  # PlanGrasp found the arm stretched at the pregrasp
    assert slow[x] == pytest.approx(0.3 * limits[x], rel=0.02)
    assert slow[joint1] < full[joint1]  # all joints still arrive together: the arm slows to the base's pace
    # A grasp the base takes part in for another reason (the arm alone found no solution): full speed.
    _, same = _peak_speeds(drawer_model, 0.3, False)
    assert same[x] == pytest.approx(full[x], rel=1e-6)


def test_preshaped_fingers_squeezed_on_the_way_fail_the_move_at_once(drawer_model):
    """A jaw on the handle instead of around it pushes the preshaped fingers together: the move fails at once (the
    retry backs off and comes in wide open) instead of stalling there; fingers only opening up to their preshape,
    closing to it from wide open, or a few millimetres of give, do not count."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/door_squeeze_{time.monotonic_ns()}")
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "command", "tick", "reference", "q_grasp", "X_WG_grasp", "grasp", "attempt"):
        bb.register_key(key, access=Access.WRITE)
    bb.command, bb.tick, bb.reference, bb.attempt = None, 0, None, 0
    bb.grasp = SimpleNamespace(width_m=0.05)  # preshape: 0.05 + 0.02
    bb.X_WG_grasp, bb.q_grasp = np.eye(4), np.zeros(len(drawer_model.joint_names))
    node = MoveToConfiguration("move to grasp", tools, "q_grasp", "X_WG_grasp", preshape_margin_m=0.02,
                               fail_on_squeeze=True)

    def tick(opening_m, depth_m):
        bb.tick += 1
        obs = _observe(drawer_model, tools, [0.0, 0.0, -depth_m])
        obs.qpos[tools.finger_indices[tools.side]] = opening_m / 2
        bb.observation = obs
        node.tick_once()
        return node.status

    # opening from 44 mm to the 70 mm preshape, then 4 mm of give: running, the preshape commanded
    for opening_m, depth_m in ((0.044, 0.09), (0.06, 0.08), (0.07, 0.07), (0.066, 0.06)):
        assert tick(opening_m, depth_m) == py_trees.common.Status.RUNNING
        assert bb.command.gripper[tools.side] == pytest.approx(0.07)
    # pushed to 55 mm, 15 mm under the preshape: FAILURE, saying why
    assert tick(0.055, 0.05) == py_trees.common.Status.FAILURE
    assert "fingers squeezed" in node.feedback_message
    # fingers wide open after a planned path (80 mm) closing to the preshape: not squeezed
    node.initialise()
    for opening_m in (0.08, 0.07, 0.065):
        assert tick(opening_m, 0.05) == py_trees.common.Status.RUNNING
    # a retry comes in wide open: no preshape, so no squeeze check
    bb.attempt = 1
    node.initialise()
    for opening_m in (0.08, 0.05):
        assert tick(opening_m, 0.05) == py_trees.common.Status.RUNNING
        assert bb.command.gripper[tools.side] == "open"
