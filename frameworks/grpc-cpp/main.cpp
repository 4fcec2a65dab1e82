// fairground's gRPC service (bench.proto) on gRPC C++ 1.51, Debian's
// libgrpc++-dev, with the code protoc and grpc_cpp_plugin generated from
// bench.proto at image build (bench.pb.h, bench.grpc.pb.h).
//
// The callback API (Bench::CallbackService, reactors), which gRPC's C++
// performance guide (grpc.io/docs/guides/performance) tells users to favour
// for RPCs that never block, as these do; the guide rules out the sync API
// for performance-sensitive servers. The guide also says the older
// completion-queue API can be faster "for truly high-QPS workloads", so a
// server on that API was written too, as the guide says (numcpu threads,
// two per completion queue, 1,000 calls requested per method and queue),
// and measured against this one on 1.51 here: the callback API answered
// more (the figures are in framework.yaml's notes), so it is what ships.
// In 1.51 on Linux the callback API runs its handlers on gRPC's own
// threads ("nexting" threads on one shared completion queue, Clamp(CPUs
// the host has / 2, 2, 16) of them); no API sets their number, so
// FAIRGROUND_CPUS is only logged, and the CPU is held by the container's
// quota and cpuset.
//
// gRPC with prior knowledge on 8082 (InsecureServerCredentials) and over
// TLS on 8443 (SslServerCredentials, ALPN h2) when fairground gives a
// certificate, both ports on the one grpc::Server. A method the service
// does not have is answered UNIMPLEMENTED by gRPC itself (a callback server
// without a generic service registers gRPC's own unimplemented handler).
// HTTP/1.1 on 8080 is a minimal hand-written socket loop for fairground's
// readiness probe only (no scenario is declared there): gRPC needs HTTP/2.
#include <grpcpp/grpcpp.h>

#include "bench.grpc.pb.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

namespace {

using fairground::bench::Bench;
using fairground::bench::EchoReply;
using fairground::bench::EchoRequest;
using fairground::bench::StreamReply;
using fairground::bench::StreamRequest;
using fairground::bench::SumReply;
using fairground::bench::SumRequest;

unsigned env_uint(const char *name, unsigned def, unsigned max) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char *end = nullptr;
  unsigned long n = std::strtoul(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > max) return def;
  return static_cast<unsigned>(n);
}

std::string read_file(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "grpc-cpp: cannot read %s\n", path);
    std::exit(1);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The three methods, each answered on the thread gRPC runs it on. Nothing
