"""The fairground contract on Flask, served by Gunicorn (gthread workers).

Handlers use Flask's usual paths: request.get_json(), jsonify, route
converters. Middleware chains use Flask's own request hooks: each /mw/N route
lives in its own Blueprint with N `after_request` functions, each reading
x-test and setting its x-mw-{i} header (Flask runs a blueprint's
after_request functions in reverse order of registration, so the one
registered first, layer 1, runs last: the outermost).
"""
import os
import random
from operator import itemgetter

from flask import Blueprint, Flask, abort, jsonify, render_template_string, request

app = Flask(__name__)

# The database scenarios: psycopg2 (Debian python3-psycopg2) with its
# ThreadedConnectionPool, one per worker process holding its share of
# FAIRGROUND_DB_POOL (at most one connection per gthread thread is ever in
# use), opened lazily and only when fairground gives a database.
_pool = None
ADDED = "Additional fortune added at request time."
FORTUNES = (
    "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
    "<tr><th>id</th><th>message</th></tr>"
    "{% for id, message in rows %}<tr><td>{{ id }}</td><td>{{ message }}</td></tr>{% endfor %}"
    "</table></body></html>"
)


def db_pool():
    global _pool
    if _pool is None:
        if not os.environ.get("FAIRGROUND_DB_HOST"):
            abort(503, "no database configured")
        import psycopg2.pool

        workers = max(1, int(os.environ.get("FAIRGROUND_CPUS", "1") or 1))
        size = max(1, int(os.environ.get("FAIRGROUND_DB_POOL", "8") or 8) // workers)
        _pool = psycopg2.pool.ThreadedConnectionPool(
            1,
            size,
            host=os.environ["FAIRGROUND_DB_HOST"],
            port=int(os.environ.get("FAIRGROUND_DB_PORT", "5432")),
            dbname=os.environ.get("FAIRGROUND_DB_NAME", "hello_world"),
            user=os.environ.get("FAIRGROUND_DB_USER"),
            password=os.environ.get("FAIRGROUND_DB_PASSWORD"),
        )
    return _pool


class Db:
    """A pooled connection for one request, in autocommit mode."""

    def __enter__(self):
        self.conn = db_pool().getconn()
        self.conn.autocommit = True
        return self.conn.cursor()

    def __exit__(self, *exc):
        db_pool().putconn(self.conn)


def query_count() -> int:
    """TechEmpower's rule: missing, empty, not a number or below 1 is 1;
    above 500 is 500."""
    try:
        n = int(request.args.get("queries", ""))
    except ValueError:
        return 1
    return min(max(n, 1), 500)


def read_rows(cur, n):
    rows = []
    for _ in range(n):
        cur.execute("SELECT id, randomnumber FROM world WHERE id = %s", (random.randint(1, 10000),))
        id, number = cur.fetchone()
        rows.append({"id": id, "randomNumber": number})
    return rows


@app.get("/db")
def db():
    with Db() as cur:
        return jsonify(read_rows(cur, 1)[0])


@app.get("/queries")
def queries():
    with Db() as cur:
        return jsonify(read_rows(cur, query_count()))


@app.get("/fortunes")
def fortunes():
    with Db() as cur:
        cur.execute("SELECT id, message FROM fortune")
        rows = cur.fetchall()
    rows.append((0, ADDED))
    rows.sort(key=itemgetter(1))
    return render_template_string(FORTUNES, rows=rows), 200, {"Content-Type": "text/html; charset=utf-8"}


@app.get("/updates")
def updates():
    with Db() as cur:
        rows = read_rows(cur, query_count())
        for r in rows:
            r["randomNumber"] = random.randint(1, 10000)
        # One UPDATE per row, sent in one round trip by psycopg2's executemany.
        cur.executemany(
            "UPDATE world SET randomnumber = %s WHERE id = %s",
            [(r["randomNumber"], r["id"]) for r in rows],
        )
    return jsonify(rows)


@app.get("/")
def plaintext():
    return "Hello, World!", 200, {"Content-Type": "text/plain"}


@app.get("/json")
def json_message():
    return jsonify(message="Hello, World!")


@app.get("/users/<id>")
def user(id):
    return jsonify(id=id, name="ada")


@app.post("/echo")
def echo():
    return jsonify(request.get_json())


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


@app.post("/validate")
def validate():
    p = request.get_json()
    if not valid_person(p):
        abort(422)
    return jsonify(name=p["name"], age=p["age"], email=p["email"])


def echo_header(index: int):
    """Middleware layer `index`: reads x-test, sets x-mw-{index}."""
    name = f"x-mw-{index}"

    def hook(response):
        response.headers[name] = request.headers.get("x-test", "")
        return response

    return hook


for _n in range(11):
    bp = Blueprint(f"mw{_n}", __name__)
    bp.add_url_rule(f"/mw/{_n}", "hello", plaintext, methods=["GET"])
    for _i in range(1, _n + 1):
        bp.after_request(echo_header(_i))
    app.register_blueprint(bp)
