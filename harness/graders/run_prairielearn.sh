#!/usr/bin/env bash
# PrairieLearn external-grader entry point (info.json: "externalGradingOptions": {"image":
# "<your image built from harness/graders/prairielearn.Dockerfile>", "entrypoint":
# "/grade/serverFilesCourse/gpu-katas/harness/graders/run_prairielearn.sh", ...}).
# Leaves /grade/results/results.json. Overrides: KATA_PL_ROOT (/grade), KATA_PL_COURSE,
# KATA_PL_RESULTS, KATA_PYTHON, KATA_KATAS, KATA_OPTIONAL.
set -uo pipefail
ROOT=${KATA_PL_ROOT:-/grade}
COURSE=${KATA_PL_COURSE:-$ROOT/serverFilesCourse/gpu-katas}
# The image's environment (prairielearn.Dockerfile: /opt/gpu-katas-venv) has the harness's
# dependencies and the extras the katas need; plain python3 otherwise.
DEFAULT_PYTHON=python3
[ -x /opt/gpu-katas-venv/bin/python ] && DEFAULT_PYTHON=/opt/gpu-katas-venv/bin/python
PYTHON=${KATA_PYTHON:-$DEFAULT_PYTHON}
# What this grader may lack without the run being an error: PrairieLearn's graders have no GPU.
export KATA_OPTIONAL=${KATA_OPTIONAL-gpu,kbuild}
# TIME BUDGET: the run ends, every report written, within this many seconds (pytest's
# --kata-time-budget, read from the environment). Give the question an
# externalGradingOptions.timeout at least 60 s above it (300 for the default 240).
export KATA_TIME_BUDGET=${KATA_TIME_BUDGET-240}
export KATA_PL_ROOT=$ROOT KATA_PL_COURSE=$COURSE
# The harness comes from the course copy unless the image has it installed already.
export PYTHONPATH="$COURSE${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$ROOT/results"
exec "$PYTHON" -m harness.graders.prairielearn "$@"
