"""What the learned policies see: per-point features and a state vector, from demonstrations or live observations.

One function, :func:`batch_features`, turns raw arrays (:func:`arrays_of_demo_obs`: observations in the
demonstration files' layout, or a live :class:`~handleit.types.Observation` put in that layout by the
recorder's own ``baselines.demo_files.demo_obs_of_observation``) into the networks' inputs, so that training and
acting cannot disagree.

Frames (monogram notation): W the world, B the robot's base (``base_pose``), T the first arm's tool centre
(``tcp_pose``). Points are expressed in the frame F named by ``FeatureSpec.point_frame``:

- ``"base"`` (default): F = B. For the mobile robots this makes the input ego-centric (ManiSkill2-Learn
  fuses its cameras in the base frame, ManiSkill2 (arXiv 2302.04659) F.3); for the tabletop Panda B is fixed, so it is
  the world up to a constant shift.
- ``"tcp"``: F = T, the end-effector frame, which ManiSkill2 found far better than the base frame for
  pick-and-place (ManiSkill2 Table 7: 0.51 vs 0.00 on PickSingleYCB with DAPG+PPO).

Per point (``[P, C]``, float32): ``xyz`` in F (m), ``rgb / 255``, one 0/1 channel per mask in
``FeatureSpec.mask_names``, and, with goal cue points, a ``goal`` channel. Goal cue points (ManiSkill2 F.3:
"50 green points around the goal position") are drawn uniformly in a ball of ``GOAL_CUE_RADIUS_M`` around
the goal and appended green. The state (``[S]``): ``qpos``, ``qvel`` (m, rad; m/s, rad/s; ``FeatureSpec.qvel``) and, where the
task gives one, the goal position in F (m). Normalization of the state is the network's business
(:class:`~handleit.baselines.networks.Normalizer`), not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from handleit.poses import pose7_to_matrix

POINT_FRAMES = ("base", "tcp")
GOAL_CUE_RADIUS_M = 0.025  # the pick tasks' success radius (ManiSkill2 Appendix C.2)
GOAL_CUE_RGB = (0, 255, 0)  # green, as ManiSkill2's cues


@dataclass(frozen=True)
class FeatureSpec:
    """The layout of the networks' inputs; stored in every checkpoint."""

    mask_names: tuple[str, ...]  # point-cloud masks used as channels, in this order
    dof: int  # robot joints (qpos, qvel and the action have this length)
    has_goal: bool  # the task gives a goal position (obs["extra"]["goal_pos"])
    num_points: int = 1200  # points fed to the network per step (ManiSkill2 F.3: 1200)
    point_frame: str = "base"  # "base" or "tcp": the frame F of the points and the goal
    goal_cue_points: int = 0  # green points sampled around the goal (0: none; ManiSkill2 F.3 uses 50)
    # Joint velocities in the state. With the velocity controller qvel_t is the previous action times the limit,
    # so a network can copy it instead of reading the scene ("copycat", Wen et al. 2020); False leaves it out.
    qvel: bool = True

    def __post_init__(self):
        if self.point_frame not in POINT_FRAMES:
            raise ValueError(f"unknown point_frame {self.point_frame!r}; choose one of {POINT_FRAMES}")
        if self.num_points < 1:
            raise ValueError(f"num_points must be >= 1, got {self.num_points}")
        if self.goal_cue_points and not self.has_goal:
            raise ValueError("goal_cue_points > 0 needs a task with a goal position (has_goal)")

    @property
    def point_dim(self) -> int:
        return 6 + len(self.mask_names) + (1 if self.goal_cue_points else 0)

    @property
    def state_dim(self) -> int:
        return (2 if self.qvel else 1) * self.dof + (3 if self.has_goal else 0)

    @property
    def group_masks(self) -> tuple[str, ...]:
        """The mask channels that form point groups for the transformer encoder (the goal cue included)."""
        return self.mask_names + (("goal",) if self.goal_cue_points else ())


