import sys, time
import common
import psutil
from django.core.management import call_command
from django.db import connection
from runs import engine
from runs.models import Run
call_command("migrate", verbosity=0)
wf = sys.argv[1]; n = int(sys.argv[2])
ids = [engine.submit_run(workflow=wf, input={"n": i}).id for i in range(n)]
with connection.cursor() as c:
    try:
        c.execute("select pg_stat_statements_reset()")
    except Exception:
        pass
common.close_django()
counters = common.DbCounters()
def left():
    return counters.poll("SELECT count(*) FROM runs_run WHERE status IN ('pending','running','waiting') AND id = ANY(%s)", [ids])[0][0]
t0 = time.time()
with common.Workers(groups=(2,)) as w:
    time.sleep(1.0)
    pgs = {p: psutil.Process(p) for p in common.postgres_backends(common.settings.DATABASES["default"]["NAME"])}
    cpu0 = {p: sum(pr.cpu_times()[:2]) for p, pr in pgs.items()}
    wp = {p: psutil.Process(p) for p in w.pids()}
    wcpu0 = {p: sum(pr.cpu_times()[:2]) for p, pr in wp.items()}
    common.wait_until(lambda: left() == 0, 600, every=0.5)
    cpu1 = {p: sum(pr.cpu_times()[:2]) for p, pr in pgs.items()}
    wcpu1 = {p: sum(pr.cpu_times()[:2]) for p, pr in wp.items()}
print("elapsed", time.time() - t0)
print("pg backends cpu", sorted(round(cpu1[p]-cpu0[p], 2) for p in pgs))
print("worker procs cpu", sorted(round(wcpu1[p]-wcpu0[p], 2) for p in wp))
from django.db import connection
with connection.cursor() as c:
    try:
        c.execute("select calls, round(total_plan_time::numeric,1), round(total_exec_time::numeric,1), round(mean_exec_time::numeric,3), rows, left(regexp_replace(query,'\\s+',' ','g'),100) from pg_stat_statements where dbid=(select oid from pg_database where datname=current_database()) order by total_exec_time desc limit 14")
        for r in c.fetchall(): print(r)
    except Exception as e:
        print(e)
