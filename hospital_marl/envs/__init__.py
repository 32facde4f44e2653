"""Thin views over the simulation core: AEC, parallel, composed (Discrete(39)) and team envs."""