def subsample_indices(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` indices into ``n`` points, uniformly without replacement (with replacement when ``n < k``)."""
    if n <= 0:
        raise ValueError("cannot sample from an empty point cloud")
    return rng.choice(n, size=k, replace=n < k)


def batch_features(
    spec: FeatureSpec,
    xyz_W: np.ndarray,
    rgb: np.ndarray,
    masks: np.ndarray,
    qpos: np.ndarray,
    qvel: np.ndarray,
    base_pose: np.ndarray,
    tcp_pose: np.ndarray,
    goal_W: np.ndarray | None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The networks' inputs for a batch of B steps.

    Args:
        xyz_W: [B, N, 3] points in the world frame (m); N >= 1 (resampled to ``spec.num_points``).
        rgb: [B, N, 3] uint8 colours.
        masks: [B, N, M] 0/1, one channel per ``spec.mask_names``.
        qpos, qvel: [B, dof] joint positions and velocities.
        base_pose: [B, 7] X_WB as (x, y, z, qw, qx, qy, qz); tcp_pose: [B, >=7] X_WT of the first arm first.
        goal_W: [B, 3] goal positions in the world (m), or None when the task has none.
        rng: draws the point subsets and the goal cue points.

    Returns:
        points [B, num_points + goal_cue_points, point_dim] and state [B, state_dim], float32.
    """
    xyz_W, rgb, masks = np.asarray(xyz_W), np.asarray(rgb), np.asarray(masks)
    B, N = xyz_W.shape[:2]
    if xyz_W.shape != (B, N, 3) or rgb.shape != (B, N, 3) or masks.shape != (B, N, len(spec.mask_names)):
        raise ValueError(f"points: xyz {xyz_W.shape}, rgb {rgb.shape}, masks {masks.shape}; expected "
                         f"[B, N, 3], [B, N, 3], [B, N, {len(spec.mask_names)}] (masks {spec.mask_names})")
    for name, a in (("qpos", qpos), ("qvel", qvel)):
        if np.shape(a) != (B, spec.dof):
            raise ValueError(f"{name} has shape {np.shape(a)}, expected ({B}, {spec.dof})")
    if N != spec.num_points:
        index = np.stack([subsample_indices(N, spec.num_points, rng) for _ in range(B)])
        rows = np.arange(B)[:, None]
        xyz_W, rgb, masks = xyz_W[rows, index], rgb[rows, index], masks[rows, index]

    R_WF, p_WF = _frame(spec, base_pose, tcp_pose)
    # p_F = R_WF^T (p_W - p_WF) for every point of every step; as rows, (p_W - p_WF)^T R_WF: a batched matmul
    # (BLAS), about 10x faster than the same einsum on [256, 1200, 3].
    xyz_F = np.matmul(xyz_W - p_WF[:, None, :], R_WF)
    channels = [xyz_F, rgb.astype(np.float64) / 255.0, masks.astype(np.float64)]
    state = state_features(spec, qpos, qvel, base_pose, tcp_pose, goal_W)
    if spec.goal_cue_points:
        goal_F = state[:, -3:].astype(np.float64)
        channels.append(np.zeros((B, spec.num_points, 1)))
        G = spec.goal_cue_points
        direction = rng.normal(size=(B, G, 3))
        direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
        radius = GOAL_CUE_RADIUS_M * rng.uniform(size=(B, G, 1)) ** (1.0 / 3.0)  # uniform in the ball
        cue_xyz = goal_F[:, None, :] + radius * direction
        cue = [cue_xyz, np.broadcast_to(np.asarray(GOAL_CUE_RGB) / 255.0, (B, G, 3)),
               np.zeros((B, G, len(spec.mask_names))), np.ones((B, G, 1))]
        points = np.concatenate([np.concatenate(channels, -1), np.concatenate(cue, -1)], axis=1)
    else:
        points = np.concatenate(channels, -1)
    return points.astype(np.float32), state


def state_features(spec: FeatureSpec, qpos, qvel, base_pose, tcp_pose, goal_W) -> np.ndarray:
    """[B, state_dim] float32: qpos, qvel (unless ``spec.qvel`` is False) and (where the task has one) the goal
    in frame F; arguments as in :func:`batch_features`."""
    state = [np.asarray(qpos, dtype=np.float64)] + ([np.asarray(qvel, dtype=np.float64)] if spec.qvel else [])
    if spec.has_goal:
        if goal_W is None:
            raise ValueError("this policy was trained with a goal position; the observation has none")
        R_WF, p_WF = _frame(spec, base_pose, tcp_pose)
        state.append(np.einsum("bji,bj->bi", R_WF, np.asarray(goal_W, dtype=np.float64) - p_WF))
    return np.concatenate(state, -1).astype(np.float32)


def _frame(spec: FeatureSpec, base_pose, tcp_pose) -> tuple[np.ndarray, np.ndarray]:
    """R_WF [B, 3, 3] and p_WF [B, 3] of the points' frame F."""
    X_WF = pose7_to_matrix(base_pose if spec.point_frame == "base" else np.asarray(tcp_pose)[:, :7], normalize=True)
    return X_WF[:, :3, :3], X_WF[:, :3, 3]


def arrays_of_demo_obs(obs: dict, mask_names: tuple[str, ...], frame: str = "world") -> dict[str, np.ndarray]:
    """The raw arrays of :func:`batch_features` from observations in the demonstration layout
    (``baselines/demo_files.py``: ``{"pointcloud": {xyz, rgb, <mask>...}, "agent": {qpos, qvel, base_pose,
    tcp_pose}, "extra": {goal_pos}}``, every array with a leading batch axis). ``frame``: the frame of the
    stored points, ``"world"`` or ``"base"`` (then turned to the world with ``base_pose``)."""
    pc, agent = obs["pointcloud"], obs["agent"]
    missing = [m for m in mask_names if m not in pc]
    if missing:
        raise ValueError(f"the policy needs point-cloud masks {list(missing)}; the observation has "
                         f"{sorted(k for k in pc if k not in ('xyz', 'rgb'))}")
    xyz = np.asarray(pc["xyz"], dtype=np.float64)
    if frame == "base":
        X_WB = pose7_to_matrix(agent["base_pose"], normalize=True)
        xyz = np.matmul(xyz, np.swapaxes(X_WB[:, :3, :3], 1, 2)) + X_WB[:, None, :3, 3]
    elif frame != "world":
        raise ValueError(f"points are in frame {frame!r}; expected 'world' or 'base'")
    masks = (np.stack([np.asarray(pc[m], dtype=np.uint8) for m in mask_names], -1) if mask_names
             else np.zeros(xyz.shape[:2] + (0,), dtype=np.uint8))
    goal = obs.get("extra", {}).get("goal_pos")
    return {"xyz_W": xyz, "rgb": np.asarray(pc["rgb"], dtype=np.uint8), "masks": masks,
            "qpos": np.asarray(agent["qpos"]), "qvel": np.asarray(agent["qvel"]),
            "base_pose": np.asarray(agent["base_pose"]), "tcp_pose": np.asarray(agent["tcp_pose"]),
            "goal_W": None if goal is None else np.asarray(goal)}
