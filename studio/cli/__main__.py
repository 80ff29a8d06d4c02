"""`python -m studio.cli ...`, the same as the `studio` command."""

import sys

from studio.cli import main

sys.exit(main())
