"""Sensor and odometry perturbations: what a real robot's sensors add to what the env reports.

In the spirit of SIMPLER ("Evaluating Real-World Robot Manipulation Policies in Simulation", arXiv
2405.05941), the bundled envs can report observations with the errors a real robot's sensors make, while the
physics and the success check keep the ground truth. A :class:`SensorPerturbation` says how much of each
error; :class:`SensorPerturber` draws them, from its own generator seeded from the reset seed (never the env's
``np_random``), so that an episode's physics and sampling are bit for bit the same with and without it.

The errors:

- depth noise along each pixel's ray, growing with the square of the distance as a stereo camera's does;
- edge dropout: pixels at depth discontinuities (mixed or "flying" pixels) are lost;
- extrinsics: each camera's pose is wrong by a fixed error drawn once per episode (a miscalibrated camera);
- odometry drift: the reported base pose drifts linearly in time from the true one, and with it everything
  reported in the world frame (base pose, the base joints in qpos, tool poses, the point cloud);
- joint noise: Gaussian noise on the reported arm and torso joint positions (and the tool poses computed
  from them by forward kinematics, as a real robot computes them).

Command-line grammar (:func:`parse_perturbation`): comma-separated ``key=value`` tokens, any order, each key
at most once; ``""`` or ``"none"`` is no perturbation::

    depth_noise=0.005        depth_noise_m: depth std at 1 m [m] (sigma(z) = depth_noise_m * z^2)
    edge_dropout=1           probability that a pixel on a depth discontinuity is dropped, in [0, 1]
    extrinsics=0.01/1deg     camera pose error: translation [m] / rotation [deg] ("/1deg" may be left out)
    odometry_drift=0.02      base position drift at the horizon [m]
    joint_noise=0.002        std of the arm and torso joint readings [rad, m for the torso]
    horizon=200              steps at which the drift reaches its magnitude
    seed=7                   fixed perturbation draws in every episode (default: from the reset seed)

``str(perturbation)`` gives the canonical text back (fixed key order, only what is set), used as a key in
tables.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

import numpy as np

from handleit.poses import matrix_to_pose7, pose7_to_matrix

# A neighbour is across a depth discontinuity when its depth differs by more than EDGE_JUMP_M, and by more than
# a surface seen at EDGE_MIN_INCIDENCE_DEG to the ray would make it differ. On a plane seen at a grazing angle
# a, neighbour depths differ by about z * pixel_angle / tan(a) (the floor toward the horizon: 2.7 % of z at 15
# degrees for the default 400x160 cameras, 12 % for 64x32 ones), so a fixed threshold would call slanted
# floors edges; steeper steps are discontinuities (or surfaces almost along the ray, which real depth cameras
# lose as well).
EDGE_JUMP_M = 0.04
EDGE_MIN_INCIDENCE_DEG = 7.0
# Heading drift per metre of position drift [rad/m]: a base whose heading is off by psi and that then travels
# about 1 m gains a lateral error of about psi * 1 m, so position and heading drift of wheel odometry grow
# together at roughly this ratio (0.02 m of drift comes with 0.02 rad, 1.1 degrees, of yaw).
YAW_DRIFT_RAD_PER_M = 1.0
DEFAULT_HORIZON_STEPS = 200  # the ManiSkill1 challenge's episode length
# Salt mixed into the reset seed, so that the perturbation's stream differs from the env's np_random stream.
_SEED_SALT = 0x5E4507


@dataclass(frozen=True)
class SensorPerturbation:
    """How much of each sensor error the env adds to what it reports (all 0: none).

    ``depth_noise_m``: std of the depth noise at 1 m [m]; at depth z it is ``depth_noise_m * z**2``.
    ``edge_dropout``: probability in [0, 1] that a pixel on a depth discontinuity is dropped (1: all of them).
    ``extrinsics_m``, ``extrinsics_deg``: each camera's pose error, drawn once per episode: a translation of
    this norm [m] in a random direction and a rotation of this angle [deg] about a random axis.
    ``odometry_drift_m``: the reported base position's error at step ``horizon_steps``, growing linearly in
    time in a random horizontal direction, with a heading error of ``YAW_DRIFT_RAD_PER_M`` rad per metre.
    ``joint_noise_rad``: std of the Gaussian noise on the reported arm and torso joint positions.
    ``seed``: when set, every episode draws the same perturbation (one miscalibrated robot); when None, the
    draws come from the reset seed.
    """

    depth_noise_m: float = 0.0
    edge_dropout: float = 0.0
    extrinsics_m: float = 0.0
    extrinsics_deg: float = 0.0
    odometry_drift_m: float = 0.0
    joint_noise_rad: float = 0.0
    horizon_steps: int = DEFAULT_HORIZON_STEPS
    seed: int | None = None

    def __post_init__(self):
        for f in fields(self):
            if f.name in ("horizon_steps", "seed"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"SensorPerturbation.{f.name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"SensorPerturbation.{f.name} must be >= 0, got {value}")
        if self.edge_dropout > 1:
            raise ValueError(f"SensorPerturbation.edge_dropout is a probability in [0, 1], got {self.edge_dropout}")
        if self.extrinsics_deg > 180:
            raise ValueError(f"SensorPerturbation.extrinsics_deg must be at most 180, got {self.extrinsics_deg}")
        if isinstance(self.horizon_steps, bool) or not isinstance(self.horizon_steps, (int, np.integer)) \
                or self.horizon_steps <= 0:
            raise ValueError(f"SensorPerturbation.horizon_steps must be a positive integer, got {self.horizon_steps!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))
                                      or self.seed < 0):
            raise ValueError(f"SensorPerturbation.seed must be None or an integer >= 0, got {self.seed!r}")

    @property
    def active(self) -> bool:
        """Whether any error is switched on."""
        return any((self.depth_noise_m, self.edge_dropout, self.extrinsics_m, self.extrinsics_deg,
                    self.odometry_drift_m, self.joint_noise_rad))

    def describe(self) -> str:
        """The canonical text: ``parse_perturbation(p.describe()) == p``; ``"none"`` when nothing is set."""
        tokens = []
        if self.depth_noise_m:
            tokens.append(f"depth_noise={_num(self.depth_noise_m)}")
        if self.edge_dropout:
            tokens.append(f"edge_dropout={_num(self.edge_dropout)}")
        if self.extrinsics_m or self.extrinsics_deg:
            angle = f"/{_num(self.extrinsics_deg)}deg" if self.extrinsics_deg else ""
            tokens.append(f"extrinsics={_num(self.extrinsics_m)}{angle}")
        if self.odometry_drift_m:
            tokens.append(f"odometry_drift={_num(self.odometry_drift_m)}")
        if self.joint_noise_rad:
            tokens.append(f"joint_noise={_num(self.joint_noise_rad)}")
        if self.horizon_steps != DEFAULT_HORIZON_STEPS:
            tokens.append(f"horizon={int(self.horizon_steps)}")
        if self.seed is not None:
            tokens.append(f"seed={int(self.seed)}")
        return ",".join(tokens) or "none"

    def __str__(self) -> str:
        return self.describe()


def _num(x: float) -> str:
    """Shortest text that parses back to the same float, without a trailing ".0"."""
    s = repr(float(x))
    return s[:-2] if s.endswith(".0") else s


_FLOAT_KEYS = {
    "depth_noise": "depth_noise_m",
    "edge_dropout": "edge_dropout",
    "odometry_drift": "odometry_drift_m",
    "joint_noise": "joint_noise_rad",
}
_KEYS = ("depth_noise", "edge_dropout", "extrinsics", "odometry_drift", "joint_noise", "horizon", "seed")


def parse_perturbation(text: str | None) -> SensorPerturbation:
    """A perturbation from its command-line text (grammar in the module docstring); ``ValueError`` naming the
    bad token otherwise. ``None``, ``""`` and ``"none"`` give no perturbation."""
    if text is None:
        return SensorPerturbation()
    if not isinstance(text, str):
        raise ValueError(f"a sensor perturbation is a string like 'depth_noise=0.005,joint_noise=0.002', "
                         f"got {type(text).__name__}")
    stripped = text.strip()
    if stripped.lower() in ("", "none"):
        return SensorPerturbation()
    values: dict = {}
    seen: set[str] = set()
    for token in stripped.split(","):
        token = token.strip()
        key, sep, value = token.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"sensor perturbation token {token!r} is not key=value; keys: {', '.join(_KEYS)}")
        if key not in _KEYS:
            raise ValueError(f"unknown sensor perturbation {key!r} in token {token!r}; keys: {', '.join(_KEYS)}")
        if key in seen:
            raise ValueError(f"sensor perturbation {key!r} given twice (token {token!r})")
        seen.add(key)
        if key in _FLOAT_KEYS:
            values[_FLOAT_KEYS[key]] = _parse_float(value, token)
        elif key == "extrinsics":
            metres, slash, degrees = value.partition("/")
            values["extrinsics_m"] = _parse_float(metres, token)
            if slash:
                degrees = degrees.strip().lower()
                degrees = degrees[:-3] if degrees.endswith("deg") else degrees
                values["extrinsics_deg"] = _parse_float(degrees, token)
        else:  # horizon, seed
            try:
                values["horizon_steps" if key == "horizon" else "seed"] = int(value)
            except ValueError:
                raise ValueError(f"sensor perturbation token {token!r}: {value!r} is not an integer") from None
    try:
        return SensorPerturbation(**values)
    except ValueError as e:
        raise ValueError(f"sensor perturbation {text!r}: {e}") from None


def _parse_float(value: str, token: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"sensor perturbation token {token!r}: {value.strip()!r} is not a number") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"sensor perturbation token {token!r}: the value must be finite and >= 0")
    return x


def as_perturbation(value: SensorPerturbation | str | None) -> SensorPerturbation:
    """The env option's accepted forms: a :class:`SensorPerturbation`, its text, or None (no perturbation)."""
    if isinstance(value, SensorPerturbation):
        return value
    if value is None or isinstance(value, str):
        return parse_perturbation(value)
    raise ValueError(f"sensor_perturbation must be a SensorPerturbation, a string or None, got {type(value).__name__}")


