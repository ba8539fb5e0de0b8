#!/usr/bin/env bash
# The wheels a GPU runner that reaches no package index lacks for tools/gpu_check.sh, fetched
# here (where the package index is) for its image's CPython 3.12 on
# manylinux x86_64, into an ignored folder copied along with the tree
# (docs/gpu-runner.md):
#   tools/gpu_wheels.sh [DIR]           # default .gpu-wheels, copied along with the tree
#   tools/gpu_wheels.sh --check [DIR]   # also install them as the GPU machine will, into a
#                                       # python3.12 stand-in of its image, and import them
# On the GPU machine tools/gpu_check.sh installs them itself when asv, asv_runner
# or pymetis is missing; by hand (no package index there):
#   python3 -m pip install -q --no-index --no-deps --find-links DIR --target /tmp/gpu-site DIR/*.whl
#   export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
set -euo pipefail
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
dir="${1:-.gpu-wheels}"
python="${PYTHON:-$(command -v python3 || command -v python)}"

# What the image lacks, pinned (one version of each: a --no-deps install of
# two stops; raise them together): asv and what it imports on every run
# (asv_runner, json5, importlib-metadata and its lazy-importer, pympler for
# its memory benchmarks), and pymetis (the cluster variants). Left out, as the
# image has them: build, packaging, pyyaml, tabulate,
# typing-extensions, zipp, filelock; and virtualenv with its own dependencies
# (6 MiB): asv imports it only to build environments, and the check runs asv
# with --python=same.
wheels=(asv==0.6.6 asv_runner==0.3.2 json5==0.17.3 pympler==1.1 importlib-metadata==10.2.0
        lazy-importer==0.1.0 pymetis==2025.2.2)
# The image's own, for the --check stand-in only (never carried).
image=(packaging pyyaml tabulate build typing-extensions zipp filelock)
limit=$((64 * 1024 * 1024))  # the runner's limit on what is copied: the working tree and the wheels together

mkdir -p "$dir"
rm -f "$dir"/*.whl
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$dir" "${wheels[@]}"
bundle=$(du -cb "$dir"/*.whl | tail -1 | cut -f1)
tree=0
if git rev-parse --show-toplevel >/dev/null 2>&1; then
    # What travels besides: tracked and untracked-not-ignored files.
    tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) |
            xargs -0 du -cb 2>/dev/null | awk '$2 == "total" {s += $1} END {print s + 0}')
fi
echo "$(ls "$dir"/*.whl | wc -l) wheels in $dir: $((bundle / 1024)) KiB;" \
     "with the working tree ($((tree / 1024 / 1024)) MiB) $(((bundle + tree) / 1024 / 1024)) MiB" \
     "of the 64 MiB copy limit"
if [ $((bundle + tree)) -ge "$limit" ]; then
    echo "gpu_wheels: $dir and the working tree exceed 64 MiB; leave some wheels out" >&2
    exit 1
fi

if [ "$check" = 1 ]; then
    # The first CPython 3.12 that runs: $PYTHON312, python3.12, a pyenv one.
    py312=""
    for candidate in "${PYTHON312:-}" python3.12 \
            $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12 \
              2>/dev/null); do
        if [ -n "$candidate" ] && "$candidate" -c '' 2>/dev/null; then py312=$candidate; break; fi
    done
    [ -n "$py312" ] || { echo "gpu_wheels: --check needs python3.12 (or PYTHON312=...)" >&2; exit 2; }
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    "$py312" -m venv "$scratch/image"
    "$scratch/image/bin/python" -m pip install -q "${image[@]}"
    # The GPU machine's install: no index, nothing but the bundle.
    "$scratch/image/bin/python" -m pip install -q --no-index --no-deps --no-compile \
        --find-links "$dir" --target "$scratch/site" "$dir"/*.whl
    PYTHONPATH="$scratch/site" "$scratch/image/bin/python" -c '
import asv, asv_runner, pymetis, sys
print(f"python {sys.version.split()[0]}: asv {asv.__version__}, asv_runner, pymetis "
      f"{pymetis.version}: imported from the bundle alone")'
    # And asv runs from it as the check runs it: --python=same, spawned
    # benchmarks, results labelled with a commit.
    project="$scratch/project"
    mkdir -p "$project/benchmarks"
    echo '{"version": 1, "project": "p", "repo": ".", "branches": ["main"], "dvcs": "git",
           "environment_type": "virtualenv",
           "benchmark_dir": "benchmarks", "results_dir": "results", "env_dir": "env"}' \
        >"$project/asv.conf.json"
    printf 'def track_one():\n    return 1.0\n' >"$project/benchmarks/bench.py"
    touch "$project/benchmarks/__init__.py"
    (cd "$project" && git -c init.defaultBranch=main init -q && git add -A &&
     git -c user.name=gpu_wheels -c user.email=gpu_wheels@localhost commit -qm bundle)
    (cd "$project" && export PYTHONPATH="$scratch/site" HOME="$scratch" &&
     "$scratch/image/bin/python" -m asv machine --yes >/dev/null &&
     "$scratch/image/bin/python" -m asv run --quick --python=same --launch-method spawn \
         --set-commit-hash "$(git rev-parse HEAD)" >"$scratch/asv.log" 2>&1) ||
        { cat "$scratch/asv.log" >&2; echo "gpu_wheels: asv from the bundle did not run" >&2; exit 1; }
    grep -q "bench.track_one *1.0" "$scratch/asv.log" ||
        { cat "$scratch/asv.log" >&2; echo "gpu_wheels: asv gave no number" >&2; exit 1; }
    echo "asv run --python=same from the bundle: bench.track_one gave its number"
fi
