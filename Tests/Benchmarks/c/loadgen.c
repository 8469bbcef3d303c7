/* The load section's open-loop client: sends each request of a schedule at its intended instant, whatever the
 * answers before it did, over keep-alive HTTP/1.1 connections to one host, from one thread on epoll. It is C so that
 * its own CPU, on the same cores as what it measures, stays small; the benchmark (LoadBenchmark.swift) writes the
 * schedule, reads the results, and does all the arithmetic.
 *
 *   loadgen PORT SCHEDULE RESULTS [MAX_CONNECTIONS]
 *
 * SCHEDULE: one request per line, tab-separated: intended offset in microseconds from the start, path,
 * X-Forwarded-For value, bearer token, Idempotency-Key ("-" for none), JSON body (no tab or newline in any field).
 *
 * RESULTS: one line per request, in schedule order: index, status (0: no answer within 30 s or a broken connection),
 * intended, sent and answered offsets in microseconds (CLOCK_MONOTONIC from the start), the answer's wall-clock time
 * in microseconds since the epoch (CLOCK_REALTIME, to compare with the FCM stand-in's), Retry-After ("-" when
 * absent) and the body with any tab or newline replaced by a space; then `# cpu-us=N connections=N`: this process's
 * own user + system CPU and the connections it opened.
 *
 * A request that comes due while every connection is busy opens another (up to MAX_CONNECTIONS, default 512, the
 * container's per-client connection cap); past that it waits for one, and its latency still counts from its intended
 * instant (no coordinated omission).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_US 30000000LL

typedef struct {
    long long intended, sent, done, wall;
    int status;
    char *request;
    size_t request_length;
    char *body;
    char retry_after[32];
} Request;

typedef struct {
    int fd;
    int busy;        /* a request is on it */
    int connected;
    long current;    /* the request on it */
    size_t written;
    char *buffer;
    size_t length, capacity;
} Connection;

static Request *requests;
static long request_count;
static Connection *connections;
static int connection_count, max_connections, opened;
static long finished;
static long *backlog;
static long backlog_head, backlog_tail;
static struct sockaddr_in address;
static int epoll_fd;
static long long start_ns;

static long long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ((long long)t.tv_sec * 1000000000LL + t.tv_nsec - start_ns) / 1000;
}

static long long wall_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

static int open_connection(void) {
    if (connection_count >= max_connections) return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS) fail("connect");
    Connection *c = &connections[connection_count];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->capacity = 16384;
    c->buffer = malloc(c->capacity);
    struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u32 = (uint32_t)connection_count};
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0) fail("epoll_ctl");
    opened++;
    return connection_count++;
}

/* Closes a connection's socket and opens a new one in its slot (the gateway closed it, or it broke). */
static void reopen(int index) {
    Connection *c = &connections[index];
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS) fail("connect");
    c->fd = fd;
    c->busy = 0;
    c->connected = 0;
    c->length = 0;
    struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u32 = (uint32_t)index};
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) < 0) fail("epoll_ctl");
    opened++;
}

static void try_write(int index) {
    Connection *c = &connections[index];
    if (!c->busy || !c->connected) return;
    Request *r = &requests[c->current];
    while (c->written < r->request_length) {
        ssize_t n = send(c->fd, r->request + c->written, r->request_length - c->written, MSG_NOSIGNAL);
        if (n < 0) return; /* EAGAIN: EPOLLOUT comes back; an error: the read side sees it */
        c->written += (size_t)n;
    }
}

static void assign(int index, long request) {
    Connection *c = &connections[index];
    c->busy = 1;
    c->current = request;
    c->written = 0;
    c->length = 0;
    requests[request].sent = now_us();
    try_write(index);
}

static void finish(int index, int status, const char *body, size_t body_length, const char *retry_after) {
    Connection *c = &connections[index];
    Request *r = &requests[c->current];
    r->done = now_us();
    r->wall = wall_us();
    r->status = status;
    r->body = malloc(body_length + 1);
    for (size_t i = 0; i < body_length; i++) r->body[i] = (body[i] == '\t' || body[i] == '\n' || body[i] == '\r') ? ' ' : body[i];
    r->body[body_length] = 0;
    snprintf(r->retry_after, sizeof r->retry_after, "%s", retry_after ? retry_after : "-");
    c->busy = 0;
    c->length = 0;
    finished++;
}

