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
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from runs.states import EffectKind

from .errors import WorkflowDefinitionError
from .inputs import DeclaredInput, Field, InputType
from .limits import Limit, Rate, check_fields, limits_of, rate_of
from .schedules import check_schedule_fields
from .search import bound_search_ints, check_search_fields, search_keys

# The decorators return the function they decorate unchanged, so it keeps its own type
# (its parameters and its return type) for whoever calls or inspects it.
StepFn = TypeVar("StepFn", bound=Callable[..., Any])
InputFn = TypeVar("InputFn", bound=Callable[[Any], Mapping[str, Any]])

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


@dataclass(frozen=True)
class Breaker:
    """A step's breaker (docs/authoring.md#breakers): when `outcomes` attempts of the
    step, across every run and version of its workflow, ended failed, crashed, timed
    out or unresolved within the last `within` (a timedelta, or seconds), the engine
    pauses that step name itself, as an operator would (runs/engine/policies/breaker.py).
    Both are checked here: `outcomes` a whole number of at least 1, `within` positive."""

    outcomes: int
    within: timedelta | float

    def __post_init__(self) -> None:
        if isinstance(self.outcomes, bool) or not isinstance(self.outcomes, int):
            raise WorkflowDefinitionError(
                f"Breaker.outcomes must be a whole number of at least 1, not {self.outcomes!r}"
            )
        if self.outcomes < 1:
            raise WorkflowDefinitionError(
                f"Breaker.outcomes must be at least 1, not {self.outcomes}"
            )
        within = self.within
        seconds = within.total_seconds() if isinstance(within, timedelta) else within
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise WorkflowDefinitionError(
                f"Breaker.within must be a positive timedelta or number of seconds, not {within!r}"
            )

    @property
    def seconds(self) -> float:
        """The window in seconds."""
        within = self.within
        return float(within.total_seconds() if isinstance(within, timedelta) else within)

    def describe(self) -> dict[str, Any]:
        return {"outcomes": self.outcomes, "within_seconds": self.seconds}

    def now(self, override: Any | None) -> AppliedBreaker:
        """This breaker as it applies now: an operator's override (a runs.BreakerSetting:
        outcomes, within_seconds, enabled) where one stands, else as declared. The
        engine's count and the API's description both read it from here."""
        if override is None:
            return AppliedBreaker(self.outcomes, self.seconds, enabled=True, overridden=False)
        return AppliedBreaker(
            override.outcomes, override.within_seconds, enabled=override.enabled, overridden=True
        )


