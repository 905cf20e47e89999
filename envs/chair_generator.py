"""Procedural swivel chairs for PushChair, in PartNet-Mobility layout.

PartNet-Mobility cannot be downloaded here, so each chair of the ManiSkill1-style splits (26 train, 10 test;
ManiSkill2 (arXiv 2302.04659) Appendix C.6) is sampled from its id (``chair-train-007``) and written as a folder holding
``mobility.urdf`` and ``meta.json``.

Conventions (the env relies on them):

- Root link ``base`` (five-star base, hub and the lower gas-lift cylinder): origin on the vertical swivel
  axis at floor level when the chair rests on its casters with every joint at 0; +z up; +x is the chair's
  front at seat swivel 0.
- Five casters, ``caster_<i>_fork`` on a continuous joint ``caster_<i>_swivel`` about the vertical at the leg
  tip, and ``caster_<i>_wheel`` on a continuous joint ``caster_<i>_roll`` about the fork's horizontal y axis.
  The wheel trails the swivel axis, as on real casters, so that a push turns the fork into the direction
  of travel; its collision is a sphere, which touches the floor at one point whatever the fork's angle.
- ``seat`` on a continuous joint ``seat_swivel`` about the gas-lift axis. Seat frame: origin on the swivel
  axis at the height of the cushion's top, x toward the front (the open side of the seat), z up. It carries
  the cushion (centered on the axis), the backrest (a thin panel rising from the cushion's back edge, reclined
  backward), optional armrests and the upper gas-lift cylinder.
- Visual names say the part, as ManiSkill reads PartNet-Mobility chairs: ``seat``, ``backrest``,
  ``armrest``, ``leg`` / ``base``, ``wheel``. Collisions copy visuals (boxes, cylinders and spheres only).

Train and test ids are different seeds of one distribution; armrests are stratified by the id's index (odd
indices have them), so each split holds both kinds.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from .urdf_solids import NO_TURN, Solid, add_link, with_mass

GENERATOR_VERSION = "1"
SPLIT_COUNTS = {"train": 26, "test": 10}
NUM_CASTERS = 5

# Sizes (m) and angles, of office swivel chairs.
_STAR_RADIUS_RANGE_M = (0.26, 0.34)  # hub axis to the caster's swivel axis
_LEG_WIDTH_RANGE_M = (0.035, 0.05)
_LEG_HEIGHT_RANGE_M = (0.025, 0.04)
_HUB_RADIUS_RANGE_M = (0.035, 0.05)
_WHEEL_RADIUS_RANGE_M = (0.025, 0.035)
_CASTER_TRAIL_RANGE_M = (0.015, 0.025)  # horizontal offset of the wheel behind its swivel axis
_FORK_CLEARANCE_RANGE_M = (0.012, 0.02)  # fork housing height above the top of the wheel
_GAS_LIFT_RADIUS_RANGE_M = (0.022, 0.03)
_SEAT_HEIGHT_RANGE_M = (0.40, 0.55)  # top of the cushion above the floor
_SEAT_WIDTH_RANGE_M = (0.40, 0.55)
_SEAT_DEPTH_RANGE_M = (0.38, 0.50)
_SEAT_THICKNESS_RANGE_M = (0.05, 0.10)
_BACKREST_HEIGHT_RANGE_M = (0.30, 0.60)  # top edge above the cushion's top
_BACKREST_WIDTH_RANGE_M = (0.35, 0.55)
_BACKREST_THICKNESS_RANGE_M = (0.02, 0.06)  # thin enough for the Panda gripper (0.08 m opening) to pinch
_BACKREST_RECLINE_RANGE_RAD = (0.0, math.radians(10.0))
_ARMREST_HEIGHT_RANGE_M = (0.18, 0.27)  # top of the pad above the cushion's top
_ARMREST_PAD_LENGTH_RANGE_M = (0.20, 0.28)
_ARMREST_PAD_WIDTH_RANGE_M = (0.05, 0.07)
_ARMREST_PAD_THICKNESS_M = 0.025
_ARMREST_POST_SIZE_M = 0.03

# Part masses (kg), from which each part's density follows; totals stay within 7-15 kg.
_BASE_MASS_RANGE_KG = (1.8, 3.2)  # legs and hub
_GAS_LIFT_MASS_RANGE_KG = (0.8, 1.3)  # both cylinders; the outer (lower) one carries this share:
_LOWER_GAS_LIFT_SHARE = 0.65
_CASTER_MASS_RANGE_KG = (0.08, 0.14)  # fork and wheel of one caster; the wheel carries this share:
_WHEEL_SHARE = 0.6
_SEAT_MASS_RANGE_KG = (3.0, 4.5)  # cushion on its plywood shell
_BACKREST_MASS_RANGE_KG = (1.2, 2.6)
_ARMREST_PAIR_MASS_RANGE_KG = (0.6, 1.2)

# Joint dynamics, drawn per episode by the env (push_chair.py says why the caster damping is not ManiSkill2's).
SEAT_FRICTION_RANGE = (0.05, 0.15)  # ManiSkill2 PushChair
SEAT_DAMPING_RANGE = (5.0, 15.0)  # N m s/rad, ManiSkill2 PushChair
CASTER_FRICTION_RANGE = (0.0, 0.1)  # ManiSkill2 PushChair
CASTER_DAMPING_RANGE = (0.0, 0.005)  # N m s/rad; ManiSkill2 draws U(0, 0.5), which locks 3 cm casters

# Upholstery; no pure red (the target marker is red) and no dark grey (the robot's hand is).
_FABRIC_COLORS = {
    "navy": (0.16, 0.22, 0.40),
    "royal_blue": (0.20, 0.35, 0.70),
    "teal": (0.12, 0.48, 0.50),
    "forest_green": (0.18, 0.40, 0.24),
    "olive": (0.45, 0.46, 0.22),
    "mustard": (0.80, 0.62, 0.18),
    "orange": (0.90, 0.50, 0.16),
    "cognac": (0.58, 0.34, 0.18),
    "sand": (0.78, 0.70, 0.55),
    "cream": (0.90, 0.87, 0.78),
    "light_grey": (0.68, 0.69, 0.70),
    "plum": (0.42, 0.22, 0.40),
    "sky_blue": (0.48, 0.68, 0.86),
}
# Bases and armrests: polished or painted metal, light plastics.
_FRAME_COLORS = {
    "chrome": (0.84, 0.85, 0.87),
    "aluminium": (0.72, 0.73, 0.75),
    "white": (0.92, 0.92, 0.90),
    "light_grey": (0.60, 0.61, 0.63),
    "beige": (0.80, 0.74, 0.62),
    "oak": (0.72, 0.55, 0.36),
}
_WHEEL_COLORS = {
    "grey": (0.50, 0.50, 0.52),
    "light_grey": (0.70, 0.70, 0.72),
    "white": (0.90, 0.90, 0.90),
    "smoke": (0.56, 0.58, 0.62),
}
_ID_PATTERN = re.compile(r"^chair-(train|test)-(\d{3})$")


@dataclass(frozen=True)
class ChairSpec:
    """Every sampled parameter of one chair, as plain data (``dataclasses.asdict`` is json-serializable)."""

    model_id: str
    split: str
    seed: int
    # Base (root link frame: origin on the swivel axis at floor level).
    star_radius_m: float  # swivel axis of each caster from the hub axis
    leg_phase_rad: float  # direction of leg 0 from +x; legs every 72 degrees
    leg_profile: str  # "box" | "cylinder"
    leg_width_m: float  # box width or cylinder diameter
    leg_height_m: float  # box height (equals the width for cylinders)
    hub_radius_m: float
    hub_height_m: float
    gas_lift_radius_m: float  # outer (lower) cylinder; the inner one is 0.55 of it
    # Casters.
    wheel_radius_m: float
    caster_trail_m: float
    fork_drop_m: float  # swivel pivot above the wheel center
    # Seat (seat frame: origin on the swivel axis at the cushion's top, x forward).
    seat_height_m: float  # cushion top above the floor
    seat_width_m: float
    seat_depth_m: float
    seat_thickness_m: float
    backrest_height_m: float  # top edge above the cushion's top
    backrest_width_m: float
    backrest_thickness_m: float
    backrest_recline_rad: float  # backward lean from vertical
    has_armrests: bool
    armrest_height_m: float  # pad top above the cushion's top; 0 without armrests
    armrest_pad_length_m: float
    armrest_pad_width_m: float
    # Masses (kg) of the parts; densities follow from them.
    base_mass_kg: float
    gas_lift_mass_kg: float
    caster_mass_kg: float  # each
    seat_mass_kg: float
    backrest_mass_kg: float
    armrest_mass_kg: float  # the pair; 0 without armrests
    # Nominal joint dynamics (the env redraws them per episode).
    seat_friction: float
    seat_damping: float
    caster_friction: float
    caster_damping: float
    # Colors.
    fabric_color: str
    backrest_color: str
    frame_color: str
    wheel_color: str
    fabric_rgba: tuple[float, float, float, float]
    backrest_rgba: tuple[float, float, float, float]
    frame_rgba: tuple[float, float, float, float]
    wheel_rgba: tuple[float, float, float, float]

    @property
    def total_mass_kg(self) -> float:
        return (
            self.base_mass_kg
            + self.gas_lift_mass_kg
            + NUM_CASTERS * self.caster_mass_kg
            + self.seat_mass_kg
            + self.backrest_mass_kg
            + self.armrest_mass_kg
        )


def chair_ids(split: str) -> list[str]:
    """Ids of one split, e.g. ``chair-train-007``; split in {train, test}."""
    if split not in SPLIT_COUNTS:
        raise ValueError(f"unknown split {split!r}; valid splits: {sorted(SPLIT_COUNTS)}")
    return [f"chair-{split}-{i:03d}" for i in range(SPLIT_COUNTS[split])]


def sample_chair(model_id: str) -> ChairSpec:
    """Sample the chair of ``model_id`` (an id from ``chair_ids``), deterministically from the id."""
    match = _ID_PATTERN.match(model_id) if isinstance(model_id, str) else None
    if match is None:
        raise ValueError(
            f"malformed chair id {model_id!r}; expected 'chair-<train|test>-<NNN>', e.g. {chair_ids('train')[0]!r}"
        )
    split, index = match.group(1), int(match.group(2))
    if index >= SPLIT_COUNTS[split]:
        count = SPLIT_COUNTS[split]
        raise ValueError(f"chair id {model_id!r} out of range: split {split!r} has {count} ids, "
                         f"{chair_ids(split)[0]} to {chair_ids(split)[-1]}")
    # crc32, not hash(): Python salts str hashes per process.
    seed = zlib.crc32(model_id.encode("utf-8"))
    rng = np.random.default_rng(seed)

    leg_profile = "box" if rng.random() < 0.5 else "cylinder"
    leg_width_m = _uniform(rng, *_LEG_WIDTH_RANGE_M)
    leg_height_m = leg_width_m if leg_profile == "cylinder" else _uniform(rng, *_LEG_HEIGHT_RANGE_M)
    wheel_radius_m = _uniform(rng, *_WHEEL_RADIUS_RANGE_M)
    has_armrests = index % 2 == 1
    fabric_color = _choice(rng, sorted(_FABRIC_COLORS))
    backrest_color = fabric_color if rng.random() < 0.7 else _choice(rng, sorted(_FABRIC_COLORS))
    frame_color = _choice(rng, sorted(_FRAME_COLORS))
    wheel_color = _choice(rng, sorted(_WHEEL_COLORS))
    seat_width_m = _uniform(rng, *_SEAT_WIDTH_RANGE_M)
    return ChairSpec(
        model_id=model_id,
        split=split,
        seed=seed,
        star_radius_m=_uniform(rng, *_STAR_RADIUS_RANGE_M),
        leg_phase_rad=_uniform(rng, 0.0, 2 * math.pi / NUM_CASTERS),
        leg_profile=leg_profile,
        leg_width_m=leg_width_m,
        leg_height_m=leg_height_m,
        hub_radius_m=_uniform(rng, *_HUB_RADIUS_RANGE_M),
        hub_height_m=round(leg_height_m + _uniform(rng, 0.02, 0.04), 4),
        gas_lift_radius_m=_uniform(rng, *_GAS_LIFT_RADIUS_RANGE_M),
        wheel_radius_m=wheel_radius_m,
        caster_trail_m=_uniform(rng, *_CASTER_TRAIL_RANGE_M),
        fork_drop_m=round(wheel_radius_m + _uniform(rng, *_FORK_CLEARANCE_RANGE_M), 4),
        seat_height_m=_uniform(rng, *_SEAT_HEIGHT_RANGE_M),
        seat_width_m=seat_width_m,
        seat_depth_m=_uniform(rng, *_SEAT_DEPTH_RANGE_M),
        seat_thickness_m=_uniform(rng, *_SEAT_THICKNESS_RANGE_M),
        backrest_height_m=_uniform(rng, *_BACKREST_HEIGHT_RANGE_M),
        # Office backrests are rarely wider than the seat.
        backrest_width_m=_uniform(rng, _BACKREST_WIDTH_RANGE_M[0], min(_BACKREST_WIDTH_RANGE_M[1], seat_width_m)),
        backrest_thickness_m=_uniform(rng, *_BACKREST_THICKNESS_RANGE_M),
        backrest_recline_rad=_uniform(rng, *_BACKREST_RECLINE_RANGE_RAD),
        has_armrests=has_armrests,
        armrest_height_m=_uniform(rng, *_ARMREST_HEIGHT_RANGE_M) if has_armrests else 0.0,
        armrest_pad_length_m=_uniform(rng, *_ARMREST_PAD_LENGTH_RANGE_M) if has_armrests else 0.0,
        armrest_pad_width_m=_uniform(rng, *_ARMREST_PAD_WIDTH_RANGE_M) if has_armrests else 0.0,
        base_mass_kg=_uniform(rng, *_BASE_MASS_RANGE_KG),
        gas_lift_mass_kg=_uniform(rng, *_GAS_LIFT_MASS_RANGE_KG),
        caster_mass_kg=_uniform(rng, *_CASTER_MASS_RANGE_KG),
        seat_mass_kg=_uniform(rng, *_SEAT_MASS_RANGE_KG),
        backrest_mass_kg=_uniform(rng, *_BACKREST_MASS_RANGE_KG),
        armrest_mass_kg=_uniform(rng, *_ARMREST_PAIR_MASS_RANGE_KG) if has_armrests else 0.0,
        seat_friction=_uniform(rng, *SEAT_FRICTION_RANGE),
        seat_damping=_uniform(rng, *SEAT_DAMPING_RANGE),
        caster_friction=_uniform(rng, *CASTER_FRICTION_RANGE),
        caster_damping=round(float(rng.uniform(*CASTER_DAMPING_RANGE)), 6),
        fabric_color=fabric_color,
        backrest_color=backrest_color,
        frame_color=frame_color,
        wheel_color=wheel_color,
        fabric_rgba=_jittered_rgba(rng, _FABRIC_COLORS[fabric_color]),
        backrest_rgba=_jittered_rgba(rng, _FABRIC_COLORS[backrest_color]),
        frame_rgba=_jittered_rgba(rng, _FRAME_COLORS[frame_color]),
        wheel_rgba=_jittered_rgba(rng, _WHEEL_COLORS[wheel_color]),
    )


def write_chair(spec: ChairSpec, folder: Path) -> Path:
    """Write ``mobility.urdf`` and ``meta.json`` of ``spec`` into ``folder`` (created if missing).

    Returns the path of ``mobility.urdf``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    urdf_path = folder / "mobility.urdf"
    urdf_path.write_text(_urdf_text(spec))
    meta = {"generator_version": GENERATOR_VERSION, "total_mass_kg": round(spec.total_mass_kg, 4),
            **dataclasses.asdict(spec)}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return urdf_path


