"""How a sweep that did not run to its end says so: its ``sweeper.status`` and its exit status.

Kept apart from :mod:`sweeper.run.preemption` (which imports Ray Tune) so that the driver can
name them before Tune is imported.
"""

#: ``sweeper.status`` of a sweep's run, and of its trials' runs, stopped by SIGTERM to be requeued.
PREEMPTED_STATUS = "PREEMPTED"
#: ``sweeper.status`` of a sweep's run, and of its trials' runs, stopped by Ctrl-C (SIGINT).
INTERRUPTED_STATUS = "INTERRUPTED"
#: Exit status of a sweep stopped by SIGTERM at its trials' checkpoints (``EX_TEMPFAIL``): requeue and resume it.
PREEMPTED_EXIT_STATUS = 75
#: Exit status of a sweep stopped by Ctrl-C: 128 + 2, as a shell reports a program that SIGINT ended.
INTERRUPTED_EXIT_STATUS = 130
