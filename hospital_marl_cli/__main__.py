"""``python -m hospital_marl_cli`` is the ``hospital-marl`` command."""

import sys

from hospital_marl_cli import main

if __name__ == "__main__":  # not when a spawned worker re-imports this module
    sys.exit(main())
