#!/usr/bin/env bash
# Idempotent set-up for a fresh machine.
#
#   bash scripts/setup.sh          # what the main job uses: graphviz's `dot`, .venv, torch, torchvision, dispatchtrace
#   bash scripts/setup.sh --test   # and what only the tests use: chromium (the viewer's browser tests) and the
#                                  # dev, zoo, apps and traces extras (pytest, playwright, transformers, timm, ...)
#
# scripts/demo.sh calls the first, scripts/test.sh the second.
set -euo pipefail
cd "$(dirname "$0")/.."
TEST=0
case "${1:-}" in
  "") ;;
  --test) TEST=1 ;;
  *) echo "usage: bash scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

apt_install() {  # apt_install PACKAGE: quietly, with sudo where not root
  local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$1" >/dev/null
}

if ! command -v dot >/dev/null 2>&1; then
  echo "setup: installing graphviz (the dot program)" >&2
  if command -v apt-get >/dev/null 2>&1; then
    apt_install graphviz
  elif command -v brew >/dev/null 2>&1; then
    brew install graphviz
  else
    echo "setup: cannot install graphviz here; install it (apt-get install graphviz, brew install graphviz" \
         "or conda install graphviz). .txt, .json and .dot outputs work without it." >&2
  fi
fi

# the HTML viewer's browser tests drive Debian's chromium through playwright (never `playwright install`)
if [ "$TEST" = 1 ] && [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing chromium (for tests/render/test_viewer_browser.py)" >&2
  apt_install chromium || echo "setup: could not install chromium; the browser tests will be skipped" >&2
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
# -c keeps torch and torchvision where they are: nothing installed after them may move them
printf 'torch==%s\ntorchvision==%s\n' $(.venv/bin/python -c "import torch, torchvision; print(torch.__version__.split('+')[0], torchvision.__version__.split('+')[0])") > .venv/torch-pins.txt
if [ "$TEST" = 1 ]; then
  .venv/bin/pip install -q --disable-pip-version-check -c .venv/torch-pins.txt -e ".[dev,zoo,apps,traces]" 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import dispatchtrace, pytest, transformers, timm, playwright, hta, chakra"
else
  .venv/bin/pip install -q --disable-pip-version-check -c .venv/torch-pins.txt -e . 2>&1 | grep -v "is ignored" || true
  .venv/bin/python -c "import dispatchtrace, graphviz"
fi
