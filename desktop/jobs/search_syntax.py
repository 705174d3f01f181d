"""The job search box's language: parsed without Qt in `jobdesk.store.search_syntax`, the one
parser of the console, `jobdesk jobs --search` and `GET /api/jobs?q=`."""

from jobdesk.store.search_syntax import INPUT_HELP, INPUT_KEY, KEYS, ParsedSearch, completions, parse_search

__all__ = ["INPUT_HELP", "INPUT_KEY", "KEYS", "ParsedSearch", "completions", "parse_search"]
