/* The rendezvous store (SPEC M1, S3): a key/value server that rank 0 runs on
 * the master address, loopback by default. Every connection must first prove
 * it holds the job token; until then the server answers nothing but a refusal
 * and closes it, so a foreign process can neither read nor inject keys.
 *
 * Frames (big-endian), client to server:
 *   u32 magic 'SGST' | u8 op | u8 0 | u16 0 | u32 key_len | u32 value_len | key | value
 * server to client:
 *   u32 magic 'SGSR' | u8 status | u8 0 | u16 0 | u32 value_len | value
 * ops: HELLO (value = token), SET, GET, ADD (value = i64 delta, reply = i64 sum).
 * Every length is checked against SG_STORE_MAX_KEY / SG_STORE_MAX_VALUE before
 * anything is allocated. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_internal.h"

#define STORE_MAGIC_REQ 0x53475354u
#define STORE_MAGIC_REP 0x53475352u
enum { OP_HELLO = 1, OP_SET = 2, OP_GET = 3, OP_ADD = 4 };
enum { ST_OK = 0, ST_NOT_FOUND = 1, ST_DENIED = 2, ST_BAD = 3 };
#define MAX_CONNS 4100

/* ---- byte helpers --------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_i64(uint8_t *p, int64_t v) {
  put_u32(p, (uint32_t)((uint64_t)v >> 32));
  put_u32(p + 4, (uint32_t)v);
}
static int64_t get_i64(const uint8_t *p) { return (int64_t)((uint64_t)get_u32(p) << 32 | get_u32(p + 4)); }

/* Reads or writes exactly n bytes; false on EOF, error or the socket's timeout. */
static bool read_full(int fd, void *buf, size_t n) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}
static bool write_full(int fd, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n > 0) {
    ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

static void set_timeout(int fd, int ms) {
  if (ms < 1) ms = 1;
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Token comparison whose time does not depend on where the tokens differ. */
static bool token_equal(const uint8_t *a, size_t alen, const char *b) {
  size_t blen = strlen(b);
  unsigned diff = (unsigned)(alen ^ blen);
  for (size_t i = 0; i < alen; i++) diff |= a[i] ^ (uint8_t)(i < blen ? b[i] : 0);
  return diff == 0;
}

static sg_status resolve(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  char portstr[16];
  snprintf(portstr, sizeof portstr, "%d", port);
  int rc = getaddrinfo(addr, portstr, &hints, &res);
  if (rc != 0 || res == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "cannot resolve master address '%s': %s", addr, gai_strerror(rc));
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return SG_OK;
}

/* ---- server --------------------------------------------------------------- */

typedef struct kv {
  char *key;
  uint8_t *value;
  size_t len;
} kv;

typedef struct conn {
  int fd;
  bool authed;
} conn;

struct sg__store_server {
  int listen_fd;
  int wake[2];
  pthread_t thread;
  char token[256];
  kv *items;
  uint32_t n_items, cap_items;
  conn *conns;
  uint32_t n_conns, cap_conns;
};

static kv *find_kv(sg__store_server *s, const char *key) {
  for (uint32_t i = 0; i < s->n_items; i++)
    if (strcmp(s->items[i].key, key) == 0) return &s->items[i];
  return NULL;
}

static bool reply(int fd, int status, const void *value, size_t len) {
  uint8_t h[12] = {0};
  put_u32(h, STORE_MAGIC_REP);
  h[4] = (uint8_t)status;
  put_u32(h + 8, (uint32_t)len);
  return write_full(fd, h, sizeof h) && (len == 0 || write_full(fd, value, len));
}

static bool set_kv(sg__store_server *s, const char *key, uint8_t *value, size_t len) {
  kv *e = find_kv(s, key);
  if (e == NULL) {
    if (sg__grow((void **)&s->items, &s->cap_items, s->n_items + 1, sizeof(kv)) != SG_OK) return false;
    char *k = sg__strdup(key);
    if (k == NULL) return false;
    e = &s->items[s->n_items++];
    e->key = k;
    e->value = NULL;
  }
  sg__free(e->value);
  e->value = value;
  e->len = len;
  return true;
}

/* Serves one request on connection c; false closes the connection. */
static bool serve_one(sg__store_server *s, conn *c) {
  uint8_t h[16];
  if (!read_full(c->fd, h, sizeof h)) return false;
  uint32_t klen = get_u32(h + 8), vlen = get_u32(h + 12);
  int op = h[4];
  if (get_u32(h) != STORE_MAGIC_REQ || klen > SG_STORE_MAX_KEY || vlen > SG_STORE_MAX_VALUE) {
    reply(c->fd, ST_BAD, NULL, 0);
    return false;
  }
  if (!c->authed && op != OP_HELLO) {
    reply(c->fd, ST_DENIED, NULL, 0);
    return false;
  }
  char key[SG_STORE_MAX_KEY + 1];
  if (!read_full(c->fd, key, klen)) return false;
  key[klen] = '\0';
  if (memchr(key, '\0', klen) != NULL) {
    reply(c->fd, ST_BAD, NULL, 0);
    return false;
  }
  uint8_t *value = vlen ? sg__malloc(vlen) : NULL;
  if (vlen && value == NULL) return false;
  if (vlen && !read_full(c->fd, value, vlen)) {
    sg__free(value);
    return false;
  }
  bool keep = true;
  switch (op) {
    case OP_HELLO:
      if (token_equal(value, vlen, s->token)) {
        c->authed = true;
        keep = reply(c->fd, ST_OK, NULL, 0);
      } else {
        reply(c->fd, ST_DENIED, NULL, 0);
        keep = false;
      }
      sg__free(value);
      break;
    case OP_SET:
      if (klen == 0 || !set_kv(s, key, value, vlen)) {
        sg__free(value);
        reply(c->fd, ST_BAD, NULL, 0);
        keep = false;
      } else {
        keep = reply(c->fd, ST_OK, NULL, 0);
      }
      break;
    case OP_GET: {
      sg__free(value);
      kv *e = find_kv(s, key);
      keep = e ? reply(c->fd, ST_OK, e->value, e->len) : reply(c->fd, ST_NOT_FOUND, NULL, 0);
      break;
    }
    case OP_ADD: {
      kv *e = find_kv(s, key);
      if (vlen != 8 || klen == 0 || (e != NULL && e->len != 8)) {
        sg__free(value);
        reply(c->fd, ST_BAD, NULL, 0);
        keep = false;
        break;
      }
      int64_t sum = get_i64(value) + (e ? get_i64(e->value) : 0);
      put_i64(value, sum);
      if (!set_kv(s, key, value, 8)) {
        sg__free(value);
        keep = false;
        break;
      }
      uint8_t out[8];
      put_i64(out, sum);
      keep = reply(c->fd, ST_OK, out, 8);
      break;
    }
    default:
      sg__free(value);
      reply(c->fd, ST_BAD, NULL, 0);
      keep = false;
  }
  return keep;
}

static void *server_main(void *arg) {
  sg__store_server *s = arg;
  struct pollfd *fds = NULL;
  uint32_t cap_fds = 0;
  for (;;) {
    if (sg__grow((void **)&fds, &cap_fds, s->n_conns + 2, sizeof *fds) != SG_OK) {
      usleep(10000);
      continue;
    }
    fds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    fds[1] = (struct pollfd){s->listen_fd, POLLIN, 0};
    for (uint32_t i = 0; i < s->n_conns; i++) fds[i + 2] = (struct pollfd){s->conns[i].fd, POLLIN, 0};
    int n = poll(fds, s->n_conns + 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    /* Requests first: connections accepted below shift no index used here. */
    for (uint32_t i = s->n_conns; i-- > 0;) {
      if (!fds[i + 2].revents) continue;
      if (!serve_one(s, &s->conns[i])) {
        close(s->conns[i].fd);
        s->conns[i] = s->conns[--s->n_conns];
      }
    }
    if (fds[1].revents & POLLIN) {
      int fd = accept(s->listen_fd, NULL, NULL);
      if (fd >= 0) {
        if (s->n_conns >= MAX_CONNS ||
            sg__grow((void **)&s->conns, &s->cap_conns, s->n_conns + 1, sizeof(conn)) != SG_OK) {
          close(fd);
        } else {
          int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          /* A client that stalls mid-frame cannot hold the server for long. */
          set_timeout(fd, 2000);
          s->conns[s->n_conns++] = (conn){fd, false};
        }
      }
    }
  }
  sg__free(fds);
  return NULL;
}

sg_status sg__store_server_start(const char *addr, int port, const char *token, sg__store_server **out) {
  *out = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen;
  SG_CHECK(resolve(addr, port, &ss, &sslen));
  sg__store_server *s = sg__calloc(1, sizeof *s);
  if (s == NULL) return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  s->wake[0] = s->wake[1] = -1;
  snprintf(s->token, sizeof s->token, "%s", token);
  s->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sg_status st = SG_OK;
  int one = 1;
  if (s->listen_fd < 0) {
    st = sg__error(SG_ERR_COMM, "rendezvous store: socket: %s", strerror(errno));
    goto fail;
  }
  setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s->listen_fd, (struct sockaddr *)&ss, sslen) != 0 || listen(s->listen_fd, 128) != 0) {
    st = sg__error(SG_ERR_COMM, "rendezvous store: cannot listen on %s:%d: %s", addr, port, strerror(errno));
    goto fail;
  }
  if (pipe(s->wake) != 0) {
    st = sg__error(SG_ERR_COMM, "rendezvous store: pipe: %s", strerror(errno));
    goto fail;
  }
  if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
    st = sg__error(SG_ERR_COMM, "rendezvous store: cannot start the server thread");
    goto fail;
  }
  *out = s;
  return SG_OK;
fail:
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  sg__free(s);
  return st;
}

