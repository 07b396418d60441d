#!/usr/bin/env bash
# Install what a grader needs to grade the katas of the course at SOURCE: the system packages
# and pip extras their manifests ask for (harness/capabilities.py holds the one map), then the
# harness with those extras into VENV (or, with VENV "-", into the running Python's environment,
# as on a GitHub-hosted runner). Used by Gradescope's setup.sh, the PrairieLearn image's
# Dockerfile and the GitHub workflow.
#
#   install.sh SOURCE VENV
#
# KATA_KATAS=a,b limits it to some katas; KATA_SETUP_PYTHON names the Python (>= 3.11) to use;
# KATA_INSTALL_DRY_RUN=1 prints the commands instead of running them.
set -euo pipefail
SOURCE=$(cd "$1" && pwd)
VENV=${2:--}
PY=${KATA_SETUP_PYTHON:-python3}

run() {
  if [ "${KATA_INSTALL_DRY_RUN:-}" = 1 ]; then echo "+ $*"; else "$@"; fi
}
needs() {
  PYTHONPATH="$SOURCE" "$PY" -m harness.capabilities "$1" "$SOURCE" --katas "${KATA_KATAS:-}"
}

APT=$(needs apt)
EXTRAS=$(needs extras)
NPM=$(needs npm)
if command -v node >/dev/null; then
  # A node of the image's own (NodeSource's, GitHub's runners') stays: Debian's npm conflicts
  # with NodeSource's nodejs, and the probe checks the version.
  APT=$(printf '%s\n' $APT | grep -vxE 'nodejs|npm' | paste -sd' ' - || true)
fi
echo "gpu-katas: the katas need apt packages [${APT}], pip extras [${EXTRAS}] and npm packages [${NPM}]"
PYTHONPATH="$SOURCE" "$PY" -m harness.capabilities needs "$SOURCE" --katas "${KATA_KATAS:-}"

if [ -n "$APT" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if command -v apt-get >/dev/null && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
    run $SUDO apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    run $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $APT
  else
    echo "gpu-katas: cannot install $APT here (no apt-get, or not root): the tasks that need" \
      "them will make graded runs an error until the image has them" >&2
  fi
fi

if [ "$VENV" = "-" ]; then
  PIP=("$PY" -m pip)
else
  run "$PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip)
fi
run "${PIP[@]}" install -q --upgrade pip
run "${PIP[@]}" install -q -e "$SOURCE${EXTRAS:+[$EXTRAS]}"

if [ -n "$NPM" ]; then
  # The versions the course's package-lock.json pins, into SOURCE/node_modules (the probe looks
  # there for tsc); only the npm registry is contacted.
  if command -v npm >/dev/null || [ "${KATA_INSTALL_DRY_RUN:-}" = 1 ]; then
    run npm ci --prefix "$SOURCE" --no-audit --no-fund --loglevel=error
  else
    echo "gpu-katas: npm is missing, so $NPM cannot be installed: the tasks that need them" \
      "will make graded runs an error until the image has them" >&2
  fi
fi
