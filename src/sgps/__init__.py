"""sgps: policy tree search (LevinTS, PHS*) guided by subgoal-conditioned policies.

An implementation of "Subgoal-Guided Policy Heuristic Search with Learned Subgoals"
(Tuero, Buro and Lelis, ICML 2025), its baselines, and its five benchmark domains.
"""

__version__ = "0.1.0"
