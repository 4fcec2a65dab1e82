"""The fairground contract on FastAPI, served by Uvicorn with uvloop and httptools.

Handlers use FastAPI's usual paths: path parameters, pydantic models for the
request body (422 on invalid input), dicts and models returned as JSON.
Middleware chains are Starlette pure-ASGI middleware classes, wrapped around
each /mw/N endpoint (Starlette's own middleware mechanism; ASGI middleware is
async only).
"""
import html
import os
import random
from operator import itemgetter

from fastapi import Body, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel, StrictInt, StrictStr, conint, constr, validator
from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import Route, request_response

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


class Person(BaseModel):
    name: constr(strict=True, min_length=1, max_length=64)
    age: conint(strict=True, ge=0, le=150)
    email: StrictStr

    @validator("email")
    def email_has_inner_at(cls, v: str) -> str:
        if not 3 <= len(v.encode()) <= 254 or "@" not in v or v[0] == "@" or v[-1] == "@":
            raise ValueError("email must look like user@host")
        return v


@app.get("/", response_class=PlainTextResponse)
async def plaintext():
    return "Hello, World!"


@app.get("/json")
async def json_message():
    return {"message": "Hello, World!"}


@app.get("/users/{id}")
async def user(id: str):
    return {"id": id, "name": "ada"}


@app.post("/echo")
async def echo(payload=Body(None)):
    # Body(None): a JSON `null` is a value to echo, not a missing body.
    return payload


@app.post("/validate")
async def validate(person: Person) -> Person:
    return person


class EchoHeader:
    """Middleware layer `index`: reads x-test, sets x-mw-{index} on the response."""

    def __init__(self, app, index: int):
        self.app = app
        self.name = f"x-mw-{index}"

    async def __call__(self, scope, receive, send):
        token = Headers(scope=scope).get("x-test", "")

        async def send_with_header(message):
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(self.name, token)
            await send(message)

        await self.app(scope, receive, send_with_header)


async def hello(request):
    return PlainTextResponse("Hello, World!")


def chain(n: int):
    """The hello endpoint behind n layers, layer 1 outermost (n = 0: the bare
    endpoint, which Route wraps itself)."""
    if n == 0:
        return hello
    asgi = request_response(hello)
    for i in range(n, 0, -1):
        asgi = EchoHeader(asgi, index=i)
    return asgi


for _n in range(11):
    app.router.routes.append(Route(f"/mw/{_n}", chain(_n), methods=["GET"]))


# The database scenarios: asyncpg (Debian python3-asyncpg), a pool per
# Uvicorn worker holding its share of FAIRGROUND_DB_POOL, made at start-up
# only when fairground gives a database (FAIRGROUND_DB_HOST).
READ = "SELECT id, randomnumber FROM world WHERE id = $1"
WRITE = "UPDATE world SET randomnumber = $2 WHERE id = $1"
ADDED = "Additional fortune added at request time."
db_pool = None


@app.on_event("startup")
async def open_pool():
    global db_pool
    if not os.environ.get("FAIRGROUND_DB_HOST"):
        return
    import asyncpg

    workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
    size = max(1, int(os.environ.get("FAIRGROUND_DB_POOL", "8") or 8) // workers)
    try:
        db_pool = await asyncpg.create_pool(
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


def pool():
    if db_pool is None:
        raise HTTPException(status_code=503, detail="no database configured")
    return db_pool


def query_count(queries: str) -> int:
    """TechEmpower's rule: missing, empty, not a number or below 1 is 1;
    above 500 is 500."""
    try:
        return min(max(int(queries), 1), 500)
    except ValueError:
        return 1


async def read_rows(conn, n: int):
    read = await conn.prepare(READ)
    rows = []
    for _ in range(n):
        row = await read.fetchrow(random.randint(1, 10000))
        rows.append({"id": row["id"], "randomNumber": row["randomnumber"]})
    return rows


@app.get("/db")
async def db():
    async with pool().acquire() as conn:
        return (await read_rows(conn, 1))[0]


@app.get("/queries")
async def queries(queries: str = ""):
    async with pool().acquire() as conn:
        return await read_rows(conn, query_count(queries))


@app.get("/fortunes", response_class=HTMLResponse)
async def fortunes():
    async with pool().acquire() as conn:
        rows = [(r["id"], r["message"]) for r in await conn.fetch("SELECT id, message FROM fortune")]
    rows.append((0, ADDED))
    rows.sort(key=itemgetter(1))
    body = "".join(f"<tr><td>{i}</td><td>{html.escape(m)}</td></tr>" for i, m in rows)
    return (
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
        f"<tr><th>id</th><th>message</th></tr>{body}</table></body></html>"
    )


@app.get("/updates")
async def updates(queries: str = ""):
    async with pool().acquire() as conn:
        rows = await read_rows(conn, query_count(queries))
        for r in rows:
            r["randomNumber"] = random.randint(1, 10000)
        # One statement per row, sent as one batch (asyncpg executemany).
        await conn.executemany(WRITE, [(r["id"], r["randomNumber"]) for r in rows])
    return rows


if __name__ == "__main__":
    import uvicorn

    workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))

    def listen_backlog() -> int:
        # Uvicorn's settings, --backlog: "Maximum number of connections to
        # hold in backlog" (default 2048). The kernel's own cap instead,
        # net.core.somaxconn (the profile's server.sysctls), the rule every
        # framework here follows; 2048 when the file cannot be read.
        try:
            with open("/proc/sys/net/core/somaxconn") as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 2048

    uvicorn.run(
        "app:app",
        host="0.0.0.0",
        port=8080,
        workers=workers,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        backlog=listen_backlog(),
    )
