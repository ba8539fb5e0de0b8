#!/usr/bin/env bash
# The prepared GPU check: every CUDA path of the suite in minutes, a JSON and
# a Markdown summary, exit 1 on a failure (docs/gpu-runner.md).
#   tools/gpu_check.sh                  # on the GPU, summary in ./gpu-check/
#   tools/gpu_check.sh --device cpu     # the CPU-runnable parts
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python}" "$here/gpu_check.py" "$@"
