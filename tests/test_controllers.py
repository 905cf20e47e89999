"""Every controller moves the joints it should, in the right direction, frame and about the right rate.

Two kinds of checks per mode: the drive targets a controller sets from one action (exact: catches wrong
scales, signs, frames and joint mappings) and the motion that follows in simulation (catches a controller
whose targets do not move the robot). The robot is placed 4 m from the cabinet, where nothing can touch it.
Action layouts are written out here from the controllers' module docstring, not read off the controllers.
"""

from __future__ import annotations

import numpy as np
import pytest
import sapien
from scipy.spatial.transform import Rotation

import handleit.envs
from handleit.envs.controllers import CONTROL_MODES, ControlConfig, Controller, make_controller
from handleit.envs.mobile_panda import MobilePanda
from handleit.envs.render_setup import new_scene
from handleit.envs.robot_description import mobile_panda

CONFIG = ControlConfig()
SIM_FREQ_HZ, CONTROL_FREQ_HZ = 500, 100  # the env's defaults
DT_S = 1.0 / CONTROL_FREQ_HZ
FREE_XY_M = (-4.0, 0.0)  # the cabinet (centred on the origin, < 1 m wide) is out of the arm's reach
START_HEIGHT_M = 0.3  # torso raised from its lower limit, so that it can move both ways
TILTED_YAW_RAD = 2.0  # base axes far from the world's: a world/base frame mix-up shows as a wrong direction
PD_MODES = ("pd_joint_pos", "pd_joint_delta_pos", "pd_ee_delta_pose")

# Joint order of the single-arm robot (qpos and the normalized_joint_vel action).
BASE_X, BASE_Y, BASE_YAW, HEIGHT = range(4)
ARM = tuple(range(4, 11))
FINGERS = (11, 12)
BASE_AND_ARM = (BASE_X, BASE_Y, BASE_YAW, HEIGHT, *ARM)

# Action layout of the part-wise modes (module docstring of envs/controllers.py): base (4), then per arm the
# arm's part and the gripper's.
ARM_ACTION_DIM = {"pd_joint_pos": 7, "pd_joint_delta_pos": 7, "pd_ee_delta_pose": 6}

# Velocity mode: action size of the single-joint tests, and the window over which the velocity is measured
# (the base drive reaches 97% of its target velocity within 15 steps).
VEL_ACTION = 0.3
VEL_SETTLE_STEPS, VEL_MEASURE_STEPS = 15, 10
VEL_REL_TOL = 0.07
# How far a joint that is not commanded may drift while others move (reaction forces on damping-only or
# lagging drives; the arm lags up to 0.045 rad behind a base yawing at 0.94 rad/s): base x, y [m], yaw
# [rad], height [m], 7 arm joints [rad], 2 fingers [m]. A joint commanded by mistake moves 4x farther.
STAY_TOL = np.array([0.015, 0.015, 0.01, 0.005] + [0.06] * 7 + [0.002] * 2)
HOLD_TOL = 1e-3  # m or rad, over 50 steps of a holding action


# ------------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------------
def action_layout(mode: str, robot: MobilePanda) -> dict[str, np.ndarray]:
    """Action indices of each part ("base", "<side>_arm", "<side>_gripper"), per the controllers' docstring:
    joint order in normalized_joint_vel (action i drives joint i; a "gripper" is two fingers), otherwise
    part after part, left arm before right."""
    if mode == "normalized_joint_vel":
        layout = {"base": robot.base_index}
        for side in robot.sides:
            layout[f"{side}_arm"], layout[f"{side}_gripper"] = robot.arm_index[side], robot.finger_index[side]
        return layout
    layout, start = {"base": np.arange(4)}, 4
    for side in robot.sides:
        for part, n in (("arm", ARM_ACTION_DIM[mode]), ("gripper", 1)):
            layout[f"{side}_{part}"] = np.arange(start, start + n)
            start += n
    return layout


