/* The communicator: bootstrap through the rendezvous store, UCX endpoints to
 * every peer, point-to-point messages, RMA windows and active messages. */
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"

sg_comm_params sg_comm_params_init(void) {
  sg_comm_params p = SG_COMM_PARAMS_INIT;
  return p;
}

int sg__comm_aborted(const sg_comm *comm) {
  return __atomic_load_n(&comm->abort_state, __ATOMIC_ACQUIRE) != 0;
}

/* The abort reason, once sg_comm_abort has finished writing it. */
static const char *abort_reason(const sg_comm *comm) {
  return __atomic_load_n(&comm->abort_state, __ATOMIC_ACQUIRE) == 2 ? comm->abort_reason
                                                                    : "(reason not yet set)";
}

sg_status sg__comm_fail(sg_comm *comm, sg_status st) {
  /* A timed-out or broken collective leaves messages in flight whose matching
   * is now unknown: the communicator cannot be trusted any more. */
  if (st == SG_OK || st == SG_ERR_INVALID_ARG) return st;
  if (sg__comm_aborted(comm)) {
    /* The wait noticed the abort flag: report why the communicator was aborted. */
    st = sg__error(SG_ERR_COMM, "rank %d: the communicator was aborted: %s", comm->rank, abort_reason(comm));
  }
  if (comm->failed == SG_OK) {
    comm->failed = st;
    snprintf(comm->fail_msg, sizeof comm->fail_msg, "%s", sg_last_error());
  }
  return st;
}

