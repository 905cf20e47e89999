"""Sensor and odometry perturbations (envs/sensor_model.py): the option grammar, the per-image numpy functions on
synthetic images, and what the bundled envs report with them (while their physics stays bit for bit the same)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import handleit.envs
from handleit.envs.cameras import depth_image, extrinsic_cv, fuse_point_cloud
from handleit.envs.sensor_model import (
    YAW_DRIFT_RAD_PER_M,
    SensorPerturbation,
    SensorPerturber,
    depth_edges,
    parse_perturbation,
    perturb_depth,
)
from handleit.poses import pose7_to_matrix

# ------------------------------------------------------------------------------------------------------------
# The option's grammar
# ------------------------------------------------------------------------------------------------------------


def test_parse_full_string_and_canonical_text():
    p = parse_perturbation("depth_noise=0.005,extrinsics=0.01/1deg,odometry_drift=0.02,joint_noise=0.002,edge_dropout=1")
    assert p == SensorPerturbation(depth_noise_m=0.005, edge_dropout=1.0, extrinsics_m=0.01, extrinsics_deg=1.0,
                                   odometry_drift_m=0.02, joint_noise_rad=0.002)
    assert p.active
    # Fixed key order whatever the input's order: a key for tables.
    assert str(p) == "depth_noise=0.005,edge_dropout=1,extrinsics=0.01/1deg,odometry_drift=0.02,joint_noise=0.002"
    assert p.describe() == str(p)
    assert parse_perturbation(str(p)) == p


@pytest.mark.parametrize("text", [None, "", "  ", "none", "None"])
def test_no_perturbation(text):
    p = parse_perturbation(text)
    assert p == SensorPerturbation() and not p.active and str(p) == "none"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("extrinsics=0.02", SensorPerturbation(extrinsics_m=0.02)),
        ("extrinsics=0/2", SensorPerturbation(extrinsics_deg=2.0)),
        (" Joint_Noise = 1e-05 , horizon=50, seed=3", SensorPerturbation(joint_noise_rad=1e-5, horizon_steps=50, seed=3)),
        ("odometry_drift=0.1,horizon=1000", SensorPerturbation(odometry_drift_m=0.1, horizon_steps=1000)),
    ],
)
def test_parse_variants_round_trip(text, expected):
    p = parse_perturbation(text)
    assert p == expected
    assert parse_perturbation(str(p)) == p


@pytest.mark.parametrize(
    "text, names",
    [
        ("depth_noise=abc", "depth_noise=abc"),
        ("blur=1", "blur"),
        ("depth_noise", "depth_noise"),
        ("depth_noise=0.01,,joint_noise=0.1", "''"),
        ("depth_noise=-0.01", "depth_noise=-0.01"),
        ("depth_noise=nan", "depth_noise=nan"),
        ("edge_dropout=2", "edge_dropout"),
        ("joint_noise=0.1,joint_noise=0.2", "joint_noise"),
        ("horizon=0", "horizon_steps"),
        ("horizon=1.5", "horizon=1.5"),
        ("extrinsics=0.01/xdeg", "extrinsics=0.01/xdeg"),
        ("extrinsics=0.01/200deg", "extrinsics_deg"),
        ("seed=-1", "seed"),
    ],
)
def test_parse_errors_name_the_bad_token(text, names):
    with pytest.raises(ValueError) as err:
        parse_perturbation(text)
    assert names in str(err.value)


def test_dataclass_checks_its_fields():
    with pytest.raises(ValueError, match="depth_noise_m"):
        SensorPerturbation(depth_noise_m=-0.1)
    with pytest.raises(ValueError, match="horizon_steps"):
        SensorPerturbation(horizon_steps=0)
    with pytest.raises(ValueError, match="joint_noise_rad"):
        SensorPerturbation(joint_noise_rad="0.1")


def test_env_option_rejects_bad_text():
    with pytest.raises(ValueError, match="blur"):
        handleit.envs.make("OpenCabinetDrawer", obs_mode="state", sensor_perturbation="blur=1")
    with pytest.raises(ValueError, match="sensor_perturbation"):
        handleit.envs.make("OpenCabinetDrawer", obs_mode="state", sensor_perturbation=0.01)


# ------------------------------------------------------------------------------------------------------------
# Synthetic images (numpy only): the dict layout of CameraRig.capture
# ------------------------------------------------------------------------------------------------------------


def synthetic_image(depth: np.ndarray, fovy_deg: float = 60.0, X_WC_gl: np.ndarray | None = None) -> dict:
    """A captured image whose pixels see the given depth [m] (0: nothing), with a pinhole camera."""
    h, w = depth.shape
    f = (h / 2) / math.tan(math.radians(fovy_deg) / 2)
    K = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], dtype=np.float32)
    v, u = np.mgrid[0:h, 0:w] + 0.5
    # OpenGL camera frame: x right, y up, z backward.
    p_C = np.stack([(u - w / 2) / f * depth, -(v - h / 2) / f * depth, -depth], axis=-1)
    return dict(
        p_C=p_C.astype(np.float32),
        shape_id=np.ones((h, w), dtype=np.int32),
        rgb=np.zeros((h, w, 3), dtype=np.uint8),
        X_WC_gl=(np.eye(4) if X_WC_gl is None else X_WC_gl).astype(np.float32),
        K=K,
        near_m=np.float32(0.01),
        far_m=np.float32(10.0),
    )


def test_depth_noise_std_grows_with_the_square_of_depth_along_the_ray():
    rng = np.random.default_rng(0)
    sigma_1m = 0.005
    for z in (0.5, 1.0, 2.0, 4.0):
        image = synthetic_image(np.full((200, 200), z))
        noisy = perturb_depth(image, sigma_1m, 0.0, rng)
        error = depth_image(noisy) - depth_image(image)
        assert np.std(error) == pytest.approx(sigma_1m * z**2, rel=0.03)
        assert abs(np.mean(error)) < 4 * sigma_1m * z**2 / 200  # unbiased (4 standard errors)
        # Each point stays on its pixel's ray.
        a, b = image["p_C"].reshape(-1, 3).astype(np.float64), noisy["p_C"].reshape(-1, 3).astype(np.float64)
        sin = np.linalg.norm(np.cross(a, b), axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        assert sin.max() < 1e-5
    assert image["p_C"][0, 0, 2] == pytest.approx(-4.0)  # the input is not changed


def box_on_wall_depth() -> tuple[np.ndarray, np.ndarray]:
    """A wall at 2 m with a box face at 1.5 m in the middle (rows 20-39, columns 30-59), a patch of nothing
    (rows 5-9, columns 5-9); and which pixels are on the box."""
    depth = np.full((60, 90), 2.0)
    box = np.zeros(depth.shape, dtype=bool)
    box[20:40, 30:60] = True
    depth[box] = 1.5
    depth[5:10, 5:10] = 0.0
    return depth, box


def expected_edges(labels: np.ndarray) -> np.ndarray:
    """Pixels with a 4-neighbour of another label."""
    edge = np.zeros(labels.shape, dtype=bool)
    dv, dh = labels[1:] != labels[:-1], labels[:, 1:] != labels[:, :-1]
    edge[1:] |= dv
    edge[:-1] |= dv
    edge[:, 1:] |= dh
    edge[:, :-1] |= dh
    return edge


def test_edge_dropout_drops_pixels_on_depth_discontinuities():
    depth, box = box_on_wall_depth()
    labels = box.astype(int)
    labels[depth == 0] = 2
    edges = expected_edges(labels) & (depth > 0)
    image = synthetic_image(depth)

    all_dropped = perturb_depth(image, 0.0, 1.0, np.random.default_rng(0))
    lost = (depth_image(all_dropped) == 0) & (depth > 0)
    np.testing.assert_array_equal(lost, edges)
    # Both sides of the box's border (its outline, and the wall's pixels beside it), and the ring around the hole.
    assert edges.sum() == (2 * 20 + 2 * 30 - 4) + (2 * 20 + 2 * 30) + 4 * 5

    half = perturb_depth(image, 0.0, 0.5, np.random.default_rng(1))
    lost = (depth_image(half) == 0) & (depth > 0)
    assert not (lost & ~edges).any()
    assert lost.sum() / edges.sum() == pytest.approx(0.5, abs=0.1)
    # The point cloud marks them invalid.
    _, _, _, valid = fuse_point_cloud([half])
    assert valid.sum() == (depth > 0).sum() - lost.sum()


def test_a_slanted_plane_has_no_edges_but_a_small_step_does():
    # A plane seen at 15 degrees to the central ray (the floor toward the horizon), 2.9 to 5.7 m away: its
    # neighbouring pixels' depths differ by up to 1 %.
    h = w = 100
    fovy = math.radians(10.0)
    f = (h / 2) / math.tan(fovy / 2)
    v, u = np.mgrid[0:h, 0:w] + 0.5
    rays = np.stack([(u - w / 2) / f, -(v - h / 2) / f, -np.ones((h, w))], axis=-1)  # depth 1 along each
    n = np.array([0.0, math.cos(math.radians(15)), math.sin(math.radians(15))])
    n = n if (rays @ n).mean() < 0 else -n
    depth = -1.0 / (rays @ n)
    assert depth.min() > 0 and depth.max() / depth.min() > 1.5
    valid = np.ones(depth.shape, dtype=bool)
    assert not depth_edges(depth, valid, 1 / f).any()
    stepped = depth.copy()
    stepped[:, 50:] += 0.1  # a 10 cm step (2 to 3 %): a discontinuity
    assert depth_edges(stepped, valid, 1 / f)[:, 49:51].all()


def rigid_fit(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R, t minimizing |R a + t - b| (Kabsch)."""
    ca, cb = a.mean(0), b.mean(0)
    U, _, Vt = np.linalg.svd((a - ca).T @ (b - cb))
    d = np.sign(np.linalg.det(Vt.T @ U.T))
    R = Vt.T @ np.diag([1.0, 1.0, d]) @ U.T
    return R, cb - R @ ca


