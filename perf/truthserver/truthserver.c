/*
 * truthserver: an OpenAI-compatible streaming server whose timing is known, for measuring benchmark clients
 * (perf/client_fidelity.py, tests/integration/test_truthserver.py). It is the C twin of
 * src/firstlight/testing/refserver.py: the same endpoints, the same SSE bytes, the same GET /truth, for loads
 * one Python process cannot keep on time.
 *
 *   truthserver [--host 127.0.0.1] [--port 8100] [--ttft-ms 50] [--itl-ms 10] [--tokens-per-chunk 1]
 *               [--procs N] [--cpus LIST] [--truth-capacity SAMPLES]
 *
 * Timing. Chunk j of a request is due at arrival + TTFT + j x ITL on CLOCK_MONOTONIC (arrival: when the read
 * that completed the request returned), an absolute schedule that never drifts, and is written the moment it
 * is due, never before. Every stream shares TTFT and ITL, so the schedule needs no heap: first chunks fall due
 * in the order their requests arrived, and next chunks (due + ITL) in the order chunks are written. Two FIFO
 * queues, each sorted by construction, hold every pending chunk; the earlier of their heads is the next one
 * due, and a timerfd set to it (absolute, no timer slack) wakes the loop.
 *
 * Truth. The time of every chunk's write (CLOCK_MONOTONIC, read just before writev) gives TTFT, the gaps
 * between chunks, TPOT and lateness (write time - due time). A request's receipt, when the kernel received its
 * last bytes (SO_TIMESTAMPING's software receive stamp, moved from CLOCK_REALTIME to CLOCK_MONOTONIC), gives
 * what a perfect client would measure: first write - receipt (ttft_from_receipt_ms), which also counts the
 * time the request waited in the socket before this loop read it (ingest_ms = read - receipt). A client's
 * error is its TTFT against the first; the ingest is the server's own, a burst of new requests waits behind the
 * chunks that are due (on loopback the receipt is the client's send, give or take microseconds). Each process
 * appends all of these to its own rings in one mapping shared by all processes (made before fork). GET /truth, answered by whichever process gets it,
 * takes everything every process recorded since the previous call and returns refserver's JSON, plus
 * lateness max, the number of processes, samples dropped (a ring full) and chunks the socket could not take
 * at once (their bytes left later than recorded: a client not reading).
 *
 * Processes. --procs N forks N servers, each with its own SO_REUSEPORT socket on the port (the kernel
 * spreads connections over them), each optionally pinned to a core (--cpus 0-3: process i on the i-th core
 * listed). The parent only supervises: SIGTERM or SIGINT stops everything, a child that dies stops everything,
 * and the children die with the parent (PR_SET_PDEATHSIG), even when it is killed with SIGKILL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/net_tstamp.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 256
#define MAX_REQUEST (16u << 20) /* bytes of head and body one request may have */
#define MAX_TOKENS (1u << 24)
#define DEFAULT_TOKENS 16 /* as refserver, when a request names no max_tokens */
#define MAX_EVENTS 64     /* I/O events handled between two looks at the schedule */
#define MODELS "{\"object\":\"list\",\"data\":[{\"id\":\"ref\",\"object\":\"model\"}]}"

