"""Scale out: the 10-step pure chain with 1, 2 and 4 worker processes, in
one or two worker groups (separate `celery worker` nodes on the same queue, as two
hosts would be), and the CPU each part used meanwhile: which one saturates.

    DATABASE_URL=… CELERY_BROKER_URL=… .venv/bin/python bench/scale_out.py [--runs 200]

Two cores on the reference machine: the CPU seconds are out of 2 x the elapsed time.
"""

from __future__ import annotations

import argparse
import json

from django.core.management import call_command
from engine import measure

from runs import engine

LAYOUTS = {
    "1 process (1 group x -c 1)": (1,),
    "2 processes (2 groups x -c 1)": (1, 1),
    "4 processes (2 groups x -c 2)": (2, 2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    rows = []
    for label, groups in LAYOUTS.items():
        cpu: dict[str, float] = {}
        phase = measure(
            label,
            lambda: [
                engine.submit_run(workflow="bench-chain-pure", input={"n": i})
                for i in range(args.runs)
            ],
            args.runs * 10,
            groups=groups,
            cpu=cpu,
        )
        available = 2 * phase.elapsed
        rows.append(
            {
                "layout": label,
                "steps_per_s": round(phase.rate, 1),
                "cpu_share": {
                    k: round(v if k == "machine_busy" else v / available, 2) for k, v in cpu.items()
                },
                "commits_per_step": round(phase.per_unit("xact_commit"), 2),
            }
        )
    print(
        f"| {'layout':<30} | steps/s | CPU share of 2 cores: workers / postgres / redis "
        "| whole machine (all users) |"
    )
    print(f"|{'-' * 32}|---------|------|------|")
    for r in rows:
        share = r["cpu_share"]
        print(
            f"| {r['layout']:<30} | {r['steps_per_s']:>7,.0f} | "
            f"{share.get('workers', 0):.0%} / {share.get('postgres', 0):.0%} / "
            f"{share.get('redis', 0):.0%} | {share.get('machine_busy', 0):.0%} |"
        )
    print(json.dumps({"bench": "scale_out", "rows": rows}))


if __name__ == "__main__":
    main()
