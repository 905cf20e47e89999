"""The robot interface over a bundled environment: what the behavior trees drive in simulation.

``SimRobot`` turns env observations into :class:`~handleit.types.Observation` and
:class:`~handleit.types.Command` into the env's normalized joint-velocity action (Let's Handle It (arXiv 2202.11792)
footnote 2). Success flags from the env (ground truth) stay here, for the evaluation harness; they never reach a solver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from handleit.control.actions import gripper_velocity, normalize_velocity, saturated_velocity, world_to_base_velocity
from handleit.poses import pose7_to_matrix
from handleit.types import Command, Observation, RobotModel


def robot_model_of(env) -> RobotModel:
    """The planners' view of a bundled env's robot (description files, joint groups, velocity limits)."""
    base = env.unwrapped
    if base.control_mode != "normalized_joint_vel":
        raise ValueError(f"SimRobot drives the normalized_joint_vel controller; the env uses {base.control_mode!r}")
    robot, desc, cfg = base.robot, base.description, base.control_config
    limits = np.zeros(robot.dof)
    if len(robot.base_index):  # a stationary robot (the tabletop tasks) has no base joints
        limits[robot.base_index] = cfg.base_vel_limits
    for side in robot.sides:
        limits[robot.arm_index[side]] = cfg.arm_vel_limit_radps
        limits[robot.finger_index[side]] = cfg.finger_vel_limit_mps
    return RobotModel(
        urdf_path=desc.urdf_path,
        srdf_path=desc.srdf_path,
        joint_names=robot.joint_names,
        joint_limits=robot.qlimits.copy(),
        velocity_limits=limits,
        base_joint_names=desc.base_joint_names,
        arm_joint_names={s: desc.arm_joint_names(s) for s in robot.sides},
        finger_joint_names={s: desc.finger_joint_names(s) for s in robot.sides},
        tcp_link_names={s: desc.tcp_link_name(s) for s in robot.sides},
        base_link_name=desc.base_link_name,
        control_dt_s=1.0 / base.control_freq,
        body_half_extents_m=_body_half_extents_m(robot),
        drive_time_constants_s=drive_time_constants_s(robot.articulation),
        hand_camera_sides=tuple(s for s in robot.sides
                                if any(c.mount == desc.hand_link_name(s) for c in base.camera_configs)),
    )


def drive_time_constants_s(articulation) -> np.ndarray:
    """``[dof]`` each active joint's velocity lag (s), for latency compensation (control/latency.py).

    A velocity-driven prismatic PhysX joint with no stiffness is a first-order lag, ``tau = m / D``: the mass it
    carries over its drive's damping. On the mobile Panda's base that gives 34 ms (34.0 kg over 1000 N s/m),
    against a step response measured at 33 ms (the dual-arm robot: 51 ms and 50 ms). Revolute joints get 0
    (taken as immediate): their measured step responses are not first-order here (the base's yaw reaches 74 % of a
    command in one 10 ms step and the rest slowly; the arm joints, 1-10 ms), and at their speeds a lag of that size
    moves the hand by millimetres, where the base's moves it by centimetres."""
    joints = articulation.get_active_joints()
    taus = np.zeros(len(joints))
    for i, joint in enumerate(joints):
        damping = float(np.asarray(joint.damping).ravel()[0])
        if joint.type != "prismatic" or damping <= 0:
            continue
        mass, stack = 0.0, [joint.child_link]
        while stack:  # the child link and everything it carries
            link = stack.pop()
            mass += float(link.mass)
            stack.extend(link.children)
        taus[i] = (mass + float(np.asarray(joint.armature).ravel()[0])) / damping
    return taus


def _body_half_extents_m(robot) -> tuple[float, float] | None:
    """Footprint half extents (m, base frame x and y) of the link the torso-height joint moves: the mobile
    Panda's torso column, a box reaching the floor. None for a robot without a base."""
    if len(robot.base_index) < 4:
        return None
    torso = robot.joints[robot.base_index[3]].child_link
    half = np.zeros(2)
    for shape in torso.collision_shapes:
        if not hasattr(shape, "half_size"):
            continue
        corners = np.array([[x, y, 0.0] for x in (-1, 1) for y in (-1, 1)]) * np.asarray(shape.half_size)
        X = shape.local_pose.to_transformation_matrix()
        half = np.maximum(half, np.abs(corners @ X[:3, :3].T + X[:3, 3])[:, :2].max(axis=0))
    return None if not half.any() else (float(half[0]), float(half[1]))


def _entity_prompts(extra: dict[str, Any], kind: str) -> dict[str, np.ndarray]:
    """The per-entity prompts of ``extra`` (keys ``<entity>_prompt_<kind>``, ``kind`` "point" or "box"; the
    drawer's repeated as ``target_prompt_<kind>`` is not an entity): entity -> array (world, m)."""
    suffix = f"_prompt_{kind}"
    return {key[: -len(suffix)]: np.asarray(value, dtype=np.float64) for key, value in extra.items()
            if key.endswith(suffix) and key != f"target{suffix}"}