def test_extrinsics_error_moves_a_wall_rigidly_by_the_drawn_amount():
    X_WC = np.eye(4)
    X_WC[:3, :3] = [[0, 0, -1], [-1, 0, 0], [0, 1, 0]]  # looking along world +x, 1.5 m up
    X_WC[:3, 3] = [0.3, -0.2, 1.5]
    wall = synthetic_image(np.full((40, 60), 2.0), X_WC_gl=X_WC)
    p_W = fuse_point_cloud([wall])[0].astype(np.float64)

    # A translation alone moves every point by exactly its norm.
    shifted = SensorPerturber(parse_perturbation("extrinsics=0.01"))
    shifted.reset(seed=3, num_cameras=1)
    q_W = fuse_point_cloud(shifted.perturb_images([wall], 0, np.eye(4)))[0].astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(q_W - p_W, axis=1), 0.01, atol=2e-6)

    # Translation and rotation: in the camera frame, the points move by a rigid transform of that angle and shift.
    both = SensorPerturber(parse_perturbation("extrinsics=0.01/1deg"))
    both.reset(seed=4, num_cameras=2)
    q_W = fuse_point_cloud(both.perturb_images([wall], 0, np.eye(4)))[0].astype(np.float64)
    X_CW = np.linalg.inv(X_WC)
    p_C, q_C = p_W @ X_CW[:3, :3].T + X_CW[:3, 3], q_W @ X_CW[:3, :3].T + X_CW[:3, 3]
    R, t = rigid_fit(p_C, q_C)
    angle = math.degrees(math.acos(np.clip((np.trace(R) - 1) / 2, -1, 1)))
    assert angle == pytest.approx(1.0, abs=1e-3)
    assert np.linalg.norm(t) == pytest.approx(0.01, abs=1e-5)
    moved = np.linalg.norm(q_W - p_W, axis=1)
    # A wall 2 m away turned by 1 degree moves by up to 2.2 m * 2 sin(0.5 deg) (its far corners), plus 1 cm.
    assert 0.005 < moved.mean() and moved.max() < np.linalg.norm(p_C, axis=1).max() * 2 * math.sin(math.radians(0.5)) + 0.01

    # Each camera has its own error; the same seed draws the same errors, another seed others.
    assert not np.allclose(both.camera_errors[0], both.camera_errors[1])
    again = SensorPerturber(parse_perturbation("extrinsics=0.01/1deg"))
    again.reset(seed=4, num_cameras=2)
    np.testing.assert_array_equal(again.camera_errors[0], both.camera_errors[0])
    again.reset(seed=5, num_cameras=2)
    assert not np.allclose(again.camera_errors[0], both.camera_errors[0])


