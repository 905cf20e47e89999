"""The door swing's end judged on new clouds by their stamps (behaviors/door_nodes.py SwingDoorOpen): in real time
a cloud is older than the tick (latency) and repeated over several ticks (a camera slower than the control rate).
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import py_trees
import pytest
from py_trees.common import Access, Status

from handleit.behaviors.common import RAMP_S
from handleit.behaviors.door_nodes import ARC_LEAD_RAD, STALL_STEPS, SwingDoorOpen
from handleit.behaviors.solver_tools import ToolsSpec, make_tools
from handleit.types import Observation


def _swing(drawer_model, latency_s: float, camera_hz: float | None, hinge_point_W=None, ticks: int = 80, bb_out=None,
           front_edge_W=None, goals_out=None):
    """A swing on a door held 57 degrees open whose hand never moves, ticked at the control rate from t = 1 s;
    clouds stamped ``latency_s`` before their tick, one per control period or at ``camera_hz``. Returns the
    statuses per tick. The IK stands in with the current joints (what is tested is when the swing ends)."""
    tools = make_tools(ToolsSpec(drawer_model), namespace=f"/swing_test_{time.monotonic_ns()}")
    def solve(q, goals, **kw):
        if goals_out is not None:
            goals_out.append(goals[tools.side].copy())
        return SimpleNamespace(success=True, q=np.array(q), message="ok")

    tools.ik = SimpleNamespace(solve=solve)
    bb = py_trees.blackboard.Client(name="test", namespace=tools.namespace)
    for key in ("observation", "tick", "hinge", "open_state", "reference", "command"):
        bb.register_key(key, access=Access.WRITE)
    X_WT = np.eye(4)
    X_WT[:3, 3] = [0.7, 0.0, 0.8]
    bb.hinge = (np.array([0.7, 0.5, 0.8]), np.array([0.0, 0.0, 1.0]), 0.5)
    bb.open_state = SimpleNamespace(state=SimpleNamespace(measured=True, opening_angle_rad=math.radians(57)),
                                    hinge_point_W=hinge_point_W or (lambda height_m, min_angle_rad: None),
                                    front_edge_W=front_edge_W or (lambda height_m, away_from_W: None),
                                    initial_normal_W=np.array([-1.0, 0.0, 0.0]))
    bb.reference, bb.tick = None, 0
    node = SwingDoorOpen("swing along hinge arc", tools)
    dof, dt = len(drawer_model.joint_names), drawer_model.control_dt_s
    statuses = []
    if bb_out is not None:
        bb_out.append(bb)
    for k in range(ticks):
        t = 1.0 + k * dt
        stamp = t - latency_s
        if camera_hz is not None:
            stamp = math.floor(stamp * camera_hz) / camera_hz
        bb.tick = k
        bb.observation = Observation(time_s=t, points=np.zeros((1, 3)), colors=np.zeros((1, 3), np.uint8), masks={},
                                     frame="world", joint_names=drawer_model.joint_names, qpos=np.zeros(dof),
                                     qvel=np.zeros(dof), X_WB=np.eye(4), X_WT={tools.side: X_WT},
                                     points_time_s=stamp)
        node.tick_once()
        statuses.append(node.status)
        if node.status != Status.RUNNING:
            break
    return statuses


def test_in_lockstep_a_still_door_past_45_degrees_ends_the_swing_after_the_ramp_and_the_stall_window(drawer_model):
    """The hand's ramp to speed first (a re-grasped door, past 45 degrees and still while the hand starts, is not
    at its stop), then the stall window."""
    statuses = _swing(drawer_model, latency_s=0.0, camera_hz=None)
    ramp_steps = round(RAMP_S / drawer_model.control_dt_s)
    assert statuses == [Status.RUNNING] * (ramp_steps + STALL_STEPS) + [Status.SUCCESS]


def test_clouds_from_before_the_swing_and_repeated_clouds_do_not_end_it_early(drawer_model):
    """100 ms of latency and a 15 Hz camera: the first ten ticks' clouds predate the swing (a hand that has not
    moved yet is no stop), and a repeated cloud is one measurement, not several."""
    statuses = _swing(drawer_model, latency_s=0.1, camera_hz=15.0)
    assert statuses[-1] == Status.SUCCESS
    dt = drawer_model.control_dt_s
    # The first cloud taken since the swing began arrives 0.1 s + up to one camera period after it; the stall
    # window (STALL_STEPS control periods) is then measured between clouds.
    assert len(statuses) * dt >= 0.1 + RAMP_S + STALL_STEPS * dt


def test_a_door_grasped_open_is_turned_from_where_it_was_grasped(drawer_model):
    """A door re-grasped at 57 degrees (a handle that slipped mid-swing): the first goal is the grasp turned by the
    lead about the hinge, not by the door's opening plus the lead (which had put it 57 degrees past the hand, the hand
    stood still, and the still door past 45 degrees ended the swing as if at its stop)."""
    goals = []
    _swing(drawer_model, 0.0, None, ticks=1, goals_out=goals)
    hinge_W, radius = np.array([0.7, 0.5, 0.8]), 0.5
    grasp_W = np.array([0.7, 0.0, 0.8])
    chord_m = np.linalg.norm(goals[0][:3, 3] - grasp_W)
    turn_rad = 2 * np.arcsin(chord_m / (2 * radius))
    assert np.linalg.norm(goals[0][:2, 3] - hinge_W[:2]) == pytest.approx(radius)
    assert turn_rad == pytest.approx(ARC_LEAD_RAD, abs=1e-6)  # past START_SWING_RAD: the arc's lead


def test_the_hinge_moves_to_where_the_closed_and_swung_faces_meet_when_that_is_more_than_3_cm_away(drawer_model):
    """The estimate from the closed door (a marked handle's guessed extent: 6 cm off on door-test-006) gives way to
    the faces' hinge, with the handle's radius from it and the axis that swings the free edge outward, when the
    swung leaf's end seen in the same cloud agrees with it within 3 cm. Not taken: a refit within 3 cm of the
    estimate (the simulator's masks give the same episodes as before), nor one 10 cm from the leaf's end (an
    odometry drift between the two faces' clouds), nor one where the leaf's end was not seen, nor one whose leaf's end
    is within 3 cm of the estimate."""
    cases = (  # (faces' hinge, leaf's end, moved)
        (np.array([0.7, 0.42, 0.8]), np.array([0.71, 0.43, 0.8]), True),
        (np.array([0.7, 0.48, 0.8]), np.array([0.7, 0.48, 0.8]), False),
        (np.array([0.7, 0.42, 0.8]), np.array([0.7, 0.52, 0.8]), False),
        (np.array([0.7, 0.42, 0.8]), None, False),
        (np.array([0.7, 0.465, 0.8]), np.array([0.7, 0.48, 0.8]), False),  # the leaf's end where the estimate is
    )
    for found_W, edge_W, moved in cases:
        boards = []
        _swing(drawer_model, 0.0, None, ticks=1, bb_out=boards,
               hinge_point_W=lambda height_m, min_angle_rad, p=found_W: p.copy(),
               front_edge_W=lambda height_m, away_from_W, p=edge_W: None if p is None else p.copy())
        bb = boards[0]
        p_W, axis, radius = bb.hinge
        if moved:
            assert np.allclose(p_W, found_W) and radius == pytest.approx(0.42)
            # The handle at y = 0 from a hinge at y = 0.42: a positive turn about -z moves it toward -x (outward).
            assert np.allclose(axis, [0.0, 0.0, -1.0])
        else:
            assert np.allclose(p_W, [0.7, 0.5, 0.8]) and radius == 0.5
