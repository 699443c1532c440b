"""The learning methods of the Bootstrap loop, one package each.

A method is what the loop (`sgps.training.bootstrap`) plugs in: the search it runs,
the evaluator over its current model, and what it learns from a batch of search
results (the `Method` protocol). Everything else (shuffling, budgets, validation,
metrics, checkpoints, resuming, worker processes) belongs to the loop.

- `flat`: the flat baselines PHS*(π), LevinTS(π) and WA*(h): one network trained on
  the solution paths of solved searches (spec/algorithms.md 2, 6.3).
- `subgoal`: PHS*(π^SG) and LevinTS(π^SG): the VQ-VAE subgoal generator, π_hi, π_low
  and π_unc trained from solved paths *and* the search trees of failed searches
  (paper section 3; spec/algorithms.md 3-5).

Every method also has a plug-in (`plugin.MethodPlugin`, listed in
`sgps.training.plugins.PLUGINS`) that says what it supports (the Bootstrap loop, subgoal
pictures) and supplies a trained run's search; `hips` is HIPS-ε, which learns offline.

Adding a method: write a package here with a class that satisfies `Method` (its
learner, its samples and their helpers beside it), then give `sgps.training.setup.METHODS`
an entry that builds it from a `TrainConfig` and list its algorithms in a plug-in; its
settings, if any, get a section in `sgps.training.config` and rules in
`sgps.training.schema`.
"""
