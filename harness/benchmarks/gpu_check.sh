#!/usr/bin/env bash
# One command for a GPU machine (issue 22): install the project offline, run the gpu tier with the
# references and the stubs, the differential test (cpu backend vs hardware), the sanitizer proofs,
# nvcc-pipeline with the real cu++filt, the device's peaks and the benchmarks, and write one
# archive of results, $OUT/gpu-check.tar.gz, in under 5 minutes (every step has a timeout, and
# the steps share GPU_CHECK_BUDGET_S, 270 s by default).
#
# The machine it is written for: Python 3.12 with cupy, cuda-bindings, numba-cuda and torch, the
# full CUDA 13 toolkit (cu++filt, compute-sanitizer), and no package registry, no pycuda, cffi,
# cryptography or grpcio-tools, no Rust, busybox or valgrind (their tasks skip: docs/grading.md).
#
#   bash harness/benchmarks/gpu_check.sh --fetch-wheels  # here, with a registry: wheels into .whl/
#   bash harness/benchmarks/gpu_check.sh                 # there: the check, results in $OUT
#   bash harness/benchmarks/gpu_check.sh --dry-run       # print the steps and their limits only
#   GPU_CHECK_FAKE=1 bash harness/benchmarks/gpu_check.sh   # on a CPU machine: the steps that need
#                                                        # no GPU, on small selections, no install
#
# With the device tool of these sessions (the wheels are in .whl/, which git ignores: carry it):
#   run(command="bash harness/benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=330)
#
# Never initialise CUDA in the pytest process: everything here runs pytest, whose gpu work runs in
# the kata tests' children and the tests' own subprocesses; this script only reads nvidia-smi.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WHEELS="$ROOT/.whl"
OUT=${OUT:-$ROOT/gpu-check-out} # only the archive and summary.txt go here: $OUT comes back
WORK=${GPU_CHECK_WORK:-$(mktemp -d /tmp/gpu-check.XXXXXX)} # results, then the archive's content
RESULTS="$WORK/gpu-check"
BUDGET=${GPU_CHECK_BUDGET_S:-270}
FAKE=${GPU_CHECK_FAKE:-0}
DRY=0
START=$(date +%s)

# The wheels the image lacks, for CPython 3.12 on manylinux x86_64 (and what they need): the
# project's own dependencies, read from pyproject.toml (cffi, pycparser, cryptography, grpcio,
# grpcio-tools, protobuf among them), the test tools of its [dev] extra that the gpu tests use,
# and the build backend for the offline editable install.
EXTRA_WHEELS=("pytest-timeout>=2.3" "jsonschema>=4.20" "xmlschema>=3.0" setuptools wheel pycparser protobuf)

fetch_wheels() {
  local deps
  mkdir -p "$WHEELS"
  mapfile -t deps < <(python3 -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' "$ROOT/pyproject.toml")
  python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
    --abi cp312 --abi abi3 --abi none --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    -d "$WHEELS" "${deps[@]}" "${EXTRA_WHEELS[@]}"
  du -sh "$WHEELS"
}

case "${1:-}" in
  --fetch-wheels) fetch_wheels; exit $? ;;
  --dry-run) DRY=1 ;;
  "") ;;
  *) echo "usage: $0 [--fetch-wheels|--dry-run]" >&2; exit 2 ;;
esac

mkdir -p "$RESULTS" "$OUT"
SUMMARY="$RESULTS/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME LIMIT_S COMMAND...: run with a timeout (the smaller of LIMIT_S and the time left),
# output to NAME.log, one line in summary.txt: name, exit status (124: timed out), seconds.
step() {
  local name=$1 limit=$2 t0 rc remaining
  shift 2
  remaining=$(left)
  ((remaining < limit)) && limit=$remaining
  if ((DRY)); then
    note "$name: would run (limit ${limit}s): $*"
    return 0
  fi
  if ((limit < 10)); then
    note "$name: not run: the time budget (${BUDGET}s) is spent"
    return 0
  fi
  t0=$(date +%s)
  # A fresh bash runs the step (timeout cannot run this script's functions): they are exported.
  timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" >"$RESULTS/$name.log" 2>&1
  rc=$?
  note "$name: exit $rc$( ((rc == 124)) && echo ' (timed out)') in $(($(date +%s) - t0))s (limit ${limit}s)"
  return 0
}

# ---------------------------------------------------------------------------- the machine
VENV="$WORK/venv"
if ((FAKE)) || ((DRY)); then
  PY=${PYTHON:-$ROOT/.venv/bin/python}
  [ -x "$PY" ] || PY=python3
else
  PY="$VENV/bin/python"
fi
WORKERS=${GPU_CHECK_WORKERS:-$( ((FAKE)) && echo 2 || echo 14)}

environment() {
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo '-') $(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l) changed files"
  echo "fake: $FAKE"
  python3 --version
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || true
  for tool in nvcc ptxas cuobjdump cu++filt c++filt compute-sanitizer cargo busybox valgrind; do
    printf '%s: %s\n' "$tool" "$(command -v "$tool" || ls /usr/local/cuda/bin/"$tool" 2>/dev/null || echo missing)"
  done
  nvcc --version 2>/dev/null | tail -n 2 || true
  find "$WHEELS" -maxdepth 1 -name '*.whl' -printf 'wheel: %f\n' 2>/dev/null | sort
}

