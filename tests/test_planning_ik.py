"""Whole-body IK (Drake) on the ManiSkill1 mobile Panda: reachability, failure reports, constraints, joint
order, dual-arm goals. Solve times are printed (run with -s), never asserted."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.envs.robot_description import mobile_panda
from handleit.planning.whole_body_ik import MOBILE_PANDA_P_LC_M, WholeBodyIK, rotation_angle_rad

REST_ARM = [0.0, 0.0, 0.0, -1.5, 0.0, 3.0, 0.78]
POSITION_OK_M = 0.01
ANGLE_OK_RAD = np.deg2rad(2.0)


def _joint_names(d) -> list[str]:
    names = list(d.base_joint_names)
    for side in d.sides:
        names += list(d.arm_joint_names(side)) + list(d.finger_joint_names(side))
    return names


def _rest(d, names) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    q = np.zeros(len(names))
    for side in d.sides:
        for n, v in zip(d.arm_joint_names(side), REST_ARM):
            q[index[n]] = v
        for n in d.finger_joint_names(side):
            q[index[n]] = 0.04
    return q


@pytest.fixture(scope="module")
def single():
    d = mobile_panda("single")
    names = _joint_names(d)
    ik = WholeBodyIK(d.urdf_path, names, {"right": d.tcp_link_name("right")})
    return d, names, ik


def _goal_from(ik, q_goal, side="right"):
    return ik.tcp_pose(q_goal, side)


def _moved(d, names, q, **values):
    q = q.copy()
    index = {n: i for i, n in enumerate(names)}
    for name, v in values.items():
        q[index[name]] = v
    return q


def _clearance_distance(ik, q, side):
    X_WA = ik.forward_kinematics(q, "adjustable_body")
    p_WC = X_WA[:3, :3] @ np.array(MOBILE_PANDA_P_LC_M) + X_WA[:3, 3]
    return float(np.linalg.norm(ik.tcp_pose(q, side)[:3, 3] - p_WC))


def test_rest_pose_matches_the_documented_tool_centre(single):
    d, names, ik = single
    X_WG = ik.tcp_pose(_rest(d, names), "right")
    np.testing.assert_allclose(X_WG[:3, 3], [0.76, -0.80, 0.42], atol=0.01)
    np.testing.assert_allclose(X_WG[:3, 2], [1.0, 0.0, 0.0], atol=0.1)  # approach axis along +x


def test_reaches_a_pose_that_needs_the_base(single):
    d, names, ik = single
    q0 = _rest(d, names)
    index = {n: i for i, n in enumerate(names)}
    # The goal: what the robot reaches after driving 1.2 m, turning, raising the torso and moving the arm.
    q_goal = _moved(d, names, q0, root_x_axis_joint=1.2, root_y_axis_joint=0.4, root_z_rotation_joint=0.5,
                    linear_actuator_height=0.3, right_panda_joint2=0.4, right_panda_joint4=-1.9)
    X_WG = _goal_from(ik, q_goal)
    times = []
    for _ in range(10):
        result = ik.solve(q0, {"right": X_WG})
        times.append(result.solve_time_s)
    print(f"\nIK (single arm, base + arm, 1.3 m away): median {1e3 * np.median(times):.2f} ms, "
          f"max {1e3 * np.max(times):.2f} ms")
    assert result.success, result.message
    X_check = ik.tcp_pose(result.q, "right")
    assert np.linalg.norm(X_check[:3, 3] - X_WG[:3, 3]) < POSITION_OK_M
    assert rotation_angle_rad(X_WG[:3, :3].T @ X_check[:3, :3]) < ANGLE_OK_RAD
    assert result.position_error_m < POSITION_OK_M and result.angle_error_rad < ANGLE_OK_RAD
    # The base had to move: the arm alone cannot reach 1.3 m further.
    assert np.linalg.norm(result.q[[index["root_x_axis_joint"], index["root_y_axis_joint"]]]) > 0.5


def test_random_reachable_goals_solve_within_limits(single):
    d, names, ik = single
    q0 = _rest(d, names)
    rng = np.random.default_rng(7)
    arm = [names.index(n) for n in d.arm_joint_names("right")]
    solved, times = 0, []
    trials = 0
    while trials < 25:
        q_goal = q0.copy()
        q_goal[:2] = rng.uniform(-1.5, 1.5, 2)
        q_goal[2] = rng.uniform(-np.pi, np.pi)
        q_goal[3] = rng.uniform(0.0, 1.0)
        q_goal[arm] = rng.uniform(ik.lower_limits[arm], ik.upper_limits[arm])
        if _clearance_distance(ik, q_goal, "right") < 0.55:
            continue  # not reachable under the default body-to-gripper constraint
        trials += 1
        result = ik.solve(q0, {"right": _goal_from(ik, q_goal)})
        times.append(result.solve_time_s)
        assert np.all(result.q >= ik.lower_limits - 1e-9) and np.all(result.q <= ik.upper_limits + 1e-9)
        solved += result.success
        if result.success:
            assert result.position_error_m < POSITION_OK_M and result.angle_error_rad < ANGLE_OK_RAD
    print(f"\nIK random goals: {solved}/{trials} solved, median {1e3 * np.median(times):.2f} ms, "
          f"90th percentile {1e3 * np.percentile(times, 90):.2f} ms")
    assert solved >= trials - 1


@pytest.mark.parametrize("case", ["three_metres_up", "far_below_floor_base_locked"])
def test_unreachable_goal_is_reported_not_raised(single, case):
    d, names, ik = single
    q0 = _rest(d, names)
    X_WG = ik.tcp_pose(q0, "right")
    fixed = ()
    if case == "three_metres_up":
        X_WG[2, 3] += 3.0  # torso 1.6 m + shoulder + arm reach is about 3 m above the floor at most
    else:
        X_WG[:3, 3] = [3.0, 0.0, -0.5]
        fixed = tuple(d.base_joint_names)
    result = ik.solve(q0, {"right": X_WG}, fixed_joints=fixed)
    print(f"\nIK unreachable ({case}): {1e3 * result.solve_time_s:.1f} ms, {result.message}")
    assert not result.success
    assert result.message and result.message != "ok"
    assert result.position_error_m > 0.1
    assert np.all(result.q >= ik.lower_limits - 1e-9) and np.all(result.q <= ik.upper_limits + 1e-9)


def test_body_to_gripper_distance_constraint_holds(single):
    d, names, ik = single
    q0 = _rest(d, names)
    X_WG = ik.tcp_pose(q0, "right")  # the rest pose: 1.1 m from the torso point, reachable without moving
    assert _clearance_distance(ik, q0, "right") < 1.25
    free = ik.solve(q0, {"right": X_WG})
    assert free.success and np.allclose(free.q, q0, atol=1e-3)  # nothing to do
    pushed = ik.solve(q0, {"right": X_WG}, min_base_to_gripper_m=1.25)
    assert pushed.success, pushed.message
    assert _clearance_distance(ik, pushed.q, "right") >= 1.25 - 1e-4
    assert pushed.position_error_m < POSITION_OK_M
    capped = ik.solve(q0, {"right": X_WG}, max_base_to_gripper_m=0.9)
    assert capped.success, capped.message
    assert _clearance_distance(ik, capped.q, "right") <= 0.9 + 1e-4


def test_fixed_joints_and_fingers_stay(single):
    d, names, ik = single
    q0 = _rest(d, names)
    q0 = _moved(d, names, q0, root_x_axis_joint=0.3, root_z_rotation_joint=0.2, linear_actuator_height=0.25,
                right_panda_finger_joint1=0.013, right_panda_finger_joint2=0.013)
    X_WG = ik.tcp_pose(q0, "right")
    X_WG[:3, 3] += [0.05, 0.1, 0.08]  # within the arm's reach
    fixed = tuple(d.base_joint_names)
    result = ik.solve(q0, {"right": X_WG}, fixed_joints=fixed)
    assert result.success, result.message
    index = [names.index(n) for n in fixed + tuple(d.finger_joint_names("right"))]
    np.testing.assert_array_equal(result.q[index], q0[index])
    assert np.linalg.norm(ik.tcp_pose(result.q, "right")[:3, 3] - X_WG[:3, 3]) < POSITION_OK_M


def test_result_in_the_callers_joint_order(single):
    d, names, ik = single
    q0 = _rest(d, names)
    q_goal = _moved(d, names, q0, root_x_axis_joint=0.5, root_y_axis_joint=-0.3, right_panda_joint1=0.3)
    X_WG = _goal_from(ik, q_goal)
    reference = ik.solve(q0, {"right": X_WG})

    permutation = np.random.default_rng(3).permutation(len(names))
    shuffled = [names[i] for i in permutation]
    ik_shuffled = WholeBodyIK(d.urdf_path, shuffled, {"right": d.tcp_link_name("right")})
    result = ik_shuffled.solve(q0[permutation], {"right": X_WG})
    assert reference.success and result.success
    np.testing.assert_allclose(result.q, reference.q[permutation], atol=1e-6)
    np.testing.assert_allclose(ik_shuffled.tcp_pose(result.q, "right"), ik.tcp_pose(reference.q, "right"), atol=1e-9)
    np.testing.assert_allclose(ik_shuffled.lower_limits, ik.lower_limits[permutation])


def test_dual_arm_goals_solved_together():
    d = mobile_panda("dual")
    names = _joint_names(d)
    ik = WholeBodyIK(d.urdf_path, names, {s: d.tcp_link_name(s) for s in d.sides})
    q0 = _rest(d, names)
    # Both hands 0.8 m forward and 0.3 m up, and turned inwards a little: a two-handed grasp of a bucket.
    q_goal = _moved(d, names, q0, root_x_axis_joint=0.8, linear_actuator_height=0.3,
                    left_panda_joint1=-0.2, right_panda_joint1=0.2)
    goals = {s: ik.tcp_pose(q_goal, s) for s in d.sides}
    times = []
    for _ in range(5):
        result = ik.solve(q0, goals)
        times.append(result.solve_time_s)
    print(f"\nIK dual arm (two goals): median {1e3 * np.median(times):.2f} ms")
    assert result.success, result.message
    for side, X_WG in goals.items():
        X_check = ik.tcp_pose(result.q, side)
        assert np.linalg.norm(X_check[:3, 3] - X_WG[:3, 3]) < POSITION_OK_M
        assert rotation_angle_rad(X_WG[:3, :3].T @ X_check[:3, :3]) < ANGLE_OK_RAD
    assert set(result.errors_by_side) == {"left", "right"}
    # One goal pair that no single base pose serves: hands 2 m apart.
    far = dict(goals)
    far["left"] = goals["left"].copy()
    far["left"][1, 3] += 2.0
    assert not ik.solve(q0, far).success


def test_bad_input_raises(single):
    d, names, ik = single
    q0 = _rest(d, names)
    X_WG = ik.tcp_pose(q0, "right")
    with pytest.raises(ValueError):
        ik.solve(q0, {"left": X_WG})  # no left arm
    with pytest.raises(ValueError):
        ik.solve(q0[:-1], {"right": X_WG})
    with pytest.raises(ValueError):
        ik.solve(q0, {"right": X_WG[:3]})
    with pytest.raises(ValueError):
        WholeBodyIK(d.urdf_path, names[:-1], {"right": d.tcp_link_name("right")})


def test_fingers_mid_motion_do_not_make_goals_infeasible(single):
    """Drake makes the <mimic> finger a coupler constraint; fingers caught at slightly different openings
    (a gripper opening or closing) must not turn a reachable goal into an infeasible one."""
    d, names, ik = single
    q0 = _rest(d, names)
    index = {n: i for i, n in enumerate(names)}
    left, right = (index[n] for n in d.finger_joint_names("right"))
    q0[left], q0[right] = 0.031, 0.027
    q_goal = _moved(d, names, q0, root_x_axis_joint=0.5, right_panda_joint2=0.3, right_panda_joint4=-1.8)
    result = ik.solve(q0, {"right": _goal_from(ik, q_goal)})
    assert result.success, result.message
    assert result.q[left] == pytest.approx(0.031) and result.q[right] == pytest.approx(0.027)


def test_initial_guesses_rescue_a_large_wrist_roll(single):
    """A goal the local solver misses from the current posture is found from a given start."""
    d, names, ik = single
    q0 = _rest(d, names)
    wrist = names.index("right_panda_joint7")
    q_goal = _moved(d, names, q0, root_x_axis_joint=0.8, right_panda_joint7=q0[wrist] - 1.6)
    X_WG = _goal_from(ik, q_goal)
    rolled = q0.copy()
    rolled[wrist] -= np.pi / 2
    result = ik.solve(q0, {"right": X_WG}, initial_guesses=[rolled])
    assert result.success, result.message
    assert np.linalg.norm(ik.tcp_pose(result.q, "right")[:3, 3] - X_WG[:3, 3]) < POSITION_OK_M


def test_base_keep_out_disc(single):
    """The base stays out of a disc (a swinging door's sweep) while the hand reaches a goal beside it."""
    d, names, ik = single
    q0 = _rest(d, names)
    q_goal = _moved(d, names, q0, root_x_axis_joint=1.0, right_panda_joint4=-1.7)
    X_WG = _goal_from(ik, q_goal)
    base_goal = ik.base_pose(q_goal)[:3, 3]
    keep_out = (base_goal[:2], 0.3)  # the unconstrained solution's base spot is forbidden
    result = ik.solve(q0, {"right": X_WG}, base_keep_out=keep_out)
    assert result.success, result.message
    p_WB = ik.base_pose(result.q)[:3, 3]
    assert np.hypot(*(p_WB[:2] - base_goal[:2])) >= 0.3 - 1e-3
    assert np.linalg.norm(ik.tcp_pose(result.q, "right")[:3, 3] - X_WG[:3, 3]) < POSITION_OK_M


def test_dual_arm_body_distance_constraint_holds_for_both_hands():
    """Let's Handle It (arXiv 2202.11792) Sec. 2.4 for the bucket: both goals close in front of the torso; each hand
    keeps its distance from the body, and a bound the arms cannot meet is reported as a failure."""
    d = mobile_panda("dual")
    names = _joint_names(d)
    ik = WholeBodyIK(d.urdf_path, names, {s: d.tcp_link_name(s) for s in d.sides})
    q0 = _rest(d, names)
    down = np.diag([1.0, -1.0, -1.0])  # tool z pointing down, closing along world y
    goals = {}
    for side, y in (("left", 0.18), ("right", -0.18)):
        X = np.eye(4)
        X[:3, :3], X[:3, 3] = down, [0.7, y, 0.45]
        goals[side] = X
    result = ik.solve(q0, goals, min_base_to_gripper_m=0.55)
    assert result.success, result.message
    for side in d.sides:
        assert _clearance_distance(ik, result.q, side) >= 0.55 - 1e-3
    # A bound that only a hand held far out meets: the goals are 0.18 m off the robot's midline.
    assert not ik.solve(q0, goals, min_base_to_gripper_m=1.3).success
    with pytest.raises(ValueError, match="exceeds max_base_to_gripper_m"):
        ik.solve(q0, goals, min_base_to_gripper_m=0.6, max_base_to_gripper_m=0.3)


def _velocity_limits(names) -> np.ndarray:
    """The mobile Panda's normalized_joint_vel limits: base x, y 1 m/s, yaw 3.14 rad/s, torso 0.5 m/s,
    arm joints 3.14 rad/s; the fingers are not counted."""
    speeds = {"root_x_axis_joint": 1.0, "root_y_axis_joint": 1.0, "root_z_rotation_joint": 3.14,
              "linear_actuator_height": 0.5}
    return np.array([speeds.get(n, 0.0 if "finger" in n else 3.14) for n in names])


def _time_to_go(q_from, q_to, v) -> float:
    moving = v > 0
    return float(np.max(np.abs(q_to - q_from)[moving] / v[moving]))


def test_closing_axis_tilt_keeps_the_closing_axis_and_bounds_the_turn(single):
    """Free to turn about its closing axis (y), the tool keeps y on the goal's and turns no more than allowed;
    the goal's own orientation is one solution, so a goal off it by less than the bound is met exactly."""
    d, names, ik = single
    q0 = _rest(d, names)
    X_WG = _goal_from(ik, _moved(d, names, q0, root_x_axis_joint=0.6, right_panda_joint4=-1.9,
                                 right_panda_joint6=2.4))
    turned = X_WG.copy()
    c, s = np.cos(np.deg2rad(20.0)), np.sin(np.deg2rad(20.0))
    turned[:3, :3] = X_WG[:3, :3] @ np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])  # 20 deg about y
    strict = ik.solve(q0, {"right": turned})
    free = ik.solve(q0, {"right": turned}, closing_axis_tilt_rad=np.deg2rad(30.0))
    assert strict.success and free.success, (strict.message, free.message)
    X_free = ik.tcp_pose(free.q, "right")
    angle_y = np.arccos(np.clip(X_free[:3, 1] @ turned[:3, 1], -1, 1))
    angle_z = np.arccos(np.clip(X_free[:3, 2] @ turned[:3, 2], -1, 1))
    assert angle_y < 0.02 + 1e-3
    assert angle_z < np.deg2rad(30.0) + 0.02 + 1e-3
    # Free to turn, the solution moves the joints less (weighted) than the one held to the turned goal.
    assert np.linalg.norm(free.q - q0) <= np.linalg.norm(strict.q - q0) + 1e-6
    with pytest.raises(ValueError, match="closing_axis_tilt_rad"):
        ik.solve(q0, {"right": turned}, closing_axis_tilt_rad=-0.1)


