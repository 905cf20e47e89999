"""Grasp outcomes generated in simulation: the learned grasp scorer's training data.

A tool, like the evaluation harness: it drives the bundled PickObject env and reads its ground truth (the
object's pose, to replay it in a trial scene). Perception never imports it.

For each object of a split and a few episodes (seeds) of ``PickObject``:

1. the env is reset and observed exactly as a solver observes it (:class:`~handleit.harness.sim_robot.SimRobot`: the
   same camera, the fused, masked point cloud); the table height is estimated from the scene's points as the
   pick tree does;
2. candidates come from the analytic sampler (:func:`~handleit.perception.antipodal_grasps.sample_antipodal_grasps`
   through the ``"antipodal_6dof"`` predictor, as the learned predictor re-ranks them), plus perturbed copies
   (position jittered 1-2 cm, orientation 10-25 degrees) so that the data holds near misses too;
3. each candidate is tried physically by :class:`FloatingHandTrial`: a Panda hand without its arm (the hand
   and its two fingers from mani_skill's ``panda_v2.urdf``, moved by six stiff virtual joints), in a scene of
   its own with the env's table and the object at the observed episode's pose, the same density, friction
   and solver settings as the env: placed at the pregrasp, moved in along the approach, fingers closed as the
   env's controller closes them (-0.2 m/s velocity drive, 100 N), lifted and shaken. Label 1 when the object
   is still between the fingers, lifted with the hand;
4. the target's observed points are cropped around each candidate (:func:`~handleit.perception.grasp_scorer.grasp_crops`,
   in the gripper frame G) and written with the labels to an ``.npz``
   (:func:`~handleit.perception.grasp_scorer.save_grasp_dataset`).

Frames: W the world (z up, table top at z = 0), G the gripper's tool centre (:class:`~handleit.types.Grasp`:
z approach, y closing), H the Panda hand link (G is 103.4 mm along H's z). Units: metres, seconds, radians.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import sapien
from scipy.spatial.transform import Rotation

import handleit.envs
from handleit.envs.asset_cache import build_once, cache_dir
from handleit.envs.controllers import ControlConfig
from handleit.envs.mobile_panda import FINGER_FRICTION
from handleit.envs.object_generator import object_ids
from handleit.envs.pick_place import SOLVER_POSITION_ITERATIONS
from handleit.envs.rigid_object import RigidObjectAsset
from handleit.envs.robot_description import panda_arm
from handleit.envs.tabletop_env import SURFACE_FRICTION, TABLE_CENTER_XY_M, TABLE_HALF_SIZE_M
from handleit.harness.executor import Backend, InProcess, add_executor_arguments, backend_of_args, close_backend
from handleit.harness.sim_robot import SimRobot
from handleit.perception.antipodal_grasps import AntipodalGraspPredictor6DoF
from handleit.perception.tabletop_objects import estimate_support_height

HAND_TO_TCP_M = 0.1034  # panda_v2.urdf: panda_hand_tcp is this far along the hand link's z
FLOATING_HAND_VERSION = "2"
# The six virtual joints that carry the hand: x, y, z (prismatic), then yaw, pitch, roll (intrinsic z-y-x).
_VIRTUAL_JOINTS = (("x", "prismatic", "1 0 0"), ("y", "prismatic", "0 1 0"), ("z", "prismatic", "0 0 1"),
                   ("yaw", "revolute", "0 0 1"), ("pitch", "revolute", "0 1 0"), ("roll", "revolute", "1 0 0"))
# Near misses: an analytic candidate moved 1-2 cm and turned 10-25 degrees (both uniform, random directions).
PERTURB_POSITION_M = (0.01, 0.02)
PERTURB_ROTATION_RAD = (math.radians(10), math.radians(25))
_HAND_PARTS = ("panda_hand", "panda_leftfinger", "panda_rightfinger", "panda_hand_tcp")


# ---------------------------------------------------------------------------------------------- the hand


def floating_hand_urdf() -> Path:
    """Write (once, cached) and return a URDF of the Panda hand on six virtual joints.

    The hand, its fingers and the tool-centre link are copied from the stationary Panda's description (made
    from mani_skill's ``panda_v2.urdf``), collision geometry only; the fingers are independent (no mimic),
    as on the env's robot. A chain of massless-ish links with prismatic x, y, z and revolute yaw, pitch, roll
    joints (intrinsic z-y-x) carries the hand link from a root fixed at the world's origin.
    """
    src = panda_arm().urdf_path
    key = f"{src.parent.name}-v{FLOATING_HAND_VERSION}"

    def write(tmp: Path) -> None:
        robot = ET.parse(src).getroot()
        out = ET.Element("robot", name="floating_panda_hand")
        ET.SubElement(out, "link", name="float_root")
        parent = "float_root"
        for k, (name, kind, axis) in enumerate(_VIRTUAL_JOINTS):
            last = k == len(_VIRTUAL_JOINTS) - 1
            child = "panda_hand" if last else f"float_{name}"  # the last joint carries the hand itself
            if not last:  # light links: PhysX needs a mass; the stiff drives make it irrelevant
                inertial = ET.SubElement(ET.SubElement(out, "link", name=child), "inertial")
                ET.SubElement(inertial, "mass", value="0.05")
                ET.SubElement(inertial, "inertia", ixx="1e-5", iyy="1e-5", izz="1e-5", ixy="0", ixz="0", iyz="0")
            joint = ET.SubElement(out, "joint", name=f"float_{name}_joint", type=kind)
            ET.SubElement(joint, "parent", link=parent)
            ET.SubElement(joint, "child", link=child)
            ET.SubElement(joint, "axis", xyz=axis)
            lower, upper = (-2.0, 2.0) if kind == "prismatic" else (-4 * math.pi, 4 * math.pi)
            ET.SubElement(joint, "limit", lower=str(lower), upper=str(upper), effort="1e6", velocity="100")
            parent = child
        for elem in robot:
            if elem.tag == "link" and elem.get("name") in _HAND_PARTS:
                for visual in elem.findall("visual"):
                    elem.remove(visual)
                for mesh in elem.iter("mesh"):
                    mesh.set("filename", str(src.parent / mesh.get("filename")))
                out.append(elem)
            elif elem.tag == "joint" and elem.find("child").get("link") in _HAND_PARTS[1:]:
                for mimic in elem.findall("mimic"):
                    elem.remove(mimic)
                out.append(elem)
        ET.indent(out)
        ET.ElementTree(out).write(tmp / "floating_panda_hand.urdf", encoding="utf-8", xml_declaration=True)

    folder = build_once(cache_dir() / "robots" / f"floating_panda_hand-{key}", write)
    return folder / "floating_panda_hand.urdf"


@dataclass(frozen=True)
class TrialConfig:
    """How a grasp is tried (m, s, rad). The motions follow the pick tree: pregrasp 5 cm back along the
    approach, fingers pre-shaped 2 cm wider than the grasp, straight in, close, lift; then a shake."""

    sim_freq: int = 500  # the env's physics rate (Hz)
    control_freq: int = 100  # targets are updated at the env's control rate (Hz)
    pregrasp_m: float = 0.05  # behaviors.pick_nodes.PREGRASP_DISTANCE_M
    preshape_margin_m: float = 0.02  # behaviors.pick_trees.PRESHAPE_MARGIN_M
    approach_speed_mps: float = 0.1
    close_s: float = 0.35  # the fingers cross 4 cm at 0.2 m/s in 0.2 s, then press
    lift_m: float = 0.12
    lift_speed_mps: float = 0.2
    shake_s: float = 0.75  # three periods of 0.25 s: sway along x, along y, twist about z
    shake_m: float = 0.01  # peak acceleration 0.01 m * (2 pi * 4 Hz)^2 = 6.3 m/s^2
    shake_rad: float = math.radians(15)  # peak angular acceleration 165 rad/s^2
    # Success: the object rose with the hand (at most this much less than the lift) and the fingers did
    # not close on nothing.
    max_slip_m: float = 0.03
    min_opening_m: float = 0.002
    # The virtual joints' drives: stiff, so that the hand follows its targets under an object's weight.
    linear_drive: tuple[float, float, float] = (1e5, 2e3, 1e5)  # stiffness N/m, damping N s/m, force limit N
    angular_drive: tuple[float, float, float] = (1e4, 2e2, 1e4)  # N m/rad, N m s/rad, N m


@dataclass(frozen=True)
class TrialOutcome:
    """What one physical grasp trial did."""

    success: bool
    reason: str  # "held", "empty" (fingers closed on nothing), "dropped" (did not rise with the hand)
    rise_m: float  # how far the object's centre of mass rose (m)
    opening_m: float  # finger opening at the end (m)


class FloatingHandTrial:
    """A table, one object and a free-floating Panda hand in a physics-only SAPIEN scene (no arm, no camera).

    Args:
        asset: the object (its convex collision pieces and density, as the env loads it).
        config: the trial's motions and success rule.
        control: the env's controller settings (the fingers' velocity drive and speed).
    """

    def __init__(self, asset: RigidObjectAsset, config: TrialConfig | None = None,
                 control: ControlConfig | None = None):
        self.config = config = config or TrialConfig()
        self.control = control = control or ControlConfig()
        scene = sapien.Scene([sapien.physx.PhysxCpuSystem()])
        scene.set_timestep(1.0 / config.sim_freq)
        material = sapien.physx.PhysxMaterial(SURFACE_FRICTION, SURFACE_FRICTION, 0.0)
        table = scene.create_actor_builder()
        table.add_box_collision(half_size=TABLE_HALF_SIZE_M, material=material)
        table.initial_pose = sapien.Pose([*TABLE_CENTER_XY_M, -TABLE_HALF_SIZE_M[2]])
        table.build_static(name="table")
        self.scene, self.material = scene, material
        self.obj = self.body = None
        self.set_object(asset)

        loader = scene.create_urdf_loader()
        loader.fix_root_link = True
        self.hand = loader.load(str(floating_hand_urdf()))
        finger_material = sapien.physx.PhysxMaterial(FINGER_FRICTION, FINGER_FRICTION, 0.0)
        for link in self.hand.links:  # as envs.mobile_panda.MobilePanda: no gravity, rubber pads
            link.disable_gravity = True
            if "finger" in link.name:
                for shape in link.collision_shapes:
                    shape.set_physical_material(finger_material)
                    shape.set_patch_radius(0.1)
                    shape.set_min_patch_radius(0.1)
        joints = {j.name: j for j in self.hand.active_joints}
        self.virtual = [joints[f"float_{name}_joint"] for name, _, _ in _VIRTUAL_JOINTS]
        self.fingers = [joints["panda_finger_joint1"], joints["panda_finger_joint2"]]
        self._virtual_index = [self.hand.active_joints.index(j) for j in self.virtual]
        self._finger_index = [self.hand.active_joints.index(j) for j in self.fingers]
        for j, (_, kind, _) in zip(self.virtual, _VIRTUAL_JOINTS):
            j.set_drive_properties(*(config.linear_drive if kind == "prismatic" else config.angular_drive), "force")
        drive = control.finger_vel_drive
        for j in self.fingers:
            j.set_drive_properties(drive.stiffness, drive.damping, drive.force_limit, "force")
        self.sim_steps = 0

    def set_object(self, asset: RigidObjectAsset) -> None:
        """Replace the object (built as ``envs.rigid_object.load_rigid_object`` builds it, without the visual:
        the same convex pieces, density, surface material and solver iterations as the env's)."""
        if self.obj is not None:
            self.scene.remove_entity(self.obj)
        builder = self.scene.create_actor_builder()
        for path in asset.collision_paths:
            builder.add_convex_collision_from_file(str(path), material=self.material, density=asset.density_kg_m3)
        builder.initial_pose = sapien.Pose([0.0, 0.0, -10.0])  # out of the way until a trial places it
        self.obj = builder.build(name=asset.model_id)
        self.body = self.obj.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        if self.body is None or not self.body.collision_shapes:
            raise ValueError(f"object {asset.model_id!r}: PhysX could not build its collision from "
                             f"{[str(p) for p in asset.collision_paths]}")
        self.body.set_solver_position_iterations(SOLVER_POSITION_ITERATIONS)
        self.asset = asset

    # The hand link's pose as joint values: position, then intrinsic z-y-x Euler angles.
    @staticmethod
    def _joint_values(X_WH: np.ndarray) -> np.ndarray:
        return np.concatenate([X_WH[:3, 3], Rotation.from_matrix(X_WH[:3, :3]).as_euler("ZYX")])

    def _com_W(self) -> np.ndarray:
        return np.asarray((self.obj.pose * self.body.cmass_local_pose).p, dtype=np.float64)

    def _opening_m(self) -> float:
        q = self.hand.get_qpos()
        return float(q[self._finger_index[0]] + q[self._finger_index[1]])

    def _run(self, targets, finger_velocity: float) -> None:
        """Follow hand-link joint targets (one per control step), the fingers at ``finger_velocity`` (m/s)."""
        substeps = self.config.sim_freq // self.config.control_freq
        for j in self.fingers:
            j.set_drive_velocity_target(finger_velocity)
        for target in targets:
            for j, value in zip(self.virtual, target):
                j.set_drive_target(float(value))
            for _ in range(substeps):
                self.scene.step()
            self.sim_steps += substeps

    def try_grasp(self, X_WO: np.ndarray, X_WG: np.ndarray, width_m: float) -> TrialOutcome:
        """Try one grasp on the object at ``X_WO`` (its frame in the world, 4x4; it is put there at rest).

        Args:
            X_WO: the object's pose (the env's object entity pose), world.
            X_WG: the grasp's tool-centre pose, world (G: z approach, y closing).
            width_m: the grasp's opening (m); the fingers open ``preshape_margin_m`` wider, at most 8 cm.
        """
        cfg = self.config
        X_WO, X_WG = np.asarray(X_WO, dtype=np.float64), np.asarray(X_WG, dtype=np.float64)
        if X_WO.shape != (4, 4) or X_WG.shape != (4, 4) or not (np.isfinite(X_WO).all() and np.isfinite(X_WG).all()):
            raise ValueError(f"try_grasp: X_WO and X_WG must be finite 4x4 poses, got {X_WO.shape} and {X_WG.shape}")
        X_GH = np.eye(4)
        X_GH[2, 3] = -HAND_TO_TCP_M
        X_WH = X_WG @ X_GH
        approach_W = X_WG[:3, 2]
        q_grasp = self._joint_values(X_WH)
        dt = 1.0 / cfg.control_freq

        self.obj.set_pose(sapien.Pose(X_WO))
        self.body.set_linear_velocity(np.zeros(3))
        self.body.set_angular_velocity(np.zeros(3))
        com_start = self._com_W()
        q = np.zeros(self.hand.dof)
        q[self._virtual_index] = q_grasp
        q[self._virtual_index[:3]] -= cfg.pregrasp_m * approach_W
        finger_q = min(0.04, 0.5 * (float(width_m) + cfg.preshape_margin_m))
        q[self._finger_index] = finger_q
        self.hand.set_qpos(q.astype(np.float32))
        self.hand.set_qvel(np.zeros(self.hand.dof, dtype=np.float32))
        for j, value in zip(self.virtual, q[self._virtual_index]):
            j.set_drive_target(float(value))
            j.set_drive_velocity_target(0.0)

        # In along the approach, fingers holding their pre-shape.
        n = max(1, math.ceil(cfg.pregrasp_m / cfg.approach_speed_mps / dt))
        approach = [q_grasp - (1 - (k + 1) / n) * np.r_[cfg.pregrasp_m * approach_W, 0, 0, 0] for k in range(n)]
        self._run(approach, 0.0)
        # Close as the env's controller does ("close": -limit m/s, the drive's force limit presses).
        self._run([q_grasp] * round(cfg.close_s / dt), -self.control.finger_vel_limit_mps)
        if self._opening_m() < cfg.min_opening_m:
            return TrialOutcome(False, "empty", float(self._com_W()[2] - com_start[2]), self._opening_m())
        # Lift straight up, keeping the fingers closing.
        n = max(1, math.ceil(cfg.lift_m / cfg.lift_speed_mps / dt))
        up = np.r_[0.0, 0.0, 1.0, 0, 0, 0]
        self._run([q_grasp + (k + 1) / n * cfg.lift_m * up for k in range(n)], -self.control.finger_vel_limit_mps)
        rise = float(self._com_W()[2] - com_start[2])
        if rise < cfg.lift_m - cfg.max_slip_m:  # left behind already: no need to shake
            return TrialOutcome(False, "dropped", rise, self._opening_m())
        # Shake at the top: sway along world x, then y, then twist about the vertical, one period each. (All
        # three move single virtual joints: no Euler angle wraps or gimbal lock.)
        q_top = q_grasp + cfg.lift_m * up
        n = max(1, round(cfg.shake_s / 3 / dt))
        shake = []
        for joint, amplitude in ((0, cfg.shake_m), (1, cfg.shake_m), (3, cfg.shake_rad)):
            for k in range(n):
                target = q_top.copy()
                target[joint] += amplitude * math.sin(2 * math.pi * (k + 1) / n)
                shake.append(target)
        self._run(shake + [q_top] * 10, -self.control.finger_vel_limit_mps)
        rise = float(self._com_W()[2] - com_start[2])
        opening = self._opening_m()
        if opening < cfg.min_opening_m:
            return TrialOutcome(False, "empty", rise, opening)
        if rise < cfg.lift_m - cfg.max_slip_m:
            return TrialOutcome(False, "dropped", rise, opening)
        return TrialOutcome(True, "held", rise, opening)


# ---------------------------------------------------------------------------------------------- candidates


def perturb_grasp_poses(X_WG: np.ndarray, n: int, rng: np.random.Generator, position_m=PERTURB_POSITION_M,
                        rotation_rad=PERTURB_ROTATION_RAD) -> tuple[np.ndarray, np.ndarray]:
    """``n`` near misses of the given grasps: each a random one of ``X_WG`` ([M, 4, 4], world) moved by a
    uniform distance in ``position_m`` (m) in a random direction and turned by a uniform angle in
    ``rotation_rad`` about a random axis through its tool centre. Returns (poses [n, 4, 4], source index [n])."""
    X_WG = np.asarray(X_WG, dtype=np.float64)
    source = rng.integers(0, len(X_WG), n)
    out = X_WG[source].copy()
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    out[:, :3, 3] += rng.uniform(*position_m, (n, 1)) * direction
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    turn = Rotation.from_rotvec(rng.uniform(*rotation_rad, (n, 1)) * axis).as_matrix()
    out[:, :3, :3] = turn @ out[:, :3, :3]
    return out, source


# ---------------------------------------------------------------------------------------------- data sets


@dataclass
class GenerationConfig:
    """What :func:`generate_grasp_data` does (saved in the data set's ``meta``)."""

    split: str = "train"
    objects: int = 60  # the first N objects of the split (shapes cycle with the index: all shapes for N >= 7)
    views: int = 5  # episodes (object poses, seeds) per object, observed by the env's own camera
    seed: int = 0  # episode seeds are seed + 1000 * object index + view
    candidates: int = 100  # analytic candidates asked of the sampler (the learned predictor re-ranks 100)
    analytic_per_view: int = 100  # of them tried per view: the best ranked
    perturbed_per_view: int = 10  # near misses of random analytic candidates tried per view
    n_points: int = 256  # points per crop (grasp_crops)
    trial: dict = field(default_factory=lambda: asdict(TrialConfig()))


@dataclass(frozen=True)
class ViewJob:
    """One view (an episode of PickObject) of one object: the executor's job for grasp data."""

    object_index: int
    model_id: str
    view: int
    episode_seed: int


class GraspViewWorker:
    """Observes a view and tries its grasps (module docstring, steps 1-4); keeps its env, sampler and trial scene
    between views (one per worker of the executor). Returns the view's columns, or None when the view gave no
    target points or no candidate."""

    def __init__(self, config: GenerationConfig, ids: list[str]):
        self.config, self.ids = config, ids
        self.env = self.robot = self.sampler = self.trials = None

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    def __call__(self, job: ViewJob) -> dict | None:
        from handleit.perception.grasp_scorer import grasp_crops  # lazy: torch

        config = self.config
        if self.env is None:
            self.env = handleit.envs.make("PickObject", obs_mode="pointcloud", split=config.split, model_ids=self.ids)
            self.robot = SimRobot(self.env)
            self.sampler = AntipodalGraspPredictor6DoF(max_grasps=config.candidates)
        i, v, model_id, episode_seed = job.object_index, job.view, job.model_id, job.episode_seed
        obs = self.robot.reset(seed=episode_seed, options={"model_id": model_id})
        base = self.env.unwrapped
        X_WO = base.obj.pose.to_transformation_matrix()  # ground truth: the label simulator's input only
        target = obs.points[obs.masks["target"]]
        if len(target) < 5:
            return None
        scene = ~obs.masks["robot"] & ~obs.masks["target"]
        support_z = estimate_support_height(obs.points[scene], target)  # as the pick tree measures it
        grasps = self.sampler.predict(obs.points, obs.masks, table_z=support_z, seed=episode_seed)
        grasps = grasps[: config.analytic_per_view]
        if not grasps:
            return None
        rng = np.random.default_rng(episode_seed)
        X_analytic = np.stack([g.X_WG for g in grasps])
        X_perturbed, source = perturb_grasp_poses(X_analytic, config.perturbed_per_view, rng)
        poses = np.concatenate([X_analytic, X_perturbed])
        widths = np.array([g.width_m for g in grasps] + [grasps[k].width_m for k in source])
        if self.trials is None:
            self.trials = FloatingHandTrial(base.models[model_id], TrialConfig(**config.trial), base.control_config)
        elif self.trials.asset.model_id != model_id:
            self.trials.set_object(base.models[model_id])
        t0 = time.perf_counter()
        outcomes = [self.trials.try_grasp(X_WO, X, w) for X, w in zip(poses, widths)]
        trial_time_s = time.perf_counter() - t0
        na, npert = len(grasps), len(X_perturbed)
        labels = np.array([o.success for o in outcomes], dtype=np.uint8)
        columns = {
            "crops": grasp_crops(target, poses, config.n_points, seed=episode_seed), "labels": labels,
            "analytic_score": np.r_[[g.score for g in grasps], np.full(npert, np.nan)],
            "analytic_rank": np.r_[np.arange(na), np.full(npert, -1)],
            "perturbed": np.r_[np.zeros(na), np.ones(npert)].astype(np.uint8), "width_m": widths,
            "view": np.full(na + npert, config.views * i + v), "object_index": np.full(na + npert, i),
            "episode_seed": np.full(na + npert, episode_seed), "rise_m": np.array([o.rise_m for o in outcomes]),
            "reason": np.array([o.reason for o in outcomes]),
        }
        message = (f"{model_id} view {v}: {len(target)} target points, {na} analytic "
                   f"({int(labels[:na].sum())} held), {npert} perturbed ({int(labels[na:].sum())} held)")
        return {"columns": columns, "trial_time_s": trial_time_s, "n_trials": len(outcomes), "message": message}


def _lost_view(job: ViewJob, reason: str) -> dict:
    return {"error": reason}


def generate_grasp_data(config: GenerationConfig, out: str | Path | None = None, *, verbose: bool = False,
                        command: str | None = None, backend: Backend | None = None) -> dict:
    """Observe, sample, try and label grasps (see the module docstring); write them to ``out`` (.npz). The views
    run on ``backend`` (the harness's executor; default: this process); the data set holds them in view order
    whatever order they finish in.

    Returns a dict of arrays (``crops`` [M, n, 3] float32 in G, m; ``labels`` [M] uint8; per grasp
    ``analytic_score`` (NaN for a perturbed one), ``analytic_rank`` (-1 when perturbed), ``perturbed``,
    ``width_m``, ``view`` (a per-episode id), ``object_index``, ``episode_seed``, ``rise_m``, ``reason``) and
    ``meta`` (the configuration, counts and trial rate).
    """
    from handleit.perception.grasp_scorer import save_grasp_dataset  # lazy: torch

    ids = object_ids(config.split)
    if not 1 <= config.objects <= len(ids):
        raise ValueError(f"objects must be in [1, {len(ids)}] for split {config.split!r}, got {config.objects}")
    if config.views < 1 or config.analytic_per_view < 0 or config.perturbed_per_view < 0:
        raise ValueError("views must be at least 1, analytic_per_view and perturbed_per_view at least 0")
    ids = ids[: config.objects]
    jobs = [ViewJob(i, model_id, v, config.seed + 1000 * i + v) for i, model_id in enumerate(ids)
            for v in range(config.views)]
    results: dict[ViewJob, dict | None] = {}
    counts = {"trials": 0, "trial_time_s": 0.0}
    start = time.perf_counter()

    def on_result(job: ViewJob, result: dict | None) -> None:
        results[job] = result
        if result and "error" not in result:
            counts["trials"] += result["n_trials"]
            counts["trial_time_s"] += result["trial_time_s"]
            if verbose:
                print(f"{result['message']}; {counts['trials'] / max(counts['trial_time_s'], 1e-9):.1f} trials/s",
                      flush=True)
        elif result and verbose:
            print(f"{job.model_id} view {job.view}: lost ({result['error']})", flush=True)

    worker = GraspViewWorker(config, ids)
    try:
        (backend or InProcess()).run(jobs, worker, on_result, lost=_lost_view, max_retries=3)
    finally:
        worker.close()
    views = [results[job]["columns"] for job in jobs if results.get(job) and "error" not in results[job]]
    lost = [f"{job.model_id} view {job.view}" for job in jobs if results.get(job) and "error" in results[job]]
    if not views:
        raise RuntimeError("generate_grasp_data: no view gave a grasp candidate")
    data = {k: np.concatenate([view[k] for view in views]) for k in views[0]}
    data["crops"] = data["crops"].astype(np.float32)
    labels = data["labels"]
    n_trials, trial_time_s = counts["trials"], counts["trial_time_s"]
    meta = {
        "generator": "handleit.harness.grasp_data", "task": "PickObject", "command": command,
        "config": asdict(config), "model_ids": ids, "n_grasps": len(labels), "n_success": int(labels.sum()),
        "n_views": len(np.unique(data["view"])), "trials": n_trials, "trial_time_s": round(trial_time_s, 2),
        "trials_per_s": round(n_trials / max(trial_time_s, 1e-9), 2),
        "wall_time_s": round(time.perf_counter() - start, 1),
        "crop": {"n_points": config.n_points, "frame": "G", "units": "m"},
    }
    if lost:
        meta["lost_views"] = lost
    data["meta"] = meta
    if out is not None:
        extras = {k: v for k, v in data.items() if k not in ("crops", "labels", "meta")}
        save_grasp_dataset(out, data["crops"], labels, meta, **extras)
    return data


# ---------------------------------------------------------------------------------------------- evaluation


def average_precision(scores, labels) -> float:
    """Average precision of ranking by ``scores`` (higher first) for binary ``labels``: the mean precision at
    each positive's rank (NaN without positives)."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels).astype(bool)
    if not y.any():
        return float("nan")
    order = np.argsort(-s, kind="stable")
    hits = y[order]
    precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float(precision[hits].mean())


def ranking_report(success_probability, dataset) -> dict:
    """How well the learned probabilities rank physically tried grasps, against the analytic score.

    Args:
        success_probability: ``[M]`` the scorer's output on ``dataset.crops``.
        dataset: a :class:`~handleit.perception.grasp_scorer.GraspDataset` made by :func:`generate_grasp_data`
            (with ``analytic_score``, ``perturbed`` and ``view`` extras).
    Returns:
        ``accuracy`` (threshold 0.5) and ``ap`` of the learned probabilities on every trial; on the analytic
        candidates only: ``ap_learned`` and ``ap_analytic``, and per view (episode) the success of the top-1
        grasp by each ranking (``top1_learned``, ``top1_analytic``), of a random candidate (``top1_random``:
        the mean success) and of the best possible pick (``top1_oracle``: any candidate held); counts.
    """
    p = np.asarray(success_probability, dtype=np.float64)
    y = dataset.labels.astype(bool)
    ex = dataset.extras
    for name in ("analytic_score", "perturbed", "view"):
        if name not in ex:
            raise ValueError(f"ranking_report: the data set lacks {name!r} (make it with handleit.harness.grasp_data)")
    if p.shape != y.shape:
        raise ValueError(f"success_probability: expected shape {list(y.shape)}, got {list(p.shape)}")
    analytic = ex["perturbed"] == 0
    top1 = {"learned": [], "analytic": [], "random": [], "oracle": []}
    for view in np.unique(ex["view"][analytic]):
        k = np.flatnonzero(analytic & (ex["view"] == view))
        top1["learned"].append(y[k[np.argmax(p[k])]])
        top1["analytic"].append(y[k[np.argmax(ex["analytic_score"][k])]])
        top1["random"].append(y[k].mean())
        top1["oracle"].append(y[k].any())
    return {
        "n_grasps": len(y), "n_success": int(y.sum()), "n_analytic": int(analytic.sum()),
        "n_views": len(top1["learned"]),
        "accuracy": float(((p >= 0.5) == y).mean()), "ap": average_precision(p, y),
        "ap_learned": average_precision(p[analytic], y[analytic]),
        "ap_analytic": average_precision(ex["analytic_score"][analytic], y[analytic]),
        **{f"top1_{name}": float(np.mean(v)) for name, v in top1.items()},
    }


# ---------------------------------------------------------------------------------------------- commands


def add_commands(subparsers) -> None:
    """Add ``grasp-data`` and ``train-grasp-scorer`` to the ``handleit`` command line."""
    gen = subparsers.add_parser("grasp-data", help="generate labelled grasps: observe PickObject, sample, try "
                                "each grasp with a floating Panda hand, crop, write an .npz")
    defaults = GenerationConfig()
    gen.add_argument("--split", default=defaults.split, choices=["train", "test"])
    gen.add_argument("--objects", type=int, default=defaults.objects, help="the first N objects of the split")
    gen.add_argument("--views", type=int, default=defaults.views, help="episodes (object poses) per object")
    gen.add_argument("--seed", type=int, default=defaults.seed)
    gen.add_argument("--analytic-per-view", type=int, default=defaults.analytic_per_view,
                     help="best-ranked analytic candidates tried per view")
    gen.add_argument("--perturbed-per-view", type=int, default=defaults.perturbed_per_view,
                     help="near misses (1-2 cm, 10-25 degrees off an analytic candidate) tried per view")
    gen.add_argument("--out", required=True, help="the .npz to write")
    add_executor_arguments(gen, default_workers=1)
    gen.set_defaults(func=_grasp_data_command)

    train = subparsers.add_parser("train-grasp-scorer", help="train the learned grasp scorer on grasp data; "
                                  "report its ranking against the analytic score on held-out data")
    train.add_argument("--data", required=True, nargs="+", help="training data sets (.npz, concatenated)")
    train.add_argument("--test-data", nargs="*", default=[], help="held-out data sets (e.g. the test split)")
    train.add_argument("--out", required=True, help="the checkpoint to write")
    train.add_argument("--epochs", type=int, default=40)
    train.add_argument("--batch-size", type=int, default=64)
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--val-fraction", type=float, default=0.2)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--point-layers", help="PointNet per-point widths, e.g. 64,128,256 (the default)")
    train.add_argument("--head-layers", help="head widths, e.g. 128,64 (the default)")
    train.set_defaults(func=_train_command)


def _command_line() -> str:
    return " ".join(["handleit", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("handleit") else \
        " ".join(sys.argv)


def _grasp_data_command(args) -> int:
    config = GenerationConfig(split=args.split, objects=args.objects, views=args.views, seed=args.seed,
                              analytic_per_view=args.analytic_per_view, perturbed_per_view=args.perturbed_per_view)
    backend = backend_of_args(args, in_process_when_one=True)
    try:
        data = generate_grasp_data(config, args.out, verbose=True, command=_command_line(), backend=backend)
    finally:
        close_backend(backend)
    meta = data["meta"]
    print(f"wrote {args.out}: {meta['n_grasps']} grasps ({meta['n_success']} held, "
          f"{meta['n_success'] / meta['n_grasps']:.1%}) from {meta['n_views']} views; {meta['trials_per_s']} "
          f"trials/s, {meta['wall_time_s']} s in all")
    return 0


def _concatenate(paths):
    from handleit.perception.grasp_scorer import GraspDataset, load_grasp_dataset  # lazy: torch

    sets = [load_grasp_dataset(p) for p in paths]
    common = set.intersection(*(set(s.extras) for s in sets))
    extras = {}
    offset = 0
    views = []
    for s in sets:  # view ids stay distinct across files
        views.append(s.extras["view"] + offset if "view" in s.extras else np.zeros(len(s.labels), int))
        offset = int(views[-1].max()) + 1 if len(views[-1]) else offset
    for name in common:
        extras[name] = np.concatenate([s.extras[name] for s in sets])
    if "view" in common:
        extras["view"] = np.concatenate(views)
    return GraspDataset(np.concatenate([s.crops for s in sets]), np.concatenate([s.labels for s in sets]), extras,
                        {"files": [str(p) for p in paths], "meta": [s.meta for s in sets]}), sets


def _train_command(args) -> int:
    from handleit.perception.grasp_scorer import (  # lazy: torch
        predict_grasp_success,
        save_grasp_scorer,
        train_grasp_scorer,
    )

    data, sets = _concatenate(args.data)
    print(f"training on {len(data.labels)} grasps ({int(data.labels.sum())} held) from {len(sets)} file(s)")
    config = {name: [int(w) for w in value.split(",")] for name, value in
              (("point_layers", args.point_layers), ("head_layers", args.head_layers)) if value}
    start = time.perf_counter()
    model, history = train_grasp_scorer(data.crops, data.labels, args.epochs, batch_size=args.batch_size, lr=args.lr,
                                        val_fraction=args.val_fraction, seed=args.seed, config=config, verbose=True)
    best = history["best_epoch"]
    summary = {"train_s": round(time.perf_counter() - start, 1), "best_epoch": best,
               "val_accuracy": history["val_accuracy"][best] if history["val_accuracy"] else None,
               "val_balanced_accuracy": history["val_balanced_accuracy"][best] if history["val_accuracy"] else None}
    print(f"best epoch {best + 1}: validation accuracy {summary['val_accuracy']}, balanced "
          f"{summary['val_balanced_accuracy']}")
    report = None
    if args.test_data:
        test, _ = _concatenate(args.test_data)
        report = ranking_report(predict_grasp_success(model, test.crops), test)
        print("held-out: " + json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in report.items()}))
    # The data's provenance travels with the weights: how it was generated (command and configuration).
    generation = [{"command": s.meta.get("command"), "config": s.meta.get("config"), "n_grasps": s.meta.get("n_grasps"),
                   "n_success": s.meta.get("n_success"), "trials_per_s": s.meta.get("trials_per_s")} for s in sets]
    model.config["data_generation"] = generation
    meta = {"command": _command_line(), "data": [str(p) for p in args.data], "test_data": list(args.test_data),
            "history": history, "summary": summary, "held_out": report}
    path = save_grasp_scorer(model, args.out, meta)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


def main(argv=None) -> int:
    """``python -m handleit.harness.grasp_data grasp-data ...`` or ``... train-grasp-scorer ...``."""
    parser = argparse.ArgumentParser(prog="python -m handleit.harness.grasp_data", description=__doc__.splitlines()[0])
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