# ------------------------------------------------------------------------------------------------------------
# In the envs
# ------------------------------------------------------------------------------------------------------------
CAMERAS = dict(camera_width=48, camera_height=24)
STEPS = 4
DRIFT = "odometry_drift=0.05,horizon=4"
EVERYTHING = "depth_noise=0.01,edge_dropout=1,extrinsics=0.02/2deg,odometry_drift=0.05,joint_noise=0.01,horizon=4"


def pose_matrix(pose7) -> np.ndarray:
    return pose7_to_matrix(np.asarray(pose7, dtype=np.float64), normalize=True)


# The last env stays open: closing every env releases SAPIEN's renderer, and the next env's first picture
# then compiles its shaders again (seconds to tens of seconds on software Vulkan).
_last_env: list = []


def rollout(perturbation, obs_mode="pointcloud", task="OpenCabinetDrawer", steps=STEPS, seed=11, **kwargs):
    """Observations and the true robot and object state after each of ``steps`` fixed random actions."""
    env = handleit.envs.make(task, obs_mode=obs_mode, sensor_perturbation=perturbation, **kwargs).unwrapped
    _last_env[:] = [env]
    actions = np.random.default_rng(0).uniform(-1, 1, size=(steps, *env.action_space.shape))
    obs, info = env.reset(seed=seed)
    record = [dict(obs=obs, qpos=env.robot.qpos.copy(), state=env._task_state().copy(), info=info)]
    for a in actions:
        obs, _, _, _, info = env.step(a)
        record.append(dict(obs=obs, qpos=env.robot.qpos.copy(), state=env._task_state().copy(), info=info))
    return record