def test_time_weight_finds_a_quicker_solution_to_reach(single):
    """With the time to go in the cost, the solution is no slower to reach (the slowest joint's travel over
    its speed) than the posture cost's alone, on goals that need the base, the torso and the arm."""
    d, names, ik = single
    q0 = _rest(d, names)
    v = _velocity_limits(names)
    rng = np.random.default_rng(3)
    quicker = 0
    for _ in range(6):
        q_goal = _moved(d, names, q0, root_x_axis_joint=rng.uniform(0.3, 0.9), root_y_axis_joint=rng.uniform(-0.3, 0.3),
                        linear_actuator_height=rng.uniform(0.0, 0.4), right_panda_joint2=rng.uniform(-0.5, 0.5),
                        right_panda_joint4=rng.uniform(-2.5, -1.2), right_panda_joint6=rng.uniform(1.5, 3.0))
        X_WG = _goal_from(ik, q_goal)
        plain = ik.solve(q0, {"right": X_WG})
        timed = ik.solve(q0, {"right": X_WG}, velocity_limits=v, time_weight=20.0)
        assert plain.success and timed.success, (plain.message, timed.message)
        t_plain, t_timed = _time_to_go(q0, plain.q, v), _time_to_go(q0, timed.q, v)
        assert t_timed <= t_plain + 1e-3
        quicker += t_timed < 0.95 * t_plain
    print(f"\ntime-weighted IK quicker by > 5% on {quicker} of 6 goals")
    assert quicker >= 1
    with pytest.raises(ValueError, match="velocity_limits"):
        ik.solve(q0, {"right": X_WG}, velocity_limits=v[:3], time_weight=1.0)


