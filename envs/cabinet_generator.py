"""Procedural articulated cabinets for OpenCabinetDrawer / OpenCabinetDoor, in PartNet-Mobility layout.

PartNet-Mobility cannot be downloaded here, so each cabinet of the ManiSkill1-style splits is sampled from
its id (``drawer-train-007``: kind, split, index) and written as a folder holding ``mobility.urdf``,
``semantics.txt`` and ``meta.json``, the files the env reads from a PartNet-Mobility model.

Conventions (the env relies on them): cabinet frame = URDF root frame, body bottom at z = 0, body centered
at x = y = 0, front face at x = -depth/2 (facing -x), up +z, "left" = +y seen from the front. Drawers slide
toward -x (positive q opens); doors swing outward for positive q about a vertical hinge line on the front
face. Every visual of a handle has ``handle`` in its name and no other visual does; collisions copy visuals.

Train and test ids are different seeds of one distribution. The handle shape of the task's part kind
(drawer handles in drawer cabinets, door handles in door cabinets) is stratified by the id's index, so
each split holds all four shapes; everything else is drawn from the seed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .asset_cache import build_once, cache_dir
from .procedural import choice as _choice
from .procedural import fmt as _fmt
from .procedural import jittered_rgba as _jittered_rgba
from .procedural import uniform as _uniform
from .urdf_solids import ALONG_X, ALONG_Y, NO_TURN, Solid, add_link

GENERATOR_VERSION = "1"
SPLIT_COUNTS = {"drawer": {"train": 25, "test": 10}, "door": {"train": 42, "test": 10}}
HANDLE_SHAPES = ("horizontal_bar", "vertical_bar", "knob", "lip")

# Body and layout sizes (m).
_WIDTH_RANGE_M = (0.4, 1.2)
_DEPTH_RANGE_M = (0.35, 0.6)
_HEIGHT_RANGE_M = (0.4, 1.3)
_PANEL_THICKNESS_RANGE_M = (0.015, 0.02)
_FRONT_THICKNESS_RANGE_M = (0.015, 0.02)
_GAP_RANGE_M = (0.002, 0.004)  # clearance around each front, like real cabinet reveals
_DRAWER_CELL_RANGE_M = (0.11, 0.3)  # opening heights; fronts are two gaps shorter (about 0.1-0.3 m)
_DOOR_CELL_RANGE_M = (0.3, 0.9)
_MIN_COLUMN_WIDTH_M = 0.25
_SINGLE_DOOR_MAX_WIDTH_M = 0.6  # wider door cells get a double door
_DOUBLE_DOOR_MIN_WIDTH_M = 0.44  # leaves of at least ~0.21 m
_MAX_PARTS = 10  # PartNet-Mobility cabinets rarely have more; keeps simulation cheap
_DOOR_OPEN_RANGE_RAD = (math.radians(80.0), math.radians(120.0))
_DRAWER_TRAVEL_FRACTION = (0.6, 0.9)  # of the drawer's depth, so an open drawer stays supported
# Nominal joint dynamics, in the ranges ManiSkill2's OpenCabinet envs draw per episode.
_DAMPING_RANGE = (5.0, 20.0)  # N s/m for drawers, N m s/rad for doors
_FRICTION_RANGE = (0.05, 0.15)

_WOOD_DENSITY_KG_M3 = 700.0  # MDF / particle board
_HANDLE_DENSITY_KG_M3 = 2700.0  # aluminium

# Column templates, top to bottom: drawers only, one door, two stacked doors, 1-3 drawers over a door, a door
# over 1-2 drawers. A door cell holds a single or a double door.
_TEMPLATES = ("drawers", "door", "doors", "drawers_door", "door_drawers")
_TEMPLATE_WEIGHTS = {
    "drawer": (0.45, 0.1, 0.1, 0.25, 0.1),
    "door": (0.15, 0.35, 0.15, 0.25, 0.1),
}
# Handle shapes of the part kind the cabinet is not about (they are not stratified).
_OTHER_SHAPE_WEIGHTS = {
    "drawer": (0.45, 0.1, 0.3, 0.15),  # drawers mostly have horizontal bars or knobs
    "door": (0.15, 0.45, 0.25, 0.15),  # doors mostly have vertical bars
}

_BODY_COLORS = {
    "oak": (0.72, 0.55, 0.36),
    "walnut": (0.42, 0.29, 0.19),
    "cherry": (0.60, 0.33, 0.20),
    "birch": (0.85, 0.74, 0.56),
    "white": (0.93, 0.93, 0.91),
    "cream": (0.92, 0.88, 0.78),
    "light_grey": (0.75, 0.76, 0.77),
    "grey": (0.50, 0.51, 0.53),
    "anthracite": (0.22, 0.23, 0.25),
    "sage": (0.60, 0.68, 0.58),
    "navy": (0.18, 0.24, 0.36),
}
# Light metals only: the robot's hand is dark so that it stands out against handles in point clouds.
_HANDLE_COLORS = {
    "steel": (0.70, 0.71, 0.73),
    "chrome": (0.85, 0.86, 0.88),
    "brushed_nickel": (0.66, 0.64, 0.60),
    "brass": (0.78, 0.62, 0.32),
    "copper": (0.72, 0.45, 0.30),
    "aluminium": (0.80, 0.80, 0.80),
}
_ID_PATTERN = re.compile(r"^(drawer|door)-(train|test)-(\d{3})$")


@dataclass(frozen=True)
class HandleSpec:
    """One handle, in its part's frame (front surface at x = 0, handle protruding toward -x)."""

    shape: str  # one of HANDLE_SHAPES
    axis: str  # "y" or "z": direction of a bar or lip; "x" for a knob
    profile: str  # bars: "cylinder" | "box"; knob head: "cylinder" | "sphere"; lip: "box"
    center_y_m: float
    center_z_m: float
    length_m: float  # bar or lip length along `axis`; 0 for a knob
    thickness_m: float  # bar cross-section, lip plate thickness, knob stem diameter
    standoff_m: float  # bar-to-front gap, knob stem length, lip protrusion
    head_diameter_m: float = 0.0  # knob only
    head_depth_m: float = 0.0  # knob only: head extent along x


