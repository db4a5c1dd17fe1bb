#!/usr/bin/env bash
# The CUDA checks on one GPU, in under 5 minutes: the tests marked `cuda` (tests/test_cuda.py), the
# overhead benchmark's rows on cuda, and a short report in markdown ($REPORT, default
# gpu-check-report.md, or $OUT/gpu-check-report.md where $OUT is set, as on a lent device machine).
#
#   bash scripts/gpu-check.sh            # PYTHON=/path/to/python to use another interpreter
#
# Needs torch with CUDA and torchvision beside it (no download: run where they are installed).
# Exits non-zero when a test failed or no GPU was seen; the report says which.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
REPORT="${REPORT:-${OUT:-.}/gpu-check-report.md}"
LOG="$(dirname "$REPORT")/gpu-check-pytest.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$(date +%s)

{
  echo "# GPU check: $(git rev-parse --short HEAD 2>/dev/null || echo 'working tree')"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1 || echo 'nvidia-smi not found')"
  echo "- $("$PY" -c "import torch; print(f'torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, available {torch.cuda.is_available()}')" 2>&1 | tail -1)"
} > "$REPORT"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "- **no CUDA device seen: nothing was checked**" >> "$REPORT"
  cat "$REPORT"
  exit 2
fi

# 1. the cuda tests (about a minute on an H100-class GPU); among them a values="stats" capture under
#    torch.cuda.set_sync_debug_mode("error"), which raises on any synchronisation inside the block
timeout 200 "$PY" -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda.py -rfEs -W ignore > "$LOG" 2>&1
tests=$?
{
  echo
  echo "## tests/test_cuda.py (pytest -m cuda): exit $tests"
  echo
  echo '```'
  grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$LOG" | tail -25
  echo '```'
} >> "$REPORT"

# 2. the overhead table on cuda (each run synchronized), with a cpu row of the same process to compare
left=$(( 280 - ($(date +%s) - start) ))
if [ "$left" -gt 30 ]; then
  bench="$(timeout "$left" "$PY" benchmarks/overhead.py --repeat 5 --decoder \
            --rows resnet50:cuda encoder_12x512:cuda mobilenet_v3_large:cuda resnet50:cpu 2>/dev/null)"
  {
    echo
    echo "## benchmarks/overhead.py --repeat 5 --rows resnet50:cuda encoder_12x512:cuda mobilenet_v3_large:cuda resnet50:cpu"
    echo
    echo "$bench" | grep -E "^\||load|torch" | head -20
  } >> "$REPORT"
else
  echo "- the benchmark was skipped: the tests left under 30 s of the 5 minutes" >> "$REPORT"
fi
echo >> "$REPORT"
echo "- took $(( $(date +%s) - start )) s" >> "$REPORT"
cat "$REPORT"
exit $tests