def chair_urdf(model_id: str) -> Path:
    """Path of the ``mobility.urdf`` of ``model_id``, generated once under the asset cache."""
    spec = sample_chair(model_id)
    # The key hashes what is written, so that any change of the generator gives a new folder.
    content = GENERATOR_VERSION + _urdf_text(spec) + json.dumps(dataclasses.asdict(spec), sort_keys=True)
    key = hashlib.sha1(content.encode("utf-8")).hexdigest()[:12]
    folder = build_once(cache_dir() / "chairs" / f"{model_id}-{key}", lambda tmp: write_chair(spec, tmp))
    return folder / "mobility.urdf"


def backrest_top_S(spec: ChairSpec) -> np.ndarray:
    """Center of the backrest's top edge in the seat frame (m)."""
    x_bottom, length_m = _backrest_line(spec)
    return np.array([x_bottom - length_m * math.sin(spec.backrest_recline_rad), 0.0, spec.backrest_height_m])


# ---------------------------------------------------------------------------------------------- sampling


# ---------------------------------------------------------------------------------------------- geometry

def _prim(name: str, geometry: str, size, xyz, material: str, rpy=NO_TURN) -> Solid:
    # Density 1 for now; with_mass scales a part's primitives to the part's sampled mass.
    return Solid(name, geometry, tuple(float(v) for v in size), tuple(float(v) for v in xyz),
                 tuple(float(v) for v in rpy), material, 1.0)


