"""Colour markers on task targets: the coloured tape of "Let's Handle It" (arXiv 2202.11792), which marked a real
drawer's handle with red tape so that colour alone found it.

An env built with ``target_marker_rgb=(r, g, b)`` paints part of its target in that colour (render material
base colour, linear RGB in [0, 1]): the cabinets' target handle, a band at the top of the chair's backrest, a
band around the bucket's rim, the whole pick object. Everything else in the scene whose displayed hue is
within ``AVOID_HUE_DEG`` of the marker's (and is not grey) is turned away from it, so that a plain HSV
threshold on the point cloud's colours (:func:`marker_pixel_mask`) finds the marker and nothing else.
Without the option nothing is touched: the scenes stay as they are, bit for bit.

Colours are displayed, not stored: the cameras write sRGB (base colours are linear, encoded with gamma
about 2.2), so a base colour's displayed hue differs from its linear hue; this module compares displayed
hues. Under the scenes' white lights shading scales the linear channels together, which leaves the displayed
hue of a colour with one zero channel unchanged.

``DEFAULT_MARKER_RGB`` is a lime green, displayed at a hue of about 93 degrees, fully saturated. What the
bundled scenes use, displayed (generator colours with their +-0.04 jitter):
saturated (S >= 0.45): red cube, red PushChair target, red buckets and objects (0-5 deg), orange (27-43),
mustard and yellow (40-57), cyan ball, teal and cyan objects (172-193), blues (207-231); weakly saturated
(S <= 0.42): olive upholstery (44-80 deg), green buckets and forest-green upholstery (110-161), purples, plum,
pinks, woods, brass, copper; grey (S < 0.2): the robot, metal handles, floor, platform, table top (S <= 0.27,
hue 18-49). Nearest to the marker: olive chairs (13 deg below it) and green buckets / forest-green chairs
(17 deg above it), both at most half as saturated; with a marker they are turned to 30 degrees from it.
The PickCube goal sphere (green) is hidden from the observation cameras.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Iterable

import numpy as np
import sapien

from handleit.types import DEFAULT_MARKER_RGB  # lime green tape (linear base colour), shared with perception

DISPLAY_GAMMA = 2.2  # the cameras' sRGB encoding, approximated by a power law
# With a marker, scene colours within this displayed hue of it (and at least this saturated) are turned away.
AVOID_HUE_DEG = 30.0
AVOID_MIN_SATURATION = 0.15
# The HSV threshold that finds the marker in rendered colours (tests and simple segmenters).
MARKER_HUE_TOL_DEG = 15.0
MARKER_MIN_SATURATION = 0.6
MARKER_MIN_VALUE = 0.15


def check_marker_rgb(rgb) -> tuple[float, float, float] | None:
    """``rgb`` as a tuple of three floats in [0, 1], or None; ``ValueError`` naming the problem otherwise.
    The colour must be saturated enough for a hue threshold to find it."""
    if rgb is None:
        return None
    try:
        values = tuple(float(c) for c in rgb)
    except (TypeError, ValueError):
        raise ValueError(f"target_marker_rgb must be three numbers in [0, 1] or None, got {rgb!r}") from None
    if len(values) != 3 or not all(math.isfinite(c) and 0.0 <= c <= 1.0 for c in values):
        raise ValueError(f"target_marker_rgb must be three numbers in [0, 1] or None, got {rgb!r}")
    _, saturation, value = displayed_hsv(values)
    if saturation < MARKER_MIN_SATURATION or value < MARKER_MIN_VALUE:
        raise ValueError(
            f"target_marker_rgb {values} is too grey or dark to be found by colour (displayed saturation "
            f"{saturation:.2f}, value {value:.2f}; need >= {MARKER_MIN_SATURATION} and >= {MARKER_MIN_VALUE})"
        )
    return values


def displayed_hsv(rgb_linear) -> tuple[float, float, float]:
    """Hue (deg), saturation and value of a linear base colour as the cameras display it (sRGB)."""
    encoded = np.clip(np.asarray(rgb_linear, dtype=np.float64)[:3], 0.0, 1.0) ** (1.0 / DISPLAY_GAMMA)
    h, s, v = colorsys.rgb_to_hsv(*encoded)
    return h * 360.0, s, v


def _hue_distance_deg(a, b):
    d = np.abs(np.asarray(a) - b) % 360.0
    return np.minimum(d, 360.0 - d)


def marker_pixel_mask(rgb_uint8: np.ndarray, marker_rgb=DEFAULT_MARKER_RGB, hue_tol_deg: float = MARKER_HUE_TOL_DEG,
                      min_saturation: float = MARKER_MIN_SATURATION, min_value: float = MARKER_MIN_VALUE) -> np.ndarray:
    """A plain HSV threshold: which of the colours ``rgb_uint8`` [..., 3] (as the cameras write them) show the
    marker of base colour ``marker_rgb``: displayed hue within ``hue_tol_deg``, saturation and value at
    least ``min_saturation`` and ``min_value``. Returns a bool array of shape ``rgb_uint8.shape[:-1]``."""
    rgb = np.asarray(rgb_uint8, dtype=np.float64) / 255.0
    v = rgb.max(axis=-1)
    c = v - rgb.min(axis=-1)
    s = np.where(v > 0, c / np.maximum(v, 1e-12), 0.0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    safe_c = np.maximum(c, 1e-12)
    h = np.where(v == r, ((g - b) / safe_c) % 6.0, np.where(v == g, (b - r) / safe_c + 2.0, (r - g) / safe_c + 4.0))
    hue_deg = 60.0 * h
    marker_hue, _, _ = displayed_hsv(marker_rgb)
    return (_hue_distance_deg(hue_deg, marker_hue) <= hue_tol_deg) & (s >= min_saturation) & (v >= min_value) & (c > 0)


# ---------------------------------------------------------------------------------------------------------
# Painting the scene
# ---------------------------------------------------------------------------------------------------------
def shape_materials(shape) -> list:
    """The render materials of a render shape: its own and its parts' (SAPIEN tessellates primitives)."""
    materials = []
    if getattr(shape, "material", None) is not None:
        materials.append(shape.material)
    materials += [part.material for part in getattr(shape, "parts", []) if part.material is not None]
    return materials


