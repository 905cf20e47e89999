"""The cabinets and objects of the long-horizon tasks: which object fits which drawer, and the split's pairs.

A long-horizon episode uses a drawer cabinet of the cabinet generator (``envs/cabinet_generator.py``) and an
object of PickObject's generator (``envs/object_generator.py``), both from the same split. Its model id names
the pair, ``"drawer-test-003+object-test-012"``. A target drawer must hold the object: the object, turned to
lie along the drawer or across it, fits the part of the box that is out of the cabinet when the drawer is
Open (``OPEN_MIN_FRACTION`` of its travel, so that a gripper can put it down there or take it out from
above), with room for the fingers at its sides, and it passes under the compartment's top (the drawer closes
over it). The drawer's floor is at a height the mobile Panda reaches into from above.

:func:`layout_ids` lists a split's pairs so that an evaluation cycling through them uses every cabinet and
every object: pair i takes cabinet i mod C and the first object from i mod O on that fits one of its drawers.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .cabinet_generator import CabinetSpec, cabinet_ids, drawer_interior_L, sample_cabinet
from .object_generator import ObjectSpec, object_ids, sample_object
from .predicate_truth import OPEN_MIN_FRACTION

PAIR_SEPARATOR = "+"
# Room left between the object and the box's walls (and the cabinet's front edge when open) on each side: a
# Panda finger is about 2 cm wide and must fit beside the object.
FINGER_ROOM_M = 0.03
# Headroom between the object's top and the compartment's top.
HEADROOM_M = 0.02
# The drawer box's floor between these heights (m above the floor): from the lowest drawers up to a height
# the robot's cameras (1.5 m up, pitched 45 degrees down) still see into from a step away.
DRAWER_FLOOR_HEIGHT_RANGE_M = (0.0, 1.0)


@functools.cache
def cabinet_spec(cabinet_id: str) -> CabinetSpec:
    return sample_cabinet(cabinet_id)


@functools.cache
def object_spec(object_id: str) -> ObjectSpec:
    return sample_object(object_id)  # ~15 ms each (stable poses): cached


def placement_region_L(spec: CabinetSpec, part_index: int) -> np.ndarray:
    """[2, 3] min and max corner (m, drawer link frame L) of where an object may stand in drawer ``part_index``:
    the interior (``cabinet_generator.drawer_interior_L``) cut to the length out of the cabinet when the drawer
    is Open (the cabinet's front face is at x = q in L), less ``FINGER_ROOM_M`` at the sides and the front,
    less ``HEADROOM_M`` at the top."""
    part = spec.parts[part_index]
    region = drawer_interior_L(spec, part_index).copy()
    region[1, 0] = min(region[1, 0], OPEN_MIN_FRACTION * part.travel_m)
    region[0, :2] += FINGER_ROOM_M
    region[1, :2] -= FINGER_ROOM_M
    region[1, 2] -= HEADROOM_M
    return region


def fitting_yaws(extents_m, region_L: np.ndarray) -> list[float]:
    """The yaws (rad, 0 or pi/2 about z in L) at which a resting object of bounding-box ``extents_m`` (x, y, z in
    its frame) fits ``region_L``; empty when it does not fit."""
    ex, ey, ez = extents_m
    size = region_L[1] - region_L[0]
    if ez > size[2]:
        return []
    return [yaw for yaw, (a, b) in ((0.0, (ex, ey)), (math.pi / 2, (ey, ex))) if a <= size[0] and b <= size[1]]


def drawer_indices(spec: CabinetSpec) -> list[int]:
    """Drawers of ``spec`` whose box floor lies in ``DRAWER_FLOOR_HEIGHT_RANGE_M``."""
    low, high = DRAWER_FLOOR_HEIGHT_RANGE_M
    return [i for i, part in enumerate(spec.parts)
            if part.kind == "drawer" and low <= part.joint_xyz_m[2] + drawer_interior_L(spec, i)[0, 2] <= high]


def fitting_drawers(cabinet_id: str, object_id: str) -> list[int]:
    """Indices of the parts (``link_<i>``) of the cabinet that can hold the object (module docstring)."""
    spec, extents = cabinet_spec(cabinet_id), object_spec(object_id).extents_m
    return [i for i in drawer_indices(spec) if fitting_yaws(extents, placement_region_L(spec, i))]


def pair_id(cabinet_id: str, object_id: str) -> str:
    return f"{cabinet_id}{PAIR_SEPARATOR}{object_id}"


def split_pair_id(model_id: str, split: str) -> tuple[str, str]:
    """``"drawer-train-003+object-train-012"`` -> (cabinet id, object id), both of ``split``; ``ValueError``
    naming what is wrong."""
    parts = model_id.split(PAIR_SEPARATOR) if isinstance(model_id, str) else []
    if len(parts) != 2:
        raise ValueError(f"model_id {model_id!r}: a long-horizon scene is named 'CABINET{PAIR_SEPARATOR}OBJECT', "
                         f"e.g. {pair_id(cabinet_ids('drawer', split)[0], object_ids(split)[0])!r}")
    cabinet_id, object_id = parts
    if cabinet_id not in cabinet_ids("drawer", split):
        raise ValueError(f"model_id {model_id!r}: {cabinet_id!r} is not a drawer cabinet of split {split!r}")
    if object_id not in object_ids(split):
        raise ValueError(f"model_id {model_id!r}: {object_id!r} is not an object of split {split!r}")
    return cabinet_id, object_id


@functools.cache
def _layout_ids(split: str) -> tuple[str, ...]:
    cabinets, objects = cabinet_ids("drawer", split), object_ids(split)
    ids = []
    for i in range(math.lcm(len(cabinets), len(objects))):
        cabinet = cabinets[i % len(cabinets)]
        for k in range(len(objects)):
            candidate = objects[(i + k) % len(objects)]
            if fitting_drawers(cabinet, candidate):
                ids.append(pair_id(cabinet, candidate))
                break
        else:
            raise RuntimeError(f"no object of split {split!r} fits a drawer of {cabinet}")
    return tuple(ids)


def layout_ids(split: str) -> list[str]:
    """The split's cabinet-object pairs (module docstring), in a fixed order: 300 train, 20 test."""
    if split not in ("train", "test"):
        raise ValueError(f"unknown split {split!r}; choose one of train, test")
    return list(_layout_ids(split))
