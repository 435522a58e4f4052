"""Script mode: the trainer entrypoint wraps a program of the user's own.

Every replica runs ``spec.model.command`` (or its replica type's ``template.spec.command``/``args``)
with ``TF_CONFIG`` and the environment in :mod:`.env`. The wrapper (:mod:`.wrapper`) supervises it:
signals are forwarded, its output is streamed and its tail kept for the termination message, exit
codes are passed on to the failure policy. On the chief it also follows the checkpoint directory
(:mod:`.follow`) and serves the usual progress endpoint.

A program may report progress directly (optional; TF-free)::

    from tfps_trainer.script import report
    report(step=step, loss=float(loss))
"""

from .progress_file import report

__all__ = ["report"]