@pytest.fixture(scope="module")
def drawer_rollouts():
    return {p: rollout(p, **CAMERAS) for p in (None, DRIFT, EVERYTHING)}


def test_physics_and_success_are_the_same_with_and_without_perturbation(drawer_rollouts):
    truth = drawer_rollouts[None]
    for p in (DRIFT, EVERYTHING):
        for a, b in zip(truth, drawer_rollouts[p]):
            np.testing.assert_array_equal(a["qpos"], b["qpos"])  # bit for bit
            np.testing.assert_array_equal(a["state"], b["state"])
            assert a["info"] == b["info"]
    # ... while what is reported differs.
    last_true, last = truth[-1]["obs"], drawer_rollouts[EVERYTHING][-1]["obs"]
    assert not np.allclose(last_true["agent"]["qpos"], last["agent"]["qpos"])
    assert (last["pointcloud"]["valid"].sum() < last_true["pointcloud"]["valid"].sum())


def test_same_seed_same_perturbed_observations(drawer_rollouts):
    again = rollout(EVERYTHING, **CAMERAS)
    for a, b in zip(drawer_rollouts[EVERYTHING], again):
        np.testing.assert_array_equal(a["obs"]["agent"]["qpos"], b["obs"]["agent"]["qpos"])
        np.testing.assert_array_equal(a["obs"]["pointcloud"]["xyz"], b["obs"]["pointcloud"]["xyz"])
    other = rollout(EVERYTHING, seed=12, steps=0, **CAMERAS)[0]["obs"]["agent"]
    truth = rollout(None, seed=12, steps=0, **CAMERAS)[0]["obs"]["agent"]
    first = drawer_rollouts[EVERYTHING][0]["obs"]["agent"]
    assert not np.allclose(other["qpos"] - truth["qpos"], first["qpos"] - drawer_rollouts[None][0]["obs"]["agent"]["qpos"])


def test_odometry_drift_reaches_its_magnitude_and_moves_base_pose_and_cloud_together(drawer_rollouts):
    truth, drifted = drawer_rollouts[None], drawer_rollouts[DRIFT]
    for step, (a, b) in enumerate(zip(truth, drifted)):
        ta, tb = a["obs"]["agent"], b["obs"]["agent"]
        X_true, X_rep = pose_matrix(ta["base_pose"]), pose_matrix(tb["base_pose"])
        share = step / STEPS
        assert np.linalg.norm(X_rep[:3, 3] - X_true[:3, 3]) == pytest.approx(0.05 * share, abs=1e-5)
        yaw_error = math.atan2(*(X_rep[:3, :3] @ X_true[:3, :3].T)[[1, 0], [0, 0]])
        assert abs(yaw_error) == pytest.approx(YAW_DRIFT_RAD_PER_M * 0.05 * share, abs=1e-5)
        # The base joints report the same drifted pose; the other joints are untouched.
        np.testing.assert_allclose(tb["qpos"][:2], X_rep[:2, 3], atol=1e-5)
        assert tb["qpos"][2] - ta["qpos"][2] == pytest.approx(yaw_error, abs=1e-5)
        np.testing.assert_array_equal(tb["qpos"][3:], ta["qpos"][3:])
        # Everything in the world frame moves with the base: tool pose, point cloud.
        D = X_rep @ np.linalg.inv(X_true)
        np.testing.assert_allclose(pose_matrix(tb["tcp_pose"]), D @ pose_matrix(ta["tcp_pose"]), atol=1e-5)
        pa, pb = a["obs"]["pointcloud"], b["obs"]["pointcloud"]
        np.testing.assert_array_equal(pa["valid"], pb["valid"])
        np.testing.assert_array_equal(pa["target_handle"], pb["target_handle"])  # masks stay per pixel
        v = pa["valid"]
        np.testing.assert_allclose(pb["xyz"][v], pa["xyz"][v] @ D[:3, :3].T + D[:3, 3], atol=2e-4)
    # Drift has a direction and size, different per episode seed.
    assert np.linalg.norm(X_rep[:3, 3] - X_true[:3, 3]) == pytest.approx(0.05, abs=1e-5)


