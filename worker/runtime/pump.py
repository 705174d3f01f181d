"""The claim pumps: each round writes the plain results that finished and claims more work, in
one statement, on a connection of its own; their lanes, and the wake-ups (`Kicks`) that start a
round when there is something to do."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import replace

from jobdesk.core.limits import ClaimLimits, describe
from jobdesk.core.models import Job
from jobdesk.runtime.execution import PREFETCH_PER_SLOT, PREFETCH_PER_SLOT_LIMITED, Execution
from jobdesk.runtime.outcomes import Finished
from jobdesk.runtime.parts import Claiming, Shared
from jobdesk.store import flow_limits, transitions, type_limits, user_index

log = logging.getLogger("jobdesk.worker")

# Two pumps, each on its own connection and in its own lane of the jobs (transitions.Lane): while
# one waits for PostgreSQL the other's jobs run, so the worker's Python and the database's work
# overlap instead of taking turns; while one pump waits, the other claims every lane. Each lane's
# walk also reads the other lane's rows, and a round carries half of the slots' jobs: with 6 jobs
# held per slot, one pump was cheaper (1,002 round trips instead of 1,539-1,801 for 20,000 no-op
# jobs on a loaded machine). With 12 per slot (execution.PREFETCH_PER_SLOT) each pump's rounds
# carry about 20 jobs each way, and two pumps drain 20,000 no-op jobs in 10 slots half again as
# fast as one on 2 cores (a tenth faster with one core taken by other work), for the same worker
# CPU per job and about a sixth more of PostgreSQL's (docs/performance.md, "Two claim loops").
PUMPS = 2
FLOORS_KEPT_S = 1.0  # the longest the walk floors are kept without news (see Pumps._floors)


class Kicks:
    """A wake-up flag per pump: a kick (a stop, a resume) reaches every pump, and each pump
    clears only its own, when it starts a round, so none misses a kick meant for its lane.

    A finished job wakes one waiting pump only (`one`), in turn: any pump writes it, and waking
    both sent the second one on a claim that found nothing. New work wakes every pump, or one
    when all wait (`new_work`), which then claims every lane (`alone`). Under a trickle of jobs
    from the HTTP API, this took the worker from 1,844 round trips for 6,380 jobs to 639 for
    6,380. A pump looks at the finished jobs before it waits again, so none is left when every
    pump was in a round."""

    def __init__(self, pumps: int) -> None:
        self._events = [asyncio.Event() for _ in range(pumps)]
        self._waiting = [False] * pumps
        self._turn = 0
        self.news = 0  # counts the kicks other than a finished job's: new work, a resume, a stop...

    def set(self, *, but: int | None = None, news: bool = True) -> None:
        """Wake every pump (`but` one). `news`: the kick may mean a job below the walk floors."""
        if news:
            self.news += 1
        for i, event in enumerate(self._events):
            if i != but:
                event.set()

    def new_work(self, *, news: bool = True) -> None:
        """New jobs were announced: wake every pump, or one when all of them wait. That one
        claims every lane (`alone`): a lone batch of jobs then costs one claim, not one per lane.
        Without `news`, the announcement said where the jobs are (see Pumps.new_work)."""
        if news:
            self.news += 1
        if all(self._waiting):
            self.one()
        else:
            self.set(news=False)

    def alone(self, pump: int) -> bool:
        """Whether every other pump waits, and none was woken yet: this one's claim cannot meet
        theirs, and takes every lane. (One woken but not yet running is about to claim.)"""
        return all(self._waiting[i] and not self._events[i].is_set() for i in range(len(self._events)) if i != pump)

    def one(self) -> None:
        """Wake the next waiting pump, if any waits and none is woken already (the jobs that
        finish until it runs are all its own)."""
        count = len(self._events)
        if any(self._waiting[i] and self._events[i].is_set() for i in range(count)):
            return
        for step in range(count):
            i = (self._turn + step) % count
            if self._waiting[i]:
                self._turn = i + 1
                self._events[i].set()
                return

    def of(self, pump: int) -> asyncio.Event:
        return self._events[pump]

    async def wait(self, pump: int, timeout: float | None = None) -> None:
        """Wait for this pump's kick, at most `timeout` seconds (TimeoutError)."""
        self._waiting[pump] = True
        try:
            if timeout is None:
                await self._events[pump].wait()
            else:
                async with asyncio.timeout(timeout):
                    await self._events[pump].wait()
        finally:
            self._waiting[pump] = False


