#!/usr/bin/env bash
# The prepared GPU check, for your own GPU runner: every CUDA path of the
# suite in minutes, a JSON and a Markdown summary, exit 1 on a failure or a
# step left (docs/gpu-runner.md; the code is tools/gpu_check/).
#   tools/gpu_check.sh                              # on the GPU; summary in $OUT or ./gpu-check/
#   tools/gpu_check.sh --plan call1 --budget-s 450  # half the steps, where a command's time is limited
#   tools/gpu_check.sh --device cpu                 # the CPU-runnable parts
#   tools/gpu_check.sh --help                       # every option
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# python (a venv's where one is active), else python3 (all a bare GPU image has).
python="${PYTHON:-$(command -v python || command -v python3)}"
# gnnperf from this checkout also where it is not installed (a copied tree).
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
# The wheel bundle (tools/gpu_wheels.sh), copied along to a runner that
# reaches no package index: installed into a scratch folder when what it
# holds is missing here.
wheels="${GNNPERF_WHEELS:-$root/.gpu-wheels}"
if compgen -G "$wheels/*.whl" >/dev/null &&
        ! "$python" -c 'import asv, asv_runner, pymetis' 2>/dev/null; then
    # A folder of this run's own: two checks at once must not install into one.
    site="$(mktemp -d "${TMPDIR:-/tmp}/gnnperf-gpu-site.XXXXXX")"
    # Built for one Python (tools/gpu_wheels.sh): elsewhere it may not
    # install, and the stack check then names what is missing.
    if "$python" -m pip install -q --upgrade --no-index --no-deps --no-compile \
            --find-links "$wheels" --target "$site" "$wheels"/*.whl; then
        export PYTHONPATH="$PYTHONPATH:$site"
        echo "gpu_check: the wheel bundle $wheels installed into $site"
    else
        echo "gpu_check: the wheel bundle $wheels does not install for $python; going on" \
             "without it" >&2
    fi
fi
# The package tools/gpu_check/, run by its path (its __main__.py).
exec "$python" "$here/gpu_check" "$@"