def action_dim(mode: str, robot: MobilePanda) -> int:
    return sum(len(index) for index in action_layout(mode, robot).values())


def gripper_action(opening_m: float) -> float:
    """The gripper action whose finger target is ``opening_m`` (inverse of the documented mapping)."""
    lo, hi = CONFIG.gripper_range_m
    return (2 * opening_m - (lo + hi)) / (hi - lo)


def hold_action(mode: str, robot: MobilePanda) -> np.ndarray:
    """The action that keeps every joint where it is (zero velocity, current positions, no pose delta)."""
    q = robot.qpos.astype(np.float64)
    action = np.zeros(action_dim(mode, robot))
    for name, index in action_layout(mode, robot).items():
        if name == "base" and mode == "pd_joint_pos":
            action[index] = q[robot.base_index]
        elif name.endswith("_arm") and mode == "pd_joint_pos":
            action[index] = q[robot.arm_index[name.removesuffix("_arm")]]
        elif name.endswith("_gripper") and mode != "normalized_joint_vel":
            action[index] = gripper_action(float(q[robot.finger_index[name.removesuffix("_gripper")]].mean()))
    return action


def velocity_limits(robot: MobilePanda) -> np.ndarray:
    """Upper velocity limit of each joint [m/s or rad/s] in ControlConfig; the lower one is its negative."""
    limits = np.zeros(robot.dof)
    limits[robot.base_index] = CONFIG.base_vel_limits
    for side in robot.sides:
        limits[robot.arm_index[side]] = CONFIG.arm_vel_limit_radps
        limits[robot.finger_index[side]] = CONFIG.finger_vel_limit_mps
    return limits


def mapped_velocity(a: float, upper: float) -> float:
    """The documented map from a normalized action to a velocity, with lower = -upper."""
    lower = -upper
    return (upper - lower) / 2 * a + (upper + lower) / 2


def drive_targets(robot: MobilePanda) -> np.ndarray:
    return np.array([float(np.ravel(j.get_drive_target())[0]) for j in robot.joints])


def drive_velocity_targets(robot: MobilePanda) -> np.ndarray:
    return np.array([float(np.ravel(j.get_drive_velocity_target())[0]) for j in robot.joints])


def place_in_free_space(env, yaw_rad: float = 0.0, height_m: float = START_HEIGHT_M):
    """Reset ``env`` (unwrapped), move the robot (rest arm) to free space and let the controller hold it."""
    env.reset(seed=0)
    env.robot.reset(env.robot.rest_qpos((*FREE_XY_M, yaw_rad), height_m))
    env.controller.reset()
    return env


def run(env, action: np.ndarray, steps: int) -> np.ndarray:
    """Apply ``action`` for ``steps`` control steps; qpos before and after each step, [steps + 1, dof]."""
    qpos = [env.robot.qpos.astype(np.float64)]
    for _ in range(steps):
        env.step(action)
        qpos.append(env.robot.qpos.astype(np.float64))
    return np.array(qpos)


def assert_stay(qpos: np.ndarray, joints, tol=STAY_TOL) -> None:
    """Joints ``joints`` of a qpos trajectory never leave their start by more than ``tol`` (one value, or
    one per joint of the robot)."""
    joints = np.asarray(list(joints))
    tol = np.asarray(tol, dtype=np.float64)
    tol = tol[joints] if tol.ndim else np.full(len(joints), float(tol))
    drift = np.abs(qpos[:, joints] - qpos[0, joints]).max(axis=0)
    bad = drift >= tol
    assert not bad.any(), f"joints {joints[bad].tolist()} moved by {drift[bad]} (tolerance {tol[bad]})"


def others(*joints: int, dof: int = 13) -> list[int]:
    return [j for j in range(dof) if j not in joints]


def yaw_of(X: sapien.Pose) -> float:
    R = X.to_transformation_matrix()[:3, :3]
    return float(np.arctan2(R[1, 0], R[0, 0]))


