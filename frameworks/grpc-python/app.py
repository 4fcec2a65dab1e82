"""fairground's gRPC service (bench.proto) on gRPC Python's asyncio API.

grpcio 1.51 from Debian (python3-grpcio), the service code generated from
bench.proto at image build by python3-grpc-tools (grpc_tools.protoc) into
bench_pb2.py and bench_pb2_grpc.py. Each process runs one grpc.aio server:
gRPC over HTTP/2 with prior knowledge on 8082, and over TLS (ALPN h2) on
8443 when fairground gives a certificate. One process per allotted CPU,
forked before any gRPC object exists and all bound to the same ports with
SO_REUSEPORT (grpcio's default on Linux), as gRPC's multiprocessing example
does: one Python process runs Python on one core at a time. HTTP/1.1 on
8080 is aiohttp.web in the same event loop, for fairground's readiness
probe (no scenario is declared there): gRPC needs HTTP/2.
"""
import asyncio
import multiprocessing
import multiprocessing.connection
import os

import grpc
from aiohttp import web

import bench_pb2
import bench_pb2_grpc

INT64 = 1 << 64
INT64_MIN = 1 << 63


class Bench(bench_pb2_grpc.BenchServicer):
    """The three RPCs. A method the service does not have never reaches
    this class: the server answers it UNIMPLEMENTED itself."""

    async def Echo(self, request, context):
        """The request's id and payload, unchanged."""
        return bench_pb2.EchoReply(id=request.id, payload=request.payload)

    async def Sum(self, request, context):
        """The int64 sum, wrapping on overflow (two's complement): Python's
        integers do not overflow, so the sum is reduced modulo 2**64."""
        total = sum(request.values)
        return bench_pb2.SumReply(sum=(total + INT64_MIN) % INT64 - INT64_MIN)

    async def Stream(self, request, context):
        """`count` replies, each with the request's id and its index."""
        for i in range(request.count):
            yield bench_pb2.StreamReply(id=request.id, index=i)


async def plaintext(request: web.Request) -> web.Response:
    return web.Response(text="Hello, World!", content_type="text/plain")


def listen_backlog() -> int:
    """The kernel's accept queue limit (what the other Python apps use)."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 128


def port(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


async def serve_async() -> None:
    server = grpc.aio.server(options=[("grpc.so_reuseport", 1)])
    bench_pb2_grpc.add_BenchServicer_to_server(Bench(), server)
    h2c_port = port("FAIRGROUND_H2C_PORT", 8082)
    server.add_insecure_port(f"0.0.0.0:{h2c_port}")
    cert = os.environ.get("FAIRGROUND_TLS_CERT")
    if cert:
        with open(cert, "rb") as f:
            chain = f.read()
        with open(os.environ["FAIRGROUND_TLS_KEY"], "rb") as f:
            key = f.read()
        tls_port = port("FAIRGROUND_TLS_PORT", 8443)
        server.add_secure_port(
            f"0.0.0.0:{tls_port}", grpc.ssl_server_credentials([(key, chain)])
        )
    await server.start()

    app = web.Application()
    app.router.add_get("/", plaintext)
    app.router.add_get("/plaintext", plaintext)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(
        runner, "0.0.0.0", 8080, reuse_port=True, backlog=listen_backlog()
    ).start()
    print(
        f"grpc.aio on :{h2c_port} (h2c)"
        + (f" and :{tls_port} (TLS)" if cert else "")
        + ", aiohttp on :8080 (http1), pid "
        + str(os.getpid()),
        flush=True,
    )
    await server.wait_for_termination()


def serve() -> None:
    asyncio.run(serve_async())


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
