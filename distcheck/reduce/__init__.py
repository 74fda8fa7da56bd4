"""Reduction: unit results become Jacobians, Jacobians become verdicts."""
