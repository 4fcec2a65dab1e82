// The fairground contract on Jetty 9 (Debian libjetty9-java) the classic way:
// an embedded Server with a ServletContextHandler, one HttpServlet per route,
// Jackson databind for JSON, and javax.servlet Filters mapped to each /mw/N
// path for the middleware chains (filters run in the order they are added,
// so layer 1 is the outermost).
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumSet;
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
        server.setHandler(ctx);
        server.start();
        System.err.println("jetty listening on 0.0.0.0:8080 with "
                + Runtime.getRuntime().availableProcessors() + " CPUs visible");
        server.join();
    }
}
