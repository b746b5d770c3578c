/* The rendezvous store's server (SPEC M1, S3): a key/value server that the
 * launcher (or rank 0) runs on the master address, loopback by default. One
 * thread serves every connection at once with poll(2), each connection a
 * small state machine over non-blocking sockets, so no client can hold the
 * server: a job's ranks keep registering and recovering while anyone else
 * trickles bytes, idles or floods (the issue-15 attacks).
 *
 * Before a connection has proved it holds the job token it may send one
 * HELLO frame and nothing else, and at most SG__STORE_REQ_HEADER + 255
 * bytes: the first byte that cannot begin that frame (a wrong magic, another
 * op, a key, a value of another length than the token's) drops it, and so
 * does its deadline, AUTH_MS after it was accepted. The token itself is
 * compared once all its bytes are in, in constant time: dropping the
 * connection at the first wrong token byte would tell a prober how many
 * leading bytes were right, and so give the token away byte by byte. At most
 * MAX_UNAUTH connections wait for authentication; a newer one pushes out the
 * oldest, whose deadline is nearest anyway. Connections are accepted
 * ACCEPT_BATCH at a time, each batch read before the next, so a flood of
 * connections cannot push out one whose HELLO already arrived unread. An authenticated connection may
 * idle between requests for as long as it likes (ranks keep theirs for the
 * whole job), but a frame, from its first byte to the last byte of its
 * reply, must complete within FRAME_MS.
 *
 * Every length is checked against SG_STORE_MAX_KEY / SG_STORE_MAX_VALUE
 * before anything is allocated (comm_internal.h, store_frame.h). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "comm/store_frame.h"

#define MAX_CONNS 4100  /* every connection */
#define MAX_UNAUTH 64   /* connections that have not authenticated yet */
#define ACCEPT_BATCH 16 /* accepted per wake-up, fewer than MAX_UNAUTH (accept_all) */
#define MAX_TOKEN 255   /* bytes (sg_comm_store_serve refuses longer) */
#define AUTH_MS 2000    /* from accept to the last byte of the HELLO reply */
#define FRAME_MS 5000   /* from a request's first byte to its reply's last */

typedef struct kv {
  char *key;
  uint8_t *value;
  size_t len;
} kv;

typedef struct conn {
  int fd;
  bool authed;
  int64_t since;    /* accepted, ms */
  int64_t deadline; /* ms; 0: none (an idle authenticated connection) */
  /* The request being received: header, key, value. */
  uint8_t hdr[SG__STORE_REQ_HEADER];
  uint32_t got; /* bytes of the frame so far */
  uint32_t klen, vlen;
  char key[SG_STORE_MAX_KEY + 1];
  uint8_t *value;
  /* The reply being sent. */
  uint8_t *out;
  size_t out_len, out_sent;
  bool close_after; /* a refusal: the connection ends once it is sent */
} conn;

struct sg__store_server {
  int listen_fd;
  int port; /* bound (the kernel's choice for port 0) */
  int wake[2];
  pthread_t thread;
  char token[MAX_TOKEN + 1];
  uint32_t token_len;
  kv *items;
  uint32_t n_items, cap_items;
  conn *conns;
  uint32_t n_conns, cap_conns, n_unauth;
  struct pollfd *fds;
  uint32_t cap_fds;
};

static void set_nonblocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* ---- the table -------------------------------------------------------------- */

static kv *find_kv(sg__store_server *s, const char *key) {
  for (uint32_t i = 0; i < s->n_items; i++)
    if (strcmp(s->items[i].key, key) == 0) return &s->items[i];
  return NULL;
}

/* Takes ownership of value on success. */
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

/* ---- connections ------------------------------------------------------------ */

static void conn_reset_frame(conn *c) {
  sg__free(c->value);
  c->value = NULL;
  c->got = c->klen = c->vlen = 0;
}

static void conn_drop(sg__store_server *s, uint32_t i) {
  conn *c = &s->conns[i];
  close(c->fd);
  conn_reset_frame(c);
  sg__free(c->out);
  if (!c->authed) s->n_unauth--;
  s->conns[i] = s->conns[--s->n_conns];
}

