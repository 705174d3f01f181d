# jobdesk — `make run` starts everything, `make test` tests everything. Both set themselves up.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The core's dependencies as wheels: the suite installs the built package from here, offline.
WHEELHOUSE := $(VENV)/wheelhouse

# The checkout's links, `jobdesk` -> worker and `worker/console` -> ../desktop: the type check and the
# import contracts read the package through them. A clone without them (git on Windows without Developer
# Mode, or core.symlinks=false) still installs and builds (setup.py maps the real folders), but cannot lint.
LINKED_GOALS := lint test
ifneq ($(filter $(LINKED_GOALS),$(MAKECMDGOALS)),)
ifneq ($(shell test -L jobdesk && test -L worker/console && echo linked),linked)
$(error the links jobdesk -> worker and worker/console -> ../desktop are plain files in this checkout: \
restore them with `git config core.symlinks true && git checkout -- jobdesk worker/console` (on Windows, turn on Developer Mode first); \
`make dist-pypi` and `make dist` build without them)
endif
endif

.PHONY: run test venv bytecode venv-django worker demo db bench bench-backlog bench-claim bench-trickle bench-enqueue bench-app-tx bench-console bench-console-load bench-migrate bench-dag bench-pipelines bench-bulk bench-failures bench-metrics bench-list bench-durable bench-executors bench-flow bench-progress bench-lifetime bench-tracing bench-report lint clean screenshots dist dist-pypi schema docs docs-check

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip download --quiet --dest $(WHEELHOUSE) .
	@touch $(STAMP)

# The checkout's modules compiled ahead, as pip compiles an installed wheel's: a command then reads
# them instead of compiling them at each launch (a worker started 0.1 s sooner), even where
# PYTHONDONTWRITEBYTECODE keeps Python from writing them itself. Quick when nothing changed.
bytecode: $(STAMP)
	@$(PY) -m compileall -q worker desktop tests

venv: $(STAMP) bytecode

## run: the console, a worker and the demo pipeline on the embedded database
run: $(STAMP) bytecode
	$(PY) -m jobdesk.console.devrun

# The suite's processes: one more than two cores, as many tests spend their time waiting (on
# timers, servers and child processes) and a third process runs another test meanwhile.
TEST_PROCESSES ?= 3

## test: the whole suite against a real embedded PostgreSQL, on three processes (TEST_PROCESSES)
test: lint docs-check venv-django bytecode
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -n $(TEST_PROCESSES)

## venv-django: the second venv, .venv-django on Python 3.12 or 3.13, where the Django tests run (Django 6 needs 3.12+)
venv-django: $(STAMP)
	$(PY) -m tests.integrations.django_venv

## lint: ruff, mypy (worker/ fully typed) and the import contracts
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## schema: rewrite sql/schema.sql, the schema dumped from a freshly migrated database (the migrations stay the source of truth)
schema: $(STAMP)
	$(PY) -m jobdesk.store.schema_dump sql/schema.sql

worker: $(STAMP) bytecode
	$(VENV)/bin/jobdesk worker

demo: $(STAMP) bytecode
	$(VENV)/bin/jobdesk demo

db: $(STAMP) bytecode
	$(VENV)/bin/jobdesk db

## bench: throughput and latency of the engine (prints figures)
bench: $(STAMP)
	$(PY) benchmarks/engine_bench.py

## bench-backlog: a worker's throughput behind jobs it cannot take, as shares of a clean run (prints figures)
bench-backlog: $(STAMP)
	$(PY) benchmarks/backlog_bench.py

## bench-claim: CPU per job (worker and PostgreSQL), round trips and the claim walk's buffers of a 20,000-job drain, with vacuum free and held back (prints figures)
bench-claim: $(STAMP)
	$(PY) benchmarks/claim_walk_bench.py
	$(PY) benchmarks/claim_walk_bench.py --hold

## bench-trickle: round trips per job and pickup latency of one worker under a steady trickle of jobs (prints figures)
bench-trickle: $(STAMP)
	$(PY) benchmarks/trickle_bench.py

## bench-enqueue: bulk enqueue by per-row SQL INSERTs and by JobClient.enqueue_many, independent jobs and jobs with a dependency each (prints figures)
bench-enqueue: $(STAMP)
	$(PY) benchmarks/enqueue_bench.py

## bench-app-tx: one job enqueued per application transaction, through the pool and through connection= on each driver (prints figures)
bench-app-tx: $(STAMP)
	$(PY) benchmarks/app_transaction_bench.py

## bench-console: the console over a million jobs while a worker is busy (prints figures)
bench-console: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) benchmarks/console_bench.py

## bench-migrate: `jobdesk migrate` to the partitioned jobs on 10,000,000 jobs while clients claim and enqueue: the copy made ahead, the swap's lock, claims blocked (prints figures; ARGS="--jobs 1000000" for a quick run)
bench-migrate: $(STAMP)
	$(PY) benchmarks/migrate_bench.py $(ARGS)

## dist: the packaged binary, a one-folder bundle in dist/jobdesk/ that needs no Python on the target
dist: $(STAMP)
	$(PY) -m PyInstaller --noconfirm --log-level WARN jobdesk.spec
	@du -sh dist/jobdesk

## dist-pypi: the wheel and the sdist, with the migrations and the console's resources inside, into dist/pypi
dist-pypi: $(STAMP)
	$(PY) -m build --no-isolation --outdir dist/pypi .

