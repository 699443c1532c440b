"""Training: the Bootstrap loop, and the learning methods it runs as plug-ins.

The loop and what it owns: `bootstrap` (the search-and-learn loop, the `Method`
protocol, and the `RunRecord` it writes its progress and checkpoints into), `budget`
(budget schedules), `solution_memory` (earlier solutions learnt again), `randomness`,
`tensorboard` (following a run as it trains), `config` / `schema` (settings and their
rules), `setup` (building a run's method from its config, and the defaults picked by
device), `plugins` (the method plug-ins, by algorithm). The methods: `methods/flat`
(PHS*(π), LevinTS(π), WA*), `methods/subgoal` (PHS*(π^SG), LevinTS(π^SG)) and
`methods/hips` (HIPS-ε, which learns offline); see `sgps.training.methods`.

What a run leaves on disk, and the commands that train and test one, are `sgps.runs`;
where the searches run (worker processes, Ray actors) is `sgps.execution`.
"""

from sgps.training.bootstrap import Bootstrap, BootstrapConfig, LoopState, Method
from sgps.training.budget import SCHEDULES, Budgets, PassOutcome, double, get_schedule, lts_cm, lts_cm_paper
from sgps.training.methods.flat.learner import FlatLearner, FlatMethod, LearnerConfig
from sgps.training.methods.flat.samples import PathSamples, solution_samples

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
    "double",
    "get_schedule",
    "lts_cm",
    "lts_cm_paper",
    "solution_samples",
]