# ----------------------------------------------------------------------------------------------------------
# Numpy functions on captured images (the dicts of envs.cameras.CameraRig.capture: p_C in the OpenGL camera
# frame [m], x right, y up, z backward; X_WC_gl the camera-to-world matrix; far_m the far plane)
# ----------------------------------------------------------------------------------------------------------
def valid_depth(image: dict) -> tuple[np.ndarray, np.ndarray]:
    """Depth along the optical axis [m] (H x W) and where a pixel saw geometry (as ``fuse_point_cloud``)."""
    depth = -image["p_C"][..., 2].astype(np.float64)
    return depth, (depth > 0) & (depth < image["far_m"])


def depth_edges(depth: np.ndarray, valid: np.ndarray, pixel_angle_rad: float, jump_m: float = EDGE_JUMP_M,
                min_incidence_deg: float = EDGE_MIN_INCIDENCE_DEG) -> np.ndarray:
    """Valid pixels on a depth discontinuity: a 4-neighbour that saw nothing, or whose depth [m] differs by
    more than ``max(jump_m, depth * pixel_angle_rad / tan(min_incidence_deg))`` (``pixel_angle_rad``: the
    angle between neighbouring pixels' rays, 1 / focal length in pixels). Both sides of a jump are edge
    pixels (a mixed pixel's return is spread over the near and the far surface)."""
    jump_relative = pixel_angle_rad / math.tan(math.radians(min_incidence_deg))
    edge = np.zeros(depth.shape, dtype=bool)
    for axis in (0, 1):
        a = [slice(None)] * 2
        b = [slice(None)] * 2
        a[axis], b[axis] = slice(None, -1), slice(1, None)
        a, b = tuple(a), tuple(b)
        za, zb = depth[a], depth[b]
        threshold = np.maximum(jump_m, jump_relative * np.minimum(za, zb))
        jump = (valid[a] != valid[b]) | (valid[a] & valid[b] & (np.abs(za - zb) > threshold))
        edge[a] |= jump
        edge[b] |= jump
    return edge & valid


