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
    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid input: " + "; ".join(problems))
        self.problems = problems


class AttemptFenced(EngineError):
    """The attempt no longer owns its step (declared crashed, lease expired): its
    finish must change nothing (DESIGN.md §7)."""
