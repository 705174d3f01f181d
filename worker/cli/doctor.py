"""`jobdesk doctor`: one line per host of DATABASE_URL (which is the primary, how far behind each
standby is) and of DATABASE_READ_URL, the standbys the primary streams to, the schema and the workers; exit 1 when
something is wrong (no primary, two primaries, migrations not applied), each problem in a line."""

from __future__ import annotations

from jobdesk.cli.arguments import EXIT_ERROR, ArgumentParser, Subparsers
from jobdesk.cli.output import print_json
from jobdesk.cli.session import Command, Invocation
from jobdesk.service.doctor import Diagnosis, diagnose
from jobdesk.store.cluster import HostState


def add_parsers(sub: Subparsers, common: ArgumentParser) -> None:
    sub.add_parser("doctor", parents=[common],
                   help="check the database: each host's role, standby lag, schema, workers")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            break
    return f"{size:.1f} {unit}"


def host_line(host: HostState) -> str:
    if host.role is None:
        return f"{host.host}  down     {host.error}"
    if host.role == "primary":
        return f"{host.host}  primary  accepts writes"
    lag = [f"replay delay {host.replay_delay_s or 0:.1f} s"]
    if host.behind_bytes is not None:
        lag.append(f"{_size(host.behind_bytes)} behind")
    return f"{host.host}  standby  {', '.join(lag)}"


def print_diagnosis(found: Diagnosis, where: str) -> None:
    print(f"database: {where}")
    for host in found.hosts:
        print(host_line(host))
    for host in found.read_hosts:
        print(f"read replica (DATABASE_READ_URL): {host_line(host)}")
    for rep in found.replicas:
        lag = "replay lag -" if rep.replay_lag_s is None else f"replay lag {rep.replay_lag_s:.3f} s"
        behind = "" if rep.behind_bytes is None else f", {_size(rep.behind_bytes)} behind"
        print(f"standby {rep.name or '?'} from {rep.address}: {rep.state}, {rep.sync_state}, {lag}{behind}")
    if found.primary is not None and not found.replicas:
        print("standbys: none streams from the primary")
    if found.schema_version is not None:
        state = "up to date" if not found.pending else f"{len(found.pending)} migration(s) pending"
        print(f"schema: migration {found.schema_version:03d}, {state}")
    if found.workers_alive is not None:
        print(f"workers: {found.workers_alive} alive, {found.workers_lost} lost")
    for problem in found.problems:
        print(f"problem: {problem}")


async def cmd_doctor(inv: Invocation) -> int:
    found = await diagnose(inv.database, inv.settings)
    if inv.args.json:
        print_json(found.to_json())
    else:
        print_diagnosis(found, inv.database.describe())
    return EXIT_ERROR if found.problems else 0


COMMANDS: dict[str, Command] = {"doctor": cmd_doctor}
