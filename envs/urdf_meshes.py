"""Mesh-based URDFs (PartNet-Mobility's ``textured_objs/*.obj``) made loadable by SAPIEN: every mesh checked,
every collision mesh turned into convex pieces.

PhysX simulates only convex meshes on the links of an articulation; SAPIEN takes the convex hull of a
collision mesh it is given, which closes a drawer's box or the gap behind a bar handle. So each collision
mesh is read object by object (an OBJ's ``o`` groups, as SAPIEN's ``load_multiple_collisions_from_file``
reads them); an object that is convex (a closed mesh filling at least 99% of its hull) is kept, any other is
decomposed by CoACD (the ``coacd`` package). The pieces are written once under the asset cache
(``$HANDLEIT_CACHE_DIR/object_meshes/<model>-<key>``, the key a hash of the URDF and every mesh it refers
to), beside a copy of the URDF whose collisions name the pieces, one ``<collision>`` each, and whose
visuals name the original files by absolute path. A URDF without meshes is used as it is.
"""

from __future__ import annotations

import copy
import hashlib
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import trimesh

from .asset_cache import build_once, cache_dir
from .object_model_errors import MeshLoadError, ObjectFileNotFoundError, URDFError
from .object_models import parse_urdf

PREPARED_VERSION = "2"
CONVEX_VOLUME_FRACTION = 0.99  # a closed mesh filling this much of its convex hull counts as convex
# CoACD's concavity threshold (its default) and a cap on the pieces per object: handles and drawer boxes
# come out in a handful of pieces, cheap to simulate.
COACD_THRESHOLD = 0.05
COACD_MAX_PIECES = 16
MIN_PIECE_VOLUME_M3 = 1e-12


def mesh_path(urdf_path: Path, filename: str) -> Path:
    """The file a ``<mesh filename=...>`` of ``urdf_path`` names (relative to the URDF's folder)."""
    if filename.startswith("package://"):
        raise URDFError(f"URDF {urdf_path}: package:// paths are not resolved here ({filename}); use relative paths")
    path = Path(filename)
    return path if path.is_absolute() else urdf_path.parent / path


def read_mesh_objects(path: Path) -> list[trimesh.Trimesh]:
    """The objects of a mesh file (an OBJ's ``o`` groups; one for other formats), each with triangles.
    ``ObjectFileNotFoundError`` or ``MeshLoadError`` naming the path."""
    if not path.is_file():
        raise ObjectFileNotFoundError(f"mesh not found: {path}")
    try:
        loaded = trimesh.load(path, process=False, split_objects=True, group_material=False)
    except Exception as e:  # noqa: BLE001 - trimesh raises many types for broken files
        raise MeshLoadError(f"mesh does not load: {path}: {type(e).__name__}: {e}") from None
    if isinstance(loaded, trimesh.Scene):
        meshes = [g for g in loaded.dump() if isinstance(g, trimesh.Trimesh)]
    else:
        meshes = [loaded] if isinstance(loaded, trimesh.Trimesh) else []
    meshes = [m for m in meshes if len(m.faces) > 0]
    if not meshes:
        raise MeshLoadError(f"mesh does not load: {path} holds no triangles")
    for m in meshes:
        if not np.all(np.isfinite(m.vertices)):
            raise MeshLoadError(f"mesh does not load: {path} has non-finite vertex coordinates")
    return meshes


