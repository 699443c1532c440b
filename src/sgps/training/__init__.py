"""Training: the Bootstrap loop, and the learning methods it runs as plug-ins.

The loop and what it owns: `bootstrap` (the search-and-learn loop and the `Method`
protocol), `budget` (budget schedules), `config` / `schema` (settings and their rules),
`rundir` (run directories), `pool` (worker processes), `setup` (building a run's method
from its config), `runner` (`sgps train` / `test` / `subgoals`), `testing` (the test
procedure). The methods: `methods/flat` (PHS*(π), LevinTS(π), WA*) and
`methods/subgoal` (PHS*(π^SG), LevinTS(π^SG)); see `sgps.training.methods`.
"""

from sgps.training.bootstrap import Bootstrap, BootstrapConfig, LoopState, Method
from sgps.training.budget import SCHEDULES, Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper
from sgps.training.methods.flat.learner import FlatLearner, FlatMethod, LearnerConfig
from sgps.training.methods.flat.samples import PathSamples, solution_samples
from sgps.training.rundir import RunDirectory

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
