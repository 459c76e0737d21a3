"""Workload families: what a job holds and moves, one folder per family.

- `family.py`: how a family declares itself (`Family`); `registry.py`: the explicit list of
  families, the table the scenario validates against;
- `<family>/family.py`: each family's declaration (tasks, defaults); `<family>/footprint.py`:
  its footprint;
- `base.py`: the `Footprint` every family returns; `dispatch.py`: scenario -> footprint.

Kept free of imports: the scenario imports the declarations, which must not pull in the
footprints (a later stage) through this package's `__init__`.
"""