def _pivot_z_m(spec: ChairSpec) -> float:
    """Height of the casters' swivel pivots (bottom of the legs' tips) above the floor."""
    return spec.wheel_radius_m + spec.fork_drop_m


def _leg_angles_rad(spec: ChairSpec) -> list[float]:
    return [spec.leg_phase_rad + 2 * math.pi * i / NUM_CASTERS for i in range(NUM_CASTERS)]


def _gas_lift_levels_m(spec: ChairSpec) -> tuple[float, float, float]:
    """Heights (base frame) of the hub's top, the outer cylinder's top and the cushion's bottom."""
    hub_top = _pivot_z_m(spec) + spec.hub_height_m
    seat_bottom = spec.seat_height_m - spec.seat_thickness_m
    return hub_top, hub_top + 0.6 * (seat_bottom - hub_top), seat_bottom


def _base_primitives(spec: ChairSpec) -> list[Solid]:
    """Hub and five legs (root frame); the legs' tips rest on the caster pivots."""
    pivot_z = _pivot_z_m(spec)
    leg_z = pivot_z + spec.leg_height_m / 2
    inner_m = spec.hub_radius_m * 0.5  # legs start inside the hub, so the parts overlap
    outer_m = spec.star_radius_m + spec.leg_width_m / 2  # and end just past the pivot
    length_m = outer_m - inner_m
    prims = [_prim("base_hub", "cylinder", (spec.hub_radius_m, spec.hub_height_m),
                   (0, 0, pivot_z + spec.hub_height_m / 2), "frame")]
    for i, angle in enumerate(_leg_angles_rad(spec)):
        mid = (inner_m + outer_m) / 2
        xyz = (mid * math.cos(angle), mid * math.sin(angle), leg_z)
        if spec.leg_profile == "box":
            size = (length_m, spec.leg_width_m, spec.leg_height_m)
            prims.append(_prim(f"leg_{i}", "box", size, xyz, "frame", (0.0, 0.0, angle)))
        else:
            # A cylinder along z turned onto the leg's direction: pitch onto x, then yaw.
            rpy = (0.0, math.pi / 2, angle)
            prims.append(_prim(f"leg_{i}", "cylinder", (spec.leg_width_m / 2, length_m), xyz, "frame", rpy))
    return prims