def wrap(angle: float) -> float:
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def tcp_delta_B(X_WB: np.ndarray, X_WT0: np.ndarray, X_WT1: np.ndarray) -> np.ndarray:
    """Translation and rotation (axis-angle, about the TCP) from TCP pose 0 to 1, in the base frame B."""
    R_WB = X_WB[:3, :3]
    p_B = R_WB.T @ (X_WT1[:3, 3] - X_WT0[:3, 3])
    rot_B = R_WB.T @ Rotation.from_matrix(X_WT1[:3, :3] @ X_WT0[:3, :3].T).as_rotvec()
    return np.concatenate([p_B, rot_B])


@pytest.fixture(scope="module")
def envs():
    """One OpenCabinetDrawer env per control mode (state observations), unwrapped, built on first use."""
    made = {}

    def get(mode: str):
        if mode not in made:
            made[mode] = handleit.envs.make("OpenCabinetDrawer", obs_mode="state", control_mode=mode).unwrapped
        return made[mode]

    yield get
    for env in made.values():
        env.close()


# ------------------------------------------------------------------------------------------------------
# Action spaces
# ------------------------------------------------------------------------------------------------------
def expected_bounds(mode: str, robot: MobilePanda) -> tuple[np.ndarray, np.ndarray]:
    dim = action_dim(mode, robot)
    low, high = -np.ones(dim), np.ones(dim)
    if mode == "pd_joint_pos":  # absolute targets, bounded by the joint limits
        for name, index in action_layout(mode, robot).items():
            if name == "base":
                low[index], high[index] = robot.qlimits[robot.base_index].T
            elif name.endswith("_arm"):
                low[index], high[index] = robot.qlimits[robot.arm_index[name.removesuffix("_arm")]].T
    return low, high


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_single_arm_action_space_matches_docstring(envs, mode):
    env = envs(mode)
    expected_dim = {"normalized_joint_vel": 13, "pd_joint_pos": 12, "pd_joint_delta_pos": 12, "pd_ee_delta_pose": 11}
    assert env.action_space.shape == (expected_dim[mode],) == (action_dim(mode, env.robot),)
    assert_layout(mode, env.robot, env.controller)


def assert_layout(mode: str, robot: MobilePanda, controller: Controller) -> None:
    """Bounds and labels of ``controller`` are those of the documented layout."""
    low, high = expected_bounds(mode, robot)
    np.testing.assert_allclose(controller.low, low, rtol=1e-6)
    np.testing.assert_allclose(controller.high, high, rtol=1e-6)
    if mode == "normalized_joint_vel":  # action i drives joint i
        assert controller.labels == tuple(j.name for j in robot.joints)
        return
    labels = np.array(controller.labels)
    layout = action_layout(mode, robot)
    assert tuple(labels[layout["base"]]) == robot.description.base_joint_names
    for side in robot.sides:
        arm = tuple(labels[layout[f"{side}_arm"]])
        if mode != "pd_ee_delta_pose":
            assert arm == robot.description.arm_joint_names(side)
        assert all(label.startswith(f"{side}_") for label in (*arm, *labels[layout[f"{side}_gripper"]]))


