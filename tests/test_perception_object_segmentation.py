"""The object at a prompt above the floor or a table (perception/object_segmentation.py), against the
simulator's masks on rendered frames (tests/data/object_seg_*.npz, written by benchmarks/object_segmentation.py:
each task's first frame and two frames two steps apart at the end of a tree episode), and on synthetic scenes.

Prompts are made as an operator's would be: the simulator's target box (or centre) with 2 cm Gaussian noise per
coordinate. The candidate points are the simulator's non-robot points.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handleit.perception.bucket_rim import ball_points_mask
from handleit.perception.chair_center import estimate_chair_center
from handleit.perception.color_markers import find_marker, marker_points
from handleit.perception.object_segmentation import ObjectTracker, check_prompt
from handleit.perception.segmentation_errors import SegmentationError

DATA = Path(__file__).parent / "data"
TASKS = ("PushChair", "MoveBucket", "PickCube", "PickObject")
SUPPORT = {"PushChair": "floor", "MoveBucket": "floor", "PickCube": "table", "PickObject": "table"}


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(int((a | b).sum()), 1))


def noisy_box(points: np.ndarray, rng) -> np.ndarray:
    return np.stack([points.min(axis=0), points.max(axis=0)]) + rng.normal(0.0, 0.02, (2, 3))


def frame(task: str, which: str = "start", k: str = ""):
    """points, colors, truth (the ball left out of MoveBucket's, as its tree sees it), candidate, exclude."""
    data = np.load(DATA / f"object_seg_{task}_{which}.npz")
    suffix = f"_{k}" if k else ""
    points, colors = data[f"points_W{suffix}"].astype(np.float64), data[f"colors{suffix}"]
    exclude = ball_points_mask(colors) if task == "MoveBucket" else None
    truth = data[f"truth{suffix}"] if exclude is None else data[f"truth{suffix}"] & ~exclude
    return points, colors, truth, ~data[f"robot{suffix}"], exclude


@pytest.mark.parametrize("task", TASKS)
def test_object_at_a_noisy_box_prompt_matches_the_simulator_mask(task):
    points, _, truth, candidate, exclude = frame(task)
    for seed in range(3):
        tracker = ObjectTracker(SUPPORT[task])
        mask = tracker.update(points, candidate, noisy_box(points[truth], np.random.default_rng(seed)),
                              exclude_mask=exclude)
        # The tabletop objects have 20-30 points: a point at the table's edge costs 0.04.
        assert iou(mask, truth) >= (0.95 if task in ("PushChair", "MoveBucket") else 0.9), (task, seed)
        assert not (mask & ~candidate).any()


@pytest.mark.parametrize("task", TASKS)
def test_object_at_a_noisy_point_prompt(task):
    points, _, truth, candidate, exclude = frame(task)
    prompt = points[truth].mean(axis=0) + np.random.default_rng(0).normal(0.0, 0.02, 3)
    mask = ObjectTracker(SUPPORT[task]).update(points, candidate, prompt, exclude_mask=exclude)
    assert iou(mask, truth) >= 0.9


def test_bucket_without_its_ball():
    points, colors, truth, candidate, _ = frame("MoveBucket")
    ball = ball_points_mask(colors)
    assert ball.sum() > 20  # the ball is seen, touching the bucket's inside
    tracker = ObjectTracker("floor")
    mask = tracker.update(points, candidate, noisy_box(points[truth], np.random.default_rng(0)), exclude_mask=ball)
    assert not (mask & ball).any()
    assert iou(mask, truth) >= 0.95


def test_chair_includes_its_casters_and_base():
    points, _, truth, candidate, _ = frame("PushChair")
    mask = ObjectTracker("floor").update(points, candidate, noisy_box(points[truth], np.random.default_rng(1)))
    low = truth & (points[:, 2] < 0.1)  # casters and the star base's legs
    assert low.sum() > 50 and (mask[low]).all()
    # The chair-centre estimate from the segmented points is the one from the simulator's points.
    found, true = estimate_chair_center(points[mask]), estimate_chair_center(points[truth])
    assert true.base_center_W is not None and found.base_center_W is not None
    assert np.linalg.norm(found.base_center_W[:2] - true.base_center_W[:2]) < 0.01


@pytest.mark.parametrize("task", ("PushChair", "PickCube"))
def test_tracked_between_frames_of_a_moved_object(task):
    """Found at the end of the episode (chair on the target, cube in the gripper), then followed two steps
    later without the prompt. (The bucket over the platform, found there first, would bring the platform's
    top inside its box along: the next test sees the platform at the start, as the tracker would.)"""
    points, _, truth, candidate, exclude = frame(task, "moved", "0")
    tracker = ObjectTracker(SUPPORT[task])
    first = tracker.update(points, candidate, noisy_box(points[truth], np.random.default_rng(2)),
                           exclude_mask=exclude)
    points, _, truth, candidate, exclude = frame(task, "moved", "1")
    second = tracker.update(points, candidate, None, exclude_mask=exclude)
    assert iou(first, frame(task, "moved", "0")[2]) >= 0.9
    assert iou(second, truth) >= 0.9


def test_platform_seen_at_the_start_stays_out_when_the_bucket_is_set_on_it():
    """The start frame's background (the platform) keeps the platform out of the bucket at the end; the bucket
    is found there again by its rim (a seed, as a rim marker would give)."""
    rng = np.random.default_rng(3)
    points, _, truth, candidate, exclude = frame("MoveBucket")
    tracker = ObjectTracker("floor")
    tracker.update(points, candidate, noisy_box(points[truth], rng), exclude_mask=exclude)
    for k in "01":
        points, _, truth, candidate, exclude = frame("MoveBucket", "moved", k)
        rim = truth & (points[:, 2] > points[truth, 2].max() - 0.03)
        mask = tracker.update(points, candidate, None, seed_mask=rim if k == "0" else None, exclude_mask=exclude)
        platform = ~truth & candidate & (np.abs(points[:, 0]) < 0.3) & (np.abs(points[:, 1]) < 0.3)
        # The fixture's start frame holds only the platform's half near the bucket (and a sample of the rest):
        # a few points of the far half under the bucket's rim are not background here.
        assert (mask & platform).sum() <= 0.05 * truth.sum()
        assert iou(mask, truth) >= 0.95


def test_seed_from_a_marker_painted_on_the_chair():
    """A marker band painted on the backrest of the rendered chair: marker_points finds it, and the object is
    the cluster that holds it (found with a prompt far off: the seed decides)."""
    points, colors, truth, candidate, _ = frame("PushChair")
    lime = (108, 237, 0)
    band = truth & (points[:, 2] > points[truth, 2].max() - 0.08)
    colors = colors.copy()
    colors[band] = lime
    assert not find_marker(colors[~band], lime).any()
    seed = marker_points(points, colors, lime, candidate)
    mask = ObjectTracker("floor").update(points, candidate, None, seed_mask=seed)
    assert iou(mask, truth) >= 0.95


def test_lost_while_hidden_then_found_again():
    points, _, truth, candidate, _ = frame("PickCube", "moved", "0")
    tracker = ObjectTracker("table")
    tracker.update(points, candidate, noisy_box(points[truth], np.random.default_rng(4)))
    points, _, truth, candidate, _ = frame("PickCube", "moved", "1")
    hidden = tracker.update(points, candidate & ~truth, None)  # the fingers hide the whole cube
    assert not hidden.any() and tracker.lost_updates == 1
    again = tracker.update(points, candidate, None)
    assert iou(again, truth) >= 0.9 and tracker.lost_updates == 0


def test_reset_forgets_the_object():
    points, _, truth, candidate, _ = frame("PickObject")
    tracker = ObjectTracker("table")
    tracker.update(points, candidate, noisy_box(points[truth], np.random.default_rng(5)))
    tracker.reset()
    assert tracker.object_points_W is None and tracker.plane is None
    with pytest.raises(SegmentationError, match="a prompt is needed"):
        tracker.update(points, candidate, None)


def synthetic_table(rng, table_z=0.75):
    """A floor, a 1 x 1 m table top at ``table_z`` with its front face, a 4 cm box and a 6 cm ball on it."""
    floor = np.column_stack([rng.uniform(-1, 1, 4000), rng.uniform(-1, 1, 4000), np.zeros(4000)])
    top = np.column_stack([rng.uniform(-0.5, 0.5, 6000), rng.uniform(-0.5, 0.5, 6000), np.full(6000, table_z)])
    front = np.column_stack([np.full(2000, -0.5), rng.uniform(-0.5, 0.5, 2000), rng.uniform(0, table_z, 2000)])
    box = rng.uniform(-0.02, 0.02, (600, 3))
    face = rng.integers(0, 3, 600)
    box[np.arange(600), face] = np.where(face == 2, 0.02, rng.choice([-0.02, 0.02], 600))  # sides and top
    box += [0.1, 0.1, table_z + 0.02]
    ball = rng.normal(size=(600, 3))
    ball = 0.03 * ball / np.linalg.norm(ball, axis=1, keepdims=True) + [-0.2, -0.1, table_z + 0.03]
    points = np.concatenate([floor, top, front, box, ball])
    labels = np.repeat([0, 1, 2, 3, 4], [4000, 6000, 2000, 600, 600])
    return points, labels


def test_table_top_found_at_its_height_and_the_object_on_it():
    rng = np.random.default_rng(6)
    points, labels = synthetic_table(rng)
    candidate = np.ones(len(points), dtype=bool)
    tracker = ObjectTracker("table")
    mask = tracker.update(points, candidate, [0.11, 0.09, 0.78])
    assert tracker.plane[3] == pytest.approx(-0.75, abs=0.003) and tracker.plane[2] > 0.99
    assert iou(mask, labels == 3) >= 0.9  # the sides' lowest 2 mm are table (clearance_m)
    ball = ObjectTracker("table").update(points, candidate, [[-0.25, -0.15, 0.74], [-0.15, -0.05, 0.82]])
    assert iou(ball, labels == 4) >= 0.9  # its lowest 2 mm cap is table too
    # Lifted 5 cm and moved 1 cm: followed, with its lowest points now too.
    moved = points.copy()
    moved[labels == 3] += [0.01, 0.0, 0.05]
    assert iou(tracker.update(moved, candidate, None), labels == 3) >= 0.99


def test_prompt_on_bare_floor_finds_no_object():
    rng = np.random.default_rng(7)
    points, labels = synthetic_table(rng)
    with pytest.raises(SegmentationError, match="no object above the floor"):
        ObjectTracker("floor").update(points, np.ones(len(points), dtype=bool), [0.8, 0.8, 0.1])


GOOD = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize("points, candidate, prompt, message", [
    (np.zeros((0, 3)), np.zeros(0, dtype=bool), [0, 0, 0], "empty"),
    (np.where(GOOD == 1.0, np.nan, GOOD), np.ones(4, dtype=bool), [0, 0, 0], "NaN or inf"),
    (np.where(GOOD == 1.0, np.inf, GOOD), np.ones(4, dtype=bool), [0, 0, 0], "NaN or inf"),
    (GOOD[:, :2], np.ones(4, dtype=bool), [0, 0, 0], r"shape \[N, 3\]"),
    ("abc", np.ones(4, dtype=bool), [0, 0, 0], "points_W"),
    (GOOD, np.ones(3, dtype=bool), [0, 0, 0], r"candidate_mask: expected shape \[4\]"),
    (GOOD, np.ones(4, dtype=int), [0, 0, 0], "candidate_mask: expected a boolean"),
    (GOOD, np.zeros(4, dtype=bool), [0, 0, 0], "none of the 4 points is a candidate"),
    (GOOD, np.ones(4, dtype=bool), [0, 0], r"prompt_W: expected a \[3\] point or a \[2, 3\] box"),
    (GOOD, np.ones(4, dtype=bool), np.zeros((3, 3)), r"prompt_W: expected a \[3\] point"),
    (GOOD, np.ones(4, dtype=bool), [0, np.nan, 0], "prompt_W: contains NaN"),
    (GOOD, np.ones(4, dtype=bool), [5.0, 5.0, 5.0], "prompt outside the cloud: the nearest candidate point is"),
    (GOOD, np.ones(4, dtype=bool), [[3, 3, 3], [4, 4, 4]], "prompt outside the cloud: no candidate point inside"),
    (GOOD, np.ones(4, dtype=bool), None, "a prompt is needed"),
])
def test_bad_input_is_named(points, candidate, prompt, message):
    with pytest.raises(SegmentationError, match=message):
        ObjectTracker("floor").update(points, candidate, prompt)


def test_bad_seed_and_constructor_arguments():
    with pytest.raises(SegmentationError, match="seed_mask"):
        ObjectTracker("floor").update(GOOD, np.ones(4, dtype=bool), [0, 0, 0], seed_mask=np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match="support"):
        ObjectTracker("shelf")
    with pytest.raises(TypeError, match="unknown parameters"):
        ObjectTracker("floor", eps=0.1)


def test_noisy_box_corners_that_cross_are_ordered():
    box = check_prompt([[0.0, 0.1, 0.03], [0.05, 0.08, 0.06]])  # y crossed: a thin object's noisy box
    assert np.array_equal(box, [[0.0, 0.08, 0.03], [0.05, 0.1, 0.06]])


def _slab(rng, lo, hi, n):
    return rng.uniform(lo, hi, size=(n, 3))


def test_a_chair_found_from_its_marked_backrest_takes_in_a_base_wider_than_it_and_a_lone_caster():
    """Seen apart from the marked backrest (its column hidden), a star base reaching beyond the backrest's box
    and a caster beyond it join the chair; a taller box beside the chair and a low one 40 cm off
    its footprint stay out (chair-test-000 and -002 through color_marker: the caster circle failed to fit)."""
    rng = np.random.default_rng(0)
    floor = np.column_stack([rng.uniform(-1.5, 1.5, 6000), rng.uniform(-1.5, 1.5, 6000), np.zeros(6000)])
    backrest = _slab(rng, (-0.25, 0.20, 0.55), (0.25, 0.24, 0.90), 800)
    base = _slab(rng, (-0.30, -0.15, 0.04), (0.30, 0.30, 0.10), 600)  # beyond the backrest's box by 5-35 cm
    caster = _slab(rng, (0.05, -0.29, 0.01), (0.09, -0.25, 0.05), 30)  # 10 cm beyond the base, 45 from the backrest
    tall_box = _slab(rng, (0.45, 0.10, 0.01), (0.75, 0.40, 1.20), 800)  # beside it, higher than the backrest
    low_box = _slab(rng, (-0.95, -0.40, 0.01), (-0.75, -0.20, 0.15), 200)  # 45 cm beyond the chair's footprint
    points = np.concatenate([floor, backrest, base, caster, tall_box, low_box])
    part = np.concatenate([np.full(len(a), i) for i, a in enumerate([floor, backrest, base, caster, tall_box, low_box])])
    seed = (part == 1) & (points[:, 2] > 0.85)
    mask = ObjectTracker("floor").update(points, np.ones(len(points), bool), None, seed_mask=seed)
    assert mask[(part >= 1) & (part <= 3)].all()
    assert not mask[(part == 0) | (part == 4) | (part == 5)].any()


def test_a_caster_that_comes_into_view_while_tracking_joins_the_chair_and_a_raised_support_does_not():
    """Tracked from its backrest and seat, a chair whose caster shows only later, 20 cm beside their box, takes
    it in (it was once remembered as background and kept out for good: chair-test-000's centre then came from
    the seat's box, 25 cm off). A piece of a 0.1 m platform top beside it, the near end of a step whose far part
    is background (a bucket's platform), and a floor-standing box 50 cm off, stay out."""
    rng = np.random.default_rng(1)
    floor = np.column_stack([rng.uniform(-1.5, 1.5, 6000), rng.uniform(-1.5, 1.5, 6000), np.zeros(6000)])
    backrest = _slab(rng, (-0.25, 0.20, 0.45), (0.25, 0.24, 0.95), 800)
    seat = _slab(rng, (-0.25, -0.05, 0.40), (0.25, 0.20, 0.45), 400)
    back_caster = _slab(rng, (-0.02, 0.18, 0.01), (0.02, 0.22, 0.06), 30)  # seen from the start, under the seat
    caster = _slab(rng, (-0.47, 0.00, 0.01), (-0.43, 0.04, 0.06), 30)  # 18-22 cm beside the box
    platform_top = _slab(rng, (0.30, -0.10, 0.10), (0.42, 0.05, 0.10), 60)  # 5-17 cm beside, 10 cm up
    far_box = _slab(rng, (0.75, -0.05, 0.01), (0.85, 0.05, 0.10), 60)  # 50 cm beside: background
    # A step 10 cm high, from 5 cm beside the box on: its far part is remembered as background at the start, and
    # its near end (top and the side that stands on the floor) is left a small piece beside the chair.
    step = np.concatenate([_slab(rng, (0.30, -0.08, 0.10), (0.80, 0.08, 0.10), 400),
                           _slab(rng, (0.30, -0.08, 0.00), (0.30, 0.08, 0.10), 60)])
    tracker = ObjectTracker("floor")
    start = np.concatenate([floor, backrest, seat, back_caster, far_box, step])
    prompt = np.array([[-0.27, -0.07, 0.0], [0.27, 0.26, 0.97]])
    first = tracker.update(start, np.ones(len(start), bool), prompt)
    assert first[len(floor):len(floor) + len(backrest) + len(seat) + len(back_caster)].all()
    assert not first[:len(floor)].any() and not first[-len(step):].any()
    parts = [floor, backrest, seat, back_caster, caster, platform_top, far_box, step]
    points = np.concatenate(parts)
    part = np.concatenate([np.full(len(a), i) for i, a in enumerate(parts)])
    for _ in range(2):  # seen twice: the caster is not remembered as background in between
        mask = tracker.update(points, np.ones(len(points), bool), None)
        assert mask[(part >= 1) & (part <= 4)].all()
        assert not mask[(part == 0) | (part >= 5)].any()


def test_pieces_beside_a_short_object_stay_out():
    """A bucket-high object (0.4 m) takes in no floor-standing piece beside it, alone or not: beside MoveBucket's
    bucket such pieces were the platform's near edge, cut up by occlusion (bucket-train-012 took the platform in)."""
    rng = np.random.default_rng(2)
    floor = np.column_stack([rng.uniform(-1.5, 1.5, 6000), rng.uniform(-1.5, 1.5, 6000), np.zeros(6000)])
    bucket = _slab(rng, (-0.15, -0.15, 0.01), (0.15, 0.15, 0.40), 900)
    tracker = ObjectTracker("floor")
    start = np.concatenate([floor, bucket])
    tracker.update(start, np.ones(len(start), bool), np.array([[-0.17, -0.17, 0.0], [0.17, 0.17, 0.42]]))
    edge = _slab(rng, (0.30, -0.05, 0.01), (0.32, 0.05, 0.10), 40)  # 15 cm beside, on the floor, alone
    points = np.concatenate([floor, bucket, edge])
    mask = tracker.update(points, np.ones(len(points), bool), None)
    assert mask[len(floor):len(floor) + len(bucket)].all() and not mask[-len(edge):].any()
