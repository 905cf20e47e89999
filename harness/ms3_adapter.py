"""The robot interface over ManiSkill3 environments: the toolkit's trees on tasks its authors did not write.

``ManiSkill3Robot`` implements :class:`~handleit.types.RobotInterface` over a ManiSkill3 (``mani_skill``
3.0.1) env with one sub-scene on CPU physics (``sim_backend="physx_cpu"``), rendering on the process's one
render device (``envs.render_setup.render_device_name``: ``"cpu"`` without a GPU), ``obs_mode="pointcloud"``
and the Panda's ``pd_joint_vel`` controller. What the solver sees comes only from
ManiSkill3's public observation:

- points: ``obs["pointcloud"]["xyzw"]`` (ManiSkill3 fuses its cameras in the *world* frame; ``w == 0``
  marks pixels that saw no geometry, dropped here), ``rgb`` and per-point ``segmentation`` ids;
- masks from those ids: ``robot`` (the robot's links), ``table`` and ``ground`` (the scene builder's
  actors, so that consumers drop them by label, never by height), ``objects`` (every other labelled
  point), and the task's named actors (:data:`TASK_ACTORS`: ``target`` = the object to pick,
  ``place_target`` = the object to place it on). Only the actors' segmentation *ids* are read, never
  their poses;
- proprioception from ``obs["agent"]`` (``qpos``, ``qvel``), the tool centre from
  ``obs["extra"]["tcp_pose"]``, the goal position from ``obs["extra"]["goal_pos"]`` where the task gives
  one (``Observation.goal_W``), and the robot's root pose (robot state, fixed on these tasks) as ``X_WB``.

Privileged entries of the observation (``extra.is_grasped``, object poses in ``state`` modes) are not
passed on. ``info["success"]`` of the last step is kept in :attr:`ManiSkill3Robot.info` for the evaluation
harness only.

Episodes and success, as ManiSkill3 evaluates them by default: its env *terminates* the episode at the
first step where ``info["success"]`` is true (``BaseEnv.step``; :class:`CPUGymWrapper` with
``ignore_terminations=False``), so the success recorded at the end of an episode is ManiSkill3's
``success_once``. ManiSkill3 tasks have no object splits: the "test" split uses seeds ``seed + i`` (the
harness's seeds) and the "train" split the same env with seeds offset by :data:`TRAIN_SEED_OFFSET`, so
that episodes used to train never repeat the evaluation's.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from handleit.control.actions import normalize_velocity
from handleit.envs.render_setup import render_device_name  # the device bundled envs render on
from handleit.poses import pose7_to_matrix
from handleit.types import Command, Observation, RobotModel

TASK_PREFIX = "ms3:"  # harness task names: "ms3:PickCube-v1"
SPLITS = ("train", "test")
TRAIN_SEED_OFFSET = 1_000_000  # "train" episode i uses seed + TRAIN_SEED_OFFSET + i; "test" uses seed + i
CONTROL_MODE = "pd_joint_vel"
SIDE = "arm"  # the one arm's name in RobotModel and Command.gripper

# Task id -> mask name -> the env attribute holding that actor (e.g. env.unwrapped.cube).
TASK_ACTORS: dict[str, dict[str, str]] = {
    "PickCube-v1": {"target": "cube"},
    "StackCube-v1": {"target": "cubeA", "place_target": "cubeB"},
}

_ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
_FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
_TCP_LINK = "panda_hand_tcp"


# ----------------------------------------------------------------------------------------------------
# Task names, seeds, env construction
# ----------------------------------------------------------------------------------------------------
def is_ms3_task(task: str) -> bool:
    """Whether a harness task name names a ManiSkill3 env (``"ms3:<env id>"``)."""
    return task.startswith(TASK_PREFIX)


def ms3_env_id(task: str) -> str:
    """The ManiSkill3 env id of ``"ms3:<env id>"``; ``ValueError`` when it is not a registered ManiSkill3 env."""
    if not is_ms3_task(task):
        raise ValueError(f"{task!r} is not a ManiSkill3 task; write it as '{TASK_PREFIX}<env id>', "
                         f"e.g. '{TASK_PREFIX}PickCube-v1'")
    env_id = task[len(TASK_PREFIX):]
    import mani_skill.envs  # noqa: F401  lazy: mani_skill (3 s to import); registers its envs
    from mani_skill.utils.registration import REGISTERED_ENVS  # lazy: mani_skill

    if env_id not in REGISTERED_ENVS:
        raise ValueError(f"unknown ManiSkill3 env {env_id!r} in task {task!r}; e.g. "
                         f"{', '.join(TASK_PREFIX + t for t in TASK_ACTORS)}")
    return env_id


def episode_seeds(split: str, episodes: int, seed: int = 0) -> list[int]:
    """The env seeds of a split's episodes: ``seed + i`` ("test"), ``seed + TRAIN_SEED_OFFSET + i`` ("train")."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for a ManiSkill3 task; choose one of {', '.join(SPLITS)}")
    offset = TRAIN_SEED_OFFSET if split == "train" else 0
    return [seed + offset + i for i in range(episodes)]


