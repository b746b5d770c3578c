/* Hostile clients of the rendezvous store (store_attacks.h). They speak the
 * frame format of src/comm/store_frame.h byte by byte, as a stranger on the
 * machine would, without the job token. */
#include "store_attacks.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A request header: magic 'SGST', op, key and value lengths (big-endian). */
static void header(uint8_t h[16], int op, uint32_t klen, uint32_t vlen) {
  memset(h, 0, 16);
  memcpy(h, "SGST", 4);
  h[4] = (uint8_t)op;
  for (int i = 0; i < 4; i++) {
    h[8 + i] = (uint8_t)(klen >> (24 - 8 * i));
    h[12 + i] = (uint8_t)(vlen >> (24 - 8 * i));
  }
}

int attack_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int64_t attack_wait_closed(int fd, int limit_ms, int *reply_status) {
  int64_t t0 = now_ms();
  uint8_t buf[64];
  size_t got = 0;
  if (reply_status) *reply_status = -1;
  for (;;) {
    int64_t left = limit_ms - (now_ms() - t0);
    if (left <= 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    int n = poll(&p, 1, (int)left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return now_ms() - t0; /* EOF or reset */
    for (ssize_t i = 0; i < r; i++, got++)
      if (got == 4 && reply_status) *reply_status = buf[i];
  }
}

int64_t attack_drip(int port, int interval_ms, int limit_ms) {
  int fd = attack_connect(port);
  if (fd < 0) return -1;
  /* A well-formed HELLO with a 32-byte token (sgrt launch's length), so
   * that only the server's deadline can end it. */
  uint8_t f[16 + 32];
  header(f, 1 /* HELLO */, 0, 32);
  memset(f + 16, 'z', 32);
  int64_t t0 = now_ms(), closed = -1;
  if (send(fd, f, 15, MSG_NOSIGNAL) == 15) {
    for (size_t next = 15; now_ms() - t0 < limit_ms; next++) {
      /* The server may have closed the connection meanwhile. */
      int64_t w = attack_wait_closed(fd, interval_ms, NULL);
      if (w >= 0 || next == sizeof f || send(fd, f + next, 1, MSG_NOSIGNAL) != 1) {
        if (w >= 0 || next < sizeof f) closed = now_ms() - t0;
        break;
      }
    }
  }
  close(fd);
  return closed;
}

int attack_idle(int port, int n, int hold_ms) {
  int *fds = calloc((size_t)n, sizeof *fds);
  if (fds == NULL) return -1;
  for (int i = 0; i < n; i++) fds[i] = attack_connect(port);
  int closed = 0;
  int64_t t0 = now_ms();
  for (int i = 0; i < n; i++) {
    if (fds[i] < 0) {
      closed++; /* refused outright also counts as not kept */
      continue;
    }
    int64_t left = hold_ms - (now_ms() - t0);
    if (attack_wait_closed(fds[i], left > 0 ? (int)left : 1, NULL) >= 0) closed++;
    close(fds[i]);
  }
  free(fds);
  return closed;
}

/* Sends a frame and returns the reply status the server sent before it
 * closed the connection (within 3 s); ATTACK_DROPPED when it closed it
 * without a reply (or the connection could not be made); -1 when it kept
 * the connection open. */
static int one_frame(int port, const uint8_t *frame, size_t len) {
  int fd = attack_connect(port);
  if (fd < 0) return ATTACK_DROPPED;
  int status = -1;
  bool sent = send(fd, frame, len, MSG_NOSIGNAL) == (ssize_t)len;
  int64_t closed = attack_wait_closed(fd, 3000, &status);
  close(fd);
  if (closed < 0) return -1; /* the server kept it: a failure of the server */
  return sent && status >= 0 ? status : ATTACK_DROPPED;
}

int attack_oversize(int port) {
  uint8_t h[16];
  header(h, 1, 0, 0x80000000u);
  return one_frame(port, h, sizeof h);
}

int attack_wrong_token(int port, int token_len) {
  uint8_t f[16 + 256];
  if (token_len < 1 || token_len > 256) return -1;
  header(f, 1, 0, (uint32_t)token_len);
  memset(f + 16, 'z', (size_t)token_len);
  return one_frame(port, f, 16 + (size_t)token_len);
}

int attack_no_hello(int port) {
  uint8_t f[16 + 8];
  header(f, 2 /* SET */, 4, 4);
  memcpy(f + 16, "evilbad!", 8);
  return one_frame(port, f, sizeof f);
}

int attack_half_open(int port, int limit_ms) {
  uint8_t h[16];
  header(h, 1, 0, 32);
  int fd = attack_connect(port);
  if (fd < 0) return -1;
  int rc = -1;
  if (send(fd, h, 8, MSG_NOSIGNAL) == 8) {
    shutdown(fd, SHUT_WR);
    if (attack_wait_closed(fd, limit_ms, NULL) >= 0) rc = 0;
  }
  close(fd);
  /* A reset in the middle of a frame. */
  fd = attack_connect(port);
  if (fd >= 0) {
    if (send(fd, h, 10, MSG_NOSIGNAL) != 10) rc = -1;
    sleep_ms(5);
    struct linger l = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
  }
  return rc;
}
