#!/usr/bin/env bash
# The main job: capture CoolCNN and ResNet-50, write their diagrams (SVG, PDF) and trees to DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/dispatchtrace demo "${1:-demo-out}"