static struct {
    const char *host;
    int port;
    double ttft_ms, itl_ms;
    uint32_t per_chunk;
    int procs;
    int cpus[MAX_PROCS], ncpus;
    uint64_t capacity; /* samples of each kind one process keeps between two /truth calls */
} opt = {"127.0.0.1", 8100, 50, 10, 1, 1, {0}, 0, 1u << 24};
static int64_t ttft_ns, itl_ns;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("truthserver: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ---- byte buffers ---- */

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static void reserve(buf_t *b, size_t more) {
    if (b->len + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + more)
        cap *= 2;
    if (!(b->p = realloc(b->p, cap)))
        die("out of memory");
    b->cap = cap;
}

static void put(buf_t *b, const void *s, size_t n) {
    reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

#define PUT(b, literal) put((b), "" literal, sizeof(literal) - 1) /* "" literal: string literals only */

static void put_u64(buf_t *b, uint64_t v) {
    char t[20];
    int i = sizeof t;
    do
        t[--i] = (char)('0' + v % 10);
    while (v /= 10);
    put(b, t + i, sizeof t - (size_t)i);
}

static void putf(buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* ---- the truth, shared by every process ---- */

enum { TTFT, GAP, TPOT, LATE, TTFT_RECEIPT, INGEST, KINDS };
static const char *const KIND_KEY[KINDS] = {"ttft_ms",     "itl_ms", "tpot_ms", "lateness_ms", "ttft_from_receipt_ms",
                                            "ingest_ms"};
enum { REQUESTS, TOKENS, DROPPED, QUEUED, COUNTERS };

/* One writer (the owning process) and one reader (a /truth call, under the lock): `written` and `taken` only
   grow, so the samples not yet reported are [taken, written), at index % capacity. */
typedef struct {
    _Atomic uint64_t written, taken;
    float *ms; /* float: 0.5 µs resolution up to 8 s, half the memory of a double */
} ring_t;

typedef struct {
    _Alignas(64) ring_t ring[KINDS]; /* aligned: two processes never write one cache line */
    _Atomic uint64_t count[COUNTERS]; /* running totals, written by the owner */
    uint64_t reported[COUNTERS];      /* the totals at the last /truth call (under the lock) */
} region_t;

static struct {
    atomic_flag lock; /* held by a /truth call */
    region_t region[MAX_PROCS];
} *shared;
static region_t *mine;

static void map_truth(void) {
    size_t head = (sizeof *shared + 63) & ~(size_t)63;
    size_t ring_bytes = opt.capacity * sizeof(float);
    size_t size = head + (size_t)opt.procs * KINDS * ring_bytes;
    /* MAP_NORESERVE: pages cost memory only once samples reach them */
    char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        die("cannot map %zu bytes for the truth: %s", size, strerror(errno));
    shared = (void *)m;
    atomic_flag_clear(&shared->lock);
    for (int p = 0; p < opt.procs; p++)
        for (int k = 0; k < KINDS; k++)
            shared->region[p].ring[k].ms = (float *)(m + head + ((size_t)p * KINDS + (size_t)k) * ring_bytes);
}

static void sample(int kind, double ns) {
    ring_t *r = &mine->ring[kind];
    uint64_t w = atomic_load_explicit(&r->written, memory_order_relaxed);
    if (w - atomic_load_explicit(&r->taken, memory_order_acquire) >= opt.capacity) {
        atomic_fetch_add_explicit(&mine->count[DROPPED], 1, memory_order_relaxed);
        return;
    }
    r->ms[w % opt.capacity] = (float)(ns / 1e6);
    atomic_store_explicit(&r->written, w + 1, memory_order_release);
}

static void count(int counter, uint64_t n) {
    atomic_fetch_add_explicit(&mine->count[counter], n, memory_order_relaxed);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's default percentile (linear interpolation), over sorted values */
static double percentile(const double *v, size_t n, double q) {
    double pos = q / 100 * (double)(n - 1);
    size_t lo = (size_t)pos;
    return lo + 1 < n ? v[lo] + (v[lo + 1] - v[lo]) * (pos - (double)lo) : v[lo];
}

static void put_stats(buf_t *b, double *v, size_t n, bool with_max) {
    if (!n) {
        PUT(b, "null");
        return;
    }
    qsort(v, n, sizeof *v, by_value);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    putf(b, "{\"p50\": %.6f, \"p90\": %.6f, \"p99\": %.6f, \"mean\": %.6f, \"n\": %zu", percentile(v, n, 50),
         percentile(v, n, 90), percentile(v, n, 99), sum / (double)n, n);
    if (with_max)
        putf(b, ", \"max\": %.6f", v[n - 1]);
    PUT(b, "}");
}

/* Everything every process recorded since the last call, as refserver's GET /truth reports it (plus lateness
   max, procs, dropped, queued_writes); what it takes is not reported again. Sorting a level's samples takes
   this process tens of milliseconds: ask between levels, not during one. */
static void truth_report(buf_t *b) {
    while (atomic_flag_test_and_set_explicit(&shared->lock, memory_order_acquire))
        sched_yield();
    uint64_t total[COUNTERS] = {0};
    for (int p = 0; p < opt.procs; p++)
        for (int i = 0; i < COUNTERS; i++) {
            region_t *r = &shared->region[p];
            uint64_t now = atomic_load_explicit(&r->count[i], memory_order_relaxed);
            total[i] += now - r->reported[i];
            r->reported[i] = now;
        }
    putf(b, "{\"requests\": %llu, \"tokens\": %llu", (unsigned long long)total[REQUESTS],
         (unsigned long long)total[TOKENS]);
    for (int k = 0; k < KINDS; k++) {
        uint64_t upto[MAX_PROCS];
        size_t n = 0;
        for (int p = 0; p < opt.procs; p++) {
            ring_t *r = &shared->region[p].ring[k];
            upto[p] = atomic_load_explicit(&r->written, memory_order_acquire);
            n += upto[p] - atomic_load_explicit(&r->taken, memory_order_relaxed);
        }
        double *v = malloc(n ? n * sizeof *v : 1);
        if (!v)
            die("out of memory");
        size_t i = 0;
        for (int p = 0; p < opt.procs; p++) {
            ring_t *r = &shared->region[p].ring[k];
            for (uint64_t s = atomic_load_explicit(&r->taken, memory_order_relaxed); s < upto[p]; s++)
                v[i++] = r->ms[s % opt.capacity];
            atomic_store_explicit(&r->taken, upto[p], memory_order_release);
        }
        putf(b, ", \"%s\": ", KIND_KEY[k]);
        put_stats(b, v, n, k == LATE);
        free(v);
    }
    putf(b, ", \"procs\": %d, \"dropped\": %llu, \"queued_writes\": %llu}", opt.procs,
         (unsigned long long)total[DROPPED], (unsigned long long)total[QUEUED]);
    atomic_flag_clear_explicit(&shared->lock, memory_order_release);
}

/* ---- connections and the schedule ---- */

typedef struct {
    int64_t arrival, received, first_write, last_write; /* received: the kernel's receipt (or arrival) */
    uint32_t n, sent, prompt_tokens;
    bool chat, usage, continuous, head_pending;
} stream_t;

typedef struct {
    buf_t in;  /* bytes read and not yet handled */
    buf_t out; /* bytes the socket did not take yet, from out_off on */
    size_t out_off;
    stream_t s;
    int64_t received; /* when the kernel received the bytes of the last read (CLOCK_MONOTONIC), else 0 */
    uint32_t gen; /* bumped when a stream ends or the connection closes: voids what the queues hold for it */
    bool open, streaming;
} conn_t;

static conn_t *conns; /* indexed by descriptor; grows only when a connection is accepted */
static size_t nconns;
static int epfd, tfd;
static int64_t armed; /* the due time the timerfd is set to (0: none) */
static buf_t frame;   /* the chunk being written */

typedef struct {
    int64_t due;
    int fd;
    uint32_t gen;
} due_t;

typedef struct {
    due_t *v;
    size_t head, len, cap;
} fifo_t;

static fifo_t firsts, nexts; /* first chunks; every later chunk. Each is sorted by due time (see the top). */

static void fifo_push(fifo_t *q, due_t d) {
    if (q->len == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 1024;
        due_t *v = malloc(cap * sizeof *v);
        if (!v)
            die("out of memory");
        for (size_t i = 0; i < q->len; i++)
            v[i] = q->v[(q->head + i) % q->cap];
        free(q->v);
        *q = (fifo_t){v, 0, q->len, cap};
    }
    q->v[(q->head + q->len++) % q->cap] = d;
}

static due_t fifo_pop(fifo_t *q) {
    due_t d = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return d;
}

/* the queue whose head is the next chunk due, or NULL when nothing is pending */
static fifo_t *earliest(void) {
    if (!firsts.len)
        return nexts.len ? &nexts : NULL;
    if (!nexts.len)
        return &firsts;
    return firsts.v[firsts.head].due <= nexts.v[nexts.head].due ? &firsts : &nexts;
}

static void watch(int fd, uint32_t events, int op) {
    struct epoll_event ev = {.events = events, .data.fd = fd};
    if (epoll_ctl(epfd, op, fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
}

static void close_conn(int fd) {
    conn_t *c = &conns[fd];
    close(fd); /* which also takes it out of the epoll set */
    c->open = c->streaming = false;
    c->gen++;
    c->in.len = c->out.len = c->out_off = 0;
}

enum { SENT, QUEUED_REST, CLOSED };

/* Writes iov now; what the socket does not take waits in the connection's out buffer for EPOLLOUT (and so does
   everything after it, to keep the bytes in order). */
static int send_iov(int fd, const struct iovec *iov, int n) {
    conn_t *c = &conns[fd];
    size_t done = 0;
    if (c->out.len == c->out_off) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            close_conn(fd);
            return CLOSED;
        }
        done = w < 0 ? 0 : (size_t)w;
        size_t total = 0;
        for (int i = 0; i < n; i++)
            total += iov[i].iov_len;
        if (done == total)
            return SENT;
        watch(fd, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
    }
    for (int i = 0; i < n; i++) {
        size_t skip = done < iov[i].iov_len ? done : iov[i].iov_len;
        put(&c->out, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
        done -= skip;
    }
    return QUEUED_REST;
}

static void flush_out(int fd) {
    conn_t *c = &conns[fd];
    while (c->out_off < c->out.len) {
        ssize_t w = write(fd, c->out.p + c->out_off, c->out.len - c->out_off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                close_conn(fd);
            return;
        }
        c->out_off += (size_t)w;
    }
    c->out.len = c->out_off = 0;
    watch(fd, EPOLLIN, EPOLL_CTL_MOD);
}

static void respond(int fd, const char *status, const char *body, size_t len) {
    char head[160];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: keep-alive\r\n\r\n",
                     status, len);
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)body, len}};
    send_iov(fd, iov, 2);
}

#define RESPOND(fd, status, literal) respond((fd), (status), "" literal, sizeof(literal) - 1)

/* ---- the SSE events, byte for byte as refserver writes them ---- */

static const char *object(const stream_t *s) { return s->chat ? "chat.completion.chunk" : "text_completion"; }

static void put_usage(buf_t *b, const stream_t *s, uint32_t completion) {
    PUT(b, "\"usage\":{\"prompt_tokens\":");
    put_u64(b, s->prompt_tokens);
    PUT(b, ",\"completion_tokens\":");
    put_u64(b, completion);
    PUT(b, ",\"total_tokens\":");
    put_u64(b, (uint64_t)s->prompt_tokens + completion);
    PUT(b, "}");
}

/* A chunk of k tokens (s->sent counts them already); the last one finishes with "length", then comes the
   usage-only event (stream_options.include_usage) and [DONE]. */
static void put_events(buf_t *b, const stream_t *s, uint32_t k, bool last) {
    PUT(b, "data: {\"id\":\"cmpl\",\"object\":\"");
    put(b, object(s), strlen(object(s)));
    if (s->chat)
        PUT(b, "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    else
        PUT(b, "\",\"choices\":[{\"index\":0,\"text\":\"");
    for (uint32_t i = 0; i < k; i++)
        PUT(b, " tok");
    if (s->chat)
        PUT(b, "\"}");
    else
        PUT(b, "\"");
    if (last)
        PUT(b, ",\"finish_reason\":\"length\"}]");
    else
        PUT(b, ",\"finish_reason\":null}]");
    if (s->continuous) { /* continuous_usage_stats: the running count, which says how many tokens came */
        PUT(b, ",");
        put_usage(b, s, s->sent);
    }
    PUT(b, "}\n\n");
    if (!last)
        return;
    if (s->usage) {
        PUT(b, "data: {\"id\":\"cmpl\",\"object\":\"");
        put(b, object(s), strlen(object(s)));
        PUT(b, "\",\"choices\":[],");
        put_usage(b, s, s->n);
        PUT(b, "}\n\n");
    }
    PUT(b, "data: [DONE]\n\n");
}

static void handle_input(int fd, int64_t arrival);

/* Writes the chunk of fd's stream due at `due` (the response head goes with the first: one send, not two),
   records its truth, and queues the next chunk, or handles a request pipelined behind the finished stream. */
static void write_chunk(int fd, int64_t due) {
    conn_t *c = &conns[fd];
    stream_t *s = &c->s;
    bool first = s->sent == 0;
    uint32_t k = s->n - s->sent < opt.per_chunk ? s->n - s->sent : opt.per_chunk;
    s->sent += k;
    bool last = s->sent == s->n;

    frame.len = 0;
    put_events(&frame, s, k, last);
    char size[24], head[256];
    int size_len = snprintf(size, sizeof size, "%zx\r\n", frame.len);
    PUT(&frame, "\r\n");
    if (last)
        PUT(&frame, "0\r\n\r\n"); /* the end of the chunked body */
    struct iovec iov[3];
    int n = 0;
    if (s->head_pending) {
        /* X-Arrival: when the request was read, on CLOCK_MONOTONIC (Python's time.perf_counter), which a client
           on this machine shares: client_fidelity splits a client's TTFT with it. */
        int head_len = snprintf(head, sizeof head,
                                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                                "Connection: keep-alive\r\nX-Arrival: %.6f\r\nX-Received: %.6f\r\n\r\n",
                                (double)s->arrival / 1e9, (double)s->received / 1e9);
        iov[n++] = (struct iovec){head, (size_t)head_len};
        s->head_pending = false;
    }
    iov[n++] = (struct iovec){size, (size_t)size_len};
    iov[n++] = (struct iovec){frame.p, frame.len};

    int64_t t = now_ns();
    int sent = send_iov(fd, iov, n);
    if (sent == CLOSED)
        return; /* the client went away: the stream ends unrecorded, as refserver's do */
    if (sent == QUEUED_REST)
        count(QUEUED, 1);
    count(TOKENS, k);
    if (first) {
        s->first_write = t;
        sample(TTFT, (double)(t - s->arrival));
        sample(TTFT_RECEIPT, (double)(t - s->received));
    } else {
        sample(GAP, (double)(t - s->last_write));
    }
    sample(LATE, (double)(t - due));
    s->last_write = t;
    if (!last) {
        fifo_push(&nexts, (due_t){due + itl_ns, fd, c->gen});
        return;
    }
    count(REQUESTS, 1);
    if (s->n > 1)
        sample(TPOT, (double)(t - s->first_write) / (s->n - 1));
    c->streaming = false;
    c->gen++;
    handle_input(fd, t);
}

/* Writes every chunk that is due (none early); each write takes a few microseconds, so a burst of chunks due
   at one instant goes out one after the other, and the last ones are late by the burst's length. */
static void run_due(void) {
    int64_t now = now_ns();
    fifo_t *q;
    while ((q = earliest()) && q->v[q->head].due <= now) {
        due_t d = fifo_pop(q);
        if (conns[d.fd].gen != d.gen)
            continue; /* its stream ended or its connection closed */
        write_chunk(d.fd, d.due);
        now = now_ns();
    }
}

static void arm_timer(void) {
    fifo_t *q = earliest();
    int64_t due = q ? q->v[q->head].due : 0;
    if (due == armed)
        return;
    struct itimerspec when = {.it_value = {(time_t)(due / 1000000000), (long)(due % 1000000000)}};
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &when, NULL) < 0) /* a time already past fires at once */
        die("timerfd_settime: %s", strerror(errno));
    armed = due;
}

/* ---- requests ---- */

static const char *skip_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

typedef bool visit_fn(void *ctx, const char *key, size_t key_len, const char *v, const char *v_end);
static const char *skip_value(const char *p, const char *e, int depth);

/* The end of the JSON object at p, calling visit (when given) with each member's raw key and value; NULL
   when it is malformed. Only the shape is checked: the server reads a few fields and steps over the rest. */
static const char *json_object(const char *p, const char *e, int depth, visit_fn *visit, void *ctx) {
    if (p >= e || *p != '{')
        return NULL;
    p = skip_ws(p + 1, e);
    if (p < e && *p == '}')
        return p + 1;
    for (;;) {
        if (p >= e || *p != '"')
            return NULL;
        const char *key = p + 1, *key_end = skip_value(p, e, depth + 1);
        if (!key_end)
            return NULL;
        p = skip_ws(key_end, e);
        if (p >= e || *p != ':')
            return NULL;
        const char *v = skip_ws(p + 1, e), *v_end = skip_value(v, e, depth + 1);
        if (!v_end || (visit && !visit(ctx, key, (size_t)(key_end - 1 - key), v, v_end)))
            return NULL;
        p = skip_ws(v_end, e);
        if (p < e && *p == '}')
            return p + 1;
        if (p >= e || *p != ',')
            return NULL;
        p = skip_ws(p + 1, e);
    }
}

static const char *skip_value(const char *p, const char *e, int depth) {
    if (p >= e || depth > 64)
        return NULL;
    if (*p == '{')
        return json_object(p, e, depth, NULL, NULL);
    if (*p == '"') {
        for (p++; p < e; p++)
            if (*p == '\\')
                p++;
            else if (*p == '"')
                return p + 1;
        return NULL;
    }
    if (*p == '[') {
        p = skip_ws(p + 1, e);
        if (p < e && *p == ']')
            return p + 1;
        for (;;) {
            if (!(p = skip_value(p, e, depth + 1)))
                return NULL;
            p = skip_ws(p, e);
            if (p < e && *p == ']')
                return p + 1;
            if (p >= e || *p != ',')
                return NULL;
            p = skip_ws(p + 1, e);
        }
    }
    const char *start = p; /* a number, true, false or null */
    while (p < e && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || *p == '+' || *p == '-' || *p == '.' ||
                     *p == 'E'))
        p++;
    return p > start ? p : NULL;
}

