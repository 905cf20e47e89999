#!/usr/bin/env bash
# The main job: set up what is missing, then run the demo on a bundled task.
# Until the solvers exist (issue 3) the main job is the environment demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/handleit demo "$@"
