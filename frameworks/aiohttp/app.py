"""The fairground contract on aiohttp.web, one process per allotted CPU.

Each process runs web.run_app on the same port with reuse_port, the
multi-process setup aiohttp documents. Middleware chains are aiohttp
middlewares: each /mw/N is a sub-application whose `middlewares` list is the
chain (first = outermost), aiohttp's way to scope middleware to routes.
"""
import multiprocessing
import os

import uvloop
from aiohttp import web


async def plaintext(request: web.Request) -> web.Response:
    return web.Response(text="Hello, World!")


async def json_message(request: web.Request) -> web.Response:
    return web.json_response({"message": "Hello, World!"})


async def user(request: web.Request) -> web.Response:
    return web.json_response({"id": request.match_info["id"], "name": "ada"})


async def echo(request: web.Request) -> web.Response:
    try:
        payload = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="invalid JSON")
    return web.json_response(payload)


def valid_person(p) -> bool:
    if not isinstance(p, dict):
        return False
    name, age, email = p.get("name"), p.get("age"), p.get("email")
    return (
        isinstance(name, str)
        and 1 <= len(name) <= 64
        and isinstance(age, int)
        and not isinstance(age, bool)
        and 0 <= age <= 150
        and isinstance(email, str)
        and 3 <= len(email.encode()) <= 254
        and "@" in email
        and email[0] != "@"
        and email[-1] != "@"
    )


async def validate(request: web.Request) -> web.Response:
    try:
        p = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="invalid JSON")
    if not valid_person(p):
        raise web.HTTPUnprocessableEntity(text="invalid person")
    return web.json_response({"name": p["name"], "age": p["age"], "email": p["email"]})


def echo_header(index: int):
    """Middleware layer `index`: reads x-test, sets x-mw-{index}."""
    name = f"x-mw-{index}"

    @web.middleware
    async def middleware(request: web.Request, handler):
        token = request.headers.get("x-test", "")
        response = await handler(request)
        response.headers[name] = token
        return response

    return middleware


def make_app() -> web.Application:
    app = web.Application(client_max_size=1 << 20)
    app.add_routes(
        [
            web.get("/", plaintext),
            web.get("/json", json_message),
            web.get("/users/{id}", user),
            web.post("/echo", echo),
            web.post("/validate", validate),
        ]
    )
    for n in range(11):
        sub = web.Application(middlewares=[echo_header(i) for i in range(1, n + 1)])
        sub.router.add_get("", plaintext)
        app.add_subapp(f"/mw/{n}", sub)
    return app


def listen_backlog() -> int:
    """The listen backlog: the kernel's own cap, net.core.somaxconn (the
    profile's server.sysctls). aiohttp's docs, web.run_app: "backlog - the
    number of unaccepted connections that the system will allow before
    refusing new connections (128 by default)"; a burst of 10,000 connects
    overflows 128 and leaves connects to time out in SYN retransmission.
    128 when the file cannot be read."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 128


def serve() -> None:
    uvloop.install()
    web.run_app(
        make_app(),
        host="0.0.0.0",
        port=8080,
        reuse_port=True,
        backlog=listen_backlog(),
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
    if workers == 1:
        serve()
    else:
        procs = [multiprocessing.Process(target=serve) for _ in range(workers)]
        for p in procs:
            p.start()
        # If any worker dies, stop: a half-sized server would skew results.
        multiprocessing.connection.wait([p.sentinel for p in procs])
        for p in procs:
            p.terminate()
        raise SystemExit(1)