typedef struct {
    long long max_tokens, max_completion_tokens; /* 0: absent or null */
    bool stream, usage, continuous;
    size_t prompt_bytes;
} request_t;

static bool is(const char *s, size_t n, const char *literal) { return strlen(literal) == n && !memcmp(s, literal, n); }

static bool is_true(const char *v, const char *v_end) { return is(v, (size_t)(v_end - v), "true"); }

static bool json_int(const char *v, const char *v_end, long long *out) {
    if (is(v, (size_t)(v_end - v), "null")) {
        *out = 0;
        return true;
    }
    bool negative = v < v_end && *v == '-';
    v += negative;
    if (v == v_end)
        return false;
    long long n = 0;
    for (; v < v_end; v++) {
        if (*v < '0' || *v > '9')
            return false;
        if (n < (1ll << 40)) /* anything past MAX_TOKENS is refused anyway */
            n = n * 10 + (*v - '0');
    }
    *out = negative ? -n : n;
    return true;
}

static bool visit_options(void *ctx, const char *key, size_t len, const char *v, const char *v_end) {
    request_t *r = ctx;
    if (is(key, len, "include_usage"))
        r->usage = is_true(v, v_end);
    else if (is(key, len, "continuous_usage_stats"))
        r->continuous = is_true(v, v_end);
    return true;
}

