"""The graphics workload family: `family.py` declares it (tasks, defaults), `footprint.py`
estimates it. Kept empty so that importing the declaration imports nothing else."""
