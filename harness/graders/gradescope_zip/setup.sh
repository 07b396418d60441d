#!/usr/bin/env bash
# Gradescope autograder setup: runs once when the autograder image is built (choose the Ubuntu
# 24.04 base image: its Python is 3.12; the harness needs 3.11 or later).
# The uploaded zip holds this file, run_autograder, and the course repository (harness/, katas/,
# the encrypted hidden bundle, pyproject.toml), unpacked in /autograder/source.
set -euo pipefail
SOURCE=${KATA_GS_SOURCE:-/autograder/source}
VENV=${KATA_GS_VENV:-/autograder/venv}

if [ "${KATA_INSTALL_DRY_RUN:-}" != 1 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip
fi
# The system packages and pip extras the course's katas need ([cuda]: nvcc, ptxas, cuobjdump),
# from the manifests, through the one capability map (harness/capabilities.py).
bash "$SOURCE/harness/graders/install.sh" "$SOURCE" "$VENV"
