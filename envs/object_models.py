"""Articulated task objects from disk in PartNet-Mobility's layout: which models a path holds, their openable
parts and handles, and the (model, target link) of each episode.

A path is a ``mobility.urdf``, one model folder (``<id>/mobility.urdf``), or a folder of model folders
(``<id>/mobility.urdf``, ``<id>/textured_objs/*.obj``, optional ``<id>/semantics.txt``): the models, sorted by
id, are the split. Everything here reads the files only (no simulator), so the harness can plan episodes
and report bad input before a worker starts.

PartNet-Mobility's conventions (SAPIEN's dataset, as ManiSkill reads it):
- a drawer is a link driven by a prismatic joint, a door one driven by a revolute joint with finite limits;
- handles are visuals whose name contains ``handle`` (PartNet-Mobility names them ``handle-5``, ...);
- ``semantics.txt`` holds one line per link, ``<link name> <joint type> <semantic label>``, e.g.
  ``link_0 hinge door``, ``link_1 slider drawer``, ``link_2 heavy furniture_body`` (joint types: hinge,
  slider, static, heavy, free); a link labelled ``handle`` hanging on a part by a fixed joint is that part's
  handle, all of its visuals.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .object_model_errors import NoHandleError, ObjectFileNotFoundError, TargetLinkError, URDFError

URDF_NAME = "mobility.urdf"
SEMANTICS_NAME = "semantics.txt"
HANDLE_WORD = "handle"
HANDLE_CONVENTION = (f"a <visual> of the link whose name contains '{HANDLE_WORD}' (PartNet-Mobility names them "
                     f"like 'handle-5'), or a link labelled '{HANDLE_WORD}' in {SEMANTICS_NAME} fixed to it")
# The joint a part of each kind needs (URDF joint types), and what PartNet-Mobility's semantics.txt calls it.
PART_JOINTS = {"drawer": ("prismatic",), "door": ("revolute",)}
SEMANTIC_JOINTS = {"slider": "prismatic", "hinge": "revolute", "static": "fixed", "heavy": "fixed", "free": "floating"}


@dataclass(frozen=True)
class LinkSemantics:
    """One line of ``semantics.txt``."""

    joint_type: str  # as written: hinge, slider, static, heavy, free
    label: str  # door, drawer, handle, furniture_body, ...


@dataclass(frozen=True)
class OpenablePart:
    """A link of a model driven by a prismatic or revolute joint with a finite range."""

    link: str
    joint: str
    joint_type: str  # "prismatic" or "revolute"
    kind: str  # "drawer" or "door"
    handle_visuals: tuple[str, ...]  # names of the visuals that are its handle (its own and its handle links')
    handle_links: tuple[str, ...]  # links labelled "handle" in semantics.txt, fixed to it
    label: str = ""  # its semantics.txt label, "" without one


def is_handle_name(name: str | None) -> bool:
    """Whether a visual's name marks it as a handle (PartNet-Mobility: ``handle-5``; case is ignored)."""
    return bool(name) and HANDLE_WORD in name.lower()


def model_urdfs(path: str | Path) -> dict[str, Path]:
    """The models ``path`` holds, by id: a ``mobility.urdf`` (id: its folder's name), a model folder, or a
    folder of model folders (ids: the folder names, sorted). ``ObjectFileNotFoundError`` when there is none."""
    path = Path(path)
    if not path.exists():
        what = "URDF" if path.suffix == ".urdf" else "object path"
        raise ObjectFileNotFoundError(f"{what} not found: {path}")
    if path.is_file():
        return {path.resolve().parent.name or path.stem: path}
    if (path / URDF_NAME).is_file():
        return {path.resolve().name: path / URDF_NAME}
    models = {sub.name: sub / URDF_NAME for sub in sorted(path.iterdir()) if (sub / URDF_NAME).is_file()}
    if not models:
        raise ObjectFileNotFoundError(
            f"no models in {path}: expected a {URDF_NAME}, or model folders holding one (<id>/{URDF_NAME})")
    return models


def read_semantics(urdf_path: str | Path) -> dict[str, LinkSemantics]:
    """``semantics.txt`` beside ``urdf_path`` by link name; empty when there is none. ``URDFError`` for a line
    that is not ``<link> <joint type> <label>``."""
    path = Path(urdf_path).parent / SEMANTICS_NAME
    if not path.is_file():
        return {}
    semantics = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if len(words) != 3:
            raise URDFError(f"{path}, line {number}: expected '<link name> <joint type> <semantic label>' "
                            f"(e.g. 'link_0 hinge door'), got {line.strip()!r}")
        semantics[words[0]] = LinkSemantics(words[1], words[2])
    return semantics


def parse_urdf(urdf_path: str | Path) -> ET.Element:
    """The ``<robot>`` element of ``urdf_path``; ``ObjectFileNotFoundError`` or ``URDFError`` naming the path."""
    path = Path(urdf_path)
    if not path.is_file():
        raise ObjectFileNotFoundError(f"URDF not found: {path}")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise URDFError(f"malformed URDF {path}: {e}") from None
    if root.tag != "robot":
        raise URDFError(f"malformed URDF {path}: the root element is <{root.tag}>, expected <robot>")
    if root.find("link") is None:
        raise URDFError(f"URDF {path} defines no <link>")
    return root