class SimRobot:
    """A :class:`~handleit.types.RobotInterface` over a handleit env in ``pointcloud`` mode."""

    def __init__(self, env, prompt: str = "box", sim_masks: bool = True):
        """``prompt``: what the operator gives to name the target, ``Observation.target_prompt_W``: "box" (the
        env's ``target_prompt_box``), "point" (``target_prompt_point``) or "none".
        ``sim_masks``: hand on the simulator's segmentation masks (for the ``simulator`` segmenter, the
        reference); False gives observations with no masks at all, as a real robot's sensors do."""
        if env.unwrapped.obs_mode != "pointcloud":
            raise ValueError(f"SimRobot needs obs_mode='pointcloud', the env has {env.unwrapped.obs_mode!r}")
        if prompt not in ("box", "point", "none"):  # obs["extra"]["target_prompt_<prompt>"], or no prompt
            raise ValueError(f"unknown prompt {prompt!r}; choose one of box, point, none")
        self.prompt = prompt
        self.sim_masks = bool(sim_masks)
        self.env = env
        self.model = robot_model_of(env)
        m = self.model
        self._has_base = len(m.base_joint_names) > 0  # the tabletop Panda has none
        if self._has_base:
            self._base_xy = m.index(m.base_joint_names[:2])
            self._yaw = int(m.index(m.base_joint_names[2:3])[0])
        self._fingers = {s: m.index(n) for s, n in m.finger_joint_names.items()}
        self._gripper_state = {s: "hold" for s in m.finger_joint_names}
        self._obs: dict[str, Any] | None = None
        self.info: dict[str, Any] = {}  # the env's last info (ground truth: for evaluation only)
        self.steps = 0
        self.done = False

    def reset(self, seed: int | None = None, options: dict | None = None) -> Observation:
        self._obs, self.info = self.env.reset(seed=seed, options=options)
        self.steps, self.done = 0, False
        self._gripper_state = {s: "hold" for s in self._gripper_state}
        return self.observe()

    def observe(self) -> Observation:
        if self._obs is None:
            raise RuntimeError("call reset() first")
        o = self._obs
        pc, agent = o["pointcloud"], o["agent"]
        valid = pc["valid"]
        base = self.env.unwrapped
        extra, prompt_key = o.get("extra", {}), f"target_prompt_{self.prompt}"
        return Observation(
            time_s=self.steps * self.model.control_dt_s,
            points=pc["xyz"][valid],
            colors=pc["rgb"][valid],
            masks={name: pc[name][valid] for name in base.mask_names} if self.sim_masks else {},
            frame=pc["frame"],
            joint_names=self.model.joint_names,
            qpos=agent["qpos"].astype(np.float64),
            qvel=agent["qvel"].astype(np.float64),
            X_WB=pose7_to_matrix(agent["base_pose"]),
            X_WT={s: pose7_to_matrix(agent["tcp_pose"][7 * i: 7 * i + 7]) for i, s in enumerate(base.robot.sides)},
            goal_W=np.asarray(o["extra"]["goal_pos"], dtype=np.float64) if "goal_pos" in o.get("extra", {}) else None,
            target_prompt_W=np.asarray(extra[prompt_key], dtype=np.float64) if prompt_key in extra else None,
            prompts_W=_entity_prompts(extra, self.prompt),
            sensor_origins=np.asarray(pc["sensor_origins"], dtype=np.float64) if "sensor_origins" in pc else None,
            sensor_index=pc["sensor_index"][valid] if "sensor_index" in pc else None,
        )

    def action_of(self, command: Command) -> np.ndarray:
        """The env's normalized action for a command: x/y velocities to the base frame, grippers to fingers;
        a command's ``normalized_qvel`` is that action already and passes unchanged (after checks)."""
        m = self.model
        if command.normalized_qvel is not None:
            action = np.asarray(command.normalized_qvel, dtype=np.float32)
            if action.shape != (len(m.joint_names),):
                raise ValueError(f"command.normalized_qvel has shape {action.shape}, expected ({len(m.joint_names)},)")
            if not np.all(np.isfinite(action)):
                raise ValueError("command.normalized_qvel contains NaN or inf")
            return action
        qvel = np.asarray(command.qvel, dtype=np.float64).copy()
        if qvel.shape != (len(m.joint_names),):
            raise ValueError(f"command.qvel has shape {qvel.shape}, expected ({len(m.joint_names)},)")
        if not np.all(np.isfinite(qvel)):
            raise ValueError("command.qvel contains NaN or inf")
        if self._has_base:
            yaw = float(self._obs["agent"]["qpos"][self._yaw])
            # The planar velocity scaled as a whole, so that clipping each axis does not bend its direction.
            qvel = saturated_velocity(qvel, m.velocity_limits, self._base_xy, yaw)
            qvel[self._base_xy] = world_to_base_velocity(qvel[self._base_xy], yaw)
        for side, index in self._fingers.items():
            self._gripper_state[side] = command.gripper.get(side, self._gripper_state[side])
            qvel[index] = gripper_velocity(self._gripper_state[side], m.velocity_limits[index[0]], len(index),
                                           finger_q_m=self._obs["agent"]["qpos"][index])
        return normalize_velocity(qvel, -m.velocity_limits, m.velocity_limits).astype(np.float32)

    def act(self, command: Command) -> None:
        if self.done:
            raise RuntimeError("the episode has ended; call reset()")
        self._obs, _, terminated, truncated, self.info = self.env.step(self.action_of(command))
        self.steps += 1
        self.done = bool(terminated or truncated)
