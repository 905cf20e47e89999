#!/usr/bin/env bash
# The main job: set up what is missing, then run the behavior trees on a few test cabinets of both tasks
# through the evaluation harness and print the success table. Extra arguments go to `handleit eval`
# (e.g. --episodes 50 --max-steps 200 --video 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/handleit eval --task all --split test --episodes 4 --max-steps 1000 --workers 2 --out outputs/main "$@"
