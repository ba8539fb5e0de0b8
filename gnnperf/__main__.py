import sys

from gnnperf.cli import main

sys.exit(main())
