"""A keep-alive JSON-over-HTTP connection to one env server (stdlib only: the trainer's process needs
no web framework). Every call is bounded by a timeout; any failure to get a well-formed answer is a
``TransportError`` (the server is dead, hung or broken), while an HTTP error answer is an
``HttpStatusError`` carrying the server's message.

The timeout is one wall-clock bound on the whole call (connecting, sending, a resend on a stale
socket, every read of the answer), not the socket's per-operation timeout alone: a server that
answers a byte at a time, each within the timeout, would otherwise hold the caller indefinitely.
At the deadline a timer shuts the socket down, which ends any read in progress."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from typing import Any


class TransportError(ConnectionError):
    """No usable answer: connection refused or reset, timeout, truncated or non-JSON body."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class HttpStatusError(RuntimeError):
    def __init__(self, status: int, message: str, url: str):
        super().__init__(f"{url}: HTTP {status}: {message}")
        self.status = status
        self.message = message


# What a request on a keep-alive socket the server has meanwhile closed fails with.
_STALE_CONNECTION_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class JsonConnection:
    def __init__(self, url: str):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise ValueError(f"env server URL must look like http://127.0.0.1:PORT, got {url!r}")
        self.url = url.rstrip("/")
        self._host = parsed.hostname
        self._port = parsed.port
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()  # one request at a time on the shared socket
        self._expired = False  # set by the deadline timer of the call in progress

    def get(self, path: str, timeout_s: float) -> Any:
        return self._request("GET", path, None, timeout_s)

    def post(self, path: str, payload: Any, timeout_s: float) -> Any:
        return self._request("POST", path, json.dumps(payload).encode(), timeout_s)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _request(self, method: str, path: str, body: bytes | None, timeout_s: float) -> Any:
        with self._lock:
            deadline = time.monotonic() + timeout_s
            self._expired = False
            expiry = threading.Timer(timeout_s, self._expire)
            expiry.daemon = True
            expiry.start()
            try:
                reused = self._connection is not None and self._connection.sock is not None
                try:
                    status, data = self._exchange(method, path, body, timeout_s)
                except _STALE_CONNECTION_ERRORS as error:
                    if not reused or time.monotonic() >= deadline:
                        raise self._failure(method, path, timeout_s, error, deadline) from error
                    # The server closed the idle keep-alive socket before reading our request (nothing was
                    # processed, so sending it again is safe); a dead server fails again at connect.
                    try:
                        status, data = self._exchange(method, path, body, max(deadline - time.monotonic(), 1e-3))
                    except (OSError, http.client.HTTPException) as again:
                        raise self._failure(method, path, timeout_s, again, deadline) from again
                except (OSError, http.client.HTTPException) as error:
                    raise self._failure(method, path, timeout_s, error, deadline) from error
            finally:
                expiry.cancel()
            if self._expired:  # a body read until the socket closed may look complete: it is cut short
                self._drop()
                raise TransportError(f"{method} {self.url}{path} timed out after {timeout_s:g} s", timed_out=True)
        try:
            decoded = json.loads(data)
        except ValueError as error:
            raise TransportError(f"{method} {self.url}{path}: HTTP {status} with a non-JSON body {data[:200]!r}") from error
        if status >= 400:
            message = decoded.get("error", decoded) if isinstance(decoded, dict) else decoded
            raise HttpStatusError(status, str(message), f"{method} {self.url}{path}")
        return decoded

    def _exchange(self, method: str, path: str, body: bytes | None, timeout_s: float) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            if self._connection is None:
                self._connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)
            else:
                self._connection.timeout = timeout_s
                if self._connection.sock is not None:
                    self._connection.sock.settimeout(timeout_s)
            self._connection.request(method, path, body=body, headers=headers)
            response = self._connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self._drop()  # after a timeout or reset the socket's state is unknown: never reuse it
            raise

    def _expire(self) -> None:
        """At the call's deadline: ends whatever read or write is blocked on the socket."""
        self._expired = True
        connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # closed meanwhile

    def _failure(self, method: str, path: str, timeout_s: float, error: Exception, deadline: float) -> TransportError:
        timed_out = isinstance(error, (TimeoutError, socket.timeout)) or time.monotonic() >= deadline
        kind = f"timed out after {timeout_s:g} s" if timed_out else "failed"
        return TransportError(f"{method} {self.url}{path} {kind}: {error!r}", timed_out=timed_out)

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
