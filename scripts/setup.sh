#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: system packages, the virtual environment, the package itself.
# Every README command runs it first; when everything is in place it returns in about a second.
#
# Facts it is built on (shared/SETUP-NOTES.md, measured on Debian 12 machines without a GPU):
# - SAPIEN 3 needs a Vulkan device even for physics-only scenes; Debian 12's own lavapipe (Mesa 22.3) is
#   refused, Mesa 25 from bookworm-backports works. A machine with a usable Vulkan device (an NVIDIA GPU)
#   gets nothing installed.
# - open3d 0.20 imports only with libusb-1.0-0 installed.
# - torch must be installed as the pinned CPU build before anything that requires torch.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else log "root rights are needed to run: $*"; return 1
    fi
}

apt_updated=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "apt-get not found: install these system packages by hand: $*"; return 1
    fi
    if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- Python 3.11 ------------------------------------------------------------------------------------
PY=""
for cand in "${PYTHON:-}" python3.11 python3; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        PY="$cand"; break
    fi
done
if [ -z "$PY" ]; then log "Python 3.11 is required (set PYTHON=/path/to/python3.11)"; exit 1; fi

# --- system packages ----------------------------------------------------------------------------------
if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0'; then
    log "installing libusb-1.0-0 (open3d needs it)"
    apt_install libusb-1.0-0
fi

# --- virtual environment and packages -----------------------------------------------------------------
stamp=.venv/.handleit-installed
if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $PY"
    "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    log "installing Python packages into .venv (first run: several minutes; log in .venv/pip-install.log)"
    {
        .venv/bin/python -m pip install --upgrade pip &&
        # The CPU build of torch first: a plain torch requirement would pull several GB of CUDA wheels.
        .venv/bin/python -m pip install torch==2.13.0 &&
        .venv/bin/python -m pip install -e '.[test]'
    } > .venv/pip-install.log 2>&1 || { tail -n 30 .venv/pip-install.log >&2; log "pip install failed"; exit 1; }
    touch "$stamp"
fi

# --- Vulkan for SAPIEN's renderer ---------------------------------------------------------------------
if ! .venv/bin/python -m handleit.harness.render_check --quiet; then
    log "no usable Vulkan device: installing software Vulkan (Mesa lavapipe) from bookworm-backports"
    if [ ! -f /etc/apt/sources.list.d/bookworm-backports.sources ]; then
        as_root tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt_updated=0
    fi
    if [ "$apt_updated" = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
    if ! .venv/bin/python -m handleit.harness.render_check; then
        log "SAPIEN still finds no rendering device after installing Mesa from bookworm-backports"; exit 1
    fi
fi

# --- ROS 1 (the ROS bridge: handleit serve-ros / run-ros, tests/test_ros_bridge.py) ----------------------
# Debian 12 packages ROS 1 (rospy 1.15); its modules go to /usr/lib/python3/dist-packages, which
# handleit.harness.ros_env appends at the END of the environment's sys.path, so the pinned numpy etc. still win.
# ROS 2 is not packaged for Debian 12.
if ! command -v roscore >/dev/null 2>&1 || [ ! -d /usr/lib/python3/dist-packages/rospy ] \
        || [ ! -d /usr/lib/python3/dist-packages/nav_msgs ]; then
    log "installing ROS 1 from Debian (ros-core, rospy, sensor/nav/geometry/std messages)"
    apt_install ros-core python3-rospy python3-sensor-msgs python3-nav-msgs python3-tf2-ros \
        python3-geometry-msgs python3-std-msgs
fi
log "ready"
