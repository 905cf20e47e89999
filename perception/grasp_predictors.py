"""Grasp predictors chosen by name, so a learned model replaces the analytic sampler without touching the trees.

A predictor is any object with ``predict(points_W, masks, **context) -> list[Grasp]``. Register a factory
(a class or a function returning a predictor) under a name::

    from handleit.perception.grasp_predictors import register_grasp_predictor

    @register_grasp_predictor("my_net")
    class MyNet:
        def __init__(self, checkpoint="net.pt"): ...
        def predict(self, points_W, masks, **context): ...

    predictor = get_grasp_predictor("my_net", checkpoint="other.pt")

An installed package can add one without being imported first, through the entry point group
``handleit.grasp_predictors`` (the entry point loads the factory), e.g. in its pyproject.toml::

    [project.entry-points."handleit.grasp_predictors"]
    my_net = "my_package.grasping:MyNet"

The analytic handle sampler is registered as ``"antipodal"``, the 6-DoF object grasp sampler
(:mod:`~handleit.perception.antipodal_grasps`) as ``"antipodal_6dof"`` and the learned grasp scorer
(:mod:`~handleit.perception.grasp_scorer`, imported with torch only when asked for) as ``"learned_scorer"``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from handleit.perception.antipodal_grasps import AntipodalGraspPredictor6DoF
from handleit.perception.handle_grasps import sample_handle_grasps
from handleit.perception.plugins import PluginRegistry
from handleit.perception.point_cloud import as_points
from handleit.types import Grasp

ENTRY_POINT_GROUP = "handleit.grasp_predictors"


@runtime_checkable
class GraspPredictor(Protocol):
    """Grasps from a point cloud and its segmentation masks."""

    def predict(self, points_W: np.ndarray, masks: dict[str, np.ndarray], **context) -> list[Grasp]:
        """Grasps on the target, best first; ``[]`` when none is found.

        Args:
            points_W: ``[N, 3]`` fused point cloud in the world (z up), m.
            masks: name -> ``[N]`` bool, e.g. "target_handle", "target_link", "robot".
            context: optional hints, e.g. ``front_normal_W`` ([3], world), ``X_WB`` (4x4 base pose),
                ``handle_points_W`` (handle points merged over steps); a predictor ignores what it does not use.
        """
        ...


_PLUGINS = PluginRegistry("grasp predictor", ENTRY_POINT_GROUP)


def register_grasp_predictor(name: str, *, replace: bool = False):
    """Decorator registering a predictor factory (a class or a function) under ``name``.

    Raises ValueError when ``name`` is taken by another factory, unless ``replace=True``.
    """
    return _PLUGINS.register(name, replace=replace)


def unregister_grasp_predictor(name: str) -> None:
    """Remove a registered predictor (no error if it is not registered)."""
    _PLUGINS.unregister(name)


def available_grasp_predictors() -> list[str]:
    """Names of the registered predictors and of those installed packages offer (entry points), sorted."""
    return _PLUGINS.available()


def get_grasp_predictor(name: str, **kwargs) -> GraspPredictor:
    """A new predictor made by the factory registered as ``name`` (called with ``kwargs``).

    Registered names come first; otherwise the entry point ``name`` of the group
    ``handleit.grasp_predictors`` is loaded (and registered). Raises ValueError for an unknown name,
    listing the available ones, and when the factory's result has no ``predict`` method.
    """
    factory = _PLUGINS.factory(name)
    predictor = factory(**kwargs)
    if not isinstance(predictor, GraspPredictor):
        raise ValueError(f"grasp predictor {name!r}: {factory!r} made {predictor!r}, which has no predict() method")
    return predictor


@register_grasp_predictor("antipodal")
class AntipodalGraspPredictor:
    """The analytic handle sampler (:func:`~handleit.perception.handle_grasps.sample_handle_grasps`).

    ``predict`` uses the points under ``masks["target_handle"]`` (or ``handle_points_W`` from the
    context, e.g. merged by a HandleAccumulator) and those under ``masks["target_link"]`` for the front.
    Context: ``front_normal_W``; ``X_WB`` (the base position orients an estimated normal).
    Constructor keyword arguments are passed to the sampler (e.g. ``max_opening_m``, ``depth_m``).
    """

    def __init__(self, **sampler_kwargs):
        self.sampler_kwargs = sampler_kwargs

    def predict(self, points_W, masks, **context) -> list[Grasp]:
        p = np.asarray(points_W)
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f"points_W: expected shape [N, 3], got {list(p.shape)}")
        # Only the masked subsets are converted and checked (NaN, ...): the full cloud is ~192,000 points.
        if "target_handle" not in masks and "handle_points_W" not in context:
            raise ValueError(f"antipodal grasp predictor: masks need 'target_handle', got {sorted(masks)}")

        def masked(key):
            m = np.asarray(masks[key])
            if m.dtype != bool or m.shape != (len(p),):
                raise ValueError(f"masks[{key!r}]: expected a bool array of shape [{len(p)}], "
                                 f"got {m.dtype} {list(m.shape)}")
            return m

        if "handle_points_W" in context:
            handle = as_points(context["handle_points_W"], "handle_points_W")
        else:
            handle = as_points(p[masked("target_handle")], "points_W[target_handle]")
        link = as_points(p[masked("target_link")], "points_W[target_link]") if "target_link" in masks else None
        toward = None
        if context.get("X_WB") is not None:
            toward = np.asarray(context["X_WB"], dtype=np.float64)[:3, 3]
        front_normal = context.get("front_normal_W")
        if len(handle) == 0:
            return []
        if front_normal is None and (link is None or len(link) < 3):
            return []  # no front to approach: nothing to offer this step
        return sample_handle_grasps(handle, front_normal, link_points_W=link, toward_W=toward, **self.sampler_kwargs)


register_grasp_predictor("antipodal_6dof")(AntipodalGraspPredictor6DoF)


@register_grasp_predictor("learned_scorer")
def learned_grasp_scorer(**kwargs) -> GraspPredictor:
    """The learned grasp scorer (:class:`~handleit.perception.grasp_scorer.LearnedGraspPredictor`); torch is
    imported here, on first use, not with the registry."""
    from handleit.perception.grasp_scorer import LearnedGraspPredictor  # lazy: torch

    return LearnedGraspPredictor(**kwargs)
