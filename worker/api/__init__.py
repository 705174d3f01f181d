"""The HTTP API (`jobdesk api`): a FastAPI app on `JobService`, served by uvicorn."""

from jobdesk.api.app import ApiContext, accept_any_input, create_app

__all__ = ["ApiContext", "accept_any_input", "create_app"]
