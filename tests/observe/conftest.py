from tests.otel_spans import spans  # noqa: F401 - the in-memory exporter fixture of the tracing tests
