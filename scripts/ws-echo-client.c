/* ws-echo-client.c: the floor for scripts/bench-ws-loader.sh.
 *
 * A minimal WebSocket echo load client: one thread, epoll, N connections to
 * 127.0.0.1. Each connection sends the HTTP upgrade (`GET PATH`, a fixed
 * Sec-WebSocket-Key), checks the 101 and its Sec-WebSocket-Accept, then
 * keeps one message in flight: a masked text frame of S bytes (a 16-digit
 * hex stamp of the message's number, then printable ASCII; a fresh mask key
 * per message), waits for its echo, checks that it is an unmasked text frame of
 * exactly S bytes equal to what it sent, and sends the next. It runs for
 * WARMUP seconds, then counts the echoes completed in the next DURATION
 * seconds and its own CPU time over that window (getrusage), and prints
 *
 *   msgs=N secs=T msg_per_s=X user_us=U sys_us=S wrong=W closed=C
 *
 * It is what the kernel plus a trivial client cost per message; no latency
 * histogram, no rate control, no reconnects. Loopback only.
 *
 * Usage: ws-echo-client PORT PATH CONNS SIZE WARMUP_S DURATION_S
 * Build: gcc -O2 -o ws-echo-client ws-echo-client.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum phase { CONNECTING, UPGRADING, OPEN, DEAD };

struct conn {
    int fd;
    enum phase phase;
    uint64_t k;           /* number of the message in flight */
    unsigned char *out;   /* the frame being sent */
    size_t out_len, out_off;
    unsigned char *msg;   /* its payload, unmasked: what the echo must be */
    unsigned char *in;    /* bytes read and not yet consumed */
    size_t in_len, in_cap;
    int want_out;         /* EPOLLOUT registered */
};

static int ep;
static size_t size;
static size_t hdr_len;    /* client frame header: 2 or 4 bytes, plus the 4-byte key */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static long long counted, wrong, closed_conns;
static int counting;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void set_events(struct conn *c, uint32_t ev) {
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e) < 0) die("epoll_ctl");
}

static void kill_conn(struct conn *c) {
    if (c->phase == DEAD) return;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->phase = DEAD;
    closed_conns++;
}

/* Write what is left of c->out; register EPOLLOUT if the socket is full. */
static void flush(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (!c->want_out) { c->want_out = 1; set_events(c, EPOLLIN | EPOLLOUT); }
            return;
        }
        kill_conn(c);
        return;
    }
    if (c->want_out) { c->want_out = 0; set_events(c, EPOLLIN); }
}

/* Build message c->k (stamp + printable bytes), mask it into c->out, send. */
static void send_message(struct conn *c) {
    uint64_t k = ++c->k;
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) c->msg[i] = (unsigned char)hex[(k >> (60 - 4 * i)) & 15];
    for (size_t i = 16; i < size; i += 64) c->msg[i] = (unsigned char)('a' + (k + i) % 26);
    unsigned char *p = c->out;
    p[0] = 0x81; /* FIN, text */
    if (size < 126) {
        p[1] = 0x80 | (unsigned char)size;
        p += 2;
    } else {
        p[1] = 0x80 | 126;
        p[2] = (unsigned char)(size >> 8);
        p[3] = (unsigned char)size;
        p += 4;
    }
    uint32_t key = next_rand();
    memcpy(p, &key, 4);
    p += 4;
    /* Mask 8 bytes at a time (the frame's payload starts 4-aligned in the key). */
    uint64_t m64 = (uint64_t)key | ((uint64_t)key << 32);
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t w;
        memcpy(&w, c->msg + i, 8);
        w ^= m64;
        memcpy(p + i, &w, 8);
    }
    unsigned char m[4];
    memcpy(m, &key, 4);
    for (; i < size; i++) p[i] = c->msg[i] ^ m[i & 3];
    c->out_len = hdr_len + size;
    c->out_off = 0;
    flush(c);
}

static const char upgrade_fmt[] =
    "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