class Pumps:
    """The PUMPS claim loops of one worker, and what they share: the slots a claim in flight may
    fill (`_reserved`), the claim limits of its types, and whether claims are paused."""

    def __init__(self, shared: Shared, execution: Execution, claiming: Claiming,
                 hearing: Callable[[], bool] = lambda: False) -> None:
        """Once `shared.stop` is set the pumps claim nothing, write what finishes, and return.
        `hearing()`: whether the worker hears the NOTIFYs of new work now."""
        self.db = shared.db
        self.execution = execution
        self.outcomes = shared.outcomes
        self.kicks = shared.kicks
        self.worker_id = shared.worker_id
        self.types = claiming.types
        self.poll = claiming.poll
        self.limits = claiming.limits
        self.stats = shared.stats
        self.stop = shared.stop
        self.paused = False  # an operator paused claims
        self.walks_users = False  # some type's claims walk its users (fair share, per-user limits)
        self.paused_types: frozenset[str] = frozenset()  # types paused across the fleet (see type_watch)
        self._open_types = claiming.types  # the types a claim may take: those not paused
        self.tasks: list[asyncio.Task[None]] = []
        self._reserved = 0  # slots a claim in flight may fill
        self._free_idle_since: float | None = None  # the unlimited types had nothing to claim (see _round)
        self._starved = False  # a pump found every free slot reserved by another (see _pump)
        self._held: dict[str, float] = {}  # flow-controlled types held back: until when (monotonic)
        self._held_by_limits: set[str] = set()  # those held by a limit a job's end lifts (not a rate)
        self.hearing = hearing
        self.floors = transitions.LaneFloors(PUMPS)  # where each lane's walk of a type starts (see _floors)
        self._floors_news = 0  # the kicks' news when the floors were last cleared
        # Per pump, the lowest new jobs announced during its round in flight.
        self._lowered: list[tuple[int, int] | None] = [None] * PUMPS
        self._warmed = False  # the processors' first-use imports are done (see _rest)

    def start(self) -> list[asyncio.Task[None]]:
        self.tasks = [asyncio.create_task(self._pump(i), name=f"jobdesk-pump-{i + 1}") for i in range(PUMPS)]
        return self.tasks

    def set_paused_types(self, paused: frozenset[str]) -> None:
        """Leave these types out of every claim from now on; a type resumed is claimed at once."""
        resumed = self.paused_types - paused
        self.paused_types = paused
        self._open_types = [t for t in self.types if t not in paused] if paused else self.types
        if resumed:
            self._free_idle_since = None
            self.kicks.set()

    def new_work(self, low: tuple[int, int] | None = None) -> None:
        """New jobs were announced: look for work now. `low`: how low they go in walk order
        (new jobs say it): the walk floors come down to it, instead of being cleared."""
        self._free_idle_since = None
        if low is None:
            self.kicks.new_work()
            return
        self.floors.lower(low)
        for i, lowered in enumerate(self._lowered):
            if lowered is None or transitions.before_in_walk(low, lowered):
                self._lowered[i] = low  # a round in flight raises the floors: lowered again after it
        self.kicks.new_work(news=False)

    async def refresh_limits(self) -> None:
        """Learn which of this worker's types have a global limit (another worker may have set
        one since): those are claimed under their limit, every other type as before."""
        fleet = await self.db.call(lambda c: type_limits.global_limits(c, self.types))
        if frozenset(fleet) != self.limits.fleet:
            self.limits = replace(self.limits, fleet=frozenset(fleet))
            if fleet:
                log.info("type limits: %s", ", ".join(f"{t}={n}" for t, n in sorted(fleet.items())))
        flows = await self.db.call(lambda c: flow_limits.flow_limits(c, self.types))
        self.walks_users = any(user_index.walks_users(f) for f in flows.values())
        if frozenset(flows) != self.limits.flow:
            self.limits = replace(self.limits, flow=frozenset(flows))
            if flows:
                log.info("flow control: %s", "; ".join(f"{t} {describe(f)}" for t, f in flows.items()))

    async def _pump(self, index: int) -> None:
        """Record plain results and claim more work (of this pump's lane), one statement per round.

        PUMPS of them may run at once on separate connections; `_reserved` keeps them from
        claiming the same slots twice. Each asks for at most its share of the open slots, so that
        a pump whose lane is empty does not hold the slots another's lane could fill; a pump that
        found every slot reserved is woken when the holder gives back slots it did not fill.
        While the worker serves a limited type, the first pump alone claims, every lane: a limited
        claim is one serialized round, which a second pump would only cut in two. (Tried without
        the lock, as a swap of each round's finished jobs for as many new ones in the pump's own
        lane: with a limit of 10, two pumps carried 3.4 jobs per round trip instead of 10, and
        PostgreSQL's CPU per job grew by half, for 20-35 % fewer jobs/s than one pump.)
        """
        kick = self.kicks.of(index)
        execution, outcomes = self.execution, self.outcomes
        while True:
            kick.clear()  # a kick from now on is for the round below, or ends its wait
            limits = self.limits if self.limits.fleet or self.limits.local or self.limits.flow else None
            # A held type is left out (and while it is, both pumps claim), unless a job of it
            # that ends now frees a slot of its limits.
            types = self._claimable(outcomes.plain_done)
            limited = limits.limited(types) if limits is not None else []
            solo = any(t in self.limits.fleet or t in self.limits.local for t in limited) or PUMPS == 1
            if solo and index > 0:
                if self.stop.is_set():
                    return
                if outcomes.plain_done:
                    # A job's end woke this pump (it waited while both claimed): the first one,
                    # which alone claims now, may wait for no other end to write it.
                    self.kicks.one()
                await asyncio.sleep(self.poll)
                continue
            alone = solo or self.kicks.alone(index)  # the other pumps wait: claim every lane
            lane: transitions.Lane = None if alone else (index, PUMPS)
            finished, outcomes.plain_done = outcomes.plain_done, []
            free = self._share(alone, bool(limited))
            if free <= 0 and not finished:
                if self.stop.is_set() and not execution.running and not outcomes.plain_done:
                    self.kicks.set()  # let the other pump see it too
                    return
                if self._reserved:
                    self._starved = True
                await self.kicks.wait(index)
                continue
            free = max(free, 0)
            jobs = await self._round(index, finished, free, types, limits, limited, lane)
            if len(jobs) < free and self._starved:
                self._starved = False
                # Slots this pump held and did not fill: another's lane may fill them.
                self.kicks.set(but=index, news=False)
            if finished:
                await asyncio.sleep(0)  # jobs that finish in this same tick join the next round
            # Go on at once while there may be more: a full claim, or jobs finished meanwhile.
            # Otherwise sleep until a NOTIFY (dependants released by a completion are announced
            # too), a finished job or the poll interval; a kick that came during the round ends
            # the wait at once. A round that completed jobs used to go on at once as well, and
            # under a trickle of jobs its claim found nothing: a third of all round trips.
            if len(jobs) < free and not outcomes.plain_done:
                await self._rest(index)

    def _share(self, alone: bool, limited: bool) -> int:
        """How many jobs this pump may claim now: the open slots less those another pump holds,
        and while the pumps share the lanes, at most this pump's share of the open slots. Fewer
        are held ahead while a `limited` type is claimed (execution.PREFETCH_PER_SLOT_LIMITED)."""
        execution = self.execution
        per_slot = PREFETCH_PER_SLOT_LIMITED if limited else PREFETCH_PER_SLOT
        open_slots = 0 if self.stop.is_set() or self.paused else (
            execution.capacity(per_slot) - len(execution.running) - len(execution.ready))
        if alone:
            return open_slots - self._reserved
        return min(open_slots - self._reserved, -(-open_slots // PUMPS))

    async def _rest(self, index: int) -> None:
        """Wait for a kick (a NOTIFY, a finished job) or the poll interval, whichever comes first.
        The first rest loads what the processors' first jobs would (Execution.warm)."""
        if not self._warmed:
            self._warmed = True
            self.execution.warm()
        try:
            await self.kicks.wait(index, self._wait_s())
        except TimeoutError:
            pass

    def _claimable(self, ending: list[Finished]) -> list[str]:
        """The worker's types less the flow-controlled ones held back (their rate allows no start
        yet, or their limits leave no room): a claim of those would find nothing, so neither new
        work nor a finished job sends one until the time comes. A type held by its limits and
        of which a job is `ending` is claimed again. Types paused across the fleet are left out."""
        if not self._held:  # the usual case, every round: nothing more to look at
            return self._open_types
        now = time.monotonic()
        ending_types = {job.type for job, _ in ending}
        self._held = {t: until for t, until in self._held.items()
                      if until > now and not (t in ending_types and t in self._held_by_limits)}
        return [t for t in self._open_types if t not in self._held]

    def _wait_s(self) -> float:
        """How long a pump with nothing to do waits: the poll interval, or less when a held type's
        next start comes sooner."""
        if not self._held:
            return self.poll
        return max(0.0, min(self.poll, min(self._held.values()) - time.monotonic()))

    def _hold(self, held: dict[str, float]) -> None:
        """Hold back the types a claim said are held: until their next start, or for the poll
        interval when a job's end elsewhere lifts the hold (no notification tells of it)."""
        now = time.monotonic()
        for job_type, seconds in held.items():
            self._held[job_type] = now + (seconds if math.isfinite(seconds) else self.poll)
            if math.isfinite(seconds):
                self._held_by_limits.discard(job_type)
            else:
                self._held_by_limits.add(job_type)

    def _floors(self, lane: transitions.Lane) -> transitions.WalkFloors:
        """The walk floors for the next round in `lane`, all cleared first when news came since
        they were last (new work, a job back in the queue, a resume: the news names no type),
        before every round while no NOTIFY can be heard, and once a second at least, for what
        no news covers (see transitions.floors)."""
        floors = self.floors
        if (self.kicks.news != self._floors_news or not self.hearing()
                or time.monotonic() - floors.cleared_at >= FLOORS_KEPT_S):
            self._floors_news = self.kicks.news
            floors.clear()
        return floors.of(lane)

    async def _round(self, index: int, finished: list[Finished], free: int, types: list[str],
                     limits: ClaimLimits | None, limited: list[str], lane: transitions.Lane) -> list[Job]:
        """One round trip: write `finished` and claim up to `free` jobs, which start as slots allow."""
        self._reserved += free
        writing = {j.id for j, _ in finished}
        outcomes = self.outcomes
        outcomes.writing |= writing
        try:
            skip_free = (self._free_idle_since is not None and bool(limited) and free > 0
                         and time.monotonic() - self._free_idle_since < self.poll)
            held: dict[str, float] = {}
            floors, news = self._floors(lane), self.kicks.news
            self._lowered[index] = None
            written, jobs = await self.db.call(lambda c: transitions.complete_and_claim(
                c, self.worker_id, types, free, finished, limits, free_idle=skip_free, lane=lane, held=held,
                floors=floors))
            if self.kicks.news != news:
                self.floors.clear()  # news came during the round: what it claimed raises no floor
            else:
                if lane is None:
                    self.floors.settle(floors)  # a walk of every lane: each lane's floors may rise
                lowered = self._lowered[index]
                if lowered is not None:
                    self.floors.lower(lowered)  # new jobs the round's snapshot may not have seen
            if held:
                self._hold(held)
            if limited and free > 0 and not skip_free:
                # The unlimited types gave nothing: leave them out until new work is announced
                # or the poll interval passes (jobs whose retry time comes wake nobody).
                self._free_idle_since = None if any(j.type not in limited for j in jobs) else time.monotonic()
        finally:
            self._reserved -= free
            outcomes.writing -= writing
        self.stats["rounds"] += 1
        if finished:
            outcomes.account(finished, written)
        self.stats["claimed"] += len(jobs)
        self.execution.add_claimed(jobs)
        self.execution.start_ready()
        return jobs
