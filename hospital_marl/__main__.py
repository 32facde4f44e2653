"""``python -m hospital_marl`` is the ``hospital-marl`` command."""

import sys

from hospital_marl.cli import main

sys.exit(main())