/* Queues a reply; false when out of memory (the connection is dropped). */
static bool queue_reply(conn *c, int status, const void *value, size_t len, bool close_after) {
  c->out = sg__malloc(SG__STORE_REP_HEADER + len);
  if (c->out == NULL) return false;
  memset(c->out, 0, SG__STORE_REP_HEADER);
  sg__store_put_u32(c->out, SG__STORE_MAGIC_REP);
  c->out[4] = (uint8_t)status;
  sg__store_put_u32(c->out + 8, (uint32_t)len);
  if (len) memcpy(c->out + SG__STORE_REP_HEADER, value, len);
  c->out_len = SG__STORE_REP_HEADER + len;
  c->out_sent = 0;
  c->close_after = close_after;
  return true;
}

/* Sends what the socket takes of the queued reply. False: drop. */
static bool flush(conn *c) {
  while (c->out_sent < c->out_len) {
    ssize_t r = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (r <= 0) return false;
    c->out_sent += (size_t)r;
  }
  sg__free(c->out);
  c->out = NULL;
  c->out_len = c->out_sent = 0;
  if (c->close_after) return false;
  if (c->got == 0) c->deadline = c->authed ? 0 : c->deadline; /* idle: no frame under way */
  return true;
}

/* Token comparison whose time does not depend on where the tokens differ. */
static bool token_equal(const sg__store_server *s, const uint8_t *a, size_t alen) {
  unsigned diff = (unsigned)(alen ^ s->token_len);
  for (size_t i = 0; i < alen && i < s->token_len; i++) diff |= a[i] ^ (uint8_t)s->token[i];
  return diff == 0;
}

/* Acts on a whole request; queues its reply. False: out of memory. */
static bool serve_frame(sg__store_server *s, conn *c) {
  int op = c->hdr[4];
  uint8_t *value = c->value;
  c->value = NULL;
  bool ok = true;
  switch (op) {
    case SG__STORE_OP_HELLO:
      if (token_equal(s, value, c->vlen)) {
        if (!c->authed) s->n_unauth--;
        c->authed = true;
        ok = queue_reply(c, SG__STORE_OK, NULL, 0, false);
      } else {
        ok = queue_reply(c, SG__STORE_DENIED, NULL, 0, true);
      }
      sg__free(value);
      break;
    case SG__STORE_OP_SET:
      if (c->klen == 0 || !set_kv(s, c->key, value, c->vlen)) {
        sg__free(value);
        ok = queue_reply(c, SG__STORE_BAD, NULL, 0, true);
      } else {
        ok = queue_reply(c, SG__STORE_OK, NULL, 0, false);
      }
      break;
    case SG__STORE_OP_GET: {
      sg__free(value);
      kv *e = find_kv(s, c->key);
      ok = e ? queue_reply(c, SG__STORE_OK, e->value, e->len, false)
             : queue_reply(c, SG__STORE_NOT_FOUND, NULL, 0, false);
      break;
    }
    default: { /* SG__STORE_OP_ADD: the header check let nothing else through */
      kv *e = find_kv(s, c->key);
      if (c->vlen != 8 || c->klen == 0 || (e != NULL && e->len != 8)) {
        sg__free(value);
        ok = queue_reply(c, SG__STORE_BAD, NULL, 0, true);
        break;
      }
      int64_t sum = sg__store_get_i64(value) + (e ? sg__store_get_i64(e->value) : 0);
      sg__store_put_i64(value, sum);
      if (!set_kv(s, c->key, value, 8)) {
        sg__free(value);
        ok = false;
        break;
      }
      uint8_t out[8];
      sg__store_put_i64(out, sum);
      ok = queue_reply(c, SG__STORE_OK, out, 8, false);
      break;
    }
  }
  c->got = c->klen = c->vlen = 0;
  return ok;
}

/* The header is complete: validate it before anything is allocated. A
 * refusal is queued (and the connection ends once it is sent); false: out
 * of memory. */
