import sys

from patchcast.cli import main

sys.exit(main())
