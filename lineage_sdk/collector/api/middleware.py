"""Security headers on every answer, the graph page's content security policy, and no API key
in a URL."""

from __future__ import annotations

from urllib.parse import unquote_plus

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["KEY_PARAMETERS", "PAGE_CSP", "KeysNotInUrls", "SecurityHeaders"]

# The page runs only its own scripts and talks only to this server; data never becomes markup.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class SecurityHeaders:
    """Pure ASGI middleware adding nosniff & co. to every answer, and the CSP to HTML."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def _send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(_SECURITY_HEADERS)
                ctype = next((v for k, v in headers if k == b"content-type"), b"")
                if ctype.startswith(b"text/html"):
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, _send)


#: Query parameters that carry a key or token (compared in lower case).
KEY_PARAMETERS = frozenset(
    {
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "x_api_key",
        "key",
        "token",
        "access_token",
        "auth",
        "authorization",
        "bearer",
    }
)


class KeysNotInUrls:
    """Refuses a request carrying a key in its query string (400, ``key_in_url``), whatever the
    path: a URL is written to access logs, proxies' logs and browser history, so a key there is
    leaked even when refused. The value is replaced by ``***`` in the request's ``scope`` first,
    so the server's access log line (uvicorn reads the same ``scope``) shows no key either."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query: bytes = scope.get("query_string", b"") if scope["type"] == "http" else b""
        if not query:
            await self.app(scope, receive, send)
            return
        found: list[str] = []
        parts = []
        for part in query.split(b"&"):
            raw_name, eq, _value = part.partition(b"=")
            name = unquote_plus(raw_name.decode("latin-1"))
            if name.strip().lower() in KEY_PARAMETERS:
                found.append(name)
                part = raw_name + b"=***" if eq else raw_name
            parts.append(part)
        if not found:
            await self.app(scope, receive, send)
            return
        scope["query_string"] = b"&".join(parts)
        body = orjson.dumps(
            {
                "detail": f"an API key is not accepted in the URL (query parameter "
                f"{found[0][:40]!r}), where logs and browser history keep it: send it in a "
                "header, Authorization: Bearer <key> or X-API-Key: <key>",
                "reason": "key_in_url",
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
