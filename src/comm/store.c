/* The rendezvous store's client (SPEC M1, S3): one connection per rank,
 * authenticated with the job token (HELLO), then SET, GET and ADD requests,
 * each answered before the next is sent. The server is store_server.c; the
 * frames are in store_frame.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/store_frame.h"

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

sg_status sg__store_resolve(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len) {
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
  if (c->prefix[0] != '\0' && op != SG__STORE_OP_HELLO) {
    snprintf(full, sizeof full, "%s%s", c->prefix, key);
    key = full;
  }
  size_t klen = strlen(key);
  if (klen > SG_STORE_MAX_KEY || len > SG_STORE_MAX_VALUE)
    return sg__error(SG_ERR_INVALID_ARG, "rendezvous store: key or value too long");
  uint8_t h[16] = {0};
  sg__store_put_u32(h, SG__STORE_MAGIC_REQ);
  h[4] = (uint8_t)op;
  sg__store_put_u32(h + 8, (uint32_t)klen);
  sg__store_put_u32(h + 12, (uint32_t)len);
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
  uint32_t rlen = sg__store_get_u32(r + 8);
  if (sg__store_get_u32(r) != SG__STORE_MAGIC_REP || r[4] > SG__STORE_BAD || rlen > SG_STORE_MAX_VALUE)
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s (rank 0): malformed reply", c->where);
  *status = r[4];
  uint8_t *buf = sg__malloc(rlen ? rlen : 1);
  if (buf == NULL) return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  if (rlen && !read_full(c->fd, buf, rlen)) {
    sg__free(buf);
    return sg__error(SG_ERR_COMM, "rendezvous store %s (rank 0): reply truncated", c->where);
  }
  if (out && (*status == SG__STORE_OK || *status == SG__STORE_NOT_FOUND)) {
    *out = buf;
    *out_len = rlen;
  } else {
    sg__free(buf); /* an error reply's value is never handed out */
  }
  if (*status == SG__STORE_DENIED)
    return sg__error(SG_ERR_DENIED,
                     "rendezvous store %s (rank 0) refused this process: wrong job token "
                     "(SG_JOB_TOKEN)",
                     c->where);
  if (*status == SG__STORE_BAD)
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s (rank 0) rejected a request for key '%s'", c->where,
                     key);
  return SG_OK;
}

sg_status sg__store_connect(const char *addr, int port, const char *token, int timeout_ms, sg__store **out) {
  *out = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen = 0;
  SG_CHECK(sg__store_resolve(addr, port, &ss, &sslen));
  sg__store *c = sg__calloc(1, sizeof *c);
  if (c == NULL) return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  c->fd = -1;
  snprintf(c->where, sizeof c->where, "at %s:%d", addr, port);
  int64_t deadline = sg__now_ms() + timeout_ms;
  int delay_ms = 5;
  /* Until the deadline: connect and authenticate. Either may fail for a
   * while (the store not listening yet; a flood of unauthenticated
   * connections that pushed this one out before its HELLO was answered);
   * only a refused token ends the attempts at once. */
  for (;;) {
    c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
      sg__free(c);
      return sg__error(SG_ERR_COMM, "rendezvous store: socket: %s", strerror(errno));
    }
    sg_status st;
    if (connect(c->fd, (struct sockaddr *)&ss, sslen) == 0) {
      int one = 1;
      setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      int64_t left = deadline - sg__now_ms();
      c->timeout_ms = left < 100 ? 100 : (int)left;
      int status;
      st = request(c, SG__STORE_OP_HELLO, "", token, strlen(token), &status, NULL, NULL);
      if (st == SG_OK) {
        c->timeout_ms = timeout_ms;
        *out = c;
        return SG_OK;
      }
      if (st == SG_ERR_DENIED) {
        sg__store_close(c);
        return st;
      }
    } else {
      st = sg__error(SG_ERR_TIMEOUT, "cannot reach the rendezvous store of rank 0 at %s:%d within %d ms: %s",
                     addr, port, timeout_ms, strerror(errno));
    }
    close(c->fd);
    c->fd = -1;
    if (sg__now_ms() + delay_ms > deadline) {
      sg__free(c);
      return st;
    }
    usleep((useconds_t)delay_ms * 1000);
    if (delay_ms < 100) delay_ms *= 2;
  }
}

void sg__store_close(sg__store *c) {
  if (c == NULL) return;
  if (c->fd >= 0) close(c->fd);
  sg__free(c);
}

sg_status sg__store_set(sg__store *c, const char *key, const void *value, size_t len) {
  int status;
  return request(c, SG__STORE_OP_SET, key, value, len, &status, NULL, NULL);
}

sg_status sg__store_wait_get(sg__store *c, const char *key, int timeout_ms, void **value, size_t *len) {
  int64_t deadline = sg__now_ms() + timeout_ms;
  int delay_us = 200;
  for (;;) {
    int status;
    void *v = NULL;
    size_t n = 0;
    SG_CHECK(request(c, SG__STORE_OP_GET, key, NULL, 0, &status, &v, &n));
    if (status == SG__STORE_OK) {
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
  sg__store_put_i64(v, delta);
  int status;
  void *r = NULL;
  size_t n = 0;
  SG_CHECK(request(c, SG__STORE_OP_ADD, key, v, 8, &status, &r, &n));
  if (n != 8) {
    sg__free(r);
    return sg__error(SG_ERR_FORMAT, "rendezvous store %s: ADD reply of %zu bytes", c->where, n);
  }
  *result = sg__store_get_i64(r);
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
  if (port < 0 || port > 65535)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: port %d is not in [0, 65535]", port);
  if (token != NULL && strlen(token) >= 256)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_store_serve: the token is longer than 255 bytes");
  SG_CHECK(sg_comm_check_job_token(addr, token));
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

int sg_comm_store_server_port(const sg_comm_store_server *s) {
  return s == NULL ? -1 : sg__store_server_port(s->srv);
}

void sg_comm_store_stop(sg_comm_store_server *s) {
  if (s == NULL) return;
  sg__store_server_stop(s->srv);
  sg__free(s);
}
