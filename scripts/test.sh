#!/usr/bin/env bash
# The test suite: set up what is missing, then run pytest (long evaluations are marked slow and skipped;
# run them with: bash scripts/test.sh -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
