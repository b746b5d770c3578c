/* sgrt launch: starts N local ranks with the bootstrap environment (SPEC M7:
 * sgrt's SG_* variables and torchrun's), hosts the job's rendezvous store
 * itself (so it outlives any rank: the survivors of a failure agree on a new
 * membership through it, docs/resilience.md), passes their output through
 * line by line (prefixed with the rank with --label, as srun --label), forwards
 * SIGINT/SIGTERM, and either stops the others when one fails and returns the
 * first failure's exit status, or (--heal, --inject) lets the others go on;
 * --restart-failed restarts a failed rank (with --heal as a joiner of the
 * running job, SG_REJOIN=1). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Used by cmd_bench.c as well. */
int cli_launch_ranks(int n, int restarts, int prefix, char **argv);

#define MAX_RANKS 256
#define MAX_RESTARTS 1000000 /* --restart-failed K: 0..MAX_RESTARTS */
#define MAX_NODES 4096
#define MAX_WORLD 4096 /* the library's largest world (comm/env.c) */

typedef struct stream {
  int fd;
  FILE *out;
  char buf[4096];
  size_t len;
} stream;

typedef struct rank_proc {
  pid_t pid;
  int restarts;
  int done;
  int stopped, killed; /* --heal: stopped by a signal (a hang); killed by us at the end */
  int status;          /* exit code, 128+signal for a signal */
  stream s[2];
} rank_proc;

/* Options beyond cli_launch_ranks()'s arguments (set by run_launch). */
static int opt_heal;
static const char *opt_inject;
/* Several nodes, as torchrun's --nnodes/--node-rank/--master-addr/--master-port: this launcher starts
 * the ranks node_rank * n .. node_rank * n + n - 1 of nnodes * n; node 0's hosts the store on
 * master_addr:master_port. One node (the default): the store on loopback, a port the kernel picks. */
static int opt_nnodes = 1, opt_node_rank;
static const char *opt_master_addr;
static int opt_master_port;

static int label_base; /* this node's first global rank: opt_node_rank * ranks per node */
/* The libsgrt this launcher runs on ("" when linked statically), found before any fork: the child
 * only copies it into its environment. */
