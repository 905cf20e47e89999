"""CabinetPartTracker on recorded simulator views (tests/data/cabinet_seg_*.npz), against the simulator's masks.

The fixtures are observations of the drawer tree opening a drawer (train cabinet, seed 0) and the door tree
swinging a door (seed 1), every 3rd / 6th control step, cut to the cabinet and downsampled (every target
point kept, 3,000 others), with the simulator's robot, target_link and target_handle masks and a box prompt
made from the target's points in the closed views plus 2 cm Gaussian noise per coordinate (recorded once with
the trees, as benchmarks/cabinet_segmentation.py runs them; the recording script is not in the repository).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handleit.perception.cabinet_segmentation import CabinetPartTracker
from handleit.perception.segmentation_errors import SegmentationError

DATA = Path(__file__).parent / "data"


def _frames(name: str):
    data = np.load(DATA / f"cabinet_seg_{name}.npz")
    frames = [{key: data[f"{key}_{i}"] for key in ("points", "robot", "link", "handle", "X_WB", "open_fraction")}
              for i in range(int(data["n_frames"]))]
    return data["prompt_box_W"].astype(np.float64), frames


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def _track(name: str, **params):
    box, frames = _frames(name)
    tracker = CabinetPartTracker(**params)
    rows = []
    for f in frames:
        handle, part = tracker.update(f["points"], ~f["robot"], box, f["X_WB"])
        assert handle.dtype == bool and part.dtype == bool and handle.shape == part.shape == (len(f["points"]),)
        assert not (handle & ~part).any()  # the part includes its handle, as the simulator's target_link
        assert not (part & f["robot"]).any()
        rows.append((float(f["open_fraction"]), _iou(part, f["link"]), _iou(handle, f["handle"]),
                     tracker.kind, tracker.displacement_m, tracker.angle_rad))
    return tracker, rows


def test_drawer_part_and_handle_follow_the_simulator_masks_while_it_opens():
    tracker, rows = _track("drawer")
    closed = [r for r in rows if r[0] < 0.005]
    opened = [r for r in rows if r[0] >= 0.1]
    assert len(closed) >= 3 and len(opened) >= 8
    # Closed: the part is the prompt box's rectangle on the front (the prompt is 2 cm off per coordinate).
    assert min(r[1] for r in closed) > 0.7
    assert min(r[2] for r in closed) > 0.5
    # Open: the front is off the cabinet's plane, so its own points bound it; sides and bottom are included.
    assert min(r[1] for r in opened) > 0.9
    assert min(r[2] for r in opened) > 0.85
    assert tracker.kind == "drawer"
    displacements = [r[4] for r in opened]
    assert np.all(np.diff(displacements) > 0)
    assert 0.25 < displacements[-1] < 0.35  # the drawer of this cabinet travels ~0.29 m
    assert all(r[5] == 0.0 for r in rows)


def test_door_leaf_and_handle_follow_the_simulator_masks_while_it_swings():
    tracker, rows = _track("door")
    opened = [r for r in rows if r[0] >= 0.1]
    assert len(opened) >= 10
    assert min(r[1] for r in rows) > 0.85
    assert np.mean([r[1] for r in opened]) > 0.95
    assert np.mean([r[2] for r in rows]) > 0.8
    assert min(r[2] for r in rows) > 0.6
    assert tracker.kind == "door" and tracker.hinge_side in (-1, 1)
    assert tracker.angle_rad > 1.4  # the env's swing at the last frame: open fraction 0.98 of ~1.7 rad
    assert all(r[4] == 0.0 for r in rows)


def test_kind_given_by_the_caller_gives_the_same_drawer():
    _, auto = _track("drawer")
    _, given = _track("drawer", kind="drawer")
    assert [round(r[1], 6) for r in given] == [round(r[1], 6) for r in auto]


def test_hidden_handle_gives_an_empty_handle_mask_and_the_part_is_still_tracked():
    """The gripper closed on the handle: its points are gone (the robot filter takes the fingers) and the
    tracker keeps the part without raising."""
    box, frames = _frames("drawer")
    tracker = CabinetPartTracker()
    for f in frames[:-1]:
        tracker.update(f["points"], ~f["robot"], box, f["X_WB"])
    last = frames[-1]
    candidates = ~last["robot"] & ~last["handle"]
    handle, part = tracker.update(last["points"], candidates, box, last["X_WB"])
    assert not handle.any()
    assert _iou(part, last["link"] & ~last["handle"]) > 0.9


def test_handle_hint_is_the_handle_and_the_part_is_the_region_behind_it():
    box, frames = _frames("drawer")
    f = frames[0]
    tracker = CabinetPartTracker()
    handle, part = tracker.update(f["points"], ~f["robot"], box, f["X_WB"], handle_hint_mask=f["handle"].copy())
    assert np.array_equal(handle, f["handle"] & ~f["robot"])
    assert _iou(part, f["link"]) > 0.7


def test_point_prompt_on_the_handle_finds_that_handle_and_not_its_neighbours():
    """A point prompt (2 cm off the handle's centre): the nearest proud cluster is the handle; the part is
    bounded by the neighbouring drawers' handles (above and below on this cabinet)."""
    _, frames = _frames("drawer")
    f = frames[0]
    rng = np.random.default_rng(0)
    prompt = f["points"][f["handle"]].mean(axis=0) + rng.normal(0.0, 0.02, 3)
    tracker = CabinetPartTracker()
    handle, part = tracker.update(f["points"], ~f["robot"], prompt, f["X_WB"])
    assert _iou(handle, f["handle"]) > 0.5
    assert not (handle & ~f["link"]).any()  # no neighbour's handle
    assert part[f["handle"]].mean() > 0.5
    assert (part & f["link"]).sum() > 0.5 * f["link"].sum()


def test_reset_forgets_the_part():
    box, frames = _frames("drawer")
    tracker = CabinetPartTracker()
    for f in frames:
        tracker.update(f["points"], ~f["robot"], box, f["X_WB"])
    assert tracker.kind == "drawer" and tracker.displacement_m > 0.2
    tracker.reset()
    assert tracker.kind is None and tracker.displacement_m == 0.0 and tracker.front_normal_W is None


# ------------------------------------------------------------------------------------------------ bad input


def _closed_view():
    box, frames = _frames("drawer")
    f = frames[0]
    return f["points"].astype(np.float64), ~f["robot"], box, f["X_WB"]


@pytest.mark.parametrize("case, message", [
    ("empty", "empty"),
    ("nan", "NaN or inf"),
    ("shape", "expected shape [N, 3]"),
    ("no candidates", "no candidate points"),
    ("mask shape", "candidate_mask"),
    ("prompt shape", "prompt_W: expected a [3] point or a [2, 3] box"),
    ("prompt nan", "prompt_W: contains NaN or inf"),
    ("point far", "away from the cloud"),
    ("box far", "away from the cloud"),
    ("pose", "X_WB"),
])
def test_bad_input_raises_a_segmentation_error_naming_the_problem(case, message):
    points, candidates, box, X_WB = _closed_view()
    prompt = box
    if case == "empty":
        points, candidates = np.zeros((0, 3)), np.zeros(0, dtype=bool)
    elif case == "nan":
        points = points.copy()
        points[5, 1] = np.nan
    elif case == "shape":
        points = points[:, :2]
    elif case == "no candidates":
        candidates = np.zeros_like(candidates)
    elif case == "mask shape":
        candidates = candidates[:-1]
    elif case == "prompt shape":
        prompt = np.zeros((3, 3))
    elif case == "prompt nan":
        prompt = np.array([0.0, np.inf, 0.5])
    elif case == "point far":
        prompt = np.array([5.0, 5.0, 0.5])
    elif case == "box far":
        prompt = box + np.array([3.0, 0.0, 0.0])
    elif case == "pose":
        X_WB = np.eye(3)
    with pytest.raises(SegmentationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        CabinetPartTracker().update(points, candidates, prompt, X_WB)


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        CabinetPartTracker(kind="shelf")


def test_a_lip_along_the_drawers_top_edge_is_its_handle():
    """drawer-train-023's target drawer has a lip (a plate 3.5 cm proud along the top edge): seen from the
    cameras above, it hides the face just below it, so it lies above the face's seen bounds; it is still the
    handle (it was missed before HANDLE_ABOVE_FACE_M: 0 handle points, "handle seen in time?" failed)."""
    import handleit.envs
    from handleit.harness.sim_robot import SimRobot

    # The bundled cameras' resolution (400 x 160): at the tests' small one the lip is a handful of pixels.
    env = handleit.envs.make("OpenCabinetDrawer", obs_mode="pointcloud", split="train")
    obs = SimRobot(env).reset(seed=23, options={"model_id": "drawer-train-023"})
    tracker = CabinetPartTracker()
    handle, part = tracker.update(obs.points, ~obs.masks["robot"], obs.target_prompt_W, obs.X_WB)
    truth = obs.masks["target_handle"]
    assert truth.sum() > 50
    assert (handle & truth).sum() >= 0.8 * truth.sum()  # recall
    assert (handle & truth).sum() >= 0.95 * handle.sum()  # precision: not the cabinet's top, not the next drawer


def test_a_marked_handle_with_a_too_wide_part_guess_still_tracks_the_drawer():
    """A colour marker names the handle, not the part: the part's extent is a guess, and on a cabinet with no
    neighbouring handle to bound it the guess spans the static faces beside the drawer. The drawer's and the
    door's hypotheses are then weighed on the same face around the handle, so that the static faces (a door at
    0 degrees) do not outvote the drawer moving out (drawer-test-004: tracked as closed while pulled 12 cm)."""
    _, frames = _frames("drawer")
    tracker = CabinetPartTracker()
    first = frames[0]
    prompt = first["points"][first["handle"]].mean(axis=0)  # what the colour-marker segmenter prompts with
    tracker.update(first["points"], ~first["robot"], prompt, first["X_WB"], handle_hint_mask=first["handle"].copy())
    (u0, u1), (v0, v1) = tracker.bounds
    tracker.front.bounds = np.array([[u0 - 0.6, u1 + 0.6], [v0, v1]])  # the guess spans the faces beside it
    rows = []
    for f in frames[1:]:
        tracker.update(f["points"], ~f["robot"], prompt, f["X_WB"], handle_hint_mask=f["handle"].copy())
        rows.append((float(f["open_fraction"]), tracker.kind, tracker.displacement_m))
    opened = [r for r in rows if r[0] >= 0.1]
    assert len(opened) >= 8 and tracker.kind == "drawer"
    assert all(r[2] > 0.02 for r in opened)
    assert 0.25 < rows[-1][2] < 0.35  # the drawer of this cabinet travels ~0.29 m


@pytest.mark.parametrize("shift_m", [-0.08, 0.08])
def test_a_marked_doors_hinge_comes_from_the_leafs_motion_not_the_guess(shift_m):
    """A marked handle's door: the part's extent first seen is a guess (on door-test-006 its hinge edge was 6 cm
    off). Here the guess is shifted 8 cm either way; once the leaf has swung, the line of its moved points meets
    the cabinet's plane at the hinge, and the leaf's mask follows the simulator's."""
    box, frames = _frames("door")
    truth = CabinetPartTracker()
    for f in frames:
        truth.update(f["points"], ~f["robot"], box, f["X_WB"])
    first = frames[0]
    prompt = first["points"][first["handle"]].mean(axis=0)
    tracker = CabinetPartTracker()
    tracker.update(first["points"], ~first["robot"], prompt, first["X_WB"], handle_hint_mask=first["handle"].copy())
    tracker.front.bounds = truth.front.bounds + np.array([[shift_m, shift_m], [0.1, 0.0]])
    rows = []
    for f in frames[1:]:
        _, part = tracker.update(f["points"], ~f["robot"], prompt, f["X_WB"], handle_hint_mask=f["handle"].copy())
        rows.append((float(f["open_fraction"]), _iou(part, f["link"])))
    assert tracker.kind == "door" and tracker.hinge_side == truth.hinge_side
    hinge = 0 if truth.hinge_side < 0 else 1
    assert abs(tracker.bounds[0, hinge] - truth.bounds[0, hinge]) < 0.02
    opened = [iou for fraction, iou in rows if fraction >= 0.2]
    assert len(opened) >= 8 and np.mean(opened) > 0.9


def test_a_marked_handle_seen_in_pieces_is_not_its_own_neighbour():
    """A long bar seen in two pieces (here its middle 6 cm hidden): each piece's centre lies beyond 3 cm of the
    marker's, and taken for neighbouring handles their Voronoi cells cut the part down to a few cm
    (door-test-009: 6 x 7 cm, "implausible door width"; here IoU 0.19 before). The pieces touch the marker's
    points: they are its own, and the part is bounded as with the whole bar in view (by the real neighbour below
    it on this cabinet)."""
    _, frames = _frames("door")
    f = frames[0]
    results = []
    for hidden in (np.zeros(len(f["points"]), bool),
                   f["handle"] & (f["points"][:, 2] > 0.58) & (f["points"][:, 2] < 0.64)):
        keep = ~hidden
        points, handle, link, robot = f["points"][keep], f["handle"][keep], f["link"][keep], f["robot"][keep]
        tracker = CabinetPartTracker()
        _, part = tracker.update(points, ~robot, points[handle].mean(axis=0), f["X_WB"],
                                 handle_hint_mask=handle.copy())
        results.append((tracker.bounds, _iou(part, link)))
    (whole_bounds, whole_iou), (pieces_bounds, pieces_iou) = results
    assert np.allclose(pieces_bounds, whole_bounds, atol=0.01)
    assert pieces_iou > 0.5 and abs(pieces_iou - whole_iou) < 0.02


def test_a_closed_marked_door_with_a_hand_in_front_of_it_is_not_taken_for_a_swung_leaf():
    """Before the grasp the hand is in front of the handle and some of its points escape the robot filter; with
    the handles (already proud when the door was first seen) they must not make a leaf's line (door-train-014: a
    closed door 'found' swung, its part cut to a tenth)."""
    _, frames = _frames("door")
    first = frames[0]
    prompt = first["points"][first["handle"]].mean(axis=0)
    tracker = CabinetPartTracker()
    tracker.update(first["points"], ~first["robot"], prompt, first["X_WB"], handle_hint_mask=first["handle"].copy())
    bounds = tracker.bounds
    normal = tracker.front_normal_W
    rng = np.random.default_rng(0)
    for k in range(5):
        # A finger's stray points: a slanted 12 x 4 cm strip 3-9 cm in front of the face beside the handle.
        along = rng.uniform(0.0, 0.12, 80)
        strip = prompt + np.outer(along, tracker.front.u_W) + np.outer(0.03 + 0.5 * along, normal)
        strip[:, 2] += rng.uniform(-0.02, 0.02, 80)
        points = np.concatenate([first["points"], strip])
        candidates = np.concatenate([~first["robot"], np.ones(80, bool)])
        hint = np.concatenate([first["handle"], np.zeros(80, bool)])
        tracker.update(points, candidates, prompt, first["X_WB"], handle_hint_mask=hint)
    assert tracker.kind is None and not tracker._leaf_from_motion
    assert np.allclose(tracker.bounds, bounds)


def test_a_swung_doors_extent_leaves_out_the_cabinets_face_beside_its_hinge():
    """Near the hinge the leaf's plane runs into the cabinet's, so the cabinet's own face just above the leaf lies
    on both. Taken for the leaf's, it raised the leaf's top by 4 cm an update (door-train-000 with `geometric`:
    0.88 m to 1.18 m in 15 steps) until the part's points held a dense static layer and the door's opening read 0
    mid-swing. Here a static face 30 cm tall is added above the leaf along its hinge: the leaf's top and the part's
    mask stay as without it."""
    box, frames = _frames("door")
    plain = CabinetPartTracker()
    for f in frames:
        plain.update(f["points"], ~f["robot"], box, f["X_WB"])
    front = plain.front
    (u0, u1), (v0, v1) = plain.bounds
    hinge_u = u0 if plain.hinge_side < 0 else u1
    inward = 1.0 if plain.hinge_side < 0 else -1.0
    u, v = np.meshgrid(hinge_u + inward * np.arange(0.0, 0.15, 0.005), v1 + 0.03 + np.arange(0.0, 0.3, 0.005))
    face_W = (np.outer(u.ravel(), front.u_W) + np.outer(v.ravel(), [0.0, 0.0, 1.0])
              + front.offset_m * front.normal_W)
    tracker = CabinetPartTracker()
    for f in frames:
        points = np.concatenate([f["points"], face_W])
        _, part = tracker.update(points, np.concatenate([~f["robot"], np.ones(len(face_W), bool)]), box, f["X_WB"])
        assert not part[len(f["points"]):].any()
    assert tracker.kind == "door" and tracker.hinge_side == plain.hinge_side
    assert tracker.bounds[1, 1] < v1 + 0.02
    assert abs(tracker.angle_rad - plain.angle_rad) < 0.05


def test_a_handle_just_beside_a_box_prompt_is_found_and_the_part_grows_to_hold_it():
    """A box prompt's faces are a few cm off, and a lip along a door's free edge can lie outside the box
    (door-train-039: 3-4 cm beyond it; no handle in 150 steps). With no handle inside the closed part's bounds,
    the proud cluster nearest them within 5 cm is the handle, and the bounds grow to hold it."""
    box, frames = _frames("door")
    closed = [f for f in frames if f["open_fraction"] < 0.005]
    first = closed[0]
    tracker = CabinetPartTracker()
    tracker.update(first["points"], ~first["robot"], box, first["X_WB"])
    uvs = tracker.front.coords(first["points"][first["handle"]])
    (u0, u1), (v0, v1) = tracker.bounds
    # Cut the box short of the handle on the side of the part's edge nearest the handle: 3 cm, then 8 cm.
    near_u0 = uvs[:, 0].mean() - u0 < u1 - uvs[:, 0].mean()

    def cut(gap_m):
        if near_u0:
            return np.array([[uvs[:, 0].max() + gap_m, u1], [v0, v1]])
        return np.array([[u0, uvs[:, 0].min() - gap_m], [v0, v1]])

    f = closed[-1]
    for gap_m, found in ((0.03, True), (0.08, False)):
        tracker = CabinetPartTracker()
        tracker.update(first["points"], ~first["robot"], box, first["X_WB"])
        tracker.front.bounds = cut(gap_m)
        tracker._handle_box = None
        handle, part = tracker.update(f["points"], ~f["robot"], box, f["X_WB"])
        if found:
            assert _iou(handle, f["handle"]) > 0.5
            assert tracker.bounds[0, 0] < cut(gap_m)[0, 0] or tracker.bounds[0, 1] > cut(gap_m)[0, 1]
            assert not (handle & ~part).any()
        else:  # beyond the search margin
            assert _iou(handle, f["handle"]) < 0.1
