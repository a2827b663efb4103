import sys

from prefrl.cli import main

sys.exit(main())