def make_env(task: str, max_episode_steps: int | None = None, obs_mode: str = "pointcloud",
             render_mode: str | None = None, **kwargs):
    """A ManiSkill3 env for ``task`` (``"ms3:<id>"`` or the bare id) on the CPU backends, one sub-scene,
    the ``pd_joint_vel`` controller, unbatched numpy in and out (ManiSkill3's :class:`CPUGymWrapper`, which
    ends an episode at its first success). ``kwargs`` go to ``gym.make`` (e.g. ``sensor_configs``)."""
    from mani_skill.utils.wrappers.gymnasium import CPUGymWrapper  # lazy: mani_skill

    env_id = ms3_env_id(task if is_ms3_task(task) else TASK_PREFIX + task)
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = int(max_episode_steps)
    env = gym.make(env_id, num_envs=1, obs_mode=obs_mode, control_mode=CONTROL_MODE, render_mode=render_mode,
                   sim_backend="physx_cpu", render_backend=render_device_name(), **kwargs)
    return CPUGymWrapper(env)


# ----------------------------------------------------------------------------------------------------
# The robot model
# ----------------------------------------------------------------------------------------------------
def robot_model_of(env) -> RobotModel:
    """The planners' view of a ManiSkill3 Panda env: the agent's own URDF and SRDF (``panda_v2``, or
    ``panda_v3`` with the hand camera; the files ManiSkill3's motion planner uses), the active joints in qpos order, arm velocity limits of the ``pd_joint_vel``
    controller (rad/s) and the URDF's finger velocity limits (m/s). No base joints: the Panda is fixed."""
    from mani_skill.agents.robots.panda import Panda  # lazy: mani_skill

    base = env.unwrapped
    agent = base.agent
    if not isinstance(agent, Panda):  # "panda", or "panda_wristcam" (StackCube-v1's: a camera on the hand)
        raise TypeError(f"ManiSkill3Robot drives the Panda; this env's robot is {agent.uid!r}")
    if base.control_mode != CONTROL_MODE:
        raise ValueError(f"ManiSkill3Robot drives the {CONTROL_MODE} controller; the env uses {base.control_mode!r}")
    urdf_path = Path(agent.urdf_path)
    srdf_path = urdf_path.with_suffix(".srdf")
    if not srdf_path.exists():
        raise FileNotFoundError(f"no SRDF beside {urdf_path}: planners need one")
    joint_names = tuple(j.name for j in agent.robot.get_active_joints())
    missing = [n for n in _ARM_JOINTS + _FINGER_JOINTS if n not in joint_names]
    if missing:
        raise ValueError(f"the robot lacks the Panda joints {missing}")
    limits = np.asarray(agent.robot.get_qlimits(), dtype=np.float64).reshape(len(joint_names), 2)
    arm = agent.controller.controllers["arm"].config
    velocity = np.zeros(len(joint_names))
    urdf_velocity = _urdf_velocity_limits(urdf_path)
    for i, name in enumerate(joint_names):
        velocity[i] = min(abs(float(arm.lower)), abs(float(arm.upper))) if name in _ARM_JOINTS else urdf_velocity[name]
    return RobotModel(
        urdf_path=urdf_path,
        srdf_path=srdf_path,
        joint_names=joint_names,
        joint_limits=limits,
        velocity_limits=velocity,
        base_joint_names=(),
        arm_joint_names={SIDE: _ARM_JOINTS},
        finger_joint_names={SIDE: _FINGER_JOINTS},
        tcp_link_names={SIDE: _TCP_LINK},
        base_link_name=agent.robot.get_links()[0].name,
        gripper_max_opening_m=float(sum(limits[joint_names.index(n), 1] for n in _FINGER_JOINTS)),
        control_dt_s=1.0 / base.control_freq,
    )


def _urdf_velocity_limits(urdf_path: Path) -> dict[str, float]:
    """Joint name -> the URDF's ``<limit velocity=...>`` (m/s or rad/s)."""
    limits = {}
    for joint in ET.parse(urdf_path).getroot().iter("joint"):
        limit = joint.find("limit")
        if limit is not None and "velocity" in limit.attrib:
            limits[joint.attrib["name"]] = float(limit.attrib["velocity"])
    return limits


