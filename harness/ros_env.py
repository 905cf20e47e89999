"""Debian's ROS 1 Python modules, made importable from the project's virtual environment.

Debian 12 packages ROS 1 (rospy 1.15, scripts/setup.sh installs it) into ``/usr/lib/python3/dist-packages``,
built for the system Python 3.11, the same interpreter the ``.venv`` is made from. That folder also holds
Debian's own yaml, dateutil, cryptography, ... . :func:`import_rospy` appends it at the END of ``sys.path``
(plain ``sys.path.append``, not ``site.addsitedir``: Debian's ``.pth`` files are not run), so every module
the environment pins (numpy, torch, scipy, yaml, ...) is still found first and only what the environment
lacks (rospy, the message packages, rospkg, catkin_pkg, ...) comes from Debian. ROS 2 is not packaged for
Debian 12.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from shutil import which

DEBIAN_DIST_PACKAGES = Path(os.environ.get("HANDLEIT_ROS_DIST_PACKAGES", "/usr/lib/python3/dist-packages"))


class RosUnavailable(ImportError):
    """ROS 1 is not installed (run scripts/setup.sh, which installs Debian's ros-core and python3-rospy)."""


def add_ros_to_path() -> None:
    """Append Debian's dist-packages at the end of ``sys.path`` (once)."""
    path = str(DEBIAN_DIST_PACKAGES)
    if path not in sys.path:
        sys.path.append(path)


def import_rospy():
    """The ``rospy`` module (Debian's ROS 1), importable after :func:`add_ros_to_path`.

    Raises :class:`RosUnavailable` with the fix when ROS is not installed.
    """
    add_ros_to_path()
    try:
        import rospy  # noqa: PLC0415  lazy: ROS 1, an optional system dependency, imported only when ROS is used
    except ImportError as error:
        raise RosUnavailable(
            f"rospy is not importable ({error}); install ROS 1 with scripts/setup.sh (Debian 12: apt-get install "
            "ros-core python3-rospy python3-sensor-msgs python3-nav-msgs python3-geometry-msgs python3-std-msgs)"
        ) from error
    return rospy


def ros_available() -> bool:
    """Whether rospy and ``roscore`` are installed (for tests that need a live master)."""
    try:
        import_rospy()
    except RosUnavailable:
        return False
    return which("roscore") is not None
