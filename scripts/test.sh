#!/usr/bin/env bash
# The full test suite, slow model-zoo tests included, on the pinned torch; then the fast suite on
# torch 2.13.0, the oldest release tested (scripts/test-torch.sh, its own .venv-213). Sets everything up first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
.venv/bin/python -m pytest -q -m "slow or not slow" "$@"
bash scripts/test-torch.sh 2.13.0