static bool visit_request(void *ctx, const char *key, size_t len, const char *v, const char *v_end) {
    request_t *r = ctx;
    if (is(key, len, "max_tokens"))
        return json_int(v, v_end, &r->max_tokens);
    if (is(key, len, "max_completion_tokens"))
        return json_int(v, v_end, &r->max_completion_tokens);
    if (is(key, len, "stream"))
        r->stream = is_true(v, v_end);
    else if (is(key, len, "stream_options") && *v == '{')
        return json_object(v, v_end, 1, visit_options, r) != NULL;
    else if (is(key, len, "prompt") || is(key, len, "messages"))
        r->prompt_bytes = (size_t)(v_end - v);
    return true;
}

/* A non-streamed request is answered at once with the whole text (accepted_extras asks one); it is not timed
   and not in the truth. */
static void answer_whole(int fd, const stream_t *s) {
    buf_t b = {0};
    if (s->chat)
        PUT(&b, "{\"id\":\"cmpl\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":"
                "{\"role\":\"assistant\",\"content\":\"");
    else
        PUT(&b, "{\"id\":\"cmpl\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"");
    for (uint32_t i = 0; i < s->n; i++)
        PUT(&b, " tok");
    if (s->chat)
        PUT(&b, "\"},\"finish_reason\":\"length\"}],");
    else
        PUT(&b, "\",\"finish_reason\":\"length\"}],");
    put_usage(&b, s, s->n);
    PUT(&b, "}");
    respond(fd, "200 OK", b.p, b.len);
    free(b.p);
}

static void start_stream(int fd, bool chat, const char *body, size_t len, int64_t arrival) {
    conn_t *c = &conns[fd];
    request_t r = {0};
    const char *end = body + len, *p = json_object(skip_ws(body, end), end, 0, visit_request, &r);
    if (!p || skip_ws(p, end) != end) {
        RESPOND(fd, "400 Bad Request", "{\"error\":\"bad json\"}");
        return;
    }
    long long n = r.max_tokens ? r.max_tokens : r.max_completion_tokens ? r.max_completion_tokens : DEFAULT_TOKENS;
    if (n > MAX_TOKENS) {
        RESPOND(fd, "400 Bad Request", "{\"error\":\"max_tokens too large\"}");
        return;
    }
    c->s = (stream_t){
        .arrival = arrival,
        .received = c->received && c->received < arrival ? c->received : arrival,
        .n = n < 1 ? 1 : (uint32_t)n,
        .prompt_tokens = r.prompt_bytes / 4 > 1 ? (uint32_t)(r.prompt_bytes / 4) : 1, /* crude, as refserver */
        .chat = chat,
        .usage = r.usage,
        .continuous = r.continuous,
        .head_pending = true,
    };
    if (!r.stream) {
        answer_whole(fd, &c->s);
        return;
    }
    c->streaming = true;
    sample(INGEST, (double)(arrival - c->s.received));
    fifo_push(&firsts, (due_t){arrival + ttft_ns, fd, c->gen});
}

static void handle_request(int fd, const char *line, const char *line_end, const char *body, size_t len,
                           int64_t arrival) {
    const char *sp = memchr(line, ' ', (size_t)(line_end - line));
    if (!sp) {
        RESPOND(fd, "400 Bad Request", "{\"error\":\"bad request line\"}");
        return;
    }
    const char *path = sp + 1, *path_end = memchr(path, ' ', (size_t)(line_end - path));
    size_t m = (size_t)(sp - line), n = (size_t)((path_end ? path_end : line_end) - path);
    bool get = is(line, m, "GET"), post = is(line, m, "POST"), chat = is(path, n, "/v1/chat/completions");
    if (get && is(path, n, "/health")) {
        RESPOND(fd, "200 OK", "");
    } else if (get && n >= 6 && !memcmp(path, "/truth", 6)) {
        buf_t b = {0};
        truth_report(&b);
        respond(fd, "200 OK", b.p, b.len);
        free(b.p);
    } else if (get && is(path, n, "/v1/models")) {
        RESPOND(fd, "200 OK", MODELS);
    } else if (post && (chat || is(path, n, "/v1/completions"))) {
        start_stream(fd, chat, body, len, arrival);
    } else {
        RESPOND(fd, "404 Not Found", "{\"error\":\"not found\"}");
    }
}

static size_t content_length(const char *head, const char *head_end) {
    static const char name[] = "\r\ncontent-length:";
    for (const char *p = head; (p = memmem(p, (size_t)(head_end - p), "\r\n", 2)); p += 2) {
        if ((size_t)(head_end - p) < sizeof name - 1 || strncasecmp(p, name, sizeof name - 1))
            continue;
        size_t n = 0;
        for (p = skip_ws(p + sizeof name - 1, head_end); p < head_end && *p >= '0' && *p <= '9'; p++)
            n = n < MAX_REQUEST ? n * 10 + (size_t)(*p - '0') : n;
        return n;
    }
    return 0;
}

/* Handles the complete requests in fd's input, one at a time: a stream must end before the request behind it
   (HTTP/1.1 answers in order), which then starts at the stream's end. */
static void handle_input(int fd, int64_t arrival) {
    conn_t *c = &conns[fd];
    while (c->open && !c->streaming && c->in.len) {
        const char *p = c->in.p, *head_end = memmem(p, c->in.len, "\r\n\r\n", 4);
        if (!head_end) {
            if (c->in.len > MAX_REQUEST)
                close_conn(fd);
            return;
        }
        size_t head_len = (size_t)(head_end + 4 - p), body_len = content_length(p, head_end + 2);
        if (head_len + body_len > MAX_REQUEST) {
            close_conn(fd);
            return;
        }
        if (c->in.len < head_len + body_len)
            return;
        const char *line_end = memmem(p, head_len, "\r\n", 2);
        handle_request(fd, p, line_end, p + head_len, body_len, arrival);
        if (!c->open)
            return;
        c->in.len -= head_len + body_len;
        memmove(c->in.p, c->in.p + head_len + body_len, c->in.len);
    }
}

/* The kernel's receive stamp of the bytes a recvmsg returned (for TCP, of the last segment it copied), moved
   from CLOCK_REALTIME to CLOCK_MONOTONIC at `now`; 0 when the message carries none. */
static int64_t receipt(struct msghdr *m, int64_t now) {
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(m); cm; cm = CMSG_NXTHDR(m, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPING)
            continue;
        struct timespec stamp[3], real;
        memcpy(stamp, CMSG_DATA(cm), sizeof stamp);
        if (!stamp[0].tv_sec)
            return 0;
        clock_gettime(CLOCK_REALTIME, &real);
        int64_t real_ns = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec;
        return now - (real_ns - ((int64_t)stamp[0].tv_sec * 1000000000 + stamp[0].tv_nsec));
    }
    return 0;
}

