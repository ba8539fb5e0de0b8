#!/usr/bin/env bash
# The prepared GPU check: every CUDA path of the suite in minutes, a JSON and
# a Markdown summary, exit 1 on a failure or a step left (docs/gpu-runner.md).
#   tools/gpu_check.sh                              # on the GPU, summary in ./gpu-check/ (or $OUT)
#   tools/gpu_check.sh --plan call1 --budget-s 450  # the first call of a GPU window
#   tools/gpu_check.sh --device cpu                 # the CPU-runnable parts
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The GPU image's interpreter is python3; a venv's python where one is active.
python="${PYTHON:-$(command -v python || command -v python3)}"
exec "$python" "$here/gpu_check.py" "$@"
