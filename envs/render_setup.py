"""The camera shader used for point clouds, and rendering defaults.

Point clouds come from SAPIEN's ``minimal`` shader: it is the cheapest on a CPU (software Vulkan), and its
``PositionSegmentation`` output gives camera-frame positions in millimetres plus one segmentation id per
pixel. That id is the *entity* (link) id, which cannot tell a drawer's handle from the rest of the drawer:
in PartNet-Mobility the handle is a visual of the drawer link. We use a copy of the minimal shader that
writes the *render shape* id instead (one line changed); link-level masks are unions of shape ids.

The copy is made at run time from the installed SAPIEN (its shaders are Apache-2.0), so it always matches
the SAPIEN version in use.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import sapien

from .asset_cache import build_once, cache_dir

_ENTITY_ID_LINE = "outPositionSegmentation = ivec4(ivec3(inPosition * 1000), inSegmentation[1]);"
_SHAPE_ID_LINE = "outPositionSegmentation = ivec4(ivec3(inPosition * 1000), inSegmentation[0]);"


def pointcloud_shader_dir() -> str:
    """Folder of the point-cloud shader (SAPIEN's minimal shader with per-render-shape segmentation)."""
    src = Path(sapien.__file__).parent / "vulkan_shader"
    folder = cache_dir() / "shaders" / f"pointcloud-sapien{sapien.__version__}"

    def write(tmp: Path) -> None:
        shutil.copytree(src / "common", tmp / "common")
        shutil.copytree(src / "minimal", tmp / "pointcloud")
        frag = tmp / "pointcloud" / "gbuffer.frag"
        text = frag.read_text()
        if _ENTITY_ID_LINE not in text:
            raise RuntimeError(
                f"SAPIEN {sapien.__version__}'s minimal shader changed; cannot derive the point-cloud shader "
                f"from {frag}. handleit is tested with sapien==3.0.3."
            )
        frag.write_text(text.replace(_ENTITY_ID_LINE, _SHAPE_ID_LINE))

    return str(build_once(folder, write) / "pointcloud")


def render_device_name() -> str:
    """The render device every SAPIEN scene of a process should use: ``"cuda"`` with an NVIDIA GPU, else
    ``"cpu"`` (software Vulkan).

    SAPIEN 3.0 renders on one device per process: a scene asking for another fails ("only supports
    single-GPU rendering"). SAPIEN's own default on a machine without a GPU is the software device by its
    PCI name, which ManiSkill3 cannot be given (it parses device names as ``backend:id``) while it can be
    given ``"cpu"``, the same software device. Pinning both to this name lets bundled envs and ManiSkill3
    envs (``handleit.harness.ms3_adapter``) share a process in either order.
    """
    try:
        sapien.Device("cuda")
        return "cuda"
    except RuntimeError:
        return "cpu"


def new_scene():
    """An empty SAPIEN scene (CPU physics) rendering on :func:`render_device_name`."""
    device = sapien.Device(render_device_name())
    return sapien.Scene([sapien.physx.PhysxCpuSystem(), sapien.render.RenderSystem(device)])