static bool check_header(sg__store_server *s, conn *c) {
  int op = c->hdr[4];
  c->klen = sg__store_get_u32(c->hdr + 8);
  c->vlen = sg__store_get_u32(c->hdr + 12);
  if (op < SG__STORE_OP_HELLO || op > SG__STORE_OP_ADD || c->klen > SG_STORE_MAX_KEY ||
      c->vlen > SG_STORE_MAX_VALUE)
    return queue_reply(c, SG__STORE_BAD, NULL, 0, true);
  /* Before authentication only a HELLO whose value has the token's length
   * can succeed: nothing longer is ever read. */
  if (!c->authed && (c->klen != 0 || c->vlen != s->token_len))
    return queue_reply(c, SG__STORE_DENIED, NULL, 0, true);
  if (c->vlen > 0 && (c->value = sg__malloc(c->vlen)) == NULL) return false;
  return true;
}

/* The first header bytes as they arrive: a wrong magic is not a client of
 * this store (drop it at once); an unauthenticated client asking for
 * anything but HELLO is refused (DENIED, then closed). */
enum { PREFIX_OK, PREFIX_DROP, PREFIX_DENY };
static int header_prefix(const conn *c, uint32_t from, uint32_t to) {
  uint8_t magic[4];
  sg__store_put_u32(magic, SG__STORE_MAGIC_REQ);
  for (uint32_t i = from; i < to; i++) {
    if (i < 4 && c->hdr[i] != magic[i]) return PREFIX_DROP;
    if (i == 4 && !c->authed && c->hdr[4] != SG__STORE_OP_HELLO) return PREFIX_DENY;
  }
  return PREFIX_OK;
}

