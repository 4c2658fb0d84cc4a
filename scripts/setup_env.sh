#!/usr/bin/env bash
# Create .venv (once) and install requirements.txt into it.
# If the system Python already has a CUDA build of torch, the venv sees it
# (--system-site-packages) and keeps it; otherwise torch is pinned first so
# pip does not pick a multi-GB build the machine cannot use.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "error: Python 3.10+ is needed ($PY is $("$PY" --version 2>&1))" >&2; exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
  if "$PY" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' 2>/dev/null; then
    echo "using the system's CUDA build of torch ($("$PY" -c 'import torch; print(torch.__version__)'))"
    "$PY" -m venv --system-site-packages "$VENV"
  else
    "$PY" -m venv "$VENV"
  fi
fi
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  echo "installing $TORCH_SPEC"
  "$VENV/bin/python" -m pip install -q "$TORCH_SPEC"
fi
"$VENV/bin/python" -m pip install -q -r requirements.txt
touch "$VENV/.ready"
