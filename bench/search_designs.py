"""The two ways to index a declared search field, measured on the seeded UI database
(bench/seed_ui.py), for docs/performance.md#search-fields:

    DATABASE_URL=… .venv/bin/python bench/search_designs.py [--lookups 20] [--submits 300]

(a) the extracted table runs_runsearchkey (what the project ships: one row per run and
    field, written by the submission, index (field, value, created_at DESC, run_id DESC));
(b1) an expression index on the run's input, per declared field:
    ((input->>'change_id'), created_at DESC, id DESC);
(b2) one GIN index over every input: (input jsonb_path_ops), queried with @>.

For each: build time and size, the runs list's page query (51 rows, newest first) for a
value one run has (a change id) and for the value most runs share (a charge's amount),
and what a submission costs with it (`--submits` merge-change submissions, in a
transaction rolled back, publishing off). The (b) indexes are dropped at the end.
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import uidb  # bench/, the directory of this script

PAGE = 51  # the runs list reads one row more than it shows

DESIGNS = {
    "b1": "CREATE INDEX bench_search_b1_idx ON runs_run "
    "((input->>'change_id'), created_at DESC, id DESC)",
    "b1_amount": "CREATE INDEX bench_search_b1_amount_idx ON runs_run "
    "((input->>'amount'), created_at DESC, id DESC)",
    "b2": "CREATE INDEX bench_search_b2_idx ON runs_run USING gin (input jsonb_path_ops)",
}
INDEXES = {
    "b1": ["bench_search_b1_idx", "bench_search_b1_amount_idx"],
    "b2": ["bench_search_b2_idx"],
}
QUERIES = {
    "a": "SELECT r.id FROM runs_runsearchkey k JOIN runs_run r ON r.id = k.run_id "
    "WHERE k.field = %(field)s AND k.value = %(value)s "
    "ORDER BY k.created_at DESC, k.run_id DESC LIMIT 51",
    "b1": "SELECT id FROM runs_run WHERE input->>%(field)s = %(value)s "
    "ORDER BY created_at DESC, id DESC LIMIT 51",
    "b2": "SELECT id FROM runs_run WHERE input @> %(json)s::jsonb "
    "ORDER BY created_at DESC, id DESC LIMIT 51",
}


def timed(cursor: Any, sql: str, params: dict[str, Any], repeat: int = 5) -> float:
    """The median ms of `repeat` runs of the query (after one to warm the cache)."""
    cursor.execute(sql, params)
    cursor.fetchall()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cursor.execute(sql, params)
        cursor.fetchall()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def lookups(cursor: Any, design: str, values: list[tuple[str, str]]) -> float:
    """The median ms over the values of the page query of `design`."""
    results = []
    for field, value in values:
        params = {"field": field, "value": value, "json": json.dumps({field: int(value)})}
        results.append(timed(cursor, QUERIES[design], params))
    return statistics.median(results)


def size(cursor: Any, *relations: str) -> int:
    total = 0
    for relation in relations:
        cursor.execute("SELECT pg_total_relation_size(%s)", [relation])
        total += int(cursor.fetchone()[0])
    return total


def submit_ms(count: int, with_search: bool, rounds: int = 3) -> float:
    """Mean ms of one merge-change submission (search keys written or not), in a
    transaction that is rolled back; the median of `rounds` (other work on the machine
    moves single rounds)."""
    return statistics.median(_submit_round(count, with_search) for _ in range(rounds))


def _submit_round(count: int, with_search: bool) -> float:
    from unittest import mock

    from django.db import transaction

    from runs import engine
    from runs.workflows import registry

    wf = registry.latest("merge-change")
    assert wf is not None
    declared = wf.search
    wf.search = declared if with_search else ()

    class Rollback(Exception):
        pass

    try:
        with mock.patch.object(engine.publish, "send"):
            t0 = time.perf_counter()
            try:
                with transaction.atomic():
                    for n in range(count):
                        engine.submit(workflow="merge-change", input={"change_id": 9_000_000 + n})
                    elapsed = time.perf_counter() - t0
                    raise Rollback
            except Rollback:
                pass
    finally:
        wf.search = declared
    return elapsed * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="default: <DATABASE_URL's name>_ui_bench")
    parser.add_argument("--lookups", type=int, default=20, help="change ids looked up")
    parser.add_argument("--submits", type=int, default=300)
    args = parser.parse_args()
    uidb.use_bench_database(args.database)
    uidb.setup_django()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs_run")
        runs = cursor.fetchone()[0]
        cursor.execute(
            "SELECT value FROM runs_runsearchkey WHERE field = 'change_id' ORDER BY value"
        )
        changes = [row[0] for row in cursor.fetchall()]
        step = max(1, len(changes) // args.lookups)
        rare = [("change_id", v) for v in changes[::step][: args.lookups]]
        cursor.execute(
            "SELECT value, count(*) FROM runs_runsearchkey WHERE field = 'amount' "
            "GROUP BY value ORDER BY count(*) DESC, value LIMIT 1"
        )
        amount, sharing = cursor.fetchone()
        common = [("amount", amount)]
        figures: dict[str, dict[str, Any]] = {
            "a": {
                "build_s": None,
                "bytes": size(cursor, "runs_runsearchkey"),
                "rare_ms": lookups(cursor, "a", rare),
                "common_ms": lookups(cursor, "a", common),
            }
        }
        for design in ("b1", "b2"):
            t0 = time.monotonic()
            for name, sql in DESIGNS.items():
                if name.startswith(design):
                    cursor.execute(sql)
            cursor.execute("ANALYZE runs_run")
            built = time.monotonic() - t0
            figures[design] = {
                "build_s": round(built, 1),
                "bytes": size(cursor, *INDEXES[design]),
                "rare_ms": lookups(cursor, design, rare),
                "common_ms": lookups(cursor, design, common),
            }
            figures[design]["submit_ms"] = submit_ms(args.submits, with_search=False)
            for index in INDEXES[design]:
                cursor.execute(f"DROP INDEX {index}")
        figures["a"]["submit_ms"] = submit_ms(args.submits, with_search=True)
        figures["none"] = {"submit_ms": submit_ms(args.submits, with_search=False)}

    print(f"{runs:,} runs; {len(changes):,} change ids; amount {amount} shared by {sharing:,} runs")
    print("design  build s   size MB  one run ms  many runs ms  submit ms")
    for design, f in figures.items():
        if design == "none":
            print(f"{'none':<6}  {'':>7}  {'':>8}  {'':>10}  {'':>12}  {f['submit_ms']:9.2f}")
            continue
        build = "" if f["build_s"] is None else f"{f['build_s']:.1f}"
        print(
            f"{design:<6}  {build:>7}  {f['bytes'] / 1e6:8.1f}  {f['rare_ms']:10.2f}  "
            f"{f['common_ms']:12.2f}  {f['submit_ms']:9.2f}"
        )
    print(json.dumps({"bench": "search_designs", "runs": runs, "designs": figures}))


if __name__ == "__main__":
    main()
