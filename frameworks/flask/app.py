"""The fairground contract on Flask, served by Gunicorn (gthread workers).

Handlers use Flask's usual paths: request.get_json(), jsonify, route
converters. Middleware chains use Flask's own request hooks: each /mw/N route
lives in its own Blueprint with N `after_request` functions, each reading
x-test and setting its x-mw-{i} header (Flask runs a blueprint's
after_request functions in reverse order of registration, so the one
registered first, layer 1, runs last: the outermost).
"""
from flask import Blueprint, Flask, abort, jsonify, request

app = Flask(__name__)


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
