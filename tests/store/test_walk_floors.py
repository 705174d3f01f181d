"""The walk floors' arithmetic: walk order is priority descending, then seq."""

from __future__ import annotations

from jobdesk.store.transitions import NO_FLOOR, LaneFloors, WalkFloors, notice_floor


def row(job_type: str, priority: int, seq: int) -> dict[str, object]:
    return {"type": job_type, "priority": priority, "seq": seq}


def test_a_floor_is_the_first_job_claimed_in_walk_order() -> None:
    floors = WalkFloors()
    floors.advance([row("a", 0, 9), row("a", 5, 12), row("a", 5, 11), row("b", 0, 3)])  # type: ignore[list-item]
    assert floors.at == {"a": (5, 11), "b": (0, 3)}
    assert floors.args(["b", "c", "a"]) == ([0, NO_FLOOR[0], 5], [3, NO_FLOOR[1], 11])


def test_new_jobs_lower_only_the_floors_above_them() -> None:
    floors = WalkFloors()
    floors.at.update({"a": (0, 100), "b": (0, 10), "c": (3, 50)})
    floors.lower((0, 40))
    assert floors.at == {"a": (0, 40), "b": (0, 10), "c": (3, 50)}
    floors.lower((7, 900))  # a higher priority comes first, whatever its seq
    assert floors.at == {"a": (7, 900), "b": (7, 900), "c": (7, 900)}
    floors.clear()
    assert floors.at == {}


def test_a_notice_says_how_low_its_jobs_go_or_nothing() -> None:
    assert notice_floor("0:1234") == (0, 1234)
    assert notice_floor("-5:7") == (-5, 7)
    assert notice_floor("") is None
    assert notice_floor("x:1") is None


def test_each_lane_walks_from_its_own_floor_and_a_walk_of_every_lane_from_the_earliest() -> None:
    floors = LaneFloors(2)
    floors.of((0, 2)).advance([row("a", 0, 40), row("b", 0, 8)])  # type: ignore[list-item]
    floors.of((1, 2)).advance([row("a", 0, 25)])  # type: ignore[list-item]
    assert floors.lanes[0].at == {"a": (0, 40), "b": (0, 8)} and floors.lanes[1].at == {"a": (0, 25)}
    every = floors.of(None)
    assert every.at == {"a": (0, 25)}, "b: lane 1 walks it from its first entry, so the walk of both does"
    every.advance([row("a", 0, 30), row("b", 0, 12)])  # type: ignore[list-item]
    floors.settle(every)
    assert floors.lanes[0].at == {"a": (0, 40), "b": (0, 12)}, "a floor only rises"
    assert floors.lanes[1].at == {"a": (0, 30), "b": (0, 12)}
    floors.lower((0, 20))
    assert floors.at == {"a": (0, 20), "b": (0, 12)}
    clears = floors.clears
    floors.clear()
    assert floors.at == {} and floors.lanes[0].at == {} and floors.clears == clears + 2