@dataclass(frozen=True)
class AppliedBreaker:
    """A step's breaker as it applies now (Breaker.now); `enabled` False when an
    override switched it off."""

    outcomes: int
    within_seconds: float
    enabled: bool
    overridden: bool

    def describe(self) -> dict[str, Any]:
        return asdict(self)


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
    # How long one attempt may run, in seconds (None: the setting, or the kind's
    # default: runs/engine/core/clock.timeout_for).
    timeout: float | None = None
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
    # Concurrency limits (runs/workflows/limits.py) and the input field of its key hold.
    limits: tuple[Limit, ...] = ()
    hold: str | None = None
    rate: Rate | None = None
    # A breaker (docs/authoring.md#breakers): the engine pauses this step name after
    # too many failed or unknown outcomes in a window. None: no breaker.
    breaker: Breaker | None = None

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
    input: Mapping[str, Any] | type[Any] = field(default_factory=dict)
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
    # At most this many attempts of the workflow's steps running at once (limits.py).
    limit: Limit | None = None
    # At most so many starts of its steps per interval (limits.py).
    rate: Rate | None = None
    # How long a run may take from its submission, in seconds (or a timedelta): past it
    # no new step starts and the run ends as a cancel would, compensations included
    # (docs/authoring.md#deadlines). None: no deadline unless the submission gives one.
    deadline: float | timedelta | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.version, int) or self.version < 1:
            raise WorkflowDefinitionError("a workflow needs a name and a positive int version")
        self.deadline = _deadline_seconds(self.deadline, f"workflow {self.name!r} v{self.version}")
        self.schedules: list[ScheduleDef] = []
        self.declared_input = DeclaredInput(self.input, f"workflow {self.name!r} v{self.version}")
        if self.declared_input.model is not None:
            self.input = {}
        self.search = check_search_fields(
            self.search, self.declared_input, f"workflow {self.name!r} v{self.version}"
        )
        bound_search_ints(self.search, self.declared_input)
        if self.limit is not None:
            limits_of(self.limit, f"workflow {self.name!r}")
            check_fields([self.limit.per], self.fields, f"workflow {self.name!r} limit")
        declared_rate = rate_of(self.rate, f"workflow {self.name!r}")
        if declared_rate is not None:
            check_fields([declared_rate.per], self.fields, f"workflow {self.name!r} rate")

    @property
    def deadline_seconds(self) -> float | None:
        """The declared deadline in seconds from submission (normalized when declared)."""
        deadline = self.deadline
        return deadline.total_seconds() if isinstance(deadline, timedelta) else deadline

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
        timeout: float | timedelta | None = None,
        key_includes_input: bool = False,
        probe: Callable[..., Any] | None = None,
        verify: Callable[[Any], bool] | None = None,
        when: Callable[..., bool] | None = None,
        collect: str | None = None,
        compensate: str | None = None,
        limit: Limit | list[Limit] | tuple[Limit, ...] | None = None,
        hold: str | None = None,
        rate: Rate | None = None,
        breaker: Breaker | None = None,
    ) -> Callable[[StepFn], StepFn]:
        """Declare a step: decorates `fn(ctx) -> result` (the result must be
        JSON-serializable) and returns it unchanged. Every parameter is keyword-only.

        Parameters
        ----------
        kind:
            Required, no default: PURE, TRANSACTIONAL, IDEMPOTENT or GUARDED (or its string
            value). It decides what the engine may do on retry and after a crash
            (docs/architecture.md#effect-kinds); a missing or unknown kind is refused with
            the list of kinds.
        after:
            Names of the steps this one depends on, each declared before it. Default None:
            after the previously declared step (declaration order); `[]`: no dependency, it
            runs when the run starts. Steps with no common dependency run in parallel.
        retry:
            The retry policy (`Retry`). Default None: `Retry()`, 3 attempts in all, 1 s
            doubling up to 300 s, with jitter. Pure, transactional and idempotent steps are
            retried after any error; a guarded step only after `NotApplied` (or a probe
            that finds `not_applied`): any other error leaves its claim unresolved.
        name:
            The step's name (at most 100 characters, unique in the workflow). Default None:
            the decorated function's `__name__`.
        lease_seconds:
            This step's lease, overriding `RUNS_LEASE_SECONDS` (default 60). Default None:
            the setting. A step that runs longer must call `ctx.heartbeat()` or it is
            declared crashed; all kinds.
        timeout:
            How long one attempt may run, in seconds (or a timedelta); past it the attempt
            is stopped, even if its call ignores signals, and ends as its kind requires:
            pure and transactional roll back and are retried, idempotent is retried with
            the same key, guarded becomes unresolved (it may have acted). A heartbeat does
            not extend it. Default None: `RUNS_STEP_TIMEOUT_SECONDS` if set, else the
            kind's default (docs/authoring.md#timeouts). All kinds.
        key_includes_input:
            Include a digest of the run's input in the step's claim and idempotency key
            (docs/architecture.md#claims-and-keys). Default False: the key is the run, the
            step and its revision. Matters for idempotent steps (the key the external
            system dedupes by) and for every kind's claim.
        probe:
            A read-only check `probe(ctx) -> ProbeResult` of the external system, asked
            when the step's claim is unresolved: `applied` or `not_applied` settles the
            claim without an operator, `unknown` leaves it in the reconciliation queue
            (docs/authoring.md#probes-and-postconditions). Only a guarded step leaves its
            claim unresolved, so it is for guarded steps. Default None: an operator decides.
        verify:
            A postcondition `verify(result) -> bool` checked on the step's result; false is
            an error, escalated (never retried) for a guarded step and retried like any
            error for the other kinds. Default None: no check.
        when:
            A condition `when(ctx) -> bool`, decided when the step's dependencies are done;
            false skips the step (status `skipped`, result None) and its dependents proceed
            as after a success; one that raises fails the step. Default None: always runs.
        collect:
            The name of a map step declared before; `ctx.collected` then iterates its
            per-item results in item order, and the map step becomes a dependency. Default
            None. All kinds.
        compensate:
            The name of a compensation declared before with `@wf.compensation` that undoes
            this step's effect if the run is cancelled or fails after the step succeeded;
            one step per compensation. Default None: nothing to undo. All kinds.
        limit:
            A `Limit(max=n)` (at most n attempts of this step running at once, across all
            runs), a `Limit(per="field", max=n)` (at most n per value of that input field),
            or a list of both. A step over its limit stays queued, neither failed nor
            retried, and starts when a slot frees, oldest first
            (docs/authoring.md#limits-and-holds). Default None: no limit. All kinds.
        hold:
            An input field (e.g. `"change_id"`): while a claim of a step holding the same
            field is unresolved for a value, no new attempt of such a step starts for
            that value in any run until the claim is decided. Guarded steps only (only
            they leave a claim unresolved). Default None: no hold.
        rate:
            A `Rate(starts=n, every=seconds)`: at most n starts of this step per interval,
            evenly spaced, across all workers (counted in PostgreSQL); `per="field"`: per
            value of that input field. A start over the rate is put off to its turn,
            neither failed nor retried. Default None: no rate. All kinds.
        breaker:
            A `Breaker(outcomes=N, within=timedelta(...) or seconds)`: when N attempts of
            this step, across every run and version of the workflow, ended failed,
            crashed, timed out or unresolved within that window, the engine pauses this
            step name itself (actor `engine:breaker`, the counts as its reason), as an
            operator's pause would: no new attempt starts until someone resumes it. An
            operator may change its numbers, or switch it off, from the admin at run time
            (docs/operating.md#breakers). Default None: no breaker. All kinds.
        """

        def register(fn: StepFn) -> StepFn:
            step_name = name or fn.__name__
            where = f"{self.name}: step {step_name!r}"
            limits = limits_of(limit, where)
            check_fields([one.per for one in limits], self.fields, where)
            step_rate = rate_of(rate, where)
            if step_rate is not None:
                check_fields([step_rate.per], self.fields, where)
            step_kind = self._kind(kind, step_name)
            if hold is not None:
                if step_kind != GUARDED:
                    raise WorkflowDefinitionError(
                        f"{where}: hold= is for guarded steps (only their claims are "
                        f"left unresolved), not {step_kind.value}"
                    )
                if not isinstance(hold, str) or not hold.strip():
                    raise WorkflowDefinitionError(f"{where}: hold= names an input field")
                check_fields([hold], self.fields, where)
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
                    kind=step_kind,
                    after=deps,
                    retry=retry or Retry(),
                    lease_seconds=lease_seconds,
                    timeout=_timeout_seconds(timeout, self.name),
                    key_includes_input=key_includes_input,
                    probe=probe,
                    verify=verify,
                    when=when,
                    collect=collect,
                    compensate=compensate,
                    limits=limits,
                    hold=hold,
                    rate=rate,
                    breaker=_breaker(breaker, self.name),
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
        timeout: float | timedelta | None = None,
        probe: Callable[..., Any] | None = None,
    ) -> Callable[[StepFn], StepFn]:
        """Declare a compensation: decorates `fn(ctx) -> result` and returns it
        unchanged. It runs as a step of its own (with its own effect kind, claim and
        retries) only when a run that completed the step naming it (`compensate=`) is
        cancelled or fails; it is not part of the plan otherwise. ctx.results holds the
        run's results, the compensated step's too. Every parameter is keyword-only.

        Parameters
        ----------
        kind:
            Required, no default: PURE, TRANSACTIONAL, IDEMPOTENT or GUARDED (or its string
            value). It decides what the engine may do on retry and after a crash
            (docs/architecture.md#effect-kinds); a missing or unknown kind is refused with
            the list of kinds.
        retry:
            The retry policy (`Retry`). Default None: `Retry()`, 3 attempts in all, 1 s
            doubling up to 300 s, with jitter. Pure, transactional and idempotent steps are
            retried after any error; a guarded step only after `NotApplied` (or a probe
            that finds `not_applied`): any other error leaves its claim unresolved.
        name:
            The compensation's name, which a step names with `compensate=` (unique among
            the workflow's steps and compensations). Default None: the function's
            `__name__`.
        lease_seconds:
            This step's lease, overriding `RUNS_LEASE_SECONDS` (default 60). Default None:
            the setting. A step that runs longer must call `ctx.heartbeat()` or it is
            declared crashed; all kinds.
        timeout:
            How long one attempt may run, in seconds (or a timedelta); past it the attempt
            is stopped, even if its call ignores signals, and ends as its kind requires:
            pure and transactional roll back and are retried, idempotent is retried with
            the same key, guarded becomes unresolved (it may have acted). A heartbeat does
            not extend it. Default None: `RUNS_STEP_TIMEOUT_SECONDS` if set, else the
            kind's default (docs/authoring.md#timeouts). All kinds.
        probe:
            As for `step`: `probe(ctx) -> ProbeResult` settles an unresolved claim of a
            guarded compensation. Default None.
        """

        def register(fn: StepFn) -> StepFn:
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
                timeout=_timeout_seconds(timeout, self.name),
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
    ) -> Callable[[StepFn], StepFn]:
        """Declare a step that waits for the signal `signal` (engine.send_signal). Its
        result is `{"payload": …, "actor": …, "timed_out": False}`, or
        `{"timed_out": True}` after a timeout with `on_timeout="continue"`. It holds no
        worker and takes no attempt. The decorated function only names the step: it is
        not called, and is returned unchanged. A wait has no effect kind to choose (it
        is declared pure, with no retry). Every parameter is keyword-only.

        Parameters
        ----------
        signal:
            Required: the signal's name (a non-empty string of at most 100 characters).
            A signal sent before the run reaches the wait is kept for it.
        timeout:
            A positive timedelta after which the wait ends without a signal, timed on the
            database's clock. Default None: it waits for ever.
        on_timeout:
            `"fail"` (default): the step and the run fail at the timeout; `"continue"`:
            the step succeeds with `{"timed_out": True}`.
        on_duplicate:
            `"refuse"` (default): a second signal of the same name is refused;
            `"queue"`: it is kept in order for a later wait. Waits for one signal must agree.
        after:
            Names of the steps this one depends on, each declared before it. Default None:
            after the previously declared step (declaration order); `[]`: no dependency, it
            runs when the run starts. Steps with no common dependency run in parallel.
        name:
            The step's name. Default None: the function's `__name__`.
        when:
            A condition `when(ctx) -> bool`, decided when the step's dependencies are done;
            false skips the step (status `skipped`, result None) and its dependents proceed
            as after a success; one that raises fails the step. Default None: always runs.
        signalled_by:
            The roles that may send the signal, among "operators" and "submitters".
            Default `("operators",)`; a wait that a service account may signal says
            `("operators", "submitters")`. Waits for one signal must agree.
        four_eyes:
            True: an approval, which must come from someone other than the principal that
            submitted the run. Default False.
        """
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
    ) -> Callable[[StepFn], StepFn]:
        """Declare a durable sleep, timed on the database's clock and holding no worker.
        Its result is `{"slept_until": <ISO time>}`. The decorated function is returned
        unchanged; it is called for the deadline only when neither `until` nor `for_` is
        given. A sleep has no effect kind to choose (it is declared pure, with no retry).
        Every parameter is keyword-only.

        Parameters
        ----------
        until:
            `until(ctx) -> datetime` (aware), computed from the input or earlier results
            when the step is reached. Default None.
        for_:
            `for_(ctx) -> timedelta`, likewise; not with `until`. Default None: without
            either, the decorated function itself returns the datetime or timedelta.
        after:
            Names of the steps this one depends on, each declared before it. Default None:
            after the previously declared step (declaration order); `[]`: no dependency, it
            runs when the run starts. Steps with no common dependency run in parallel.
        name:
            The step's name. Default None: the function's `__name__`.
        when:
            A condition `when(ctx) -> bool`, decided when the step's dependencies are done;
            false skips the step (status `skipped`, result None) and its dependents proceed
            as after a success; one that raises fails the step. Default None: always runs.
        """
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
    ) -> Callable[[StepFn], StepFn]:
        def register(fn: StepFn) -> StepFn:
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
        timeout: float | timedelta | None = None,
        key: Callable[[Any], Any] | None = None,
        when: Callable[..., bool] | None = None,
        breaker: Breaker | None = None,
    ) -> Callable[[StepFn], StepFn]:
        """Declare a map step: decorates `fn(ctx, item)` and returns it unchanged; it is
        called once per item of the list that step `over` returned, in batches of
        `batch_size`. Each item is its own logical invocation with its own claim, so a
        crash loses at most the item in flight. Every parameter is keyword-only.

        Parameters
        ----------
        over:
            Required: the name of a step declared before whose result is the list to map;
            it becomes a dependency.
        batch_size:
            Required: how many items one task runs, a positive int or the name of a
            declared input field that holds it.
        kind:
            Required: PURE, TRANSACTIONAL or IDEMPOTENT (or its string value); GUARDED is
            refused (declare one guarded step per irreversible effect).
        after:
            Names of the steps this one depends on, each declared before it. Default None:
            after the previously declared step (declaration order); `[]`: no dependency, it
            runs when the run starts. Steps with no common dependency run in parallel.
        retry:
            The retry policy (`Retry`), per item. Default None: `Retry()`, 3 attempts in
            all, 1 s doubling up to 300 s, with jitter.
        name:
            The step's name (at most 100 characters, unique in the workflow). Default None:
            the decorated function's `__name__`.
        lease_seconds:
            This step's lease, overriding `RUNS_LEASE_SECONDS` (default 60). Default None:
            the setting. A batch that runs longer must call `ctx.heartbeat()` or it is
            declared crashed.
        timeout:
            How long one attempt of a batch may run, in seconds (or a timedelta): it bounds
            the whole batch, not one item. Past it the batch stops; the items it committed
            stay done and the rest are retried as the kind requires. Default None: as for
            `step` (docs/authoring.md#timeouts).
        key:
            `key(item)`, whose string is the item's key (its claim key), unique in its
            list, e.g. `key=lambda record: record["id"]`. Default None: the item's
            canonical JSON (so `1` and `"1"` differ). A key past 128 characters is replaced
            by its digest; a list in which two items share a key fails the map step.
        when:
            A condition `when(ctx) -> bool`, decided when the step's dependencies are done;
            false skips the step (status `skipped`, result None) and its dependents proceed
            as after a success; one that raises fails the step. Default None: always runs.
        breaker:
            As for `step`, counting the attempts of the map step's batches (an item's
            failure is not an outcome of its own; a batch that fails is). Default None.
        """
        if over not in self.steps:
            raise WorkflowDefinitionError(f"map step over unknown step {over!r}")

        def register(fn: StepFn) -> StepFn:
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
                    timeout=_timeout_seconds(timeout, self.name),
                    over=over,
                    batch_size=batch_size,
                    key=key,
                    when=when,
                    breaker=_breaker(breaker, self.name),
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
    ) -> Callable[[InputFn], InputFn]:
        """Submit a run of this workflow at every tick of `cron`. Either pass `input=`
        (a plain call), or use it as a decorator on `fn(tick) -> input`, which is
        returned unchanged. Each tick is submitted with the key
        `schedule:<name>:<tick>`, so it runs once however many beats fire it.

        Parameters
        ----------
        cron:
            Required, positional: five fields, or six with seconds last, as croniter
            reads them.
        input:
            The input of every run, validated against the workflow's input when
            declared. Default None: the decorated function computes it from the tick
            (an aware datetime); not both.
        name:
            The schedule's name, unique in the workflow. Default None:
            `<workflow>-v<version>`.
        missed:
            Ticks missed while nothing ran: `"skip"` (default) submits only the
            latest; `"catch_up"` submits each of the latest `max_catch_up`, oldest first.
        timezone:
            The IANA time zone the cron is read in. Default `"UTC"`.
        max_catch_up:
            With `missed="catch_up"`, at most this many missed ticks are submitted.
            Default 100.
        """
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

        def declared(
            given: Mapping[str, Any] | None,
            input_fn: Callable[[Any], Mapping[str, Any]] | None = None,
        ) -> ScheduleDef:
            return ScheduleDef(
                name=sched_name,
                workflow=self.name,
                version=self.version,
                cron=cron,
                timezone=timezone,
                missed=missed,
                max_catch_up=max_catch_up,
                input=given,
                input_fn=input_fn,
            )

        if input is not None:
            try:
                self.validate_input(input)
            except Exception as exc:
                raise WorkflowDefinitionError(
                    f"{self.name}: schedule {sched_name!r} has an input the workflow refuses: {exc}"
                ) from None
            self.schedules.append(declared(dict(input)))

        def register(fn: InputFn) -> InputFn:
            if input is not None:
                raise WorkflowDefinitionError(
                    f"{self.name}: schedule {sched_name!r} has both input= and an input function"
                )
            self.schedules.append(declared(None, fn))
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
        described: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "input": self.declared_input.describe(),
            "search": list(self.search),
            "deadline_seconds": self.deadline_seconds,
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
                | ({"limits": [_limit(one) for one in s.limits]} if s.limits else {})
                | ({"hold": s.hold} if s.hold else {})
                | ({"rate": _rate(s.rate)} if s.rate else {})
                | ({"breaker": s.breaker.describe()} if s.breaker else {})
                for s in self.steps.values()
            ],
        }
        return (
            described
            | ({"limit": _limit(self.limit)} if self.limit else {})
            | ({"rate": _rate(self.rate)} if self.rate else {})
        )


