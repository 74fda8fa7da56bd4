"""Planning: a check becomes a plan of independent units (see planner.py) and stages."""
