/* Fault-injection plans (SPEC H6): the text of `sgrt launch --inject` and of
 * the runtime's injection hooks, parsed once into a validated list that the
 * launcher and every rank query by (rank, step). The grammar is in
 * docs/resilience.md; every error quotes the token it could not take. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "sgrt/health.h"

#define MAX_FAULTS 256
#define MAX_SPEC_BYTES 65536
#define MAX_STEP 1000000000000000000ll /* 10^18: 18 digits can never overflow int64 */
#define RANDOM_LO 1                    /* step=random draws from 1..100 */
#define RANDOM_HI 100

#define MAX_LINK_MS 86400000 /* a transient cut of one day at most */

struct sg_fault_plan {
  size_t n;
  int64_t
      link_ms[MAX_FAULTS]; /* a partition's ms=: how long the cut lasts; 0 for good (sg_fault has no room) */
  double factor[MAX_FAULTS]; /* a slow fault's factor= (1 for the other kinds) */
  sg_fault faults[];
};

static const struct {
  sg_fault_kind kind;
  const char *name;
} kinds[] = {
    {SG_FAULT_KILL, "kill"},
    {SG_FAULT_STOP, "stop"},
    {SG_FAULT_DROP_HEARTBEATS, "drop-heartbeats"},
    {SG_FAULT_PARTITION, "partition"},
    {SG_FAULT_DEVICE, "device"},
    {SG_FAULT_HANG, "hang"},
    {SG_FAULT_BEHIND, "behind"},
    {SG_FAULT_DROP_CHECKINS, "drop-checkins"},
    {SG_FAULT_SLOW, "slow"},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

const char *sg_fault_kind_name(sg_fault_kind kind) {
  for (size_t i = 0; i < N_KINDS; i++)
    if (kinds[i].kind == kind) return kinds[i].name;
  return "?";
}

/* A piece of the spec: the parser never copies or modifies the text. */
typedef struct slice {
  const char *p;
  size_t n;
} slice;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static slice trim(slice s) {
  while (s.n && is_space(s.p[0])) s.p++, s.n--;
  while (s.n && is_space(s.p[s.n - 1])) s.n--;
  return s;
}

static bool eq(slice s, const char *lit) { return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0; }

/* Takes the text up to the next `sep` (or the end) off *rest into *head.
 * Returns false when *rest was already used up. */
static bool next(slice *rest, char sep, slice *head) {
  if (rest->p == NULL) return false;
  const char *end = memchr(rest->p, sep, rest->n);
  if (end == NULL) {
    *head = *rest;
    rest->p = NULL; /* used up: a trailing separator still yields one empty piece */
    rest->n = 0;
    return true;
  }
  *head = (slice){rest->p, (size_t)(end - rest->p)};
  rest->n -= head->n + 1;
  rest->p = end + 1;
  return true;
}

/* Decimal digits only (no sign, no spaces), at most 18 of them. */
static bool number(slice s, int64_t *out) {
  if (s.n == 0 || s.n > 18) return false;
  int64_t v = 0;
  for (size_t i = 0; i < s.n; i++) {
    if (s.p[i] < '0' || s.p[i] > '9') return false;
    v = v * 10 + (s.p[i] - '0');
  }
  *out = v;
  return true;
}

/* "A-B" with two numbers. */
static bool range(slice s, int64_t *a, int64_t *b) {
  const char *dash = memchr(s.p, '-', s.n);
  if (dash == NULL) return false;
  slice l = {s.p, (size_t)(dash - s.p)}, r = {dash + 1, s.n - (size_t)(dash - s.p) - 1};
  return number(trim(l), a) && number(trim(r), b);
}

/* splitmix64: a fixed, documented mixer, so that a seed names the same
 * steps on every machine and in every version. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The context of every message: which fault, quoted. */
typedef struct ctx {
  slice fault;
  int index;
} ctx;

__attribute__((format(printf, 2, 3))) static sg_status bad(const ctx *c, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  int shown = c->fault.n > 120 ? 120 : (int)c->fault.n;
  return sg__error(SG_ERR_INVALID_ARG, "fault spec, fault %d '%.*s%s': %s", c->index + 1, shown, c->fault.p,
                   (size_t)shown < c->fault.n ? "..." : "", what);
}

static sg_status parse_rank(const ctx *c, slice v, const char *key, int world_size, int *out) {
  int64_t r;
  if (!number(v, &r)) return bad(c, "%s='%.*s' is not a rank number", key, (int)v.n, v.p);
  if (r >= world_size)
    return bad(c, "%s=%lld is outside the job of %d ranks (0..%d)", key, (long long)r, world_size,
               world_size - 1);
  *out = (int)r;
  return SG_OK;
}

static sg_status parse_step(const ctx *c, slice v, uint64_t seed, sg_fault *f) {
  int64_t lo = RANDOM_LO, hi = RANDOM_HI;
  if (number(v, &f->step)) return SG_OK;
  if (eq(v, "random")) {
    /* default range */
  } else if (v.n > 8 && memcmp(v.p, "random(", 7) == 0 && v.p[v.n - 1] == ')') {
    slice inner = {v.p + 7, v.n - 8};
    if (!range(inner, &lo, &hi) || lo > hi)
      return bad(c, "step='%.*s': expected random(LO-HI) with LO <= HI", (int)v.n, v.p);
  } else {
    return bad(c, "step='%.*s' is neither a step number, 'random' nor 'random(LO-HI)'", (int)v.n, v.p);
  }
  /* Each fault draws from its own stream (seed and position), so adding a
   * fault to a spec does not move the steps of the others. */
  uint64_t span = (uint64_t)(hi - lo) + 1;
  f->step = lo + (int64_t)(mix(seed ^ mix((uint64_t)c->index)) % span);
  f->random = true;
  return SG_OK;
}

static const char *const phase_names[] = {"none", "detect", "agree", "build", "transfer", "create"};

const char *sg_recovery_phase_name(sg_recovery_phase phase) {
  return (int)phase >= 0 && (int)phase < (int)(sizeof phase_names / sizeof phase_names[0])
             ? phase_names[phase]
             : "?";
}

static sg_status parse_phase(const ctx *c, slice v, sg_fault *f) {
  for (int p = SG_RECOVERY_DETECT; p <= SG_RECOVERY_TRANSFER; p++) /* not "create": that is at=create */
    if (eq(v, phase_names[p])) {
      f->phase = (sg_recovery_phase)p;
      f->step = INT64_MAX; /* never due at a step */
      return SG_OK;
    }
  return bad(c, "recovery='%.*s' is not a phase (accepted: detect, agree, build, transfer)", (int)v.n, v.p);
}

/* A slow fault's factor: a plain decimal number in (1, 100]. */
static bool parse_factor(slice v, double *out) {
  char buf[32];
  if (v.n == 0 || v.n >= sizeof buf) return false;
  for (size_t i = 0; i < v.n; i++)
    if (!((v.p[i] >= '0' && v.p[i] <= '9') || v.p[i] == '.')) return false;
  memcpy(buf, v.p, v.n);
  buf[v.n] = '\0';
  char *end;
  double x = strtod(buf, &end);
  if (*end != '\0' || !(x > 1.0 && x <= 100.0)) return false;
  *out = x;
  return true;
}

static sg_status parse_fault(slice text, int index, int world_size, uint64_t seed, sg_fault *f,
                             int64_t *link_ms, double *factor) {
  ctx c = {text, index};
  memset(f, 0, sizeof *f);
  *link_ms = 0;
  *factor = 1.0;
  f->peer = -1;
  if (text.n == 0) return bad(&c, "an empty fault (a stray ';'?)");
  const char *colon = memchr(text.p, ':', text.n);
  if (colon == NULL) return bad(&c, "no ':' after the kind (expected KIND:KEY=VALUE,...)");
  slice kind = trim((slice){text.p, (size_t)(colon - text.p)});
  for (size_t i = 0; i < N_KINDS && f->kind == 0; i++)
    if (eq(kind, kinds[i].name)) f->kind = kinds[i].kind;
  if (f->kind == 0)
    return bad(
        &c,
        "unknown fault kind '%.*s' (accepted: kill, stop, drop-heartbeats, partition, device, hang, behind, "
        "drop-checkins, slow)",
        (int)kind.n, kind.p);
  bool pair = f->kind == SG_FAULT_PARTITION, have_rank = false, have_step = false, have_phase = false;
  const char *rank_key = pair ? "ranks" : "rank";
  slice rest = {colon + 1, text.n - (size_t)(colon + 1 - text.p)}, param;
  while (next(&rest, ',', &param)) {
    param = trim(param);
    if (param.n == 0) return bad(&c, "an empty parameter");
    const char *eqs = memchr(param.p, '=', param.n);
    if (eqs == NULL) return bad(&c, "parameter '%.*s' has no '='", (int)param.n, param.p);
    slice key = trim((slice){param.p, (size_t)(eqs - param.p)});
    slice val = trim((slice){eqs + 1, param.n - (size_t)(eqs + 1 - param.p)});
    if (eq(key, rank_key)) {
      if (have_rank) return bad(&c, "%s= given twice", rank_key);
      have_rank = true;
      if (!pair) {
        SG_CHECK(parse_rank(&c, val, "rank", world_size, &f->rank));
        continue;
      }
      const char *dash = memchr(val.p, '-', val.n);
      if (dash == NULL) return bad(&c, "ranks='%.*s': expected two ranks A-B", (int)val.n, val.p);
      SG_CHECK(parse_rank(&c, trim((slice){val.p, (size_t)(dash - val.p)}), "ranks", world_size, &f->rank));
      SG_CHECK(parse_rank(&c, trim((slice){dash + 1, val.n - (size_t)(dash + 1 - val.p)}), "ranks",
                          world_size, &f->peer));
      if (f->rank == f->peer) return bad(&c, "ranks=%d-%d: a rank has no link to itself", f->rank, f->peer);
    } else if (eq(key, "step")) {
      if (have_step) return bad(&c, "step= given twice");
      have_step = true;
      SG_CHECK(parse_step(&c, val, seed, f));
    } else if (eq(key, "ms") && pair) {
      if (*link_ms != 0) return bad(&c, "ms= given twice");
      if (!number(val, link_ms) || *link_ms < 1 || *link_ms > MAX_LINK_MS)
        return bad(&c, "ms='%.*s' is not a duration in 1..%d ms", (int)val.n, val.p, MAX_LINK_MS);
    } else if (eq(key, "factor") && f->kind == SG_FAULT_SLOW) {
      if (*factor != 1.0) return bad(&c, "factor= given twice");
      if (!parse_factor(val, factor))
        return bad(&c, "factor='%.*s' is not a number in (1, 100]", (int)val.n, val.p);
    } else if (eq(key, "recovery") && f->kind == SG_FAULT_KILL) {
      if (have_phase) return bad(&c, "recovery= or at= given twice");
      have_phase = true;
      SG_CHECK(parse_phase(&c, val, f));
    } else if (eq(key, "at") && f->kind == SG_FAULT_KILL) {
      if (have_phase) return bad(&c, "recovery= or at= given twice");
      if (!eq(val, "create"))
        return bad(&c, "at='%.*s' is not a point (accepted: create)", (int)val.n, val.p);
      have_phase = true;
      f->phase = SG_RECOVERY_CREATE;
      f->step = INT64_MAX;
    } else {
      return bad(&c, "unknown key '%.*s' (%s takes %s and step%s)", (int)key.n, key.p,
                 sg_fault_kind_name(f->kind), rank_key,
                 f->kind == SG_FAULT_KILL   ? ", or recovery or at"
                 : pair                     ? ", and ms for a transient cut"
                 : f->kind == SG_FAULT_SLOW ? ", and factor"
                                            : "");
    }
  }
  if (!have_rank) return bad(&c, "%s= is missing", rank_key);
  if (f->kind == SG_FAULT_SLOW && *factor == 1.0)
    return bad(&c, "factor= is missing (how many times slower)");
  if (have_step && have_phase) return bad(&c, "step= and recovery=/at= given together (one or the other)");
  if (!have_step && !have_phase)
    return bad(&c, "step= is missing%s", f->kind == SG_FAULT_KILL ? " (or recovery=PHASE or at=create)" : "");
  return SG_OK;
}

static bool same_fault(const sg_fault *a, const sg_fault *b) {
  if (a->kind != b->kind || a->step != b->step || a->phase != b->phase) return false;
  return (a->rank == b->rank && a->peer == b->peer) || (a->rank == b->peer && a->peer == b->rank);
}

sg_status sg_fault_plan_parse(const char *spec, int world_size, uint64_t seed, sg_fault_plan **out) {
  if (out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_fault_plan_parse: out is NULL");
  *out = NULL;
  if (spec == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_fault_plan_parse: spec is NULL");
  if (world_size < 1)
    return sg__error(SG_ERR_INVALID_ARG, "sg_fault_plan_parse: world_size %d is not positive", world_size);
  size_t len = strnlen(spec, MAX_SPEC_BYTES + 1);
  if (len > MAX_SPEC_BYTES)
    return sg__error(SG_ERR_INVALID_ARG, "fault spec: longer than %d bytes", MAX_SPEC_BYTES);
  if (trim((slice){spec, len}).n == 0) return sg__error(SG_ERR_INVALID_ARG, "fault spec: empty");
  sg_fault faults[MAX_FAULTS];
  int64_t link_ms[MAX_FAULTS];
  double factor[MAX_FAULTS];
  size_t n = 0;
  slice rest = {spec, len}, text;
  while (next(&rest, ';', &text)) {
    if (n == MAX_FAULTS) return sg__error(SG_ERR_INVALID_ARG, "fault spec: more than %d faults", MAX_FAULTS);
    text = trim(text);
    SG_CHECK(parse_fault(text, (int)n, world_size, seed, &faults[n], &link_ms[n], &factor[n]));
    for (size_t i = 0; i < n; i++)
      if (same_fault(&faults[i], &faults[n])) {
        ctx c = {text, (int)n};
        return bad(&c, "the same fault as fault %zu", i + 1);
      }
    n++;
  }
  sg_fault_plan *plan = sg__malloc(sizeof *plan + n * sizeof plan->faults[0]);
  if (plan == NULL) return sg__error(SG_ERR_NO_MEMORY, "sg_fault_plan_parse: out of memory");
  plan->n = n;
  memcpy(plan->faults, faults, n * sizeof faults[0]);
  memcpy(plan->link_ms, link_ms, n * sizeof link_ms[0]);
  memcpy(plan->factor, factor, n * sizeof factor[0]);
  *out = plan;
  return SG_OK;
}

void sg_fault_plan_destroy(sg_fault_plan *plan) { sg__free(plan); }

size_t sg_fault_plan_count(const sg_fault_plan *plan) { return plan ? plan->n : 0; }

sg_status sg_fault_plan_get(const sg_fault_plan *plan, size_t i, sg_fault *out) {
  if (plan == NULL || out == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_fault_plan_get: NULL argument");
  if (i >= plan->n)
    return sg__error(SG_ERR_RANGE, "sg_fault_plan_get: fault %zu, the plan has %zu", i, plan->n);
  *out = plan->faults[i];
  return SG_OK;
}

static bool involves(const sg_fault *f, int rank) { return f->rank == rank || f->peer == rank; }

size_t sg_fault_plan_due(const sg_fault_plan *plan, int rank, int64_t step, sg_fault *out, size_t cap) {
  if (plan == NULL || rank < 0) return 0;
  size_t k = 0;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->step != step || !involves(f, rank)) continue;
    if (out && k < cap) out[k] = *f;
    k++;
  }
  return k;
}

size_t sg_fault_plan_due_in_recovery(const sg_fault_plan *plan, int rank, sg_recovery_phase phase,
                                     sg_fault *out, size_t cap) {
  if (plan == NULL || rank < 0 || phase == SG_RECOVERY_NONE) return 0;
  size_t k = 0;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->phase != phase || !involves(f, rank)) continue;
    if (out && k < cap) out[k] = *f;
    k++;
  }
  return k;
}