static void on_readable(int fd) {
    conn_t *c = &conns[fd];
    reserve(&c->in, 4096);
    struct iovec iov = {c->in.p + c->in.len, c->in.cap - c->in.len};
    union { /* aligned for the cmsghdr it holds */
        char bytes[CMSG_SPACE(sizeof(struct timespec) * 3)];
        struct cmsghdr align;
    } control;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.bytes, .msg_controllen = sizeof control};
    ssize_t n = recvmsg(fd, &m, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close_conn(fd);
        return;
    }
    if (n < 0)
        return;
    c->in.len += (size_t)n;
    int64_t now = now_ns();
    c->received = receipt(&m, now);
    handle_input(fd, now);
}

static void accept_all(int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fprintf(stderr, "truthserver: accept: %s\n", strerror(errno));
            return;
        }
        int one = 1; /* each chunk leaves at once, never held back for the next (Nagle) */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if ((size_t)fd >= nconns) {
            size_t n = nconns ? nconns : 1024;
            while (n <= (size_t)fd)
                n *= 2;
            if (!(conns = realloc(conns, n * sizeof *conns)))
                die("out of memory");
            memset(conns + nconns, 0, (n - nconns) * sizeof *conns);
            nconns = n;
        }
        conns[fd].open = true;
        watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    }
}