# ------------------------------------------------------------------------------------------------------
# normalized_joint_vel (and the base part of pd_ee_delta_pose, which is the same)
# ------------------------------------------------------------------------------------------------------
def measure_velocity(env, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """qpos trajectory under ``action`` and the joint velocities measured after the drives settled."""
    qpos = run(env, action, VEL_SETTLE_STEPS + VEL_MEASURE_STEPS)
    return qpos, (qpos[-1] - qpos[VEL_SETTLE_STEPS]) / (VEL_MEASURE_STEPS * DT_S)


SINGLE_JOINT_VELOCITY_CASES = [("normalized_joint_vel", j) for j in (BASE_YAW, HEIGHT, *ARM)] + [
    ("pd_ee_delta_pose", j) for j in (BASE_YAW, HEIGHT)
]


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("mode, joint", SINGLE_JOINT_VELOCITY_CASES)
def test_velocity_action_moves_its_joint_at_the_mapped_velocity(envs, mode, joint, sign):
    # The action index of a base or arm joint is its joint index in both modes.
    env = place_in_free_space(envs(mode), TILTED_YAW_RAD)
    a = sign * VEL_ACTION
    action = hold_action(mode, env.robot)
    action[joint] = a
    expected = mapped_velocity(a, velocity_limits(env.robot)[joint])
    qpos, velocity = measure_velocity(env, action)
    np.testing.assert_allclose(drive_velocity_targets(env.robot)[joint], expected, rtol=1e-5)
    assert velocity[joint] == pytest.approx(expected, rel=VEL_REL_TOL)
    assert_stay(qpos, others(joint))


@pytest.mark.parametrize("mode", ["normalized_joint_vel", "pd_ee_delta_pose"])
@pytest.mark.parametrize("yaw", [0.0, TILTED_YAW_RAD])
@pytest.mark.parametrize("axis, sign", [(BASE_X, 1), (BASE_X, -1), (BASE_Y, 1), (BASE_Y, -1)])
def test_base_translation_velocity_is_egocentric(envs, mode, yaw, axis, sign):
    """+x moves the base along its heading, +y to its left, whatever its yaw."""
    env = place_in_free_space(envs(mode), yaw)
    action = hold_action(mode, env.robot)
    action[axis] = sign * VEL_ACTION
    R_WB = env.robot.X_WB.to_transformation_matrix()[:3, :3]
    assert np.allclose(R_WB[:, 2], [0, 0, 1], atol=1e-6)
    qpos_settle = run(env, action, VEL_SETTLE_STEPS)
    p_W0 = env.robot.X_WB.p
    qpos_measure = run(env, action, VEL_MEASURE_STEPS)
    v_B = R_WB.T @ (env.robot.X_WB.p - p_W0) / (VEL_MEASURE_STEPS * DT_S)
    expected = np.zeros(3)
    expected[axis] = mapped_velocity(sign * VEL_ACTION, CONFIG.base_vel_limits[axis])
    np.testing.assert_allclose(v_B, expected, atol=VEL_REL_TOL * VEL_ACTION)
    assert abs(wrap(yaw_of(env.robot.X_WB) - yaw)) < 0.01
    assert_stay(np.concatenate([qpos_settle, qpos_measure]), others(BASE_X, BASE_Y))


@pytest.mark.parametrize("sign", [1, -1])
def test_normalized_joint_vel_fingers_together(envs, sign):
    env = place_in_free_space(envs("normalized_joint_vel"))
    action = np.zeros(13)
    action[list(FINGERS)] = sign * VEL_ACTION
    qpos, velocity = measure_velocity(env, action)
    expected = mapped_velocity(sign * VEL_ACTION, CONFIG.finger_vel_limit_mps)
    np.testing.assert_allclose(velocity[list(FINGERS)], expected, rtol=VEL_REL_TOL)
    assert_stay(qpos, others(*FINGERS))


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("finger", FINGERS)
def test_normalized_joint_vel_moves_one_finger_alone(envs, finger, sign):
    env = place_in_free_space(envs("normalized_joint_vel"))
    action = np.zeros(13)
    action[finger] = sign * VEL_ACTION
    qpos, velocity = measure_velocity(env, action)
    assert velocity[finger] == pytest.approx(
        mapped_velocity(sign * VEL_ACTION, CONFIG.finger_vel_limit_mps), rel=VEL_REL_TOL
    )
    assert_stay(qpos, others(finger), tol=0.002)


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_hold_action_keeps_the_robot_still(envs, mode):
    """Zero velocity, the current positions, or a zero delta: nothing moves."""
    env = place_in_free_space(envs(mode), TILTED_YAW_RAD)
    qpos = run(env, hold_action(mode, env.robot), 50)
    assert_stay(qpos, range(env.robot.dof), tol=HOLD_TOL)


# ------------------------------------------------------------------------------------------------------
# pd_joint_pos
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("yaw", [0.0, TILTED_YAW_RAD])
def test_pd_joint_pos_reaches_absolute_targets(envs, yaw):
    env = place_in_free_space(envs("pd_joint_pos"), yaw)
    action = hold_action("pd_joint_pos", env.robot)
    target = action[list(BASE_AND_ARM)] + [0.3, -0.2, 0.4, 0.2, 0.3, -0.3, 0.3, 0.3, -0.3, 0.3, 0.3]
    action[list(BASE_AND_ARM)] = target
    env.step(action)
    np.testing.assert_allclose(drive_targets(env.robot)[list(BASE_AND_ARM)], target, atol=1e-5)
    qpos = run(env, action, 149)
    tol = np.array([0.01, 0.01, 0.02, 0.01] + [0.02] * 7)  # m for x, y, height; rad for yaw and the arm
    np.testing.assert_array_less(np.abs(qpos[-1, list(BASE_AND_ARM)] - target), tol)
    # Base x, y and yaw are world coordinates of the base frame.
    np.testing.assert_allclose(env.robot.X_WB.p[:2], target[:2], atol=0.01)
    assert abs(wrap(yaw_of(env.robot.X_WB) - target[2])) < 0.02
    assert_stay(qpos, FINGERS, tol=HOLD_TOL)


@pytest.mark.parametrize("mode", PD_MODES)
@pytest.mark.parametrize("command, opening_m", [(-1.0, 0.0), (1.0, 0.04)])
def test_gripper_closes_and_opens(envs, mode, command, opening_m):
    """-1 closes the fingers (to their limit 0, the target being below it), +1 opens them fully."""
    env = place_in_free_space(envs(mode), TILTED_YAW_RAD)
    action = hold_action(mode, env.robot)
    action[-1] = command
    qpos = run(env, action, 60)
    finger_target_m = CONFIG.gripper_range_m[0] if command < 0 else CONFIG.gripper_range_m[1]
    np.testing.assert_allclose(drive_targets(env.robot)[list(FINGERS)], finger_target_m, atol=1e-6)
    np.testing.assert_allclose(qpos[-1, list(FINGERS)], opening_m, atol=0.002)
    assert_stay(qpos, BASE_AND_ARM, tol=HOLD_TOL)


# ------------------------------------------------------------------------------------------------------
# pd_joint_delta_pos
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("joint", BASE_AND_ARM)
def test_pd_joint_delta_pos_moves_its_joint(envs, joint, sign):
    env = place_in_free_space(envs("pd_joint_delta_pos"), TILTED_YAW_RAD)
    action = hold_action("pd_joint_delta_pos", env.robot)
    action[joint] = 0.5 * sign
    q_before = env.robot.qpos.astype(np.float64)
    env.step(action)
    # The target is relative to the current position, at 0.1 (m or rad) per unit of action.
    expected_target = q_before[joint] + 0.5 * sign * CONFIG.joint_delta
    assert drive_targets(env.robot)[joint] == pytest.approx(expected_target, abs=1e-5)
    qpos = np.concatenate([[q_before], run(env, action, 19)])
    moved = (qpos[-1, joint] - qpos[0, joint]) * sign
    assert moved > 0.03  # 20 steps lagging behind a target 0.05 ahead
    # The others drift by up to a quarter of that (arm joints reacting to the base's acceleration).
    assert_stay(qpos, others(joint), tol=np.minimum(STAY_TOL, 0.35 * moved))


# ------------------------------------------------------------------------------------------------------
# pd_ee_delta_pose
# ------------------------------------------------------------------------------------------------------
EE_DIMS = range(6)  # dx, dy, dz, drx, dry, drz of the right TCP, in the base frame
EE_ACTION = 0.5


def ee_action(env, dim: int, a: float) -> np.ndarray:
    action = hold_action("pd_ee_delta_pose", env.robot)
    action[action_layout("pd_ee_delta_pose", env.robot)["right_arm"][dim]] = a
    return action


@pytest.fixture(scope="module")
def tcp_kinematics(envs):
    """Forward kinematics of the right TCP: qpos -> X_WT (4x4), on a pinocchio model of the env's robot."""
    robot = envs("pd_ee_delta_pose").robot
    model = robot.articulation.create_pinocchio_model()
    tcp_index = robot.tcp_links["right"].index

    def X_WT(qpos: np.ndarray) -> np.ndarray:
        model.compute_forward_kinematics(np.asarray(qpos, dtype=np.float64))
        return model.get_link_pose(tcp_index).to_transformation_matrix()

    return X_WT


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("dim", EE_DIMS)
def test_pd_ee_delta_pose_target_is_the_commanded_delta(envs, tcp_kinematics, dim, sign):
    """The arm's joint targets after one action put the TCP at the commanded delta, in the base frame."""
    env = place_in_free_space(envs("pd_ee_delta_pose"), TILTED_YAW_RAD)
    q_before = env.robot.qpos.astype(np.float64)
    X_WB = env.robot.X_WB.to_transformation_matrix()
    X_WT0 = env.robot.X_WT("right").to_transformation_matrix()
    np.testing.assert_allclose(tcp_kinematics(q_before), X_WT0, atol=1e-5)
    env.step(ee_action(env, dim, sign * EE_ACTION))
    q_goal = q_before.copy()
    q_goal[list(ARM)] = drive_targets(env.robot)[list(ARM)]
    expected = np.zeros(6)
    expected[dim] = sign * EE_ACTION * (CONFIG.ee_delta_pos_m if dim < 3 else CONFIG.ee_delta_rot_rad)
    np.testing.assert_allclose(tcp_delta_B(X_WB, X_WT0, tcp_kinematics(q_goal)), expected, atol=1e-3)
    # The base's part of the action is 0: its targets are zero velocities.
    np.testing.assert_allclose(drive_velocity_targets(env.robot)[list(env.robot.base_index)], 0.0, atol=1e-9)


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("dim", EE_DIMS)
def test_pd_ee_delta_pose_moves_the_tcp_along_the_base_axis(envs, dim, sign):
    env = place_in_free_space(envs("pd_ee_delta_pose"), TILTED_YAW_RAD)
    X_WB = env.robot.X_WB.to_transformation_matrix()
    X_WT0 = env.robot.X_WT("right").to_transformation_matrix()
    steps = 20
    qpos = run(env, ee_action(env, dim, sign * EE_ACTION), steps)
    delta = tcp_delta_B(X_WB, X_WT0, env.robot.X_WT("right").to_transformation_matrix())
    moved, other_part = (delta[:3], delta[3:]) if dim < 3 else (delta[3:], delta[:3])
    axis = np.eye(3)[dim % 3] * sign
    # The goal stays one delta ahead of the TCP, so the (overdamped) arm drives close it at stiffness/damping
    # times the delta per second: 20 steps make about 0.1 m or rad at this action, less the start-up.
    delta_per_step = EE_ACTION * (CONFIG.ee_delta_pos_m if dim < 3 else CONFIG.ee_delta_rot_rad)
    drive = CONFIG.arm_pos_drive
    nominal = steps * DT_S * drive.stiffness / drive.damping * delta_per_step
    assert 0.6 * nominal < moved @ axis < 1.1 * nominal
    # Off-axis drift comes from the arm's inertia (up to ~25 deg from the rest pose); with the base yawed by
    # 2 rad, a goal set in world axes would be off by 115 deg.
    assert moved @ axis > 0.85 * np.linalg.norm(moved)
    if dim >= 3:  # a rotation about the tool centre leaves the tool centre (nearly) in place
        assert np.linalg.norm(other_part) < 0.01
    assert np.abs(qpos[-1, list(ARM)] - qpos[0, list(ARM)]).max() > 0.02
    assert_stay(qpos, (BASE_X, BASE_Y, BASE_YAW, HEIGHT), tol=0.01)


# ------------------------------------------------------------------------------------------------------
# Dual-arm robot, controllers built directly
# ------------------------------------------------------------------------------------------------------
def dual_arm_robot(mode: str) -> tuple[sapien.Scene, MobilePanda, Controller]:
    """A dual-arm robot alone in a scene (no floor, no gravity on its links), in rest pose, held by ``mode``."""
    scene = new_scene()
    scene.set_timestep(1.0 / SIM_FREQ_HZ)
    robot = MobilePanda(scene, mobile_panda("dual"))
    robot.reset(robot.rest_qpos((0.0, 0.0, TILTED_YAW_RAD), START_HEIGHT_M))
    controller = make_controller(mode, robot)
    controller.configure()
    controller.reset()
    return scene, robot, controller


@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_dual_arm_action_layout(mode):
    _, robot, controller = dual_arm_robot(mode)
    expected_dim = {"normalized_joint_vel": 22, "pd_joint_pos": 20, "pd_joint_delta_pos": 20, "pd_ee_delta_pose": 18}
    assert robot.sides == ("left", "right")
    assert controller.dim == expected_dim[mode] == action_dim(mode, robot)
    assert_layout(mode, robot, controller)


LEFT_ARM_ACTIONS = {  # first value of the left arm's part of the action, which moves the left arm
    "normalized_joint_vel": 0.3,  # left joint 1 at 0.3 of its velocity limit
    "pd_joint_pos": 0.3,  # left joint 1 to 0.3 rad (it rests at 0)
    "pd_joint_delta_pos": 0.5,  # left joint 1 by +0.05 rad per step
    "pd_ee_delta_pose": 0.5,  # left TCP +x in the base frame, 0.05 m per step
}


@pytest.mark.parametrize("part", ["arm", "gripper"])
@pytest.mark.parametrize("mode", CONTROL_MODES)
def test_dual_arm_left_action_moves_only_the_left_arm(mode, part):
    scene, robot, controller = dual_arm_robot(mode)
    action = hold_action(mode, robot)
    index = action_layout(mode, robot)[f"left_{part}"]
    if part == "arm":
        action[index[0]] = LEFT_ARM_ACTIONS[mode]
        moving = robot.arm_index["left"]
    else:  # close the left fingers
        action[index] = -VEL_ACTION if mode == "normalized_joint_vel" else -1.0
        moving = robot.finger_index["left"]
    qpos = [robot.qpos.astype(np.float64)]
    for _ in range(20):
        controller.apply(action)
        for _ in range(SIM_FREQ_HZ // CONTROL_FREQ_HZ):
            scene.step()
        qpos.append(robot.qpos.astype(np.float64))
    qpos = np.array(qpos)
    motion = np.abs(qpos[-1] - qpos[0])
    assert motion[moving].max() > 0.004  # fingers move ~0.01 m, arm joints more
    if part == "arm" and mode != "pd_ee_delta_pose":  # the joint commanded is left joint 1
        assert robot.joints[int(np.argmax(motion))].name == "left_panda_joint1"
    # The base reacts to the arm's motion (up to 6 mm over these 20 steps) as in the single-arm tests.
    tol = np.full(robot.dof, 1e-3 if part == "gripper" else 5e-3)
    tol[robot.base_index] = STAY_TOL[:4]
    assert_stay(qpos, [j for j in range(robot.dof) if j not in moving], tol=tol)