def perturb_depth(image: dict, depth_noise_m: float, edge_dropout: float, rng: np.random.Generator) -> dict:
    """The image with noisy depth and dropped edge pixels (a new dict; the input is not changed).

    Noise model: stereo depth error grows with the square of the distance (z = f b / d, so a disparity error
    sigma_d gives sigma_z = z^2 sigma_d / (f b)); ``depth_noise_m`` is sigma_z at 1 m, and each pixel's point
    moves along its camera ray to the noisy depth. Edges are found on the true depth, so noise makes none;
    each edge pixel is dropped with probability ``edge_dropout``. A dropped pixel, or one whose noisy depth is
    not positive, reads as "nothing seen" (p_C = 0, depth 0).
    """
    out = dict(image)
    depth, valid = valid_depth(image)
    p_C = image["p_C"].astype(np.float64)
    drop = np.zeros(depth.shape, dtype=bool)
    if edge_dropout > 0:
        K = np.asarray(image["K"], dtype=np.float64)
        edge = depth_edges(depth, valid, 1.0 / min(K[0, 0], K[1, 1]))
        drop = edge & (rng.random(depth.shape) < edge_dropout)
    if depth_noise_m > 0:
        noisy = depth + depth_noise_m * depth**2 * rng.standard_normal(depth.shape)
        scale = np.where(valid, noisy / np.where(valid, depth, 1.0), 1.0)
        p_C = p_C * scale[..., None]
        drop |= valid & (noisy <= 0)
    p_C[drop] = 0.0
    out["p_C"] = p_C.astype(np.float32)
    return out


