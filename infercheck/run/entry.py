"""The worker's entry point in a view (run/view.py), run as `python <root>/bin/main.py --job ... --out ...`:
the command line names no module of the harness."""

import sys

from infercheck.run.worker import main

if __name__ == "__main__":
    sys.exit(main())