def _lower_gas_lift(spec: ChairSpec) -> list[Solid]:
    hub_top, lift_top, _ = _gas_lift_levels_m(spec)
    bottom = hub_top - 0.01  # sunk into the hub
    return [_prim("base_gas_lift", "cylinder", (spec.gas_lift_radius_m, lift_top - bottom),
                  (0, 0, (lift_top + bottom) / 2), "frame")]


def _upper_gas_lift(spec: ChairSpec) -> list[Solid]:
    """The piston rod, in the seat frame, from inside the outer cylinder up into the cushion."""
    _, lift_top, seat_bottom = _gas_lift_levels_m(spec)
    bottom = lift_top - 0.04 - spec.seat_height_m  # overlaps the outer cylinder by 4 cm
    top = seat_bottom + 0.01 - spec.seat_height_m
    return [_prim("seat_gas_lift", "cylinder", (0.55 * spec.gas_lift_radius_m, top - bottom),
                  (0, 0, (top + bottom) / 2), "frame")]


def _fork_primitives(spec: ChairSpec) -> list[Solid]:
    """Fork housing in the fork frame (origin on the swivel pivot, x toward the trailing wheel)."""
    length_m = spec.caster_trail_m + 0.02
    size = (length_m, 0.6 * 2 * spec.wheel_radius_m, spec.fork_drop_m)
    return [_prim("wheel_fork", "box", size, (spec.caster_trail_m / 2, 0, -spec.fork_drop_m / 2), "wheel")]


