"""python -m tgc_worker: serve the JSON-lines protocol on stdin/stdout until EOF."""

import sys

from .server import main

sys.exit(main())