def _limit(limit: Limit) -> dict[str, Any]:
    return {"max": limit.max, "per": limit.per}


def _rate(rate: Rate) -> dict[str, Any]:
    return {"starts": rate.starts, "every": rate.every, "per": rate.per}


def _timeout_seconds(timeout: float | timedelta | None, workflow: str) -> float | None:
    """A step's declared timeout in seconds; a non-positive one is refused."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise WorkflowDefinitionError(
            f"{workflow}: timeout must be a positive number of seconds or a timedelta, "
            f"not {timeout!r}"
        )
    return float(seconds)


def _breaker(breaker: Breaker | None, workflow: str) -> Breaker | None:
    """A step's declared breaker, or None; anything but a Breaker is refused."""
    if breaker is not None and not isinstance(breaker, Breaker):
        raise WorkflowDefinitionError(
            f"{workflow}: breaker must be a Breaker(outcomes=..., within=...), not {breaker!r}"
        )
    return breaker


def _deadline_seconds(deadline: float | timedelta | None, where: str) -> float | None:
    """A workflow's declared deadline in seconds; a non-positive one is refused."""
    if deadline is None:
        return None
    seconds = deadline.total_seconds() if isinstance(deadline, timedelta) else deadline
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise WorkflowDefinitionError(
            f"{where}: deadline must be a positive number of seconds or a timedelta, "
            f"not {deadline!r}"
        )
    return float(seconds)
