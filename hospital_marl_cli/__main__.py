"""``python -m hospital_marl_cli`` is the ``hospital-marl`` command."""

import sys

from hospital_marl_cli import main

sys.exit(main())