install() {
  local py=$PY flags=()
  # A venv on the image's Python (cupy, cuda-bindings, numba-cuda, torch stay visible); where
  # venv is missing (no ensurepip), the image's own Python, which is thrown away afterwards.
  if ! python3 -m venv --system-site-packages "$VENV"; then
    py=python3 flags=(--break-system-packages)
    echo "no venv here: installing into $(command -v python3)"
  fi
  set -e
  "$py" -m pip install -q "${flags[@]}" --no-index --find-links "$WHEELS" setuptools wheel
  "$py" -m pip install -q "${flags[@]}" --no-index --find-links "$WHEELS" --no-build-isolation \
    -e "$ROOT" jsonschema xmlschema pytest-timeout
  "$py" -m pip list
}

demanglers() { # NVIDIA's cu++filt and binutils' c++filt on the names the katas meet
  local names=(_Z4blurPKfPfi _ZN7stencil4blurILi3EfEEvPKT0_PS1_i _ZN2ns5applyINS_4PairIifEEEEvPT_i
    _ZN2ns5inner1kILs3EEEvPf _Z9block_sumPKfPfi _Z1fRKi _Z1fPKPKf _Z1fPVKf)
  for tool in cu++filt c++filt; do
    echo "== $tool ($(command -v "$tool" || echo missing))"
    printf '%s\n' "${names[@]}" | "$tool" || true
  done
  (cd "$ROOT" && "$PY" -m pytest -p no:cacheprovider harness/tests/test_cuda_static.py -rs -v \
    -k "spelling or cuxxfilt or demangl")
}

peaks() {
  # In a child of this script, not of pytest: the device's attributes and the peaks from them.
  "$PY" - <<'EOF'
import json
from harness import physics
from harness.cuda import gpu
out = {"cpu": physics.cpu_peak().__dict__}
try:
    attrs = gpu.device_attributes()
    peak = physics.gpu_peak(attrs)
    out.update(attributes=attrs, gpu=peak and peak.__dict__)
except Exception as e:  # no GPU (GPU_CHECK_FAKE=1), or a driver without attribute queries
    out["gpu"] = f"{type(e).__name__}: {e}"
print(json.dumps(out, indent=1))
EOF
}

pytest_run() { # pytest_run NAME ARGS...: one pytest run with its JUnit and HTML reports
  local name=$1
  shift
  (cd "$ROOT" && "$PY" -m pytest -p no:cacheprovider --kata-results-dir="$RESULTS/$name.kata" \
    --kata-report=junit:"$RESULTS/$name.junit.xml" --kata-report=html:"$RESULTS/$name.html" "$@")
}

export ROOT WHEELS OUT WORK RESULTS FAKE VENV PY
export -f environment install demanglers peaks pytest_run
note "gpu_check: $(date -u +%FT%TZ), budget ${BUDGET}s, fake=$FAKE, dry-run=$DRY, python $PY"
step environment 20 environment
if ! ((FAKE)); then
  step install 90 install
  "$PY" -c "import harness, cffi, cryptography, grpc_tools" 2>/dev/null ||
    { note "install failed (see install.log): the steps run with the image's python3"; PY=python3; }
fi
if ((FAKE)); then # small selections: the script's logic, not the katas, on a CPU machine
  KATAS=(katas/phase02/vector-add)
  NVCC=(katas/phase03/nvcc-pipeline -k resources)
else
  KATAS=(katas)
  NVCC=(katas/phase03/nvcc-pipeline)
fi
step peaks 30 peaks
step demanglers 45 demanglers
step references 110 pytest_run references "${KATAS[@]}" --kata-impl=solution -n "$WORKERS"
step sanitizer 60 pytest_run sanitizer harness/tests/test_cuda_sanitizer.py -rs
# On a CPU machine the stand-in compute-sanitizer (launches on the cpu backend) takes its place.
((FAKE)) && export KATA_TOOL_COMPUTE_SANITIZER="$ROOT/harness/tests/standins/compute-sanitizer"
step sanitize-vector-add 45 pytest_run sanitize-vector-add katas/phase02/vector-add \
  --kata-impl=solution --kata-cuda-sanitize=memcheck -rs
export KATA_DIFFERENTIAL_JSON="$RESULTS/differential.jsonl" # one line per kernel's outcome
step differential 45 pytest_run differential harness/tests/test_cuda_differential.py -rs -v
step nvcc-pipeline 45 pytest_run nvcc-pipeline "${NVCC[@]}" --kata-impl=solution
step stubs 50 pytest_run stubs "${KATAS[@]}" -n "$WORKERS"
step bench-cuda 40 "$PY" "$ROOT/harness/benchmarks/bench_cuda.py"

note "gpu_check: done in $(($(date +%s) - START))s"
tar -czf "$OUT/gpu-check.tar.gz" -C "$WORK" gpu-check
note "archive: $OUT/gpu-check.tar.gz ($(du -h "$OUT/gpu-check.tar.gz" | cut -f1))"
cp "$SUMMARY" "$OUT/summary.txt"