void sg__store_server_stop(sg__store_server *s) {
  if (s == NULL) return;
  char b = 1;
  while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  pthread_join(s->thread, NULL);
  for (uint32_t i = 0; i < s->n_conns; i++) close(s->conns[i].fd);
  for (uint32_t i = 0; i < s->n_items; i++) {
    sg__free(s->items[i].key);
    sg__free(s->items[i].value);
  }
  sg__free(s->items);
  sg__free(s->conns);
  close(s->listen_fd);
  close(s->wake[0]);
  close(s->wake[1]);
  sg__free(s);
}

/* ---- client --------------------------------------------------------------- */

struct sg__store {
  int fd;
  int timeout_ms;
  char where[300];
  char prefix[96]; /* put before every key: an epoch's or a group's namespace ("e3/", "e0/g/stage1/"); "" at
                      epoch 0 */
};

void sg__store_set_prefix(sg__store *c, const char *prefix) {
  snprintf(c->prefix, sizeof c->prefix, "%s", prefix ? prefix : "");
}

/* One request and its reply. *value (when asked for) is allocated with sg__malloc. */
static sg_status request(sg__store *c, int op, const char *key, const void *value, size_t len, int *status,
                         void **out, size_t *out_len) {
  char full[SG_STORE_MAX_KEY + sizeof c->prefix];
  if (c->prefix[0] != '\0' && op != OP_HELLO) {
    snprintf(full, sizeof full, "%s%s", c->prefix, key);
    key = full;
  }
  size_t klen = strlen(key);
  if (klen > SG_STORE_MAX_KEY || len > SG_STORE_MAX_VALUE)
    return sg__error(SG_ERR_INVALID_ARG, "rendezvous store: key or value too long");
  uint8_t h[16] = {0};
  put_u32(h, STORE_MAGIC_REQ);
  h[4] = (uint8_t)op;
  put_u32(h + 8, (uint32_t)klen);
  put_u32(h + 12, (uint32_t)len);
  set_timeout(c->fd, c->timeout_ms);
  if (!write_full(c->fd, h, sizeof h) || !write_full(c->fd, key, klen) ||
      (len && !write_full(c->fd, value, len)))
    return sg__error(SG_ERR_COMM, "rendezvous store %s (rank 0): send failed: %s", c->where,
                     errno ? strerror(errno) : "connection closed");
  uint8_t r[12];
  if (!read_full(c->fd, r, sizeof r)) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return sg__error(SG_ERR_TIMEOUT, "rendezvous store %s (rank 0): no reply within %d ms", c->where,
                       c->timeout_ms);
    return sg__error(SG_ERR_COMM, "rendezvous store %s (rank 0): connection closed", c->where);
  }
  uint32_t rlen = get_u32(r + 8);
  if (get_u32(r) != STORE_MAGIC_REP || r[4] > ST_BAD || rlen > SG_STORE_MAX_VALUE)
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s (rank 0): malformed reply", c->where);
  *status = r[4];
  uint8_t *buf = sg__malloc(rlen ? rlen : 1);
  if (buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  if (rlen && !read_full(c->fd, buf, rlen)) {
    sg__free(buf);
    return sg__error(SG_ERR_COMM, "rendezvous store %s (rank 0): reply truncated", c->where);
  }
  if (out && (*status == ST_OK || *status == ST_NOT_FOUND)) {
    *out = buf;
    *out_len = rlen;
  } else {
    sg__free(buf); /* an error reply's value is never handed out */
  }
  if (*status == ST_DENIED)
    return sg__error(SG_ERR_DENIED,
                     "rendezvous store %s (rank 0) refused this process: wrong job token "
                     "(SG_JOB_TOKEN)",
                     c->where);
  if (*status == ST_BAD)
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s (rank 0) rejected a request for key '%s'", c->where,
                     key);
  return SG_OK;
}

