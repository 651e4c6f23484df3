"""One trial: its state machine, environment, verifier and gates, and `harness run`."""

from harness.paths import make_trial_id
from harness.trial.trial import _EXECUTOR, PreWindowError, Trial, run_async

__all__ = ["_EXECUTOR", "PreWindowError", "Trial", "make_trial_id", "run_async"]