def test_base_frame_cloud_does_not_drift():
    # In the base frame the cloud is placed by the cameras' mounting, not by odometry.
    a = rollout(None, steps=2, pointcloud_frame="base", **CAMERAS)[-1]["obs"]["pointcloud"]
    b = rollout("odometry_drift=0.05,horizon=2", steps=2, pointcloud_frame="base", **CAMERAS)[-1]["obs"]["pointcloud"]
    np.testing.assert_allclose(b["xyz"][a["valid"]], a["xyz"][a["valid"]], atol=2e-4)


def test_joint_noise_leaves_base_joints_and_fingers_alone():
    truth = rollout(None, obs_mode="state", steps=20)
    noisy = rollout("joint_noise=0.01", obs_mode="state", steps=20)
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="state").unwrapped
    robot = env.robot
    base_xy_yaw = robot.base_index[:3]
    noised = np.concatenate([robot.base_index[3:], robot.arm_index["right"]])
    fingers = robot.finger_index["right"]
    errors = []
    for a, b in zip(truth, noisy):
        qa, qb = a["obs"]["agent"]["qpos"], b["obs"]["agent"]["qpos"]
        np.testing.assert_array_equal(qa[base_xy_yaw], qb[base_xy_yaw])
        np.testing.assert_array_equal(qa[fingers], qb[fingers])
        np.testing.assert_array_equal(a["obs"]["agent"]["base_pose"], b["obs"]["agent"]["base_pose"])
        errors.append(qb[noised] - qa[noised])
        # The tool pose is the forward kinematics of the noisy joints: near the true one, not equal.
        tcp_error = np.linalg.norm(b["obs"]["agent"]["tcp_pose"][:3] - a["obs"]["agent"]["tcp_pose"][:3])
        assert 0 < tcp_error < 0.05
    assert np.std(errors) == pytest.approx(0.01, rel=0.15)


def test_rgbd_mode_gets_noisy_depth_and_wrong_extrinsics():
    a = rollout(None, obs_mode="rgbd", steps=0, **CAMERAS)[0]["obs"]["cameras"]
    b = rollout("depth_noise=0.01,extrinsics=0.02/1deg", obs_mode="rgbd", steps=0, **CAMERAS)[0]["obs"]["cameras"]
    for name in a:
        seen = a[name]["depth"] > 0
        assert not np.allclose(a[name]["depth"][seen], b[name]["depth"][seen])
        np.testing.assert_array_equal(a[name]["rgb"], b[name]["rgb"])
        X_CC = b[name]["extrinsic_cv"].astype(np.float64) @ np.linalg.inv(a[name]["extrinsic_cv"].astype(np.float64))
        assert np.linalg.norm(X_CC[:3, 3]) > 0.005


def test_tabletop_robot_has_no_odometry_but_noisy_joints():
    # The tabletop Panda is bolted to the table: no base joints, so no odometry to drift.
    truth = rollout(None, obs_mode="state", task="PickCube", steps=2)
    noisy = rollout("odometry_drift=0.05,joint_noise=0.002,horizon=2", obs_mode="state", task="PickCube", steps=2)
    for a, b in zip(truth, noisy):
        np.testing.assert_array_equal(a["qpos"], b["qpos"])
        np.testing.assert_array_equal(a["obs"]["agent"]["base_pose"], b["obs"]["agent"]["base_pose"])
        tcp_error = np.linalg.norm(b["obs"]["agent"]["tcp_pose"][:3] - a["obs"]["agent"]["tcp_pose"][:3])
        assert 0 < tcp_error < 0.02