sg_status sg__store_connect(const char *addr, int port, const char *token, int timeout_ms, sg__store **out) {
  *out = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen;
  SG_CHECK(resolve(addr, port, &ss, &sslen));
  int64_t deadline = sg__now_ms() + timeout_ms;
  int fd = -1, delay_ms = 5;
  for (;;) {
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return sg__error(SG_ERR_COMM, "rendezvous store: socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&ss, sslen) == 0) break;
    int e = errno;
    close(fd);
    fd = -1;
    if (sg__now_ms() + delay_ms > deadline)
      return sg__error(SG_ERR_TIMEOUT,
                       "cannot reach the rendezvous store of rank 0 at %s:%d within %d ms: %s", addr, port,
                       timeout_ms, strerror(e));
    usleep((useconds_t)delay_ms * 1000);
    if (delay_ms < 100) delay_ms *= 2;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sg__store *c = sg__calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  }
  c->fd = fd;
  c->timeout_ms = timeout_ms;
  snprintf(c->where, sizeof c->where, "at %s:%d", addr, port);
  int status;
  sg_status st = request(c, OP_HELLO, "", token, strlen(token), &status, NULL, NULL);
  if (st != SG_OK) {
    sg__store_close(c);
    return st;
  }
  *out = c;
  return SG_OK;
}

void sg__store_close(sg__store *c) {
  if (c == NULL) return;
  close(c->fd);
  sg__free(c);
}

sg_status sg__store_set(sg__store *c, const char *key, const void *value, size_t len) {
  int status;
  return request(c, OP_SET, key, value, len, &status, NULL, NULL);
}

sg_status sg__store_wait_get(sg__store *c, const char *key, int timeout_ms, void **value, size_t *len) {
  int64_t deadline = sg__now_ms() + timeout_ms;
  int delay_us = 200;
  for (;;) {
    int status;
    void *v = NULL;
    size_t n = 0;
    SG_CHECK(request(c, OP_GET, key, NULL, 0, &status, &v, &n));
    if (status == ST_OK) {
      *value = v;
      *len = n;
      return SG_OK;
    }
    sg__free(v);
    if (sg__now_ms() >= deadline)
      return sg__error(SG_ERR_TIMEOUT, "timed out after %d ms waiting for '%s' in the rendezvous store",
                       timeout_ms, key);
    usleep((useconds_t)delay_us);
    if (delay_us < 20000) delay_us *= 2;
  }
}

sg_status sg__store_add(sg__store *c, const char *key, int64_t delta, int64_t *result) {
  uint8_t v[8];
  put_i64(v, delta);
  int status;
  void *r = NULL;
  size_t n = 0;
  SG_CHECK(request(c, OP_ADD, key, v, 8, &status, &r, &n));
  if (n != 8) {
    sg__free(r);
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s: ADD reply of %zu bytes", c->where, n);
  }
  *result = get_i64(r);
  sg__free(r);
  return SG_OK;
}

/* ---- the public server (a launcher hosts the store, comm.h) ---------------- */

struct sg_comm_store_server {
  sg__store_server *srv;
};

sg_status sg_comm_store_serve(const char *addr, int port, const char *token, sg_comm_store_server **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: out is NULL");
  *out = NULL;
  if (addr == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: addr is NULL");
  if (port < 1 || port > 65535)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: port %d is not in [1, 65535]", port);
  if (token != NULL && strlen(token) >= 256)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: the token is longer than 255 bytes");
  sg_comm_store_server *s = sg__calloc(1, sizeof *s);
  if (s == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_comm_store_serve: out of memory");
  sg_status st = sg__store_server_start(addr, port, token ? token : "", &s->srv);
  if (st != SG_OK) {
    sg__free(s);
    return st;
  }
  *out = s;
  return SG_OK;
}

void sg_comm_store_stop(sg_comm_store_server *s) {
  if (s == NULL) return;
  sg__store_server_stop(s->srv);
  sg__free(s);
}
