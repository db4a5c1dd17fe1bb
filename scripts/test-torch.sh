#!/usr/bin/env bash
# One row of docs/compatibility.md: the fast suite, a ResNet-18 capture and an MLP training step on
# torch VERSION, in a fresh virtual environment beside the repository.
#
#   bash scripts/test-torch.sh 2.13.0                      # CI's second row (.venv-213: the CPU wheel on disk)
#   TORCHVISION=0.29.2 bash scripts/test-torch.sh 2.15.0   # a multi-GB download: run by hand, not in CI
#
# VENV (default .venv-torch-VERSION; .venv-213 for 2.13.0) is reused when its torch is VERSION already,
# so a second run costs only the tests. TORCHVISION, when given, is installed beside torch; without it
# the tests of torchvision's models skip with their reason (no PyPI torchvision imports beside 2.13).
# The machine's pip constraint caps torch at 2.14.1: for any other version the installs lift it for
# their call (PIP_CONSTRAINT=/dev/null; an empty PIP_CONSTRAINT= does not override pip.conf's
# constraint). Extra arguments go to pytest. The last line is the table's row.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:?usage: scripts/test-torch.sh VERSION [pytest args] (e.g. 2.13.0)}"
shift
case "$VERSION" in 2.13.0) DEFAULT_VENV=.venv-213 ;; *) DEFAULT_VENV=".venv-torch-$VERSION" ;; esac
VENV="${VENV:-$DEFAULT_VENV}"
PY="${PYTHON:-python3}"
TV="${TORCHVISION:-}"

lift=()
case "$VERSION" in 2.13.0|2.14.1) ;; *) lift=(env PIP_CONSTRAINT=/dev/null) ;; esac

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
have="$("$VENV/bin/python" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null || true)"
if [ "$have" != "$VERSION" ]; then
  echo "test-torch: installing torch $VERSION${TV:+ and torchvision $TV} into $VENV" >&2
  "${lift[@]}" "$VENV/bin/pip" install -q --disable-pip-version-check "torch==$VERSION" ${TV:+"torchvision==$TV"} 2>&1 \
    | grep -v "is ignored" || true
fi
# the test tools, pinned beside this torch (-c): nothing they pull may move torch
pins="$VENV/torch-pins.txt"
"$VENV/bin/python" -W ignore -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > "$pins" 2>/dev/null
if [ -n "$TV" ]; then echo "torchvision==$TV" >> "$pins"; fi
if ! "$VENV/bin/python" -c "import pytest, graphviz, numpy" >/dev/null 2>&1; then
  "${lift[@]}" "$VENV/bin/pip" install -q --disable-pip-version-check -c "$pins" "pytest>=7" "graphviz>=0.20" numpy 2>&1 \
    | grep -v "is ignored" || true
fi
"$VENV/bin/python" -c "import torch; assert torch.__version__.split('+')[0] == '$VERSION', torch.__version__"

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
set +e
"$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" -W ignore "$@" | tee "$VENV/pytest.log" | tail -3
suite=${PIPESTATUS[0]}
"$VENV/bin/python" - <<'PY' > "$VENV/capture.log" 2>&1
import torch, torch.nn as nn
import dispatchtrace as dt
torch.manual_seed(0)
try:
    import torchvision
    net = torchvision.models.resnet18(weights=None).eval()
    with torch.no_grad(), dt.capture(net) as g:
        net(torch.randn(1, 3, 224, 224))
    g.lint()
    print(f"resnet18: {len(g.ops)} ops, {len(g.calls)} calls, lint clean")
except ImportError as error:
    print(f"resnet18: not run ({error})")
mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
with dt.capture(mlp) as g:
    mlp(torch.randn(4, 8)).sum().backward()
    opt.step()
phases = sorted({op.phase for op in g.ops})
attributed = sum(op.origin is not None for op in g.ops if op.phase == "backward")
print(f"mlp step: {len(g.ops)} ops, phases {phases}, {attributed} backward ops attributed, notes {len(g.notes)}")
PY
cap=$?
set -e
cat "$VENV/capture.log"
summary="$(tail -1 "$VENV/pytest.log" | sed 's/ in [0-9.]*s.*//; s/^=* *//')"
echo "| $VERSION | ${TV:-none} | $summary | $([ $cap -eq 0 ] && echo works || echo FAILS) |"
exit $(( suite != 0 || cap != 0 ))
