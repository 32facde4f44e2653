"""Offline RL on the hospital: Minari datasets recorded from graded behaviours
(:mod:`training.offline.datasets`, :mod:`training.offline.behaviours`), off-policy evaluation
(:mod:`training.offline.ope`) and offline learners (:mod:`training.offline.learners`).

The training layer never grades: the CLI (``hospital-marl datasets ...``) grades the behaviours and
target policies with :mod:`grading` and passes the numbers in (the package's import contract).
"""
