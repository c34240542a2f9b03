"""Reading a run export back and checking it (`manage.py verify_export`, docs/operating.md
"Commands"): its format and version are known, its sections are there, it agrees with
itself (every attempt's and claim's step is in it, event seqs strictly increase, the
events and the summary account for every seq up to the run's last, the counts are
right), and, when the run is in this database, it matches the rows as they are now.

Every problem is one line saying what is wrong where; nothing here writes.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from runs.errors import RunNotFound
from runs.record import export, export_shape

# Fields that say when and by whom the document was made, not what the run is.
NOT_COMPARED = ("format", "version", "exported_at", "exported_by", "counts")
# At most this many differences with the database are listed (then how many more).
MAX_DIFFERENCES = 20


class ExportUnreadable(Exception):
    """The file cannot be read as a run export at all (missing, not JSON, another
    format or version): one line, and nothing else is checked."""


def read(path: Path) -> dict[str, Any]:
    """The document in the file, or ExportUnreadable saying in one line why not."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExportUnreadable(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ExportUnreadable(f"{name}: is a directory, not a file") from None
    except UnicodeDecodeError:
        raise ExportUnreadable(f"{name}: not JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ExportUnreadable(f"{name}: cannot be read ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportUnreadable(
            f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != export.FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        said = f"its format is {found!r}" if found is not None else "it has no format"
        raise ExportUnreadable(f"{name}: not a run export ({said}; expected {export.FORMAT!r})")
    version = doc.get("version")
    if version != export.VERSION or isinstance(version, bool):
        raise ExportUnreadable(
            f"{name} is version {json.dumps(version)}; this durable-runs reads version "
            f"{export.VERSION}"
        )
    return doc


# --- the document alone ----------------------------------------------------------------
def problems_of(doc: dict[str, Any]) -> list[str]:
    """What is wrong with the document by itself; empty when it is consistent."""
    # The sections and their shapes are the document's description's (export_shape).
    missing = [name for name in export_shape.SECTIONS if name not in doc]
    if missing:
        return [f"missing section{'s' if len(missing) > 1 else ''}: {', '.join(missing)}"]
    wrong = [
        f"section {name} is not {'an object' if shape is dict else 'a list'}"
        for name, shape in export_shape.SECTIONS.items()
        if not isinstance(doc[name], shape)
    ]
    history = doc["history"]
    if isinstance(history, dict):
        if not isinstance(history.get("events"), list):
            wrong.append("history.events is not a list")
        if "summary" not in history or not isinstance(history["summary"], dict | None):
            wrong.append("history.summary is missing (null when nothing was removed)")
    if wrong:
        return wrong
    problems: list[str] = []
    run = doc["run"]
    try:
        uuid.UUID(str(run.get("id")))
    except ValueError:
        problems.append(f"run.id {json.dumps(run.get('id'))} is not a run id")
    if not _is_int(run.get("last_seq")):
        problems.append("run.last_seq is not a number")

    keys = _step_keys(doc["steps"], problems)
    _check_steps(doc["steps"], keys, problems)
    _check_attempts(doc["attempts"], keys, problems)
    _check_claims(doc["claims"], keys, problems)
    for _, registry in _objects(doc["registries"], "registries", problems):
        if registry.get("step") not in keys:
            problems.append(f"registry of step {_q(registry.get('step'))}: no such step")
    for n, signal in _objects(doc["signals"], "signals", problems):
        by = signal.get("consumed_by")
        if by is not None and by not in keys:
            problems.append(f"signal {signal.get('id', n)} consumed by step {_q(by)}: no such step")
    _check_history(history, run.get("last_seq"), keys, problems)
    if not problems:
        _check_counts(doc, problems)
    return problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _q(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _objects(
    rows: list[Any], section: str, problems: list[str]
) -> Iterable[tuple[int, dict[str, Any]]]:
    for n, row in enumerate(rows):
        if isinstance(row, dict):
            yield n, row
        else:
            problems.append(f"{section}[{n}] is not an object")


def _step_keys(steps: list[Any], problems: list[str]) -> set[str]:
    keys: set[str] = set()
    for n, step in _objects(steps, "steps", problems):
        key = step.get("key")
        if not isinstance(key, str):
            problems.append(f"steps[{n}] has no key")
        elif key in keys:
            problems.append(f"step {_q(key)} appears twice")
        else:
            keys.add(key)
    return keys


def _check_steps(steps: list[Any], keys: set[str], problems: list[str]) -> None:
    for step in steps:
        if isinstance(step, dict) and step.get("parent") is not None:
            if step["parent"] not in keys:
                problems.append(
                    f"step {_q(step.get('key'))}: its map step {_q(step['parent'])} is not "
                    "in the document"
                )


def _check_attempts(attempts: list[Any], keys: set[str], problems: list[str]) -> None:
    seen: set[tuple[Any, Any]] = set()
    for _, attempt in _objects(attempts, "attempts", problems):
        step, number = attempt.get("step"), attempt.get("number")
        if step not in keys:
            problems.append(f"attempt {number} of step {_q(step)}: no such step in the document")
        if (step, number) in seen:
            problems.append(f"attempt {number} of step {_q(step)} appears twice")
        seen.add((step, number))


def _check_claims(claims: list[Any], keys: set[str], problems: list[str]) -> None:
    seen: set[Any] = set()
    for n, claim in _objects(claims, "claims", problems):
        key, step = claim.get("key", f"claims[{n}]"), claim.get("step")
        if step not in keys:
            problems.append(f"claim {_q(key)} of step {_q(step)}: no such step in the document")
        if key in seen:
            problems.append(f"claim {_q(key)} appears twice")
        seen.add(key)
        resolution = claim.get("resolution")
        if resolution is not None and not (
            isinstance(resolution, dict) and all(resolution.get(k) for k in ("by", "at", "note"))
        ):
            problems.append(f"claim {_q(key)}: its resolution lacks who, when or why")


def _check_history(
    history: dict[str, Any], last_seq: Any, keys: set[str], problems: list[str]
) -> None:
    """Seqs strictly increase, and the summary (seq 1..S) and the events (S+1..last_seq)
    together account for every event the run ever had."""
    summary = history["summary"]
    start = 1
    if summary is not None:
        first, last, removed = (summary.get(k) for k in ("first_seq", "last_seq", "events_removed"))
        counts = summary.get("counts")
        counted = (
            sum(v for v in counts.values() if _is_int(v)) if isinstance(counts, dict) else None
        )
        if not (_is_int(first) and _is_int(last) and _is_int(removed)):
            problems.append(
                "history.summary: first_seq, last_seq and events_removed must be numbers"
            )
            return
        if (first, removed, counted) != (1, last - first + 1, last - first + 1):
            problems.append(
                f"history.summary says {removed} events removed (counted by type: {counted}) "
                f"for seq {first}..{last}"
            )
        start = last + 1
    previous: int | None = None
    ordered = True
    seqs: list[int] = []
    for n, event in _objects(history["events"], "history.events", problems):
        seq: Any = event.get("seq")
        if not _is_int(seq):
            problems.append(f"history.events[{n}] has no seq")
            ordered = False
            continue
        if previous is not None and seq == previous:
            problems.append(f"event seq {seq} appears twice")
            ordered = False
        elif previous is not None and seq < previous:
            problems.append(f"event seq {seq} comes after seq {previous}")
            ordered = False
        step = event.get("step")
        if step is not None and step not in keys:
            problems.append(
                f"event seq {seq} ({event.get('type')}) names step {_q(step)}: no such step"
            )
        previous = seq
        seqs.append(seq)
    if ordered and _is_int(last_seq) and seqs != list(range(start, last_seq + 1)):
        lost = sorted(set(range(start, last_seq + 1)) - set(seqs))
        said = f"seq {_ranges(lost)} missing" if lost else "seqs past the run's last_seq"
        problems.append(
            f"history: the events should be seq {start}..{last_seq} "
            f"(the run's last_seq is {last_seq}), found {len(seqs)}: {said}"
        )


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    for n in numbers:
        if parts and int(parts[-1].split("..")[-1]) == n - 1:
            parts[-1] = f"{parts[-1].split('..')[0]}..{n}"
        else:
            parts.append(str(n))
    return ", ".join(parts[:5]) + (" …" if len(parts) > 5 else "")


def _check_counts(doc: dict[str, Any], problems: list[str]) -> None:
    history = doc["history"]
    actual = export.counts_of(
        doc["steps"],
        doc["attempts"],
        doc["claims"],
        doc["signals"],
        history["summary"],
        history["events"],
    )
    for name, value in actual.items():
        said = doc["counts"].get(name)
        if said != value:
            problems.append(f"counts.{name} says {_q(said)}, the document has {value}")


# --- against the database --------------------------------------------------------------
def differences_from_database(doc: dict[str, Any]) -> list[str] | None:
    """How the (consistent) document differs from its run's rows now; None when the run
    is not in this database. The database is read again in one snapshot, as the export
    read it."""
    try:
        now = export.build(uuid.UUID(str(doc["run"]["id"])), exported_by="")
    except RunNotFound:
        return None
    out: list[str] = []
    _compare_fields("run", doc["run"], now["run"], out)
    by: dict[str, Callable[[dict[str, Any]], Any]] = {
        "steps": lambda r: r.get("key"),
        "attempts": lambda r: (r.get("step"), r.get("number")),
        "claims": lambda r: r.get("key"),
        "registries": lambda r: r.get("step"),
        "signals": lambda r: r.get("id"),
    }
    for section, key in by.items():
        _compare_rows(section, doc[section], now[section], key, out)
    _compare_history(doc["history"], now["history"], out)
    if len(out) > MAX_DIFFERENCES:
        more = len(out) - MAX_DIFFERENCES
        out = [*out[:MAX_DIFFERENCES], f"… and {more} more difference{'s' if more > 1 else ''}"]
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "…"


def _compare_fields(what: str, doc: dict[str, Any], now: dict[str, Any], out: list[str]) -> None:
    for name in sorted(set(doc) | set(now)):
        if doc.get(name) != now.get(name):
            out.append(
                f"{what}.{name}: the document says {_short(doc.get(name))}, "
                f"the database {_short(now.get(name))}"
            )


def _label(section: str, key: Any) -> str:
    if section == "attempts":
        return f"attempt {key[1]} of step {_q(key[0])}"
    return f"{section.rstrip('s').replace('registrie', 'registry')} {_q(key)}"


def _compare_rows(
    section: str,
    doc: list[dict[str, Any]],
    now: list[dict[str, Any]],
    key: Callable[[dict[str, Any]], Any],
    out: list[str],
) -> None:
    mine = {key(r): r for r in doc}
    theirs = {key(r): r for r in now}
    for k in mine:
        label = _label(section, k)
        if k not in theirs:
            out.append(f"{label}: in the document, not in the database")
        else:
            _compare_fields(label, mine[k], theirs[k], out)
    for k in theirs:
        if k not in mine:
            out.append(f"{_label(section, k)}: in the database, not in the document")


def _compare_history(doc: dict[str, Any], now: dict[str, Any], out: list[str]) -> None:
    """Events compared by seq. Events of the document that retention has removed from
    the database since are accounted for by the database's summary: by type, they must
    be what it counts beyond what the document's own summary counted."""
    mine = {e["seq"]: e for e in doc["events"]}
    theirs = {e["seq"]: e for e in now["events"]}
    summary_now = now["summary"]
    removed_up_to = 0 if summary_now is None else int(summary_now["last_seq"])
    removed: Counter[str] = Counter()
    for seq, event in mine.items():
        if seq in theirs:
            _compare_fields(f"event seq {seq}", event, theirs[seq], out)
        elif seq <= removed_up_to:
            removed[str(event.get("type"))] += 1
        else:
            out.append(
                f"event seq {seq} ({event.get('type')}): in the document, not in the database"
            )
    for seq, event in theirs.items():
        if seq not in mine and not (doc["summary"] and seq <= int(doc["summary"]["last_seq"])):
            out.append(f"event seq {seq} ({event['type']}): in the database, not in the document")
    if summary_now is None:
        if doc["summary"] is not None:
            out.append("history.summary: in the document, not in the database")
        return
    if doc["summary"] is not None and doc["summary"]["last_seq"] == summary_now["last_seq"]:
        _compare_fields("history.summary", doc["summary"], summary_now, out)
        return
    before: Counter[str] = Counter(
        {} if doc["summary"] is None else {k: int(v) for k, v in doc["summary"]["counts"].items()}
    )
    expected = Counter({k: int(v) for k, v in summary_now["counts"].items()}) - before
    if removed != expected:
        out.append(
            f"history.summary: the database's summary counts {dict(sorted(expected.items()))} "
            f"beyond the document's, the document's events it covers are "
            f"{dict(sorted(removed.items()))}"
        )
