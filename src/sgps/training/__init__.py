"""Training: the Bootstrap loop's pieces (budget schedules, solution samples, the flat learner)."""

from sgps.training.budget import SCHEDULES, Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper
from sgps.training.learner import FlatLearner, LearnerConfig
from sgps.training.samples import PathSamples, solution_samples

__all__ = [
    "SCHEDULES",
    "Budgets",
    "FlatLearner",
    "LearnerConfig",
    "PassOutcome",
    "PathSamples",
    "double",
    "get_schedule",
    "lts_cm",
    "lts_cm_paper",
    "solution_samples",
]
