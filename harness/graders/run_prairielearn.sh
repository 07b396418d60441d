#!/usr/bin/env bash
# PrairieLearn external-grader entry point (info.json: "externalGradingOptions": {"entrypoint":
# "/grade/serverFilesCourse/gpu-katas/harness/graders/run_prairielearn.sh", ...}).
# Leaves /grade/results/results.json. Overrides: KATA_PL_ROOT (/grade), KATA_PL_COURSE,
# KATA_PL_RESULTS, KATA_PYTHON, KATA_KATAS.
set -uo pipefail
ROOT=${KATA_PL_ROOT:-/grade}
COURSE=${KATA_PL_COURSE:-$ROOT/serverFilesCourse/gpu-katas}
PYTHON=${KATA_PYTHON:-python3}
export KATA_PL_ROOT=$ROOT KATA_PL_COURSE=$COURSE
# The harness comes from the course copy unless the image has it installed already.
export PYTHONPATH="$COURSE${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$ROOT/results"
exec "$PYTHON" -m harness.graders.prairielearn "$@"
