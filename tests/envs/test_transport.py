"""JsonConnection against small loopback stub servers: stale keep-alive sockets, timeouts, bad bodies."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from envs_bridge.transport import HttpStatusError, JsonConnection, TransportError

pytestmark = pytest.mark.timeout(60)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the client may keep the socket open...
    requests_seen: list[str] = []
    mode = "close_after_reply"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        _Handler.requests_seen.append(self.path)
        if _Handler.mode == "hang":
            time.sleep(5)
        if _Handler.mode == "trickle":  # every byte well within the socket timeout, the whole never
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            for _ in range(100):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
            return
        body = b"not json" if _Handler.mode == "garbage" else json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        # ...but the server drops it after each reply, as an idle keep-alive timeout would.
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def stub_url():
    _Handler.requests_seen = []
    _Handler.mode = "close_after_reply"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_socket_the_server_closed_is_replaced_once_and_the_request_sent_once(stub_url):
    connection = JsonConnection(stub_url)
    assert connection.post("/first", {}, timeout_s=5) == {"path": "/first"}
    time.sleep(0.2)  # the server has closed its end by now
    assert connection.post("/second", {}, timeout_s=5) == {"path": "/second"}
    assert _Handler.requests_seen == ["/first", "/second"]


def test_timeouts_and_non_json_bodies_are_transport_errors(stub_url):
    _Handler.mode = "hang"
    with pytest.raises(TransportError, match="timed out") as caught:
        JsonConnection(stub_url).post("/slow", {}, timeout_s=0.5)
    assert caught.value.timed_out
    _Handler.mode = "garbage"
    with pytest.raises(TransportError, match="non-JSON"):
        JsonConnection(stub_url).post("/garbage", {}, timeout_s=5)


def test_refused_connections_and_bad_urls():
    with pytest.raises(TransportError, match="failed") as caught:
        JsonConnection("http://127.0.0.1:9").post("/x", {}, timeout_s=2)
    assert not caught.value.timed_out
    with pytest.raises(ValueError, match="must look like"):
        JsonConnection("127.0.0.1:8000")
    assert issubclass(HttpStatusError, RuntimeError)


def test_a_server_answering_a_byte_at_a_time_is_cut_off_at_the_call_timeout(stub_url):
    _Handler.mode = "trickle"
    start = time.monotonic()
    with pytest.raises(TransportError, match="timed out") as caught:
        JsonConnection(stub_url).post("/trickle", {}, timeout_s=1.0)
    assert caught.value.timed_out and time.monotonic() - start < 2.0
