"""Segmenters as plug-ins: the registry, the input checks every bundled segmenter shares, the trees' segment
node and its visible "target found?" check, and the proof that with a segmenter other than ``simulator``
the observation handed to a tree carries no simulator masks."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import handleit.envs
from handleit.behaviors import make_tree_solver
from handleit.behaviors.segmentation import segment_cloud
from handleit.harness.sim_robot import SimRobot
from handleit.perception.color_markers import srgb_of_linear
from handleit.perception.segmentation_errors import SegmentationError
from handleit.perception.segmenters import (
    SEGMENT_TARGETS,
    SimulatorSegmenter,
    available_segmenters,
    get_segmenter,
    register_segmenter,
    unregister_segmenter,
)
from handleit.types import DEFAULT_MARKER_RGB

BUNDLED = ("simulator", "robot_self_filter", "color_marker", "geometric")


@pytest.fixture(scope="module")
def drawer():
    """A drawer env with small cameras (cheap), its robot without the simulator's masks, and one with them."""
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="train", camera_width=160,
                             camera_height=64)
    yield env
    env.close()


def test_bundled_segmenters_are_registered():
    assert set(BUNDLED) <= set(available_segmenters())


def test_unknown_segmenter_and_target_are_named():
    with pytest.raises(ValueError, match="unknown segmenter 'nope'.*geometric"):
        get_segmenter("nope", "cabinet_part", model=None)
    with pytest.raises(ValueError, match="unknown segmentation target 'shelf'"):
        get_segmenter("simulator", "shelf", model=None)


def test_register_refuses_a_taken_name_and_a_non_segmenter():
    @register_segmenter("test_nothing")
    def nothing(target, model):
        return object()  # no mask_names, reset or segment

    try:
        with pytest.raises(ValueError, match="already registered"):
            register_segmenter("test_nothing")(lambda target, model: None)
        with pytest.raises(ValueError, match="lacks mask_names"):
            get_segmenter("test_nothing", "cabinet_part", model=None)
    finally:
        unregister_segmenter("test_nothing")
    assert "test_nothing" not in available_segmenters()


def _observation(drawer_env, seed=0, sim_masks=True, prompt="box"):
    robot = SimRobot(drawer_env, sim_masks=sim_masks, prompt=prompt)
    return robot, robot.reset(seed=seed)


def test_simulator_segmenter_passes_the_simulators_masks_and_refuses_an_observation_without(drawer):
    robot, obs = _observation(drawer)
    masks = SimulatorSegmenter("cabinet_part").segment(obs)
    assert set(masks) == {"target_handle", "target_link", "robot"}
    for name in masks:
        np.testing.assert_array_equal(masks[name], obs.masks[name])
    _, bare = _observation(drawer, sim_masks=False)
    assert bare.masks == {}
    with pytest.raises(SegmentationError, match="needs the simulator's masks"):
        SimulatorSegmenter("cabinet_part").segment(bare)


@pytest.mark.parametrize("name", ["robot_self_filter", "geometric", "color_marker"])
def test_every_bundled_segmenter_names_bad_clouds(drawer, name):
    robot, obs = _observation(drawer, sim_masks=False)
    for target in SEGMENT_TARGETS:
        segmenter = get_segmenter(name, target, robot.model)
        empty = dataclasses.replace(obs, points=np.zeros((0, 3), np.float32), colors=np.zeros((0, 3), np.uint8))
        with pytest.raises(SegmentationError, match="empty"):
            segmenter.segment(empty)
        nan = obs.points.copy()
        nan[:5] = np.nan
        with pytest.raises(SegmentationError, match="5 NaN"):
            segmenter.segment(dataclasses.replace(obs, points=nan))


def test_geometric_segmenter_names_a_missing_prompt_and_a_prompt_outside_the_cloud(drawer):
    robot, obs = _observation(drawer, sim_masks=False, prompt="none")
    segmenter = get_segmenter("geometric", "cabinet_part", robot.model)
    with pytest.raises(SegmentationError, match="needs a prompt"):
        segmenter.segment(obs)
    far = dataclasses.replace(obs, target_prompt_W=np.array([30.0, 30.0, 1.0]))
    with pytest.raises(SegmentationError, match="prompt"):
        segmenter.segment(far)


def test_color_marker_segmenter_names_a_missing_marker_and_still_knows_the_robot(drawer):
    robot, obs = _observation(drawer, sim_masks=False)  # an env without the marker option: no marker colour
    segmenter = get_segmenter("color_marker", "cabinet_part", robot.model)
    with pytest.raises(SegmentationError, match="no marker colour") as raised:
        segmenter.segment(obs)
    # The robot's own mask was made before the marker was looked for, and comes with the error: a tree that
    # searches for its target must not take its own body for the nearest object (it drove after itself).
    robot_mask = segmenter.self_filter.robot_mask(obs)
    assert robot_mask.any()
    masks = raised.value.masks
    assert set(masks) == {"target_handle", "target_link", "robot"}
    assert np.array_equal(masks["robot"], robot_mask) and not masks["target_handle"].any()
    assert not masks["target_link"].any()
    copy = pickle.loads(pickle.dumps(raised.value))  # across the segmentation worker's pipe
    assert str(copy) == str(raised.value) and np.array_equal(copy.masks["robot"], robot_mask)
    keep, segmented, error = segment_cloud(segmenter, obs)  # what the tree's segment node hands on
    assert "no marker colour" in error and np.array_equal(segmented["robot"], robot_mask)


