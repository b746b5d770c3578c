/* store_attack_tool WORKER [ARGS...]: run as every rank of a job under `sgrt
 * launch`. Ranks other than 0 become WORKER at once (exec). Rank 0 starts
 * WORKER as its child and, for as long as it runs, attacks the job's
 * rendezvous store (MASTER_ADDR must be 127.0.0.1, MASTER_PORT) with every
 * hostile client of store_attacks.c at once, round after round: a slow drip,
 * 100 idle connections, oversized and wrong-token HELLOs, a request without
 * HELLO, half-open and reset connections. It then reports what the store did
 * and exits with WORKER's status (128+N for a signal N); SIGINT and SIGTERM
 * go on to WORKER. run_store_attack.sh uses it. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_attacks.h"

static _Atomic int stop; /* set by main once WORKER exited; read by the attackers */
static pid_t child;
static int port;

/* What the store did, per kind of attack. */
static long drips, drips_cut, idle_closed, refused, dropped, wrong_replies, half_open_closed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig) {
  if (child > 0) kill(child, sig);
}

static void *drip_main(void *arg) {
  (void)arg;
  while (!stop) {
    int64_t t = attack_drip(port, 1500, 30000);
    pthread_mutex_lock(&mu);
    drips++;
    drips_cut += t >= 0;
    pthread_mutex_unlock(&mu);
    if (t < 0) usleep(100000); /* refused outright: try again */
  }
  return NULL;
}

static void *idle_main(void *arg) {
  (void)arg;
  while (!stop) {
    int n = attack_idle(port, 100, 3000);
    pthread_mutex_lock(&mu);
    idle_closed += n > 0 ? n : 0;
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

/* Whether the store no longer takes connections: the job ended (rank 0
 * exits) while an attack was under way, so its missing reply says nothing
 * of the store. */
static bool store_gone(void) {
  int fd = attack_connect(port);
  if (fd < 0) return true;
  close(fd);
  return false;
}

static void *misc_main(void *arg) {
  (void)arg;
  while (!stop) {
    int r[4] = {attack_oversize(port), attack_wrong_token(port, 32), attack_wrong_token(port, 5),
                attack_no_hello(port)};
    int h = attack_half_open(port, 3000);
    bool gone = false;
    for (int i = 0; i < 4 && !gone; i++) gone = r[i] < 0 && store_gone();
    if (gone) break;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 4; i++) {
      refused += r[i] == 2 || r[i] == 3;
      dropped += r[i] == ATTACK_DROPPED;
      wrong_replies += r[i] != 2 && r[i] != 3 && r[i] != ATTACK_DROPPED;
    }
    half_open_closed += h == 0;
    pthread_mutex_unlock(&mu);
    usleep(20000);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: store_attack_tool WORKER [ARGS...]\n");
    return 2;
  }
  const char *rank = getenv("SG_RANK"), *p = getenv("MASTER_PORT"), *addr = getenv("MASTER_ADDR");
  if (rank == NULL || strcmp(rank, "0") != 0) {
    execvp(argv[1], argv + 1);
    perror("store_attack_tool: exec");
    return 127;
  }
  if (p == NULL || (port = atoi(p)) <= 0 || addr == NULL || strcmp(addr, "127.0.0.1") != 0) {
    fprintf(stderr,
            "store_attack_tool: needs MASTER_ADDR=127.0.0.1 and MASTER_PORT (run under sgrt launch)\n");
    return 2;
  }
  child = fork();
  if (child < 0) {
    perror("store_attack_tool: fork");
    return 1;
  }
  if (child == 0) {
    execvp(argv[1], argv + 1);
    perror("store_attack_tool: exec");
    _exit(127);
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  pthread_t t[3];
  pthread_create(&t[0], NULL, drip_main, NULL);
  pthread_create(&t[1], NULL, idle_main, NULL);
  pthread_create(&t[2], NULL, misc_main, NULL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  /* run_store_attack.sh reads the numbers in this order. */
  printf("store_attack: %ld drips, %ld cut off by the store; %ld idle connections closed; %ld hostile frames "
         "refused, %ld answered otherwise; %ld half-open connections closed; %ld frames dropped unanswered "
         "under the flood\n",
         drips, drips_cut, idle_closed, refused, wrong_replies, half_open_closed, dropped);
  fflush(stdout);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
