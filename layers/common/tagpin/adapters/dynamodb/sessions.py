"""``SESSION#<sha256 of a console session id>`` / ``STATE``: a console session that was signed out
(``tagpin.adapters.web.auth.TokenAuth``): its cookie is refused from then on, though its signature
and expiry are still good.

Attributes: ``signed_out_at`` (epoch ms), ``expires_at`` (epoch s: the session's own expiry, after
which its cookie is refused anyway; the table's TTL removes the item then, and an item TTL has not
removed yet still refuses a cookie that is refused anyway). The key is a hash of the session id: the
table holds nothing a cookie could be made from (a cookie needs the session key's HMAC too).
Written by the console's sign-out; read by the console (one consistent ``GetItem`` per request
that carries a validly signed cookie: a forged one costs no read).
"""

from __future__ import annotations

import hashlib

from tagpin.adapters.dynamodb.table import SESSION, N, Table, key


def session_key(session: str) -> dict[str, dict[str, str]]:
    return key(SESSION + hashlib.sha256(session.encode()).hexdigest())


class DynamoSignOuts:
    def __init__(self, table: Table) -> None:
        self._table = table

    def end(self, session: str, expires_at_s: int, now_ms: int) -> None:
        """``session`` is signed out: refuse it until it expires (``expires_at_s``, epoch seconds)."""
        self._table.put({**session_key(session), "signed_out_at": N(now_ms), "expires_at": N(expires_at_s)})

    def ended(self, session: str) -> bool:
        """Whether ``session`` was signed out (strongly consistent: a sign-out holds at once)."""
        return self._table.get(session_key(session), consistent=True) is not None