def test_quick_solves_meet_the_same_tolerances_at_a_nearly_equal_cost(single):
    """``quick=True`` (a candidate search) stops sooner on the cost only: every success still meets the
    tolerances by FK, it succeeds where the full solve does, and its time to reach is within a few percent."""
    d, names, ik = single
    q0 = _rest(d, names)
    v = _velocity_limits(names)
    rng = np.random.default_rng(5)
    for _ in range(6):
        q_goal = _moved(d, names, q0, root_x_axis_joint=rng.uniform(0.3, 0.9), root_y_axis_joint=rng.uniform(-0.3, 0.3),
                        linear_actuator_height=rng.uniform(0.0, 0.4), right_panda_joint2=rng.uniform(-0.5, 0.5),
                        right_panda_joint4=rng.uniform(-2.5, -1.2), right_panda_joint6=rng.uniform(1.5, 3.0))
        X_WG = _goal_from(ik, q_goal)
        full = ik.solve(q0, {"right": X_WG}, velocity_limits=v, time_weight=20.0)
        quick = ik.solve(q0, {"right": X_WG}, velocity_limits=v, time_weight=20.0, quick=True)
        assert full.success and quick.success, (full.message, quick.message)
        X_check = ik.tcp_pose(quick.q, "right")
        assert np.linalg.norm(X_check[:3, 3] - X_WG[:3, 3]) < 0.005 + 1e-6
        assert _time_to_go(q0, quick.q, v) <= 1.05 * _time_to_go(q0, full.q, v) + 1e-3
