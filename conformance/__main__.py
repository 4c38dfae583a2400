import sys

from knowspec.conformance.cli import main

sys.exit(main())