/* A header's value in [head, head_end), or NULL; copies at most size - 1 bytes into out. */
static const char *header(const char *head, const char *head_end, const char *name, char *out, size_t size) {
    size_t name_length = strlen(name);
    for (const char *line = head; line < head_end;) {
        const char *end = memmem(line, (size_t)(head_end - line), "\r\n", 2);
        if (!end) end = head_end;
        if ((size_t)(end - line) > name_length && strncasecmp(line, name, name_length) == 0 && line[name_length] == ':') {
            const char *value = line + name_length + 1;
            while (value < end && *value == ' ') value++;
            size_t length = (size_t)(end - value) < size - 1 ? (size_t)(end - value) : size - 1;
            memcpy(out, value, length);
            out[length] = 0;
            return out;
        }
        line = end + 2;
    }
    return NULL;
}

/* Whether the buffered bytes hold a whole response; if so, finishes the request. Returns 1 when the connection must
 * be closed afterwards. */
static int parse(int index, int *complete) {
    Connection *c = &connections[index];
    *complete = 0;
    char *head_end = memmem(c->buffer, c->length, "\r\n\r\n", 4);
    if (!head_end) return 0;
    int status = 0;
    if (c->length > 12) status = atoi(c->buffer + 9);
    char value[64];
    char retry[32];
    const char *retry_after = header(c->buffer, head_end, "retry-after", retry, sizeof retry);
    int close_after = header(c->buffer, head_end, "connection", value, sizeof value) && strcasecmp(value, "close") == 0;
    char *body = head_end + 4;
    size_t available = c->length - (size_t)(body - c->buffer);
    if (header(c->buffer, head_end, "content-length", value, sizeof value)) {
        size_t length = (size_t)strtoul(value, NULL, 10);
        if (available < length) return 0;
        finish(index, status, body, length, retry_after);
        *complete = 1;
        return close_after;
    }
    if (header(c->buffer, head_end, "transfer-encoding", value, sizeof value) && strcasestr(value, "chunked")) {
        /* De-chunk in place once the last chunk is in. */
        char *read = body, *write = body, *end = c->buffer + c->length;
        for (;;) {
            char *line_end = memmem(read, (size_t)(end - read), "\r\n", 2);
            if (!line_end) return 0;
            size_t size = (size_t)strtoul(read, NULL, 16);
            if (size == 0) {
                if ((size_t)(end - line_end) < 4 || memcmp(line_end, "\r\n\r\n", 4) != 0) return 0;
                break;
            }
            if ((size_t)(end - (line_end + 2)) < size + 2) return 0;
            memmove(write, line_end + 2, size);
            write += size;
            read = line_end + 2 + size + 2;
        }
        finish(index, status, body, (size_t)(write - body), retry_after);
        *complete = 1;
        return close_after;
    }
    /* Neither: the body runs to the connection's end (not expected from the gateway). */
    return 0;
}

static void next_request(int index) {
    if (backlog_head < backlog_tail) assign(index, backlog[backlog_head++]);
}

