"""π^SG: subgoal-guided policies learned from solved and failed searches (paper section 3).

- `clustering`: the cluster hierarchy of a failed search's graph (Louvain, eq. 7);
- `samples`: the pairs, segments and rows each network learns from (spec 4.3-4.4, 5);
- `learner`: `SubgoalLearner` (one update of the four networks per batch) and
  `SubgoalMethod` (the `Method` the loop runs for `phs-sg` and `levin-sg`);
- `view`: the K subgoals a trained generator proposes for a state (`sgps subgoals`).
"""
