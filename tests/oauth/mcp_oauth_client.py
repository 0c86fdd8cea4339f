"""The official MCP Python SDK's OAuth client, unmodified, against toolhost
and a real authorization server (tests/oauth/provider.mjs, npm's
oidc-provider): the SDK meets toolhost's 401, reads its protected resource
metadata (RFC 9728), discovers the authorization server, registers itself
(RFC 7591), runs authorization code + PKCE with the resource indicator
(RFC 8707), and then lists and calls tools with the access token.

The browser's part (following the authorization server's redirects to the
login and consent steps, which provider.mjs answers as its user) is an HTTP
client here; everything else is the SDK's.

    python mcp_oauth_client.py URL_OF_MCP --report FILE [--call TOOL JSON_ARGS]...

Writes one JSON report to FILE: the tools listed, each call's result, the
access token's claims (decoded, not verified: toolhost verified it), the
client the SDK registered, and the authorization server's redirects.
"""

from __future__ import annotations

import argparse
import base64
import json
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT = "http://127.0.0.1:9/callback"  # never connected to: the code is read off the redirect


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """Follows the authorization server's redirects, keeping its cookies,
    until it sends the user back to REDIRECT with the code."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.hops: list[str] = []

    async def open(self, url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
            for _ in range(20):
                self.hops.append(urlparse(url).path)
                response = await http.get(url)
                if response.status_code not in (302, 303):
                    raise RuntimeError(f"authorization stopped at {url}: {response.status_code} {response.text[:500]}")
                url = urljoin(url, response.headers["location"])
                if url.startswith(REDIRECT):
                    query = parse_qs(urlparse(url).query)
                    if "error" in query:
                        raise RuntimeError(f"authorization refused: {query}")
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0],
                        state=query.get("state", [None])[0],
                        iss=query.get("iss", [None])[0],
                    )
                    return
        raise RuntimeError("too many redirects")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "no authorization code"
        return self.result


def claims(jwt: str) -> dict | None:
    parts = jwt.split(".")
    if len(parts) != 3:
        return None  # an opaque token
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    return json.loads(base64.urlsafe_b64decode(payload))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--report", required=True)
    parser.add_argument("--call", nargs=2, action="append", default=[], metavar=("TOOL", "ARGS"))
    args = parser.parse_args()

    storage, browser = Memory(), Browser()
    auth = OAuthClientProvider(
        server_url=args.url,
        client_metadata=OAuthClientMetadata(
            client_name="toolhost OAuth test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_post",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    report: dict = {"calls": []}
    http = httpx2.AsyncClient(auth=auth, timeout=30)
    async with Client(streamable_http_client(args.url, http_client=http)) as client:
        report["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        for tool, arguments in args.call:
            result = await client.call_tool(tool, json.loads(arguments))
            report["calls"].append(
                {
                    "tool": tool,
                    "is_error": result.is_error,
                    "structured": result.structured_content,
                    "text": [getattr(c, "text", None) for c in result.content],
                }
            )
    await http.aclose()
    assert storage.tokens is not None and storage.client is not None
    report["token"] = claims(storage.tokens.access_token)
    report["token_type"] = storage.tokens.token_type
    report["scope"] = storage.tokens.scope
    report["client_id"] = storage.client.client_id
    report["hops"] = browser.hops
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    anyio.run(main)
