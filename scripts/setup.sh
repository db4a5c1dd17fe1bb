#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: graphviz's `dot`, a virtual environment, torch and
# dispatchtrace with its dev tools and the test-only zoo libraries (transformers, timm).
# Called by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v dot >/dev/null 2>&1; then
  echo "setup: installing graphviz (the dot program)" >&2
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq graphviz >/dev/null
  elif command -v brew >/dev/null 2>&1; then
    brew install graphviz
  else
    echo "setup: cannot install graphviz here; install it (apt-get install graphviz, brew install graphviz" \
         "or conda install graphviz). .txt, .json and .dot outputs work without it." >&2
  fi
fi

# the HTML viewer's browser tests drive Debian's chromium through playwright (never `playwright install`)
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing chromium (for tests/render/test_viewer_browser.py)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null || \
    echo "setup: could not install chromium; the browser tests will be skipped" >&2
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch, torchvision" >/dev/null 2>&1; then
  echo "setup: installing torch and torchvision (about a minute)" >&2
  .venv/bin/pip install -q --disable-pip-version-check "torch==2.14.1" "torchvision==0.29.1" 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import torch, torchvision" # fail loudly if the install did not work
fi
# -c keeps torch and torchvision where they are: transformers and timm must not move them
printf 'torch==%s\ntorchvision==%s\n' $(.venv/bin/python -c "import torch, torchvision; print(torch.__version__.split('+')[0], torchvision.__version__.split('+')[0])") > .venv/torch-pins.txt
.venv/bin/pip install -q --disable-pip-version-check -c .venv/torch-pins.txt -e ".[dev,zoo,apps]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import dispatchtrace, pytest, transformers, timm, playwright"
