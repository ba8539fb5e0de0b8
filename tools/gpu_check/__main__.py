"""``python tools/gpu_check``: the check's command line, as tools/gpu_check.sh
runs it (and as the stack step runs its own report)."""
import sys
from pathlib import Path

if __package__:  # python -m gpu_check (from tools/) or -m tools.gpu_check
    from .cli import main
else:
    # Run by path, Python puts this folder on sys.path; the package imports
    # from its parent, tools/, as it did when the check was one script there.
    sys.path[0] = str(Path(__file__).resolve().parents[1])
    from gpu_check.cli import main

sys.exit(main())
