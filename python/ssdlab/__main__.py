"""``python -m ssdlab``: the same command line as the ``ssdlab`` script."""

import sys

from ssdlab.cli import main

sys.exit(main())
