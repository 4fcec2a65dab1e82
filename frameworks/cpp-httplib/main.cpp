// The fairground contract on cpp-httplib (Debian's libcpp-httplib0.11 build),
// with Boost.JSON for parsing and serializing. cpp-httplib has no middleware
// chain of its own (one pre-routing and one post-routing hook only), so
// middleware layers are handler wrappers: each layer is a Handler that sets
// its header and calls the next one, like Go's func(http.Handler) http.Handler.
#include <httplib.h>

#include <boost/json/src.hpp>  // Boost.JSON in header-only mode: one TU, no extra library to ship

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace json = boost::json;
using httplib::Request;
using httplib::Response;
using Handler = httplib::Server::Handler;

namespace {

// The contract sends bodies of at most 64 KiB; refuse anything beyond 1 MiB.
constexpr size_t kBodyLimit = 1 << 20;

// A keep-alive connection occupies one pool thread for its whole life (that
// is cpp-httplib's design). The library closes a connection after 5 answers
// by default; the contract needs at least 100 on one connection, so allow
// 1000 and then rotate, which lets queued connections get a thread.
constexpr size_t kKeepAliveMaxCount = 1000;

unsigned cpus_from_env() {
  const char *v = std::getenv("FAIRGROUND_CPUS");
  if (v == nullptr) return 1;
  char *end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 1024) return 1;
  return static_cast<unsigned>(n);
}

// cpp-httplib sends no Date header. RFC 9110 wants one; format it at most
// once per second per thread instead of once per answer.
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

void send_json(Response &res, const json::value &v) {
  res.set_content(json::serialize(v), "application/json");
}

void plaintext(const Request &, Response &res) {
  res.set_content("Hello, World!", "text/plain");
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

// Middleware layer i: reads x-test itself and sets x-mw-{i}, then calls next.
Handler echo_header(int i, Handler next) {
  std::string name = "x-mw-" + std::to_string(i);
  return [name, next](const Request &req, Response &res) {
    res.set_header(name, req.get_header_value("x-test"));
    next(req, res);
  };
}

// n layers around h, layer 1 outermost.
Handler chain(int n, Handler h) {
  for (int i = n; i >= 1; --i) h = echo_header(i, h);
  return h;
}

}  // namespace

int main() {
  unsigned cpus = cpus_from_env();
  httplib::Server svr;
  // One pool thread per allotted CPU (the library default is max(8, hardware
  // threads - 1), which ignores the container's CPU quota).
  svr.new_task_queue = [cpus] { return new httplib::ThreadPool(cpus); };
  // cpp-httplib writes the head and the body with separate send() calls;
  // with Nagle on, the body waits for the client's delayed ACK (~40 ms).
  svr.set_tcp_nodelay(true);
  svr.set_keep_alive_max_count(kKeepAliveMaxCount);
  svr.set_payload_max_length(kBodyLimit);
  svr.set_post_routing_handler(
      [](const Request &, Response &res) { res.set_header("Date", http_date()); });

  svr.Get("/", plaintext);
  svr.Get("/json", [](const Request &, Response &res) {
    send_json(res, json::object{{"message", "Hello, World!"}});
  });
  svr.Get(R"(/users/([^/]+))", [](const Request &req, Response &res) {
    send_json(res, json::object{{"id", req.matches[1].str()}, {"name", "ada"}});
  });
  svr.Post("/echo", [](const Request &req, Response &res) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec) {
      res.status = 400;
      res.set_content("invalid JSON", "text/plain");
      return;
    }
    send_json(res, v);
  });
  svr.Post("/validate", [](const Request &req, Response &res) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    json::value out = ec ? json::value(nullptr) : validated(v);
    if (out.is_null()) {
      res.status = 422;
      res.set_content("invalid person", "text/plain");
      return;
    }
    send_json(res, out);
  });
  for (int n = 0; n <= 10; ++n) svr.Get("/mw/" + std::to_string(n), chain(n, plaintext));

  std::fprintf(stderr, "cpp-httplib %s listening on 0.0.0.0:8080 with %u pool threads\n",
               CPPHTTPLIB_VERSION, cpus);
  if (!svr.listen("0.0.0.0", 8080)) {
    std::perror("cpp-httplib: listen on 0.0.0.0:8080 failed");
    return 1;
  }
  return 0;
}
