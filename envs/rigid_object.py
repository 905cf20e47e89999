"""Rigid task objects (PickObject): a generated mesh folder or any mesh file, loaded into a SAPIEN scene.

An object is a :class:`RigidObjectAsset`: a visual mesh and convex collision pieces (PhysX simulates convex
meshes on dynamic bodies), with a density. Generated objects (``envs/object_generator.py``) come as folders
with ``meta.json``. Any mesh file that trimesh reads (``.obj``, ``.stl``, ``.glb``/``.gltf``, ``.ply``, ...)
becomes one with :func:`mesh_object_asset`: its collision is a convex decomposition by CoACD when the
``coacd`` package is installed (what SAPIEN's ``add_multiple_convex_collisions_from_file(...,
decomposition="coacd")`` runs), else its convex hull; the pieces are written once under the asset cache,
keyed by the file's content and the options. The render geometry is the file itself (its own materials).
The file's +z axis is up: the object is placed as the file has it, turned about z.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import sapien
import trimesh

from .asset_cache import build_once, cache_dir

CollisionMethod = Literal["auto", "coacd", "hull"]
COLLISION_METHODS = ("auto", "coacd", "hull")
MESH_ASSET_VERSION = "1"
DEFAULT_DENSITY_KG_M3 = 1000.0  # SAPIEN's and ManiSkill's default
# CoACD's concavity threshold (its default 0.05) and a cap on the pieces: enough for mugs and bowls, cheap
# enough to simulate.
COACD_THRESHOLD = 0.05
COACD_MAX_PIECES = 16


class MeshError(ValueError):
    """A mesh file that cannot be used as an object: unreadable, or without volume."""


@dataclass(frozen=True)
class RigidObjectAsset:
    """Files of one rigid object. Paths are absolute; ``visual_scale`` applies to the visual file only
    (collision pieces are stored at their final size)."""

    model_id: str
    visual_path: Path
    collision_paths: tuple[Path, ...]
    density_kg_m3: float
    visual_scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    rgba: tuple[float, float, float, float] | None = None  # None: the visual file's own materials


def read_object_folder(folder: str | Path) -> RigidObjectAsset:
    """The asset described by ``folder/meta.json`` (keys ``model_id``, ``visual``, ``collision``,
    ``density_kg_m3``, optional ``rgba``)."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"object folder {folder} has no meta.json")
    meta = json.loads(meta_path.read_text())
    rgba = meta.get("rgba")
    return RigidObjectAsset(
        model_id=meta["model_id"],
        visual_path=folder / meta["visual"],
        collision_paths=tuple(folder / name for name in meta["collision"]),
        density_kg_m3=float(meta["density_kg_m3"]),
        rgba=tuple(rgba) if rgba is not None else None,
    )


def load_rigid_object(scene: sapien.Scene, asset: RigidObjectAsset, material: sapien.physx.PhysxMaterial,
                      name: str | None = None) -> sapien.Entity:
    """Build ``asset`` into ``scene`` as a dynamic body (pose: identity; the caller places it)."""
    builder = scene.create_actor_builder()
    for path in asset.collision_paths:
        builder.add_convex_collision_from_file(str(path), material=material, density=asset.density_kg_m3)
    render_material = None
    if asset.rgba is not None:
        render_material = sapien.render.RenderMaterial(base_color=list(asset.rgba), roughness=0.7)
    builder.add_visual_from_file(str(asset.visual_path), scale=asset.visual_scale, material=render_material)
    entity = builder.build(name=name or asset.model_id)
    body = entity.find_component_by_type(sapien.physx.PhysxRigidDynamicComponent)
    if body is None or not body.collision_shapes:  # SAPIEN skips a piece it cannot cook, silently
        raise MeshError(f"object {asset.model_id!r}: PhysX could not build its collision from "
                        f"{[str(p) for p in asset.collision_paths]}")
    return entity


def coacd_available() -> bool:
    try:
        import coacd  # noqa: F401  lazy: coacd, optional
    except ImportError:
        return False
    return True


