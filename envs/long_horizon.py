"""The scene of the long-horizon tasks (TidyIntoDrawer, SetTable): a drawer cabinet, a table and an object, a
single-arm mobile Panda driving between them, real grasping. Goals are conjunctions of predicates.

After Habitat 2.0's chained home tasks ("Habitat 2.0: Training Home Assistants to Rearrange their Habitat",
arXiv 2106.14405, Sec. 5: TidyHouse, SetTable), without its "abstracted grasping" (an object within 15 cm snaps
into the gripper): here the fingers hold the object by contact and friction, as in every handleit task. After
iGibson 2.0 ("iGibson 2.0: Object-Centric Simulation for Robot Learning of Everyday Household Tasks", arXiv
2108.03272, Sec. 3): a task's goal and its initial state are predicates over the scene's entities (shared
vocabulary: ``handleit/predicates.py``; entities ``drawer``, ``object``, ``table``); the initial state is
sampled from them (``envs/initial_states.py``) and the env evaluates them on simulator state
(``envs/predicate_truth.py``), for success and evaluation only.

Per episode (from the reset seed):

- a cabinet-object pair of the split (``envs/long_horizon_models.py``; ``options["model_id"]``, e.g.
  ``"drawer-train-003+object-train-012"``) and a target drawer among those that hold the object
  (``options["target_link"]``); joint friction U(0.05, 0.15) and damping U(5, 20) on the cabinet's joints, as
  OpenCabinetDrawer;
- a table: a box with a free top, 0.7-1.2 m by 0.5-0.8 m, its top 0.45-0.8 m above the floor;
- a floor plan (``envs/floor_layout.py``): cabinet and table at random positions and headings, the table
  1.8-2.8 m from the cabinet and beside it, the robot 1-2.2 m from their midpoint at any heading, arm at rest;
- the initial predicates (``options["init"]`` or the constructor's ``init``, over the task's default): the
  object resting on the table (uniform position 10 cm from the edges, uniform yaw) or in the drawer's box
  (where the gripper reaches it once the drawer is open, lying along or across the drawer), the drawer at an
  open fraction that makes its predicates true (``options["drawer_open_fraction"]``: a given one, e.g. 0.5,
  half open). Physics settles for 0.3 s with the robot held; then every initial predicate is checked.

Success: every goal predicate true and the scene static: object and target drawer slower than 0.1 m/s and
1 rad/s (ManiSkill1's static thresholds). ``info`` holds ``goal`` (text), ``goal_reached``, ``goal_predicates``
and ``predicates`` (every predicate over the scene's entities; name -> bool), ``initial_state`` (the
predicates the episode started from, text), ``static``, ``open_fraction``, ``model_id``, ``target_link``.
``env.goal`` is the goal as a tuple of :class:`Predicate`; ``env.evaluate_predicates(...)`` evaluates any
predicates (ground truth: evaluation only).

Observations as OpenCabinetDrawer's (``hand_camera=True`` adds a fourth camera, on the hand, as Habitat 2.0's
Fetch has one on its arm, arXiv 2106.14405: the base cameras, 1.5 m up, do not see over a low drawer's front
wall into it): the fused point cloud of the robot's cameras with the masks
``target_handle``, ``target_link`` (the target drawer), ``robot``, ``object`` and ``table``. The operator's
prompts (``envs/target_prompts.py``), one per entity, each the centre and box of its visual geometry at reset
plus noise: ``obs["extra"]["<entity>_prompt_point"]`` ([3]) and ``["<entity>_prompt_box"]`` ([2, 3]) for
``drawer``, ``object`` and ``table``; ``target_prompt_point`` / ``target_prompt_box`` are the drawer's (the same
values), as in OpenCabinetDrawer. With ``target_marker_rgb`` the target drawer's handle and the whole object
carry the colour marker (``envs/markers.py``; the object whole, as PickObject's).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sapien
from gymnasium import spaces

from handleit.poses import quaternion_of_yaw
from handleit.predicates import Predicate, format_goal, parse_goal

from .articulated_object import load_articulated_object, select_target
from .base_env import SPLITS, LinkSpeedMeter, MobileManipulationEnv, look_at
from .cabinet_generator import cabinet_urdf, drawer_interior_L
from .floor_layout import sample_floor_layout
from .grasp_contacts import grasped_entity_ids, is_grasping
from .initial_states import InitialState, as_predicates, initial_state
from .long_horizon_models import (cabinet_spec, fitting_drawers, fitting_yaws, layout_ids, object_spec,
                                  placement_region_L, split_pair_id)
from .object_generator import object_asset
from .object_models import handle_link_names
from .open_cabinet import JOINT_DAMPING_RANGE, JOINT_FRICTION_RANGE, handle_center_L
from .pick_place import SOLVER_POSITION_ITERATIONS
from .predicate_truth import (STATIC_ANG_RADPS, STATIC_LIN_MPS, is_closed, is_inside_box, is_on_top, is_open,
                              open_fraction)
from .procedural import jittered_rgba
from .rigid_object import load_rigid_object
from .tabletop_env import SURFACE_FRICTION
from .target_prompts import noisy_prompt, visual_bounds_W

ENTITIES = ("drawer", "object", "table")
# The table: a box standing on the floor; sizes (m) of its top and its height.
TABLE_LENGTH_RANGE_M = (0.7, 1.2)
TABLE_WIDTH_RANGE_M = (0.5, 0.8)
TABLE_HEIGHT_RANGE_M = (0.45, 0.8)  # coffee table to dining table; the mobile Panda's torso lifts its arm to both
TABLE_COLORS = ((0.72, 0.58, 0.42), (0.55, 0.40, 0.28), (0.85, 0.80, 0.70), (0.62, 0.63, 0.65))  # woods, grey
TABLE_EDGE_MARGIN_M = 0.1  # the object's box this far inside the table top's edges at the start
DRAWER_YAW_JITTER_RAD = 0.1  # an object in a drawer lies along or across it, turned by up to this much
DROP_GAP_M = 0.002  # the object is put down this far above its support, then settles
SETTLE_S = 0.3  # physics run inside reset with the robot held, so that step 0 starts at rest
MAX_PLACEMENT_DRAWS = 100
# The point cloud's masks: ManiSkill1's three (target handle, target link, robot), then the object and the table.
LONG_HORIZON_MASK_NAMES = ("target_handle", "target_link", "robot", "object", "table")


class LongHorizonEnv(MobileManipulationEnv):
    """A cabinet, a table and an object; a task subclass names its ``goal_text`` and ``default_init``."""

    goal_text = ""
    default_init = "OnTopOf(object, table) & Closed(drawer) & HandEmpty()"
    mask_names = LONG_HORIZON_MASK_NAMES
    # drawer: open fraction, q, qd, link pose (7), handle centre (3), joint axis (3), joint origin (3) (19, as
    # OpenCabinetDrawer's); object: centre of mass (3), quaternion (4), linear and angular velocity (6); table:
    # top centre (3), quaternion (4), top half sizes (2); world frame
    task_state_dim = 19 + 13 + 9

    def __init__(self, split: str = "train", model_ids: list[str] | None = None, target_link: str | None = None,
                 init=None, drawer_open_fraction: float | None = None, **kwargs):
        """``split``: the cabinets' and objects' split; ``model_ids``: restrict the episodes to these
        cabinet-object pairs (``envs/long_horizon_models.py``); ``target_link``: the target drawer's link for
        every episode; ``init``: initial predicates over the task's default (text such as ``"Open(drawer)"`` or
        Predicates; ``envs/initial_states.py``); ``drawer_open_fraction``: the drawer's start (fraction of its
        range); the other keywords: ``MobileManipulationEnv``'s (``hand_camera``, ...). The reset options
        ``model_id``, ``target_link``, ``init`` and ``drawer_open_fraction`` override
        them per episode."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
        self.split = split
        available = layout_ids(split)
        if model_ids is not None:
            for model_id in model_ids:
                self._pair(model_id)  # names a malformed id now
        self.models = list(model_ids) if model_ids is not None else available
        if not self.models:
            raise ValueError("model_ids is empty: give at least one cabinet-object pair")
        self.goal: tuple[Predicate, ...] = parse_goal(self.goal_text)
        self.target_link_name = target_link
        self.init = None if init is None else as_predicates(init)
        self.drawer_open_fraction = drawer_open_fraction
        # Names an initial state no sampler makes now, not at the first reset (a nominal 0.3 m of travel: the
        # drawer's own decides at reset).
        initial_state(self.init, self.default_init, 0.3, drawer_open_fraction)
        super().__init__(**kwargs)

    # ------------------------------------------------------------------------------------------------
    # Scene
    # ------------------------------------------------------------------------------------------------
    def _pair(self, model_id: str) -> tuple[str, str]:
        cabinet_id, object_id = split_pair_id(model_id, self.split)
        if not fitting_drawers(cabinet_id, object_id):
            raise ValueError(f"model_id {model_id!r}: no drawer of {cabinet_id} holds {object_id}")
        return cabinet_id, object_id

    def _load_objects(self, rng, options):
        model_id = options.get("model_id")
        if model_id is None:
            model_id = self.models[int(rng.integers(len(self.models)))]
        self.model_id = model_id
        self.cabinet_id, self.object_id = self._pair(model_id)
        self.cabinet_spec = spec = cabinet_spec(self.cabinet_id)

        urdf = cabinet_urdf(self.cabinet_id)
        self.cabinet = load_articulated_object(self.scene, urdf)
        self.cabinet.set_name(self.cabinet_id)
        lower = np.ascontiguousarray(self.cabinet.get_qlimits()[:, 0], dtype=np.float32)
        self.cabinet.set_qpos(np.where(np.isfinite(lower), lower, 0.0).astype(np.float32))
        fitting = [f"link_{i}" for i in fitting_drawers(self.cabinet_id, self.object_id)]
        link = options.get("target_link", self.target_link_name)
        if link is not None and link not in fitting:
            raise ValueError(f"target_link {link!r} of {self.cabinet_id} cannot be the target: the drawers that hold "
                             f"{self.object_id} are {fitting}")
        if link is None:
            link = fitting[int(rng.integers(len(fitting)))]
        self.target = select_target(self.cabinet, "drawer", link, rng, handle_link_names(urdf), source=urdf)
        self.handle_center_L = handle_center_L(self.target)
        self.part_index = int(link.split("_")[1])
        self.drawer_interior_L = drawer_interior_L(spec, self.part_index)

        # The table, then the floor plan.
        self.table_half_m = (float(rng.uniform(*TABLE_LENGTH_RANGE_M)) / 2,
                             float(rng.uniform(*TABLE_WIDTH_RANGE_M)) / 2)
        self.table_height_m = float(rng.uniform(*TABLE_HEIGHT_RANGE_M))
        rgba = jittered_rgba(rng, TABLE_COLORS[int(rng.integers(len(TABLE_COLORS)))])
        # How far the cabinet's parts reach in front of it when open (drawers' travel, doors' leaves), handles too.
        reach = max([p.travel_m for p in spec.parts] + [p.front_width_m for p in spec.parts if p.kind == "door"]) + 0.1
        self.layout = sample_floor_layout(rng, (spec.depth_m / 2, spec.width_m / 2), reach, self.table_half_m)
        x, y, yaw = self.layout.cabinet
        self.cabinet.set_root_pose(sapien.Pose([x, y, 0.0], quaternion_of_yaw(yaw)))
        self.table = self._build_table(rgba)

        self.object_material = sapien.physx.PhysxMaterial(SURFACE_FRICTION, SURFACE_FRICTION, 0.0)
        self.obj = load_rigid_object(self.scene, object_asset(self.object_id), self.object_material)
        self.obj_body = self.obj.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
        self.obj_body.set_solver_position_iterations(SOLVER_POSITION_ITERATIONS)
        self._object_points_O = _collision_points(self.obj_body)
        joints = self.robot.joints
        self._fingers = [joints[i] for i in self.robot.finger_index[self.robot.sides[0]]]
        self._robot_entity_ids = {link.entity.per_scene_id for link in self.robot.articulation.links}

    def _build_table(self, rgba) -> sapien.Entity:
        hx, hy = self.table_half_m
        hz = self.table_height_m / 2
        builder = self.scene.create_actor_builder()
        material = sapien.physx.PhysxMaterial(SURFACE_FRICTION, SURFACE_FRICTION, 0.0)
        builder.add_box_collision(half_size=[hx, hy, hz], material=material)
        builder.add_box_visual(half_size=[hx, hy, hz],
                               material=sapien.render.RenderMaterial(base_color=list(rgba), roughness=0.8))
        x, y, yaw = self.layout.table
        builder.initial_pose = sapien.Pose([x, y, hz], quaternion_of_yaw(yaw))
        return builder.build_static(name="table")

    def X_WT(self) -> np.ndarray:
        """Ground truth: the table top's frame T in the world (4x4): origin at the top's centre, z up, x along
        its length."""
        x, y, yaw = self.layout.table
        X = np.eye(4)
        X[:3, :3] = _yaw_matrix(yaw)
        X[:3, 3] = [x, y, self.table_height_m]
        return X

    # ------------------------------------------------------------------------------------------------
    # Episode: initial state from predicates
    # ------------------------------------------------------------------------------------------------
    def _initialize_episode(self, rng, options):
        for joint in self.cabinet.active_joints:
            joint.set_friction(float(rng.uniform(*JOINT_FRICTION_RANGE)))
            joint.set_drive_properties(0.0, float(rng.uniform(*JOINT_DAMPING_RANGE)))
        requested = options.get("init", self.init)
        fraction = options.get("drawer_open_fraction", self.drawer_open_fraction)
        lo, hi = self.target.q_range
        self.initial_state: InitialState = initial_state(requested, self.default_init, hi - lo, fraction)

        qpos = self.cabinet.get_qpos().copy()
        f_lo, f_hi = self.initial_state.drawer_fraction
        qpos[self.target.joint_index] = lo + float(rng.uniform(f_lo, f_hi)) * (hi - lo)
        self.cabinet.set_qpos(qpos)
        self.cabinet.set_qvel(np.zeros_like(qpos))
        if self.initial_state.object_on == "table":
            self._place_on_table(rng)
        else:
            self._place_in_drawer(rng)

        robot_qpos = self.robot.rest_qpos(self.layout.robot)
        self.robot.reset(robot_qpos)
        self.controller.reset()
        for _ in range(round(SETTLE_S * self.sim_freq)):
            self.scene.step()
        self.robot.reset(robot_qpos)
        self.obj_body.set_linear_velocity(np.zeros(3))
        self.obj_body.set_angular_velocity(np.zeros(3))
        # The drawer back where it was sampled (the object landing may nudge it by a fraction of a mm).
        self.cabinet.set_qpos(qpos)
        self.cabinet.set_qvel(np.zeros(self.cabinet.dof, dtype=np.float32))

        held = self.evaluate_predicates(self.initial_state.predicates)
        failed = [name for name, value in held.items() if not value]
        if failed:
            raise RuntimeError(f"initial state {self.initial_state} of {self.model_id} ({self.target.name}) does not "
                               f"hold after settling: {', '.join(failed)} false")
        self._drawer_speed = LinkSpeedMeter(self.target.link, self.control_freq)
        self._object_speed = LinkSpeedMeter(self.obj_body, self.control_freq)
        self._drawer_speed.start()
        self._object_speed.start()
        self._entity_prompts = None

    def _place(self, X_WF: np.ndarray, yaw_F: float, low_F: np.ndarray) -> None:
        """Put the object, turned by ``yaw_F`` about z of a z-up frame F (pose ``X_WF`` in W), so that its
        bounding box in F has its min corner at ``low_F``."""
        R = _yaw_matrix(yaw_F)
        points_F = self._object_points_O @ R.T
        p_F = np.asarray(low_F) - points_F.min(axis=0)
        X_FO = np.eye(4)
        X_FO[:3, :3], X_FO[:3, 3] = R, p_F
        self.obj.set_pose(sapien.Pose(X_WF @ X_FO))

    def _place_on_table(self, rng) -> None:
        hx, hy = self.table_half_m
        for _ in range(MAX_PLACEMENT_DRAWS):
            yaw = float(rng.uniform(-math.pi, math.pi))
            points = self._object_points_O @ _yaw_matrix(yaw).T
            size = points.max(axis=0) - points.min(axis=0)
            room = np.array([2 * hx, 2 * hy]) - 2 * TABLE_EDGE_MARGIN_M - size[:2]
            if np.all(room >= 0):
                low_xy = np.array([-hx, -hy]) + TABLE_EDGE_MARGIN_M + rng.uniform(0.0, 1.0, 2) * room
                self._place(self.X_WT(), yaw, np.array([*low_xy, DROP_GAP_M]))
                return
        raise RuntimeError(f"object {self.object_id} does not fit on the table top {self.table_half_m} (half sizes, m)")

    def _place_in_drawer(self, rng) -> None:
        region = placement_region_L(self.cabinet_spec, self.part_index)
        yaws = fitting_yaws(object_spec(self.object_id).extents_m, region)  # as the pair's fit was decided
        yaw = yaws[int(rng.integers(len(yaws)))] + float(rng.uniform(-DRAWER_YAW_JITTER_RAD, DRAWER_YAW_JITTER_RAD))
        points = self._object_points_O @ _yaw_matrix(yaw).T
        size = points.max(axis=0) - points.min(axis=0)
        room = region[1, :2] - region[0, :2] - size[:2]
        if np.any(room < 0):  # the jitter made it too wide: lie straight
            yaw = yaws[0]
            size = np.ptp(self._object_points_O @ _yaw_matrix(yaw).T, axis=0)
            room = np.maximum(region[1, :2] - region[0, :2] - size[:2], 0.0)
        low_xy = region[0, :2] + rng.uniform(0.0, 1.0, 2) * room
        floor_z = self.drawer_interior_L[0, 2]
        X_WL = self.target.link.entity_pose.to_transformation_matrix()
        self._place(X_WL, yaw, np.array([*low_xy, floor_z + DROP_GAP_M]))

    def object_extents_O(self) -> np.ndarray:
        """Bounding-box size (m) of the object's collision geometry in its own (resting) frame."""
        return np.ptp(self._object_points_O, axis=0)

    # ------------------------------------------------------------------------------------------------
    # Ground truth (evaluation only)
    # ------------------------------------------------------------------------------------------------
    def object_com_W(self) -> np.ndarray:
        """Ground truth: the object's centre of mass in the world (m)."""
        return np.asarray((self.obj.pose * self.obj_body.cmass_local_pose).p, dtype=np.float64)

    def object_points_W(self) -> np.ndarray:
        """Ground truth: the vertices of the object's collision geometry in the world (m) [n, 3]."""
        X_WO = self.obj.pose.to_transformation_matrix()
        return self._object_points_O @ X_WO[:3, :3].T + X_WO[:3, 3]

    def open_fraction(self) -> float:
        return open_fraction(self.cabinet.get_qpos()[self.target.joint_index], self.target.q_range)

    def _truth(self, predicate: Predicate) -> bool:
        name, args = predicate.name, predicate.args
        unknown = [a for a in args if a not in ENTITIES]
        if unknown:
            raise ValueError(f"{predicate}: unknown entity {unknown[0]!r}; this scene has {', '.join(ENTITIES)}")
        q = float(self.cabinet.get_qpos()[self.target.joint_index])
        if name in ("Open", "Closed"):
            if args != ("drawer",):
                raise ValueError(f"{predicate}: only the drawer opens and closes")
            return is_open(q, self.target.q_range) if name == "Open" else is_closed(q, self.target.q_range[0])
        if name == "Grasped":
            if args == ("object",):
                return is_grasping(self.scene, self._fingers, self.obj)
            raise ValueError(f"{predicate}: only the object can be grasped")
        if name == "HandEmpty":
            return not grasped_entity_ids(self.scene, self._fingers, self._robot_entity_ids)
        if name == "InsideOf":
            if args != ("object", "drawer"):
                raise ValueError(f"{predicate}: InsideOf takes (object, drawer)")
            X_LW = _inverse_rigid(self.target.link.entity_pose.to_transformation_matrix())
            points_L = self.object_points_W() @ X_LW[:3, :3].T + X_LW[:3, 3]
            return is_inside_box(points_L, self.drawer_interior_L)
        if name == "OnTopOf":
            if args != ("object", "table"):
                raise ValueError(f"{predicate}: OnTopOf takes (object, table)")
            X_TW = _inverse_rigid(self.X_WT())
            points_T = self.object_points_W() @ X_TW[:3, :3].T + X_TW[:3, 3]
            com_T = X_TW[:3, :3] @ self.object_com_W() + X_TW[:3, 3]
            return is_on_top(points_T, com_T, self.table_half_m)
        raise ValueError(f"{predicate}: no ground truth for {name}")  # pragma: no cover - the vocabulary is closed

    def evaluate_predicates(self, predicates) -> dict[str, bool]:
        """Ground truth of ``predicates`` (a conjunction as text, a Predicate, or a sequence of them) on the
        simulator's state: their text -> truth value. For evaluation only: a solver must never read it."""
        return {str(p): self._truth(p) != p.negated for p in as_predicates(predicates)}

    def all_predicates(self) -> tuple[Predicate, ...]:
        """Every predicate of the shared vocabulary over this scene's entities."""
        return (Predicate("Open", ("drawer",)), Predicate("Closed", ("drawer",)), Predicate("Grasped", ("object",)),
                Predicate("HandEmpty"), Predicate("InsideOf", ("object", "drawer")),
                Predicate("OnTopOf", ("object", "table")))

    def _after_step(self):
        self._drawer_speed.update()
        self._object_speed.update()

    def evaluate(self) -> dict[str, Any]:
        truth = self.evaluate_predicates(self.all_predicates())
        goal = {str(p): truth[str(Predicate(p.name, p.args))] != p.negated for p in self.goal}
        drawer_lin, drawer_ang = self._drawer_speed.speeds()
        object_lin, object_ang = self._object_speed.speeds()
        static = max(drawer_lin, object_lin) <= STATIC_LIN_MPS and max(drawer_ang, object_ang) <= STATIC_ANG_RADPS
        reached = all(goal.values())
        return {
            "success": bool(reached and static),
            "goal": format_goal(self.goal),
            "goal_reached": bool(reached),
            "goal_predicates": goal,
            "predicates": truth,
            "initial_state": str(self.initial_state),
            "static": bool(static),
            "open_fraction": self.open_fraction(),
            "object_speed_mps": object_lin,
            "drawer_speed_mps": drawer_lin,
            "model_id": self.model_id,
            "target_link": self.target.name,
        }

    # ------------------------------------------------------------------------------------------------
    # Observations
    # ------------------------------------------------------------------------------------------------
    def _labelled_shape_ids(self):
        return {
            "target_handle": self.target.handle_shape_ids,
            "target_link": self.target.link_shape_ids,
            "object": _render_shape_ids(self.obj),
            "table": _render_shape_ids(self.table),
        }

    def _marker_shapes(self):
        handle_ids = set(self.target.handle_shape_ids.tolist())
        bodies = [e.find_component_by_type(sapien.render.RenderBodyComponent) for e in self.target.entities]
        handle = [shape for body in bodies if body is not None for shape in body.render_shapes
                  if shape.per_scene_id in handle_ids]
        return handle + list(self.obj.find_component_by_type(sapien.render.RenderBodyComponent).render_shapes)

    def _target_bounds_W(self):
        return visual_bounds_W(self.target.entities)

    def _entity_bounds_W(self, entity: str) -> np.ndarray:
        return {"drawer": self._target_bounds_W, "object": lambda: visual_bounds_W([self.obj]),
                "table": lambda: visual_bounds_W([self.table])}[entity]()

    def _extra_obs(self):
        if self._target_prompt is None:
            return {}
        if self._entity_prompts is None:  # drawn once per episode, after the target's, from the prompt's generator
            self._entity_prompts = {"drawer": self._target_prompt}
            for entity in ENTITIES[1:]:
                self._entity_prompts[entity] = noisy_prompt(self._entity_bounds_W(entity), self.prompt_noise_m,
                                                            self._prompt_rng)
        extra = {}
        for entity, (point, box) in self._entity_prompts.items():
            extra[f"{entity}_prompt_point"] = point.copy()
            extra[f"{entity}_prompt_box"] = box.copy()
        return extra

    def _extra_obs_space(self):
        space = {}
        for entity in ENTITIES:
            space[f"{entity}_prompt_point"] = spaces.Box(-np.inf, np.inf, shape=(3,), dtype=np.float32)
            space[f"{entity}_prompt_box"] = spaces.Box(-np.inf, np.inf, shape=(2, 3), dtype=np.float32)
        return space

    def _task_state(self):
        i = self.target.joint_index
        q, qd = float(self.cabinet.get_qpos()[i]), float(self.cabinet.get_qvel()[i])
        link_pose = self.target.link.entity_pose
        X_WL = link_pose.to_transformation_matrix()
        X_WJ = self.target.joint.get_global_pose().to_transformation_matrix()  # the joint axis is its x axis
        X_WT = self.X_WT()
        table_q = sapien.Pose(X_WT).q
        return np.concatenate([
            [self.open_fraction(), q, qd], link_pose.p, link_pose.q, X_WL[:3, :3] @ self.handle_center_L + X_WL[:3, 3],
            X_WJ[:3, 0], X_WJ[:3, 3],
            self.object_com_W(), self.obj.pose.q, self.obj_body.linear_velocity, self.obj_body.angular_velocity,
            X_WT[:3, 3], table_q, self.table_half_m,
        ]).astype(np.float32)

    def _render_camera_pose(self):
        cabinet, table = np.array(self.layout.cabinet[:2]), np.array(self.layout.table[:2])
        middle = (cabinet + table) / 2
        across = np.array([-(table - cabinet)[1], (table - cabinet)[0]])
        across /= max(np.linalg.norm(across), 1e-9)
        eye = middle + 2.8 * across
        return look_at(eye=[eye[0], eye[1], 2.6], target=[middle[0], middle[1], 0.4])


def _yaw_matrix(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _inverse_rigid(X_AB: np.ndarray) -> np.ndarray:
    """X_BA of a rigid transform X_AB (4x4): R^T and -R^T p, cheaper and exact, unlike a general inverse."""
    X_BA = np.eye(4)
    X_BA[:3, :3] = X_AB[:3, :3].T
    X_BA[:3, 3] = -X_AB[:3, :3].T @ X_AB[:3, 3]
    return X_BA


def _render_shape_ids(entity: sapien.Entity) -> np.ndarray:
    body = entity.find_component_by_type(sapien.render.RenderBodyComponent)
    return np.array([shape.per_scene_id for shape in body.render_shapes], dtype=np.int64)


def _collision_points(body) -> np.ndarray:
    """The vertices of a rigid body's convex collision shapes in its entity's frame (m) [n, 3]."""
    points = []
    for shape in body.collision_shapes:
        vertices = np.asarray(shape.get_vertices(), dtype=np.float64) * np.asarray(shape.get_scale())
        X = shape.local_pose.to_transformation_matrix()
        points.append(vertices @ X[:3, :3].T + X[:3, 3])
    return np.concatenate(points)