def random_unit_vector(rng: np.random.Generator, dim: int = 3) -> np.ndarray:
    v = rng.standard_normal(dim)
    while np.linalg.norm(v) < 1e-9:
        v = rng.standard_normal(dim)
    return v / np.linalg.norm(v)


def axis_angle_matrix(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    """Rotation matrix of ``angle_rad`` about the unit ``axis`` (Rodrigues)."""
    k = np.asarray(axis, dtype=np.float64)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle_rad) * K + (1 - math.cos(angle_rad)) * K @ K


def extrinsics_error(rng: np.random.Generator, translation_m: float, rotation_deg: float) -> np.ndarray:
    """A camera pose error X_CC' (4x4): a translation of norm ``translation_m`` in a random direction and a
    rotation of ``rotation_deg`` about a random axis."""
    E = np.eye(4)
    E[:3, :3] = axis_angle_matrix(random_unit_vector(rng), math.radians(rotation_deg))
    E[:3, 3] = translation_m * random_unit_vector(rng)
    return E


def with_camera_pose(image: dict, X_WC_gl: np.ndarray) -> dict:
    """The image as its pixels would be turned into points with the camera pose ``X_WC_gl`` (4x4)."""
    out = dict(image)
    out["X_WC_gl"] = np.asarray(X_WC_gl, dtype=np.float32)
    return out


def odometry_drift_transform(X_WB: np.ndarray, drift_W: np.ndarray, yaw_rad: float) -> np.ndarray:
    """The world transform D (4x4) that takes the true base pose to the reported one, ``X_WB' = D @ X_WB``:
    a turn of ``yaw_rad`` about the vertical through the base, then a shift by ``drift_W`` [m]. The reported
    base position is off by exactly ``drift_W`` and the heading by ``yaw_rad``; applying D to every
    world-frame quantity keeps them consistent with the reported base, as odometry-placed data would be."""
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    D = np.eye(4)
    D[:3, :3] = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    p_B = np.asarray(X_WB, dtype=np.float64)[:3, 3]
    D[:3, 3] = p_B + np.asarray(drift_W, dtype=np.float64) - D[:3, :3] @ p_B
    return D


