/* Peer processes (SPEC H3): who a rank's process is, and a watch that learns
 * at once when a peer's process exits.
 *
 * Every rank publishes its identity next to its transport address: its pid,
 * its pid namespace and the kernel's boot id. A peer with the same boot id
 * and pid namespace runs under the same kernel and can be watched through a
 * pidfd (pidfd_open, Linux 5.3): the kernel makes it readable the moment the
 * process terminates, whoever started it (sgrt launch, torchrun, srun,
 * mpirun) and however it died (SIGKILL, the OOM killer, a crash). That turns
 * a killed local peer into an immediate UNREACHABLE instead of dead_ms of
 * silence. Peers on other hosts cannot be watched so; their endpoints get
 * UCX's peer-error handling instead (ucx.c), which costs nothing there: the
 * shared-memory transports it excludes do not reach another host anyway.
 *
 * The watch is an epoll set of the peers' pidfds, polled without blocking
 * from the transport's wait loops (at most every POLL_EVERY_MS). A pidfd
 * refers to the process it was opened for, so a pid reused later is never
 * mistaken for the peer. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "comm/comm_internal.h"

#define IDENT_MAGIC 0x49504753u /* "SGPI", little endian */
#define IDENT_VERSION 1u
#define POLL_EVERY_MS 2

/* ---- identity ------------------------------------------------------------------ */

void sg__proc_ident_self(sg__proc_ident *out) {
  memset(out, 0, sizeof *out);
  out->pid = (uint32_t)getpid();
  struct stat sb;
  if (stat("/proc/self/ns/pid", &sb) == 0) out->pid_ns = (uint64_t)sb.st_ino;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f != NULL) {
    char line[64];
    if (fgets(line, sizeof line, f) != NULL && strlen(line) >= SG__BOOT_ID_LEN) {
      memcpy(out->boot_id, line, SG__BOOT_ID_LEN);
      out->boot_id[SG__BOOT_ID_LEN] = '\0';
    }
    fclose(f);
  }
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* magic, version, pid (u32 each), pid namespace (u64), boot id (36 bytes;
 * zeros when unknown), 4 bytes of zeros: SG__PROC_IDENT_BYTES. */
void sg__proc_ident_encode(const sg__proc_ident *id, uint8_t out[SG__PROC_IDENT_BYTES]) {
  memset(out, 0, SG__PROC_IDENT_BYTES);
  put32(out, IDENT_MAGIC);
  put32(out + 4, IDENT_VERSION);
  put32(out + 8, id->pid);
  put32(out + 12, (uint32_t)id->pid_ns);
  put32(out + 16, (uint32_t)(id->pid_ns >> 32));
  memcpy(out + 20, id->boot_id, SG__BOOT_ID_LEN);
}

