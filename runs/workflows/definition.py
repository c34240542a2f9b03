"""The workflow definition API: named, versioned workflows made of steps that declare
their effect kind (docs/architecture.md#effect-kinds), their dependencies and their retry policy.

    wf = Workflow("charge-payment", version=1, input={"amount": int})

    @wf.step(kind=IDEMPOTENT)
    def charge(ctx: Context) -> dict:
        return payments.charge(ctx.input["amount"], idempotency_key=ctx.idempotency_key)

Definitions are plain data checked when they are declared, so a mistake in a
workflow fails at import time, not in the middle of a run. The input a workflow
declares is checked, validated and described by inputs.py; what a step's function
receives while it runs (its Context) is context.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from runs.states import EffectKind

from .errors import WorkflowDefinitionError
from .inputs import DeclaredInput, Field, InputType
from .schedules import check_schedule_fields
from .search import bound_search_ints, check_search_fields, search_keys

PURE = EffectKind.PURE
TRANSACTIONAL = EffectKind.TRANSACTIONAL
IDEMPOTENT = EffectKind.IDEMPOTENT
GUARDED = EffectKind.GUARDED

# When to use each kind, for the refusal of a step that names no kind or a wrong one.
# There is deliberately no default: a forgotten kind= used to make a step `pure`, which
# the engine retries freely, so an effect that must not repeat could repeat silently.
KINDS_HELP = "\n".join(
    f"  {kind.value:<13}  {when}"
    for kind, when in (
        (PURE, "no external effect (compute, read): retried freely"),
        (
            TRANSACTIONAL,
            "writes only to this database: effect and claim commit in one transaction, "
            "exactly once",
        ),
        (
            IDEMPOTENT,
            "calls a system that dedupes by ctx.idempotency_key: retried with the same key",
        ),
        (
            GUARDED,
            "an irreversible external effect with no idempotency: never repeated blindly, "
            "an unknown outcome goes to an operator",
        ),
    )
)


class NotApplied(Exception):
    """Raised by a guarded step that KNOWS its effect did not happen, so a retry is safe.

    Any other exception from a guarded step leaves its claim unresolved.
    """


@dataclass(frozen=True)
class ProbeResult:
    """What a probe (a read-only check of the external system) found out about an
    unresolved claim's effect: `applied` (with the result and evidence), `not_applied`,
    or `unknown` (left for an operator)."""

    outcome: str
    result: Any = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def applied(cls, result: Any = None, **evidence: Any) -> ProbeResult:
        return cls("applied", result, evidence)

    @classmethod
    def not_applied(cls, **evidence: Any) -> ProbeResult:
        return cls("not_applied", None, evidence)

    @classmethod
    def unknown(cls, reason: str, **evidence: Any) -> ProbeResult:
        return cls("unknown", None, {"reason": reason, **evidence})


@dataclass(frozen=True)
class Retry:
    """Retry policy: up to `max_attempts` attempts in all, waiting
    min(max_delay, base_delay * 2**(n-1)) between them, scaled by a random factor in
    [0.5, 1.0] when `jitter` is on so that failed steps do not retry in lockstep."""

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 300.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise WorkflowDefinitionError("Retry.max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise WorkflowDefinitionError("Retry delays must not be negative")

    def delay(self, failed_attempts: int) -> float:
        raw = min(self.max_delay, self.base_delay * (2 ** max(0, failed_attempts - 1)))
        return float(raw * random.uniform(0.5, 1.0) if self.jitter else raw)


# Step.name is varchar(100), and runs/engine/core/keys.py bounds map item keys so that a
# claim key built from a name this long still fits Claim.key.
STEP_NAME_MAX = 100

ON_TIMEOUT = ("fail", "continue")
ON_DUPLICATE = ("refuse", "queue")
# The roles that may be allowed to send a signal (viewers only read).
SIGNALLING_ROLES = ("operators", "submitters")


@dataclass(frozen=True)
class WaitSpec:
    """What a wait or sleep step waits for (runs/engine/policies/waits.py).

    A wait (`signal` set) ends when a signal of that name is consumed, or when
    `timeout` passes: then `on_timeout="fail"` fails the step (and the run),
    `"continue"` succeeds it with `{"timed_out": True}`. A sleep (`signal` None) ends
    at `deadline(ctx)`, a datetime or a timedelta from now. Both are timed on the
    database's clock and hold no worker while they wait."""

    signal: str | None = None
    timeout: timedelta | None = None
    on_timeout: str = "fail"
    on_duplicate: str = "refuse"
    deadline: Callable[..., datetime | timedelta] | None = None
    # Who may send the signal (roles: runs/roles.py), and whether it must come from
    # someone other than the run's submitter (an approval: four eyes).
    signalled_by: tuple[str, ...] = ("operators",)
    four_eyes: bool = False


