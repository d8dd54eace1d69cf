"""Request ids of the neighbouring applications and oracles: `app/<name>#<set>/<key>` and
`oracle/<name>#<set>/<key>` (docs/design.md, "Apps"). Names are unique across both kinds.

Comparators pair the same key across an app's sets (e.g. "burst" and "solo"); a session turn keeps
its `.tNN` suffix in the key.
"""

from __future__ import annotations

PREFIXES = ("app/", "oracle/")


def request_id(check_name: str, set_name: str, key: str) -> str:
    """check_name: the app's or oracle's check name ("app/x", "oracle/y")."""
    return f"{check_name}#{set_name}/{key}"


def bare_name(name: str) -> str:
    """"app/x" or "oracle/x" -> "x"; a bare name stays as it is."""
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def parse_id(result_id: str) -> tuple[str, str, str] | None:
    """(app or oracle name, set, key) of such a request id; None for any other id."""
    if not result_id.startswith(PREFIXES) or "#" not in result_id:
        return None
    app, rest = bare_name(result_id).split("#", 1)
    set_name, _, key = rest.partition("/")
    return app, set_name, key


def app_of(result_id: str) -> str | None:
    parsed = parse_id(result_id)
    return parsed[0] if parsed else None
