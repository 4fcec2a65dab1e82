"""The fairground contract on aiohttp.web, one process per allotted CPU.

Each process runs web.run_app on the same port with reuse_port, the
multi-process setup aiohttp documents. Middleware chains are aiohttp
middlewares: each /mw/N is a sub-application whose `middlewares` list is the
chain (first = outermost), aiohttp's way to scope middleware to routes.
"""
import html
import multiprocessing
import os
import random
from operator import itemgetter

import uvloop
from aiohttp import web

# The database scenarios: asyncpg (Debian python3-asyncpg), a pool per
# process holding its share of FAIRGROUND_DB_POOL, created at start-up only
# when fairground gives a database (FAIRGROUND_DB_HOST).
DB_POOL = "db_pool"
READ = "SELECT id, randomnumber FROM world WHERE id = $1"
WRITE = "UPDATE world SET randomnumber = $2 WHERE id = $1"
ADDED = "Additional fortune added at request time."


def query_count(request: web.Request) -> int:
    """TechEmpower's rule: missing, empty, not a number or below 1 is 1;
    above 500 is 500."""
    try:
        n = int(request.query.get("queries", ""))
    except ValueError:
        return 1
    return min(max(n, 1), 500)


def pool_of(request: web.Request):
    pool = request.app.get(DB_POOL)
    if pool is None:
        raise web.HTTPServiceUnavailable(text="no database configured")
    return pool


async def db(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        row = await conn.fetchrow(READ, random.randint(1, 10000))
    return web.json_response({"id": row["id"], "randomNumber": row["randomnumber"]})


async def queries(request: web.Request) -> web.Response:
    rows = []
    async with pool_of(request).acquire() as conn:
        read = await conn.prepare(READ)
        for _ in range(query_count(request)):
            row = await read.fetchrow(random.randint(1, 10000))
            rows.append({"id": row["id"], "randomNumber": row["randomnumber"]})
    return web.json_response(rows)


async def fortunes(request: web.Request) -> web.Response:
    async with pool_of(request).acquire() as conn:
        rows = [(r["id"], r["message"]) for r in await conn.fetch("SELECT id, message FROM fortune")]
    rows.append((0, ADDED))
    rows.sort(key=itemgetter(1))
    body = "".join(
        f"<tr><td>{i}</td><td>{html.escape(m)}</td></tr>" for i, m in rows
    )
    page = (
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
        f"<tr><th>id</th><th>message</th></tr>{body}</table></body></html>"
    )
    return web.Response(text=page, content_type="text/html", charset="utf-8")


async def updates(request: web.Request) -> web.Response:
    rows = []
    async with pool_of(request).acquire() as conn:
        read = await conn.prepare(READ)
        for _ in range(query_count(request)):
            row = await read.fetchrow(random.randint(1, 10000))
            rows.append({"id": row["id"], "randomNumber": random.randint(1, 10000)})
        # One statement per row, sent as one batch (asyncpg executemany).
        await conn.executemany(WRITE, [(r["id"], r["randomNumber"]) for r in rows])
    return web.json_response(rows)


async def open_pool(app: web.Application) -> None:
    if not os.environ.get("FAIRGROUND_DB_HOST"):
        return
    import asyncpg

    workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
    size = max(1, int(os.environ.get("FAIRGROUND_DB_POOL", "8") or 8) // workers)
    try:
        app[DB_POOL] = await asyncpg.create_pool(
            host=os.environ["FAIRGROUND_DB_HOST"],
            port=int(os.environ.get("FAIRGROUND_DB_PORT", "5432")),
            database=os.environ.get("FAIRGROUND_DB_NAME", "hello_world"),
            user=os.environ.get("FAIRGROUND_DB_USER"),
            password=os.environ.get("FAIRGROUND_DB_PASSWORD"),
            min_size=size,
            max_size=size,
        )
    except (OSError, asyncpg.PostgresError) as e:
        print(f"ERROR database at {os.environ['FAIRGROUND_DB_HOST']} unreachable: {e}", flush=True)


async def close_pool(app: web.Application) -> None:
    pool = app.get(DB_POOL)
    if pool is not None:
        await pool.close()


async def ws_echo(request: web.Request) -> web.WebSocketResponse:
    """ws-echo: GET /ws upgraded by aiohttp's own web.WebSocketResponse with
    its defaults: autoping (a ping answered with a pong), autoclose (a close
    answered with a close), max_msg_size 4 MiB, compress on but agreed only
    when the client offers permessage-deflate. Every data message is echoed
    as it came: text as text, binary as binary."""
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == web.WSMsgType.TEXT:
            await ws.send_str(msg.data)
        elif msg.type == web.WSMsgType.BINARY:
            await ws.send_bytes(msg.data)
    return ws


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
            web.get("/db", db),
            web.get("/queries", queries),
            web.get("/fortunes", fortunes),
            web.get("/updates", updates),
            web.get("/ws", ws_echo),
        ]
    )
    app.on_startup.append(open_pool)
    app.on_cleanup.append(close_pool)
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