static bool boot_id_valid(const char *s) {
  if (s[0] == '\0') return true; /* unknown */
  for (int i = 0; i < SG__BOOT_ID_LEN; i++) {
    char c = s[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

sg_status sg__proc_ident_decode(const void *buf, size_t len, int rank, sg__proc_ident *out) {
  const uint8_t *p = buf;
  memset(out, 0, sizeof *out);
  if (len < SG__PROC_IDENT_BYTES)
    return sg__error(SG_ERR_TRUNCATED, "rank %d's process identity is %zu bytes, needs %d", rank, len,
                     SG__PROC_IDENT_BYTES);
  if (get32(p) != IDENT_MAGIC || get32(p + 4) != IDENT_VERSION)
    return sg__error(SG_ERR_FORMAT,
                     "rank %d's process identity has magic %08x version %u (expected %08x version %u): "
                     "a different sgrt build joined the job?",
                     rank, get32(p), get32(p + 4), IDENT_MAGIC, IDENT_VERSION);
  out->pid = get32(p + 8);
  out->pid_ns = (uint64_t)get32(p + 12) | (uint64_t)get32(p + 16) << 32;
  memcpy(out->boot_id, p + 20, SG__BOOT_ID_LEN);
  out->boot_id[SG__BOOT_ID_LEN] = '\0';
  if (out->pid == 0 || out->pid > 0x3fffffffu || !boot_id_valid(out->boot_id) || get32(p + 56) != 0)
    return sg__error(SG_ERR_FORMAT, "rank %d's process identity is malformed (pid %u)", rank, out->pid);
  return SG_OK;
}

bool sg__proc_same_kernel(const sg__proc_ident *a, const sg__proc_ident *b) {
  return a->boot_id[0] != '\0' && a->pid_ns != 0 && strcmp(a->boot_id, b->boot_id) == 0 &&
         a->pid_ns == b->pid_ns;
}

/* ---- the watch ------------------------------------------------------------------- */

struct sg__proc_watch {
  int size;
  int ep;                /* epoll set of the pidfds; -1 when the kernel has no epoll (never on Linux) */
  int *fd;               /* per peer: its pidfd, or -1 */
  uint8_t *gone;         /* per peer: its exit was reported (atomic: read by sg__proc_watch_last_running) */
  int64_t *last_running; /* per peer: when it was last seen running, once gone */
  int64_t running_at;    /* the last look (atomic): every watched peer not gone was running then */
  int64_t next_poll;
};

sg_status sg__proc_watch_create(int size, sg__proc_watch **out) {
  *out = NULL;
  sg__proc_watch *w = sg__calloc(1, sizeof *w);
  if (w == NULL) return sg__error(SG_ERR_NO_MEMORY, "process watch: out of memory");
  w->size = size;
  w->ep = -1;
  w->fd = sg__calloc((size_t)size, sizeof *w->fd);
  w->gone = sg__calloc((size_t)size, 1);
  w->last_running = sg__calloc((size_t)size, sizeof *w->last_running);
  if (w->fd == NULL || w->gone == NULL || w->last_running == NULL) {
    sg__proc_watch_destroy(w);
    return sg__error(SG_ERR_NO_MEMORY, "process watch: out of memory");
  }
  for (int i = 0; i < size; i++) w->fd[i] = -1;
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  if (w->ep < 0) {
    sg__proc_watch_destroy(w);
    return sg__error(SG_ERR_NO_MEMORY, "process watch: epoll_create1: %s", strerror(errno));
  }
  *out = w;
  return SG_OK;
}

void sg__proc_watch_destroy(sg__proc_watch *w) {
  if (w == NULL) return;
  if (w->fd)
    for (int i = 0; i < w->size; i++)
      if (w->fd[i] >= 0) close(w->fd[i]);
  if (w->ep >= 0) close(w->ep);
  sg__free(w->fd);
  sg__free(w->gone);
  sg__free(w->last_running);
  sg__free(w);
}

bool sg__proc_watch_add(sg__proc_watch *w, int peer, uint32_t pid) {
  if (peer < 0 || peer >= w->size || w->fd[peer] >= 0 || pid == (uint32_t)getpid()) return false;
#ifdef SYS_pidfd_open
  int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (fd < 0) {
    /* It published its identity, so it existed: gone already. Any other
     * error (no pidfd in this kernel, a seccomp filter) leaves the peer to
     * the heartbeats. */
    if (errno != ESRCH) return false;
    w->last_running[peer] = 0;                             /* never seen running */
    __atomic_store_n(&w->gone[peer], 2, __ATOMIC_RELEASE); /* reported at the next poll */
    return true;
  }
  (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)peer};
  if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
    close(fd);
    return false;
  }
  w->fd[peer] = fd;
  return true;
#else
  (void)pid;
  return false;
#endif
}

void sg__proc_watch_poll(sg__proc_watch *w, int64_t now, sg__proc_exited_fn exited, void *ctx) {
  if (now < w->next_poll) return;
  w->next_poll = now + POLL_EVERY_MS;
  for (int p = 0; p < w->size; p++)
    if (w->gone[p] == 2) {
      __atomic_store_n(&w->gone[p], 1, __ATOMIC_RELEASE);
      exited(ctx, p);
    }
  struct epoll_event ev[16];
  int n = epoll_wait(w->ep, ev, 16, 0);
  int64_t before = __atomic_load_n(&w->running_at, __ATOMIC_RELAXED);
  for (int i = 0; i < n; i++) {
    int p = (int)ev[i].data.u32;
    if (p < 0 || p >= w->size || w->fd[p] < 0 || w->gone[p]) continue;
    /* Reported once: the pidfd stays readable, so it leaves the set. It
     * exited after the previous look, which saw it running. */
    (void)epoll_ctl(w->ep, EPOLL_CTL_DEL, w->fd[p], NULL);
    w->last_running[p] = before;
    __atomic_store_n(&w->gone[p], 1, __ATOMIC_RELEASE);
    exited(ctx, p);
  }
  if (n >= 0) __atomic_store_n(&w->running_at, now, __ATOMIC_RELAXED);
}

int64_t sg__proc_watch_last_running(const sg__proc_watch *w, int peer) {
  if (peer < 0 || peer >= w->size) return -1;
  if (__atomic_load_n(&w->gone[peer], __ATOMIC_ACQUIRE) != 0) return w->last_running[peer];
  if (w->fd[peer] < 0) return -1;
  /* Not seen gone by the owner yet: ask the kernel directly (poll(2) on one
   * pidfd changes nothing the owner's looks depend on). */
  int64_t before = __atomic_load_n(&w->running_at, __ATOMIC_RELAXED);
  struct pollfd pf = {.fd = w->fd[peer], .events = POLLIN};
  return poll(&pf, 1, 0) == 1 && (pf.revents & POLLIN) ? before : -1;
}

int sg__proc_watch_count(const sg__proc_watch *w) {
  int n = 0;
  for (int i = 0; i < w->size; i++) n += w->fd[i] >= 0 || w->gone[i] != 0;
  return n;
}
