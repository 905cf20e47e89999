"""Arm motion planning with mplib 0.1.1 on the mobile Panda: free-space plans, a point-cloud obstacle, screw
motions, frozen base, joint order, robot cropping, repeatability."""

from __future__ import annotations

import numpy as np
import pytest

from handleit.envs.robot_description import mobile_panda
from handleit.planning.motion_planning import ArmMotionPlanner
from handleit.planning.whole_body_ik import WholeBodyIK, rotation_angle_rad

REST_ARM = [0.0, 0.0, 0.0, -1.5, 0.0, 3.0, 0.78]


def _joint_names(d) -> list[str]:
    names = list(d.base_joint_names)
    for side in d.sides:
        names += list(d.arm_joint_names(side)) + list(d.finger_joint_names(side))
    return names


def _rest(d, names, fingers_m=0.04) -> np.ndarray:
    index = {n: i for i, n in enumerate(names)}
    q = np.zeros(len(names))
    for side in d.sides:
        for n, v in zip(d.arm_joint_names(side), REST_ARM):
            q[index[n]] = v
        for n in d.finger_joint_names(side):
            q[index[n]] = fingers_m
    return q


@pytest.fixture(scope="module")
def single():
    d = mobile_panda("single")
    # Shuffled: the planner must map the caller's order to mplib's by name.
    names = list(np.random.default_rng(5).permutation(_joint_names(d)))
    planner = ArmMotionPlanner(d.urdf_path, d.srdf_path, names, move_group=d.tcp_link_name("right"))
    return d, names, planner


def _plate(z_m=0.6):
    """A horizontal plate of points (1 cm apart) 18 cm above the rest tool centre, 30 x 30 cm."""
    xs = np.arange(0.62, 0.95, 0.01)
    ys = np.arange(-0.95, -0.645, 0.01)
    return np.array([[x, y, z_m] for x in xs for y in ys])


def _base_index(d, names):
    return [names.index(n) for n in d.base_joint_names]


def _interpolate(path, step=0.01):
    """The path densely, as a controller would pass through it."""
    out = [path[0]]
    for a, b in zip(path[:-1], path[1:]):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / step)))
        out += [a + s * (b - a) for s in np.linspace(0, 1, n + 1)[1:]]
    return np.array(out)


