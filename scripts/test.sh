#!/usr/bin/env bash
# The full test suite, slow model-zoo tests included. Sets everything up first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -m "slow or not slow" "$@"
