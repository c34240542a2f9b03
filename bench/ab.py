"""A/B of the cost table: two commits' `bench/engine.py --costs-only`, interleaved.

    .venv/bin/python bench/ab.py BASE CHANGE [--rounds 3] [--runs 200] [--items 2000]

Each commit is checked out once into a worktree of its own (under /tmp), with its own
embedded servers (DURABLE_RUNS_VAR: a migration on one side never reaches the other's
database), and the two are run in turn, A B B A A B ..., so the machine's drift (and
the second of a pair following the first's shutdown) falls on both. Prints, per
figure, each side's median and its spread (min-max over the rounds), and the change's
median as a fraction of the base's. The spread is the machine's: a difference inside
both sides' spreads is not one; the ceiling, which no commit changes, shows what the
machine did meanwhile. Figures, never assertions."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"

FIGURES = (
    ("cost_pure_worker_cpu_ms", "chain: CPU ms/step, workers", "{:.3f}"),
    ("cost_pure_postgres_cpu_ms", "chain: CPU ms/step, PostgreSQL", "{:.3f}"),
    ("cost_pure_cpu_ms", "chain: CPU ms/step, both", "{:.3f}"),
    ("cost_pure_rows", "chain: rows/step", "{:.2f}"),
    ("cost_pure_wal_records", "chain: WAL records/step", "{:.1f}"),
    ("cost_pure_wal_bytes", "chain: WAL bytes/step", "{:,.0f}"),
    ("chain_pure_steps_per_s", "chain: steps/s", "{:,.0f}"),
    ("cost_map_cpu_ms", "map: CPU ms/item, both", "{:.3f}"),
    ("cost_map_wal_records", "map: WAL records/item", "{:.1f}"),
    ("map_items_per_s", "map: items/s", "{:,.0f}"),
    ("ceiling_tx_per_s", "ceiling: tx/s", "{:,.0f}"),
    ("map_floor_per_s", "map floor: items/s", "{:,.0f}"),
)


def checkout(rev: str, label: str) -> Path:
    """A worktree of `rev` (re-created each time), sharing this checkout's .venv."""
    path = Path(f"/tmp/ab-{label}")
    subprocess.run(
        ["git", "worktree", "remove", "--force", str(path)],
        cwd=ROOT,
        check=False,
        capture_output=True,
    )
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), rev],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    return path


def once(tree: Path, label: str, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, DURABLE_RUNS_VAR=f"/tmp/var-ab-{label}")
    # The worktree's code, this checkout's interpreter: `python -m celery` and
    # bench/common.py put the worktree first on sys.path.
    env["PYTHONPATH"] = str(tree)
    out = subprocess.run(
        [
            str(PYTHON),
            str(tree / "scripts" / "stack.py"),
            "run",
            str(PYTHON),
            str(tree / "bench" / "engine.py"),
            "--costs-only",
            "--skip-peer",
            *("--runs", str(args.runs), "--items", str(args.items)),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"bench": "costs"')]
    if out.returncode != 0 or not lines:
        sys.exit(f"{label}: bench failed\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(lines[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--items", type=int, default=2000)
    args = parser.parse_args()
    trees = {"A": checkout(args.base, "A"), "B": checkout(args.change, "B")}
    for label in trees:
        # Fresh servers: a database an earlier A/B migrated further (an index a later
        # commit adds) must not stand in for this base's.
        shutil.rmtree(f"/tmp/var-ab-{label}", ignore_errors=True)
    seen: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for round_ in range(args.rounds):
        # A B, then B A, ...: whichever runs second follows the other's servers shutting
        # down (their checkpoint), and that must not always fall on the same side.
        order = ("A", "B") if round_ % 2 == 0 else ("B", "A")
        for label in order:
            tree = trees[label]
            seen[label].append(once(tree, label, args))
            print(
                f"round {round_ + 1} {label}: chain "
                f"{seen[label][-1]['cost_pure_cpu_ms']:.3f} ms/step",
                file=sys.stderr,
            )
    print(
        f"A = {args.base}, B = {args.change}; {args.rounds} interleaved rounds, "
        f"{args.runs} chains of 10 pure steps, {args.items} map items"
    )
    print("| figure | A median (min-max) | B median (min-max) | B/A |")
    print("|---|---|---|---|")
    for key, label, shape in FIGURES:
        if not all(key in r for side in ("A", "B") for r in seen[side]):
            continue  # a figure one side's bench does not print yet
        cells = []
        medians = []
        for side in ("A", "B"):
            values = [r[key] for r in seen[side]]
            medians.append(statistics.median(values))
            cells.append(
                f"{shape.format(medians[-1])} ({shape.format(min(values))}-"
                f"{shape.format(max(values))})"
            )
        ratio = medians[1] / medians[0] if medians[0] else float("nan")
        print(f"| {label} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    print(
        json.dumps(
            {
                "bench": "ab",
                "base": args.base,
                "change": args.change,
                "A": seen["A"],
                "B": seen["B"],
            }
        )
    )


if __name__ == "__main__":
    main()
