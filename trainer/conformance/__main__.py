import sys

from trainer.conformance.cli import main

sys.exit(main())
