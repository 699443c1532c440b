"""The flat baselines: one policy and/or heuristic network learned from solution paths.

- `samples`: (state, action, cost-to-go, Levin weight) rows from solved searches;
- `learner`: `FlatLearner` (the optimiser and its per-batch update) and `FlatMethod`
  (the `Method` the loop runs for `phs`, `levin` and `wastar`).
"""
