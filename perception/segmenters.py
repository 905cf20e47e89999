"""Segmenters chosen by name: the masks the trees read, made from the sensors (or, for ``simulator``, the
simulator's own masks, kept as the reference).

A segmenter is any object with ``reset()`` and ``segment(observation) -> masks``, where ``masks`` maps a
mask name to an ``[N]`` bool array over ``observation.points``. Which masks it must make depends on what the
task's tree targets (``target``):

- ``"cabinet_part"`` (OpenCabinetDrawer, OpenCabinetDoor): ``target_handle``, ``target_link``, ``robot``;
- ``"floor_object"`` (PushChair, MoveBucket): ``target_link`` (the chair or the bucket), ``robot``;
- ``"table_object"`` (PickCube, PickObject): ``target`` (and ``target_link``, the same points), ``robot``.

The bundled segmenters:

- ``simulator``: the simulator's masks as they are (the only one that reads them);
- ``robot_self_filter``: the robot's own points only, from its URDF collision geometry at the measured joint
  positions (MoveIt's robot self filter); every segmenter below uses it for the ``robot`` mask;
- ``color_marker``: the target marked with a colour (Let's Handle It (arXiv 2202.11792) Sec. 3.2 marked a real drawer's
  handle with red tape): the marker's points give the handle (cabinets) or a seed of the object; the part and the
  object are then found by geometry and tracked from step to step;
- ``geometric``: no marker; the operator's prompt (``Observation.target_prompt_W``, a point or a box in the
  world) names the target, and geometry finds it: the part as the planar region at the prompt, the handle
  as what stands proud of that part's front, an object as the cluster at the prompt above the floor or the
  table.

Register your own with :func:`register_segmenter` (or the entry-point group ``handleit.segmenters``); its
factory is called as ``factory(target=..., model=..., **kwargs)``::

    from handleit.perception.segmenters import register_segmenter

    @register_segmenter("my_net")
    class MyNet:
        mask_names = ("target_handle", "target_link", "robot")
        def __init__(self, target, model, checkpoint="net.pt"): ...
        def reset(self): ...
        def segment(self, observation): ...

A segmenter raises :class:`~handleit.perception.segmentation_errors.SegmentationError` (a ``ValueError``)
with a message naming the problem when it cannot segment: an empty cloud, NaN points, a prompt outside the
cloud, no marker colour found, a marker found in two places.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from handleit.clouds import finite_rows
from handleit.perception.cabinet_segmentation import CabinetPartTracker
from handleit.perception.color_markers import marker_points, srgb_of_linear
from handleit.perception.object_segmentation import ObjectTracker
from handleit.perception.plugins import PluginRegistry
from handleit.perception.robot_self_filter import RobotSelfFilter
from handleit.perception.segmentation_errors import SegmentationError
from handleit.types import DEFAULT_MARKER_RGB, Observation, RobotModel

ENTRY_POINT_GROUP = "handleit.segmenters"
SEGMENT_TARGETS = ("cabinet_part", "floor_object", "table_object")
# The masks each kind of target needs (see the module docstring).
TARGET_MASKS = {
    "cabinet_part": ("target_handle", "target_link", "robot"),
    "floor_object": ("target_handle", "target_link", "robot"),  # target_handle stays empty (no tree reads it)
    "table_object": ("target", "target_link", "robot"),
}
SIMULATOR = "simulator"
# A knob seen from 1.7 m away shows 4-6 marker pixels; the bundled scenes have no other colour near the marker's
# hue (envs/markers.py turns them away), so a few pixels suffice.
MARKER_MIN_POINTS = 3


@runtime_checkable
class Segmenter(Protocol):
    """Masks from one observation; may keep state between the steps of an episode (tracking)."""

    mask_names: tuple[str, ...]

    def reset(self) -> None:
        """Forget the last episode."""

    def segment(self, observation: Observation) -> dict[str, np.ndarray]:
        """name -> [N] bool over ``observation.points``, for each name of ``mask_names``."""
        ...


_PLUGINS = PluginRegistry("segmenter", ENTRY_POINT_GROUP)


def register_segmenter(name: str, *, replace: bool = False):
    """Decorator registering a segmenter factory (a class or a function) under ``name``.

    Raises ValueError when ``name`` is taken by another factory, unless ``replace=True``.
    """
    return _PLUGINS.register(name, replace=replace)


def unregister_segmenter(name: str) -> None:
    """Remove a registered segmenter (no error if it is not registered)."""
    _PLUGINS.unregister(name)


def available_segmenters() -> list[str]:
    """Names of the registered segmenters and of those installed packages offer (entry points), sorted."""
    return _PLUGINS.available()


def get_segmenter(name: str, target: str, model: RobotModel, **kwargs) -> Segmenter:
    """A new segmenter made by the factory registered as ``name``, for ``target`` (one of
    :data:`SEGMENT_TARGETS`) on the robot ``model``. ValueError names an unknown segmenter or target."""
    if target not in SEGMENT_TARGETS:
        raise ValueError(f"unknown segmentation target {target!r}; choose one of {', '.join(SEGMENT_TARGETS)}")
    factory = _PLUGINS.factory(name)
    segmenter = factory(target=target, model=model, **kwargs)
    if not isinstance(segmenter, Segmenter):
        raise ValueError(f"segmenter {name!r}: {factory!r} made {segmenter!r}, which lacks mask_names, reset() "
                         "or segment()")
    return segmenter


# ----------------------------------------------------------------------------------------------------
# Input checks shared by the bundled segmenters
# ----------------------------------------------------------------------------------------------------
def checked_cloud(observation: Observation) -> tuple[np.ndarray, np.ndarray]:
    """The observation's points and colours, checked: SegmentationError for an empty cloud, NaN or inf
    points, wrong shapes. (Organized clouds mark invalid pixels with NaN: drop them before segmenting, as the
    trees' segment node does.)"""
    points = np.asarray(observation.points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise SegmentationError(f"the point cloud must be [N, 3], got shape {list(points.shape)}")
    if len(points) == 0:
        raise SegmentationError("the point cloud is empty: nothing to segment")
    bad = ~finite_rows(points)
    if bad.any():
        raise SegmentationError(f"the point cloud has {int(bad.sum())} NaN or inf points of {len(points)}; "
                                "drop invalid points before segmenting")
    colors = np.asarray(observation.colors)
    if colors.shape != points.shape:
        raise SegmentationError(f"colors must be [N, 3] like the points ({len(points)}), got {list(colors.shape)}")
    return points, colors


def _empty(n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool)


# ----------------------------------------------------------------------------------------------------
# The bundled segmenters
# ----------------------------------------------------------------------------------------------------
@register_segmenter(SIMULATOR)
class SimulatorSegmenter:
    """The simulator's masks, unchanged (all of them: a task may have more than its target's, e.g.
    ManiSkill3's StackCube ``place_target``): the reference the others are measured against. Raises
    SegmentationError on an observation without them (a real robot's)."""

    # Copies masks (microseconds): a real-time tree runs it in the tick, where the others run off it.
    runs_in_tick = True

    def __init__(self, target: str, model: RobotModel | None = None):
        self.mask_names = TARGET_MASKS[target]

    def reset(self) -> None:
        pass

    def segment(self, observation: Observation) -> dict[str, np.ndarray]:
        if "robot" not in observation.masks:
            raise SegmentationError(f"the simulator segmenter needs the simulator's masks; this observation has "
                                    f"{sorted(observation.masks) or 'none'} (a real robot has none: choose "
                                    "robot_self_filter, color_marker or geometric)")
        n = len(observation.points)
        for name, mask in observation.masks.items():
            if np.shape(mask) != (n,):
                raise SegmentationError(f"simulator mask {name!r} has shape {np.shape(mask)}, the cloud has {n} points")
        return {name: np.asarray(mask, dtype=bool) for name, mask in observation.masks.items()}


@register_segmenter("robot_self_filter")
class RobotSelfFilterSegmenter:
    """The robot's own points (its URDF collision geometry at the measured joint positions, padded by
    ``padding_m``); it makes the ``robot`` mask only, so it is a building block, not enough for a tree."""

    mask_names = ("robot",)

    def __init__(self, target: str, model: RobotModel, padding_m: float = 0.02):
        self.filter = RobotSelfFilter.from_robot_model(model, padding_m=padding_m)

    def reset(self) -> None:
        pass

    def robot_mask(self, observation: Observation, checked: bool = False) -> np.ndarray:
        """The robot's points; ``checked``: the cloud has been through :func:`checked_cloud` already."""
        points = observation.points if checked else checked_cloud(observation)[0]
        return self.filter.mask(points, observation.qpos, observation.X_WB)

    def segment(self, observation: Observation) -> dict[str, np.ndarray]:
        return {"robot": self.robot_mask(observation)}


class _TrackingSegmenter:
    """The robot from the self filter; the target tracked from step to step by geometry (shared by the
    geometric and colour-marker segmenters, which differ in how the target is named)."""

    def __init__(self, target: str, model: RobotModel, padding_m: float = 0.02):
        self.target = target
        self.mask_names = TARGET_MASKS[target]
        self.self_filter = RobotSelfFilterSegmenter(target, model, padding_m=padding_m)
        self.cabinet = CabinetPartTracker() if target == "cabinet_part" else None
        self.object = None if target == "cabinet_part" else ObjectTracker(
            support="floor" if target == "floor_object" else "table")

    def reset(self) -> None:
        if self.cabinet is not None:
            self.cabinet.reset()
        if self.object is not None:
            self.object.reset()

    def _robot_only(self, robot: np.ndarray) -> dict[str, np.ndarray]:
        return {name: (robot if name == "robot" else _empty(len(robot))) for name in self.mask_names}

    def _masks(self, observation, robot, prompt_W, hint=None) -> dict[str, np.ndarray]:
        try:
            return self._target_masks(observation, robot, prompt_W, hint)
        except SegmentationError as error:
            if error.masks is not None:
                raise
            raise SegmentationError(str(error), masks=self._robot_only(robot)) from error

    def _target_masks(self, observation, robot, prompt_W, hint) -> dict[str, np.ndarray]:
        points = observation.points
        candidates = ~robot
        if self.cabinet is not None:
            handle, part = self.cabinet.update(points, candidates, prompt_W, observation.X_WB, handle_hint_mask=hint)
            return {"target_handle": handle, "target_link": part, "robot": robot}
        obj = self.object.update(points, candidates, prompt_W, seed_mask=hint)
        if self.target == "table_object":
            return {"target": obj, "target_link": obj.copy(), "robot": robot}
        return {"target_handle": _empty(len(points)), "target_link": obj, "robot": robot}


@register_segmenter("geometric")
class GeometricSegmenter(_TrackingSegmenter):
    """No marker: the operator's prompt (``Observation.target_prompt_W``: a world point or box) names the
    target; the part is the planar region at the prompt and the handle what stands proud of its front, or the
    object the cluster at the prompt above the floor or table plane; tracked from step to step."""

    def segment(self, observation: Observation) -> dict[str, np.ndarray]:
        checked_cloud(observation)
        prompt = observation.target_prompt_W
        if prompt is None:
            raise SegmentationError("the geometric segmenter needs a prompt naming the target "
                                    "(Observation.target_prompt_W: a world point [3] or box [2, 3]); none was given")
        robot = self.self_filter.robot_mask(observation, checked=True)
        return self._masks(observation, robot, np.asarray(prompt, dtype=np.float64))


@register_segmenter("color_marker")
class ColorMarkerSegmenter(_TrackingSegmenter):
    """The target carries a colour marker (``marker_rgb``, displayed sRGB 0-255): the marker's points are
    the handle (cabinets) or a seed of the object; geometry finds the rest. Once the marker has been seen, a
    step where it is hidden (the gripper closed on the handle) keeps tracking the target from the last steps;
    before it has ever been seen, "no marker colour found" is an error."""

    def __init__(self, target: str, model: RobotModel, marker_rgb=None, padding_m: float = 0.02):
        """``marker_rgb``: the marker's colour as the cameras display it (sRGB, three values 0-255); default:
        the bundled envs' marker (``handleit.types.DEFAULT_MARKER_RGB``, a linear base colour, displayed)."""
        super().__init__(target, model, padding_m=padding_m)
        self.marker_rgb = srgb_of_linear(DEFAULT_MARKER_RGB) if marker_rgb is None else tuple(marker_rgb)
        self.last_prompt_W: np.ndarray | None = None

    def reset(self) -> None:
        super().reset()
        self.last_prompt_W = None

    def segment(self, observation: Observation) -> dict[str, np.ndarray]:
        points, colors = checked_cloud(observation)
        robot = self.self_filter.robot_mask(observation, checked=True)
        try:
            marker = marker_points(points, colors, self.marker_rgb, ~robot, min_points=MARKER_MIN_POINTS)
        except SegmentationError as error:
            if self.last_prompt_W is None or "two places" in str(error):
                # Not found: the robot's own mask still holds (a tree that looks for the target must not take
                # its own body for the target's surroundings).
                raise SegmentationError(str(error), masks=self._robot_only(robot)) from error
            marker = None  # hidden for now: keep tracking from the last steps
        if marker is not None:
            self.last_prompt_W = points[marker].mean(axis=0)
        return self._masks(observation, robot, self.last_prompt_W, hint=marker)
