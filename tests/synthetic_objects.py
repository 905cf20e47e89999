"""Synthetic point clouds of a bucket and a swivel chair, as a robot's depth cameras would see them.

Test helpers, no simulator: each object is sampled densely on its surfaces (a few mm apart), then "rendered"
by a pinhole z-buffer from one or more camera positions: per pixel only the nearest sample survives, so
self-occlusion (the chair's backrest hiding the seat, the near rim hiding the far inner wall) is real, not a
back-face guess. Gaussian noise is added afterwards. Every generator returns the ground truth it was built
from (world frame W, z up, floor at z = 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Z_W = np.array([0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------- primitives


def _count(area_m2: float, spacing_m: float) -> int:
    return max(1, int(np.ceil(area_m2 / spacing_m**2)))


def sample_box(rng, half_extents, spacing_m):
    """Points on the 6 faces of an axis-aligned box centred at the origin, ``[N, 3]``."""
    h = np.asarray(half_extents, float)
    parts = []
    for axis in range(3):
        a, b = [i for i in range(3) if i != axis]
        n = _count(4 * h[a] * h[b], spacing_m)
        for sign in (-1.0, 1.0):
            p = np.empty((n, 3))
            p[:, axis] = sign * h[axis]
            p[:, a] = rng.uniform(-h[a], h[a], n)
            p[:, b] = rng.uniform(-h[b], h[b], n)
            parts.append(p)
    return np.concatenate(parts)


def sample_frustum(rng, r0, r1, z0, z1, spacing_m):
    """Points on the side of a cone frustum about z: radius ``r0`` at ``z0`` to ``r1`` at ``z1``."""
    slant = np.hypot(r1 - r0, z1 - z0)
    n = _count(np.pi * (r0 + r1) * slant, spacing_m)
    # Area grows with the radius: pick t with density proportional to r(t) (inverse CDF of a linear density).
    u = rng.uniform(0, 1, n)
    if abs(r1 - r0) < 1e-9:
        t = u
    else:
        t = (np.sqrt(r0**2 + u * (r1**2 - r0**2)) - r0) / (r1 - r0)
    r = r0 + t * (r1 - r0)
    phi = rng.uniform(0, 2 * np.pi, n)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z0 + t * (z1 - z0)])


def sample_annulus(rng, r_in, r_out, z, spacing_m):
    """Points on a horizontal annulus (a disk when ``r_in`` is 0) at height ``z``."""
    n = _count(np.pi * (r_out**2 - r_in**2), spacing_m)
    r = np.sqrt(rng.uniform(r_in**2, r_out**2, n))
    phi = rng.uniform(0, 2 * np.pi, n)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), np.full(n, z)])


def sample_cylinder(rng, radius, z0, z1, spacing_m):
    """A closed vertical cylinder (side and both caps)."""
    return np.concatenate([sample_frustum(rng, radius, radius, z0, z1, spacing_m),
                           sample_annulus(rng, 0.0, radius, z0, spacing_m),
                           sample_annulus(rng, 0.0, radius, z1, spacing_m)])


def sample_sphere(rng, centre, radius, spacing_m):
    n = _count(4 * np.pi * radius**2, spacing_m)
    v = rng.normal(size=(n, 3))
    return np.asarray(centre, float) + radius * v / np.linalg.norm(v, axis=1, keepdims=True)


def sample_tube(rng, curve, tube_radius, spacing_m):
    """Points on a tube of radius ``tube_radius`` around a polyline ``curve`` ([K, 3], finely sampled)."""
    seg = np.diff(curve, axis=0)
    length = np.linalg.norm(seg, axis=1)
    n = _count(2 * np.pi * tube_radius * length.sum(), spacing_m)
    k = rng.choice(len(seg), n, p=length / length.sum())
    s = rng.uniform(0, 1, n)
    centre = curve[k] + s[:, None] * seg[k]
    tangent = seg[k] / length[k, None]
    helper = np.where(np.abs(tangent[:, 2:3]) < 0.9, Z_W, np.array([1.0, 0.0, 0.0]))
    e1 = np.cross(tangent, helper)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e2 = np.cross(tangent, e1)
    phi = rng.uniform(0, 2 * np.pi, n)[:, None]
    return centre + tube_radius * (np.cos(phi) * e1 + np.sin(phi) * e2)


def rotation_z(yaw_rad):
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rotation_axis_angle(axis, angle_rad):
    k = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle_rad) * K + (1 - np.cos(angle_rad)) * K @ K


# ---------------------------------------------------------------------------------------------- rendering


def render_visible(points_W, cameras_W, target_W, pixel_rad=0.008):
    """Indices of the samples a set of pinhole depth cameras would see (nearest sample per pixel).

    Args:
        points_W: ``[N, 3]`` dense surface samples (spacing well below a pixel's footprint, or back
            surfaces leak through).
        cameras_W: ``[C, 3]`` camera positions; each looks at ``target_W`` (no roll).
        pixel_rad: angular size of a pixel (rad): 0.008 rad is 8 mm at 1 m.
    Returns:
        Sorted unique indices into ``points_W`` seen by at least one camera (the fused cloud).
    """
    seen = []
    for c in np.atleast_2d(cameras_W):
        f = np.asarray(target_W, float) - c
        f /= np.linalg.norm(f)
        r = np.cross(f, Z_W)
        r /= np.linalg.norm(r)
        u = np.cross(r, f)
        v = points_W - c
        depth = v @ f
        ok = np.flatnonzero(depth > 0.05)
        col = np.floor((v[ok] @ r) / depth[ok] / pixel_rad).astype(np.int64)
        row = np.floor((v[ok] @ u) / depth[ok] / pixel_rad).astype(np.int64)
        key = (row << 32) + col
        order = np.lexsort((np.linalg.norm(v[ok], axis=1), key))
        first = np.ones(len(order), dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        seen.append(ok[order[first]])
    return np.unique(np.concatenate(seen))


def cameras_around(rng, look_from_xy, height_m=1.5, n=2, spread_m=0.15):
    """``n`` camera positions near ``look_from_xy`` at ``height_m``, spread sideways by up to ``spread_m``."""
    base = np.array([look_from_xy[0], look_from_xy[1], height_m])
    return base + np.column_stack([rng.uniform(-spread_m, spread_m, (n, 2)), rng.uniform(-0.05, 0.05, n)])


# ---------------------------------------------------------------------------------------------- bucket


@dataclass(frozen=True)
class SyntheticBucket:
    points_W: np.ndarray  # [N, 3] visible points with noise
    colors: np.ndarray  # [N, 3] uint8 rgb
    labels: np.ndarray  # [N] str: "wall", "rim", "bottom", "handle", "ball"
    rim_height_m: float  # world z of the rim circle's centre (the top surface)
    rim_center_W: np.ndarray  # [3]
    outer_radius_m: float
    inner_radius_m: float
    thickness_m: float
    axis_W: np.ndarray  # [3] unit, up
    camera_W: np.ndarray  # [C, 3]


def make_bucket(rng, *, thickness_m=0.015, outer_radius_m=0.16, height_m=0.32, taper_m=0.03,
                handle="none", ball=False, tilt_rad=0.0, noise_m=0.003, distance_m=0.9,
                view_azimuth_rad=None, arc_deg=None, spacing_m=0.003, pixel_rad=0.008, n_cameras=2):
    """A bucket on the floor seen from one side by cameras 1.5 m high.

    Walls of constant horizontal thickness ``thickness_m`` (so the rim's top annulus is that wide), outer
    radius ``outer_radius_m`` at the rim and ``taper_m`` less at the bottom. ``handle``: "none", "up" (a bail
    arching above the rim) or "down" (folded down beside the wall). ``ball``: a cyan ball on the bottom.
    ``arc_deg``: keep only points within this azimuth range (deg) around the camera direction, as if the
    rest were cropped. Returns the visible points and the truth.
    """
    s = spacing_m
    R1, R0, H, t = outer_radius_m, outer_radius_m - taper_m, height_m, thickness_m
    bottom_t = 0.012
    r_in_bottom = R0 - t + taper_m * bottom_t / H
    parts = {
        "wall": np.concatenate([sample_frustum(rng, R0, R1, 0.0, H, s),
                                sample_frustum(rng, r_in_bottom, R1 - t, bottom_t, H, s)]),
        "rim": sample_annulus(rng, R1 - t, R1, H, s),
        "bottom": np.concatenate([sample_annulus(rng, 0.0, R0, 0.0, s),
                                  sample_annulus(rng, 0.0, r_in_bottom, bottom_t, s)]),
    }
    if handle != "none":
        pivot_z = H - 0.03
        rh = R1 + 0.012
        e = np.array([np.cos(rng.uniform(0, np.pi)), 0.0, 0.0])
        e[1] = np.sqrt(1 - e[0] ** 2)
        n_side = np.cross(Z_W, e)
        alpha = 0.0 if handle == "up" else np.deg2rad(115.0)
        up = np.cos(alpha) * Z_W + np.sin(alpha) * n_side
        phi = np.linspace(0, np.pi, 200)[:, None]
        curve = np.array([0, 0, pivot_z]) + rh * (np.cos(phi) * e + np.sin(phi) * up)
        parts["handle"] = sample_tube(rng, curve, 0.005, s)
    if ball:
        rb = 0.03
        off = rng.uniform(-0.4, 0.4, 2) * (R0 - t - rb)
        parts["ball"] = sample_sphere(rng, [off[0], off[1], bottom_t + rb], rb, s)
    names = list(parts)
    p_B = np.concatenate([parts[k] for k in names])
    labels = np.concatenate([np.full(len(parts[k]), k) for k in names])

    # Tilt about a random horizontal axis through the bottom centre, then set it on the floor.
    R_WB = rotation_axis_angle([np.cos(a := rng.uniform(0, 2 * np.pi)), np.sin(a), 0.0], tilt_rad)
    R_WB = rotation_z(rng.uniform(0, 2 * np.pi)) @ R_WB
    centre_xy = rng.uniform(-0.5, 0.5, 2)
    p_W = p_B @ R_WB.T
    lift = -p_W[:, 2].min()
    p_W += [centre_xy[0], centre_xy[1], lift]
    rim_center = R_WB @ np.array([0.0, 0.0, H]) + [centre_xy[0], centre_xy[1], lift]

    azimuth = rng.uniform(0, 2 * np.pi) if view_azimuth_rad is None else view_azimuth_rad
    view_dir = np.array([np.cos(azimuth), np.sin(azimuth)])
    cameras = cameras_around(rng, centre_xy + distance_m * view_dir, n=n_cameras)
    seen = render_visible(p_W, cameras, rim_center - [0, 0, 0.1], pixel_rad)
    if arc_deg is not None:
        d = p_W[seen, :2] - rim_center[:2]
        off_angle = np.angle((d[:, 0] + 1j * d[:, 1]) * np.exp(-1j * azimuth))
        seen = seen[np.abs(off_angle) <= np.deg2rad(arc_deg) / 2]
    points = p_W[seen] + rng.normal(scale=noise_m, size=(len(seen), 3))
    labels = labels[seen]
    palette = {"wall": (200, 80, 40), "rim": (200, 80, 40), "bottom": (200, 80, 40), "handle": (90, 90, 90),
               "ball": (0, 255, 255)}
    shade = rng.uniform(0.6, 1.0, (len(seen), 1))
    colors = np.clip(np.array([palette[k] for k in labels]) * shade, 0, 255).astype(np.uint8)
    return SyntheticBucket(points, colors, labels, float(rim_center[2]), rim_center, R1, R1 - t, t,
                           R_WB @ Z_W, cameras)


# ---------------------------------------------------------------------------------------------- chair


@dataclass(frozen=True)
class SyntheticChair:
    points_W: np.ndarray  # [N, 3] visible points with noise
    labels: np.ndarray  # [N] str: "base", "column", "seat", "backrest", "support", "armrest"
    center_W: np.ndarray  # [3] swivel axis on the floor (= the seat's centre in xy)
    forward_W: np.ndarray  # [3] unit, horizontal: from the backrest toward the seat
    width_axis_W: np.ndarray  # [3] unit, horizontal, along the backrest's width
    backrest_top_m: float  # world z of the backrest's top edge (its highest point)
    backrest_top_center_W: np.ndarray  # [3] middle of the top edge (its top face's centre)
    backrest_width_m: float
    backrest_thickness_m: float
    seat_top_m: float
    camera_W: np.ndarray  # [C, 3]


def _box_at(rng, half_extents, centre, R, spacing_m):
    return sample_box(rng, half_extents, spacing_m) @ np.asarray(R).T + centre


def make_chair(rng, *, noise_m=0.003, armrests=None, distance_m=None, spacing_m=0.004, pixel_rad=0.008,
               n_cameras=2, view_offset_rad=None):
    """A random swivel office chair at a random place and yaw, seen from behind by cameras 1.5 m high.

    Chair frame C: origin at the swivel axis on the floor, x forward (backrest to seat), z up. Sizes are
    drawn from ranges of office chairs: seat top 0.40-0.55 m, backrest 0.35-0.60 m tall and reclined up to
    15 degrees, five-star base 0.28-0.34 m in radius, armrests on half of the chairs.
    """
    s = spacing_m
    u = rng.uniform
    seat_top = u(0.40, 0.55)
    seat_t = u(0.06, 0.10)
    seat_w, seat_d = u(0.42, 0.55), u(0.40, 0.52)
    back_w, back_t, back_h = u(0.38, min(0.52, seat_w + 0.04)), u(0.03, 0.08), u(0.35, 0.60)
    back_gap = u(0.02, 0.10)
    recline = np.deg2rad(u(0.0, 15.0))
    leg_r = u(0.28, 0.34)
    armrests = bool(rng.uniform() < 0.5) if armrests is None else armrests

    parts = {}
    legs = []
    theta0 = u(0, 2 * np.pi)
    for k in range(5):
        th = theta0 + 2 * np.pi * k / 5
        Rz = rotation_z(th)
        legs.append(_box_at(rng, [leg_r / 2, 0.022, 0.02], Rz @ [leg_r / 2, 0, 0.08], Rz, s))
        legs.append(sample_sphere(rng, Rz @ [leg_r, 0, 0.03], 0.03, s))  # caster
    legs.append(sample_cylinder(rng, 0.05, 0.06, 0.14, s))  # hub
    parts["base"] = np.concatenate(legs)
    parts["column"] = sample_cylinder(rng, u(0.022, 0.032), 0.14, seat_top - seat_t, s)
    parts["seat"] = _box_at(rng, [seat_d / 2, seat_w / 2, seat_t / 2], [0, 0, seat_top - seat_t / 2], np.eye(3), s)
    # Backrest: a panel behind the seat, reclined about its bottom edge (the top moves back, -x).
    back_x = -seat_d / 2 + u(-0.02, 0.04)  # its front face, bottom edge
    bottom = seat_top + back_gap
    R_tilt = rotation_axis_angle([0, 1, 0], -recline)
    panel = sample_box(rng, [back_t / 2, back_w / 2, back_h / 2], s) + [-back_t / 2, 0, back_h / 2]
    parts["backrest"] = panel @ R_tilt.T + [back_x, 0, bottom]
    top_local = np.array([[0.0, 0, back_h], [-back_t, 0, back_h]]) @ R_tilt.T
    backrest_top = bottom + top_local[:, 2].max()
    top_center_C = top_local.mean(axis=0) + [back_x, 0, bottom]
    parts["support"] = _box_at(rng, [0.01, 0.03, (bottom - (seat_top - seat_t)) / 2 + 0.02],
                               [back_x - back_t / 2, 0, (bottom + seat_top - seat_t) / 2], np.eye(3), s)
    if armrests:
        arm_z = seat_top + u(0.18, 0.25)
        arm = []
        for side in (-1, 1):
            y = side * (seat_w / 2 + 0.03)
            arm.append(_box_at(rng, [0.02, 0.015, (arm_z - seat_top + seat_t) / 2],
                               [0.0, y, (arm_z + seat_top - seat_t) / 2], np.eye(3), s))
            arm.append(_box_at(rng, [0.14, 0.03, 0.015], [0.02, y, arm_z], np.eye(3), s))
        parts["armrest"] = np.concatenate(arm)

    names = list(parts)
    p_C = np.concatenate([parts[k] for k in names])
    labels = np.concatenate([np.full(len(parts[k]), k) for k in names])
    yaw = u(-np.pi, np.pi)
    R_WC = rotation_z(yaw)
    centre = np.array([u(-1.0, 1.0), u(-1.0, 1.0), 0.0])
    p_W = p_C @ R_WC.T + centre
    forward, width_axis = R_WC[:, 0], R_WC[:, 1]

    # The robot stands behind the chair: cameras 1.0-1.5 m behind the swivel axis, up to ~20 deg off.
    distance_m = u(1.0, 1.5) if distance_m is None else distance_m
    off = u(-0.35, 0.35) if view_offset_rad is None else view_offset_rad
    behind = -(rotation_z(off) @ forward)
    cameras = cameras_around(rng, centre[:2] + distance_m * behind[:2], n=n_cameras)
    seen = render_visible(p_W, cameras, centre + [0, 0, 0.45], pixel_rad)
    points = p_W[seen] + rng.normal(scale=noise_m, size=(len(seen), 3))
    return SyntheticChair(points, labels[seen], centre, forward, width_axis, float(backrest_top),
                          R_WC @ top_center_C + centre, back_w, back_t, float(seat_top), cameras)


# ---------------------------------------------------------------------------------------------- table-top objects


@dataclass(frozen=True)
class SyntheticTabletop:
    points_W: np.ndarray  # [N, 3] visible points (object and table) with noise
    is_object: np.ndarray  # [N] bool: the object's points (the rest is table)
    table_z: float  # world z of the table's top
    center_W: np.ndarray  # [3] the object's centre
    R_WO: np.ndarray  # [3, 3] the object's axes in the world (a box's face normals; a cylinder's axis is z)
    size_m: np.ndarray  # [3] full extents along R_WO's axes
    camera_W: np.ndarray  # [C, 3]


def make_tabletop_object(rng, shape="box", size_m=(0.05, 0.05, 0.05), *, yaw_rad=None, table_z=0.0,
                         cameras_W=None, view_azimuth_rad=None, noise_m=0.0005, spacing_m=0.001,
                         pixel_rad=0.004, table_half_m=0.2, table_spacing_m=0.003):
    """An object standing on a table, seen by depth cameras (one, 0.6 m away and 0.5 m up, by default).

    ``shape``: "box" (``size_m`` = full extents x, y, z), "cylinder" (upright; ``size_m`` = (diameter,
    diameter, height)) or "sphere" (``size_m[0]`` = diameter). ``yaw_rad`` turns the object about z (random
    when None). Surfaces are sampled ``spacing_m`` apart (well below a pixel's footprint, so back faces do
    not leak through) and rendered with :func:`render_visible`.
    """
    size = np.broadcast_to(np.asarray(size_m, float), (3,)).copy()
    s = spacing_m
    if shape == "box":
        p_O = sample_box(rng, size / 2, s)
    elif shape == "cylinder":
        size[1] = size[0]
        p_O = sample_cylinder(rng, size[0] / 2, -size[2] / 2, size[2] / 2, s)
    elif shape == "sphere":
        size[:] = size[0]
        p_O = sample_sphere(rng, [0.0, 0.0, 0.0], size[0] / 2, s)
    else:
        raise ValueError(f"unknown shape {shape!r}")
    yaw = rng.uniform(-np.pi, np.pi) if yaw_rad is None else yaw_rad
    R_WO = rotation_z(yaw)
    centre = np.array([rng.uniform(-0.05, 0.05), rng.uniform(-0.05, 0.05), table_z + size[2] / 2])
    p_obj = p_O @ R_WO.T + centre
    n_table = _count((2 * table_half_m) ** 2, table_spacing_m)
    table = np.column_stack([centre[0] + rng.uniform(-table_half_m, table_half_m, n_table),
                             centre[1] + rng.uniform(-table_half_m, table_half_m, n_table), np.full(n_table, table_z)])
    # The table under the object is hidden by the object itself; drop it so it cannot leak between samples.
    under = np.all(np.abs((table - centre)[:, :2] @ R_WO[:2, :2]) <= size[:2] / 2, axis=1)
    table = table[~under]
    if cameras_W is None:
        azimuth = rng.uniform(-np.pi, np.pi) if view_azimuth_rad is None else view_azimuth_rad
        cameras_W = centre + np.array([[0.6 * np.cos(azimuth), 0.6 * np.sin(azimuth), 0.5]])
    cameras_W = np.atleast_2d(np.asarray(cameras_W, float))
    everything = np.concatenate([p_obj, table])
    seen = render_visible(everything, cameras_W, centre, pixel_rad)
    points = everything[seen] + rng.normal(scale=noise_m, size=(len(seen), 3))
    return SyntheticTabletop(points, seen < len(p_obj), float(table_z), centre, R_WO, size, cameras_W)