def _closed(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """A copy of ``mesh`` with coincident vertices merged (an OBJ repeats them per face): its closedness shows."""
    closed = mesh.copy()
    closed.merge_vertices()
    return closed


def _fills_hull(closed: trimesh.Trimesh) -> bool:
    hull = closed.convex_hull.volume
    return closed.is_watertight and hull > 0 and abs(closed.volume) >= CONVEX_VOLUME_FRACTION * hull


def is_convex_piece(mesh: trimesh.Trimesh) -> bool:
    """Whether PhysX's convex hull of ``mesh`` is the mesh itself (closed, filling its hull)."""
    return _fills_hull(_closed(mesh))


def convex_pieces(mesh: trimesh.Trimesh) -> list[trimesh.Trimesh]:
    """``mesh`` itself when convex, else CoACD's convex decomposition of it (its manifold preprocessing only for
    a mesh that is not closed: on a closed one it costs ~10x the time and changes nothing)."""
    closed = _closed(mesh)
    if _fills_hull(closed):
        return [mesh]
    import coacd  # lazy: coacd (a compiled library, needed only for non-convex meshes)

    coacd.set_log_level("warn")
    parts = coacd.run_coacd(coacd.Mesh(np.asarray(mesh.vertices), np.asarray(mesh.faces)),
                            threshold=COACD_THRESHOLD, max_convex_hull=COACD_MAX_PIECES, seed=0,
                            preprocess_mode="off" if closed.is_watertight else "auto")
    return [trimesh.Trimesh(vertices, faces).convex_hull for vertices, faces in parts]


def mesh_files(urdf_path: Path, root: ET.Element) -> dict[str, Path]:
    """The files the ``<mesh filename=...>`` elements of ``urdf_path`` (parsed: ``root``) name, by filename.
    ``URDFError`` for a mesh without a filename, ``ObjectFileNotFoundError`` for one that does not exist."""
    files = {}
    for mesh in root.iter("mesh"):
        filename = mesh.get("filename")
        if not filename:
            raise URDFError(f"URDF {urdf_path}: a <mesh> has no filename")
        path = mesh_path(urdf_path, filename)
        if not path.is_file():
            raise ObjectFileNotFoundError(f"URDF {urdf_path} references a mesh that does not exist: {path}")
        files[filename] = path
    return files


def loadable_urdf(urdf_path: str | Path) -> Path:
    """A URDF SAPIEN loads like ``urdf_path``: the same file when it has no meshes, else the cached copy
    described in the module docstring (built on first use; later calls only hash the files)."""
    urdf_path = Path(urdf_path)
    root = parse_urdf(urdf_path)
    files = mesh_files(urdf_path, root)
    if not files:
        return urdf_path
    digest = hashlib.sha1(repr((PREPARED_VERSION, COACD_THRESHOLD, COACD_MAX_PIECES)).encode())
    digest.update(urdf_path.read_bytes())
    for filename in sorted(files):
        digest.update(filename.encode() + files[filename].read_bytes())
    name = urdf_path.resolve().parent.name or urdf_path.stem
    folder = build_once(cache_dir() / "object_meshes" / f"{name}-{digest.hexdigest()[:12]}",
                        lambda tmp: _write_loadable(urdf_path, root, files, tmp))
    return folder / urdf_path.name


def _write_loadable(urdf_path: Path, root: ET.Element, files: dict[str, Path], out: Path) -> None:
    root = copy.deepcopy(root)
    pieces_of: dict[str, list[str]] = {}  # a collision mesh's filename -> its pieces, relative to `out`
    for link in root.iter("link"):
        for visual in link.findall("visual"):
            for mesh in visual.iter("mesh"):
                path = files[mesh.get("filename")]
                read_mesh_objects(path)  # a visual that does not load fails here, naming its file
                mesh.set("filename", str(path.resolve()))
        for index, collision in enumerate(list(link.findall("collision"))):
            mesh = collision.find("geometry/mesh")
            if mesh is None:
                continue
            filename = mesh.get("filename")
            if filename not in pieces_of:
                pieces_of[filename] = _write_pieces(files[filename], out / "collision", len(pieces_of))
            position = list(link).index(collision)
            link.remove(collision)
            for k, piece in enumerate(pieces_of[filename]):
                element = copy.deepcopy(collision)
                if element.get("name"):
                    element.set("name", f"{element.get('name')}_{k}")
                element.find("geometry/mesh").set("filename", piece)
                link.insert(position + k, element)
    ET.indent(root)
    (out / urdf_path.name).write_text('<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")


def _write_pieces(path: Path, folder: Path, number: int) -> list[str]:
    folder.mkdir(exist_ok=True)
    names = []
    for obj_index, mesh in enumerate(read_mesh_objects(path)):
        try:
            pieces = convex_pieces(mesh)
        except Exception as e:  # noqa: BLE001 - qhull and CoACD raise many types for degenerate input
            raise MeshLoadError(f"mesh does not load as collision geometry: {path}: {type(e).__name__}: {e}") from None
        # A flat piece (no volume) is nothing PhysX can cook: left out.
        for k, piece in enumerate(p for p in pieces if p.volume > MIN_PIECE_VOLUME_M3):
            name = f"collision/{number:03d}_{path.stem}_{obj_index:02d}_{k:02d}.obj"
            piece.export(folder.parent / name)
            names.append(name)
    if not names:
        raise MeshLoadError(f"mesh does not load as collision geometry: {path} encloses no volume")
    return names