/* Reads what the socket has. False: drop the connection now. */
static bool on_readable(sg__store_server *s, conn *c, int64_t now) {
  while (c->out == NULL) {
    uint8_t *dst;
    size_t want;
    uint32_t h = SG__STORE_REQ_HEADER;
    if (c->got < h) {
      dst = c->hdr + c->got, want = h - c->got;
    } else if (c->got < h + c->klen) {
      dst = (uint8_t *)c->key + (c->got - h), want = h + c->klen - c->got;
    } else {
      dst = c->value + (c->got - h - c->klen), want = h + c->klen + c->vlen - c->got;
    }
    ssize_t r = want ? recv(c->fd, dst, want, 0) : 0;
    if (want && r < 0 && errno == EINTR) continue;
    if (want && r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (want && r <= 0) return false; /* closed (half-open included) or failed */
    uint32_t before = c->got;
    c->got += (uint32_t)r;
    if (before == 0 && c->authed) c->deadline = now + FRAME_MS;
    if (before < h) {
      int p = header_prefix(c, before, c->got < h ? c->got : h);
      if (p == PREFIX_DROP) return false;
      if (p == PREFIX_DENY) return queue_reply(c, SG__STORE_DENIED, NULL, 0, true) && flush(c);
    }
    if (before < h && c->got == h) {
      if (!check_header(s, c)) return false;
      if (c->out != NULL) return flush(c); /* refused */
    }
    if (c->got == h + c->klen + c->vlen) {
      c->key[c->klen] = '\0';
      if (memchr(c->key, '\0', c->klen) != NULL) {
        conn_reset_frame(c);
        if (!queue_reply(c, SG__STORE_BAD, NULL, 0, true)) return false;
      } else if (!serve_frame(s, c)) {
        return false;
      }
      if (!flush(c)) return false;
    }
  }
  return true; /* a reply is still going out: read on once it is sent */
}

/* Accepts what is pending, at most ACCEPT_BATCH: the connections accepted
 * are read (their HELLO answered) at the next wake-up, before a flood
 * behind them can push them out as the oldest waiting ones; the listening
 * socket stays readable, so the rest come at once. */
static void accept_all(sg__store_server *s, int64_t now) {
  for (int accepted = 0; accepted < ACCEPT_BATCH; accepted++) {
    int fd = accept(s->listen_fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return; /* EAGAIN: no more; anything else: try at the next wake-up */
    }
    if (s->n_conns >= MAX_CONNS ||
        sg__grow((void **)&s->conns, &s->cap_conns, s->n_conns + 1, sizeof(conn)) != SG_OK) {
      close(fd);
      continue;
    }
    if (s->n_unauth >= MAX_UNAUTH) { /* the oldest waiting one makes room */
      uint32_t oldest = UINT32_MAX;
      for (uint32_t i = 0; i < s->n_conns; i++)
        if (!s->conns[i].authed && (oldest == UINT32_MAX || s->conns[i].since < s->conns[oldest].since))
          oldest = i;
      if (oldest != UINT32_MAX) conn_drop(s, oldest);
    }
    set_nonblocking(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = &s->conns[s->n_conns++];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->since = now;
    c->deadline = now + AUTH_MS;
    s->n_unauth++;
  }
}

static void *server_main(void *arg) {
  sg__store_server *s = arg;
  for (;;) {
    int64_t now = sg__now_ms(), next = -1;
    for (uint32_t i = s->n_conns; i-- > 0;) {
      int64_t d = s->conns[i].deadline;
      if (d != 0 && now >= d) conn_drop(s, i);
      else if (d != 0 && (next < 0 || d < next)) next = d;
    }
    if (sg__grow((void **)&s->fds, &s->cap_fds, s->n_conns + 2, sizeof *s->fds) != SG_OK) {
      usleep(10000);
      continue;
    }
    s->fds[0] = (struct pollfd){s->wake[0], POLLIN, 0};
    s->fds[1] = (struct pollfd){s->listen_fd, POLLIN, 0};
    for (uint32_t i = 0; i < s->n_conns; i++)
      s->fds[i + 2] = (struct pollfd){s->conns[i].fd, s->conns[i].out ? POLLOUT : POLLIN, 0};
    int timeout = next < 0 ? -1 : (int)(next - now + 1);
    int n = poll(s->fds, s->n_conns + 2, timeout);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (s->fds[0].revents) break;
    now = sg__now_ms();
    /* Connections first, last to first: a dropped one is replaced by the
     * last, whose poll entry was already looked at. */
    for (uint32_t i = s->n_conns; i-- > 0;) {
      short ev = s->fds[i + 2].revents;
      if (ev == 0) continue;
      conn *c = &s->conns[i];
      bool keep;
      if (c->out != NULL) keep = (ev & (POLLOUT | POLLERR | POLLHUP)) == POLLOUT ? flush(c) : false;
      else keep = (ev & (POLLIN | POLLHUP | POLLERR)) ? on_readable(s, c, now) : true;
      if (!keep) conn_drop(s, i);
    }
    if (s->fds[1].revents & POLLIN) accept_all(s, now);
  }
  return NULL;
}

sg_status sg__store_server_start(const char *addr, int port, const char *token, sg__store_server **out) {
  *out = NULL;
  if (strlen(token) > MAX_TOKEN)
    return sg__error(SG_ERR_INVALID_ARG, "rendezvous store: the token is longer than %d bytes", MAX_TOKEN);
  struct sockaddr_storage ss;
  socklen_t sslen = 0;
  SG_CHECK(sg__store_resolve(addr, port, &ss, &sslen));
  sg__store_server *s = sg__calloc(1, sizeof *s);
  if (s == NULL) return sg__error(SG_ERR_NO_MEMORY, "rendezvous store: out of memory");
  s->wake[0] = s->wake[1] = -1;
  snprintf(s->token, sizeof s->token, "%s", token);
  s->token_len = (uint32_t)strlen(s->token);
  s->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &blen) != 0) {
    st = sg__error(SG_ERR_COMM, "rendezvous store: getsockname: %s", strerror(errno));
    goto fail;
  }
  s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
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

int sg__store_server_port(const sg__store_server *s) { return s->port; }

void sg__store_server_stop(sg__store_server *s) {
  if (s == NULL) return;
  char b = 1;
  while (write(s->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  pthread_join(s->thread, NULL);
  while (s->n_conns > 0) conn_drop(s, s->n_conns - 1);
  for (uint32_t i = 0; i < s->n_items; i++) {
    sg__free(s->items[i].key);
    sg__free(s->items[i].value);
  }
  sg__free(s->items);
  sg__free(s->conns);
  sg__free(s->fds);
  close(s->listen_fd);
  close(s->wake[0]);
  close(s->wake[1]);
  sg__free(s);
}
