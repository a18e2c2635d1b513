"""`python -m logbroker` is the `logbroker` command."""

import sys

from api.node import main  # the composition root: the one import of a layer above

sys.exit(main())
