// The fairground contract on the JDK's built-in HTTP server
// (com.sun.net.httpserver) with Jackson databind for JSON.
//
// Threads: the JDK server has one dispatcher thread that accepts connections
// and waits on a selector for requests on idle keep-alive connections; it
// hands each parsed request to the executor set here. A worker therefore
// holds a request only while answering it, and an answer never waits on
// anything but the request's own bytes, so a fixed pool of exactly
// FAIRGROUND_CPUS threads keeps every allotted CPU busy; more threads would
// only add context switches and cache misses.
//
// Middleware: real com.sun.net.httpserver.Filter objects on the context's
// filter list; Filter.Chain calls them in list order (first = outermost).

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpContext;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

public final class Main {
    /** The contract sends at most 64 KiB; refuse anything beyond 1 MiB. */
    private static final int BODY_LIMIT = 1 << 20;

    private static final byte[] HELLO = "Hello, World!".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] NOT_FOUND = "not found".getBytes(StandardCharsets.US_ASCII);

    /** ObjectMapper is thread-safe once configured; one for the whole server. */
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private Main() {}

    private static void send(HttpExchange ex, int status, String type, byte[] body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(status, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    private static void sendJson(HttpExchange ex, JsonNode value) throws IOException {
        send(ex, 200, "application/json", MAPPER.writeValueAsBytes(value));
    }

    private static void notFound(HttpExchange ex) throws IOException {
        send(ex, 404, "text/plain", NOT_FOUND);
    }

    /** The request path must be exactly `path`: JDK contexts match by prefix. */
    private static boolean exact(HttpExchange ex, String path, String method) throws IOException {
        if (!ex.getRequestURI().getPath().equals(path)) {
            notFound(ex);
            return false;
        }
        if (!ex.getRequestMethod().equals(method)) {
            ex.getResponseHeaders().set("Allow", method);
            send(ex, 405, "text/plain", "method not allowed".getBytes(StandardCharsets.US_ASCII));
            return false;
        }
        return true;
    }

    /** The body, or null (after answering 413) when it exceeds BODY_LIMIT. */
    private static byte[] body(HttpExchange ex) throws IOException {
        try (InputStream in = ex.getRequestBody()) {
            byte[] bytes = in.readNBytes(BODY_LIMIT + 1);
            if (bytes.length > BODY_LIMIT) {
                send(ex, 413, "text/plain", "body too large".getBytes(StandardCharsets.US_ASCII));
                return null;
            }
            return bytes;
        }
    }

    private static void plaintext(HttpExchange ex) throws IOException {
        send(ex, 200, "text/plain", HELLO);
    }

    private static void json(HttpExchange ex) throws IOException {
        ObjectNode out = MAPPER.createObjectNode();
        out.put("message", "Hello, World!");
        sendJson(ex, out);
    }

    private static void user(HttpExchange ex) throws IOException {
        String id = ex.getRequestURI().getPath().substring("/users/".length());
        if (id.isEmpty() || id.indexOf('/') >= 0 || !ex.getRequestMethod().equals("GET")) {
            notFound(ex);
            return;
        }
        ObjectNode out = MAPPER.createObjectNode();
        out.put("id", id);
        out.put("name", "ada");
        sendJson(ex, out);
    }

    private static void echo(HttpExchange ex) throws IOException {
        byte[] bytes = body(ex);
        if (bytes == null) return;
        JsonNode value;
        try {
            value = MAPPER.readTree(bytes);
        } catch (JsonProcessingException e) {
            send(ex, 400, "text/plain", "invalid JSON".getBytes(StandardCharsets.US_ASCII));
            return;
        }
        if (value == null || value.isMissingNode()) { // empty body
            send(ex, 400, "text/plain", "invalid JSON".getBytes(StandardCharsets.US_ASCII));
            return;
        }
        sendJson(ex, value);
    }

    /** The contract's validate rules: the answer, or null when invalid. */
    static ObjectNode validated(JsonNode v) {
        if (v == null || !v.isObject()) return null;
        JsonNode name = v.get("name");
        JsonNode age = v.get("age");
        JsonNode email = v.get("email");
        if (name == null || !name.isTextual()) return null;
        if (age == null || !age.isIntegralNumber() || !age.canConvertToLong()) return null;
        if (email == null || !email.isTextual()) return null;
        String n = name.textValue();
        int chars = n.codePointCount(0, n.length());
        if (chars < 1 || chars > 64) return null;
        long a = age.longValue();
        if (a < 0 || a > 150) return null;
        String e = email.textValue();
        int bytes = e.getBytes(StandardCharsets.UTF_8).length;
        int at = e.indexOf('@');
        if (bytes < 3 || bytes > 254 || at <= 0 || e.endsWith("@")) return null;
        ObjectNode out = MAPPER.createObjectNode();
        out.set("name", name);
        out.set("age", age);
        out.set("email", email);
        return out;
    }

    private static void validate(HttpExchange ex) throws IOException {
        byte[] bytes = body(ex);
        if (bytes == null) return;
        ObjectNode out;
        try {
            out = validated(MAPPER.readTree(bytes));
        } catch (JsonProcessingException e) {
            out = null;
        }
        if (out == null) {
            send(ex, 422, "text/plain", "invalid person".getBytes(StandardCharsets.US_ASCII));
            return;
        }
        sendJson(ex, out);
    }

    /** Middleware layer i: reads x-test itself and sets x-mw-{i}. */
    static final class EchoHeader extends Filter {
        private final String name;

        EchoHeader(int i) {
            this.name = "x-mw-" + i;
        }

        @Override
        public void doFilter(HttpExchange ex, Chain chain) throws IOException {
            String token = ex.getRequestHeaders().getFirst("x-test");
            ex.getResponseHeaders().set(name, token == null ? "" : token);
            chain.doFilter(ex);
        }

        @Override
        public String description() {
            return "sets " + name + " to the request's x-test";
        }
    }

    private static void route(HttpServer server, String path, String method, HttpHandler h) {
        server.createContext(path, ex -> {
            if (exact(ex, path, method)) h.handle(ex);
        });
    }

    private static int cpus() {
        String v = System.getenv("FAIRGROUND_CPUS");
        try {
            int n = Integer.parseInt(v == null ? "1" : v.trim());
            return n >= 1 ? n : 1;
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    /**
     * The listen backlog: the kernel's own cap, net.core.somaxconn (the
     * profile's server.sysctls), the rule every framework here follows;
     * 1024 when it cannot be read. JDK docs, HttpServer.create(addr,
     * backlog): "the socket backlog. If this value is less than or equal to
     * zero, then a system default value is used".
     */
    static int listenBacklog() {
        try {
            return Integer.parseInt(
                    java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/sys/net/core/somaxconn"))
                            .get(0).trim());
        } catch (Exception e) {
            return 1024;
        }
    }

    public static void main(String[] args) throws IOException {
        int cpus = cpus();
        HttpServer server = HttpServer.create(new InetSocketAddress("0.0.0.0", 8080), listenBacklog());
        // "/" matches every path by prefix: it answers / and 404s the rest.
        route(server, "/", "GET", Main::plaintext);
        route(server, "/json", "GET", Main::json);
        server.createContext("/users/", Main::user);
        route(server, "/echo", "POST", Main::echo);
        route(server, "/validate", "POST", Main::validate);
        for (int n = 0; n <= 10; n++) {
            String path = "/mw/" + n;
            HttpContext ctx = server.createContext(path, ex -> {
                if (exact(ex, path, "GET")) plaintext(ex);
            });
            for (int i = 1; i <= n; i++) ctx.getFilters().add(new EchoHeader(i));
        }
        server.setExecutor(Executors.newFixedThreadPool(cpus));
        server.start();
        System.err.printf("com.sun.net.httpserver (Java %s) listening on 0.0.0.0:8080 with %d worker threads%n",
                Runtime.version(), cpus);
    }
}
