// The fairground contract on Jetty 9 (Debian libjetty9-java) the classic way:
// an embedded Server with a ServletContextHandler, one HttpServlet per route,
// Jackson databind for JSON, and javax.servlet Filters mapped to each /mw/N
// path for the middleware chains (filters run in the order they are added,
// so layer 1 is the outermost). The database scenarios are blocking JDBC
// servlets: Debian's PostgreSQL JDBC driver (libpostgresql-jdbc-java) behind
// a HikariCP pool (libhikaricp-java), prepared statements, the updates
// written back as one JDBC batch. The WebSocket echo on /ws is Jetty's own
// WebSocket API (Debian libjetty9-extra-java): a WebSocketServlet and an
// annotated @WebSocket endpoint.
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import javax.servlet.DispatcherType;
import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;
import org.eclipse.jetty.websocket.api.Session;
import org.eclipse.jetty.websocket.api.annotations.OnWebSocketMessage;
import org.eclipse.jetty.websocket.api.annotations.WebSocket;
import org.eclipse.jetty.websocket.servlet.WebSocketServlet;
import org.eclipse.jetty.websocket.servlet.WebSocketServletFactory;

public final class Main {
    static final ObjectMapper MAPPER = new ObjectMapper();
    static final byte[] HELLO = "Hello, World!".getBytes(StandardCharsets.UTF_8);

    record Message(String message) {}

    record User(String id, String name) {}

    record Person(String name, int age, String email) {}

    static void writeJson(HttpServletResponse resp, Object value) throws IOException {
        byte[] body = MAPPER.writeValueAsBytes(value);
        resp.setContentType("application/json");
        resp.setContentLength(body.length);
        resp.getOutputStream().write(body);
    }

    static void reject(HttpServletResponse resp, int status, String why) throws IOException {
        byte[] body = why.getBytes(StandardCharsets.UTF_8);
        resp.setStatus(status);
        resp.setContentType("text/plain");
        resp.setContentLength(body.length);
        resp.getOutputStream().write(body);
    }

    /** Parses the request body; null (after answering 400) when it is not JSON. */
    static JsonNode readJson(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        try {
            JsonNode node = MAPPER.readTree(req.getInputStream());
            if (node == null || node.isMissingNode()) {
                reject(resp, 400, "empty body");
                return null;
            }
            return node;
        } catch (JsonProcessingException e) {
            reject(resp, 400, "invalid JSON");
            return null;
        }
    }

