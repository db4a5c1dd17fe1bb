#!/usr/bin/env bash
# The CUDA checks on one GPU, in about 7 minutes: the tests marked `cuda` (tests/test_cuda.py), a quick
# `dispatchtrace calibrate` held against the part's built-in spec, the overhead benchmark's rows on cuda, a timed
# capture (benchmarks/timing.py --device cuda), the estimate of real steps against their measured time
# (benchmarks/estimate.py --device cuda), and a short report in markdown ($REPORT, default
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

# 2. calibrate this GPU (quick, about 30 s) and hold the measured peaks against the part's datasheet spec
SPEC="$(dirname "$REPORT")/gpu-spec.json"
timeout 120 "$PY" -m dispatchtrace calibrate --device cuda --quick -q -o "$SPEC" > /dev/null 2>> "$LOG"
cal=$?
{
  echo
  echo "## dispatchtrace calibrate --device cuda --quick: exit $cal (the spec: $(basename "$SPEC"))"
  echo
  [ "$cal" -eq 0 ] && "$PY" - "$SPEC" 2>&1 <<'PY' | head -20
import sys, torch, dispatchtrace as dt
got = dt.DeviceSpec.load(sys.argv[1])
name = sys.argv[2] if len(sys.argv) > 2 else torch.cuda.get_device_name()
sheet = dt.DeviceSpec.for_device(name)
print(f"measured on {name}; datasheet spec: {sheet.name if sheet else 'none for this part'}\n")
print("| | measured | datasheet | measured / datasheet |\n|---|---|---|---|")
rows = [(f"{k} matmul, TFLOP/s", got.peak(k) / 1e12, sheet.peak(k) / 1e12 if sheet and sheet.peak(k) else None)
        for k in ("float64", "float32", "tfloat32", "bfloat16", "float16") if got.peak(k)]
rows.append(("bandwidth, GB/s", got.memory_bandwidth / 1e9, sheet.memory_bandwidth / 1e9 if sheet else None))
rows.append(("per-op launch, us", got.launch_overhead * 1e6, sheet.launch_overhead * 1e6 if sheet else None))
for label, m, d in rows:
    print(f"| {label} | {m:.4g} | {'-' if d is None else f'{d:.4g}'} | {'-' if d is None else f'{m / d:.2f}'} |")
PY
} >> "$REPORT"

# 3. the overhead table on cuda (each run synchronized), with a cpu row of the same process to compare
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

# 3. measured time on cuda (timing=True: CUDA events read once at the end) against the capture without it
left=$(( 290 - ($(date +%s) - start) ))
if [ "$left" -gt 20 ]; then
  {
    echo
    echo "## benchmarks/timing.py --device cuda --repeat 5"
    echo
    echo '```'
    timeout "$left" "$PY" benchmarks/timing.py --device cuda --repeat 5 2>&1 | tail -10
    echo '```'
  } >> "$REPORT"
fi
# 4. the estimate of real steps against their measured time on this GPU: with the spec calibrated above, and the
#    part's built-in spec (the time issues' accuracy check on a GPU: docs/time.md, docs/timeline.md)
left=$(( 420 - ($(date +%s) - start) ))
if [ "$left" -gt 30 ] && [ -s "$SPEC" ]; then
  {
    echo
    echo "## benchmarks/estimate.py --device cuda --spec $(basename "$SPEC") --rows resnet50 gpt2 --repeat 3"
    echo
    echo '```'
    timeout "$left" "$PY" benchmarks/estimate.py --device cuda --spec "$SPEC" --rows resnet50 gpt2 --repeat 3 2>&1 | tail -40
    echo '```'
  } >> "$REPORT"
fi
echo >> "$REPORT"
echo "- took $(( $(date +%s) - start )) s" >> "$REPORT"
cat "$REPORT"
[ "$tests" -ne 0 ] && exit "$tests"
exit "$cal"
