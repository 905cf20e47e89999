"""The errors of an articulated object model read from disk (a ``mobility.urdf`` or a folder of them).

Each names the problem and the path it was found at, so that a user with a folder of models knows which
file to fix. All are ``ObjectModelError`` (a ``ValueError``); a missing file is a ``FileNotFoundError`` too.
"""

from __future__ import annotations


class ObjectModelError(ValueError):
    """An object model that cannot be used as a task object."""


class ObjectFileNotFoundError(ObjectModelError, FileNotFoundError):
    """A file the model needs (the URDF, a mesh, a model folder) is not there."""


class URDFError(ObjectModelError):
    """A URDF that does not parse, or that SAPIEN cannot build an articulation from."""


class MeshLoadError(ObjectModelError):
    """A visual or collision mesh that exists but cannot be read (or holds no triangles)."""


class TargetLinkError(ObjectModelError):
    """A target link that is not there, or whose joint is neither prismatic nor revolute (or the wrong one)."""


class NoHandleError(ObjectModelError):
    """A part with no handle by PartNet-Mobility's conventions (visual names, semantics.txt)."""
