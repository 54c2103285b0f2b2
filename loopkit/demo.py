"""``python -m loopkit.demo``: the old name of ``python -m loopkit.testing.demo``, kept for
recipes/github-actions/fan-out.yml and the workflows copied from it."""

import sys

from loopkit.testing.demo import main

if __name__ == "__main__":
    sys.exit(main())