# ----------------------------------------------------------------------------------------------------
# The robot interface
# ----------------------------------------------------------------------------------------------------
class ManiSkill3Robot:
    """A :class:`~handleit.types.RobotInterface` over a ManiSkill3 Panda env (see the module docstring).

    Args:
        env: a ManiSkill3 env from :func:`make_env` (or any ``CPUGymWrapper``-wrapped ManiSkill3 env with
            ``obs_mode="pointcloud"``, ``control_mode="pd_joint_vel"``, one sub-scene).
        actors: mask name -> env attribute of the actor it labels; defaults to :data:`TASK_ACTORS` of the
            env's id (none for other tasks: their objects are still in the ``objects`` mask).
    """

    def __init__(self, env, actors: dict[str, str] | None = None):
        base = env.unwrapped
        if base.obs_mode != "pointcloud":
            raise ValueError(f"ManiSkill3Robot needs obs_mode='pointcloud', the env has {base.obs_mode!r}")
        if base.num_envs != 1:
            raise ValueError(f"ManiSkill3Robot drives one sub-scene; the env has num_envs={base.num_envs}")
        self.env = env
        self.env_id = env.spec.id if env.spec is not None else type(base).__name__
        self.actors = dict(TASK_ACTORS.get(self.env_id, {}) if actors is None else actors)
        self.model = robot_model_of(env)
        m = self.model
        self._arm = m.index(m.arm_joint_names[SIDE])
        self._fingers = m.index(m.finger_joint_names[SIDE])
        controllers = base.agent.controller.controllers
        if list(controllers) != ["arm", "gripper"]:
            raise ValueError(f"expected the Panda's arm and gripper controllers, got {list(controllers)}")
        arm, gripper = controllers["arm"].config, controllers["gripper"].config
        self._arm_range = (float(arm.lower), float(arm.upper))  # rad/s at action -1 and +1
        self._finger_range = (float(gripper.lower), float(gripper.upper))  # finger q (m) at action -1 and +1
        self._gripper_command: Any = "hold"
        self._gripper_action = 0.0
        self._segment_ids: dict[str, np.ndarray] = {}
        self._X_WB = np.eye(4)
        self._obs: dict[str, Any] | None = None
        self.info: dict[str, Any] = {}  # the env's last info (ground truth: for evaluation only)
        self.steps = 0
        self.done = False

    # ------------------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None) -> Observation:
        """Reset the env with ``seed``; ``options`` go to ManiSkill3's reset (the harness's ``model_id``,
        meaningless here, is dropped)."""
        options = {k: v for k, v in (options or {}).items() if k != "model_id"}
        self._obs, self.info = self.env.reset(seed=seed, options=options)
        self.steps, self.done = 0, False
        self._segment_ids = self._label_ids()  # a reconfiguring reset may renumber the actors
        raw_pose = np.asarray(self.env.unwrapped.agent.robot.pose.raw_pose).reshape(-1)[:7]
        self._X_WB = pose7_to_matrix(raw_pose, normalize=True)  # float32: normalized, as SAPIEN's Pose does
        self._gripper_command = "hold"
        self._gripper_action = self._finger_action(float(np.mean(self._obs["agent"]["qpos"][self._fingers])))
        return self.observe()

    def _label_ids(self) -> dict[str, np.ndarray]:
        """Mask name -> the segmentation ids it covers (ids of links and actors, never their poses)."""
        base = self.env.unwrapped
        ids = {"robot": [int(link.per_scene_id) for link in base.agent.robot.get_links()]}
        names = {i: getattr(obj, "name", "") for i, obj in base.segmentation_id_map.items()}
        scene = getattr(base, "table_scene", None)
        for mask, attr, match in (("table", "table", lambda n: n.startswith("table")),
                                  ("ground", "ground", lambda n: n == "ground")):
            actor = getattr(scene, attr, None)
            ids[mask] = ([int(actor.per_scene_id)] if actor is not None
                         else [i for i, n in names.items() if match(n)])
        for mask, attr in self.actors.items():
            actor = getattr(base, attr, None)
            if actor is None:
                raise ValueError(f"{self.env_id} has no actor {attr!r} for mask {mask!r}")
            ids[mask] = [int(i) for i in np.asarray(actor.per_scene_id).reshape(-1)]
        return {k: np.asarray(v, dtype=np.int64) for k, v in ids.items()}

    def observe(self) -> Observation:
        """The latest observation, points in the world frame (see the module docstring)."""
        if self._obs is None:
            raise RuntimeError("call reset() first")
        o = self._obs
        pc, agent, extra = o["pointcloud"], o["agent"], o.get("extra", {})
        seen = pc["xyzw"][:, 3] > 0.5  # w == 0: the pixel saw nothing
        segmentation = pc["segmentation"].reshape(-1)[seen]
        masks = {name: np.isin(segmentation, ids) for name, ids in self._segment_ids.items()}
        masks["objects"] = (segmentation > 0) & ~(masks["robot"] | masks["table"] | masks["ground"])
        goal = extra.get("goal_pos")
        return Observation(
            time_s=self.steps * self.model.control_dt_s,
            points=np.ascontiguousarray(pc["xyzw"][seen, :3], dtype=np.float32),
            colors=np.ascontiguousarray(pc["rgb"][seen], dtype=np.uint8),
            masks=masks,
            frame="world",
            joint_names=self.model.joint_names,
            qpos=np.asarray(agent["qpos"], dtype=np.float64),
            qvel=np.asarray(agent["qvel"], dtype=np.float64),
            X_WB=self._X_WB.copy(),
            X_WT={SIDE: pose7_to_matrix(np.asarray(extra["tcp_pose"], dtype=np.float64), normalize=True)},
            goal_W=None if goal is None else np.asarray(goal, dtype=np.float64).reshape(3),
        )

    # ------------------------------------------------------------------------------------------------
    def action_of(self, command: Command) -> np.ndarray:
        """ManiSkill3's ``pd_joint_vel`` action for a command: 7 arm velocities (rad/s) normalized to
        [-1, 1] over the controller's range (clipped, as ManiSkill3 clips), then one gripper value in
        [-1, 1] over the finger position range (ManiSkill3's ``[-0.01, 0.04]`` m per finger: -1 squeezes
        past closed, +1 is fully open).

        Gripper commands (``command.gripper[SIDE]``; a missing entry repeats the last one): ``"open"``,
        ``"close"``, ``"hold"`` (keep the fingers where they were when the hold began, as the bundled envs'
        zero finger velocity does), or an opening (m, between the fingers)."""
        m = self.model
        if command.normalized_qvel is not None:  # a bundled env's action layout: not ManiSkill3's pd_joint_vel
            raise ValueError("ManiSkill3Robot drives ManiSkill3's pd_joint_vel controller; a command's "
                             "normalized_qvel (the bundled envs' normalized_joint_vel action) cannot be applied")
        qvel = np.asarray(command.qvel, dtype=np.float64)
        if qvel.shape != (len(m.joint_names),):
            raise ValueError(f"command.qvel has shape {qvel.shape}, expected ({len(m.joint_names)},) "
                             f"for joints {m.joint_names}")
        bad = [m.joint_names[i] for i in np.flatnonzero(~np.isfinite(qvel))]
        if bad:
            raise ValueError(f"command.qvel is NaN or inf for {bad}")
        unknown = set(command.gripper) - {SIDE}
        if unknown:
            raise ValueError(f"unknown gripper side(s) {sorted(unknown)}; this robot has one: {SIDE!r}")
        gripper = command.gripper.get(SIDE, self._gripper_command)
        if isinstance(gripper, str):
            if gripper == "open":
                self._gripper_action = 1.0
            elif gripper == "close":
                self._gripper_action = -1.0
            elif gripper == "hold":
                if self._gripper_command != "hold":
                    q = float(np.mean(self._obs["agent"]["qpos"][self._fingers]))
                    self._gripper_action = self._finger_action(q)
            else:
                raise ValueError(f"unknown gripper command {gripper!r}; choose 'open', 'close', 'hold' or an opening (m)")
        else:
            opening = float(gripper)
            if not np.isfinite(opening) or opening < 0:
                raise ValueError(f"gripper opening must be a finite width >= 0 m, got {gripper!r}")
            self._gripper_action = self._finger_action(opening / len(self._fingers))
        self._gripper_command = gripper
        arm = normalize_velocity(qvel[self._arm], *self._arm_range)
        return np.append(arm, self._gripper_action).astype(np.float32)

    def _finger_action(self, finger_q_m: float) -> float:
        """The gripper action in [-1, 1] that drives each finger to ``finger_q_m`` (m from the centre line)."""
        return float(normalize_velocity(finger_q_m, *self._finger_range))  # the same affine map, for positions

    def act(self, command: Command) -> None:
        if self._obs is None:
            raise RuntimeError("call reset() first")
        if self.done:
            raise RuntimeError("the episode has ended; call reset()")
        self._obs, _, terminated, truncated, self.info = self.env.step(self.action_of(command))
        self.steps += 1
        self.done = bool(terminated or truncated)

    @property
    def success(self) -> bool:
        """ManiSkill3's ``info["success"]`` after the last step (evaluation only)."""
        return bool(self.info.get("success", False))