clean:
	rm -rf $(VENV) .venv-django build dist *.egg-info .pytest_cache

## screenshots: the console rendered offscreen with demo data, light and dark
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m jobdesk.console.screenshots screenshots

## bench-console-load: what each open console costs PostgreSQL and itself (CPU ms/s) at 1,000 jobs/s inserted and completed over a million jobs, for 1 and 3 consoles (prints figures; --jobs 200000 --seconds 20 for a quick run)
bench-console-load: $(STAMP)
	$(PY) benchmarks/console_load_bench.py $(ARGS)

## bench-dag: layout and first paint of a 1,000-job pipeline in the DAG view (prints figures)
bench-dag: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) benchmarks/dag_bench.py

## bench-pipelines: the pipeline list's queries over a million jobs (prints figures)
bench-pipelines: $(STAMP)
	$(PY) benchmarks/pipelines_bench.py

## bench-bulk: retry 100,000 failed jobs by filter from the console, with the event-loop lag (prints figures)
bench-bulk: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) benchmarks/bulk_bench.py

## bench-failures: the Failures view's load over a million jobs with 50,000 failures (prints figures)
bench-failures: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) benchmarks/failures_bench.py

## bench-metrics: each Metrics chart's query over a million jobs (prints figures)
bench-metrics: $(STAMP)
	$(PY) benchmarks/metrics_bench.py

## bench-list: the job list's pages and counts over a million jobs, as the API, the console and the CLI read them (prints figures)
bench-list: $(STAMP)
	$(PY) benchmarks/list_bench.py

## bench-tracing: what OpenTelemetry support costs per enqueue and per run, off (not imported, or no tracer provider) and on, and that importing jobdesk loads none of it (prints figures)
bench-tracing: $(STAMP)
	$(PY) benchmarks/tracing_bench.py

## bench-executors: ten time.sleep(1) jobs in threads beside an async job, and what an async, a thread and a process run cost (prints figures; --quick for small sizes)
bench-executors: $(STAMP)
	$(PY) benchmarks/executors_bench.py

## bench-durable: what a durable step costs, a worker's claim behind 100,000 suspended jobs, how late sleeping jobs wake, and 10,000 waiting jobs woken by one INSERT of events (prints figures; --quick for small sizes)
bench-durable: $(STAMP)
	$(PY) benchmarks/durable_bench.py

## bench-flow: what rate limits and fair share cost, as shares of the same run's baseline (prints figures)
bench-flow: $(STAMP)
	$(PY) benchmarks/flow_bench.py

## bench-progress: database writes per second of jobs reporting progress in a tight loop, and the cost of job log lines (prints figures)
bench-progress: $(STAMP)
	$(PY) benchmarks/progress_logs_bench.py

## bench-lifetime: 2,000 jobs/s for 10 minutes, completed jobs kept 60 s, vacuum held back for 5 of them, on today's schema (e47fe8f, or --before REF) and this checkout's side by side: PostgreSQL CPU and WAL per job, size and dead tuples of jobs, throughput per minute, pickup (prints figures; about 25 min; ARGS="--minutes 2" for a quick run, ARGS="--prune-jobs 10000000" for the cost of one prune)
bench-lifetime: $(STAMP)
	$(PY) benchmarks/lifetime_bench.py $(ARGS)

## bench-report: the engine benchmarks with short settings, written as the table of docs/performance.md with the date, the commit and each figure's command (about 5 minutes)
bench-report: $(STAMP)
	$(PY) benchmarks/report.py

.PHONY: chaos bench-pressure bench-cli indexes

## indexes: rewrite what `jobdesk --help` lists and how the settings read without pydantic (worker/cli/help_index.py, worker/core/settings_index.py), after a change to a command's help or to a setting; tests/cli/test_front.py and tests/core/test_plain_settings.py fail while they are out of date
indexes: $(STAMP)
	$(PY) -m jobdesk.cli.front --write
	$(PY) -m jobdesk.core.plain_settings --write

## bench-cli: the median wall time of `jobdesk --version`, `--help`, `jobs --limit 20`, `show ID` (on DATABASE_URL) and a worker's launch to its first job's start, beside `python -c pass` (prints figures)
bench-cli: $(STAMP) bytecode
	$(PY) benchmarks/cli_bench.py

## chaos: the chaos suite at full length, every case (about 20 min; CASE=kill runs one), as a markdown table; `make test` runs its --quick version
chaos: $(STAMP)
	$(PY) -m benchmarks.chaos $(if $(CASE),--case $(CASE))

## bench-pressure: 300 jobs/s for 5 min while an idle transaction holds back vacuum: pickup latency, dead tuples and index sizes of jobs (prints figures)
bench-pressure: $(STAMP)
	$(PY) -m benchmarks.chaos --case idle_tx

## docs: regenerate the settings and HTTP API reference pages, then build the site into site/
docs: $(STAMP)
	$(PY) docs/gen_settings.py
	$(PY) docs/gen_api.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d site

## docs-check: the generated pages are up to date, every Python example type-checks (mypy --strict), and the site builds with no broken link or page left out
docs-check: $(STAMP)
	$(PY) docs/gen_settings.py --check
	$(PY) docs/gen_api.py --check
	$(PY) docs/check_examples.py
	@out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && \
		NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet -d "$$out"
