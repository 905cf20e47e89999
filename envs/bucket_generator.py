"""Procedural buckets with a bail handle for MoveBucket, written as URDF folders (``mobility.urdf``,
``meshes/``, ``meta.json``).

PartNet-Mobility cannot be downloaded here, so each bucket of the ManiSkill1-style splits (ManiSkill2 (arXiv 2302.04659)
Appendix C.6: 29 train, 10 test) is sampled from its id (``bucket-train-007``), deterministically.

Conventions (the env and its ground truth rely on them), in the bucket frame B = the URDF root frame:

- origin at the centre of the bottom's underside, +z up along the bucket's axis;
- the rim is the flat top of the wall at z = ``height_m``; radii are apothems of the regular N-gon walls
  (distance from the axis to the middle of a face), so ``wall_thickness_m`` is the horizontal face-to-face
  thickness a gripper closing across the rim feels;
- root link ``bucket``: a bottom slab (z in [0, bottom_thickness_m], full outer radius) and N convex wedge
  segments of a (possibly tapered) frustum wall on top of it, plus two pivot ears on the +-y sides just
  below the rim. Wedges, not boxes: their tops are flat and level and neighbours share faces, so the rim is
  a clean plane and the inner surface has no notches (for any taper);
- link ``handle`` on the revolute joint ``handle_joint`` whose axis is +y through the two pivots, at height
  ``pivot_height_m``. The handle is a semicircular arc of radius ``handle_radius_m`` (pivot to axis of the
  rod) centred on that axis: at q = 0 it stands upright, crossing above the rim; q > 0 tips it toward +x
  (right-hand rule about +y). The limits +-``handle_limit_rad`` (pi/2 less a few degrees) hold it lying
  down just outside the wall and below the rim: the handle and the body do not collide (their collision
  is filtered in the env), the joint limit is what it rests on;
- every visual of the handle has ``handle`` in its name and no other visual does; collisions copy visuals.

Wall thickness comes in two classes, stratified by the id's index (every third id is thick) so that each
split has both: "thin" (0.006-0.03 m, a Panda gripper, 0.08 m opening, can pinch the rim) and "thick"
(0.075-0.11 m, an insulated double wall too thick to pinch). Everything else is drawn from the seed.
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
from .urdf_solids import NO_TURN, Solid, add_link, volume_m3, with_density, with_mass

GENERATOR_VERSION = "1"
SPLIT_COUNTS = {"train": 29, "test": 10}
WALL_CLASSES = ("thin", "thick")
THICK_EVERY = 3  # ids with index % 3 == 2 are thick: about a third of each split
THIN_RIM_MAX_M = 0.06  # a rim thinner than this can be pinched by the Panda gripper (0.08 m opening)
BALL_RADIUS_M = 0.05  # ManiSkill2's MoveBucket ball
BALL_CLEARANCE_M = 0.01  # between the ball and the inner wall at the floor of the bucket

# Sizes (m) and shares.
_TOP_RADIUS_RANGE_M = (0.13, 0.22)  # outer radius at the rim
_TAPER_RANGE = (0.75, 1.0)  # bottom outer radius / top outer radius
_STRAIGHT_SHARE = 0.25  # buckets with straight (untapered) walls
_HEIGHT_RANGE_M = (0.20, 0.36)
_WALL_THICKNESS_RANGE_M = {"thin": (0.006, 0.03), "thick": (0.075, 0.11)}
_BOTTOM_THICKNESS_RANGE_M = {"thin": (0.006, 0.015), "thick": (0.02, 0.04)}
_SEGMENT_RANGE = (24, 32)  # wall segments around the axis
_PIVOT_DEPTH_RANGE_M = (0.03, 0.06)  # pivot axis below the rim
_EAR_STANDOFF_RANGE_M = (0.015, 0.03)  # pivot outside the outer wall at pivot height
_HANDLE_THICKNESS_RANGE_M = (0.008, 0.015)  # rod diameter
_HANDLE_SEGMENTS = 8  # straight rods along the semicircle
_HANDLE_DOWN_MARGIN_RANGE_RAD = (0.05, 0.1)  # limit = pi/2 - margin: lying down, just clear of the wall
_HANDLE_WALL_CLEARANCE_M = 0.003  # lying-down handle to outer wall
_HANDLE_BELOW_RIM_M = 0.005  # lying-down handle top below the rim
_HANDLE_ABOVE_RIM_M = 0.08  # upright handle rod above the rim, room for a hand
_EAR_WIDTH_M = 0.025  # tangential
_EAR_HEIGHT_M = 0.03
_EAR_OVERHANG_M = 0.006  # ear beyond the handle rod
# Total mass (body + handle), kg: plastic or sheet-metal buckets; insulated double-wall buckets are heavier
# but light enough for two Panda arms (their walls get a low, foam-like effective density).
_MASS_RANGE_KG = {"thin": (0.6, 2.5), "thick": (2.0, 5.0)}
_HANDLE_DENSITY_KG_M3 = 1200.0  # plastic, or a hollow metal tube
# Nominal joint dynamics written into the URDF; the env draws them per episode.
_HANDLE_DAMPING = 0.2  # N m s/rad
_HANDLE_FRICTION = 0.1

# Not cyan (the ball is cyan) and not dark grey (the robot's hand), so color tells them apart.
_BODY_COLORS = {
    "red": (0.78, 0.13, 0.11),
    "orange": (0.95, 0.50, 0.10),
    "yellow": (0.95, 0.80, 0.16),
    "green": (0.22, 0.56, 0.26),
    "blue": (0.16, 0.30, 0.72),
    "purple": (0.50, 0.26, 0.60),
    "pink": (0.90, 0.46, 0.60),
    "white": (0.92, 0.92, 0.90),
    "galvanized": (0.66, 0.68, 0.70),
    "brown": (0.55, 0.36, 0.22),
}
_HANDLE_COLORS = {
    "steel": (0.72, 0.73, 0.75),
    "chrome": (0.86, 0.87, 0.89),
    "white": (0.93, 0.93, 0.92),
    "red": (0.80, 0.14, 0.12),
    "yellow": (0.96, 0.82, 0.18),
    "blue": (0.18, 0.32, 0.75),
}
_ID_PATTERN = re.compile(r"^bucket-(train|test)-(\d{3})$")


@dataclass(frozen=True)
class BucketSpec:
    """Every parameter of one bucket, sampled and derived, as plain data (``dataclasses.asdict`` is
    json-serializable). Lengths in m, in the bucket frame (see the module docstring)."""

    model_id: str
    split: str
    seed: int
    wall_class: str  # "thin" | "thick"
    num_segments: int  # wall wedges around the axis
    height_m: float  # rim (top of the wall) above the underside
    top_radius_m: float  # outer radius at the rim
    bottom_radius_m: float  # outer radius at z = 0
    wall_thickness_m: float  # horizontal, face to face: the rim thickness
    bottom_thickness_m: float
    inner_bottom_radius_m: float  # inner wall radius at the floor of the bucket (z = bottom_thickness_m)
    pivot_height_m: float  # handle axis height
    handle_radius_m: float  # arc radius, pivot axis to the rod's centre line
    handle_thickness_m: float  # rod diameter
    handle_segments: int
    handle_limit_rad: float  # joint limits are +-this
    mass_kg: float  # body + handle
    body_mass_kg: float
    handle_mass_kg: float
    body_color: str
    handle_color: str
    body_rgba: tuple[float, float, float, float]
    handle_rgba: tuple[float, float, float, float]

    @property
    def rim_is_thin(self) -> bool:
        return self.wall_thickness_m < THIN_RIM_MAX_M

    def outer_radius_at(self, z_m: float) -> float:
        """Outer wall radius (apothem) at height ``z_m`` in the bucket frame (linear taper)."""
        return self.bottom_radius_m + (self.top_radius_m - self.bottom_radius_m) * z_m / self.height_m


def bucket_ids(split: str) -> list[str]:
    """Ids of one split, e.g. ``bucket-train-007``; split in {train, test}."""
    if split not in SPLIT_COUNTS:
        raise ValueError(f"unknown split {split!r}; valid splits: {sorted(SPLIT_COUNTS)}")
    return [f"bucket-{split}-{i:03d}" for i in range(SPLIT_COUNTS[split])]


def sample_bucket(model_id: str) -> BucketSpec:
    """Sample the bucket of ``model_id`` (an id from ``bucket_ids``), deterministically from the id."""
    match = _ID_PATTERN.match(model_id) if isinstance(model_id, str) else None
    if match is None:
        raise ValueError(
            f"malformed bucket id {model_id!r}; expected 'bucket-<train|test>-<NNN>', e.g. 'bucket-train-000'"
        )
    split, index = match.group(1), int(match.group(2))
    if index >= SPLIT_COUNTS[split]:
        ids = bucket_ids(split)
        raise ValueError(f"bucket id {model_id!r} out of range: split {split!r} has {ids[0]} .. {ids[-1]}")
    # crc32, not hash(): Python salts str hashes per process.
    seed = zlib.crc32(model_id.encode("utf-8"))
    rng = np.random.default_rng(seed)
    wall_class = "thick" if index % THICK_EVERY == THICK_EVERY - 1 else "thin"

    num_segments = int(rng.integers(_SEGMENT_RANGE[0], _SEGMENT_RANGE[1] + 1))
    height_m = _uniform(rng, *_HEIGHT_RANGE_M)
    thickness_m = _uniform(rng, *_WALL_THICKNESS_RANGE_M[wall_class])
    bottom_m = _uniform(rng, *_BOTTOM_THICKNESS_RANGE_M[wall_class])
    # The ball must fit at the floor: inner radius there >= ball radius + clearance (+1 mm for rounding).
    min_inner_m = BALL_RADIUS_M + BALL_CLEARANCE_M + 0.001
    top_m = _uniform(rng, max(_TOP_RADIUS_RANGE_M[0], min_inner_m + thickness_m), _TOP_RADIUS_RANGE_M[1])
    # Bottom radius r_b, with the floor radius r_b + (top - r_b) * bottom / height - thickness >= min_inner.
    f = bottom_m / height_m
    min_bottom_m = max(_TAPER_RANGE[0] * top_m, (min_inner_m + thickness_m - f * top_m) / (1 - f))
    straight = rng.random() < _STRAIGHT_SHARE
    bottom_radius_m = top_m if straight else _uniform(rng, min(min_bottom_m, top_m), top_m)

    body_color = _choice(rng, sorted(_BODY_COLORS))
    handle_color = _choice(rng, sorted(_HANDLE_COLORS))
    spec = BucketSpec(
        model_id=model_id,
        split=split,
        seed=seed,
        wall_class=wall_class,
        num_segments=num_segments,
        height_m=height_m,
        top_radius_m=top_m,
        bottom_radius_m=bottom_radius_m,
        wall_thickness_m=thickness_m,
        bottom_thickness_m=bottom_m,
        inner_bottom_radius_m=0.0,
        pivot_height_m=0.0,
        handle_radius_m=0.0,
        handle_thickness_m=0.0,
        handle_segments=_HANDLE_SEGMENTS,
        handle_limit_rad=0.0,
        mass_kg=0.0,
        body_mass_kg=0.0,
        handle_mass_kg=0.0,
        body_color=body_color,
        handle_color=handle_color,
        body_rgba=_jittered_rgba(rng, _BODY_COLORS[body_color]),
        handle_rgba=_jittered_rgba(rng, _HANDLE_COLORS[handle_color]),
    )
    spec = dataclasses.replace(
        spec, inner_bottom_radius_m=round(spec.outer_radius_at(bottom_m) - thickness_m, 4), **_sample_handle(rng, spec)
    )
    handle_volume = volume_m3(_handle_solids(spec))
    handle_mass_kg = round(_HANDLE_DENSITY_KG_M3 * handle_volume, 4)
    # Heavier for bigger buckets, with some spread.
    size = (top_m - _TOP_RADIUS_RANGE_M[0]) / np.ptp(_TOP_RADIUS_RANGE_M) * 0.5 + (
        height_m - _HEIGHT_RANGE_M[0]
    ) / np.ptp(_HEIGHT_RANGE_M) * 0.5
    share = float(np.clip(0.6 * size + 0.4 * rng.random(), 0.0, 1.0))
    low, high = _MASS_RANGE_KG[wall_class]
    mass_kg = round(low + share * (high - low), 4)
    return dataclasses.replace(
        spec, mass_kg=mass_kg, handle_mass_kg=handle_mass_kg, body_mass_kg=round(mass_kg - handle_mass_kg, 4)
    )


def write_bucket(spec: BucketSpec, folder: Path) -> Path:
    """Write ``mobility.urdf``, ``meshes/*.obj`` and ``meta.json`` of ``spec`` into ``folder``.

    Returns the path of ``mobility.urdf``. ``folder`` is created if missing.
    """
    folder = Path(folder)
    (folder / "meshes").mkdir(parents=True, exist_ok=True)
    body, handle = _body_solids(spec), _handle_solids(spec)
    for solid in body:
        if solid.geometry == "mesh":
            (folder / solid.mesh_file).write_text(_obj_text(solid))
    urdf_path = folder / "mobility.urdf"
    urdf_path.write_text(_urdf_text(spec, body, handle))
    meta = {"generator_version": GENERATOR_VERSION, **dataclasses.asdict(spec)}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return urdf_path


def bucket_urdf(model_id: str) -> Path:
    """Path of the ``mobility.urdf`` of ``model_id``, generated once under the asset cache."""
    spec = sample_bucket(model_id)
    folder = build_once(
        cache_dir() / "buckets" / f"{model_id}-v{GENERATOR_VERSION}", lambda tmp: write_bucket(spec, tmp)
    )
    return folder / "mobility.urdf"


# ---------------------------------------------------------------------------------------------- sampling


def _sample_handle(rng: np.random.Generator, spec: BucketSpec) -> dict:
    """Pivot height, arc radius, rod thickness and joint limit, redrawn until the handle, lying down at its
    limit, clears the outer wall and stays below the rim, and stands well above the rim when upright."""
    for _ in range(100):
        pivot_z = round(spec.height_m - _uniform(rng, *_PIVOT_DEPTH_RANGE_M), 4)
        radius = round(spec.outer_radius_at(pivot_z) + _uniform(rng, *_EAR_STANDOFF_RANGE_M), 4)
        thickness = _uniform(rng, *_HANDLE_THICKNESS_RANGE_M)
        limit = round(math.pi / 2 - float(rng.uniform(*_HANDLE_DOWN_MARGIN_RANGE_RAD)), 4)
        values = {"pivot_height_m": pivot_z, "handle_radius_m": radius, "handle_thickness_m": thickness,
                  "handle_limit_rad": limit}
        if _handle_fits(dataclasses.replace(spec, **values)):
            return values
    # Unreachable with the ranges above (the first draw fits for every bucket of both splits).
    raise RuntimeError(f"no handle fits bucket {spec.model_id}")


def _handle_fits(spec: BucketSpec) -> bool:
    wall_clear, top_below_rim = lying_handle_clearances(spec)
    apex_above_rim = spec.pivot_height_m + spec.handle_radius_m - spec.handle_thickness_m / 2 - spec.height_m
    return (
        wall_clear >= _HANDLE_WALL_CLEARANCE_M
        and top_below_rim >= _HANDLE_BELOW_RIM_M
        and apex_above_rim >= _HANDLE_ABOVE_RIM_M
    )


def lying_handle_clearances(spec: BucketSpec) -> tuple[float, float]:
    """(gap between the rod and the outer wall, gap between the rod's top and the rim plane), in m, of the
    handle lying at its joint limit; checked on the rod's centre line, at the wall's corners (circumradius)."""
    s = np.linspace(0.0, math.pi, 721)
    margin = math.pi / 2 - spec.handle_limit_rad
    r = spec.handle_radius_m
    # Arc point (0, r cos s, r sin s) about the pivot axis, turned by pi/2 - margin about +y.
    horizontal = r * np.sqrt(np.cos(s) ** 2 + (np.sin(s) * math.cos(margin)) ** 2)
    z = spec.pivot_height_m + r * np.sin(s) * math.sin(margin)
    wall = np.array([spec.outer_radius_at(min(float(h), spec.height_m)) for h in z])
    wall /= math.cos(math.pi / spec.num_segments)
    half = spec.handle_thickness_m / 2
    return float(np.min(horizontal - half - wall)), float(spec.height_m - (z.max() + half))


# ---------------------------------------------------------------------------------------------- geometry


def _ring(apothem_m: float, z_m: float, n: int) -> list[tuple[float, float, float]]:
    """Corners of a regular n-gon with the given apothem at height z; a face is centred on angle 0."""
    circum = apothem_m / math.cos(math.pi / n)
    return [
        (circum * math.cos((2 * i + 1) * math.pi / n), circum * math.sin((2 * i + 1) * math.pi / n), z_m)
        for i in range(n)
    ]


def _convex_solid(name: str, vertices: list, faces: list[tuple[int, ...]], material: str = "body") -> Solid:
    """A convex polyhedron; faces are re-oriented counter-clockwise seen from outside."""
    points = np.asarray(vertices, dtype=np.float64)
    inside = points.mean(axis=0)
    oriented = []
    for face in faces:
        poly = points[list(face)]
        normal = np.cross(poly[1] - poly[0], poly[2] - poly[0])
        oriented.append(tuple(face) if normal @ (poly.mean(axis=0) - inside) > 0 else tuple(reversed(face)))
    rounded = tuple(tuple(round(float(c), 7) for c in v) for v in vertices)
    return Solid(name, "mesh", (), (0.0, 0.0, 0.0), NO_TURN, material, vertices=rounded, faces=tuple(oriented))


def _body_solids(spec: BucketSpec) -> list[Solid]:
    """Bottom slab, wall wedges and pivot ears, in the bucket frame."""
    n, b, h, t = spec.num_segments, spec.bottom_thickness_m, spec.height_m, spec.wall_thickness_m
    r = spec.outer_radius_at
    bottom = _ring(r(0.0), 0.0, n) + _ring(r(b), b, n)
    faces = [tuple(range(n)), tuple(range(n, 2 * n))]
    faces += [(i, (i + 1) % n, n + (i + 1) % n, n + i) for i in range(n)]
    solids = [_convex_solid("bottom", bottom, faces)]

    outer_b, outer_h = _ring(r(b), b, n), _ring(r(h), h, n)
    inner_b, inner_h = _ring(r(b) - t, b, n), _ring(r(h) - t, h, n)
    # Wedge i spans the face of each ring between corners i-1 and i: vertices ob0 ob1 ot0 ot1 ib0 ib1 it0 it1.
    wedge_faces = [(0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)]
    for i in range(n):
        j = (i - 1) % n
        corners = [outer_b[j], outer_b[i], outer_h[j], outer_h[i], inner_b[j], inner_b[i], inner_h[j], inner_h[i]]
        solids.append(_convex_solid(f"wall_{i:02d}", corners, wedge_faces))

    # Ears: from inside the wall out past the handle's rod end, centred on the pivot.
    z = spec.pivot_height_m
    inner_end = r(z) - t / 2
    outer_end = spec.handle_radius_m + spec.handle_thickness_m / 2 + _EAR_OVERHANG_M
    length = outer_end - inner_end
    for side, sign in (("left", 1.0), ("right", -1.0)):
        center = (0.0, sign * (inner_end + length / 2), z)
        solids.append(Solid(f"ear_{side}", "box", (_EAR_WIDTH_M, length, _EAR_HEIGHT_M), center, NO_TURN, "body"))
    return solids


def _handle_solids(spec: BucketSpec) -> list[Solid]:
    """Straight rods along the semicircle (0, r cos s, r sin s), s in [0, pi], in the handle frame (on the
    pivot axis, axes of the bucket at q = 0). Rods are a diameter longer than their chord, so they overlap."""
    r, k, d = spec.handle_radius_m, spec.handle_segments, spec.handle_thickness_m
    solids = []
    for i in range(k):
        s0, s1 = math.pi * i / k, math.pi * (i + 1) / k
        p0 = np.array([0.0, r * math.cos(s0), r * math.sin(s0)])
        p1 = np.array([0.0, r * math.cos(s1), r * math.sin(s1)])
        chord = p1 - p0
        # URDF cylinders lie along their z; roll about x by atan2(-dy, dz) turns z onto the chord.
        roll = math.atan2(-chord[1], chord[2])
        solids.append(
            Solid(f"handle_{i}", "cylinder", (d / 2, float(np.linalg.norm(chord)) + d),
                   tuple(float(c) for c in (p0 + p1) / 2), (roll, 0.0, 0.0), "handle")
        )
    return solids


# ---------------------------------------------------------------------------------------------- files


def _obj_text(solid: Solid) -> str:
    """Wavefront OBJ of a convex solid with one normal per face (flat shading)."""
    points = np.asarray(solid.vertices)
    lines = [f"# {solid.name}: convex, counter-clockwise faces"]
    lines += [f"v {_fmt(*v)}" for v in solid.vertices]
    for face in solid.faces:
        poly = points[list(face)]
        normal = np.cross(poly[1] - poly[0], poly[2] - poly[0])
        lines.append(f"vn {_fmt(*(normal / np.linalg.norm(normal)))}")
    for k, face in enumerate(solid.faces, start=1):
        for i in range(1, len(face) - 1):
            lines.append("f " + " ".join(f"{v + 1}//{k}" for v in (face[0], face[i], face[i + 1])))
    return "\n".join(lines) + "\n"


def _urdf_text(spec: BucketSpec, body: list[Solid], handle: list[Solid]) -> str:
    robot = ET.Element("robot", name=spec.model_id)
    for name, rgba in {"body": spec.body_rgba, "handle": spec.handle_rgba}.items():
        material = ET.SubElement(robot, "material", name=name)
        ET.SubElement(material, "color", rgba=_fmt(*rgba))
    add_link(robot, "bucket", with_mass(body, spec.body_mass_kg))
    add_link(robot, "handle", with_density(handle, _HANDLE_DENSITY_KG_M3))
    joint = ET.SubElement(robot, "joint", name="handle_joint", type="revolute")
    ET.SubElement(joint, "origin", xyz=_fmt(0.0, 0.0, spec.pivot_height_m), rpy="0 0 0")
    ET.SubElement(joint, "axis", xyz="0 1 0")
    ET.SubElement(joint, "parent", link="bucket")
    ET.SubElement(joint, "child", link="handle")
    limit = {"lower": _fmt(-spec.handle_limit_rad), "upper": _fmt(spec.handle_limit_rad), "effort": "20",
             "velocity": "5"}
    ET.SubElement(joint, "limit", limit)
    ET.SubElement(joint, "dynamics", damping=_fmt(_HANDLE_DAMPING), friction=_fmt(_HANDLE_FRICTION))
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