def openable_parts(urdf_path: str | Path) -> list[OpenablePart]:
    """Every link of the model driven by a prismatic or revolute joint with a finite range, with its handle by
    PartNet-Mobility's conventions (module docstring), in the URDF's joint order."""
    root = parse_urdf(urdf_path)
    semantics = read_semantics(urdf_path)
    visuals = {link.get("name"): tuple(v.get("name") or "" for v in link.findall("visual"))
               for link in root.findall("link")}
    joints = root.findall("joint")
    fixed_children: dict[str, list[str]] = {}
    for joint in joints:
        if joint.get("type") == "fixed":
            fixed_children.setdefault(_link_of(joint, "parent"), []).append(_link_of(joint, "child"))

    def handle_links_of(link: str) -> list[str]:
        found = []
        for child in fixed_children.get(link, []):
            if child in semantics and is_handle_name(semantics[child].label):
                found.append(child)
            found += handle_links_of(child)
        return found

    parts = []
    for joint in joints:
        jtype = joint.get("type")
        kind = next((k for k, types in PART_JOINTS.items() if jtype in types), None)
        if kind is None or not _finite_range(joint):
            continue
        link = _link_of(joint, "child")
        handle_links = tuple(handle_links_of(link))
        handle_visuals = tuple(n for n in visuals.get(link, ()) if is_handle_name(n))
        handle_visuals += tuple(n for h in handle_links for n in visuals.get(h, ()))
        label = semantics[link].label if link in semantics else ""
        parts.append(OpenablePart(link, joint.get("name") or "", jtype, kind, handle_visuals, handle_links, label))
    return parts


def handle_link_names(urdf_path: str | Path) -> frozenset[str]:
    """Links whose visuals are all handle (labelled ``handle`` in semantics.txt and fixed to a part)."""
    return frozenset(h for part in openable_parts(urdf_path) for h in part.handle_links)


def check_target_link(urdf_path: str | Path, kind: str, link_name: str) -> OpenablePart:
    """The part ``link_name`` of the model, checked to be a ``kind`` ("drawer" or "door") with a handle;
    ``TargetLinkError`` or ``NoHandleError`` naming the link, the problem and the URDF's path."""
    root = parse_urdf(urdf_path)
    links = sorted(link.get("name") for link in root.findall("link"))
    if link_name not in links:
        raise TargetLinkError(f"{urdf_path}: no link {link_name!r}; its links are {links}")
    parts = openable_parts(urdf_path)
    qualifying = [p.link for p in parts if p.kind == kind and p.handle_visuals]
    joint = next((j for j in root.findall("joint") if _link_of(j, "child") == link_name), None)
    jtype = "none (the root link)" if joint is None else joint.get("type")
    needed = PART_JOINTS[kind][0]
    if jtype not in PART_JOINTS["drawer"] + PART_JOINTS["door"]:
        raise TargetLinkError(
            f"{urdf_path}: target link {link_name!r} is neither prismatic nor revolute: its joint is {jtype}; "
            f"a {kind} needs a {needed} joint. Links that qualify: {qualifying or 'none'}")
    if jtype != needed:
        raise TargetLinkError(
            f"{urdf_path}: target link {link_name!r} is not a {kind}: its joint is {jtype}, a {kind} needs a "
            f"{needed} joint. Links that qualify: {qualifying or 'none'}")
    part = next((p for p in parts if p.link == link_name), None)
    if part is None:
        raise TargetLinkError(f"{urdf_path}: target link {link_name!r}: its {jtype} joint has no finite range "
                              "(<limit lower=... upper=...>)")
    if not part.handle_visuals:
        raise NoHandleError(f"{urdf_path}: target link {link_name!r} has no handle: looked for {HANDLE_CONVENTION}")
    return part


def object_targets(models: dict[str, Path], kind: str, target_link: str | None = None) -> dict[str, list[str]]:
    """The target links of each model for a task opening ``kind`` parts: ``target_link`` (checked on every
    model), or every ``kind`` part with a handle. Models without such a part are left out when others have
    one; errors name the problem when none has (``NoHandleError`` when there are parts but no handles)."""
    if kind not in PART_JOINTS:
        raise ValueError(f"unknown part kind {kind!r}; choose one of {sorted(PART_JOINTS)}")
    if target_link is not None:
        return {m: [check_target_link(urdf, kind, target_link).link] for m, urdf in models.items()}
    targets, without_handle, without_parts = {}, [], []
    for model_id, urdf in models.items():
        parts = [p for p in openable_parts(urdf) if p.kind == kind]
        with_handle = [p.link for p in parts if p.handle_visuals]
        if with_handle:
            targets[model_id] = with_handle
        elif parts:
            without_handle.append(f"{urdf} ({', '.join(p.link for p in parts)})")
        else:
            without_parts.append(str(urdf))
    if targets:
        return targets
    if without_handle:
        raise NoHandleError(f"no {kind} with a handle: the {kind}s of {'; '.join(without_handle)} have none; "
                            f"looked for {HANDLE_CONVENTION}")
    raise TargetLinkError(f"no {kind} ({PART_JOINTS[kind][0]} joint with a finite range) in "
                          f"{', '.join(without_parts)}")


def episode_target(targets: dict[str, list[str]], index: int) -> tuple[str, str]:
    """(model id, target link) of episode ``index``: model ``index mod n`` (every model equally often, as the
    bundled splits), and that model's targets in turn."""
    ids = sorted(targets)
    model_id = ids[index % len(ids)]
    links = targets[model_id]
    return model_id, links[(index // len(ids)) % len(links)]


def _link_of(joint: ET.Element, tag: str) -> str:
    element = joint.find(tag)
    return "" if element is None else element.get("link", "")


def _finite_range(joint: ET.Element) -> bool:
    limit = joint.find("limit")
    if limit is None:
        return False
    try:
        lower, upper = float(limit.get("lower", "0")), float(limit.get("upper", "0"))
    except ValueError:
        return False
    return bool(np.isfinite(lower) and np.isfinite(upper) and upper > lower)
