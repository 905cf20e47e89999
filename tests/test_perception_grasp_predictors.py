"""Grasp predictors by name: registration, the built-in "antipodal" sampler, and entry-point discovery."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest

from handleit.perception import grasp_predictors
from handleit.perception.grasp_predictors import (
    ENTRY_POINT_GROUP,
    GraspPredictor,
    available_grasp_predictors,
    get_grasp_predictor,
    register_grasp_predictor,
    unregister_grasp_predictor,
)
from handleit.perception.point_cloud import estimate_front_normal
from handleit.types import Grasp


class FixedGrasp:
    """A stand-in for a learned model: one grasp at the handle points' mean."""

    def __init__(self, score: float = 0.5):
        self.score = score

    def predict(self, points_W, masks, **context):
        X_WG = np.eye(4)
        X_WG[:3, 3] = points_W[masks["target_handle"]].mean(axis=0)
        return [Grasp(X_WG, 0.04, self.score)]


@pytest.fixture()
def scene_with_masks():
    """A fused cloud: a floor, a front facing -x at x = -0.3, a horizontal bar 4.5 cm in front of it."""
    rng = np.random.default_rng(0)
    floor = np.column_stack([rng.uniform(-2, 0, 4000), rng.uniform(-1, 1, 4000), np.zeros(4000)])
    front = np.column_stack([np.full(2000, -0.3), rng.uniform(-0.25, 0.25, 2000), rng.uniform(0.5, 0.9, 2000)])
    bar = np.column_stack([np.full(40, -0.355), rng.uniform(-0.1, 0.1, 40), rng.uniform(0.69, 0.71, 40)])
    points = np.concatenate([floor, front, bar]) + rng.normal(scale=0.001, size=(6040, 3))
    handle = np.zeros(len(points), bool)
    handle[-40:] = True
    link = np.zeros(len(points), bool)
    link[4000:] = True
    robot = np.zeros(len(points), bool)
    return points, {"target_handle": handle, "target_link": link, "robot": robot}


def test_register_and_get_a_predictor_by_name(scene_with_masks):
    register_grasp_predictor("fixed_test")(FixedGrasp)
    try:
        assert "fixed_test" in available_grasp_predictors() and "antipodal" in available_grasp_predictors()
        predictor = get_grasp_predictor("fixed_test", score=0.9)
        assert isinstance(predictor, GraspPredictor)
        grasps = predictor.predict(*scene_with_masks)
        assert grasps[0].score == 0.9 and np.allclose(grasps[0].X_WG[1:3, 3], [0.0, 0.7], atol=0.02)
        with pytest.raises(ValueError, match="already registered"):
            register_grasp_predictor("fixed_test")(lambda: FixedGrasp())
        register_grasp_predictor("fixed_test", replace=True)(lambda: FixedGrasp(0.1))
        assert get_grasp_predictor("fixed_test").predict(*scene_with_masks)[0].score == 0.1
    finally:
        unregister_grasp_predictor("fixed_test")
    assert "fixed_test" not in available_grasp_predictors()


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ValueError, match="unknown grasp predictor 'contact_graspnet'; available: .*antipodal"):
        get_grasp_predictor("contact_graspnet")


def test_a_factory_without_predict_is_refused():
    register_grasp_predictor("broken_test")(lambda: object())
    try:
        with pytest.raises(ValueError, match="no predict"):
            get_grasp_predictor("broken_test")
    finally:
        unregister_grasp_predictor("broken_test")


def test_entry_point_discovery(monkeypatch, scene_with_masks):
    """An installed package adds a predictor through the entry point group, without being imported first."""
    entry_point = importlib.metadata.EntryPoint(
        name="installed_net", value=f"{__name__}:FixedGrasp", group=ENTRY_POINT_GROUP
    )
    seen_groups = []

    def fake_entry_points(**selection):
        seen_groups.append(selection.get("group"))
        return [entry_point] if selection.get("group") == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    try:
        assert "installed_net" in available_grasp_predictors()
        predictor = get_grasp_predictor("installed_net", score=0.7)
        assert isinstance(predictor, FixedGrasp) and predictor.predict(*scene_with_masks)[0].score == 0.7
        assert set(seen_groups) == {ENTRY_POINT_GROUP}
    finally:
        unregister_grasp_predictor("installed_net")


def test_antipodal_predictor_on_a_fused_cloud(scene_with_masks):
    points, masks = scene_with_masks
    predictor = get_grasp_predictor("antipodal")
    # The front normal comes from the link's points, oriented toward the robot base.
    X_WB = np.eye(4)
    X_WB[:3, 3] = [-1.7, 0.0, 0.0]
    grasps = predictor.predict(points, masks, X_WB=X_WB)
    assert grasps and all(isinstance(g, Grasp) for g in grasps)
    best = grasps[0].X_WG
    assert best[:3, 2] @ [1, 0, 0] > 0.999 and abs(best[2, 1]) > 0.999
    assert np.allclose(best[1:3, 3], [0.0, 0.7], atol=0.01)
    # Points merged by a HandleAccumulator replace the masked ones; no handle points: no grasp.
    assert predictor.predict(points, masks, handle_points_W=points[masks["target_handle"]][:20])
    no_handle = dict(masks, target_handle=np.zeros(len(points), bool))
    assert predictor.predict(points, no_handle, front_normal_W=[-1, 0, 0]) == []
    with pytest.raises(ValueError, match="masks need 'target_handle'"):
        predictor.predict(points, {"target_link": masks["target_link"]})
    with pytest.raises(ValueError, match=r"masks\['target_handle'\]: expected a bool array"):
        predictor.predict(points, dict(masks, target_handle=masks["target_handle"][:10]))


def test_antipodal_passes_sampler_options(scene_with_masks):
    points, masks = scene_with_masks
    narrow = grasp_predictors.get_grasp_predictor("antipodal", max_opening_m=0.02)  # a 2 cm bar cannot fit
    assert narrow.predict(points, masks, front_normal_W=[-1, 0, 0]) == []


def test_antipodal_offers_nothing_where_the_link_points_fit_no_front():
    """A handle seen with a few scattered points of its part (the part at the view's edge) and no front normal
    given: no front to approach, so no grasps this step, not an error that ends the episode."""
    rng = np.random.default_rng(0)
    handle = np.array([0.8, 0.0, 0.5]) + rng.uniform(-0.05, 0.05, (30, 3)) * [0.1, 1.0, 0.1]
    link = rng.uniform([0.6, -0.3, 0.2], [1.1, 0.3, 0.8], (14, 3))  # no 10 of them within 5 mm of a plane
    points = np.vstack([handle, link])
    masks = {"target_handle": np.r_[np.ones(30, bool), np.zeros(14, bool)],
             "target_link": np.r_[np.zeros(30, bool), np.ones(14, bool)]}
    with pytest.raises(ValueError, match="no vertical plane"):
        estimate_front_normal(link, [0.0, 0.0, 0.5])
    assert get_grasp_predictor("antipodal").predict(points, masks, X_WB=np.eye(4)) == []