def _wheel_primitives(spec: ChairSpec) -> list[Solid]:
    return [_prim("wheel", "sphere", (spec.wheel_radius_m,), (0, 0, 0), "wheel")]


def _cushion_primitives(spec: ChairSpec) -> list[Solid]:
    size = (spec.seat_depth_m, spec.seat_width_m, spec.seat_thickness_m)
    return [_prim("seat_cushion", "box", size, (0, 0, -spec.seat_thickness_m / 2), "fabric")]


def _backrest_line(spec: ChairSpec) -> tuple[float, float]:
    """x of the backrest panel's mid-plane at its bottom (seat frame), and the panel's length along its lean.

    The panel rises from the cushion's bottom at the cushion's back edge (flush with it) and leans back by
    the recline angle, so that its top edge is ``backrest_height_m`` above the cushion's top.
    """
    x_bottom = -spec.seat_depth_m / 2 + spec.backrest_thickness_m / 2
    length_m = (spec.backrest_height_m + spec.seat_thickness_m) / math.cos(spec.backrest_recline_rad)
    return x_bottom, length_m


def _backrest_primitives(spec: ChairSpec) -> list[Solid]:
    x_bottom, length_m = _backrest_line(spec)
    lean = spec.backrest_recline_rad
    # Mid-point of the panel: from its bottom, half its length along (-sin, 0, cos) of the lean.
    center = (x_bottom - length_m / 2 * math.sin(lean), 0.0, -spec.seat_thickness_m + length_m / 2 * math.cos(lean))
    size = (spec.backrest_thickness_m, spec.backrest_width_m, length_m)
    # Pitch -lean turns the panel's z axis onto (-sin, 0, cos): its top edge leans backward (-x).
    return [_prim("backrest_panel", "box", size, center, "backrest", (0.0, -lean, 0.0))]


