"""Training: the Bootstrap loop and its pieces (budgets, samples, learners, run directories)."""

from sgps.training.bootstrap import Bootstrap, BootstrapConfig, LoopState, Method
from sgps.training.budget import SCHEDULES, Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper
from sgps.training.learner import FlatLearner, FlatMethod, LearnerConfig
from sgps.training.rundir import RunDirectory
from sgps.training.samples import PathSamples, solution_samples

__all__ = [
    "SCHEDULES",
    "Bootstrap",
    "BootstrapConfig",
    "Budgets",
    "FlatLearner",
    "FlatMethod",
    "LearnerConfig",
    "LoopState",
    "Method",
    "PassOutcome",
    "PathSamples",
    "RunDirectory",
    "double",
    "get_schedule",
    "lts_cm",
    "lts_cm_paper",
    "solution_samples",
]