static void on_event(int index, uint32_t events) {
    Connection *c = &connections[index];
    if (!c->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &length);
        if (error == 0) {
            c->connected = 1;
            struct epoll_event event = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u32 = (uint32_t)index};
            epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
            if (!c->busy) next_request(index);
            else try_write(index);
        }
    }
    if (c->connected && (events & EPOLLOUT)) try_write(index);
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        int closed = 0;
        for (;;) {
            if (c->capacity - c->length < 4096) {
                c->capacity *= 2;
                c->buffer = realloc(c->buffer, c->capacity);
            }
            ssize_t n = recv(c->fd, c->buffer + c->length, c->capacity - c->length - 1, 0);
            if (n > 0) {
                c->length += (size_t)n;
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed = 1;
            break;
        }
        if (c->busy) {
            int complete = 0;
            int close_after = parse(index, &complete);
            if (complete && !close_after && !closed) {
                next_request(index);
                return;
            }
            if (!complete && closed) {
                /* The connection broke under a request: no answer. */
                finish(index, 0, "", 0, NULL);
            }
            if (closed || close_after) reopen(index);
            return;
        }
        if (closed) reopen(index);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: loadgen PORT SCHEDULE RESULTS [MAX_CONNECTIONS]\n");
        return 2;
    }
    max_connections = argc > 4 ? atoi(argv[4]) : 512;
    FILE *schedule = fopen(argv[2], "r");
    if (!schedule) fail("schedule");
    size_t capacity = 1024;
    requests = calloc(capacity, sizeof *requests);
    char *line = NULL;
    size_t line_capacity = 0;
    ssize_t line_length;
    while ((line_length = getline(&line, &line_capacity, schedule)) > 0) {
        if (line[line_length - 1] == '\n') line[--line_length] = 0;
        char *fields[6];
        char *cursor = line;
        int count = 0;
        while (count < 6 && cursor) {
            fields[count++] = cursor;
            cursor = strchr(cursor, '\t');
            if (cursor) *cursor++ = 0;
        }
        if (count < 6) continue;
        if ((size_t)request_count == capacity) {
            capacity *= 2;
            requests = realloc(requests, capacity * sizeof *requests);
        }
        Request *r = &requests[request_count++];
        memset(r, 0, sizeof *r);
        r->intended = atoll(fields[0]);
        char key[96] = "";
        if (strcmp(fields[4], "-") != 0) snprintf(key, sizeof key, "Idempotency-Key: %s\r\n", fields[4]);
        size_t body_length = strlen(fields[5]);
        size_t size = 512 + strlen(fields[1]) + strlen(fields[2]) + strlen(fields[3]) + body_length;
        r->request = malloc(size);
        r->request_length = (size_t)snprintf(
            r->request, size,
            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\n"
            "X-Forwarded-For: %s\r\n%sContent-Length: %zu\r\n\r\n%s",
            fields[1], fields[3], fields[2], key, body_length, fields[5]);
    }
    fclose(schedule);
    free(line);

    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)atoi(argv[1]));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    connections = calloc((size_t)max_connections, sizeof *connections);
    backlog = calloc((size_t)request_count + 1, sizeof *backlog);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    start_ns = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;

    long next = 0;
    struct epoll_event events[256];
    long long last = request_count ? requests[request_count - 1].intended : 0;
    while (finished < request_count) {
        long long now = now_us();
        /* What is due: on an idle connection, on a new one, or queued for the next free one. */
        while (next < request_count && requests[next].intended <= now) {
            int idle = -1;
            for (int i = 0; i < connection_count; i++) {
                if (!connections[i].busy && connections[i].connected) {
                    idle = i;
                    break;
                }
            }
            if (idle < 0 && backlog_head == backlog_tail) {
                int fresh = open_connection();
                if (fresh >= 0) {
                    connections[fresh].busy = 1;
                    connections[fresh].current = next;
                    connections[fresh].written = 0;
                    requests[next].sent = now;
                    next++;
                    continue;
                }
            }
            if (idle >= 0 && backlog_head == backlog_tail) {
                assign(idle, next++);
            } else {
                backlog[backlog_tail++] = next++;
            }
        }
        if (now > last + TIMEOUT_US) break;
        int timeout = 100;
        if (next < request_count) {
            long long wait = requests[next].intended - now_us();
            timeout = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
        }
        int n = epoll_wait(epoll_fd, events, 256, timeout);
        for (int i = 0; i < n; i++) on_event((int)events[i].data.u32, events[i].events);
    }

    FILE *results = fopen(argv[3], "w");
    if (!results) fail("results");
    for (long i = 0; i < request_count; i++) {
        Request *r = &requests[i];
        fprintf(results, "%ld\t%d\t%lld\t%lld\t%lld\t%lld\t%s\t%s\n", i, r->status, r->intended, r->sent, r->done,
                r->wall, r->done ? r->retry_after : "-", r->body ? r->body : "");
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    fprintf(results, "# cpu-us=%lld connections=%d\n",
            (long long)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000LL + usage.ru_utime.tv_usec +
                usage.ru_stime.tv_usec,
            opened);
    fclose(results);
    return 0;
}
