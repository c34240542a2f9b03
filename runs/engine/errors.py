"""Domain errors: refusals with a message a person can act on."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every refusal the engine makes."""


class UnknownWorkflow(EngineError):
    def __init__(self, name: str, known: list[str]) -> None:
        hint = f"; known workflows: {', '.join(known)}" if known else ""
        super().__init__(f"unknown workflow {name!r}{hint}")
        self.name = name


class UnknownVersion(EngineError):
    def __init__(self, name: str, version: int, known: list[int]) -> None:
        super().__init__(
            f"workflow {name!r} has no version {version}; known versions: "
            + ", ".join(str(v) for v in known)
        )
        self.name, self.version = name, version


class InvalidInput(EngineError):
    def __init__(self, problems: list[str], by_field: dict[str, list[str]] | None = None) -> None:
        super().__init__("invalid input: " + "; ".join(problems))
        self.problems = problems
        # The problems of each top-level input field, for a form to show beside it.
        self.by_field = by_field or {}


class AttemptFenced(EngineError):
    """The attempt no longer owns its step (declared crashed, lease expired): its
    finish must change nothing (DESIGN.md §7)."""


class InvalidSubmissionKey(EngineError):
    pass


class SubmissionKeyConflict(EngineError):
    """The key was used before for a different request: the first one stands."""

    def __init__(self, key: str, run_id: object) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used for a different request, which "
            f"created run {run_id}; use a new key for a new request"
        )
        self.key, self.run_id = key, run_id


class RunNotFound(EngineError):
    def __init__(self, run_id: object) -> None:
        super().__init__(f"no run with id {run_id}")
        self.run_id = run_id


class RunNotActive(EngineError):
    """The run already finished (succeeded, failed or cancelled)."""

    def __init__(self, run: object, doing: str = "cancelled") -> None:
        status = getattr(run, "status", "?")
        super().__init__(f"run {getattr(run, 'id', run)} is already {status}; it cannot be {doing}")
        self.run = run


class StepNotRetryable(EngineError):
    pass


class UnknownPolicy(EngineError):
    """No retention policy by that name (or it is disabled)."""


class UnknownSignal(EngineError):
    """No wait step of the run's workflow listens for this signal."""

    def __init__(self, run_id: object, name: str, known: list[str]) -> None:
        listens = ", ".join(repr(k) for k in known) if known else "no signal at all"
        super().__init__(
            f"run {run_id} does not wait for signal {name!r}; its workflow waits for {listens}"
        )
        self.name = name


class SignalNotAllowed(EngineError):
    """The actor may not send this signal: its wait names who may (operators only, by
    default), or it is an approval that must come from someone other than the run's
    submitter."""


class WaitFinished(EngineError):
    """Every wait of the run for this signal has ended (timed out, was skipped by its
    condition, or took its signal): a new one would be kept forever and never read."""

    def __init__(self, run_id: object, name: str, how: str) -> None:
        super().__init__(
            f"run {run_id} no longer waits for signal {name!r}: {how}; the signal was not sent"
        )
        self.name = name


class DuplicateSignal(EngineError):
    """A signal of this name was already received, and the wait takes only one."""

    def __init__(self, run_id: object, name: str, actor: str, when: object) -> None:
        super().__init__(
            f"run {run_id} already received signal {name!r} (from {actor} at {when}); "
            "its wait takes one signal of that name and refuses the next"
        )
        self.name = name