@dataclass(frozen=True)
class CellSpec:
    """One compartment opening in the cabinet frame, and what closes it."""

    column: int
    row: int  # 0 = top
    content: str  # "drawer", "door_left", "door_right" or "double_door"
    y_min_m: float
    y_max_m: float
    z_min_m: float
    z_max_m: float
    shelf_z_m: float  # height of an interior shelf behind a door; 0 for none


@dataclass(frozen=True)
class PartSpec:
    """A drawer or a door leaf: ``link_<i>`` with joint ``joint_<i>``, i = its index in CabinetSpec.parts."""

    kind: str  # "drawer" | "door"
    hinge: str  # doors: "left" (+y edge) or "right" (-y edge); "" for drawers
    cell: int  # index into CabinetSpec.cells
    joint_xyz_m: tuple[float, float, float]  # joint origin in the cabinet frame (on the front face)
    front_width_m: float
    front_height_m: float
    front_thickness_m: float
    box_depth_m: float  # drawers: depth of the box behind the front; 0 for doors
    box_height_m: float  # drawers: height of the box walls; 0 for doors
    wall_thickness_m: float  # drawers: box wall thickness; 0 for doors
    travel_m: float  # drawers: upper joint limit; 0 for doors
    open_rad: float  # doors: upper joint limit; 0 for drawers
    damping: float  # nominal, N s/m (drawer) or N m s/rad (door)
    friction: float  # nominal joint friction coefficient
    handle: HandleSpec


@dataclass(frozen=True)
class CabinetSpec:
    """Every sampled parameter of one cabinet, as plain data (``dataclasses.asdict`` is json-serializable)."""

    model_id: str
    kind: str  # "drawer" | "door": the part kind the task opens
    split: str
    seed: int
    width_m: float
    depth_m: float
    height_m: float
    panel_thickness_m: float
    gap_m: float
    # Columns from -y to +y joined by "|"; cells top to bottom: d drawer, L / R door hinged left / right,
    # W double door. E.g. "dddd|LL".
    layout: str
    cells: tuple[CellSpec, ...]
    parts: tuple[PartSpec, ...]
    body_color: str
    front_color: str
    handle_color: str
    body_rgba: tuple[float, float, float, float]
    front_rgba: tuple[float, float, float, float]
    handle_rgba: tuple[float, float, float, float]
    lip_rgba: tuple[float, float, float, float]  # lips are often cut from the front itself, else metal


def cabinet_ids(kind: str, split: str) -> list[str]:
    """Ids of one split, e.g. ``drawer-train-007``; kind in {drawer, door}, split in {train, test}."""
    if kind not in SPLIT_COUNTS:
        raise ValueError(f"unknown cabinet kind {kind!r}; valid kinds: {sorted(SPLIT_COUNTS)}")
    if split not in SPLIT_COUNTS[kind]:
        raise ValueError(f"unknown split {split!r}; valid splits: {sorted(SPLIT_COUNTS[kind])}")
    return [f"{kind}-{split}-{i:03d}" for i in range(SPLIT_COUNTS[kind][split])]