def _armrest_primitives(spec: ChairSpec) -> list[Solid]:
    if not spec.has_armrests:
        return []
    post, pad_t = _ARMREST_POST_SIZE_M, _ARMREST_PAD_THICKNESS_M
    prims = []
    for side, sign in (("right", -1.0), ("left", 1.0)):
        y = sign * (spec.seat_width_m / 2 + spec.armrest_pad_width_m / 2)  # just outside the cushion
        # The post reaches from the cushion's bottom up into the pad.
        post_bottom, post_top = -spec.seat_thickness_m, spec.armrest_height_m - pad_t / 2
        x_post = -0.1 * spec.seat_depth_m
        prims.append(_prim(f"armrest_post_{side}", "box", (post, post, post_top - post_bottom),
                           (x_post, y, (post_top + post_bottom) / 2), "frame"))
        pad = (spec.armrest_pad_length_m, spec.armrest_pad_width_m, pad_t)
        prims.append(_prim(f"armrest_pad_{side}", "box", pad, (x_post, y, spec.armrest_height_m - pad_t / 2), "frame"))
    return prims


def _link_primitives(spec: ChairSpec) -> dict[str, list[Solid]]:
    """Solid primitives of every link, in its own frame, with densities that give the sampled masses."""
    wheel_kg = spec.caster_mass_kg * _WHEEL_SHARE
    links = {
        "base": with_mass(_base_primitives(spec), spec.base_mass_kg)
        + with_mass(_lower_gas_lift(spec), spec.gas_lift_mass_kg * _LOWER_GAS_LIFT_SHARE),
        "seat": with_mass(_cushion_primitives(spec), spec.seat_mass_kg)
        + with_mass(_backrest_primitives(spec), spec.backrest_mass_kg)
        + (with_mass(_armrest_primitives(spec), spec.armrest_mass_kg) if spec.has_armrests else [])
        + with_mass(_upper_gas_lift(spec), spec.gas_lift_mass_kg * (1 - _LOWER_GAS_LIFT_SHARE)),
    }
    for i in range(NUM_CASTERS):
        fork = [p._replace(name=f"{p.name}_{i}") for p in _fork_primitives(spec)]
        wheel = [p._replace(name=f"{p.name}_{i}") for p in _wheel_primitives(spec)]
        links[f"caster_{i}_fork"] = with_mass(fork, spec.caster_mass_kg - wheel_kg)
        links[f"caster_{i}_wheel"] = with_mass(wheel, wheel_kg)
    return links


