"""Where searches run: in this process, in local search processes, or on Ray actors.

`placement.search_pool` picks among them from a run's settings and the command's
executor: `pool` (local processes, each with a model copy, or around one `shared`
evaluator in the training process that batches every process's requests) and
`ray_pool` (Ray actors). Each is a `sgps.training.bootstrap.BatchSearcher`: the loop and
the test procedure hand it a batch of levels and get the same results, in the same
order, as a search in this process would give. Where the searches run never changes
a run's results.
"""
