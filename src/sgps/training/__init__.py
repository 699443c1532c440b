"""Training: the Bootstrap loop's pieces (so far: budget schedules)."""

from sgps.training.budget import SCHEDULES, Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper

__all__ = ["SCHEDULES", "Budgets", "PassOutcome", "double", "get_schedule", "lts_cm", "lts_cm_paper"]
