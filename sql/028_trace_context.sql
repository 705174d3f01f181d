-- The trace of whoever enqueued a job travels with it.
--
-- With OpenTelemetry tracing on (docs/observability.md), the enqueue writes the W3C trace
-- context of its span, {"traceparent": "...", "tracestate": "..."}, and each run of the job is
-- a span in that trace: a web request's trace goes on into the jobs it enqueued, their child
-- jobs and the next stages of their pipeline. It is kept apart from input_data, which is the
-- processor's own. NULL when nothing traced the enqueue: tracing off costs no byte per job.
-- A nullable column without a default is added without rewriting the table.
ALTER TABLE jobs ADD COLUMN trace_context jsonb;