@dataclass
class StepDef:
    name: str
    fn: Callable[..., Any]
    kind: EffectKind
    after: tuple[str, ...]
    retry: Retry
    lease_seconds: float | None = None
    # Map steps: the step whose result (a list) is mapped, and the batch size (an int,
    # or the name of an input field that holds it).
    over: str | None = None
    batch_size: int | str | None = None
    # Map steps: names each item (its claim key); None for the item's canonical JSON.
    key: Callable[[Any], Any] | None = None
    # Include a digest of the step's input in its idempotency key
    # (docs/architecture.md#claims-and-keys).
    key_includes_input: bool = False
    probe: Callable[..., Any] | None = None
    verify: Callable[[Any], bool] | None = None
    # Authoring: a condition (`when(ctx) -> bool`, false: skipped), a wait or
    # sleep, the map step whose per-item results ctx.collected holds, and the name of
    # the compensation that undoes this step's effect when the run is cancelled or fails.
    when: Callable[..., bool] | None = None
    wait: WaitSpec | None = None
    collect: str | None = None
    compensate: str | None = None

    @property
    def is_map(self) -> bool:
        return self.over is not None

    @property
    def is_wait(self) -> bool:
        return self.wait is not None

    def batch_size_for(self, run_input: Mapping[str, Any]) -> int:
        size = run_input[self.batch_size] if isinstance(self.batch_size, str) else self.batch_size
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"step {self.name!r}: batch size must be a positive integer")
        return size


@dataclass(frozen=True)
class ScheduleDef:
    """A schedule declared in code (`wf.schedule(...)`): one run per cron tick. Its row
    in runs.Schedule is created or updated from this declaration
    (runs/engine/policies/schedules.py); the admin may pause it, the code owns its cron
    and input."""

    name: str
    workflow: str
    version: int
    cron: str
    timezone: str
    missed: str
    max_catch_up: int
    input: Mapping[str, Any] | None
    # Called with the tick (an aware datetime) to compute the run's input.
    input_fn: Callable[[Any], Mapping[str, Any]] | None = None

    def input_for(self, tick: Any) -> dict[str, Any]:
        return dict(self.input_fn(tick) if self.input_fn else (self.input or {}))


