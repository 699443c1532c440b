"""HIPS-ε (Kujanpää et al. 2023), the paper's subgoal-search baseline (spec/algorithms.md 8).

Unlike the other methods it does not learn in the Bootstrap loop: it learns offline, from
solution trajectories. Its method plug-in (`run.HIPS_PLUGIN`) declares so, and supplies
its hybrid search, so `sgps test`, `sgps.load` and `sgps report` use its runs as they use
the others'.

- `dataset`: solution trajectories from the exact solver (`sgps dataset`), written and
  read back with a replay check;
- `learner`: the offline training of its networks (`sgps.models.hips`) in sequence;
- `search`: the hybrid complete search's child generator and heuristic evaluator;
- `run`: `sgps train --algorithm hips-eps`, and the plug-in.
"""