def paint(shapes: Iterable, rgb) -> None:
    """Set the base colour of every material of ``shapes`` to ``rgb`` (opaque), dropping colour textures."""
    for shape in shapes:
        for material in shape_materials(shape):
            material.set_base_color([*rgb, 1.0])
            if material.base_color_texture is not None:
                material.set_base_color_texture(None)


def attach_visual(entity: sapien.Entity, shape) -> None:
    """Add a visual-only render shape to an entity already in a scene (an articulation link, an actor).

    SAPIEN attaches shapes only to a render body outside a scene, so the body is taken off the entity and put
    back: the entity's render shapes get new ``per_scene_id`` values (read ids only after this)."""
    body = entity.find_component_by_type(sapien.render.RenderBodyComponent)
    if body is None:
        body = sapien.render.RenderBodyComponent()
    else:
        entity.remove_component(body)
    body.attach(shape)
    entity.add_component(body)


def scene_render_shapes(scene: sapien.Scene) -> list:
    """(entity name, render shape) of every render shape in the scene."""
    shapes = []
    for entity in scene.entities:
        for body in entity.components:
            if isinstance(body, sapien.render.RenderBodyComponent):
                shapes += [(entity.name, shape) for shape in body.render_shapes]
    return shapes


def _turned_away(rgb_linear, marker_hue_deg: float) -> list[float]:
    """The colour with its displayed hue moved to just beyond ``AVOID_HUE_DEG`` from the marker's (on its own
    side), saturation and value kept."""
    h, s, v = displayed_hsv(rgb_linear)
    side = 1.0 if ((h - marker_hue_deg + 180.0) % 360.0 - 180.0) >= 0 else -1.0
    new_h = (marker_hue_deg + side * (AVOID_HUE_DEG + 1.0)) % 360.0  # a degree beyond, against rounding
    encoded = colorsys.hsv_to_rgb(new_h / 360.0, s, v)
    return [float(c) ** DISPLAY_GAMMA for c in encoded]


def mark_scene(scene: sapien.Scene, marker_shapes: list, marker_rgb) -> list[str]:
    """Paint ``marker_shapes`` with ``marker_rgb`` and turn every other colour of the scene near the marker's
    hue away from it. Returns the names of the shapes turned away. ``RuntimeError`` when a shape that is not
    a marker would still show the marker (it shares a render material with a marker shape). Colour textures
    (meshes from files) are left as they are: their colours are not checked."""
    marker_hue, _, _ = displayed_hsv(marker_rgb)
    marker_ids = {shape.per_scene_id for shape in marker_shapes}
    others = [(name, shape) for name, shape in scene_render_shapes(scene) if shape.per_scene_id not in marker_ids]
    turned = []
    for name, shape in others:
        for material in shape_materials(shape):
            h, s, _ = displayed_hsv(material.base_color)
            if s >= AVOID_MIN_SATURATION and _hue_distance_deg(h, marker_hue) < AVOID_HUE_DEG:
                material.set_base_color([*_turned_away(material.base_color, marker_hue), material.base_color[3]])
                turned.append(f"{name}/{shape.name}")
    paint(marker_shapes, marker_rgb)
    for name, shape in others:
        for material in shape_materials(shape):
            h, s, _ = displayed_hsv(material.base_color)
            if s >= AVOID_MIN_SATURATION and _hue_distance_deg(h, marker_hue) < AVOID_HUE_DEG:
                raise RuntimeError(
                    f"render shape {name}/{shape.name} would show the marker colour {tuple(marker_rgb)}: it shares "
                    f"a render material with a marker shape"
                )
    return turned


def quads_shape(quads: list, normals: list, rgb=DEFAULT_MARKER_RGB) -> sapien.render.RenderShapeTriangleMesh:
    """A flat-shaded visual mesh of planar quads (each four corners in order around it, m, in the frame of the
    entity it will be attached to), each facing along its normal; coloured ``rgb``."""
    vertices, triangles, vertex_normals = [], [], []
    for corners, normal in zip(quads, normals):
        corners = np.asarray(corners, dtype=np.float64)
        normal = np.asarray(normal, dtype=np.float64)
        if np.cross(corners[1] - corners[0], corners[2] - corners[0]) @ normal < 0:
            corners = corners[::-1]  # counter-clockwise seen from the side the normal points to
        base = len(vertices)
        vertices += list(corners)
        vertex_normals += [normal / np.linalg.norm(normal)] * 4
        triangles += [(base, base + 1, base + 2), (base, base + 2, base + 3)]
    material = sapien.render.RenderMaterial(base_color=[*rgb, 1.0])
    return sapien.render.RenderShapeTriangleMesh(
        np.asarray(vertices, dtype=np.float32), np.asarray(triangles, dtype=np.uint32),
        np.asarray(vertex_normals, dtype=np.float32), np.zeros((len(vertices), 2), dtype=np.float32), material,
    )
