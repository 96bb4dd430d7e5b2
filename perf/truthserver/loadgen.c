/*
 * loadgen: a closed-loop load for measuring truthserver's capacity (perf/truthserver/capacity.py), cheap
 * enough never to be the bottleneck: raw keep-alive sockets and epoll, no parsing beyond finding where a
 * response ends, no timestamps per chunk (the server's own truth measures the timing).
 *
 *   loadgen --port P [--host 127.0.0.1] -c CONCURRENCY [--duration 10] [--warmup 2] [--max-tokens 128]
 *           [--ramp-ms 0] [--procs 1]
 *
 * Each of the C connections sends a streamed completion request (the body firstlight bench sends) and,
 * as soon as its response ends, the next one, until --duration seconds have passed; requests in flight then
 * finish. --ramp-ms spreads the first requests evenly over that many milliseconds: with the ramp one ITL long
 * the chunks fall due evenly over time (a steady rate); with no ramp every stream's chunk k falls due at the
 * same instant (a burst of C each ITL). --procs splits the connections over processes.
 *
 * Prints one JSON line: requests done, chunks received from --warmup to --duration (chunks_per_s, the load
 * the server carried), errors, wall time and the CPU time loadgen used.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TAIL 7 /* bytes kept from the previous read: the longest pattern searched ("\r\n0\r\n\r\n") */

static const char *host = "127.0.0.1";
static int port, conc, procs = 1, max_tokens = 128;
static double duration = 10, warmup = 2, ramp_ms = 0;

static struct { /* summed over the processes */
    _Atomic uint64_t requests, chunks, errors;
} *totals;

typedef struct {
    int fd;
    bool response_start; /* the next byte read begins a response (its status line) */
    char tail[TAIL];
    int tail_len;
} conn_t;

static char request[1024];
static size_t request_len;

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void build_request(void) {
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"model\":\"ref\",\"max_tokens\":%d,\"stream\":true,\"stream_options\":{\"include_usage\":true,"
                     "\"continuous_usage_stats\":true},\"prompt\":\"%s\"}",
                     max_tokens, "hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi hi");
    request_len = (size_t)snprintf(request, sizeof request,
                                   "POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                                   "Accept: text/event-stream\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s",
                                   host, port, n, body);
}

static void send_request(conn_t *c) {
    /* a few hundred bytes into an empty socket buffer: taken whole */
    if (write(c->fd, request, request_len) != (ssize_t)request_len)
        die("write");
    c->response_start = true;
    c->tail_len = 0;
}

/* How many times pat occurs in buf[0, n) ending past buf[skip] (occurrences inside the first skip bytes, the
   previous read's tail, were counted then). */
static int occurrences(const char *buf, size_t n, size_t skip, const char *pat) {
    size_t len = strlen(pat);
    int found = 0;
    for (const char *p = buf; (p = memmem(p, n - (size_t)(p - buf), pat, len)); p++)
        found += (size_t)(p - buf) + len > skip;
    return found;
}

/* Reads what arrived; true when the response ended. Every chunk frame ends with an event's blank line and the
   chunk's CRLF ("\n\n\r\n", one per chunk), and the body with the zero-length chunk ("\r\n0\r\n\r\n"). */
static bool on_readable(conn_t *c, double start) {
    static char buf[TAIL + 65536];
    memcpy(buf, c->tail, (size_t)c->tail_len);
    ssize_t n = read(c->fd, buf + c->tail_len, sizeof buf - TAIL);
    if (n <= 0) {
        if (n < 0 && errno == EAGAIN)
            return false;
        fprintf(stderr, "loadgen: the server closed a connection\n");
        exit(1);
    }
    if (c->response_start) {
        c->response_start = false;
        if (n < 12 || memcmp(buf + c->tail_len, "HTTP/1.1 200", 12)) {
            atomic_fetch_add(&totals->errors, 1);
            fprintf(stderr, "loadgen: not a 200: %.60s\n", buf + c->tail_len);
        }
    }
    size_t all = (size_t)c->tail_len + (size_t)n;
    double t = now_s() - start;
    if (t >= warmup && t < duration)
        atomic_fetch_add_explicit(&totals->chunks, (uint64_t)occurrences(buf, all, (size_t)c->tail_len, "\n\n\r\n"),
                                  memory_order_relaxed);
    bool done = occurrences(buf, all, (size_t)c->tail_len, "\r\n0\r\n\r\n") > 0;
    c->tail_len = all < TAIL ? (int)all : TAIL;
    memcpy(c->tail, buf + all - (size_t)c->tail_len, (size_t)c->tail_len);
    return done;
}

