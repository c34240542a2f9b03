"""The two ways to index a declared search field, measured on the seeded UI database
(bench/seed_ui.py), for docs/performance.md#search-fields:

    DATABASE_URL=… .venv/bin/python bench/search_designs.py [--lookups 20] [--submits 300]
    DATABASE_URL=… .venv/bin/python bench/search_designs.py --make 1000000 --database NAME

`--make N` first fills a database of its own (created and migrated if missing, emptied
if it holds runs) with N finished runs and their search keys, written directly by
`INSERT … SELECT` (no steps, no events: a million runs in minutes, where the full UI seed
clones ten million events): a fifth merge-change runs, each with a change id of its own,
two thirds charge-payment runs sharing a handful of amounts, the rest migrate-records
(no search field), created over 30 days; and then also times the search pages
(bench/ui.py's measure: the runs list filtered by a field, the search box by a field's
value, the API's filter).

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
    from runs.engine import tools
    from runs.workflows import registry

    wf = registry.latest("merge-change")
    assert wf is not None
    declared = wf.search
    wf.search = declared if with_search else ()

    class Rollback(Exception):
        pass

    try:
        with mock.patch.object(tools.publish, "send"):
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


MAKE_RUNS = """
INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, last_seq,
    steps_remaining, created_at, updated_at, finished_at, submitted_by, submitted_via,
    error, ends_as)
SELECT gen_random_uuid(), w.workflow, 1, w.input, 'succeeded', 1, 0, 0,
    t.at, t.at, t.at + interval '5 seconds', '', '', '', ''
FROM generate_series(1, %(runs)s) AS n
CROSS JOIN LATERAL (
    SELECT now() - (%(runs)s - n) * (interval '30 days' / %(runs)s) AS at) AS t
CROSS JOIN LATERAL (
    SELECT CASE WHEN n %% 5 = 0 THEN 'merge-change'
                WHEN n %% 7 = 0 THEN 'migrate-records' ELSE 'charge-payment' END AS workflow,
           CASE WHEN n %% 5 = 0 THEN jsonb_build_object('change_id', 1000000 + n)
                WHEN n %% 7 = 0 THEN jsonb_build_object('count', 20, 'batch_size', 5)
                ELSE jsonb_build_object('amount', (ARRAY[1250, 1250, 1250, 990, 4000])[1 + n %% 5])
           END AS input) AS w
"""
# What the submission writes for those runs (runs/engine/policies/submit.sql).
MAKE_KEYS = """
INSERT INTO runs_runsearchkey (run_id, workflow, field, value, created_at)
SELECT id, workflow, k.field, input->>k.field, created_at
FROM runs_run
CROSS JOIN LATERAL (SELECT CASE workflow WHEN 'merge-change' THEN 'change_id'
                                         ELSE 'amount' END AS field) AS k
WHERE workflow IN ('merge-change', 'charge-payment')
ORDER BY created_at
"""


def make(runs: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    t0 = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE runs_run CASCADE")
        cursor.execute(MAKE_RUNS, {"runs": runs})
        cursor.execute(MAKE_KEYS)
        cursor.execute("VACUUM ANALYZE runs_run")
        cursor.execute("VACUUM ANALYZE runs_runsearchkey")
    print(f"made {runs:,} runs and their search keys in {time.monotonic() - t0:.0f}s", flush=True)


def pages(change_id: str, amount: str, requests: int) -> dict[str, dict[str, float]]:
    """Server time of the search pages, as bench/ui.py measures every page."""
    import ui  # bench/
    from django.conf import settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = ui.operator_client()
    paths = {
        "runs list filtered by a search field": f"/runs/?field=change_id&value={change_id}",
        "runs list, a value most charges share": f"/runs/?field=amount&value={amount}",
        "search box by a field value": f"/runs/?q={change_id}",
        "api runs, search field": f"/api/runs/?field=change_id&value={change_id}",
    }
    found = {}
    for name, path in paths.items():
        f = ui.measure(client, name, path, {}, 3, requests)
        found[name] = {
            "median_ms": round(f.median_ms, 1),
            "p95_ms": round(f.p95_ms, 1),
            "queries": f.queries,
            "db_ms": round(f.db_ms, 1),
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="default: <DATABASE_URL's name>_ui_bench")
    parser.add_argument("--lookups", type=int, default=20, help="change ids looked up")
    parser.add_argument("--submits", type=int, default=300)
    parser.add_argument("--make", type=int, metavar="RUNS", help="make a database of RUNS runs")
    parser.add_argument("--requests", type=int, default=20, help="per page, with --make")
    args = parser.parse_args()
    uidb.use_bench_database(args.database)
    uidb.setup_django()
    from django.db import connection

    if args.make:
        make(args.make)

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
    timed_pages = pages(rare[len(rare) // 2][1], amount, args.requests) if args.make else {}

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
    for name, page in timed_pages.items():
        print(
            f"{name}: median {page['median_ms']} ms, p95 {page['p95_ms']} ms, "
            f"{page['queries']} queries ({page['db_ms']} ms)"
        )
    print(
        json.dumps(
            {"bench": "search_designs", "runs": runs, "designs": figures, "pages": timed_pages}
        )
    )


if __name__ == "__main__":
    main()
