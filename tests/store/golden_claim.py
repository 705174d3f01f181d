"""The claim statements as golden files, so a change to how they are assembled is seen.

`python -m tests.store.golden_claim --write` writes every variant to `tests/store/golden/`;
`tests/store/test_claim_statement.py` compares the statements with those files. Regenerate
them only after a change to the SQL that is meant, and review the diff of the files.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from jobdesk.store.transitions import claim, inserts

GOLDEN = Path(__file__).parent / "golden"
LANE = (1, 2)  # a worker's second pump of two
TYPE_COUNTS = (1, claim.UNION_MAX_TYPES, claim.UNION_MAX_TYPES + 1)  # one walk, the most walks, the lateral walk
RETURNING = "to_jsonb(ins) AS job"  # stands for what the service asks of the inserted rows


def variants() -> dict[str, Callable[[], str]]:
    """Every statement, by golden file name (without `.sql`)."""
    out: dict[str, Callable[[], str]] = {}
    for n in TYPE_COUNTS:
        for lane, suffix in ((None, ""), (LANE, "_lane")):
            out[f"claim_{n}{suffix}"] = lambda n=n, lane=lane: claim.claim_statement(n, lane)
            out[f"exchange_{n}{suffix}"] = lambda n=n, lane=lane: claim.claim_statement(n, lane, exchange=True)
    for n in TYPE_COUNTS:  # a worker's claim alone: every lane, from the walk floors
        out[f"claim_{n}_floors"] = lambda n=n: claim.claim_statement(n, floors=True)
        out[f"exchange_{n}_floors"] = lambda n=n: claim.claim_statement(n, exchange=True, floors=True)
    out["claim_limited"] = lambda: claim.claim_statement(1, limited=True)
    out["exchange_limited"] = lambda: claim.claim_statement(1, exchange=True, limited=True)
    out["complete"] = lambda: claim._COMPLETE
    out["insert"] = lambda: inserts._INSERT_MADE
    out["insert_full"] = lambda: inserts._INSERT_FULL
    out["insert_audited"] = lambda: inserts._insert_audited_sql(RETURNING)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the golden files (else: list differences)")
    args = parser.parse_args(argv)
    stale = []
    for name, build in variants().items():
        path = GOLDEN / f"{name}.sql"
        sql = build()
        if args.write:
            GOLDEN.mkdir(exist_ok=True)
            path.write_text(sql, encoding="utf-8", newline="")
        elif not path.exists() or path.read_text(encoding="utf-8") != sql:
            stale.append(name)
    for name in stale:
        print(f"differs from its golden file: {name}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