/* RFC 6455's example: the accept for that key. */
static const char accept_hdr[] = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/* Consume what c->in holds: the 101, then echoes. */
static void consume(struct conn *c) {
    size_t off = 0;
    if (c->phase == UPGRADING) {
        unsigned char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (!end) return;
        size_t head = (size_t)(end - c->in) + 4;
        if (c->in_len < 12 || memcmp(c->in, "HTTP/1.1 101", 12) != 0 ||
            !memmem(c->in, head, accept_hdr, sizeof accept_hdr - 1)) {
            fprintf(stderr, "ws-echo-client: bad upgrade answer: %.*s\n", (int)head, c->in);
            exit(1);
        }
        c->phase = OPEN;
        off = head;
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
        off = 0;
        send_message(c);
        if (c->phase == DEAD) return;
    }
    for (;;) {
        size_t avail = c->in_len - off;
        if (avail < 2) break;
        unsigned char *f = c->in + off;
        size_t len = f[1] & 0x7f, h = 2;
        if (len == 126) {
            if (avail < 4) break;
            len = ((size_t)f[2] << 8) | f[3];
            h = 4;
        } else if (len == 127) {
            fprintf(stderr, "ws-echo-client: unexpected 64-bit frame length\n");
            exit(1);
        }
        if (avail < h + len) break;
        if (f[0] != 0x81 || (f[1] & 0x80) || len != size || memcmp(f + h, c->msg, size) != 0) {
            wrong++;
            if ((f[0] & 0x0f) == 0x8) { kill_conn(c); return; } /* close */
        } else if (counting) {
            counted++;
        }
        off += h + len;
        send_message(c);
        if (c->phase == DEAD) return;
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
}

static void on_readable(struct conn *c) {
    for (;;) {
        if (c->in_cap - c->in_len < 4096) {
            c->in_cap *= 2;
            c->in = realloc(c->in, c->in_cap);
            if (!c->in) die("realloc");
        }
        size_t room = c->in_cap - c->in_len;
        ssize_t n = recv(c->fd, c->in + c->in_len, room, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            consume(c);
            if (c->phase == DEAD) return;
            if ((size_t)n < room) return; /* drained: no second recv */
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        kill_conn(c); /* EOF or error */
        return;
    }
}

static long long cpu_us(int which) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    struct timeval t = which ? ru.ru_stime : ru.ru_utime;
    return t.tv_sec * 1000000LL + t.tv_usec;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s PORT PATH CONNS SIZE WARMUP_S DURATION_S\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *path = argv[2];
    int nconn = atoi(argv[3]);
    size = (size_t)atol(argv[4]);
    double warmup = atof(argv[5]), duration = atof(argv[6]);
    if (port <= 0 || nconn <= 0 || size < 16 || size > 65535 || duration <= 0) {
        fprintf(stderr, "ws-echo-client: bad arguments (SIZE 16..65535)\n");
        return 2;
    }
    hdr_len = (size < 126 ? 2 : 4) + 4;
    ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    char upgrade[512];
    int up_len = snprintf(upgrade, sizeof upgrade, upgrade_fmt, path, port);

    struct conn *conns = calloc((size_t)nconn, sizeof *conns);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < nconn; i++) {
        struct conn *c = &conns[i];
        c->out = malloc(size + 8);
        c->msg = malloc(size);
        c->in_cap = 2 * (size + 16) + 4096;
        c->in = malloc(c->in_cap);
        if (!c->out || !c->msg || !c->in) die("malloc");
        for (size_t j = 0; j < size; j++) c->msg[j] = (unsigned char)(' ' + 1 + (i * 7 + j) % 94);
        c->k = (uint64_t)i << 40;
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (c->fd < 0) die("socket");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) die("connect");
        c->phase = CONNECTING;
        struct epoll_event e = {.events = EPOLLOUT, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0) die("epoll_ctl add");
    }

    double t0 = now(), t_start = t0 + warmup, t_end = t_start + duration;
    double hard_end = t_end + 10; /* bounded even if the server stalls */
    long long u0 = 0, s0 = 0, u1 = 0, s1 = 0;
    double w0 = 0, w1 = 0;
    struct epoll_event evs[256];
    for (;;) {
        double t = now();
        if (!counting && w0 == 0 && t >= t_start) {
            counting = 1;
            w0 = t;
            u0 = cpu_us(0);
            s0 = cpu_us(1);
        }
        if (counting && t >= t_end) {
            w1 = t;
            u1 = cpu_us(0);
            s1 = cpu_us(1);
            counting = 0;
            break;
        }
        if (t >= hard_end) break;
        int n = epoll_wait(ep, evs, 256, 10);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->phase == DEAD) continue;
            if (c->phase == CONNECTING) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) { fprintf(stderr, "ws-echo-client: connect: %s\n", strerror(err)); exit(1); }
                c->phase = UPGRADING;
                if (send(c->fd, upgrade, (size_t)up_len, MSG_NOSIGNAL) != up_len) die("send upgrade");
                set_events(c, EPOLLIN);
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
            if (c->phase != DEAD && (evs[i].events & EPOLLOUT)) flush(c);
        }
    }
    if (w1 == 0) {
        fprintf(stderr, "ws-echo-client: the window never closed\n");
        return 1;
    }
    for (int i = 0; i < nconn; i++) {
        if (conns[i].phase == DEAD) continue;
        static const unsigned char close_frame[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8};
        send(conns[i].fd, close_frame, sizeof close_frame, MSG_NOSIGNAL);
        close(conns[i].fd);
    }
    double secs = w1 - w0;
    printf("msgs=%lld secs=%.3f msg_per_s=%.1f user_us=%lld sys_us=%lld wrong=%lld closed=%lld\n",
           counted, secs, counted / secs, u1 - u0, s1 - s0, wrong, closed_conns);
    return 0;
}