# ---------------------------------------------------------------------------------------------- URDF


def _add_joint(robot: ET.Element, name: str, parent: str, child: str, xyz, rpy, axis: str,
               friction: float, damping: float) -> None:
    # Continuous: SAPIEN loads it as a revolute joint without limits.
    joint = ET.SubElement(robot, "joint", name=name, type="continuous")
    ET.SubElement(joint, "origin", xyz=_fmt(*xyz), rpy=_fmt(*rpy))
    ET.SubElement(joint, "axis", xyz=axis)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    ET.SubElement(joint, "limit", effort="100", velocity="100")
    ET.SubElement(joint, "dynamics", damping=_fmt(damping), friction=_fmt(friction))


def _urdf_text(spec: ChairSpec) -> str:
    robot = ET.Element("robot", name=spec.model_id)
    colors = {"fabric": spec.fabric_rgba, "backrest": spec.backrest_rgba, "frame": spec.frame_rgba,
              "wheel": spec.wheel_rgba}
    for name, rgba in colors.items():
        material = ET.SubElement(robot, "material", name=name)
        ET.SubElement(material, "color", rgba=_fmt(*rgba))

    links = _link_primitives(spec)
    for name, prims in links.items():
        add_link(robot, name, prims)

    _add_joint(robot, "seat_swivel", "base", "seat", (0, 0, spec.seat_height_m), NO_TURN, "0 0 1",
               spec.seat_friction, spec.seat_damping)
    pivot_z = _pivot_z_m(spec)
    for i, angle in enumerate(_leg_angles_rad(spec)):
        # The fork's x axis points radially outward, so the wheel trails outside the star at rest.
        xyz = (spec.star_radius_m * math.cos(angle), spec.star_radius_m * math.sin(angle), pivot_z)
        _add_joint(robot, f"caster_{i}_swivel", "base", f"caster_{i}_fork", xyz, (0.0, 0.0, angle), "0 0 1",
                   spec.caster_friction, spec.caster_damping)
        _add_joint(robot, f"caster_{i}_roll", f"caster_{i}_fork", f"caster_{i}_wheel",
                   (spec.caster_trail_m, 0.0, -spec.fork_drop_m), NO_TURN, "0 1 0",
                   spec.caster_friction, spec.caster_damping)

    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"
