// The fairground contract on Boost.Beast (HTTP/1.1 over Boost.Asio) with
// Boost.JSON, all from Debian's Boost 1.81. The server has the shape of
// Beast's own http_server_async example: one io_context, one acceptor, one
// session per connection doing async read -> handle -> async write in a loop,
// and the io_context run by FAIRGROUND_CPUS threads. A session never has two
// operations pending at once, so its handlers cannot run concurrently and no
// strand is needed.
//
// Beast is a protocol library with no router and no middleware; handlers are
// plain callables and each middleware layer is a callable wrapping the next
// one (synchronous), the same shape as Go's func(http.Handler) http.Handler.
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <boost/json/src.hpp>  // Boost.JSON compiled into this TU (header-only mode)

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Handler = std::function<void(const Request &, Response &)>;

namespace {

// The contract sends bodies of at most 64 KiB; refuse anything beyond 1 MiB.
constexpr std::uint64_t kBodyLimit = 1 << 20;
// A connection that sends nothing for this long is closed.
constexpr auto kIdleTimeout = std::chrono::seconds(30);

unsigned cpus_from_env() {
  const char *v = std::getenv("FAIRGROUND_CPUS");
  if (v == nullptr) return 1;
  char *end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 1024) return 1;
  return static_cast<unsigned>(n);
}

// Beast sends no Date header; RFC 9110 wants one. Formatted at most once per
// second per thread rather than once per answer.
const std::string &http_date() {
  thread_local std::time_t last = 0;
  thread_local std::string text;
  std::time_t now = std::time(nullptr);
  if (now != last) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    text = buf;
    last = now;
  }
  return text;
}

void send_text(Response &res, http::status status, std::string body) {
  res.result(status);
  res.set(http::field::content_type, "text/plain");
  res.body() = std::move(body);
}

void send_json(Response &res, const json::value &v) {
  res.result(http::status::ok);
  res.set(http::field::content_type, "application/json");
  res.body() = json::serialize(v);
}

void plaintext(const Request &, Response &res) {
  send_text(res, http::status::ok, "Hello, World!");
}

// Number of Unicode scalar values in valid UTF-8 (Boost.JSON has validated it).
size_t utf8_chars(json::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The contract's validate rules; returns the answer, or null when invalid.
json::value validated(const json::value &v) {
  const json::object *obj = v.if_object();
  if (obj == nullptr) return nullptr;
  const json::value *name = obj->if_contains("name");
  const json::value *age = obj->if_contains("age");
  const json::value *email = obj->if_contains("email");
  if (name == nullptr || !name->is_string()) return nullptr;
  if (age == nullptr || !(age->is_int64() || age->is_uint64())) return nullptr;
  if (email == nullptr || !email->is_string()) return nullptr;
  size_t n = utf8_chars(name->get_string());
  if (n < 1 || n > 64) return nullptr;
  if (age->is_uint64() || age->get_int64() < 0 || age->get_int64() > 150) return nullptr;
  json::string_view e = email->get_string();
  size_t at = e.find('@');
  if (e.size() < 3 || e.size() > 254 || at == json::string_view::npos || at == 0 ||
      e.back() == '@')
    return nullptr;
  return json::object{{"name", *name}, {"age", *age}, {"email", *email}};
}

void echo(const Request &req, Response &res) {
  json::error_code ec;
  json::value v = json::parse(req.body(), ec);
  if (ec) return send_text(res, http::status::bad_request, "invalid JSON");
  send_json(res, v);
}

void validate(const Request &req, Response &res) {
  json::error_code ec;
  json::value v = json::parse(req.body(), ec);
  json::value out = ec ? json::value(nullptr) : validated(v);
  if (out.is_null()) return send_text(res, http::status::unprocessable_entity, "invalid person");
  send_json(res, out);
}

// Middleware layer i: reads x-test itself and sets x-mw-{i}, then calls next.
Handler echo_header(int i, Handler next) {
  std::string name = "x-mw-" + std::to_string(i);
  return [name = std::move(name), next = std::move(next)](const Request &req, Response &res) {
    res.set(name, req["x-test"]);
    next(req, res);
  };
}

// n layers around h, layer 1 outermost.
Handler chain(int n, Handler h) {
  for (int i = n; i >= 1; --i) h = echo_header(i, std::move(h));
  return h;
}

// Exact-path routes by method, plus the /users/{id} pattern. Built once
// before the threads start; read-only afterwards.
struct Router {
  std::unordered_map<std::string, Handler> get;
  std::unordered_map<std::string, Handler> post;

  void dispatch(const Request &req, Response &res) const {
    beast::string_view target = req.target();
    beast::string_view path = target.substr(0, target.find('?'));
    const auto &table = req.method() == http::verb::post ? post : get;
    if (req.method() == http::verb::get || req.method() == http::verb::post) {
      auto it = table.find(std::string(path));
      if (it != table.end()) return it->second(req, res);
      constexpr beast::string_view users = "/users/";
      if (req.method() == http::verb::get && path.starts_with(users)) {
        beast::string_view id = path.substr(users.size());
        if (!id.empty() && id.find('/') == beast::string_view::npos) {
          return send_json(res, json::object{{"id", json::string_view(id.data(), id.size())},
                                             {"name", "ada"}});
        }
      }
    }
    send_text(res, http::status::not_found, "not found");
  }
};

// One connection: read a request, answer it, repeat while keep-alive holds.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket &&socket, const Router &router)
      : stream_(std::move(socket)), router_(router) {}

  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       self->on_read(ec);
                     });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream) return close();
    if (ec) return;  // timeout, reset or malformed request: drop the connection
    Request req = parser_->release();
    res_ = {};
    res_.version(req.version());
    res_.keep_alive(req.keep_alive());
    router_.dispatch(req, res_);
    res_.set(http::field::date, http_date());
    res_.prepare_payload();
    stream_.expires_never();
    http::async_write(stream_, res_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        self->on_write(ec);
                      });
  }

  void on_write(beast::error_code ec) {
    if (ec) return;
    if (!res_.keep_alive()) return close();
    read();
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response res_;
  const Router &router_;
};

