#!/usr/bin/env bash
# The prepared GPU check: every CUDA path of the suite in minutes, a JSON and
# a Markdown summary, exit 1 on a failure or a step left (docs/gpu-runner.md).
#   tools/gpu_check.sh                              # on the GPU; summary in $OUT or ./gpu-check/
#   tools/gpu_check.sh --plan call1 --budget-s 450  # the first call of a GPU window
#   tools/gpu_check.sh --device cpu                 # the CPU-runnable parts
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# The GPU image's interpreter is python3; a venv's python where one is active.
python="${PYTHON:-$(command -v python || command -v python3)}"
# gnnperf from this checkout also where it is not installed (a copied tree).
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
# The wheel bundle (tools/gpu_wheels.sh), carried where the machine reaches
# no package index: installed into a scratch folder when what it holds is
# missing here.
wheels="${GNNPERF_WHEELS:-$root/.gpu-wheels}"
if compgen -G "$wheels/*.whl" >/dev/null &&
        ! "$python" -c 'import asv, asv_runner, pymetis' 2>/dev/null; then
    # A folder of this run's own: two checks at once must not install into one.
    site="$(mktemp -d "${TMPDIR:-/tmp}/gnnperf-gpu-site.XXXXXX")"
    # Built for the GPU image's Python: elsewhere it may not install, and the
    # stack check then names what is missing.
    if "$python" -m pip install -q --upgrade --no-index --no-deps --no-compile \
            --find-links "$wheels" --target "$site" "$wheels"/*.whl; then
        export PYTHONPATH="$PYTHONPATH:$site"
        echo "gpu_check: the wheel bundle $wheels installed into $site"
    else
        echo "gpu_check: the wheel bundle $wheels does not install for $python; going on" \
             "without it" >&2
    fi
fi
exec "$python" "$here/gpu_check.py" "$@"