static char own_library[4096];

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static int make_token(char *out, size_t cap) {
  unsigned char b[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < cap; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

static void emit(stream *s, int rank, int prefix, const char *line, size_t n) {
  if (prefix) fprintf(s->out, "[%d] ", label_base + rank); /* the global rank */
  fwrite(line, 1, n, s->out);
  fputc('\n', s->out);
}

/* Reads what is there; false at EOF. */
static int drain(stream *s, int rank, int prefix) {
  ssize_t r = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
  if (r <= 0) {
    if (s->len) emit(s, rank, prefix, s->buf, s->len);
    s->len = 0;
    close(s->fd);
    s->fd = -1;
    return 0;
  }
  s->len += (size_t)r;
  size_t start = 0;
  for (size_t i = 0; i < s->len; i++)
    if (s->buf[i] == '\n') {
      emit(s, rank, prefix, s->buf + start, i - start);
      start = i + 1;
    }
  if (start == 0 && s->len == sizeof s->buf) { /* a line longer than the buffer: pass it on in pieces */
    emit(s, rank, prefix, s->buf, s->len);
    start = s->len;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
  fflush(s->out);
  return 1;
}

/* rejoin: a restarted rank of a healing job (SG_REJOIN=1: it asks the running
 * ranks to admit it, docs/resilience.md "Rejoin"). */
static int spawn(rank_proc *p, int rank, int n, const char *port, const char *token, char **argv,
                 int rejoin) {
  int out[2], err[2];
  if (pipe(out) != 0) return -1;
  if (pipe(err) != 0) {
    close(out[0]);
    close(out[1]);
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    /* sgrt's variables and torchrun's (programs written for it read these). */
    char v[32];
    snprintf(v, sizeof v, "%d", opt_node_rank * n + rank);
    setenv("SG_RANK", v, 1);
    setenv("RANK", v, 1);
    snprintf(v, sizeof v, "%d", rank);
    setenv("SG_LOCAL_RANK", v, 1);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", opt_node_rank);
    setenv("GROUP_RANK", v, 1);
    snprintf(v, sizeof v, "%d", opt_nnodes * n);
    setenv("SG_WORLD_SIZE", v, 1);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", n);
    setenv("LOCAL_WORLD_SIZE", v, 1);
    setenv("MASTER_ADDR", opt_master_addr ? opt_master_addr : "127.0.0.1", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("SG_JOB_TOKEN", token, 1);
    setenv("SG_STORE_EXTERNAL", "1", 1); /* this launcher hosts the store */
    if (opt_inject != NULL) setenv("SG_INJECT", opt_inject, 1);
    /* Python ranks load the library this launcher runs on (python/sgrt/_lib.py), unless told otherwise. */
    if (own_library[0] != '\0' && getenv("SGRT_LIBRARY") == NULL) setenv("SGRT_LIBRARY", own_library, 1);
    if (rejoin) setenv("SG_REJOIN", "1", 1);
    else unsetenv("SG_REJOIN"); /* the first incarnations start the job */
    /* A healing job destroys communicators whose peers died mid-transfer,
     * and UCX then warns about every request it still held for them; those
     * lines say nothing the recovery messages do not. The user's own
     * UCX_LOG_LEVEL wins. */
    if (opt_heal) setenv("UCX_LOG_LEVEL", "error", 0);
    execvp(argv[0], argv);
    fprintf(stderr, "sgrt launch: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  p->pid = pid;
  p->done = 0;
  p->s[0] = (stream){.fd = out[0], .out = stdout};
  p->s[1] = (stream){.fd = err[0], .out = stderr};
  return 0;
}

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --heal: success when at least one rank finished with 0 and every other
 * rank either died of a signal (killed, or stopped and killed at the end) or
 * was excluded by a recovery (SG_DIST_EXIT_EXCLUDED); otherwise the first
 * other status. Majorities are the runtime's business: it lets a
 * membership go on only as a strict majority of the one before it, and a
 * rank that finds itself in a minority stops with an error (not a signal),
 * so ranks that finish with 0 are the last membership, however many were
 * lost on the way (two of four, lost one after the other, is a majority of
 * the three that were left after the first). The last line says so. */
static int heal_result(const rank_proc *procs, int n) {
  int ok = 0, bad = 0, died = 0, excluded = 0;
  char lost[256] = "";
  size_t at = 0;
  for (int r = 0; r < n; r++) {
    int st = procs[r].status;
    if (st == 0) {
      ok++;
      continue;
    }
    if (st == SG_DIST_EXIT_EXCLUDED) excluded++;
    else if (st >= 128) died++;
    else if (!bad) bad = st;
    if (at < sizeof lost - 16) at += (size_t)snprintf(lost + at, sizeof lost - at, "%s%d", at ? ", " : "", r);
  }
  if (bad || ok == 0) {
    fprintf(stderr, "sgrt launch: %d of %d ranks finished the job\n", ok, n);
    return bad ? bad : CLI_EXIT_FAIL;
  }
  if (ok == n) fprintf(stderr, "sgrt launch: %d of %d ranks finished the job\n", ok, n);
  else
    fprintf(stderr,
            "sgrt launch: the job finished on %d of %d ranks: rank%s %s lost (%d died, %d excluded) and "
            "healed around\n",
            ok, n, n - ok == 1 ? "" : "s", lost, died, excluded);
  return 0;
}

/* --heal --restart-failed K: a rank that died (any status but 0 and
 * SG_DIST_EXIT_EXCLUDED, or a signal) is started again, at most K times,
 * with SG_REJOIN=1: it joins the running ranks at their next step boundary
 * and receives their state. Not once the job is ending (`ending`: stopping,
 * a rank finished, or no rank left to join). True when it was restarted. */
static int heal_restart(rank_proc *procs, int r, int n, int restarts, int ending, int prefix,
                        const char *port, const char *token, char **argv) {
  rank_proc *p = &procs[r];
  if (p->status == 0 || p->status == SG_DIST_EXIT_EXCLUDED || p->killed || ending || p->restarts >= restarts)
    return 0;
  p->restarts++;
  fprintf(stderr, "sgrt launch: restarting rank %d (%d of %d) to rejoin the job\n", r, p->restarts, restarts);
  for (int k = 0; k < 2; k++)
    while (p->s[k].fd >= 0) drain(&p->s[k], r, prefix);
  if (spawn(p, r, n, port, token, argv, 1) != 0) {
    fprintf(stderr, "sgrt launch: cannot restart rank %d: %s\n", r, strerror(errno));
    return 0;
  }
  p->stopped = 0;
  return 1;
}

int cli_launch_ranks(int n, int restarts, int prefix, char **argv) {
  static rank_proc procs[MAX_RANKS];
  char token[256], port[16];
  label_base = opt_node_rank * n;
  Dl_info lib;
  if (dladdr((void *)sg_version, &lib) != 0 && lib.dli_fname != NULL &&
      strstr(lib.dli_fname, "libsgrt.so") != NULL)
    snprintf(own_library, sizeof own_library, "%s", lib.dli_fname);
  /* Several nodes share the token the user gives them all (SG_JOB_TOKEN, checked by run_launch); one
   * node makes its own, new for each job. */
  const char *given = getenv("SG_JOB_TOKEN");
  if (opt_nnodes > 1) {
    snprintf(token, sizeof token, "%s", given ? given : "");
  } else if (make_token(token, sizeof token) != 0) {
    cli_error("launch: cannot make a job token: %s", strerror(errno));
    return CLI_EXIT_FAIL;
  }
  /* Node 0 hosts the store (the others' ranks reach it at master_addr:master_port). Port 0: the
   * kernel picks a free one as the store binds it, so two launchers starting at once on one host
   * cannot both choose the same. */
  const char *addr = opt_master_addr ? opt_master_addr : "127.0.0.1";
  sg_comm_store_server *store = NULL;
  if (opt_node_rank == 0) {
    if (sg_comm_store_serve(addr, opt_master_port, token, &store) != SG_OK) {
      cli_error("launch: cannot host the rendezvous store on %s:%d: %s", addr, opt_master_port,
                sg_last_error());
      return CLI_EXIT_FAIL;
    }
    snprintf(port, sizeof port, "%d", sg_comm_store_server_port(store));
  } else {
    snprintf(port, sizeof port, "%d", opt_master_port);
  }
  struct sigaction sa = {0}, old_int, old_term;
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  got_signal = 0;
  int first_fail = 0, stopping = 0, running = 0, finished_ok = 0;
  int64_t kill_at = 0;
  for (int r = 0; r < n; r++) {
    memset(&procs[r], 0, sizeof procs[r]);
    procs[r].s[0].fd = procs[r].s[1].fd = -1;
    if (spawn(&procs[r], r, n, port, token, argv, 0) != 0) {
      cli_error("launch: cannot start rank %d: %s", r, strerror(errno));
      first_fail = CLI_EXIT_FAIL;
      stopping = 1;
      break;
    }
    running++;
  }
  if (stopping)
    for (int r = 0; r < n; r++)
      if (procs[r].pid > 0) kill(procs[r].pid, SIGTERM);
  int forwarded = 0;
  for (;;) {
    if (got_signal && !forwarded) {
      for (int r = 0; r < n; r++)
        if (procs[r].pid > 0 && !procs[r].done) kill(procs[r].pid, got_signal);
      forwarded = 1;
      stopping = 1;
      if (!first_fail) first_fail = 128 + got_signal;
      kill_at = now_ms() + 5000;
    }
    struct pollfd fds[2 * MAX_RANKS];
    int who[2 * MAX_RANKS], nf = 0;
    for (int r = 0; r < n; r++)
      for (int k = 0; k < 2; k++)
        if (procs[r].s[k].fd >= 0) {
          fds[nf] = (struct pollfd){procs[r].s[k].fd, POLLIN, 0};
          who[nf++] = r * 2 + k;
        }
    if (nf > 0 && poll(fds, (nfds_t)nf, 50) > 0) {
      for (int i = 0; i < nf; i++)
        if (fds[i].revents) drain(&procs[who[i] / 2].s[who[i] % 2], who[i] / 2, prefix);
    } else if (nf == 0) {
      usleep(20000);
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
      for (int r = 0; r < n; r++) {
        if (procs[r].pid != pid || procs[r].done) continue;
        if (WIFCONTINUED(status)) { /* running again: it will exit by itself */
          procs[r].stopped = 0;
          continue;
        }
        if (WIFSTOPPED(status)) { /* a hung rank: the others go on; it is killed at the end */
          if (!procs[r].stopped)
            fprintf(stderr, "sgrt launch: rank %d stopped (signal %d)\n", r, WSTOPSIG(status));
          procs[r].stopped = 1;
          continue;
        }
        procs[r].done = 1;
        if (opt_heal) {
          running--;
          procs[r].status = exit_code(status);
          fprintf(stderr, "sgrt launch: rank %d exited with status %d%s\n", r, procs[r].status,
                  procs[r].status == 75 ? " (excluded from the job)" : "");
          if (procs[r].status == 0) finished_ok++;
          if (heal_restart(procs, r, n, restarts, stopping || finished_ok > 0 || running == 0, prefix, port,
                           token, argv))
            running++;
          continue;
        }
        procs[r].status = exit_code(status);
        running--;
        if (procs[r].status != 0 && !stopping && procs[r].restarts < restarts) {
          procs[r].restarts++;
          fprintf(stderr, "sgrt launch: rank %d exited with status %d; restarting it (%d of %d)\n", r,
                  procs[r].status, procs[r].restarts, restarts);
          for (int k = 0; k < 2; k++)
            while (procs[r].s[k].fd >= 0) drain(&procs[r].s[k], r, prefix);
          if (spawn(&procs[r], r, n, port, token, argv, 0) == 0) running++;
          continue;
        }
        if (procs[r].status != 0 && !first_fail) {
          first_fail = procs[r].status;
          if (!stopping) {
            fprintf(stderr, "sgrt launch: rank %d exited with status %d; stopping the other ranks\n", r,
                    procs[r].status);
            for (int o = 0; o < n; o++)
              if (!procs[o].done && procs[o].pid > 0) kill(procs[o].pid, SIGTERM);
            stopping = 1;
            kill_at = now_ms() + 5000;
          }
        }
      }
    }
    if (stopping && kill_at && now_ms() > kill_at) {
      for (int r = 0; r < n; r++)
        if (!procs[r].done && procs[r].pid > 0) kill(procs[r].pid, SIGKILL);
      kill_at = 0;
    }
    if (running > 0) {
      /* Only stopped ranks are left: nothing will continue them (with or
       * without --heal: waiting for them would never end). */
      int stopped = 0;
      for (int r = 0; r < n; r++) stopped += !procs[r].done && procs[r].stopped;
      if (stopped == running)
        for (int r = 0; r < n; r++)
          if (!procs[r].done && procs[r].stopped && !procs[r].killed) {
            fprintf(stderr, "sgrt launch: killing rank %d, stopped while the others finished\n", r);
            kill(procs[r].pid, SIGKILL);
            procs[r].killed = 1;
          }
    }
    if (running <= 0 && nf == 0) break;
    if (running <= 0) {
      /* Everyone exited: take what is left in the pipes. */
      for (int r = 0; r < n; r++)
        for (int k = 0; k < 2; k++)
          while (procs[r].s[k].fd >= 0) drain(&procs[r].s[k], r, prefix);
      break;
    }
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (store != NULL) sg_comm_store_stop(store);
  if (opt_heal && !got_signal && first_fail == 0) return heal_result(procs, n);
  return first_fail;
}

static int run_launch(const cli_command *cmd, int argc, char **argv) {
  int n = 0, restarts = 0, label = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      cli_print_command_help(cmd);
      return CLI_EXIT_OK;
    }
    if (strcmp(a, "--heal") == 0) {
      opt_heal = 1;
      continue;
    }
    if (strcmp(a, "--label") == 0 || strcmp(a, "-l") == 0) {
      label = 1;
      continue;
    }
    if (strcmp(a, "--inject") == 0) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "option '--inject' needs a value");
      opt_inject = argv[++i];
      opt_heal = 1;
      continue;
    }
    if (strcmp(a, "--master-addr") == 0) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "option '--master-addr' needs a value");
      opt_master_addr = argv[++i];
      if (*opt_master_addr == '\0' || strlen(opt_master_addr) > 255)
        return cli_usage_error(cmd,
                               "--master-addr: give a host name or address of node 0 (1..255 characters)");
      continue;
    }
    int *dst = NULL;
    int64_t lo, hi, x;
    if (strcmp(a, "-n") == 0 || strcmp(a, "--np") == 0 || strcmp(a, "--nproc-per-node") == 0)
      dst = &n, lo = 1, hi = MAX_RANKS;
    else if (strcmp(a, "--restart-failed") == 0) dst = &restarts, lo = 0, hi = MAX_RESTARTS;
    else if (strcmp(a, "--nnodes") == 0) dst = &opt_nnodes, lo = 1, hi = MAX_NODES;
    else if (strcmp(a, "--node-rank") == 0) dst = &opt_node_rank, lo = 0, hi = MAX_NODES - 1;
    else if (strcmp(a, "--master-port") == 0) dst = &opt_master_port, lo = 1, hi = 65535;
    else if (a[0] == '-') return cli_usage_error(cmd, "unknown option '%s'", a);
    else break;
    if (i + 1 >= argc) return cli_usage_error(cmd, "option '%s' needs a value", a);
    int rc = cli_int_option(cmd, a, argv[++i], lo, hi, &x);
    if (rc != CLI_CONTINUE) return rc;
    *dst = (int)x;
  }
  if (n < 1) return cli_usage_error(cmd, "-n N is required (1..%d ranks)", MAX_RANKS);
  if (opt_node_rank >= opt_nnodes)
    return cli_usage_error(cmd, "--node-rank %d is not below --nnodes %d", opt_node_rank, opt_nnodes);
  if ((int64_t)opt_nnodes * n > MAX_WORLD)
    return cli_usage_error(cmd, "--nnodes %d x -n %d ranks is more than %d", opt_nnodes, n, MAX_WORLD);
  if (opt_nnodes > 1) {
    /* Every node must know where node 0's store is, and hold the same token. */
    if (opt_master_addr == NULL)
      return cli_usage_error(cmd, "--nnodes %d needs --master-addr (an address of node 0 the others reach)",
                             opt_nnodes);
    if (opt_master_port == 0) opt_master_port = 29500; /* torchrun's default */
    const char *tok = getenv("SG_JOB_TOKEN");
    if (sg_comm_check_job_token(opt_master_addr, tok) != SG_OK)
      return cli_usage_error(cmd, "%s", sg_last_error());
    if (tok != NULL && strlen(tok) > 255)
      return cli_usage_error(cmd, "SG_JOB_TOKEN is longer than 255 bytes");
    if (restarts > 0 && opt_heal)
      return cli_usage_error(cmd,
                             "--restart-failed with --heal runs on one node only: a rank rejoins through "
                             "the launcher that hosts the store");
  }
  if (i >= argc) return cli_usage_error(cmd, "missing PROGRAM");
  if (opt_heal && restarts > 0 && n < 2)
    return cli_usage_error(cmd,
                           "--restart-failed with --heal/--inject needs -n 2 or more: a restarted rank "
                           "rejoins the ranks still running, and with -n %d there are none",
                           n);
  if (opt_inject != NULL) { /* validate now rather than in every rank */
    sg_fault_plan *plan = NULL;
    if (sg_fault_plan_parse(opt_inject, n, 0, &plan) != SG_OK)
      return cli_usage_error(cmd, "--inject: %s", sg_last_error());
    sg_fault_plan_destroy(plan);
  }
  return cli_launch_ranks(n, restarts, label, argv + i);
}

const cli_command cli_cmd_launch = {
    "launch",
    "-n N [--nnodes N --node-rank R --master-addr A [--master-port P]] [--label] [--restart-failed K] "
    "[--heal] [--inject SPEC] [--] PROGRAM [ARGS...]",
    "start N local ranks of a program with the bootstrap environment set",
    "  -n, --np, --nproc-per-node N\n"
    "                        ranks on this node, 1..256\n"
    "  --nnodes N            nodes in the job (default 1), each running its own `sgrt launch` with\n"
    "                        the same -n, --nnodes, --master-addr, --master-port and SG_JOB_TOKEN\n"
    "  --node-rank R         this node, 0..N-1: it runs ranks R*n .. R*n+n-1; node 0 hosts the store\n"
    "  --master-addr A       an address of node 0 that the other nodes reach (needed with --nnodes\n"
    "                        above 1; other than loopback it needs SG_JOB_TOKEN set on every node)\n"
    "  --master-port P       the store's port on node 0 (default: 29500 with --nnodes above 1, else a\n"
    "                        free port)\n"
    "  -l, --label           prefix each output line with \"[RANK] \" (as srun --label); without it\n"
    "                        the ranks' lines pass through as they are (whole lines, never mixed)\n"
    "  --restart-failed K    restart a rank that exits non-zero, up to K times each (0..1000000);\n"
    "                        with --heal (or --inject) the restarted rank gets SG_REJOIN=1 and\n"
    "                        rejoins the running ranks at their next step (a rank that died: any\n"
    "                        status but 0 and 75, or a signal; not once a rank has finished)\n"
    "  --heal                keep the other ranks running when one exits or is killed (the job\n"
    "                        heals itself, docs/resilience.md); ranks stopped by a signal are killed\n"
    "                        at the end; 0 when some ranks finished with 0 and all others died,\n"
    "                        were killed or were excluded (status 75): the runtime lets only a\n"
    "                        strict majority of the last membership go on; the last line names\n"
    "                        the ranks lost\n"
    "  --inject SPEC         fault injection (implies --heal): exported as SG_INJECT, e.g.\n"
    "                        'kill:rank=2,step=5', 'partition:ranks=1-2,step=random',\n"
    "                        'kill:rank=3,recovery=agree' (a second failure during a recovery)\n"
    "Each rank gets SG_RANK, SG_WORLD_SIZE, SG_LOCAL_RANK and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,\n"
    "LOCAL_WORLD_SIZE, GROUP_RANK (the node), MASTER_ADDR (127.0.0.1 on one node), MASTER_PORT,\n"
    "SG_JOB_TOKEN (on one node random, new for each job; on several, the one in the environment) and\n"
    "SG_STORE_EXTERNAL=1 (the launcher of node 0 hosts the store).\n"
    "SIGINT and SIGTERM are forwarded. When a rank fails the others are stopped and the\n"
    "first non-zero exit status is returned (128+N for a signal N).\n",
    run_launch,
};
