"""``python -m hospital_marl`` is the ``hospital-marl`` command.

The one upward import of the package (to the CLI above it): an entry point, never imported
by library code, and listed as the single ignored import in the import contract (pyproject.toml).
"""

import sys

from hospital_marl_cli import main

if __name__ == "__main__":  # not when a spawned worker re-imports this module
    sys.exit(main())
