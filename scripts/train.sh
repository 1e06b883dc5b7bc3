#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" examples/train_mlp.py "$@"
