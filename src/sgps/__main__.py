import sys

from sgps.cli import main

sys.exit(main())
