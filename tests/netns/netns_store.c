/* The rendezvous store of a multi-namespace job (tests/netns/netns_heal.sh):
 * what `sgrt launch` does for local ranks, in a namespace of its own, so
 * that the store outlives any rank and stays reachable while one rank's
 * link is down. Serves SG_STORE_ADDR:MASTER_PORT with SG_JOB_TOKEN until
 * SIGTERM/SIGINT, or at most STORE_LIMIT_S seconds (no process without a bound). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sgrt/sgrt.h"

#define STORE_LIMIT_S 120

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

int main(void) {
  const char *addr = getenv("SG_STORE_ADDR"), *port = getenv("MASTER_PORT"), *token = getenv("SG_JOB_TOKEN");
  if (addr == NULL || port == NULL) {
    fprintf(stderr, "netns_store: set SG_STORE_ADDR and MASTER_PORT\n");
    return 2;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  sg_comm_store_server *srv;
  if (sg_comm_store_serve(addr, atoi(port), token, &srv) != SG_OK) {
    fprintf(stderr, "netns_store: %s\n", sg_last_error());
    return 1;
  }
  printf("netns_store: serving %s:%s\n", addr, port);
  fflush(stdout);
  for (int i = 0; i < STORE_LIMIT_S * 10 && !stop; i++) usleep(100000);
  sg_comm_store_stop(srv);
  return 0;
}