static void serve(int lfd) {
    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
        die("epoll/timerfd: %s", strerror(errno));
    watch(lfd, EPOLLIN, EPOLL_CTL_ADD);
    watch(tfd, EPOLLIN, EPOLL_CTL_ADD);
    struct epoll_event ev[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(epfd, ev, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR)
            die("epoll_wait: %s", strerror(errno));
        run_due(); /* the schedule first: it is what must be on time */
        bool accepting = false;
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == lfd) {
                accepting = true;
            } else if (fd == tfd) {
                uint64_t expirations;
                if (read(tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
                    die("timerfd read: %s", strerror(errno));
            } else if (conns[fd].open) {
                if (ev[i].events & EPOLLOUT)
                    flush_out(fd);
                if (conns[fd].open && ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                    on_readable(fd);
            }
        }
        /* accepted last: a descriptor closed above cannot come back as a new connection while this batch
           still holds events for the old one */
        if (accepting)
            accept_all(lfd);
        run_due();
        arm_timer();
    }
}

/* ---- processes ---- */

static int listen_socket(const struct addrinfo *ai) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    /* receipts from the first byte of a connection: the kernel stamps what arrives before accept only when
       stamping is on already, and accepted sockets inherit the listener's setting */
    int stamps = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &stamps, sizeof stamps);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 ||
        listen(fd, 4096) < 0)
        die("cannot listen on %s:%d: %s", opt.host, opt.port, strerror(errno));
    return fd;
}

