"""Run folders: what a training run leaves on disk, and the commands that make and use one.

A run folder holds a run's resolved configuration, its metrics, checkpoints and log
(`rundir`), the trainer state a resume needs (`trainer_state`) and the records of its
tests (`testing`). `run` opens one folder once and hands it to every command;
`runner` holds `sgps train`, `sgps test` and `sgps subgoals`; `memory` refuses sizes
that cannot fit before a folder is made; `archive` is the archive format, `packing`
packs one run into it (a comparison's packing, `sgps.experiments.packing`, uses it),
and `fork` starts a run from another's checkpoint. This package sits above
`sgps.training` (the loop and the methods it saves and resumes) and `sgps.execution`
(where a run's searches run).
"""