bool sg_fault_plan_cuts(const sg_fault_plan *plan, int a, int b, int64_t step) {
  if (plan == NULL || a < 0 || b < 0 || a == b) return false;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->kind == SG_FAULT_PARTITION && f->step <= step && involves(f, a) && involves(f, b)) return true;
  }
  return false;
}

int64_t sg_fault_plan_link_ms(const sg_fault_plan *plan, int a, int b, int64_t step) {
  if (plan == NULL || a < 0 || b < 0 || a == b) return 0;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->kind == SG_FAULT_PARTITION && f->step == step && involves(f, a) && involves(f, b))
      return plan->link_ms[i];
  }
  return 0;
}

double sg_fault_plan_slow_factor(const sg_fault_plan *plan, int rank, int64_t step) {
  if (plan == NULL || rank < 0) return 1.0;
  double x = 1.0;
  int64_t at = -1;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->kind == SG_FAULT_SLOW && f->rank == rank && f->step <= step && f->step >= at)
      x = plan->factor[i], at = f->step;
  }
  return x;
}

bool sg_fault_plan_active(const sg_fault_plan *plan, sg_fault_kind kind, int rank, int64_t step) {
  if (plan == NULL || rank < 0) return false;
  for (size_t i = 0; i < plan->n; i++) {
    const sg_fault *f = &plan->faults[i];
    if (f->kind == kind && f->step <= step && involves(f, rank)) return true;
  }
  return false;
}
