#!/usr/bin/env bash
# Gradescope autograder setup: runs once when the autograder image is built.
# The uploaded zip holds this file, run_autograder, and the course repository (harness/, katas/,
# solutions/ or the encrypted hidden bundle, pyproject.toml), unpacked in /autograder/source.
set -euo pipefail
SOURCE=${KATA_GS_SOURCE:-/autograder/source}
VENV=${KATA_GS_VENV:-/autograder/venv}

apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip gcc g++
python3 -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip
# dev extra: pytest-xdist for -n 2 (a crashed test process then fails one test, not the run).
"$VENV/bin/pip" install -e "$SOURCE[dev]"
