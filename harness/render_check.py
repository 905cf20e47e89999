"""Check that SAPIEN finds a Vulkan device it can render with; exit status 0 if so.

Used by scripts/setup.sh to decide whether software Vulkan must be installed. Run it as
``python -m handleit.harness.render_check``.
"""

from __future__ import annotations

import argparse
import sys
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Failed to find system libvulkan" is expected before set-up
    import sapien


def find_render_device() -> str | None:
    """Return a description of the device SAPIEN renders with, or None when there is none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            system = sapien.render.RenderSystem()
        except RuntimeError:
            return None
    return str(system.device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    device = find_render_device()
    if not args.quiet:
        print(f"render device: {device}" if device else "no usable Vulkan device found by SAPIEN")
    return 0 if device else 1


if __name__ == "__main__":
    sys.exit(main())