    static final class Hello extends HttpServlet {
        @Override
        protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            resp.setContentType("text/plain");
            resp.setContentLength(HELLO.length);
            resp.getOutputStream().write(HELLO);
        }
    }

    static final class JsonServlet extends HttpServlet {
        @Override
        protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            writeJson(resp, new Message("Hello, World!"));
        }
    }

    static final class UserServlet extends HttpServlet {
        @Override
        protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            String info = req.getPathInfo(); // "/{id}"
            if (info == null || info.length() < 2 || info.indexOf('/', 1) >= 0) {
                resp.sendError(404);
                return;
            }
            writeJson(resp, new User(info.substring(1), "ada"));
        }
    }

    static final class EchoServlet extends HttpServlet {
        @Override
        protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            JsonNode node = readJson(req, resp);
            if (node != null) {
                writeJson(resp, node);
            }
        }
    }

    static final class ValidateServlet extends HttpServlet {
        @Override
        protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            JsonNode p = readJson(req, resp);
            if (p == null) {
                return;
            }
            JsonNode name = p.get("name");
            JsonNode age = p.get("age");
            JsonNode email = p.get("email");
            if (name == null || !name.isTextual() || age == null || !age.isIntegralNumber()
                    || !age.canConvertToInt() || email == null || !email.isTextual()) {
                reject(resp, 422, "invalid person");
                return;
            }
            String n = name.textValue();
            int nameLen = n.codePointCount(0, n.length());
            int a = age.intValue();
            String e = email.textValue();
            int emailBytes = e.getBytes(StandardCharsets.UTF_8).length;
            if (nameLen < 1 || nameLen > 64 || a < 0 || a > 150 || emailBytes < 3 || emailBytes > 254
                    || e.indexOf('@') < 0 || e.startsWith("@") || e.endsWith("@")) {
                reject(resp, 422, "invalid person");
                return;
            }
            writeJson(resp, new Person(n, a, e));
        }
    }

    /** Middleware layer i: reads x-test and sets x-mw-{i}. */
    static final class EchoHeader implements Filter {
        private final String name;

        EchoHeader(int i) {
            this.name = "x-mw-" + i;
        }

        @Override
        public void init(FilterConfig config) {}

        @Override
        public void doFilter(ServletRequest req, ServletResponse resp, FilterChain chain)
                throws IOException, ServletException {
            ((HttpServletResponse) resp).setHeader(name, ((HttpServletRequest) req).getHeader("x-test"));
            chain.doFilter(req, resp);
        }

        @Override
        public void destroy() {}
    }

    // ---- WebSocket (ws-echo) ----

    /**
     * One instance per connection. Jetty answers pings with pongs and a close
     * with a close itself, and hands over fragmented messages whole; each
     * message is echoed with a blocking send, so a connection has at most
     * one echo in flight (the next message is read once it is written).
     */
    @WebSocket
    public static final class EchoSocket {
        @OnWebSocketMessage
        public void onText(Session session, String message) throws IOException {
            session.getRemote().sendString(message);
        }

        @OnWebSocketMessage
        public void onBinary(Session session, byte[] payload, int offset, int length) throws IOException {
            session.getRemote().sendBytes(ByteBuffer.wrap(payload, offset, length));
        }
    }

    /**
     * GET /ws: Jetty's WebSocketServlet upgrades (RFC 6455) and anything else
     * falls through to HttpServlet. Its policy's defaults are kept but for the
     * message size limits: 64 KiB by default, the contract's largest message,
     * raised to 1 MiB for text and binary. Extensions keep Jetty's defaults
     * (permessage-deflate only when a client offers it; fairground's does not).
     */
    static final class EchoWebSocketServlet extends WebSocketServlet {
        @Override
        public void configure(WebSocketServletFactory factory) {
            factory.getPolicy().setMaxTextMessageSize(1 << 20);
            factory.getPolicy().setMaxBinaryMessageSize(1 << 20);
            factory.register(EchoSocket.class);
        }
    }

    // ---- database scenarios ----

    record World(int id, int randomNumber) {}

    record Fortune(int id, String message) {}

    static final String WORLD_SELECT = "SELECT id, randomnumber FROM world WHERE id = ?";
    static final String WORLD_UPDATE = "UPDATE world SET randomnumber = ? WHERE id = ?";
    static final String FORTUNE_SELECT = "SELECT id, message FROM fortune";

    /**
     * The pool, or null when FAIRGROUND_DB_HOST is unset (no database in this
     * run). HikariCP with a fixed size of FAIRGROUND_DB_POOL connections,
     * started without waiting for the database, so Jetty serves the other
     * scenarios whether it is up or not.
     */
    static HikariDataSource openPool() {
        String host = System.getenv("FAIRGROUND_DB_HOST");
        if (host == null || host.isEmpty()) {
            return null;
        }
        String port = envOr("FAIRGROUND_DB_PORT", "5432");
        int pool = 8;
        try {
            pool = Math.max(1, Integer.parseInt(envOr("FAIRGROUND_DB_POOL", "8")));
        } catch (NumberFormatException e) {
            // keep 8
        }
        HikariConfig config = new HikariConfig();
        config.setJdbcUrl("jdbc:postgresql://" + host + ":" + port + "/" + envOr("FAIRGROUND_DB_NAME", "hello_world"));
        config.setUsername(envOr("FAIRGROUND_DB_USER", "benchmarkdbuser"));
        config.setPassword(envOr("FAIRGROUND_DB_PASSWORD", "benchmarkdbpass"));
        config.setMaximumPoolSize(pool);
        config.setMinimumIdle(pool);
        config.setInitializationFailTimeout(-1); // start even if the database is not there
        config.setConnectionTimeout(10_000);
        config.setPoolName("fairground");
        // pgjdbc: server-side prepared statements from the first execution
        // (its default waits for the fifth), kept in its per-connection cache.
        config.addDataSourceProperty("prepareThreshold", "1");
        config.addDataSourceProperty("connectTimeout", "5");
        HikariDataSource ds = new HikariDataSource(config);
        String where = host + ":" + port;
        int size = pool;
        Thread probe = new Thread(() -> {
            try (Connection c = ds.getConnection()) {
                System.err.println("database pool to " + where + ", " + size + " connections (HikariCP, pgjdbc)");
            } catch (SQLException e) {
                System.err.println("ERROR database at " + where + " unreachable (db endpoints answer 503 until it is): "
                        + e.getMessage());
            }
        }, "db-probe");
        probe.setDaemon(true);
        probe.start();
        return ds;
    }

    static String envOr(String name, String def) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? def : v;
    }

    static int randomId() {
        return ThreadLocalRandom.current().nextInt(1, 10_001);
    }

    /** TechEmpower's rule: missing, empty, not a number or below 1 is 1; above 500 is 500. */
    static int queriesParam(HttpServletRequest req) {
        int n;
        try {
            n = Integer.parseInt(req.getParameter("queries"));
        } catch (NumberFormatException e) { // also null
            return 1;
        }
        return Math.min(500, Math.max(1, n));
    }

    static World readWorld(PreparedStatement select, int id) throws SQLException {
        select.setInt(1, id);
        try (ResultSet rs = select.executeQuery()) {
            if (!rs.next()) {
                throw new SQLException("no world row " + id);
            }
            return new World(rs.getInt(1), rs.getInt(2));
        }
    }

    /** Base of the database servlets: 503 without a pool or a connection, 500 on a failed query. */
    abstract static class DbServlet extends HttpServlet {
        final HikariDataSource ds;

        DbServlet(HikariDataSource ds) {
            this.ds = ds;
        }

        abstract void handle(Connection c, HttpServletRequest req, HttpServletResponse resp)
                throws IOException, SQLException;

        @Override
        protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
            if (ds == null) {
                reject(resp, 503, "no database configured");
                return;
            }
            Connection c;
            try {
                c = ds.getConnection();
            } catch (SQLException e) {
                reject(resp, 503, "database unavailable: " + e.getMessage());
                return;
            }
            try (c) {
                handle(c, req, resp);
            } catch (SQLException e) {
                if (!resp.isCommitted()) {
                    resp.reset();
                    reject(resp, 500, "database error: " + e.getMessage());
                }
            }
        }
    }

    static final class DbOne extends DbServlet {
        DbOne(HikariDataSource ds) {
            super(ds);
        }

        @Override
        void handle(Connection c, HttpServletRequest req, HttpServletResponse resp) throws IOException, SQLException {
            World w;
            try (PreparedStatement select = c.prepareStatement(WORLD_SELECT)) {
                w = readWorld(select, randomId());
            }
            writeJson(resp, w);
        }
    }

    static final class Queries extends DbServlet {
        Queries(HikariDataSource ds) {
            super(ds);
        }

        @Override
        void handle(Connection c, HttpServletRequest req, HttpServletResponse resp) throws IOException, SQLException {
            World[] worlds = new World[queriesParam(req)];
            try (PreparedStatement select = c.prepareStatement(WORLD_SELECT)) {
                for (int i = 0; i < worlds.length; i++) {
                    worlds[i] = readWorld(select, randomId());
                }
            }
            writeJson(resp, worlds);
        }
    }

    /**
     * Each row read with its own SELECT and given a new number; the UPDATEs
     * go as one JDBC batch (one statement per row, one round trip), in id
     * order so concurrent batches lock rows in the same order.
     */
    static final class Updates extends DbServlet {
        Updates(HikariDataSource ds) {
            super(ds);
        }

        @Override
        void handle(Connection c, HttpServletRequest req, HttpServletResponse resp) throws IOException, SQLException {
            World[] worlds = new World[queriesParam(req)];
            try (PreparedStatement select = c.prepareStatement(WORLD_SELECT)) {
                for (int i = 0; i < worlds.length; i++) {
                    World read = readWorld(select, randomId());
                    worlds[i] = new World(read.id(), randomId());
                }
            }
            World[] byId = worlds.clone();
            Arrays.sort(byId, Comparator.comparingInt(World::id)); // stable: a repeated id keeps its last value
            try (PreparedStatement update = c.prepareStatement(WORLD_UPDATE)) {
                for (World w : byId) {
                    update.setInt(1, w.randomNumber());
                    update.setInt(2, w.id());
                    update.addBatch();
                }
                update.executeBatch();
            }
            writeJson(resp, worlds);
        }
    }

    static final class Fortunes extends DbServlet {
        Fortunes(HikariDataSource ds) {
            super(ds);
        }

        @Override
        void handle(Connection c, HttpServletRequest req, HttpServletResponse resp) throws IOException, SQLException {
            List<Fortune> fortunes = new ArrayList<>(16);
            try (PreparedStatement select = c.prepareStatement(FORTUNE_SELECT);
                    ResultSet rs = select.executeQuery()) {
                while (rs.next()) {
                    fortunes.add(new Fortune(rs.getInt(1), rs.getString(2)));
                }
            }
            c.close(); // back to the pool before rendering (closing twice is a no-op)
            fortunes.add(new Fortune(0, "Additional fortune added at request time."));
            fortunes.sort(Comparator.comparing(Fortune::message));
            StringBuilder html = new StringBuilder(2048)
                    .append("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>")
                    .append("<tr><th>id</th><th>message</th></tr>");
            for (Fortune f : fortunes) {
                html.append("<tr><td>").append(f.id()).append("</td><td>");
                escape(html, f.message());
                html.append("</td></tr>");
            }
            html.append("</table></body></html>");
            byte[] body = html.toString().getBytes(StandardCharsets.UTF_8);
            resp.setContentType("text/html; charset=utf-8");
            resp.setContentLength(body.length);
            resp.getOutputStream().write(body);
        }
    }

    static void escape(StringBuilder out, String s) {
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '&' -> out.append("&amp;");
                case '<' -> out.append("&lt;");
                case '>' -> out.append("&gt;");
                case '"' -> out.append("&quot;");
                case '\'' -> out.append("&#39;");
                default -> out.append(ch);
            }
        }
    }

    /**
     * The listen backlog: the kernel's own cap, net.core.somaxconn (the
     * profile's server.sysctls), as Go's net package uses; 4096 (Linux's
     * default somaxconn) when it cannot be read.
     */
    static int acceptQueueSize() {
        try {
            // Read line by line: /proc files report a size of 0, and
            // Files.readString of this one returned only its first digit.
            return Integer.parseInt(Files.readAllLines(Path.of("/proc/sys/net/core/somaxconn")).get(0).trim());
        } catch (IOException | RuntimeException e) {
            return 4096;
        }
    }

    public static void main(String[] args) throws Exception {
        Server server = new Server();
        ServerConnector http = new ServerConnector(server);
        http.setPort(8080);
        // Jetty 9.4 "Configuring Connectors", ServerConnector acceptQueueSize:
        // "Number of connection requests that can be queued up before the
        // operating system starts to send rejections". Its default, 0, leaves
        // the JDK's ServerSocketChannel.bind default backlog of 50: a burst
        // of 10,000 connects then waits in TCP retransmission to be accepted.
        // Threads (QueuedThreadPool, max 200) and idleTimeout (30 s) keep
        // Jetty's defaults: idle connections sit in the NIO selectors, not
        // on threads.
        http.setAcceptQueueSize(acceptQueueSize());
        server.addConnector(http);
        ServletContextHandler ctx = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        ctx.setContextPath("/");
        ctx.addServlet(new ServletHolder(new Hello()), ""); // exactly "/"
        ctx.addServlet(new ServletHolder(new JsonServlet()), "/json");
        ctx.addServlet(new ServletHolder(new UserServlet()), "/users/*");
        ctx.addServlet(new ServletHolder(new EchoServlet()), "/echo");
        ctx.addServlet(new ServletHolder(new ValidateServlet()), "/validate");
        for (int n = 0; n <= 10; n++) {
            String path = "/mw/" + n;
            ctx.addServlet(new ServletHolder(new Hello()), path);
            for (int i = 1; i <= n; i++) {
                ctx.addFilter(new FilterHolder(new EchoHeader(i)), path, EnumSet.of(DispatcherType.REQUEST));
            }
        }
        HikariDataSource pool = openPool();
        ctx.addServlet(new ServletHolder(new DbOne(pool)), "/db");
        ctx.addServlet(new ServletHolder(new Queries(pool)), "/queries");
        ctx.addServlet(new ServletHolder(new Updates(pool)), "/updates");
        ctx.addServlet(new ServletHolder(new Fortunes(pool)), "/fortunes");
        ctx.addServlet(new ServletHolder(new EchoWebSocketServlet()), "/ws");
        server.setHandler(ctx);
        server.start();
        System.err.println("jetty listening on 0.0.0.0:8080 with "
                + Runtime.getRuntime().availableProcessors() + " CPUs visible");
        server.join();
    }
}
