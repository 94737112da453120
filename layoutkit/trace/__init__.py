"""``layoutkit trace``: record what a program reads, as a workload file (issue 67).

:func:`~layoutkit.trace.run.trace` runs a command with the recorder
(:mod:`~layoutkit.trace.recorder`) in each of its Python processes and writes what they
read (:mod:`~layoutkit.trace.workload`); :func:`~layoutkit.trace.show.summary` says it
in words and :func:`~layoutkit.trace.show.plot` draws it.
"""