static void open_listeners(int *fds) {
    char port[16];
    snprintf(port, sizeof port, "%d", opt.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    int err = getaddrinfo(opt.host, port, &hints, &ai);
    if (err)
        die("%s: %s", opt.host, gai_strerror(err));
    /* A bind without SO_REUSEPORT first: were another process (a stale truthserver) listening on the port with
       it, ours would silently join its group and share the connections. */
    int probe = socket(ai->ai_family, ai->ai_socktype, 0), one = 1;
    if (probe < 0 || setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(probe, ai->ai_addr, ai->ai_addrlen) < 0)
        die("cannot listen on %s:%d: %s", opt.host, opt.port, strerror(errno));
    close(probe);
    for (int i = 0; i < opt.procs; i++)
        fds[i] = listen_socket(ai);
    freeaddrinfo(ai);
}

static void run_child(int i, const int *fds, pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl */
        _exit(1);
    for (int j = 0; j < opt.procs; j++)
        if (j != i)
            close(fds[j]);
    if (opt.ncpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(opt.cpus[i % opt.ncpus], &set);
        if (sched_setaffinity(0, sizeof set, &set) < 0)
            die("cannot pin process %d to core %d: %s", i, opt.cpus[i % opt.ncpus], strerror(errno));
    }
    struct rlimit rl; /* as many connections as the hard limit allows */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 1 << 20 : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    mine = &shared->region[i];
    serve(fds[i]);
}

static void stop_all(const pid_t *pids, int code) {
    for (int i = 0; i < opt.procs; i++)
        kill(pids[i], SIGTERM);
    while (wait(NULL) > 0)
        ;
    exit(code);
}

static void parse_cpus(const char *list) {
    for (const char *p = list; *p;) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end == p || lo < 0)
            die("--cpus %s: expected a list like 0-3,8", list);
        if (*end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            if (end == p || hi < lo)
                die("--cpus %s: expected a list like 0-3,8", list);
        }
        for (long c = lo; c <= hi && opt.ncpus < MAX_PROCS; c++)
            opt.cpus[opt.ncpus++] = (int)c;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            die("--cpus %s: expected a list like 0-3,8", list);
    }
}