@dataclass
class Workflow:
    """A named, versioned workflow. Steps run in declaration order unless they name
    their dependencies with `after=`."""

    name: str
    version: int = 1
    # field name -> a type (inputs.py says which) or a Field; or a pydantic model
    input: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    # Optional, for `manage.py crashcheck`: count the external effects a run made
    # (effects(run_id) -> int) and how many a correct run makes (expected_effects(input)).
    effects: Callable[[str], int] | None = None
    expected_effects: Callable[[dict[str, Any]], int] | None = None
    steps: dict[str, StepDef] = field(default_factory=dict)
    # Declared with @wf.compensation: run only to undo a completed step (compensate=).
    compensations: dict[str, StepDef] = field(default_factory=dict)
    # Input fields a run is found by (search.py, docs/authoring.md#search-fields):
    # `search=("change_id",)` finds the run of change 301 in the runs list and the API.
    search: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.version, int) or self.version < 1:
            raise WorkflowDefinitionError("a workflow needs a name and a positive int version")
        self.schedules: list[ScheduleDef] = []
        self.declared_input = DeclaredInput(self.input, f"workflow {self.name!r} v{self.version}")
        if self.declared_input.model is not None:
            self.input = {}
        self.search = check_search_fields(
            self.search, self.declared_input, f"workflow {self.name!r} v{self.version}"
        )
        bound_search_ints(self.search, self.declared_input)

    # The declared input (inputs.py): its fields, their parsed types and defaults, or
    # the pydantic model that stands instead of them.
    @property
    def fields(self) -> dict[str, Field]:
        return self.declared_input.fields

    @property
    def types(self) -> dict[str, InputType]:
        return self.declared_input.types

    @property
    def defaults(self) -> dict[str, Any]:
        return self.declared_input.defaults

    @property
    def model(self) -> Any:
        return self.declared_input.model

    # -- declaring steps --------------------------------------------------------
    def step(
        self,
        *,
        kind: EffectKind | str | None = None,
        after: list[str] | tuple[str, ...] | None = None,
        retry: Retry | None = None,
        name: str | None = None,
        lease_seconds: float | None = None,
        key_includes_input: bool = False,
        probe: Callable[..., Any] | None = None,
        verify: Callable[[Any], bool] | None = None,
        when: Callable[..., bool] | None = None,
        collect: str | None = None,
        compensate: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a step: `fn(ctx) -> result` (the result must be JSON-serializable).
        `kind` is required: it decides what the engine may do on retry and on crash.

        `when(ctx) -> bool`: evaluated when the step's dependencies are done; false
        skips the step (status `skipped`, result None) and its dependents proceed.
        `collect="<map step>"`: ctx.collected iterates that map step's per-item results
        in item order (the map step becomes a dependency). `compensate="<name>"`: the
        compensation (declared before with `@wf.compensation`) that undoes this step's
        effect if the run is cancelled or fails after the step succeeded."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            step_name = name or fn.__name__
            deps = self._deps(after)
            if collect is not None:
                if collect not in self.steps or not self.steps[collect].is_map:
                    raise WorkflowDefinitionError(
                        f"{self.name}: step {step_name!r} collects {collect!r}, which is not "
                        "a map step declared before it"
                    )
                if collect not in deps:
                    deps = (*deps, collect)
            if compensate is not None and compensate not in self.compensations:
                raise WorkflowDefinitionError(
                    f"{self.name}: step {step_name!r} names compensation {compensate!r}, "
                    "which is not declared before it with @wf.compensation(kind=...)"
                )
            if compensate is not None and any(
                s.compensate == compensate for s in self.steps.values()
            ):
                raise WorkflowDefinitionError(
                    f"{self.name}: compensation {compensate!r} already undoes another step; "
                    "declare one compensation per step (each is a step with its own claim)"
                )
            self._add(
                StepDef(
                    name=step_name,
                    fn=fn,
                    kind=self._kind(kind, step_name),
                    after=deps,
                    retry=retry or Retry(),
                    lease_seconds=lease_seconds,
                    key_includes_input=key_includes_input,
                    probe=probe,
                    verify=verify,
                    when=when,
                    collect=collect,
                    compensate=compensate,
                )
            )
            return fn

        return register

    def compensation(
        self,
        *,
        kind: EffectKind | str | None = None,
        retry: Retry | None = None,
        name: str | None = None,
        lease_seconds: float | None = None,
        probe: Callable[..., Any] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a compensation: `fn(ctx) -> result`, run as a step of its own (with
        its own effect kind, claim and retries) only when a run that completed the step
        naming it (`compensate=`) is cancelled or fails. It is not part of the plan
        otherwise. ctx.results holds the run's results, the compensated step's too."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            comp_name = name or fn.__name__
            if comp_name in self.steps or comp_name in self.compensations:
                raise WorkflowDefinitionError(f"{self.name}: duplicate step name {comp_name!r}")
            self.compensations[comp_name] = StepDef(
                name=comp_name,
                fn=fn,
                kind=self._kind(kind, comp_name),
                after=(),
                retry=retry or Retry(),
                lease_seconds=lease_seconds,
                probe=probe,
            )
            return fn

        return register

    def wait(
        self,
        *,
        signal: str,
        timeout: timedelta | None = None,
        on_timeout: str = "fail",
        on_duplicate: str = "refuse",
        after: list[str] | tuple[str, ...] | None = None,
        name: str | None = None,
        when: Callable[..., bool] | None = None,
        signalled_by: tuple[str, ...] | list[str] = ("operators",),
        four_eyes: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a step that waits for the signal `signal` (engine.send_signal). Its
        result is `{"payload": …, "actor": …, "timed_out": False}`, or
        `{"timed_out": True}` after `timeout` with `on_timeout="continue"`
        (`"fail"`: the step and the run fail). A signal sent before the run reaches
        the wait is kept for it; a second signal of the same name is refused
        (`on_duplicate="refuse"`) or kept in order for a later wait (`"queue"`).
        `signalled_by`: the roles that may send it, operators only by default; a
        wait that a service account may signal says `("operators", "submitters")`.
        `four_eyes=True`: an approval, which must come from someone other than the
        principal that submitted the run.
        The decorated function only names the step: it is not called."""
        if not isinstance(signal, str) or not signal or len(signal) > STEP_NAME_MAX:
            raise WorkflowDefinitionError(f"{self.name}: wait needs a signal name (a string)")
        if on_timeout not in ON_TIMEOUT:
            raise WorkflowDefinitionError(
                f"{self.name}: on_timeout must be one of {', '.join(ON_TIMEOUT)}, "
                f"not {on_timeout!r}"
            )
        if on_duplicate not in ON_DUPLICATE:
            raise WorkflowDefinitionError(
                f"{self.name}: on_duplicate must be one of {', '.join(ON_DUPLICATE)}, "
                f"not {on_duplicate!r}"
            )
        if timeout is not None and (not isinstance(timeout, timedelta) or timeout <= timedelta(0)):
            raise WorkflowDefinitionError(f"{self.name}: timeout must be a positive timedelta")
        roles = tuple(signalled_by)
        unknown = [r for r in roles if r not in SIGNALLING_ROLES]
        if not roles or unknown:
            raise WorkflowDefinitionError(
                f"{self.name}: signalled_by takes roles among {', '.join(SIGNALLING_ROLES)}, "
                f"not {list(roles)!r}"
            )
        for other in self.steps.values():
            same = other.wait is not None and other.wait.signal == signal
            if same and other.wait is not None and other.wait.on_duplicate != on_duplicate:
                raise WorkflowDefinitionError(
                    f"{self.name}: waits for signal {signal!r} disagree on on_duplicate"
                )
            if (
                same
                and other.wait is not None
                and (other.wait.signalled_by != roles or other.wait.four_eyes != four_eyes)
            ):
                raise WorkflowDefinitionError(
                    f"{self.name}: waits for signal {signal!r} disagree on who may send it"
                )
        spec = WaitSpec(
            signal=signal,
            timeout=timeout,
            on_timeout=on_timeout,
            on_duplicate=on_duplicate,
            signalled_by=roles,
            four_eyes=bool(four_eyes),
        )
        return self._wait_step(spec, after=after, name=name, when=when)

    def sleep(
        self,
        *,
        until: Callable[..., datetime] | None = None,
        for_: Callable[..., timedelta] | None = None,
        after: list[str] | tuple[str, ...] | None = None,
        name: str | None = None,
        when: Callable[..., bool] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a durable sleep: until `until(ctx)` (an aware datetime) or for
        `for_(ctx)` (a timedelta), computed from the input or earlier results when the
        step is reached; without either, the decorated function itself returns the
        datetime or timedelta. Its result is `{"slept_until": <ISO time>}`."""
        if until is not None and for_ is not None:
            raise WorkflowDefinitionError(f"{self.name}: sleep takes until= or for_=, not both")
        deadline = until or for_
        return self._wait_step(WaitSpec(deadline=deadline), after=after, name=name, when=when)

    def _wait_step(
        self,
        spec: WaitSpec,
        *,
        after: list[str] | tuple[str, ...] | None,
        name: str | None,
        when: Callable[..., bool] | None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            step_name = name or fn.__name__
            if spec.signal is None and spec.deadline is None:
                final = WaitSpec(deadline=fn)
            else:
                final = spec
            self._add(
                StepDef(
                    name=step_name,
                    fn=fn,
                    kind=PURE,  # waiting has no external effect
                    after=self._deps(after),
                    retry=Retry(max_attempts=1),
                    when=when,
                    wait=final,
                )
            )
            return fn

        return register

    def map_step(
        self,
        *,
        over: str,
        batch_size: int | str,
        kind: EffectKind | str | None = None,
        after: list[str] | tuple[str, ...] | None = None,
        retry: Retry | None = None,
        name: str | None = None,
        lease_seconds: float | None = None,
        key: Callable[[Any], Any] | None = None,
        when: Callable[..., bool] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Declare a map step: `fn(ctx, item)` is called once per item of the list that
        step `over` returned, in batches of `batch_size`. Each item is its own logical
        invocation with its own claim, so a crash loses at most the item in flight.
        `kind` is required (transactional or idempotent).

        Each item needs a key of its own, unique in its list: by default the item's
        canonical JSON (so `1` and `"1"` differ), or `key(item)` as a string, e.g.
        `key=lambda record: record["id"]`; a key past 128 characters is replaced by its
        digest. A list in which two items share a key fails the map step."""
        if over not in self.steps:
            raise WorkflowDefinitionError(f"map step over unknown step {over!r}")

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            step_name = name or fn.__name__
            effect_kind = self._kind(kind, step_name)
            if effect_kind == GUARDED:
                raise WorkflowDefinitionError(
                    "guarded map steps are not supported: declare one guarded step per effect"
                )
            deps = self._deps(after)
            if over not in deps:
                deps = (*deps, over)
            self._add(
                StepDef(
                    name=step_name,
                    fn=fn,
                    kind=effect_kind,
                    after=deps,
                    retry=retry or Retry(),
                    lease_seconds=lease_seconds,
                    over=over,
                    batch_size=batch_size,
                    key=key,
                    when=when,
                )
            )
            return fn

        return register

    def _kind(self, kind: EffectKind | str | None, step_name: str) -> EffectKind:
        where = f"workflow {self.name!r} v{self.version}, step {step_name!r}"
        if kind is None:
            raise WorkflowDefinitionError(
                f"{where}: kind= is required; say what the step does outside itself:\n" + KINDS_HELP
            )
        try:
            return EffectKind(kind)
        except ValueError:
            raise WorkflowDefinitionError(
                f"{where}: unknown kind {kind!r}; the kinds are:\n{KINDS_HELP}"
            ) from None

    def _deps(self, after: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
        if after is None:  # linear by default: after the previously declared step
            return (next(reversed(self.steps)),) if self.steps else ()
        for dep in after:
            if dep not in self.steps:
                raise WorkflowDefinitionError(
                    f"{self.name}: step depends on {dep!r}, which is not declared before it"
                )
        return tuple(after)

    def _add(self, step: StepDef) -> None:
        if step.name in self.steps or step.name in self.compensations:
            raise WorkflowDefinitionError(f"{self.name}: duplicate step name {step.name!r}")
        if len(step.name) > STEP_NAME_MAX:
            raise WorkflowDefinitionError(
                f"{self.name}: step name {step.name!r} is {len(step.name)} characters long; "
                f"at most {STEP_NAME_MAX} fit its claim keys"
            )
        if isinstance(step.batch_size, str) and step.batch_size not in self.fields:
            raise WorkflowDefinitionError(
                f"{self.name}: batch_size names input field {step.batch_size!r}, "
                "which the workflow does not declare"
            )
        self.steps[step.name] = step

    def schedule(
        self,
        cron: str,
        *,
        input: Mapping[str, Any] | None = None,
        name: str | None = None,
        missed: str = "skip",
        timezone: str = "UTC",
        max_catch_up: int = 100,
    ) -> Callable[[Callable[[Any], Mapping[str, Any]]], Callable[[Any], Mapping[str, Any]]]:
        """Submit a run of this workflow at every tick of `cron` (five fields, or six with
        seconds last, as croniter reads them) in `timezone`. Either pass `input=`, or
        use it as a decorator on `fn(tick) -> input`. Ticks missed while nothing ran are
        skipped (`missed="skip"`: only the latest is submitted) or caught up
        (`missed="catch_up"`: each of the latest `max_catch_up`, oldest first). Each tick
        is submitted with the key `schedule:<name>:<tick>`, so it runs once however many
        beats fire it. Also usable as a plain call when `input=` is given."""
        sched_name = name or f"{self.name}-v{self.version}"
        if any(s.name == sched_name for s in self.schedules):
            raise WorkflowDefinitionError(
                f"{self.name}: two schedules named {sched_name!r}; give one a name="
            )
        problems = check_schedule_fields(
            name=sched_name, cron=cron, timezone=timezone, missed=missed, max_catch_up=max_catch_up
        )
        if problems:
            where = f"workflow {self.name!r} v{self.version}, schedule {sched_name!r}"
            raise WorkflowDefinitionError(f"{where}: " + "; ".join(problems.values()))
        base = dict(
            name=sched_name,
            workflow=self.name,
            version=self.version,
            cron=cron,
            timezone=timezone,
            missed=missed,
            max_catch_up=max_catch_up,
        )
        if input is not None:
            try:
                self.validate_input(input)
            except Exception as exc:
                raise WorkflowDefinitionError(
                    f"{self.name}: schedule {sched_name!r} has an input the workflow refuses: {exc}"
                ) from None
            self.schedules.append(ScheduleDef(**base, input=dict(input)))  # type: ignore[arg-type]

        def register(fn: Callable[[Any], Mapping[str, Any]]) -> Callable[[Any], Mapping[str, Any]]:
            if input is not None:
                raise WorkflowDefinitionError(
                    f"{self.name}: schedule {sched_name!r} has both input= and an input function"
                )
            self.schedules.append(ScheduleDef(**base, input=None, input_fn=fn))  # type: ignore[arg-type]
            return fn

        return register

    # -- using the definition ---------------------------------------------------
    def dependents(self, step_name: str) -> list[str]:
        return [s.name for s in self.steps.values() if step_name in s.after]

    def stepdef(self, name: str) -> StepDef | None:
        """A step of the plan, or a compensation, by name."""
        return self.steps.get(name) or self.compensations.get(name)

    def waits_for(self, signal: str) -> list[StepDef]:
        """The wait steps that consume signal `signal`."""
        return [s for s in self.steps.values() if s.wait and s.wait.signal == signal]

    def approvals(self) -> list[str]:
        """The signals of its four-eyes waits: each needs someone other than whoever
        submitted the run."""
        return sorted(
            {
                s.wait.signal
                for s in self.steps.values()
                if s.wait and s.wait.four_eyes and s.wait.signal
            }
        )

    def signals(self) -> list[str]:
        return sorted({s.wait.signal for s in self.steps.values() if s.wait and s.wait.signal})

    def validate_input(self, data: Any) -> dict[str, Any]:
        """Return the input with defaults filled in, or raise InvalidInput naming every
        problem by its path (inputs.DeclaredInput.validate)."""
        return self.declared_input.validate(data)

    def search_keys(self, clean_input: dict[str, Any]) -> list[tuple[str, str]]:
        """(field, text) of the search fields a validated input has values for."""
        return search_keys(self.search, clean_input)

    def input_schema(self) -> dict[str, Any]:
        """The input as a JSON Schema (draft 2020-12) object: what validate_input
        accepts, for clients, the API's documentation and the submit form."""
        return self.declared_input.schema(f"{self.name} v{self.version} input", self.description)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "input": self.declared_input.describe(),
            "search": list(self.search),
            "schedules": [
                {"name": s.name, "cron": s.cron, "timezone": s.timezone, "missed": s.missed}
                for s in self.schedules
            ],
            "steps": [
                {"name": s.name, "kind": str(s.kind), "after": list(s.after), "map": s.is_map}
                | ({"wait": s.wait.signal or "sleep"} if s.wait else {})
                | (
                    {"signalled_by": list(s.wait.signalled_by), "four_eyes": s.wait.four_eyes}
                    if s.wait and s.wait.signal
                    else {}
                )
                | ({"conditional": True} if s.when else {})
                | ({"compensate": s.compensate} if s.compensate else {})
                for s in self.steps.values()
            ],
        }