static sg_status begin(sg_comm *comm, const char *what, int all) {
  if (comm == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL communicator", what);
  if (sg__comm_aborted(comm))
    return sg__error(SG_ERR_COMM, "%s on rank %d: the communicator was aborted: %s", what, comm->rank,
                     abort_reason(comm));
  /* A peer that went away (or a transport failure) stays SG_ERR_COMM, so a
   * caller that heals on SG_ERR_COMM sees it on every later call too. */
  if (comm->failed == SG_ERR_COMM)
    return sg__error(SG_ERR_COMM, "%s on rank %d: the communicator failed earlier: %s", what, comm->rank,
                     comm->fail_msg);
  if (comm->failed != SG_OK)
    return sg__error(SG_ERR_STATE, "%s on rank %d: the communicator failed earlier (%s: %s); destroy it",
                     what, comm->rank, sg_status_str(comm->failed), comm->fail_msg);
  comm->deadline = sg__now_ms() + comm->env.timeout_ms;
  if (comm->det) sg__det_scope_all(comm->det, all);
  return SG_OK;
}

sg_status sg__comm_begin(sg_comm *comm, const char *what) { return begin(comm, what, 0); }
sg_status sg__comm_begin_all(sg_comm *comm, const char *what) { return begin(comm, what, 1); }

sg_status sg__comm_scratch(sg_comm *comm, size_t bytes, void **out) {
  if (bytes > comm->scratch_bytes) {
    void *p = sg__realloc(comm->scratch, bytes);
    if (p == NULL)
      return sg__error(SG_ERR_NO_MEMORY, "rank %d: no memory for %zu bytes of staging", comm->rank, bytes);
    comm->scratch = p;
    comm->scratch_bytes = bytes;
  }
  *out = comm->scratch;
  return SG_OK;
}

static int remaining_ms(int64_t deadline) {
  int64_t r = deadline - sg__now_ms();
  return r < 1 ? 1 : (int)r;
}

/* Waits for key until the deadline, asking `watch` (if any) between looks
 * whether to give up (a peer found dead meanwhile). */
static sg_status wait_key(sg_comm *c, const char *key, int64_t deadline, int peer, sg__comm_watch_fn watch,
                          void *ctx, void **v, size_t *n) {
  if (watch == NULL) return sg__store_wait_get(c->store, key, remaining_ms(deadline), v, n);
  for (;;) {
    sg_status st = sg__store_wait_get(c->store, key, 0, v, n);
    if (st != SG_ERR_TIMEOUT) return st;
    SG_CHECK(watch(ctx, peer));
    if (sg__now_ms() >= deadline) return st;
    usleep(2000);
  }
}

/* Publishes our process identity (proc_watch.c) and worker address, then
 * collects every peer's and connects. */
static sg_status wire_up(sg_comm *c, int64_t deadline, sg__comm_watch_fn watch, void *ctx) {
  const void *addr;
  size_t len;
  char key[64];
  SG_CHECK(sg__ucx_address(c->ucx, &addr, &len));
  uint8_t *mine = sg__malloc(SG__PROC_IDENT_BYTES + len);
  if (mine == NULL) return sg__error(SG_ERR_NO_MEMORY, "rank %d: out of memory joining the job", c->rank);
  sg__proc_ident self;
  sg__proc_ident_self(&self);
  sg__proc_ident_encode(&self, mine);
  memcpy(mine + SG__PROC_IDENT_BYTES, addr, len);
  snprintf(key, sizeof key, "ucx/addr/%d", c->rank);
  sg_status put = sg__store_set(c->store, key, mine, SG__PROC_IDENT_BYTES + len);
  sg__free(mine);
  SG_CHECK(put);
  for (int i = 1; i < c->size; i++) {
    int p = (c->rank + i) % c->size;
    snprintf(key, sizeof key, "ucx/addr/%d", p);
    void *v = NULL;
    size_t n = 0;
    sg_status st = wait_key(c, key, deadline, p, watch, ctx, &v, &n);
    if (st == SG_ERR_TIMEOUT)
      return sg__error(SG_ERR_TIMEOUT,
                       "rank %d: timed out after %d ms waiting for rank %d to join the job "
                       "(rendezvous %s:%d)",
                       c->rank, c->env.timeout_ms, p, c->env.master_addr, c->env.master_port);
    SG_CHECK(st);
    sg__proc_ident peer;
    st = sg__proc_ident_decode(v, n, p, &peer);
    if (st == SG_OK)
      st = sg__ucx_connect(c->ucx, p, (uint8_t *)v + SG__PROC_IDENT_BYTES, n - SG__PROC_IDENT_BYTES, &peer);
    sg__free(v);
    SG_CHECK(st);
  }
  /* Everyone connected: only then may rank 0 retire the store's job (at destroy). */
  int64_t joined = 0;
  SG_CHECK(sg__store_add(c->store, "joined", 1, &joined));
  int delay_us = 200;
  while (joined < c->size) {
    if (sg__now_ms() >= deadline)
      return sg__error(SG_ERR_TIMEOUT, "rank %d: timed out after %d ms: only %lld of %d ranks joined the job",
                       c->rank, c->env.timeout_ms, (long long)joined, c->size);
    sg__ucx_progress(c->ucx);
    if (watch != NULL) SG_CHECK(watch(ctx, -1));
    usleep((useconds_t)delay_us);
    if (delay_us < 20000) delay_us *= 2;
    SG_CHECK(sg__store_add(c->store, "joined", 0, &joined));
  }
  return SG_OK;
}

/* group: NULL for the job's communicator, else the name of a subgroup
 * (sg__comm_create_group). */
static sg_status create(const sg_comm_params *params, const char *group, sg__comm_watch_fn watch, void *ctx,
                        sg_comm **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_create: NULL out");
  *out = NULL;
  sg_comm *c = sg__calloc(1, sizeof *c);
  if (c == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_comm_create: out of memory");
  sg_status st;
  SG_CHECK_GOTO(sg__comm_env_resolve(params, &c->env), st, fail);
  c->rank = c->env.rank;
  c->size = c->env.world_size;
  int64_t deadline = sg__now_ms() + c->env.timeout_ms;
  /* The epoch (0 for an older caller's struct without the field; the size was checked above). */
  sg_comm_params q = SG_COMM_PARAMS_INIT;
  SG_CHECK_GOTO(sg__params_read("sg_comm_create", SG__COMM_PARAMS_VERSIONS, &q, params), st, fail);
  int epoch = q.epoch;
  if (epoch < 0 || epoch > 1000000000) {
    st = sg__error(SG_ERR_INVALID_ARG, "sg_comm_create: epoch %d is not in [0, 1e9]", epoch);
    goto fail;
  }
  /* A later epoch reuses the store of epoch 0 (its host is still there, or
   * the launcher hosts it: SG_STORE_EXTERNAL=1). */
  const char *ext = getenv("SG_STORE_EXTERNAL");
  bool external = ext != NULL && strcmp(ext, "1") == 0;
  if (c->rank == 0 && epoch == 0 && !external && group == NULL)
    SG_CHECK_GOTO(sg__store_server_start(c->env.master_addr, c->env.master_port, c->env.token, &c->server),
                  st, fail);
  st = sg__store_connect(c->env.master_addr, c->env.master_port, c->env.token, c->env.timeout_ms, &c->store);
  if (st == SG_OK && (epoch > 0 || group != NULL)) {
    char prefix[SG__COMM_GROUP_NAME_MAX + 24];
    if (group != NULL) snprintf(prefix, sizeof prefix, "e%d/g/%s/", epoch, group);
    else snprintf(prefix, sizeof prefix, "e%d/", epoch);
    sg__store_set_prefix(c->store, prefix);
  }
  if (st != SG_OK) {
    if (st == SG_ERR_TIMEOUT)
      st = sg__error(SG_ERR_TIMEOUT,
                     "rank %d: rank 0 did not arrive within %d ms (no rendezvous store at %s:%d)", c->rank,
                     c->env.timeout_ms, c->env.master_addr, c->env.master_port);
    goto fail;
  }
  SG_CHECK_GOTO(sg__det_create(c->rank, c->size, &c->det), st, fail);
  SG_CHECK_GOTO(sg__ucx_create(c->rank, c->size, c->env.timeout_ms, c->det, &c->ucx), st, fail);
  SG_CHECK_GOTO(wire_up(c, deadline, watch, ctx), st, fail);
  SG_DEBUG("comm: rank %d of %d up (from %s, store %s:%d)", c->rank, c->size, c->env.source,
           c->env.master_addr, c->env.master_port);
  *out = c;
  return SG_OK;
fail:
  c->failed = st;
  sg_comm_destroy(c);
  return st;
}

sg_status sg_comm_create(const sg_comm_params *params, sg_comm **out) {
  return create(params, NULL, NULL, NULL, out);
}

sg_status sg__comm_create_watched(const sg_comm_params *params, sg__comm_watch_fn watch, void *ctx,
                                  sg_comm **out) {
  return create(params, NULL, watch, ctx, out);
}

sg_status sg__comm_create_group(const sg_comm_params *params, const char *group, sg_comm **out) {
  if (out != NULL) *out = NULL;
  if (params == NULL || group == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_create_group: NULL argument");
  size_t n = strlen(group);
  if (n == 0 || n > SG__COMM_GROUP_NAME_MAX)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_create_group: group name of %zu bytes (1..%d)", n,
                     SG__COMM_GROUP_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char ch = group[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == '.';
    if (!ok)
      return sg__error(SG_ERR_INVALID_ARG, "sg__comm_create_group: group name '%s' has '%c' at %zu", group,
                       ch, i);
  }
  if (params->rank < 0 || params->world_size < 1 || params->rank >= params->world_size)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_create_group: rank %d of %d is not a place in a group",
                     params->rank, params->world_size);
  return create(params, group, NULL, NULL, out);
}

sg_status sg_comm_destroy(sg_comm *comm) {
  if (comm == NULL) return SG_OK;
  sg_status st = SG_OK;
  /* The barrier makes sure no peer still needs our endpoints or rank 0's
   * store. After a failure or an abort there is no barrier to be had (a peer
   * may be gone), so destroy goes straight to closing: bounded either way. */
  if (comm->failed == SG_OK && !sg__comm_aborted(comm) && comm->ucx) st = sg__comm_leave_barrier(comm);
  sg__nccl_destroy(comm);
  sg__ucx_destroy(comm->ucx);
  for (size_t i = 0; i < comm->n_keep; i++) sg__free(comm->keep[i]); /* the transport is closed */
  sg__free(comm->keep);
  sg__det_destroy(comm->det);
  sg__store_close(comm->store);
  sg__store_server_stop(comm->server);
  sg__free(comm->scratch);
  sg__free(comm);
  return st;
}

bool sg__comm_unusable(const sg_comm *comm) {
  return comm != NULL && (comm->failed != SG_OK || sg__comm_aborted(comm));
}

sg_status sg__comm_free_at_close(sg_comm *comm, void *p) {
  if (comm == NULL || p == NULL) return SG_OK;
  void **k = sg__realloc(comm->keep, (comm->n_keep + 1) * sizeof *k);
  if (k == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg__comm_free_at_close: out of memory");
  comm->keep = k;
  comm->keep[comm->n_keep++] = p;
  return SG_OK;
}

sg_status sg__comm_store_bcast(sg_comm *comm, const char *key, void *buf, size_t len) {
  if (comm->rank == 0) return sg__store_set(comm->store, key, buf, len);
  void *v = NULL;
  size_t n = 0;
  SG_CHECK(sg__store_wait_get(comm->store, key, remaining_ms(comm->deadline), &v, &n));
  /* Validate before use (SPEC S1). */
  if (n != len) {
    sg__free(v);
    return sg__error(SG_ERR_FORMAT, "rank %d: '%s' in the rendezvous store has %zu bytes, expected %zu",
                     comm->rank, key, n, len);
  }
  memcpy(buf, v, len);
  sg__free(v);
  return SG_OK;
}

sg_status sg__comm_cut_peer(sg_comm *comm, int peer) {
  if (comm == NULL || comm->ucx == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_cut_peer: NULL communicator");
  if (peer < 0 || peer >= comm->size || peer == comm->rank)
    return sg__error(SG_ERR_INVALID_ARG, "sg__comm_cut_peer: peer rank %d is not another rank of %d", peer,
                     comm->size);
  sg__det_cut(comm->det, peer);
  return SG_OK;
}

int sg_comm_peer_unreachable(const sg_comm *comm, int peer) {
  if (comm == NULL || comm->ucx == NULL || peer < 0 || peer >= comm->size || peer == comm->rank) return -1;
  return sg__det_peer_dead(comm->det, peer);
}

int sg_comm_rank(const sg_comm *comm) { return comm ? comm->rank : -1; }
int sg_comm_size(const sg_comm *comm) { return comm ? comm->size : 0; }
int sg_comm_local_rank(const sg_comm *comm) { return comm ? comm->env.local_rank : -1; }

/* ---- point to point ------------------------------------------------------ */

static sg_status check_p2p(sg_comm *comm, int peer, uint32_t tag, const void *buf, size_t bytes,
                           const char *what) {
  SG_CHECK(sg__comm_begin(comm, what));
  if (peer < 0 || peer >= comm->size || peer == comm->rank)
    return sg__error(SG_ERR_INVALID_ARG, "%s: peer rank %d is not another rank of %d", what, peer,
                     comm->size);
  if (tag > 0x7fffffffu) return sg__error(SG_ERR_INVALID_ARG, "%s: tag %u above 2^31-1", what, tag);
  if (buf == NULL && bytes > 0) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  return SG_OK;
}

sg_status sg_comm_send(sg_comm *comm, int peer, uint32_t tag, const void *buf, size_t bytes) {
  SG_CHECK(check_p2p(comm, peer, tag, buf, bytes, "sg_comm_send"));
  sg__ucx_req *r;
  SG_CHECK(sg__ucx_isend(comm->ucx, peer, SG_TAG_USER, tag, buf, bytes, &r));
  return sg__comm_fail(comm, sg__ucx_wait(comm->ucx, &r, comm->deadline));
}

sg_status sg_comm_recv(sg_comm *comm, int peer, uint32_t tag, void *buf, size_t bytes) {
  SG_CHECK(check_p2p(comm, peer, tag, buf, bytes, "sg_comm_recv"));
  sg__ucx_req *r;
  SG_CHECK(sg__ucx_irecv(comm->ucx, peer, SG_TAG_USER, tag, buf, bytes, &r));
  sg_status st = sg__ucx_wait(comm->ucx, &r, comm->deadline);
  /* A wrong-length message was consumed whole; the stream is still in step. */
  return st == SG_ERR_TRUNCATED ? st : sg__comm_fail(comm, st);
}

/* ---- RMA windows ----------------------------------------------------------- */

struct sg_comm_window {
  sg_comm *comm;
  uint8_t *base;
  size_t bytes;
  sg__ucx_mem *mem;
  sg__ucx_rkey **rkeys; /* per peer; NULL for self */
  uint64_t *raddr;      /* per peer: remote base address */
  uint64_t *rbytes;     /* per peer: remote window size */
};

/* A window over [base, base+bytes), or, with alloc, over memory the transport allocates (*alloc gets it). */
static sg_status window_make(sg_comm *comm, void *base, size_t bytes, void **alloc, sg_comm_window **out) {
  sg_comm_window *w = sg__calloc(1, sizeof *w);
  int n = comm->size;
  sg_status st = SG_OK;
  void *key = NULL, *all = NULL;
  if (w == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_comm_window_create: out of memory");
  w->comm = comm;
  w->base = base;
  w->bytes = bytes;
  w->rkeys = sg__calloc((size_t)n, sizeof *w->rkeys);
  w->raddr = sg__calloc((size_t)n, sizeof *w->raddr);
  w->rbytes = sg__calloc((size_t)n, sizeof *w->rbytes);
  if (!w->rkeys || !w->raddr || !w->rbytes) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg_comm_window_create: out of memory");
    goto fail;
  }
  if (alloc != NULL) {
    SG_CHECK_GOTO(sg__ucx_mem_alloc(comm->ucx, bytes, &w->mem, &base), st, fail);
    w->base = *alloc = base;
  } else {
    SG_CHECK_GOTO(sg__ucx_mem_map(comm->ucx, base, bytes, &w->mem), st, fail);
  }
  size_t klen;
  SG_CHECK_GOTO(sg__ucx_rkey_pack(comm->ucx, w->mem, &key, &klen), st, fail);
  /* Exchange fixed-size records: address, size, key length, key. */
  enum { REC = 1024 };
  if (klen > REC - 24) {
    st = sg__error(SG_ERR_UNSUPPORTED, "rank %d: remote key of %zu bytes is too long", comm->rank, klen);
    goto fail;
  }
  uint8_t rec[REC] = {0};
  uint64_t hdr[3] = {(uint64_t)(uintptr_t)base, bytes, klen};
  memcpy(rec, hdr, sizeof hdr);
  memcpy(rec + 24, key, klen);
  all = sg__malloc((size_t)REC * (size_t)n);
  if (all == NULL) {
    st = sg__error(SG_ERR_NO_MEMORY, "sg_comm_window_create: out of memory");
    goto fail;
  }
  SG_CHECK_GOTO(sg_comm_allgather(comm, rec, all, REC / 4, SG_I32), st, fail);
  for (int p = 0; p < n; p++) {
    if (p == comm->rank) continue;
    const uint8_t *r = (const uint8_t *)all + (size_t)REC * (size_t)p;
    memcpy(hdr, r, sizeof hdr);
    /* Validate the peer's record before use (SPEC S1). */
    if (hdr[2] == 0 || hdr[2] > REC - 24 || hdr[1] == 0) {
      st = sg__error(SG_ERR_FORMAT,
                     "window record from peer rank %d is malformed (key %llu bytes, window %llu)", p,
                     (unsigned long long)hdr[2], (unsigned long long)hdr[1]);
      goto fail;
    }
    w->raddr[p] = hdr[0];
    w->rbytes[p] = hdr[1];
    SG_CHECK_GOTO(sg__ucx_rkey_unpack(comm->ucx, p, r + 24, (size_t)hdr[2], &w->rkeys[p]), st, fail);
  }
  sg__free(key);
  sg__free(all);
  *out = w;
  return SG_OK;
fail:
  sg__free(key);
  sg__free(all);
  if (w->rkeys)
    for (int p = 0; p < n; p++) sg__ucx_rkey_destroy(w->rkeys[p]);
  sg__ucx_mem_unmap(comm->ucx, w->mem);
  sg__free(w->rkeys);
  sg__free(w->raddr);
  sg__free(w->rbytes);
  sg__free(w);
  if (alloc != NULL) *alloc = NULL;
  return sg__comm_fail(comm, st);
}

sg_status sg_comm_window_create(sg_comm *comm, void *base, size_t bytes, sg_comm_window **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_window_create: NULL out");
  *out = NULL;
  SG_CHECK(sg__comm_begin_all(comm, "sg_comm_window_create"));
  if (base == NULL || bytes == 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_window_create: empty window on rank %d", comm->rank);
  return window_make(comm, base, bytes, NULL, out);
}

sg_status sg_comm_window_alloc(sg_comm *comm, size_t bytes, void **base, sg_comm_window **out) {
  if (out == NULL || base == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_window_alloc: NULL out or base");
  *out = NULL;
  *base = NULL;
  SG_CHECK(sg__comm_begin_all(comm, "sg_comm_window_alloc"));
  if (bytes == 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_window_alloc: empty window on rank %d", comm->rank);
  return window_make(comm, NULL, bytes, base, out);
}

sg_status sg_comm_window_destroy(sg_comm_window *w) {
  if (w == NULL) return SG_OK;
  sg_comm *comm = w->comm;
  sg_status st = SG_OK;
  if (comm->failed == SG_OK && !sg__comm_aborted(comm)) {
    comm->deadline = sg__now_ms() + comm->env.timeout_ms;
    sg__det_scope_all(comm->det, 1); /* collective */
    st = sg__comm_fail(comm, sg__ucx_flush(comm->ucx, comm->deadline));
    /* No peer may still be reading or writing our memory when it is unmapped. */
    if (st == SG_OK) st = sg_comm_barrier(comm);
  }
  for (int p = 0; p < comm->size; p++) sg__ucx_rkey_destroy(w->rkeys[p]);
  sg__ucx_mem_unmap(comm->ucx, w->mem);
  sg__free(w->rkeys);
  sg__free(w->raddr);
  sg__free(w->rbytes);
  sg__free(w);
  return st;
}

static sg_status check_rma(sg_comm_window *w, int peer, size_t offset, size_t bytes, const void *buf,
                           const char *what) {
  if (w == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL window", what);
  SG_CHECK(sg__comm_begin(w->comm, what));
  if (peer < 0 || peer >= w->comm->size)
    return sg__error(SG_ERR_INVALID_ARG, "%s: peer rank %d is not in a world of %d", what, peer,
                     w->comm->size);
  uint64_t limit = peer == w->comm->rank ? w->bytes : w->rbytes[peer];
  if (offset > limit || bytes > limit - offset)
    return sg__error(SG_ERR_RANGE, "%s: [%zu, +%zu) is outside peer rank %d's window of %llu bytes", what,
                     offset, bytes, peer, (unsigned long long)limit);
  if (buf == NULL && bytes > 0) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  return SG_OK;
}

sg_status sg_comm_put(sg_comm_window *w, int peer, size_t offset, const void *src, size_t bytes) {
  SG_CHECK(check_rma(w, peer, offset, bytes, src, "sg_comm_put"));
  if (bytes == 0) return SG_OK;
  if (peer == w->comm->rank) {
    memmove(w->base + offset, src, bytes);
    return SG_OK;
  }
  return sg__comm_fail(w->comm,
                       sg__ucx_put(w->comm->ucx, peer, src, bytes, w->raddr[peer] + offset, w->rkeys[peer]));
}

sg_status sg_comm_get(sg_comm_window *w, int peer, size_t offset, void *dst, size_t bytes) {
  SG_CHECK(check_rma(w, peer, offset, bytes, dst, "sg_comm_get"));
  if (bytes == 0) return SG_OK;
  if (peer == w->comm->rank) {
    memmove(dst, w->base + offset, bytes);
    return SG_OK;
  }
  return sg__comm_fail(w->comm,
                       sg__ucx_get(w->comm->ucx, peer, dst, bytes, w->raddr[peer] + offset, w->rkeys[peer]));
}

sg_status sg_comm_window_flush(sg_comm_window *w) {
  if (w == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_window_flush: NULL window");
  SG_CHECK(sg__comm_begin_all(w->comm, "sg_comm_window_flush")); /* may involve any peer */
  return sg__comm_fail(w->comm, sg__ucx_flush(w->comm->ucx, w->comm->deadline));
}

static sg_status atomic_op(sg_comm_window *w, int peer, size_t offset, int op, uint64_t value,
                           uint64_t compare, uint64_t *old, const char *what) {
  SG_CHECK(check_rma(w, peer, offset, 8, old ? (void *)old : (void *)w, what));
  if (offset % 8 != 0)
    return sg__error(SG_ERR_INVALID_ARG, "%s: offset %zu is not 8-byte aligned", what, offset);
  if (peer == w->comm->rank) {
    /* Our own word: no endpoint to ourselves, so the CPU's atomics. Mixing
     * them with remote UCX atomics on the same word is coherent here because
     * UCX's shared-memory and TCP transports perform atomics on the CPU. */
    uint64_t *word = (uint64_t *)(void *)(w->base + offset);
    uint64_t prev;
    if (op == 0) {
      prev = __atomic_fetch_add(word, value, __ATOMIC_SEQ_CST);
    } else {
      prev = compare;
      __atomic_compare_exchange_n(word, &prev, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    if (old) *old = prev;
    return SG_OK;
  }
  return sg__comm_fail(w->comm, sg__ucx_atomic(w->comm->ucx, peer, op, value, compare, old,
                                               w->raddr[peer] + offset, w->rkeys[peer], w->comm->deadline));
}

sg_status sg_comm_fetch_add(sg_comm_window *w, int peer, size_t offset, uint64_t value, uint64_t *old) {
  return atomic_op(w, peer, offset, 0, value, 0, old, "sg_comm_fetch_add");
}

sg_status sg_comm_compare_swap(sg_comm_window *w, int peer, size_t offset, uint64_t compare, uint64_t swap,
                               uint64_t *old) {
  return atomic_op(w, peer, offset, 1, swap, compare, old, "sg_comm_compare_swap");
}

/* ---- active messages --------------------------------------------------------- */

sg_status sg_comm_am_send(sg_comm *comm, int peer, unsigned id, const void *buf, size_t bytes) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_am_send"));
  if (peer < 0 || peer >= comm->size || peer == comm->rank || (buf == NULL && bytes > 0))
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_am_send: bad peer rank %d or buffer", peer);
  return sg__comm_fail(comm, sg__ucx_am_send(comm->ucx, peer, id, buf, bytes, comm->deadline));
}

sg_status sg_comm_am_recv(sg_comm *comm, unsigned id, void *buf, size_t *bytes, int *peer, int timeout_ms) {
  SG_CHECK(sg__comm_begin(comm, "sg_comm_am_recv"));
  if (id >= SG_AM_QUEUES || bytes == NULL || peer == NULL || (buf == NULL && *bytes > 0) || timeout_ms < 0)
    return sg__error(SG_ERR_INVALID_ARG, "sg_comm_am_recv: bad queue %u or arguments", id);
  int64_t deadline = sg__now_ms() + timeout_ms;
  for (;;) {
    /* Any peer may send: no peer's silence fails this wait (sg_comm_poll
     * tells), but heartbeats go out and an abort ends it. */
    SG_CHECK(sg__comm_fail(comm, sg__ucx_poll(comm->ucx, SG_UCX_NOBODY)));
    sg_status st = sg__ucx_am_take(comm->ucx, id, buf, bytes, peer);
    if (st != SG_ERR_NOT_FOUND) return st;
    if (sg__now_ms() >= deadline)
      return sg__error(SG_ERR_TIMEOUT, "rank %d: no control message on queue %u within %d ms", comm->rank, id,
                       timeout_ms);
    sched_yield();
  }
}

/* A pipeline's transfers wait this way: a rank waiting on a healthy
 * neighbour must fail at once when a rank further down dies (whose death its
 * peers report to everybody), not when the failure has travelled stage by
 * stage (comm.h). */
sg_status sg__comm_p2p_all(sg_comm *c, bool send, int peer, uint32_t tag, void *buf, size_t bytes) {
  const char *what = send ? "sg_comm_send" : "sg_comm_recv";
  SG_CHECK(sg__comm_begin_all(c, what));
  if (peer < 0 || peer >= c->size || peer == c->rank)
    return sg__error(SG_ERR_INVALID_ARG, "%s: peer rank %d is not another rank of %d", what, peer, c->size);
  if (tag > 0x7fffffffu) return sg__error(SG_ERR_INVALID_ARG, "%s: tag %u above 2^31-1", what, tag);
  if (buf == NULL && bytes > 0) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL buffer", what);
  sg__ucx_req *r;
  if (send) SG_CHECK(sg__ucx_isend(c->ucx, peer, SG_TAG_USER, tag, buf, bytes, &r));
  else SG_CHECK(sg__ucx_irecv(c->ucx, peer, SG_TAG_USER, tag, buf, bytes, &r));
  sg_status st = sg__ucx_wait(c->ucx, &r, c->deadline);
  /* A wrong-length message was consumed whole: the stream is still in step. */
  return st == SG_ERR_TRUNCATED ? st : sg__comm_fail(c, st);
}