def test_free_space_plan_reaches_the_goal_with_the_base_fixed(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [0.1, 0.2, 0.2]
    plan = planner.plan_to_pose(q0, X_WG, planning_time_s=1.0, seed=0)
    assert plan.success, plan.message
    assert plan.q_path.shape[1] == len(names) and len(plan.times_s) == len(plan.q_path)
    assert np.all(np.diff(plan.times_s) > 0)
    np.testing.assert_allclose(plan.q_path[0], q0, atol=1e-9)
    X_end = planner.tcp_pose(plan.q_path[-1])
    assert np.linalg.norm(X_end[:3, 3] - X_WG[:3, 3]) < 0.005
    assert rotation_angle_rad(X_WG[:3, :3].T @ X_end[:3, :3]) < 0.02
    # Base and fingers never move.
    frozen = _base_index(d, names) + [names.index(n) for n in d.finger_joint_names("right")]
    np.testing.assert_array_equal(plan.q_path[:, frozen], np.repeat(q0[None, frozen], len(plan.q_path), axis=0))


def test_plan_goes_around_a_point_cloud_plate(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [0.0, 0.0, 0.35]  # straight up through the plate
    plate = _plate()
    assert len(planner.obstacle_points(plate, q0)) == len(plate)  # none of it is near the robot

    screw = planner.plan_screw(q0, X_WG, plate)
    assert not screw.success and "collision" in screw.message  # the straight line is blocked
    blind = planner.plan_screw(q0, X_WG)  # the same line planned without the plate ...
    assert blind.success and planner.first_collision(blind.q_path, plate) is not None  # ... hits it

    plan = planner.plan_to_pose(q0, X_WG, plate, planning_time_s=2.0, seed=1)
    print(f"\nRRTConnect around the plate: {len(plan.q_path)} waypoints, {plan.duration_s:.2f} s, {plan.message}")
    if not plan.success:  # allowed, but then it must say so
        assert plan.message
        return
    assert np.linalg.norm(planner.tcp_pose(plan.q_path[-1])[:3, 3] - X_WG[:3, 3]) < 0.005
    # mplib's own check (robot vs the plate's octree), densely along the path ...
    assert planner.first_collision(plan.q_path, plate) is None
    # ... and an independent one: no plate point inside any link's convex hull (margin 0).
    for q in _interpolate(plan.q_path, step=0.03):
        assert len(planner.obstacle_points(plate, q, margin_m=0.0)) == len(plate)
    tcp_W = np.array([planner.tcp_pose(q)[:3, 3] for q in plan.q_path])
    assert min(np.linalg.norm(plate - p, axis=1).min() for p in tcp_W) > 0.01


def test_screw_motion_is_a_straight_line(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_start = planner.tcp_pose(q0)
    X_WG = X_start.copy()
    X_WG[:3, 3] += [0.1, 0.05, -0.15]
    plan = planner.plan_screw(q0, X_WG)
    assert plan.success, plan.message
    direction = (X_WG[:3, 3] - X_start[:3, 3]) / np.linalg.norm(X_WG[:3, 3] - X_start[:3, 3])
    for q in plan.q_path:
        X = planner.tcp_pose(q)
        rel = X[:3, 3] - X_start[:3, 3]
        off_line = np.linalg.norm(rel - (rel @ direction) * direction)
        assert off_line < 0.003
        assert rotation_angle_rad(X_start[:3, :3].T @ X[:3, :3]) < 0.01
    assert np.linalg.norm(planner.tcp_pose(plan.q_path[-1])[:3, 3] - X_WG[:3, 3]) < 0.002
    base = _base_index(d, names)
    np.testing.assert_array_equal(plan.q_path[:, base], np.repeat(q0[None, base], len(plan.q_path), axis=0))


def test_screw_motion_about_a_hinge_follows_the_arc(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_start = planner.tcp_pose(q0)
    hinge_W = X_start[:3, 3] + [0.0, 0.5, 0.0]  # a vertical hinge 0.5 m to the left of the hand
    angle = -0.3  # the door swings towards the robot (the arm is near full reach at rest)
    c, s = np.cos(angle), np.sin(angle)
    T = np.eye(4)
    T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    T[:3, 3] = hinge_W - T[:3, :3] @ hinge_W
    plan = planner.plan_screw(q0, T @ X_start)
    assert plan.success, plan.message
    radii = [np.linalg.norm(planner.tcp_pose(q)[:2, 3] - hinge_W[:2]) for q in plan.q_path]
    np.testing.assert_allclose(radii, 0.5, atol=0.003)


def test_base_free_plan_to_a_whole_body_ik_configuration(single):
    d, names, planner = single
    q0 = _rest(d, names)
    ik = WholeBodyIK(d.urdf_path, names, {"right": d.tcp_link_name("right")})
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [1.0, 0.4, 0.2]  # out of the arm's reach: the base must move
    solution = ik.solve(q0, {"right": X_WG})
    assert solution.success, solution.message
    locked = planner.plan_to_configuration(q0, solution.q, base_fixed=True, seed=0)
    base = _base_index(d, names)
    if locked.success:  # the base stays, so the arm cannot get there
        assert np.linalg.norm(planner.tcp_pose(locked.q_path[-1])[:3, 3] - X_WG[:3, 3]) > 0.3
    plan = planner.plan_to_configuration(q0, solution.q, base_fixed=False, planning_time_s=2.0, seed=0)
    assert plan.success, plan.message
    np.testing.assert_allclose(plan.q_path[-1], solution.q, atol=1e-6)
    assert np.abs(plan.q_path[-1, base] - q0[base]).max() > 0.3


def test_dual_arm_right_move_group_keeps_base_and_left_arm():
    d = mobile_panda("dual")
    names = _joint_names(d)
    planner = ArmMotionPlanner(d.urdf_path, d.srdf_path, names, move_group=d.tcp_link_name("right"))
    q0 = _rest(d, names)
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [0.0, 0.0, 0.3]
    plan = planner.plan_to_pose(q0, X_WG, seed=0)
    assert plan.success, plan.message
    held = _base_index(d, names) + [names.index(n) for n in d.arm_joint_names("left")]
    np.testing.assert_array_equal(plan.q_path[:, held], np.repeat(q0[None, held], len(plan.q_path), axis=0))
    assert np.linalg.norm(planner.tcp_pose(plan.q_path[-1])[:3, 3] - X_WG[:3, 3]) < 0.005


def test_robot_points_are_not_obstacles(single):
    d, names, planner = single
    q0 = _rest(d, names)
    links = planner.link_poses(q0)
    on_robot = np.array([links[name][:3, 3] for name in ("right_panda_link3", "right_panda_link5", "right_panda_hand")])
    on_robot = np.vstack([on_robot, [0.0, 0.0, 0.2]])  # inside the torso column
    far = np.array([[2.0, 0.0, 0.5], [0.76, -0.8, 1.2]])
    floor = np.array([[1.0, 1.0, 0.0]])
    kept = planner.obstacle_points(np.vstack([on_robot, far, floor]), q0)
    np.testing.assert_allclose(kept, far)
    # Closed fingers touch each other: not a collision (the SRDF does not disable that pair).
    assert planner.collisions(_rest(d, names, fingers_m=0.0)) == []


def test_same_seed_same_plan(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [0.0, 0.0, 0.35]
    a = planner.plan_to_pose(q0, X_WG, _plate(), seed=4)
    b = planner.plan_to_pose(q0, X_WG, _plate(), seed=4)
    assert a.success and b.success
    assert a.q_path.shape == b.q_path.shape
    np.testing.assert_allclose(a.q_path, b.q_path)


def test_unreachable_pose_fails_cleanly(single):
    d, names, planner = single
    q0 = _rest(d, names)
    X_WG = planner.tcp_pose(q0)
    X_WG[:3, 3] += [2.0, 0.0, 0.0]  # beyond the arm's reach with the base fixed
    plan = planner.plan_to_pose(q0, X_WG, seed=0)
    assert not plan.success and "IK" in plan.message
    np.testing.assert_allclose(plan.q_path, q0[None])
    screw = planner.plan_screw(q0, X_WG)
    assert not screw.success


def test_planners_from_a_robot_model_in_the_simulators_joint_order():
    from handleit.types import RobotModel

    d = mobile_panda("single")
    # Breadth-first, as the simulator orders joints: base, arm, then the two fingers.
    names = tuple(d.base_joint_names) + d.arm_joint_names("right") + d.finger_joint_names("right")
    names = names[:4] + names[4:][::-1]  # any order works; reversed arm and fingers to make the point
    ik = WholeBodyIK(d.urdf_path, names, {"right": d.tcp_link_name("right")})
    model = RobotModel(
        urdf_path=d.urdf_path, srdf_path=d.srdf_path, joint_names=names,
        joint_limits=np.column_stack([ik.lower_limits, ik.upper_limits]),
        velocity_limits=np.full(len(names), 0.8),
        base_joint_names=tuple(d.base_joint_names), arm_joint_names={"right": d.arm_joint_names("right")},
        finger_joint_names={"right": d.finger_joint_names("right")},
        tcp_link_names={"right": d.tcp_link_name("right")}, base_link_name="mobile_base")
    ik = WholeBodyIK.from_robot_model(model)
    planner = ArmMotionPlanner.from_robot_model(model, "right")
    q0 = _rest(d, list(names))
    np.testing.assert_allclose(planner.tcp_pose(q0), ik.tcp_pose(q0, "right"), atol=1e-6)  # same kinematics
    X_WG = ik.tcp_pose(q0, "right")
    X_WG[:3, 3] += [0.05, 0.0, 0.15]
    solution = ik.solve(q0, {"right": X_WG}, fixed_joints=model.base_joint_names)
    assert solution.success, solution.message
    plan = planner.plan_to_configuration(q0, solution.q, seed=0)
    assert plan.success, plan.message
    np.testing.assert_allclose(plan.q_path[-1], solution.q, atol=1e-6)
    speeds = np.abs(np.diff(plan.q_path, axis=0)) / np.diff(plan.times_s)[:, None]
    assert speeds.max() < 0.8 * 1.2  # time-parameterized under the model's velocity limits (sampling slack)
