#!/usr/bin/env bash
# Create .venv (once) and install requirements.txt into it.
# If the system Python already has a CUDA build of torch, the venv sees it
# (--system-site-packages) and keeps it; otherwise torch is pinned first so
# pip does not pick a multi-GB build the machine cannot use.
# With --extras (make bench, make extras): install requirements-cuda-extras.txt (torchao, GemLite) into
# the existing venv, only where its torch is a CUDA build; each line with --no-deps (pip never replaces
# torch), then imported. One that fails is named and left out (the variants needing it are skipped);
# the script still succeeds. The outcome is written to $VENV/.extras.
set -euo pipefail
[[ ${1:-} == -h || ${1:-} == --help ]] && { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; }
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ "${1:-}" = --extras ]; then
  vpy="$VENV/bin/python"
  read -r torch_v cuda_v < <("$vpy" -c 'import torch; print(torch.__version__, torch.version.cuda or "-")' 2>/dev/null) || true
  if [ -z "${torch_v:-}" ] || [ "$cuda_v" = - ]; then
    why="torch ${torch_v:-(not importable)} is not a CUDA build"
    echo "extras: torchao and GemLite not installed ($why; they are CUDA-only)"
    echo "skipped: $why" > "$VENV/.extras"; exit 0
  fi
  : > "$VENV/.extras.tmp"
  while read -r req <&3; do
    req=${req%%#*}; req=${req%"${req##*[![:space:]]}"}
    [ -n "$req" ] || continue
    name=${req%%[=<>!~;[ ]*}
    echo "extras: installing $req (--no-deps: torch $torch_v stays)"
    if ! "$vpy" -m pip install -q --no-deps "$req"; then
      echo "warning: $req did not install (pip's error above); the variants that need $name are skipped, with the reason; retry: make extras"
      echo "failed: $req (pip)" >> "$VENV/.extras.tmp"
    elif ! err=$("$vpy" -c "import $name" 2>&1); then
      "$vpy" -m pip uninstall -q -y "$name" >/dev/null 2>&1 || true
      err=${err##*$'\n'}
      echo "warning: $req installed but does not import with torch $torch_v ($err); removed, so the variants that need $name are skipped, with the reason"
      echo "failed: $req (import: $err)" >> "$VENV/.extras.tmp"
    else
      echo "installed: $req" >> "$VENV/.extras.tmp"
    fi
  done 3< requirements-cuda-extras.txt
  mv "$VENV/.extras.tmp" "$VENV/.extras"
  exit 0
fi
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
# pip compiles each installed file to bytecode one at a time; compileall does the same on every core (on a 2-core
# host: torch in 30 s instead of 41 s). The bytecode is written here once: an environment that sets
# PYTHONDONTWRITEBYTECODE would otherwise compile torch again in every process.
if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  echo "installing $TORCH_SPEC"
  "$VENV/bin/python" -m pip install -q --no-compile "$TORCH_SPEC"
fi
"$VENV/bin/python" -m pip install -q --no-compile -r requirements.txt
"$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null || true
touch "$VENV/.ready"
