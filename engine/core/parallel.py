"""Running one function over many graphs: in this process, in local worker processes
(`--jobs N`), or on a Dask cluster (`--scheduler tcp://HOST:PORT`, or `local` for a
LocalCluster on this machine; the optional `dask` extra).

Results come back in the order of the inputs whatever the backend, as soon as each is
ready (later ones wait in a buffer), so the outputs are byte-identical to `--jobs 1`.
The function must be importable by the workers (a module-level function) and its
argument plain data: on Dask the workers read the graphs themselves, so the paths must
be ones the workers can open (a shared file system).
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterable, Iterator

from engine.core.errors import InputError, Loc, Problem


def check_jobs(jobs: int | None, scheduler: str | None) -> int:
    """The worker count (`--jobs`; default: the CPU count), checked."""
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if n < 1:
        raise InputError(Problem(Loc("--jobs"), f"--jobs must be at least 1, not {n}", "e.g. --jobs 2"))
    if scheduler is not None and scheduler != "local" and "://" not in scheduler:
        raise InputError(Problem(Loc("--scheduler"), f"not a scheduler address: '{scheduler}'",
                                 "give tcp://HOST:PORT of a running dask scheduler, or 'local'"))
    if scheduler is not None:
        try:
            import distributed  # noqa: F401  (present: the extra is installed)
        except ImportError:
            raise InputError(Problem(Loc("--scheduler"), "--scheduler needs dask.distributed, which is not installed",
                                     "pip install 'memconflict[dask]' (or: pip install distributed)")) from None
    return n


def map_ordered(fn: Callable[[Any], Any], items: Iterable[Any], jobs: int = 1,
                scheduler: str | None = None) -> Iterator[Any]:
    """fn(item) for each item, yielded in input order."""
    items = list(items)
    if scheduler is not None:
        yield from _dask(fn, items, jobs, scheduler)
    elif jobs <= 1 or len(items) <= 1:
        for item in items:
            yield fn(item)
    else:
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(items)), mp_context=ctx) as ex:
            yield from ex.map(fn, items)


def _dask(fn, items: list, jobs: int, scheduler: str) -> Iterator[Any]:
    import logging

    from distributed import Client, LocalCluster, as_completed

    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=min(jobs, max(1, len(items))), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError) as exc:
                raise InputError(Problem(Loc("--scheduler"), f"cannot reach the dask scheduler at {scheduler}: {exc}",
                                         "start one with `dask scheduler` and workers with `dask worker ADDRESS`")) from None
        try:
            futures = client.map(fn, items, pure=False)
            index = {f.key: k for k, f in enumerate(futures)}
            ready: dict[int, Any] = {}
            nxt = 0
            for fut in as_completed(futures):
                ready[index[fut.key]] = fut.result()
                fut.release()
                while nxt in ready:
                    yield ready.pop(nxt)
                    nxt += 1
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
