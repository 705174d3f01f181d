"""A worker's Prometheus metrics (`jobdesk worker --metrics-port P`).

The hot path only bumps plain integers and bucket slots in this module's objects; nothing there
takes a lock or builds a label set. A collector turns them into metric families when Prometheus
scrapes, on the HTTP server's thread. Labels are the job type only, so the series stay bounded
by the types a worker serves.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from jobdesk.core.errors import SettingsError

log = logging.getLogger("jobdesk.worker")

# Seconds; from a no-op job's fraction of a millisecond to a long render.
RUN_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600)


class Histogram:
    """Bucket counts and a sum, observed without a lock (the event loop is the only writer)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[list[tuple[str, float]], float]:
        counts, total = list(self.counts), self.total  # one snapshot for the scrape
        buckets: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), counts):
            running += n
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return buckets, total


class TypeStats:
    """What happened to the jobs of one type in this worker."""

    __slots__ = ("started", "completed", "failed", "retried", "cancelled", "suspended", "woken", "run", "wait")

    def __init__(self) -> None:
        self.started = 0
        self.completed = 0
        self.failed = 0
        self.retried = 0
        self.cancelled = 0
        self.suspended = 0
        self.woken = 0
        self.run = Histogram(RUN_BUCKETS)
        self.wait = Histogram(WAIT_BUCKETS)


COUNTERS = (("started", "jobs this worker started"),
            ("completed", "jobs this worker completed (or left waiting for approval)"),
            ("failed", "jobs that failed for good in this worker"),
            ("retried", "failed attempts put back in the queue for a retry"),
            ("cancelled", "running jobs stopped by an operator's cancel"),
            ("suspended", "jobs suspended by a durable sleep or wait, their slot freed"),
            ("woken", "suspended jobs that ran again and found their sleep or wait over"))


class WorkerMetrics:
    """The figures of one worker process."""

    def __init__(self, types: list[str], in_flight: Callable[[], int], round_trips: Callable[[], int]) -> None:
        """`in_flight` and `round_trips` are read at scrape time from the worker's own figures."""
        # One entry per served type from the start: a type that has done nothing shows zeros.
        self.by_type: dict[str, TypeStats] = {t: TypeStats() for t in types}
        self.in_flight = in_flight
        self.round_trips = round_trips
        self.db_errors = 0
        self.db_reconnects = 0
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def of(self, job_type: str) -> TypeStats:
        stats = self.by_type.get(job_type)
        if stats is None:
            stats = self.by_type[job_type] = TypeStats()
        return stats

    # -- serving ----------------------------------------------------------------------------

    def registry(self) -> CollectorRegistry:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return registry

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped from other hosts
        """Serve /metrics on `port` from a daemon thread (0 picks a free port; see `port`)."""
        try:
            self._server, self._thread = start_http_server(port, addr=addr, registry=self.registry())
        except OSError as exc:
            raise SettingsError(f"cannot serve metrics on port {port}: {exc.strerror or exc}") from None
        log.info("serving Prometheus metrics on port %d", self.port)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else 0

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


class _Collector(Collector):
    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        stats = list(m.by_type.items())
        for name, doc in COUNTERS:
            family = CounterMetricFamily(f"jobdesk_jobs_{name}", doc.capitalize(), labels=["type"])
            for job_type, s in stats:
                family.add_metric([job_type], getattr(s, name))
            yield family
        for attr, name, doc in (("run", "jobdesk_job_run_seconds", "Run time of an attempt, start to finish"),
                                ("wait", "jobdesk_job_queue_wait_seconds",
                                 "From enqueue, or from the retry time, to the start of an attempt")):
            hist = HistogramMetricFamily(name, doc, labels=["type"])
            for job_type, s in stats:
                buckets, total = getattr(s, attr).cumulative()
                hist.add_metric([job_type], buckets, total)
            yield hist
        yield GaugeMetricFamily("jobdesk_jobs_in_flight", "Jobs running in this worker now", value=m.in_flight())
        yield CounterMetricFamily("jobdesk_claim_round_trips", "Statements that claimed jobs or recorded "
                                  "plain results", value=m.round_trips())
        yield CounterMetricFamily("jobdesk_db_errors", "Database calls that failed because the database "
                                  "was unreachable", value=m.db_errors)
        yield CounterMetricFamily("jobdesk_db_reconnects", "Times the database answered again after an "
                                  "outage", value=m.db_reconnects)
