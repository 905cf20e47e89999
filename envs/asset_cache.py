"""Where generated assets (robot descriptions, procedural objects) are written, and how.

Generated files go under ``$HANDLEIT_CACHE_DIR`` (default ``~/.cache/handleit``). Each asset lives in its
own folder whose name carries a content key, so a change of generator gives a new folder instead of a stale
one. Folders are written to a temporary sibling and renamed into place, so parallel worker processes that
generate the same asset at once never see a half-written folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    """Root folder for generated assets."""
    root = os.environ.get("HANDLEIT_CACHE_DIR") or Path.home() / ".cache" / "handleit"
    return Path(root)


def build_once(folder: Path, write: Callable[[Path], None]) -> Path:
    """Return ``folder``, first filling it with ``write(tmp_folder)`` if it does not exist yet.

    ``write`` fills an empty temporary folder; it is renamed to ``folder`` atomically. When another
    process won the race, its folder is kept and ours is discarded.
    """
    folder = Path(folder)
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not folder.is_dir():  # a real failure, not a lost race
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