static void parse_options(int argc, char **argv) {
    static const struct option options[] = {
        {"host", required_argument, NULL, 'H'},   {"port", required_argument, NULL, 'p'},
        {"ttft-ms", required_argument, NULL, 't'}, {"itl-ms", required_argument, NULL, 'i'},
        {"tokens-per-chunk", required_argument, NULL, 'k'}, {"procs", required_argument, NULL, 'n'},
        {"cpus", required_argument, NULL, 'c'},   {"truth-capacity", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},         {0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (o) {
        case 'H': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 't': opt.ttft_ms = atof(optarg); break;
        case 'i': opt.itl_ms = atof(optarg); break;
        case 'k': opt.per_chunk = (uint32_t)atoi(optarg); break;
        case 'n': opt.procs = atoi(optarg); break;
        case 'c': parse_cpus(optarg); break;
        case 's': opt.capacity = strtoull(optarg, NULL, 10); break;
        default:
            fprintf(o == 'h' ? stdout : stderr,
                    "usage: truthserver [--host 127.0.0.1] [--port 8100] [--ttft-ms 50] [--itl-ms 10]\n"
                    "                   [--tokens-per-chunk 1] [--procs 1] [--cpus LIST] [--truth-capacity %u]\n",
                    1u << 24);
            exit(o == 'h' ? 0 : 2);
        }
    }
    if (opt.port <= 0 || opt.port > 65535 || opt.ttft_ms < 0 || opt.itl_ms < 0 || opt.per_chunk < 1 ||
        opt.procs < 1 || opt.procs > MAX_PROCS || opt.capacity < 1)
        die("bad option value (see --help)");
    ttft_ns = (int64_t)(opt.ttft_ms * 1e6);
    itl_ns = (int64_t)(opt.itl_ms * 1e6);
}

int main(int argc, char **argv) {
    parse_options(argc, argv);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an EPIPE, handled where it happens */
    map_truth();
    int fds[MAX_PROCS];
    open_listeners(fds);

    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGCHLD);
    sigprocmask(SIG_BLOCK, &stop, &old);
    pid_t parent = getpid(), pids[MAX_PROCS];
    for (int i = 0; i < opt.procs; i++) {
        if ((pids[i] = fork()) < 0)
            die("fork: %s", strerror(errno));
        if (pids[i] == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            run_child(i, fds, parent);
        }
    }
    for (int i = 0; i < opt.procs; i++)
        close(fds[i]);
    printf("truthserver on http://%s:%d (%d process%s, TTFT %g ms, ITL %g ms, %u token%s a chunk)\n", opt.host,
           opt.port, opt.procs, opt.procs > 1 ? "es" : "", opt.ttft_ms, opt.itl_ms, opt.per_chunk,
           opt.per_chunk > 1 ? "s" : "");
    fflush(stdout);
    for (;;) {
        int sig;
        sigwait(&stop, &sig);
        if (sig != SIGCHLD)
            stop_all(pids, 0);
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            fprintf(stderr, "truthserver: process %d ended (status %d): stopping\n", (int)pid, status);
            stop_all(pids, 1);
        }
    }
}