/* One process: connections [first, first + n) of the C, the first requests spread over the ramp from start. */
static void run(int first, int n, double start) {
    int ep = epoll_create1(0);
    conn_t *conns = calloc((size_t)n, sizeof *conns);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (ep < 0 || !conns || inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        die("setup (--host takes an IPv4 address)");
    for (int i = 0; i < n; i++) { /* connected before the load starts, as firstlight bench does */
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
            die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            die("epoll_ctl");
    }
    for (int i = 0; i < n; i++) { /* the ramp is short next to a TTFT: nothing to read yet, so a spin will do */
        double at = start + ramp_ms / 1000 * (first + i) / conc;
        while (now_s() < at)
            ;
        send_request(&conns[i]);
    }
    int active = n;
    struct epoll_event evs[256];
    while (active) {
        int k = epoll_wait(ep, evs, 256, -1);
        if (k < 0 && errno != EINTR)
            die("epoll_wait");
        for (int i = 0; i < k; i++) {
            conn_t *c = evs[i].data.ptr;
            if (!on_readable(c, start))
                continue;
            atomic_fetch_add_explicit(&totals->requests, 1, memory_order_relaxed);
            if (now_s() - start < duration) {
                send_request(c);
            } else {
                close(c->fd);
                active--;
            }
        }
    }
}

int main(int argc, char **argv) {
    static const struct option options[] = {
        {"host", required_argument, NULL, 'H'},     {"port", required_argument, NULL, 'p'},
        {"concurrency", required_argument, NULL, 'c'}, {"duration", required_argument, NULL, 'd'},
        {"warmup", required_argument, NULL, 'w'},   {"max-tokens", required_argument, NULL, 'm'},
        {"ramp-ms", required_argument, NULL, 'r'},  {"procs", required_argument, NULL, 'n'},
        {0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "c:", options, NULL)) != -1) {
        switch (o) {
        case 'H': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'c': conc = atoi(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 'w': warmup = atof(optarg); break;
        case 'm': max_tokens = atoi(optarg); break;
        case 'r': ramp_ms = atof(optarg); break;
        case 'n': procs = atoi(optarg); break;
        default: return 2;
        }
    }
    if (port <= 0 || conc < 1 || procs < 1 || procs > conc || warmup >= duration || max_tokens < 1) {
        fprintf(stderr, "usage: loadgen --port P -c CONCURRENCY [--duration 10] [--warmup 2] [--max-tokens 128] "
                        "[--ramp-ms 0] [--procs 1] [--host 127.0.0.1]\n");
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    build_request();
    if ((totals = mmap(NULL, sizeof *totals, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED)
        die("mmap");
    double start = now_s() + 0.2 + conc * 20e-6; /* time for every process to connect first */
    for (int p = 0, first = 0; p < procs; p++) {
        int n = conc / procs + (p < conc % procs);
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            run(first, n, start);
            _exit(0);
        }
        first += n;
    }
    int status, failed = 0;
    while (wait(&status) > 0)
        failed |= !WIFEXITED(status) || WEXITSTATUS(status);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    printf("{\"requests\": %llu, \"chunks_per_s\": %.1f, \"errors\": %llu, \"wall_s\": %.3f, \"cpu_s\": %.3f}\n",
           (unsigned long long)totals->requests, (double)totals->chunks / (duration - warmup),
           (unsigned long long)totals->errors, now_s() - start, cpu);
    return failed;
}