def read_mesh(path: str | Path, scale=1.0) -> trimesh.Trimesh:
    """The mesh of ``path`` (all its parts merged), scaled by ``scale`` (a number or one per axis).

    Raises ``FileNotFoundError`` for a missing file and :class:`MeshError` for one that trimesh cannot read
    or that holds no triangles."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"mesh file not found: {path}")
    scale = _scale3(scale)
    try:
        mesh = trimesh.load(path, force="mesh")
    except Exception as e:  # noqa: BLE001 - trimesh raises many types for broken files
        raise MeshError(f"cannot read mesh file {path}: {type(e).__name__}: {e}") from None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise MeshError(f"mesh file {path} holds no triangles")
    if not np.all(np.isfinite(mesh.vertices)):
        raise MeshError(f"mesh file {path} has non-finite vertex coordinates")
    mesh = mesh.copy()
    mesh.apply_scale(scale)
    return mesh


def mesh_object_asset(path: str | Path, scale=1.0, density_kg_m3: float = DEFAULT_DENSITY_KG_M3,
                      collision: CollisionMethod = "auto") -> RigidObjectAsset:
    """An object from any mesh file: ``scale`` (a number or x, y, z) multiplies the file's coordinates
    (e.g. 0.001 for millimetres); ``collision``: "coacd" (convex decomposition, needs the ``coacd``
    package), "hull" (the convex hull), or "auto" (coacd when installed, else hull)."""
    if collision not in COLLISION_METHODS:
        raise ValueError(f"unknown collision method {collision!r}; choose one of {', '.join(COLLISION_METHODS)}")
    if not (math.isfinite(density_kg_m3) and density_kg_m3 > 0):
        raise ValueError(f"density_kg_m3 must be positive, got {density_kg_m3!r}")
    method = ("coacd" if coacd_available() else "hull") if collision == "auto" else collision
    if method == "coacd" and not coacd_available():
        raise ImportError("collision='coacd' needs the coacd package (pip install coacd); or use 'hull'")
    path = Path(path).resolve()
    scale3 = _scale3(scale)
    mesh = read_mesh(path, scale3)
    if mesh.convex_hull.volume <= 1e-9:  # flat or degenerate: nothing PhysX could hold as a body
        raise MeshError(f"mesh file {path} encloses no volume at scale {scale3} (convex hull under 1 mm^3)")
    key = hashlib.sha1(path.read_bytes() + repr((scale3, method, MESH_ASSET_VERSION)).encode()).hexdigest()[:12]
    model_id = path.stem

    def write(tmp: Path) -> None:
        (tmp / "collision").mkdir()
        names = []
        for i, piece in enumerate(_convex_pieces(mesh, method)):
            name = f"collision/part_{i:02d}.obj"
            piece.export(tmp / name)
            names.append(name)
        meta = {"model_id": model_id, "source": str(path), "scale": list(scale3), "collision_method": method,
                "collision": names, "density_kg_m3": density_kg_m3}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")

    folder = build_once(cache_dir() / "objects" / "custom" / f"{model_id}-{key}", write)
    meta = json.loads((folder / "meta.json").read_text())
    return RigidObjectAsset(
        model_id=model_id,
        visual_path=path,
        collision_paths=tuple(folder / name for name in meta["collision"]),
        density_kg_m3=float(density_kg_m3),
        visual_scale=scale3,
    )


def _convex_pieces(mesh: trimesh.Trimesh, method: str) -> list[trimesh.Trimesh]:
    if method == "hull":
        return [mesh.convex_hull]
    import coacd  # lazy: coacd, optional (coacd_available)

    coacd.set_log_level("warn")
    parts = coacd.run_coacd(coacd.Mesh(mesh.vertices, mesh.faces), threshold=COACD_THRESHOLD,
                            max_convex_hull=COACD_MAX_PIECES, seed=0)
    return [trimesh.Trimesh(vertices, faces).convex_hull for vertices, faces in parts]


def _scale3(scale) -> tuple[float, float, float]:
    try:
        s = np.asarray(scale, dtype=np.float64)
    except (TypeError, ValueError):
        s = None
    if s is not None and s.ndim == 0:
        s = np.full(3, float(s))
    if s is None or s.shape != (3,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"scale must be a positive number or three positive numbers (x, y, z), got {scale!r}")
    return tuple(float(v) for v in s)
