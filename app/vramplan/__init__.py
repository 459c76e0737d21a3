"""vramplan: GPU memory capacity planner.

The core (units -> hardware -> catalog -> scenario -> workloads -> estimate -> advisor -> sweep)
is plain Python + numpy; widgets, altair and torch are imported only by the layers that need them.
"""
__version__ = "0.1.0"
