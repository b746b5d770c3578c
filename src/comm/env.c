/* Bootstrap from the environment (SPEC M1): rank and world size from sgrt's
 * own launcher, torchrun, Slurm or Open MPI, in that order of preference.
 * Every value read is validated (SPEC S1): a garbled variable is an error,
 * never a silent default. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"

/* Parses the decimal integer in variable `name` into [lo, hi]. Returns 0 when
 * the variable is absent, 1 when it was read, or an error status. */
static int env_int(const char *name, long lo, long hi, int *out, sg_status *err) {
  const char *s = getenv(name);
  if (s == NULL || *s == '\0') return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) {
    *err = sg__error(SG_ERR_INVALID_ARG, "environment variable %s='%.32s' is not an integer in [%ld, %ld]",
                     name, s, lo, hi);
    return -1;
  }
  *out = (int)v;
  return 1;
}

#define SG_MAX_WORLD 4096

/* Loopback only: 127.0.0.0/8, ::1 and "localhost". Any other name may
 * resolve to an address other hosts reach. */
static bool is_loopback(const char *addr) {
  return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 || strcmp(addr, "[::1]") == 0 ||
         strcmp(addr, "localhost") == 0;
}

sg_status sg_comm_check_job_token(const char *addr, const char *token) {
  if (addr == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_check_job_token: addr is NULL");
  if ((token != NULL && *token != '\0') || is_loopback(addr)) return SG_OK;
  return sg__error(SG_ERR_DENIED,
                   "the rendezvous store's address %s is not loopback and no job token is set, so any "
                   "process that reaches it could join the job: give every rank the same secret in "
                   "SG_JOB_TOKEN (e.g. export SG_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n') "
                   "before srun or sgrt launch --nnodes, or mpirun -x SG_JOB_TOKEN), or start a one-node job "
                   "with `sgrt launch`, which makes one",
                   addr);
}

sg_status sg__comm_env_resolve(const sg_comm_params *params, sg__comm_env *env) {
  if (params == NULL || env == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_comm_create: NULL argument");
  /* An older caller's shorter struct: the fields it lacks take their defaults (the environment). */
  sg_comm_params q = SG_COMM_PARAMS_INIT;
  SG_CHECK(sg__params_read("sg_comm_create", SG__COMM_PARAMS_VERSIONS, &q, params));
  params = &q;
  memset(env, 0, sizeof *env);
  env->rank = env->world_size = env->local_rank = -1;
  sg_status err = SG_OK;

  static const struct {
    const char *rank, *size, *local, *source;
  } sources[] = {
      {"SG_RANK", "SG_WORLD_SIZE", "SG_LOCAL_RANK", "SG"},
      {"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
      {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi"},
  };
  if (params->rank >= 0 || params->world_size > 0) {
    env->rank = params->rank;
    env->world_size = params->world_size;
    env->source = "params";
  } else {
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
      int r = -1, n = -1;
      int hr = env_int(sources[i].rank, 0, SG_MAX_WORLD - 1, &r, &err);
      int hn = env_int(sources[i].size, 1, SG_MAX_WORLD, &n, &err);
      if (hr < 0 || hn < 0) return err;
      if (hr == 0 && hn == 0) continue;
      if (hr == 0 || hn == 0)
        return sg__error(SG_ERR_INVALID_ARG, "environment sets only one of %s and %s", sources[i].rank,
                         sources[i].size);
      env->rank = r;
      env->world_size = n;
      env->source = sources[i].source;
      if (env_int(sources[i].local, 0, SG_MAX_WORLD - 1, &env->local_rank, &err) < 0) return err;
      break;
    }
  }
  if (env->source == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "no rank and world size: set SG_RANK/SG_WORLD_SIZE (or torchrun's "
                                         "RANK/WORLD_SIZE, Slurm's or Open MPI's), or use `sgrt launch`");
  if (env->world_size < 1 || env->world_size > SG_MAX_WORLD || env->rank < 0 || env->rank >= env->world_size)
    return sg__error(SG_ERR_INVALID_ARG, "rank %d is not in a world of size %d", env->rank, env->world_size);
  if (env->local_rank < 0) env->local_rank = env->rank;

  const char *addr = params->master_addr ? params->master_addr : getenv("MASTER_ADDR");
  if (addr == NULL || *addr == '\0') addr = "127.0.0.1";
  if (strlen(addr) >= sizeof env->master_addr)
    return sg__error(SG_ERR_INVALID_ARG, "MASTER_ADDR is longer than %zu bytes", sizeof env->master_addr - 1);
  strcpy(env->master_addr, addr);

  env->master_port = params->master_port;
  if (env->master_port == 0) {
    int h = env_int("MASTER_PORT", 1, 65535, &env->master_port, &err);
    if (h < 0) return err;
    if (h == 0) env->master_port = 29500;
  }
  if (env->master_port < 1 || env->master_port > 65535)
    return sg__error(SG_ERR_INVALID_ARG, "master port %d is not in [1, 65535]", env->master_port);

  const char *tok = params->token ? params->token : getenv("SG_JOB_TOKEN");
  if (tok == NULL) tok = "";
  if (strlen(tok) >= sizeof env->token)
    return sg__error(SG_ERR_INVALID_ARG, "job token is longer than %zu bytes", sizeof env->token - 1);
  strcpy(env->token, tok);
  SG_CHECK(sg_comm_check_job_token(env->master_addr, env->token));

  env->timeout_ms = params->timeout_ms;
  if (env->timeout_ms == 0) {
    int h = env_int("SG_COMM_TIMEOUT_MS", 1, 24 * 3600 * 1000, &env->timeout_ms, &err);
    if (h < 0) return err;
    if (h == 0) env->timeout_ms = 60000;
  }
  if (env->timeout_ms < 1)
    return sg__error(SG_ERR_INVALID_ARG, "timeout %d ms is not positive", env->timeout_ms);
  return SG_OK;
}