// The listen backlog: the kernel's own cap, net.core.somaxconn (the
// profile's server.sysctls), the rule every framework here follows. Asio's
// max_listen_connections is the SOMAXCONN constant of the C library's
// headers (4096 here), which a burst of 10,000 connects overflows; Asio's
// docs, basic_socket_acceptor::listen(backlog): "The maximum length of the
// queue of pending connections". That constant when the file cannot be read.
static int listen_backlog() {
  std::FILE *f = std::fopen("/proc/sys/net/core/somaxconn", "r");
  int n = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%d", &n) != 1) n = 0;
    std::fclose(f);
  }
  return n > 0 ? n : static_cast<int>(asio::socket_base::max_listen_connections);
}

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context &ioc, tcp::endpoint endpoint, const Router &router)
      : ioc_(ioc), acceptor_(ioc), router_(router) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(listen_backlog());
  }

  void accept() {
    acceptor_.async_accept(asio::make_strand(ioc_),
                           [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
                             if (!ec) {
                               // One gather write per answer already; no_delay
                               // keeps Nagle out of any partial-write case.
                               s.set_option(tcp::no_delay(true), ec);
                               std::make_shared<Session>(std::move(s), self->router_)->start();
                             }
                             self->accept();
                           });
  }

 private:
  asio::io_context &ioc_;
  tcp::acceptor acceptor_;
  const Router &router_;
};

}  // namespace

int main() {
  unsigned cpus = cpus_from_env();

  Router router;
  router.get["/"] = plaintext;
  router.get["/json"] = [](const Request &, Response &res) {
    send_json(res, json::object{{"message", "Hello, World!"}});
  };
  router.post["/echo"] = echo;
  router.post["/validate"] = validate;
  for (int n = 0; n <= 10; ++n) router.get["/mw/" + std::to_string(n)] = chain(n, plaintext);

  asio::io_context ioc(static_cast<int>(cpus));
  try {
    std::make_shared<Listener>(ioc, tcp::endpoint(asio::ip::make_address("0.0.0.0"), 8080),
                               router)
        ->accept();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "boost-beast: cannot listen on 0.0.0.0:8080: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "Boost.Beast %d listening on 0.0.0.0:8080, one io_context run by %u threads\n",
               BOOST_BEAST_VERSION, cpus);

  std::vector<std::thread> threads;
  for (unsigned i = 1; i < cpus; ++i) threads.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto &t : threads) t.join();
  return 0;
}
