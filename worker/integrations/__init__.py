"""jobdesk inside an application's framework: `sqlalchemy` (enqueue through a SQLAlchemy 2 session,
in its transaction) and `django` (a backend for Django's tasks framework). Each is imported only
by code that uses it, and imports its framework only then: `import jobdesk` loads neither."""
