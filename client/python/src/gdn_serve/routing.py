"""Session ids and the `x-gdn-route` header (client/routing_key.h).

Behind a proxy (deploy/README.md, "Scale it") a session lives on the server
chosen by a consistent hash of its routing key: the id's part before the first
'/', or the whole id. Every call that names a session sends the key in the
`x-gdn-route` metadata header; sessions of one Forward should share a key.
"""

import secrets

__all__ = ["ROUTE_HEADER", "routing_key", "route_header_value", "new_session_id"]

ROUTE_HEADER = "x-gdn-route"


def routing_key(session_id: str) -> str:
    """"tenant7/chat-3" -> "tenant7"; "chat-3" -> "chat-3"."""
    return session_id.split("/", 1)[0]


def route_header_value(key: str) -> str:
    """The key itself when printable ASCII without '%', else every other byte as %XX."""
    out = []
    for byte in key.encode("utf-8"):
        if 0x20 < byte < 0x7F and byte != 0x25:
            out.append(chr(byte))
        else:
            out.append("%%%02X" % byte)
    return "".join(out)


def new_session_id(group: str = "") -> str:
    """A fresh id, "g-<24 hex digits>", or "<group>/s-<24 hex digits>" (same server as group)."""
    if group:
        return "%s/s-%s" % (group, secrets.token_hex(12))
    return "g-" + secrets.token_hex(12)
