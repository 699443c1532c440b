"""HIPS-ε (Kujanpää et al. 2023), the paper's subgoal-search baseline (spec/algorithms.md 8).

Unlike the other methods it is not a plug-in of the Bootstrap loop: it learns offline,
from solution trajectories, and is then tested like the others.

- `dataset`: solution trajectories from the exact solver (`sgps dataset`), written and
  read back with a replay check;
- `learner`: the offline training of its networks (`sgps.models.hips`) in sequence;
- `search`: the hybrid complete search's child generator and heuristic evaluator;
- `run`: `sgps train --algorithm hips-eps` and `sgps test` of its run directories.
"""
