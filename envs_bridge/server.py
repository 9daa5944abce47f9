"""HTTP/JSON server hosting many instances of one environment (protocol: envs_bridge/PROTOCOL.md).

    python -m envs_bridge.server --env textworld_express --host 127.0.0.1 --port 8700 [--num-envs 256]

Serves until SIGTERM or SIGINT (uvicorn's graceful shutdown, then every env is closed). ``EnvPool``
starts this same command itself. Set ``MILEGPO_ENV_SERVER_PARENT_PID`` to make the server exit when
that process is gone (the pool does, so a killed trainer leaves no servers behind), and
``MILEGPO_ENV_SERVER_DEBUG=1`` to enable the fault-injection endpoint ``POST /debug/stall``. With
``MILEGPO_ENV_SERVER_LOG_DIR`` set (the pool's temporary log folder), a server that exits because its
parent is gone removes that folder, which nobody else is left to remove.

Request bodies are JSON whatever their Content-Type says (``curl -d`` sends a form type). There is no
``/docs`` or ``/openapi.json``: PROTOCOL.md is the reference, and the server answers only the protocol.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from envs_bridge import env_vars, protocol
from envs_bridge.base import StepResult
from envs_bridge.host import EnvHost, HostError
from envs_bridge.registry import EnvUnavailableError, adapter_class, env_names

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

logger = logging.getLogger("envs_bridge.server")


class _BodySizeLimit:
    """ASGI middleware: reads the body up front and answers 413 past ``max_bytes`` (with or without a
    Content-Length header), so no handler ever sees an oversized request."""

    def __init__(self, app: Callable[..., Awaitable[None]], max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False
        # The protocol is JSON only: a body sent with another (or no) Content-Type is read as JSON.
        scope = dict(scope, headers=[(k, v) for k, v in scope["headers"] if k != b"content-type"]
                     + [(b"content-type", b"application/json")])

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Callable) -> None:
        response = JSONResponse(
            {"error": f"request body larger than the server's limit of {self.max_bytes} bytes"}, status_code=413
        )
        await response({"type": "http"}, None, send)


def _json(payload: Any, status: int = 200) -> Response:
    # Plain json.dumps: validating large responses through pydantic would cost more than the env steps.
    return Response(content=json.dumps(payload), status_code=status, media_type="application/json")


def _results(results: list[StepResult]) -> Response:
    return _json({"results": [_result_json(result) for result in results]})


def _result_json(result: StepResult) -> dict[str, Any]:
    # StepResult.to_json() without dataclasses.asdict's deep copy, which cost more than the JSON encoding.
    return {
        "observation": result.observation,
        "admissible_actions": list(result.admissible_actions),
        "reward": result.reward,
        "done": result.done,
        "won": result.won,
        "score": result.score,
        "task": result.task,
        "state_key": result.state_key,
        "info": result.info,
    }


def _describe_validation_errors(errors: list[dict]) -> str:
    parts = []
    for error in errors[:10]:
        location = ".".join(str(part) for part in error.get("loc", ())[1:]) or "body"
        parts.append(f"{location}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return "; ".join(parts) + more


def build_app(host: EnvHost, *, max_request_bytes: int = protocol.DEFAULT_MAX_REQUEST_BYTES, debug: bool = False) -> FastAPI:
    stop = threading.Event()  # wakes a debug stall when the server shuts down
    stall = {"seconds": 0.0}
    stall_lock = threading.Lock()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        stop.set()
        host.shutdown()

    app = FastAPI(
        title=f"MileGPO env server ({host.env_name})", version=str(protocol.PROTOCOL_VERSION), lifespan=lifespan,
        docs_url=None, redoc_url=None, openapi_url=None,  # PROTOCOL.md documents the protocol
    )
    app.add_middleware(_BodySizeLimit, max_bytes=max_request_bytes)

    @app.exception_handler(HostError)
    async def _host_error(request: Request, error: HostError) -> Response:
        return _json({"error": error.message}, error.status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> Response:
        errors = list(error.errors())
        if any(item.get("type") == "json_invalid" for item in errors):
            return _json({"error": "request body is not valid JSON"}, 400)
        return _json({"error": f"malformed request: {_describe_validation_errors(errors)}"}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
        return _json({"error": f"{error.detail} ({request.method} {request.url.path})"}, error.status_code)

    @app.exception_handler(Exception)
    async def _crash(request: Request, error: Exception) -> Response:
        logger.exception("request %s failed", request.url.path)
        return _json({"error": f"internal error in {host.env_name} server: {type(error).__name__}: {error}"}, 500)

    def consume_stall() -> None:
        with stall_lock:
            seconds, stall["seconds"] = stall["seconds"], 0.0
        if seconds:
            stop.wait(seconds)

    @app.get("/health", response_model=protocol.HealthResponse)
    def health() -> Response:
        return _json(
            {
                "status": "ok",
                "env": host.env_name,
                "protocol": protocol.PROTOCOL_VERSION,
                "pid": os.getpid(),
                "num_envs": host.num_envs,
                "max_envs": host.max_envs,
            }
        )

    @app.post("/create", response_model=protocol.CreateResponse)
    def create(request: protocol.CreateRequest) -> Response:
        env_ids, num_tasks = host.create(request.count, dict(request.options))
        return _json({"env_ids": env_ids, "num_tasks": num_tasks})

    @app.post("/reset", response_model=protocol.BatchResponse)
    def reset(request: protocol.ResetRequest) -> Response:
        consume_stall()
        return _results(host.reset(request.env_ids, request.split, request.task_ids, request.seeds))

    @app.post("/step", response_model=protocol.BatchResponse)
    def step(request: protocol.StepRequest) -> Response:
        consume_stall()
        return _results(host.step(request.env_ids, request.actions))

    @app.post("/fork", response_model=protocol.ForkResponse)
    def fork(request: protocol.ForkRequest) -> Response:
        env_ids, results = host.fork(request.env_ids)
        return _json({"env_ids": env_ids, "results": [_result_json(result) for result in results]})

    @app.post("/close", response_model=protocol.CloseResponse)
    def close(request: protocol.CloseRequest) -> Response:
        return _json({"closed": host.close(request.env_ids)})

    if debug:

        @app.post("/debug/stall")
        def debug_stall(request: protocol.StallRequest) -> Response:
            with stall_lock:
                stall["seconds"] = float(request.seconds)
            return _json({"stall_seconds": float(request.seconds)})

    return app


def _watch_parent(server: uvicorn.Server, parent_pid: int) -> None:
    def watch() -> None:
        while not server.should_exit:
            try:
                os.kill(parent_pid, 0)  # signal 0: only checks that the process exists
            except ProcessLookupError:
                logger.warning("parent process %d is gone; shutting down", parent_pid)
                server.should_exit = True
                return
            except PermissionError:
                pass  # exists, owned by someone else
            threading.Event().wait(0.5)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve one environment over HTTP/JSON (envs_bridge/PROTOCOL.md).")
    parser.add_argument("--env", required=True, choices=env_names())
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback only)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--num-envs", type=int, default=512, help="most env instances this server will hold")
    parser.add_argument("--threads", type=int, default=8, help="threads that run the envs of one batch")
    parser.add_argument("--max-request-bytes", type=int, default=protocol.DEFAULT_MAX_REQUEST_BYTES)
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    for flag, value, low, high in (
        ("--port", args.port, 1, 65535), ("--num-envs", args.num_envs, 1, None), ("--threads", args.threads, 1, 1024),
        ("--max-request-bytes", args.max_request_bytes, 1, None),
    ):
        if value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            print(f"envs_bridge.server: {flag} must be {bound}, got {value}", file=sys.stderr)
            return 2

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.host not in LOOPBACK_HOSTS:
        logger.warning("binding %s: the env server has no authentication; keep it on loopback", args.host)
    try:
        adapter_class(args.env)  # fail at start, with the install hint, rather than on the first /create
    except EnvUnavailableError as error:
        print(f"envs_bridge.server: {error}", file=sys.stderr)
        return 2

    host = EnvHost(args.env, max_envs=args.num_envs, threads=args.threads)
    debug = os.environ.get(env_vars.DEBUG) == "1"
    app = build_app(host, max_request_bytes=args.max_request_bytes, debug=debug)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        timeout_graceful_shutdown=3,
        # Pool connections idle while the policy generates; keep them (the client also reconnects).
        timeout_keep_alive=3600,
    )
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM/SIGINT while serving and re-raises the signal once it has shut down; this
    # handler receives that (so the exit is a clean 0) and covers a signal arriving before serving starts.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: setattr(server, "should_exit", True))
    parent = os.environ.get(env_vars.PARENT_PID)
    if parent:
        _watch_parent(server, int(parent))
    server.run()
    log_dir = os.environ.get(env_vars.LOG_DIR)
    if parent and log_dir and not _alive(int(parent)):
        shutil.rmtree(log_dir, ignore_errors=True)  # our own log goes too: the parent that owned it is gone
    return 0 if server.started else 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


if __name__ == "__main__":
    sys.exit(main())