# ----------------------------------------------------------------------------------------------------------
# One episode's perturbation, as the env applies it
# ----------------------------------------------------------------------------------------------------------
class SensorPerturber:
    """Draws and applies one episode's perturbation. ``reset`` at every env reset (after the robot is built),
    ``perturb_proprioception`` and ``perturb_images`` on every observation, in that order."""

    def __init__(self, perturbation: SensorPerturbation):
        self.perturbation = perturbation
        self.rng: np.random.Generator | None = None
        self.camera_errors: list[np.ndarray] = []
        self.drift_direction_W = np.zeros(3)
        self.yaw_sign = 1.0
        self._robot = None
        self._fk = None

    def reset(self, seed: int | None, num_cameras: int, robot=None) -> None:
        """New draws for an episode. ``seed``: the env's reset seed (used when the perturbation has none);
        with neither, the generator goes on from the previous episode (or from fresh entropy)."""
        p = self.perturbation
        if p.seed is not None:
            self.rng = np.random.default_rng([_SEED_SALT, 1, int(p.seed)])
        elif seed is not None:
            self.rng = np.random.default_rng([_SEED_SALT, 0, int(seed)])
        elif self.rng is None:
            self.rng = np.random.default_rng()
        rng = self.rng
        # Per-episode draws, always made in this order so that switching one error off leaves the others'.
        self.camera_errors = [extrinsics_error(rng, p.extrinsics_m, p.extrinsics_deg) for _ in range(num_cameras)]
        phi = rng.uniform(0.0, 2.0 * math.pi)
        self.drift_direction_W = np.array([math.cos(phi), math.sin(phi), 0.0])
        self.yaw_sign = 1.0 if rng.random() < 0.5 else -1.0
        self._robot = robot
        self._fk = None
        if robot is not None and p.joint_noise_rad > 0:
            self._fk = robot.articulation.create_pinocchio_model()
            names = [link.name for link in robot.articulation.links]
            self._tcp_link_index = [names.index(robot.tcp_links[s].name) for s in robot.sides]

    def _has_base(self) -> bool:
        return self._robot is not None and len(self._robot.base_index) >= 3

    def drift(self, step: int) -> tuple[np.ndarray, float]:
        """The odometry error at ``step``: position [m] (world frame) and heading [rad]."""
        p = self.perturbation
        if not p.odometry_drift_m or not self._has_base():
            return np.zeros(3), 0.0
        share = step / p.horizon_steps
        return (p.odometry_drift_m * share * self.drift_direction_W,
                self.yaw_sign * YAW_DRIFT_RAD_PER_M * p.odometry_drift_m * share)

    def drift_transform(self, step: int, X_WB: np.ndarray) -> np.ndarray:
        """D (4x4) with reported = D @ true for every world-frame quantity at ``step``."""
        drift_W, yaw = self.drift(step)
        return odometry_drift_transform(X_WB, drift_W, yaw)

    def perturb_proprioception(self, agent: dict, step: int) -> dict:
        """The reported ``qpos``, ``qvel``, ``base_pose``, ``tcp_pose`` (a new dict) at ``step``: arm and torso
        joints with noise, tool poses by forward kinematics of the noisy joints, everything in the world frame
        moved by the odometry drift. The base's x, y and yaw joints carry only the drift (they are odometry)."""
        p, robot = self.perturbation, self._robot
        out = dict(agent)
        drift_W, yaw = self.drift(step)
        drifting = bool(yaw or drift_W.any())
        noisy_joints = p.joint_noise_rad > 0 and robot is not None
        if not (drifting or noisy_joints):
            return out
        qpos = np.asarray(agent["qpos"], dtype=np.float64).copy()
        qvel = np.asarray(agent["qvel"], dtype=np.float64).copy()
        # a float32 pose's quaternion is not quite unit: normalized first
        X_WTs = list(pose7_to_matrix(np.asarray(agent["tcp_pose"], dtype=np.float64).reshape(-1, 7), normalize=True))
        if noisy_joints:
            index = np.concatenate([robot.base_index[3:], *(robot.arm_index[s] for s in robot.sides)]).astype(int)
            qpos[index] += p.joint_noise_rad * self.rng.standard_normal(len(index))
            # A real robot computes its tool poses from its joint readings (forward kinematics in the
            # articulation's root frame, which is fixed in the world).
            X_W_root = np.asarray(robot.articulation.root_pose.to_transformation_matrix(), dtype=np.float64)
            self._fk.compute_forward_kinematics(qpos.astype(np.float32))
            X_WTs = [X_W_root @ np.asarray(self._fk.get_link_pose(i).to_transformation_matrix(), dtype=np.float64)
                     for i in self._tcp_link_index]
        if drifting:
            X_WB = pose7_to_matrix(agent["base_pose"], normalize=True)
            D = odometry_drift_transform(X_WB, drift_W, yaw)
            x, y, th = robot.base_index[:3]
            qpos[x] += drift_W[0]
            qpos[y] += drift_W[1]
            qpos[th] += yaw
            c, s = math.cos(yaw), math.sin(yaw)  # world-frame base velocities turn with the heading error
            qvel[[x, y]] = [c * qvel[x] - s * qvel[y], s * qvel[x] + c * qvel[y]]
            out["base_pose"] = matrix_to_pose7(D @ X_WB).astype(np.float32)
            X_WTs = [D @ X for X in X_WTs]
        out["qpos"] = qpos.astype(np.float32)
        out["qvel"] = qvel.astype(np.float32)
        out["tcp_pose"] = np.concatenate([matrix_to_pose7(X) for X in X_WTs]).astype(np.float32)
        return out

    def perturb_images(self, images: list[dict], step: int, X_WB: np.ndarray) -> list[dict]:
        """The captured images as the robot reports them at ``step``: noisy, edge-dropped depth, and each
        camera's pose with its calibration error and the odometry drift (``X_WB``: the true base pose, 4x4)."""
        p = self.perturbation
        D = self.drift_transform(step, X_WB)
        out = []
        for i, image in enumerate(images):
            if p.depth_noise_m > 0 or p.edge_dropout > 0:
                image = perturb_depth(image, p.depth_noise_m, p.edge_dropout, self.rng)
            E = self.camera_errors[i] if i < len(self.camera_errors) else np.eye(4)
            if p.extrinsics_m or p.extrinsics_deg or p.odometry_drift_m:
                image = with_camera_pose(image, D @ image["X_WC_gl"].astype(np.float64) @ E)
            out.append(image)
        return out
