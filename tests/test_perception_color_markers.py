"""Colour markers (perception/color_markers.py): the HSV threshold under shading and highlights, the one marker
cluster, the errors; on synthetic colours, on a rendered PushChair frame painted in the test, and on a marker
the env renders itself (``target_marker_rgb``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handleit.perception.color_markers import find_marker, marker_points, rgb_to_hsv, srgb_of_linear
from handleit.perception.segmentation_errors import SegmentationError

DATA = Path(__file__).parent / "data"
LIME = srgb_of_linear((0.15, 0.85, 0.0))  # envs/markers.py DEFAULT_MARKER_RGB, as the cameras show it


def shaded(rgb, brightness, white=0.0, noise=0, rng=None):
    """Colours of a surface of displayed colour ``rgb`` under white light: brightness scales it, a specular
    highlight mixes in white, the sensor adds noise."""
    rgb = np.asarray(rgb, dtype=np.float64)
    white = np.asarray(white, dtype=np.float64)[..., None]
    c = np.asarray(brightness, dtype=np.float64)[:, None] * ((1 - white) * rgb[None] + white * 255.0)
    if noise:
        c = c + rng.integers(-noise, noise + 1, size=c.shape)
    return np.clip(np.round(c), 0, 255).astype(np.uint8)


def test_srgb_of_linear_matches_the_displayed_hue():
    assert LIME == (108, 237, 0)
    assert rgb_to_hsv(np.array([LIME]) / 255.0)[0, 0] == pytest.approx(92.7, abs=0.5)


def test_marker_found_under_shading_and_highlights_greys_and_other_hues_not():
    rng = np.random.default_rng(0)
    n = 500
    marker = shaded(LIME, rng.uniform(0.2, 1.0, n), white=rng.uniform(0.0, 0.3, n), noise=4, rng=rng)
    others = np.concatenate([
        shaded((200, 200, 200), rng.uniform(0.05, 1.0, n), noise=4, rng=rng),  # floor, robot, metal
        shaded((255, 20, 20), rng.uniform(0.3, 1.0, n)),  # the red target, red buckets
        shaded((0, 255, 255), rng.uniform(0.3, 1.0, n)),  # the cyan ball
        shaded((0, 220, 40), rng.uniform(0.3, 1.0, n)),  # a saturated green, 35 degrees off
        shaded((150, 170, 90), rng.uniform(0.3, 1.0, n)),  # olive upholstery: weakly saturated
        shaded(LIME, rng.uniform(0.0, 0.08, n)),  # the marker in deep shadow: its hue is noise
    ])
    assert find_marker(marker, LIME).all()
    assert not find_marker(others, LIME).any()
    # A tighter threshold is the caller's choice.
    assert not find_marker(shaded((60, 255, 0), [1.0]), LIME, hue_tolerance_deg=5).any()


@pytest.mark.parametrize("colors, message", [
    (np.zeros((4, 3), dtype=np.float32), "uint8"),
    (np.zeros((4, 4), dtype=np.uint8), "shape"),
    (np.zeros(3, dtype=np.uint8), "shape"),
])
def test_bad_colours_are_named(colors, message):
    with pytest.raises(SegmentationError, match=message):
        find_marker(colors, LIME)


@pytest.mark.parametrize("rgb, message", [((128, 128, 128), "too grey"), ((5, 10, 0), "dark"),
                                          ((0, 300, 0), "0-255"), ((0, 1), "three values")])
def test_bad_marker_colour_is_named(rgb, message):
    with pytest.raises(SegmentationError, match=message):
        find_marker(np.zeros((2, 3), dtype=np.uint8), rgb)


def scene(rng, patches):
    """A grey floor and a grey 1 x 1 m wall at x = 1 with marker patches (centre yz, half size m) painted on it."""
    floor = np.column_stack([rng.uniform(-1, 1, 3000), rng.uniform(-1, 1, 3000), np.zeros(3000)])
    wall = np.column_stack([np.ones(4000), rng.uniform(-0.5, 0.5, 4000), rng.uniform(0.0, 1.0, 4000)])
    points = np.concatenate([floor, wall])
    colors = shaded((180, 180, 180), rng.uniform(0.3, 1.0, len(points)))
    painted = np.zeros(len(points), dtype=bool)
    for centre, half in patches:
        painted |= (np.abs(points[:, 0] - 1) < 1e-9) & np.all(np.abs(points[:, 1:] - centre) <= half, axis=1)
    colors[painted] = shaded(LIME, rng.uniform(0.3, 1.0, painted.sum()))
    return points, colors, painted


def test_marker_points_one_patch_and_a_patch_split_by_a_gripper():
    rng = np.random.default_rng(1)
    points, colors, painted = scene(rng, [((0.0, 0.8), 0.05)])
    candidate = np.ones(len(points), dtype=bool)
    assert np.array_equal(marker_points(points, colors, LIME, candidate), painted)
    # Split in two 20 cm apart (a gripper in front of the tape): still one marker.
    points, colors, painted = scene(rng, [((-0.15, 0.8), 0.05), ((0.15, 0.8), 0.05)])
    assert np.array_equal(marker_points(points, colors, LIME, candidate), painted)
    # Stray marker-coloured pixels (fewer than min_points together) are ignored.
    colors[rng.choice(np.flatnonzero(~painted), 3, replace=False)] = LIME
    assert np.array_equal(marker_points(points, colors, LIME, candidate), painted)


def test_marker_points_not_on_the_robot():
    rng = np.random.default_rng(2)
    points, colors, painted = scene(rng, [((0.0, 0.8), 0.05)])
    robot = painted & (points[:, 1] > 0)
    result = marker_points(points, colors, LIME, ~robot)
    assert np.array_equal(result, painted & ~robot)


def test_no_marker_names_the_colour_and_the_count():
    rng = np.random.default_rng(3)
    points, colors, painted = scene(rng, [])
    colors[:4] = LIME  # 4 pixels: fewer than min_points
    with pytest.raises(SegmentationError, match=r"no marker colour found: 4 candidate points match .*108, 237, 0"):
        marker_points(points, colors, LIME, np.ones(len(points), dtype=bool))
    scattered = rng.choice(len(points), 30, replace=False)  # 30 pixels spread over 2 m: no cluster
    colors[scattered] = LIME
    with pytest.raises(SegmentationError, match="scattered"):
        marker_points(points, colors, LIME, np.ones(len(points), dtype=bool), cluster_eps_m=0.01)


def test_marker_in_two_places_names_both_centres():
    rng = np.random.default_rng(4)
    points, colors, painted = scene(rng, [((-0.4, 0.2), 0.05), ((0.4, 0.9), 0.05)])
    with pytest.raises(SegmentationError, match="marker found in two places") as error:
        marker_points(points, colors, LIME, np.ones(len(points), dtype=bool))
    assert "[1.0, -0.40" in str(error.value) and "[1.0, 0.39" in str(error.value)  # both centres (m)


@pytest.mark.parametrize("change, message", [
    (lambda p, c, m: (p[:0], c[:0], m[:0]), "empty"),
    (lambda p, c, m: (np.where(np.arange(len(p))[:, None] == 5, np.nan, p), c, m), "NaN"),
    (lambda p, c, m: (p[:, :2], c, m), "shape"),
    (lambda p, c, m: (p, c[:-1], m), "colours for"),
    (lambda p, c, m: (p, c.astype(np.float64), m), "uint8"),
    (lambda p, c, m: (p, c, m.astype(int)), "boolean"),
])
def test_marker_points_bad_input_is_named(change, message):
    rng = np.random.default_rng(5)
    points, colors, _ = scene(rng, [((0.0, 0.8), 0.05)])
    p, c, m = change(points, colors, np.ones(len(points), dtype=bool))
    with pytest.raises(SegmentationError, match=message):
        marker_points(p, c, LIME, m)


def test_marker_painted_on_a_rendered_chair_is_found_and_nothing_else():
    """A rendered PushChair frame (tests/data fixture): the backrest's top 6 cm painted lime, shaded by the
    rendered pixel's own brightness; the scene's colours alone match nothing."""
    frame = np.load(DATA / "object_seg_PushChair_start.npz")
    points, colors, chair = frame["points_W"].astype(np.float64), frame["colors"], frame["truth"]
    candidate = ~frame["robot"]
    assert not find_marker(colors, LIME).any()
    top = points[chair, 2].max()
    painted = chair & (points[:, 2] > top - 0.06)
    brightness = colors[painted].max(axis=1) / 255.0
    colors = colors.copy()
    colors[painted] = shaded(LIME, np.clip(brightness, 0.2, 1.0))
    found = marker_points(points, colors, LIME, candidate)
    assert np.array_equal(found, painted)


@pytest.mark.parametrize("task", ("PickCube", pytest.param("PushChair", marks=pytest.mark.slow)))
def test_marker_rendered_by_the_env_is_found_and_seeds_the_object(task):
    """The env paints its own marker (``target_marker_rgb``: the whole pick object, a band over the backrest's
    top): marker_points finds it on the target only, and the object tracker seeded by it and given the env's
    noisy prompt box matches the simulator's mask."""
    import handleit.envs
    from handleit.envs.markers import DEFAULT_MARKER_RGB
    from handleit.harness.sim_robot import SimRobot
    from handleit.perception.object_segmentation import ObjectTracker

    env = handleit.envs.make(task, obs_mode="pointcloud", split="train", target_marker_rgb=DEFAULT_MARKER_RGB)
    try:
        obs = SimRobot(env, prompt="box").reset(seed=1)
    finally:
        env.close()
    truth = obs.masks["target" if task == "PickCube" else "target_link"]
    candidate = ~obs.masks["robot"]
    marker_rgb = srgb_of_linear(DEFAULT_MARKER_RGB)
    seed = marker_points(obs.points, obs.colors, marker_rgb, candidate)
    assert seed.sum() >= 10 and not (seed & ~truth).any()
    if task == "PickCube":
        assert (seed == truth).mean() == 1.0  # the whole cube is the marker
    mask = ObjectTracker("table" if task == "PickCube" else "floor").update(
        obs.points, candidate, obs.target_prompt_W, seed_mask=seed)
    assert (mask & truth).sum() / (mask | truth).sum() >= 0.95
