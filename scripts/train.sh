#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the main job: a tiny character-level GPT, ~3.5 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" examples/train_gpt.py "$@"