def sample_cabinet(model_id: str) -> CabinetSpec:
    """Sample the cabinet of ``model_id`` (an id from ``cabinet_ids``), deterministically from the id."""
    match = _ID_PATTERN.match(model_id)
    if match is None:
        raise ValueError(f"malformed cabinet id {model_id!r}; expected '<drawer|door>-<train|test>-<NNN>'")
    kind, split, index = match.group(1), match.group(2), int(match.group(3))
    if index >= SPLIT_COUNTS[kind][split]:
        count = SPLIT_COUNTS[kind][split]
        raise ValueError(f"cabinet id {model_id!r} out of range: {kind}/{split} has {count} ids")
    # crc32, not hash(): Python salts str hashes per process.
    seed = zlib.crc32(model_id.encode("utf-8"))
    rng = np.random.default_rng(seed)

    width_m = _uniform(rng, *_WIDTH_RANGE_M)
    depth_m = _uniform(rng, *_DEPTH_RANGE_M)
    height_m = _uniform(rng, *_HEIGHT_RANGE_M)
    thickness_m = _uniform(rng, *_PANEL_THICKNESS_RANGE_M)
    gap_m = _uniform(rng, *_GAP_RANGE_M)
    cells = _sample_cells(rng, kind, width_m, height_m, thickness_m)

    body_color = _choice(rng, sorted(_BODY_COLORS))
    front_color = body_color if rng.random() < 0.6 else _choice(rng, sorted(_BODY_COLORS))
    handle_color = _choice(rng, sorted(_HANDLE_COLORS))
    shapes = {kind: HANDLE_SHAPES[index % len(HANDLE_SHAPES)]}
    other = "door" if kind == "drawer" else "drawer"
    shapes[other] = HANDLE_SHAPES[int(rng.choice(len(HANDLE_SHAPES), p=_OTHER_SHAPE_WEIGHTS[other]))]
    styles = {k: _sample_handle_style(rng, shape) for k, shape in shapes.items()}
    parts = _sample_parts(rng, cells, styles, depth_m, thickness_m, gap_m)
    body_rgba = _jittered_rgba(rng, _BODY_COLORS[body_color])
    front_rgba = _jittered_rgba(rng, _BODY_COLORS[front_color])
    handle_rgba = _jittered_rgba(rng, _HANDLE_COLORS[handle_color])

    return CabinetSpec(
        model_id=model_id,
        kind=kind,
        split=split,
        seed=seed,
        width_m=width_m,
        depth_m=depth_m,
        height_m=height_m,
        panel_thickness_m=thickness_m,
        gap_m=gap_m,
        layout=_layout_string(cells),
        cells=cells,
        parts=parts,
        body_color=body_color,
        front_color=front_color,
        handle_color=handle_color,
        body_rgba=body_rgba,
        front_rgba=front_rgba,
        handle_rgba=handle_rgba,
        lip_rgba=front_rgba if rng.random() < 0.5 else handle_rgba,
    )