def test_color_marker_segmenter_names_a_marker_in_two_places(drawer):
    robot, obs = _observation(drawer, sim_masks=False)
    segmenter = get_segmenter("color_marker", "cabinet_part", robot.model)
    colors = obs.colors.copy()
    marker = srgb_of_linear(DEFAULT_MARKER_RGB)
    off_robot = np.flatnonzero(~segmenter.self_filter.robot_mask(obs) & (obs.points[:, 2] > 0.05))
    # Two patches of marker colour a metre apart: two candidate targets, which one is meant is unknown. Each patch is
    # 40 points on a 1 cm grid added to the cloud in front of a point of it: the small cameras' cloud is too sparse
    # (the 40 nearest points of one spread over 8-30 cm) for recoloured points to stay one cluster.
    by_y = off_robot[np.argsort(obs.points[off_robot, 1])]
    grid = np.array([[0.0, 0.01 * i, 0.01 * j] for i in range(5) for j in range(8)])
    centres = [by_y[len(by_y) // 10], by_y[-len(by_y) // 10]]
    added = np.concatenate([obs.points[c] + [-0.01, 0.0, 0.0] + grid for c in centres]).astype(obs.points.dtype)
    points = np.concatenate([obs.points, added])
    colors = np.concatenate([colors, np.tile(np.asarray(marker, dtype=colors.dtype), (len(added), 1))])
    extra = {}
    if obs.sensor_index is not None:  # the added points as seen by the camera of the point they stand in front of
        extra["sensor_index"] = np.concatenate([obs.sensor_index, np.repeat(obs.sensor_index[centres], len(grid))])
    obs = dataclasses.replace(obs, points=points, **extra)
    assert np.ptp(points[colors.astype(int).sum(1) == sum(marker)][:, 1]) > 0.8
    with pytest.raises(SegmentationError, match="two places"):
        segmenter.segment(dataclasses.replace(obs, colors=colors))


def test_robot_self_filter_segmenter_alone_is_refused_by_a_tree(drawer):
    robot, _ = _observation(drawer, sim_masks=False)
    with pytest.raises(ValueError, match="makes the masks \\['robot'\\].*needs"):
        make_tree_solver("OpenCabinetDrawer", robot.model, segmenter="robot_self_filter")


class _Spy:
    """A segmenter plug-in that records what it was handed and delegates to the geometric segmenter."""

    seen: list = []

    def __init__(self, target, model, fail_first: int = 0):
        self.inner = get_segmenter("geometric", target, model)
        self.mask_names = self.inner.mask_names
        self.fail_first = fail_first

    def reset(self):
        self.inner.reset()

    def segment(self, observation):
        _Spy.seen.append(dict(observation.masks))
        if self.fail_first > 0:
            self.fail_first -= 1
            raise SegmentationError("test: no target in view")
        return self.inner.segment(observation)


def test_with_another_segmenter_the_tree_sees_no_simulator_masks_and_looks_again_after_an_error(drawer):
    register_segmenter("test_spy", replace=True)(_Spy)
    try:
        robot, obs = _observation(drawer, sim_masks=False)
        solver = make_tree_solver("OpenCabinetDrawer", robot.model, segmenter="test_spy",
                                  segmenter_kwargs={"fail_first": 2})
        solver.reset(obs)
        _Spy.seen.clear()
        for _ in range(4):
            command = solver.step(obs)
            assert obs.masks == {}  # what the harness hands the solver: no simulator masks at all
            robot.act(command)
            obs = robot.observe()
        assert len(_Spy.seen) == 4 and all(seen == {} for seen in _Spy.seen)
        # The failed check is a visible node, recorded once for two failing ticks; then the target is found.
        assert solver.tools.failures.count("target found?") == 1
        assert "target found?" in solver.unicode_tree()
        segmented = solver.bb.observation.masks
        assert set(segmented) == {"target_handle", "target_link", "robot"}
        assert segmented["target_link"].any() and segmented["robot"].any()
    finally:
        unregister_segmenter("test_spy")


def test_a_cloud_seen_again_keeps_its_masks_and_is_segmented_once(drawer):
    """A real-time robot's camera runs slower than the control rate: ticks between its frames hand on the
    same cloud, which is segmented once."""
    register_segmenter("test_spy", replace=True)(_Spy)
    try:
        robot, obs = _observation(drawer, sim_masks=False)
        solver = make_tree_solver("OpenCabinetDrawer", robot.model, segmenter="test_spy")
        solver.reset(obs)
        _Spy.seen.clear()
        solver.step(obs)
        first = solver.bb.observation.masks
        later = dataclasses.replace(obs, qpos=obs.qpos + 0.001, time_s=obs.time_s + 0.01)  # new joints, same cloud
        solver.step(later)
        assert len(_Spy.seen) == 1
        assert solver.bb.observation.qpos[0] == later.qpos[0]
        for name in first:
            np.testing.assert_array_equal(solver.bb.observation.masks[name], first[name])
        robot.act(solver.step(later))
        solver.step(robot.observe())  # a new cloud: segmented again
        assert len(_Spy.seen) == 2
    finally:
        unregister_segmenter("test_spy")


def test_an_installed_package_offers_a_segmenter_through_the_entry_point_group(drawer, monkeypatch):
    import importlib.metadata

    offered = importlib.metadata.EntryPoint("spy_from_package", "tests.test_segmenters:_Spy", "handleit.segmenters")
    real = importlib.metadata.entry_points

    def entry_points(**selection):
        return [offered] if selection.get("group") == "handleit.segmenters" else real(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    try:
        assert "spy_from_package" in available_segmenters()
        robot, _ = _observation(drawer, sim_masks=False)
        segmenter = get_segmenter("spy_from_package", "cabinet_part", robot.model)
        assert isinstance(segmenter, _Spy)
    finally:
        unregister_segmenter("spy_from_package")