// here blocks, which is what the callback API asks of a handler.
class BenchService final : public Bench::CallbackService {
  // Echo: the request's id and payload, unchanged.
  grpc::ServerUnaryReactor *Echo(grpc::CallbackServerContext *ctx, const EchoRequest *request,
                                 EchoReply *reply) override {
    reply->set_id(request->id());
    reply->set_payload(request->payload());
    grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Sum: the int64 sum, wrapping on overflow (two's complement). The sum
  // is taken in uint64_t, where overflow is defined; the conversion back
  // to int64_t is modulo 2^64 in GCC (and in C++20).
  grpc::ServerUnaryReactor *Sum(grpc::CallbackServerContext *ctx, const SumRequest *request,
                                SumReply *reply) override {
    std::uint64_t sum = 0;
    for (std::int64_t v : request->values()) sum += static_cast<std::uint64_t>(v);
    reply->set_sum(static_cast<std::int64_t>(sum));
    grpc::ServerUnaryReactor *reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Stream: `count` replies, each with the request's id and its index, one
  // write at a time (the next once the last completed), the last one sent
  // with the status (StartWriteAndFinish: a completion fewer).
  grpc::ServerWriteReactor<StreamReply> *Stream(grpc::CallbackServerContext *,
                                                const StreamRequest *request) override {
    class Writer final : public grpc::ServerWriteReactor<StreamReply> {
     public:
      Writer(std::uint64_t id, std::uint32_t count) : id_(id), count_(count) { WriteNext(); }
      void OnWriteDone(bool ok) override {
        if (!ok) {  // the call is over (cancelled, or the client went away)
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
          return;
        }
        WriteNext();
      }
      void OnDone() override { delete this; }

     private:
      void WriteNext() {
        if (next_ == count_) {  // count == 0: no reply, only the status
          Finish(grpc::Status::OK);
          return;
        }
        reply_.set_id(id_);
        reply_.set_index(next_);
        if (++next_ == count_) {
          StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
        } else {
          StartWrite(&reply_);
        }
      }
      const std::uint64_t id_;
      const std::uint32_t count_;
      std::uint32_t next_ = 0;
      StreamReply reply_;
    };
    return new Writer(request->id(), request->count());
  }
};

// The kernel's accept queue limit, as the other C++ apps listen with.
int listen_backlog() {
  int n = 0;
  std::FILE *f = std::fopen("/proc/sys/net/core/somaxconn", "r");
  if (f != nullptr) {
    if (std::fscanf(f, "%d", &n) != 1) n = 0;
    std::fclose(f);
  }
  return n > 0 ? n : SOMAXCONN;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t w = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

// HTTP/1.1 for the readiness probe only: one connection at a time, one
// request each (GET / or /plaintext answers Hello, World!; anything else
// 404), then Connection: close. Exits the process if it cannot listen.
void serve_readiness(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, listen_backlog()) != 0) {
    std::perror("grpc-cpp: readiness listener on :8080");
    std::_Exit(1);
  }
  static constexpr std::string_view kHello =
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n"
      "Connection: close\r\n\r\nHello, World!";
  static constexpr std::string_view kNotFound =
      "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n"
      "Connection: close\r\n\r\nNot Found";
  for (;;) {
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;  // EINTR, ECONNABORTED, EMFILE: try the next one
    timeval tv{2, 0};  // a client that sends nothing does not hold the loop
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char buf[8192];
    size_t n = 0;
    while (n < sizeof buf) {
      ssize_t r = ::recv(c, buf + n, sizeof buf - n, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      n += static_cast<size_t>(r);
      if (std::string_view(buf, n).find("\r\n\r\n") != std::string_view::npos) break;
    }
    std::string_view req(buf, n);
    bool hello = req.rfind("GET / HTTP/1.", 0) == 0 || req.rfind("GET /plaintext HTTP/1.", 0) == 0;
    if (n > 0) send_all(c, hello ? kHello : kNotFound);
    ::close(c);
  }
}

}  // namespace

int main() {
  // SIGTERM and SIGINT are taken by sigwait in main alone: block them
  // before any thread (gRPC's included) exists, so every thread inherits
  // the mask. As PID 1 the process would otherwise ignore SIGTERM.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const unsigned cpus = env_uint("FAIRGROUND_CPUS", 1, 1024);
  const unsigned h2c_port = env_uint("FAIRGROUND_H2C_PORT", 8082, 65535);
  const unsigned tls_port = env_uint("FAIRGROUND_TLS_PORT", 8443, 65535);
  const char *cert = std::getenv("FAIRGROUND_TLS_CERT");
  const bool tls = cert != nullptr && *cert != '\0';

  BenchService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("0.0.0.0:" + std::to_string(h2c_port),
                           grpc::InsecureServerCredentials());
  if (tls) {
    const char *key = std::getenv("FAIRGROUND_TLS_KEY");
    if (key == nullptr || *key == '\0') {
      std::fprintf(stderr, "grpc-cpp: FAIRGROUND_TLS_CERT without FAIRGROUND_TLS_KEY\n");
      return 1;
    }
    grpc::SslServerCredentialsOptions options;  // no client certificate asked
    options.pem_key_cert_pairs.push_back({read_file(key), read_file(cert)});
    builder.AddListeningPort("0.0.0.0:" + std::to_string(tls_port),
                             grpc::SslServerCredentials(options));
  }
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "grpc-cpp: the server did not start (ports taken, or a bad certificate)\n");
    return 1;
  }

  // Readiness last: once 8080 answers, gRPC is serving.
  std::thread(serve_readiness, 8080).detach();
  const long host_cpus = sysconf(_SC_NPROCESSORS_CONF);
  const std::string tls_note = tls ? ", TLS on :" + std::to_string(tls_port) : "";
  std::fprintf(stderr,
               "grpc-cpp: gRPC C++ %s, callback API (FAIRGROUND_CPUS=%u; gRPC runs handlers on "
               "its own threads, sized from the %ld CPUs it sees); h2c on :%u%s, http1 "
               "(readiness) on :8080\n",
               grpc::Version().c_str(), cpus, host_cpus, h2c_port, tls_note.c_str());

  int sig = 0;
  sigwait(&stop, &sig);
  // Let calls in flight finish, at most a second.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  std::_Exit(0);
}
