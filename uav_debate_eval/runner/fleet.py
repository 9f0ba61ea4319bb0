"""Fleet batches on a Dask distributed cluster (`evaluate DIR --scheduler ADDRESS`, CONTRACT.md §4).

One flight is one task. Each task writes its own report folder (the workers need the inputs and the
output directory on a shared file system, as on any cluster) and returns its summary row; the rows come
back in input order, so summary.csv is the same as with `--jobs`. A task whose worker dies is run again
by the scheduler (its `allowed-failures`); if it keeps killing workers, or the cluster loses it, the row
says so (status `error`) and the rest of the batch goes on. The scheduler also counts a death against the
tasks waiting on that worker, so a flight can be declared a killer beside one that really is: every task
given up that way runs once more at the end, alone, and only a flight that kills its worker on its own is lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from uav_debate_eval.core.errors import InputError

#: Extra attempts for a task that raised (the batch task itself never raises; this covers lost workers).
TASK_RETRIES = 2
CONNECT_TIMEOUT_S = 20


def connect(address: str):
    """A Client for ADDRESS, or for a new LocalCluster sized to this machine when ADDRESS is `local`."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - dask[distributed] is a pinned dependency
        raise InputError("--scheduler: dask[distributed] is not installed (pip install -r requirements.txt)") from None
    if address == "local":
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        return Client(cluster), cluster
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S), None
    except (OSError, TimeoutError, ValueError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"--scheduler {address}: cannot reach the Dask scheduler: {reason}") from None


def run_on_dask(fn: Callable[..., dict], calls: list[tuple], address: str, failed_row: Callable[[tuple, str], dict],
                progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """fn(*call) for every call, one task each on the cluster; rows in call order (failures as rows)."""
    from distributed import KilledWorker, as_completed

    client, cluster = connect(address)
    rows: list[Any] = [None] * len(calls)
    done = 0

    def finish(i: int, future) -> None:
        nonlocal done
        if future.status == "finished":
            rows[i] = future.result()
        else:
            exc = future.exception()
            rows[i] = failed_row(calls[i], f"lost on the cluster: {type(exc).__name__}: {exc}")
        done += 1
        if progress is not None:
            progress(done, len(calls))

    try:
        futures = [client.submit(fn, *call, pure=False, retries=TASK_RETRIES) for call in calls]
        index = {f.key: i for i, f in enumerate(futures)}
        suspects = []
        for future in as_completed(futures):
            if future.status != "finished" and isinstance(future.exception(), KilledWorker):
                suspects.append(index[future.key])  # perhaps only queued beside the killer: see below
            else:
                finish(index[future.key], future)
        for i in sorted(suspects):  # alone on the cluster now: its own death is its own
            retry = client.submit(fn, *calls[i], pure=False, retries=TASK_RETRIES)
            next(as_completed([retry]))
            finish(i, retry)
        return rows
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