def write_cabinet(spec: CabinetSpec, folder: Path) -> Path:
    """Write ``mobility.urdf``, ``semantics.txt`` and ``meta.json`` of ``spec`` into ``folder``.

    Returns the path of ``mobility.urdf``. ``folder`` is created if missing.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    body_index = len(spec.parts)  # movable parts are link_0..link_{n-1}, the body comes last
    urdf_path = folder / "mobility.urdf"
    urdf_path.write_text(_urdf_text(spec, body_index))
    semantics = {"drawer": "slider drawer", "door": "hinge door"}
    lines = [f"link_{i} {semantics[part.kind]}" for i, part in enumerate(spec.parts)]
    lines.append(f"link_{body_index} static cabinet_body")
    (folder / "semantics.txt").write_text("\n".join(lines) + "\n")
    meta = {"generator_version": GENERATOR_VERSION, **dataclasses.asdict(spec)}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return urdf_path


def cabinet_urdf(model_id: str) -> Path:
    """Path of the ``mobility.urdf`` of ``model_id``, generated once under the asset cache."""
    spec = sample_cabinet(model_id)
    folder = build_once(
        cache_dir() / "cabinets" / f"{model_id}-v{GENERATOR_VERSION}", lambda tmp: write_cabinet(spec, tmp)
    )
    return folder / "mobility.urdf"


# ---------------------------------------------------------------------------------------------- sampling


def _column_sequence(rng: np.random.Generator, kind: str, height_m: float, thickness_m: float) -> str | None:
    """Cell kinds of one column, top to bottom ("d" drawer, "o" door), or None when the draw does not fit."""
    template = _TEMPLATES[int(rng.choice(len(_TEMPLATES), p=_TEMPLATE_WEIGHTS[kind]))]
    if template == "drawers":
        counts = [n for n in range(1, 7) if _fits("d" * n, height_m, thickness_m)]
        if not counts:
            return None
        low = counts[0]  # prefer few, tall drawers over many thin ones
        sequence = "d" * int(rng.integers(low, min(low + 2, counts[-1]) + 1))
    elif template == "door":
        sequence = "o"
    elif template == "doors":
        sequence = "oo"
    elif template == "drawers_door":
        sequence = "d" * int(rng.integers(1, 4)) + "o"
    else:
        sequence = "o" + "d" * int(rng.integers(1, 3))
    return sequence if _fits(sequence, height_m, thickness_m) else None


def _cell_range(kind: str) -> tuple[float, float]:
    return _DRAWER_CELL_RANGE_M if kind == "d" else _DOOR_CELL_RANGE_M


def _fits(sequence: str, height_m: float, thickness_m: float) -> bool:
    """Whether cells of `sequence` and the dividers between them can fill an interior of `height_m`."""
    dividers_m = (len(sequence) - 1) * thickness_m
    low = sum(_cell_range(c)[0] for c in sequence) + dividers_m
    high = sum(_cell_range(c)[1] for c in sequence) + dividers_m
    return low <= height_m <= high


def _split_lengths(preferred: np.ndarray, lows: np.ndarray, highs: np.ndarray, total: float) -> np.ndarray:
    """Lengths within [lows, highs] that sum to `total`, moving each preferred length toward its bound."""
    excess = total - preferred.sum()
    slack = (highs - preferred) if excess > 0 else (preferred - lows)
    if slack.sum() <= 0:
        return preferred
    return preferred + np.sign(excess) * slack * min(1.0, abs(excess) / slack.sum())


def _sample_cells(
    rng: np.random.Generator, kind: str, width_m: float, height_m: float, thickness_m: float
) -> tuple[CellSpec, ...]:
    """Columns split into rows of drawer and door cells; resampled until the cabinet has a part of `kind`."""
    interior_w = width_m - 2 * thickness_m
    interior_h = height_m - 2 * thickness_m
    max_columns = max(1, min(3, int((interior_w + thickness_m) // (_MIN_COLUMN_WIDTH_M + thickness_m))))
    for _ in range(200):
        n_columns = int(rng.integers(1, max_columns + 1))
        usable_w = interior_w - (n_columns - 1) * thickness_m
        weights = np.ones(n_columns) if rng.random() < 0.5 else rng.uniform(0.75, 1.25, n_columns)
        widths = usable_w * weights / weights.sum()
        if widths.min() < _MIN_COLUMN_WIDTH_M:
            widths = np.full(n_columns, usable_w / n_columns)
        sequences = [_column_sequence(rng, kind, interior_h, thickness_m) for _ in range(n_columns)]
        if any(s is None for s in sequences):
            continue
        has_kind = any(("d" if kind == "drawer" else "o") in s for s in sequences)
        cells = []
        y_min = -interior_w / 2
        for column, (sequence, column_w) in enumerate(zip(sequences, widths.tolist())):
            cells += _column_cells(rng, column, sequence, y_min, y_min + column_w, thickness_m, interior_h)
            y_min += column_w + thickness_m
        n_parts = sum(2 if c.content == "double_door" else 1 for c in cells)
        if has_kind and n_parts <= _MAX_PARTS:
            return tuple(cells)
    # Unreachable with the ranges above: an all-drawer column fits any height, so few draws are rejected.
    raise RuntimeError("no cabinet layout found")


def _column_cells(
    rng: np.random.Generator,
    column: int,
    sequence: str,
    y_min_m: float,
    y_max_m: float,
    thickness_m: float,
    interior_h_m: float,
) -> list[CellSpec]:
    lows = np.array([_cell_range(c)[0] for c in sequence])
    highs = np.array([_cell_range(c)[1] for c in sequence])
    preferred = rng.uniform(lows, highs)
    drawers = np.array([c == "d" for c in sequence])
    if drawers.sum() > 1:
        drawer_heights = preferred[drawers]
        # Drawer stacks are either equal or graduated (deeper drawers at the bottom), as in real furniture.
        equal = rng.random() < 0.5
        preferred[drawers] = drawer_heights.mean() if equal else np.sort(drawer_heights)
    heights = _split_lengths(preferred, lows, highs, interior_h_m - (len(sequence) - 1) * thickness_m)
    column_w = y_max_m - y_min_m
    cells = []
    z_top = thickness_m + interior_h_m
    for row, (c, cell_h) in enumerate(zip(sequence, heights.tolist())):
        z_max, z_min = z_top, z_top - cell_h
        z_top = z_min - thickness_m
        if c == "d":
            content, shelf_z = "drawer", 0.0
        else:
            either = column_w >= _DOUBLE_DOOR_MIN_WIDTH_M and rng.random() < 0.5
            double = column_w > _SINGLE_DOOR_MAX_WIDTH_M or either
            content = "double_door" if double else ("door_left" if rng.random() < 0.5 else "door_right")
            tall = cell_h > 0.45
            shelf_z = z_min + cell_h * float(rng.uniform(0.4, 0.6)) if tall and rng.random() < 0.6 else 0.0
        cells.append(
            CellSpec(
                column=column,
                row=row,
                content=content,
                y_min_m=round(y_min_m, 4),
                y_max_m=round(y_max_m, 4),
                z_min_m=round(z_min, 4),
                z_max_m=round(z_max, 4),
                shelf_z_m=round(shelf_z, 4),
            )
        )
    return cells


def _layout_string(cells: tuple[CellSpec, ...]) -> str:
    letters = {"drawer": "d", "door_left": "L", "door_right": "R", "double_door": "W"}
    columns: dict[int, str] = {}
    for cell in cells:
        columns[cell.column] = columns.get(cell.column, "") + letters[cell.content]
    return "|".join(columns[c] for c in sorted(columns))


def _sample_handle_style(rng: np.random.Generator, shape: str) -> dict:
    """Handle parameters shared by all parts of one kind in a cabinet (furniture uses one handle style)."""
    if shape in ("horizontal_bar", "vertical_bar"):
        return {
            "shape": shape,
            "profile": "cylinder" if rng.random() < 0.6 else "box",
            "thickness_m": _uniform(rng, 0.01, 0.025),
            "standoff_m": _uniform(rng, 0.025, 0.05),
            "length_fraction": _uniform(rng, 0.25, 0.6),
            "edge_inset_m": _uniform(rng, 0.03, 0.07),
            "height_fraction": _uniform(rng, 0.0, 1.0),
        }
    if shape == "knob":
        return {
            "shape": shape,
            "profile": "cylinder" if rng.random() < 0.5 else "sphere",
            "thickness_m": _uniform(rng, 0.01, 0.016),  # stem
            "standoff_m": _uniform(rng, 0.025, 0.045),  # stem length
            "head_diameter_m": _uniform(rng, 0.025, 0.045),
            "head_depth_m": _uniform(rng, 0.012, 0.02),
            "edge_inset_m": _uniform(rng, 0.03, 0.07),
            "height_fraction": _uniform(rng, 0.0, 1.0),
        }
    return {
        "shape": shape,
        "profile": "box",
        "thickness_m": _uniform(rng, 0.012, 0.02),
        "standoff_m": _uniform(rng, 0.025, 0.045),  # protrusion
        "length_fraction": _uniform(rng, 0.3, 0.9),
        "edge_inset_m": _uniform(rng, 0.0, 0.01),
        "height_fraction": _uniform(rng, 0.0, 1.0),
    }


def _fit_handle(style: dict, kind: str, hinge: str, front_w_m: float, front_h_m: float) -> HandleSpec:
    """Place and size a handle of `style` on a front of `front_w_m` x `front_h_m`, in the part frame.

    Drawer frames are centered on the front; door frames sit on the hinge edge, the panel spanning
    y in [-w, 0] (left hinge) or [0, w] (right hinge).
    """
    shape = style["shape"]
    margin_m = 0.01  # keep handles off the panel's edges
    thickness_m = style["thickness_m"]
    head_m = style.get("head_diameter_m", 0.0)
    if shape == "knob":
        axis, length_m, extent_y, extent_z = "x", 0.0, head_m, head_m
    elif shape == "lip":
        # A lip runs along the top edge of a drawer and along the free edge of a door.
        axis = "y" if kind == "drawer" else "z"
        along_m = front_w_m if axis == "y" else front_h_m
        fraction = style["length_fraction"] if kind == "drawer" else 0.3 + 0.4 * style["length_fraction"]
        length_m = float(np.clip(fraction * along_m, 0.08, min(0.6, along_m - 2 * margin_m)))
        extent_y, extent_z = (length_m, thickness_m) if axis == "y" else (thickness_m, length_m)
    else:
        axis = "y" if shape == "horizontal_bar" else "z"
        if kind == "drawer":
            along_m = front_w_m if axis == "y" else front_h_m
            fraction = style["length_fraction"] if axis == "y" else 0.8
        else:
            # On doors bars stay short enough to leave the free edge region to the hand.
            along_m = 0.5 * front_w_m if axis == "y" else front_h_m
            fraction = style["length_fraction"]
        length_m = float(np.clip(fraction * along_m, 0.08, min(0.35, along_m - 2 * margin_m)))
        extent_y, extent_z = (length_m, thickness_m) if axis == "y" else (thickness_m, length_m)

    z_limit = front_h_m / 2 - margin_m - extent_z / 2
    if kind == "drawer":
        center_y = 0.0
        if shape == "lip":
            center_z = front_h_m / 2 - style["edge_inset_m"] - thickness_m / 2
        else:  # upper half of the front
            center_z = min(style["height_fraction"] * 0.3 * front_h_m, z_limit)
    else:
        # Inward from the free edge (toward the hinge).
        free_edge_y, inward = (-front_w_m, 1.0) if hinge == "left" else (front_w_m, -1.0)
        inset_m = style["edge_inset_m"] if shape == "lip" else max(style["edge_inset_m"], margin_m)
        center_y = free_edge_y + inward * (inset_m + extent_y / 2)
        center_z = float(np.clip((style["height_fraction"] - 0.5) * 0.6 * front_h_m, -z_limit, z_limit))
    return HandleSpec(
        shape=shape,
        axis=axis,
        profile=style["profile"],
        center_y_m=round(center_y, 4),
        center_z_m=round(center_z, 4),
        length_m=round(length_m, 4),
        thickness_m=thickness_m,
        standoff_m=style["standoff_m"],
        head_diameter_m=head_m,
        head_depth_m=style.get("head_depth_m", 0.0),
    )


def _sample_parts(
    rng: np.random.Generator,
    cells: tuple[CellSpec, ...],
    styles: dict[str, dict],
    depth_m: float,
    thickness_m: float,
    gap_m: float,
) -> tuple[PartSpec, ...]:
    front_thickness_m = _uniform(rng, *_FRONT_THICKNESS_RANGE_M)
    wall_m = _uniform(rng, 0.008, 0.012)
    front_x = -depth_m / 2
    parts = []
    for index, cell in enumerate(cells):
        cell_w = cell.y_max_m - cell.y_min_m
        z_center = (cell.z_min_m + cell.z_max_m) / 2
        front_h = cell.z_max_m - cell.z_min_m - 2 * gap_m
        dynamics = {"damping": _uniform(rng, *_DAMPING_RANGE), "friction": _uniform(rng, *_FRICTION_RANGE)}
        if cell.content == "drawer":
            front_w = cell_w - 2 * gap_m
            # Behind the front: up to the back panel, minus a clearance so the closed drawer never touches it.
            available_m = depth_m - thickness_m - front_thickness_m - 0.01
            box_depth = round(available_m * float(rng.uniform(0.8, 1.0)), 4)
            box_h = round((front_h - 0.005) * float(rng.uniform(0.6, 0.9)), 4)
            travel = round((front_thickness_m + box_depth) * float(rng.uniform(*_DRAWER_TRAVEL_FRACTION)), 4)
            parts.append(
                PartSpec(
                    kind="drawer",
                    hinge="",
                    cell=index,
                    joint_xyz_m=(front_x, round((cell.y_min_m + cell.y_max_m) / 2, 4), round(z_center, 4)),
                    front_width_m=round(front_w, 4),
                    front_height_m=round(front_h, 4),
                    front_thickness_m=front_thickness_m,
                    box_depth_m=box_depth,
                    box_height_m=box_h,
                    wall_thickness_m=wall_m,
                    travel_m=travel,
                    open_rad=0.0,
                    handle=_fit_handle(styles["drawer"], "drawer", "", front_w, front_h),
                    **dynamics,
                )
            )
            continue
        if cell.content == "double_door":
            leaf_w = (cell_w - 4 * gap_m) / 2  # gaps at both sides and two between the leaves
            leaves = [("left", cell.y_max_m - gap_m), ("right", cell.y_min_m + gap_m)]
        else:
            leaf_w = cell_w - 2 * gap_m
            hinge = "left" if cell.content == "door_left" else "right"
            leaves = [(hinge, cell.y_max_m - gap_m if hinge == "left" else cell.y_min_m + gap_m)]
        for hinge, hinge_y in leaves:
            parts.append(
                PartSpec(
                    kind="door",
                    hinge=hinge,
                    cell=index,
                    joint_xyz_m=(front_x, round(hinge_y, 4), round(z_center, 4)),
                    front_width_m=round(leaf_w, 4),
                    front_height_m=round(front_h, 4),
                    front_thickness_m=front_thickness_m,
                    box_depth_m=0.0,
                    box_height_m=0.0,
                    wall_thickness_m=0.0,
                    travel_m=0.0,
                    open_rad=_uniform(rng, *_DOOR_OPEN_RANGE_RAD),
                    handle=_fit_handle(styles["door"], "door", hinge, leaf_w, front_h),
                    **dynamics,
                )
            )
    return tuple(parts)


# ---------------------------------------------------------------------------------------------- geometry


def _floats(values) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _box(name: str, center, size, material: str = "body", density: float = _WOOD_DENSITY_KG_M3) -> Solid:
    return Solid(name, "box", _floats(size), _floats(center), NO_TURN, material, density)


def _metal(name: str, geometry: str, size, center, rpy=NO_TURN) -> Solid:
    """A handle element of solid metal."""
    return Solid(name, geometry, _floats(size), _floats(center), rpy, "handle", _HANDLE_DENSITY_KG_M3)


def _body_primitives(spec: CabinetSpec) -> list[Solid]:
    """Hollow shell (top, bottom, sides, back) plus dividers and shelves, in the cabinet frame."""
    w, d, h, t = spec.width_m, spec.depth_m, spec.height_m, spec.panel_thickness_m
    inner_d = d - t  # dividers run from the front face to the back panel
    prims = [
        _box("body_bottom", (0, 0, t / 2), (d, w, t)),
        _box("body_top", (0, 0, h - t / 2), (d, w, t)),
        _box("body_side_right", (0, -(w - t) / 2, h / 2), (d, t, h - 2 * t)),
        _box("body_side_left", (0, (w - t) / 2, h / 2), (d, t, h - 2 * t)),
        _box("body_back", ((d - t) / 2, 0, h / 2), (t, w - 2 * t, h - 2 * t)),
    ]
    columns = sorted({(c.column, c.y_min_m, c.y_max_m) for c in spec.cells})
    for (_, _, left_y), (column, right_y, _) in zip(columns, columns[1:]):
        center = (-t / 2, (left_y + right_y) / 2, h / 2)
        prims.append(_box(f"divider_column_{column}", center, (inner_d, t, h - 2 * t)))
    for upper, lower in zip(spec.cells, spec.cells[1:]):
        if upper.column != lower.column:
            continue
        center = (-t / 2, (upper.y_min_m + upper.y_max_m) / 2, (upper.z_min_m + lower.z_max_m) / 2)
        size = (inner_d, upper.y_max_m - upper.y_min_m, t)
        prims.append(_box(f"divider_row_{upper.column}_{upper.row}", center, size))
    for index, cell in enumerate(spec.cells):
        if cell.shelf_z_m > 0:
            # Set back from the front so that the closed door clears it.
            setback = max(p.front_thickness_m for p in spec.parts) + 0.02
            shelf_d = inner_d - setback
            x = -d / 2 + setback + shelf_d / 2
            y = (cell.y_min_m + cell.y_max_m) / 2
            size = (shelf_d, cell.y_max_m - cell.y_min_m, t)
            prims.append(_box(f"shelf_{index}", (x, y, cell.shelf_z_m), size))
    return prims


_BOX_SIDE_CLEARANCE_M = 0.01  # a drawer's box is this much narrower than its front: it clears the compartment
_BOX_FLOOR_LIFT_M = 0.005  # the box's underside above the front's lower edge: it clears the compartment floor


def _drawer_primitives(part: PartSpec) -> list[Solid]:
    """Front panel and open box behind it, in the drawer frame (front surface center, +x into the cabinet)."""
    tf, w, h = part.front_thickness_m, part.front_width_m, part.front_height_m
    tw, bd, bh = part.wall_thickness_m, part.box_depth_m, part.box_height_m
    box_w = w - _BOX_SIDE_CLEARANCE_M
    z_bottom = -h / 2 + _BOX_FLOOR_LIFT_M
    x_mid = tf + bd / 2
    return [
        _box("drawer_front", (tf / 2, 0, 0), (tf, w, h), "front"),
        _box("drawer_bottom", (x_mid, 0, z_bottom + tw / 2), (bd, box_w, tw)),
        _box("drawer_side_right", (x_mid, -(box_w - tw) / 2, z_bottom + bh / 2), (bd, tw, bh)),
        _box("drawer_side_left", (x_mid, (box_w - tw) / 2, z_bottom + bh / 2), (bd, tw, bh)),
        _box("drawer_back", (tf + bd - tw / 2, 0, z_bottom + bh / 2), (tw, box_w - 2 * tw, bh)),
    ]


def drawer_interior_L(spec: CabinetSpec, part_index: int) -> np.ndarray:
    """[2, 3] min and max corner (m) of the room inside drawer ``part_index`` of ``spec``, in the drawer's link
    frame L (origin on the front's outer face at its centre, +x into the cabinet, +z up; the URDF link frame):
    from the front's inner face to the back wall, between the side walls, from the box's floor up to the top of
    the drawer's compartment (what stands higher hits the divider above when the drawer closes)."""
    part = spec.parts[part_index]
    if part.kind != "drawer":
        raise ValueError(f"part {part_index} of {spec.model_id} is a {part.kind}, not a drawer")
    tf, tw, bd = part.front_thickness_m, part.wall_thickness_m, part.box_depth_m
    half_w = (part.front_width_m - _BOX_SIDE_CLEARANCE_M) / 2 - tw
    floor_z = -part.front_height_m / 2 + _BOX_FLOOR_LIFT_M + tw
    top_z = spec.cells[part.cell].z_max_m - part.joint_xyz_m[2]
    return np.array([[tf, -half_w, floor_z], [tf + bd - tw, half_w, top_z]])


def _door_primitives(part: PartSpec) -> list[Solid]:
    """The door panel in the door frame (on the hinge line at the front surface, +x into the cabinet)."""
    side = -1.0 if part.hinge == "left" else 1.0  # the panel extends away from its hinge edge
    tf, w, h = part.front_thickness_m, part.front_width_m, part.front_height_m
    return [_box("door_panel", (tf / 2, side * w / 2, 0), (tf, w, h), "front")]


def _handle_primitives(handle: HandleSpec) -> list[Solid]:
    """Handle elements protruding toward -x from the front surface (x = 0) of the part frame."""
    y, z = handle.center_y_m, handle.center_z_m
    thick, standoff = handle.thickness_m, handle.standoff_m
    length = handle.length_m
    if handle.shape == "lip":
        size = (standoff, length, thick) if handle.axis == "y" else (standoff, thick, length)
        return [_box("handle_lip", (-standoff / 2, y, z), size, "lip")]
    if handle.shape == "knob":
        stem = _metal("handle_knob_stem", "cylinder", (thick / 2, standoff), (-standoff / 2, y, z), ALONG_X)
        r = handle.head_diameter_m / 2
        if handle.profile == "sphere":
            head = _metal("handle_knob", "sphere", (r,), (-(standoff + r), y, z))
        else:
            depth = handle.head_depth_m
            head = _metal("handle_knob", "cylinder", (r, depth), (-(standoff + depth / 2), y, z), ALONG_X)
        return [stem, head]
    # Bars: the bar sits `standoff` in front of the panel on two posts at its ends; the span between the
    # posts stays >= 0.05 m so a 0.02 m wide finger fits in.
    along = np.array([0.0, 1.0, 0.0]) if handle.axis == "y" else np.array([0.0, 0.0, 1.0])
    bar_x = -(standoff + thick / 2)
    center = np.array([bar_x, y, z])
    if handle.profile == "cylinder":
        turn = ALONG_Y if handle.axis == "y" else NO_TURN
        bar = _metal("handle_bar", "cylinder", (thick / 2, length), center, turn)
    else:
        size = (thick, length, thick) if handle.axis == "y" else (thick, thick, length)
        bar = _metal("handle_bar", "box", size, center)
    post_d = max(0.008, 0.6 * thick)
    post_len = standoff + thick / 2  # from the panel into the bar's middle, so the parts overlap
    prims = [bar]
    for i, sign in enumerate((-1.0, 1.0)):
        p = np.array([-post_len / 2, y, z]) + sign * (length / 2 - post_d / 2) * along
        if handle.profile == "cylinder":
            prims.append(_metal(f"handle_post_{i}", "cylinder", (post_d / 2, post_len), p, ALONG_X))
        else:
            prims.append(_metal(f"handle_post_{i}", "box", (post_len, post_d, post_d), p))
    return prims


# ---------------------------------------------------------------------------------------------- URDF


def _urdf_text(spec: CabinetSpec, body_index: int) -> str:
    robot = ET.Element("robot", name=spec.model_id)
    colors = {"body": spec.body_rgba, "front": spec.front_rgba, "handle": spec.handle_rgba}
    for name, rgba in {**colors, "lip": spec.lip_rgba}.items():
        material = ET.SubElement(robot, "material", name=name)
        ET.SubElement(material, "color", rgba=_fmt(*rgba))

    ET.SubElement(robot, "link", name="base")
    body = f"link_{body_index}"
    add_link(robot, body, _body_primitives(spec))
    joint = ET.SubElement(robot, "joint", name=f"joint_{body_index}", type="fixed")
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(joint, "parent", link="base")
    ET.SubElement(joint, "child", link=body)

    for i, part in enumerate(spec.parts):
        shape = _drawer_primitives(part) if part.kind == "drawer" else _door_primitives(part)
        add_link(robot, f"link_{i}", shape + _handle_primitives(part.handle))
        if part.kind == "drawer":
            joint = ET.SubElement(robot, "joint", name=f"joint_{i}", type="prismatic")
            axis, upper, effort, velocity = "-1 0 0", part.travel_m, 100.0, 1.0
        else:
            joint = ET.SubElement(robot, "joint", name=f"joint_{i}", type="revolute")
            # Positive q swings the free edge toward -x: clockwise seen from above for a +y hinge.
            axis = "0 0 -1" if part.hinge == "left" else "0 0 1"
            upper, effort, velocity = part.open_rad, 50.0, 2.0
        ET.SubElement(joint, "origin", xyz=_fmt(*part.joint_xyz_m), rpy="0 0 0")
        ET.SubElement(joint, "axis", xyz=axis)
        ET.SubElement(joint, "parent", link=body)
        ET.SubElement(joint, "child", link=f"link_{i}")
        limit = {"lower": "0", "upper": _fmt(upper), "effort": _fmt(effort), "velocity": _fmt(velocity)}
        ET.SubElement(joint, "limit", limit)
        ET.SubElement(joint, "dynamics", damping=_fmt(part.damping), friction=_fmt(part.friction))

    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
