"""Request ids of the neighbouring applications: `app/<name>#<set>/<key>` (docs/design.md, "Apps").

Comparators pair the same key across an app's sets (e.g. "burst" and "solo"); a session turn keeps
its `.tNN` suffix in the key.
"""

from __future__ import annotations

PREFIX = "app/"


def request_id(app: str, set_name: str, key: str) -> str:
    return f"{PREFIX}{app}#{set_name}/{key}"


def parse_id(result_id: str) -> tuple[str, str, str] | None:
    """(app, set, key) of an app request id; None for any other id."""
    if not result_id.startswith(PREFIX) or "#" not in result_id:
        return None
    app, rest = result_id[len(PREFIX):].split("#", 1)
    set_name, _, key = rest.partition("/")
    return app, set_name, key


def app_of(result_id: str) -> str | None:
    parsed = parse_id(result_id)
    return parsed[0] if parsed else None
