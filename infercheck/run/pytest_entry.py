"""A pytest symptom's entry point in a view (run/view.py), run as `python <root>/bin/test.py --out ...
-- PYTEST_ARGS`: the command line names no module of the harness."""

import sys

from infercheck.run.traced_pytest import main

if __name__ == "__main__":
    sys.exit(main())
