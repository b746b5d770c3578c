/* Optimizer state offload (SPEC A5, include/sgrt/offload.h): every
 * optimizer-state tensor of a compiled session gets its own allocation in a
 * tier of a global page table, addressed by GVA, and the session is bound to
 * it (sg_session_bind_state), so each step updates the state where it lives
 * -- a PMEM file mapping, say -- with no copies. Everything is allocated
 * before anything is bound, so running out of tier memory leaves the session
 * untouched.
 *
 * It lives beside the parallel runtime, not in src/gmem: the memory service
 * knows tiers and addresses, not sessions; this file joins the two, and
 * moves the session's binding itself when gmem migrates the memory. */
#include <string.h>

#include "core/core.h"
#include "gmem/gmem.h"
#include "sgrt/offload.h"

typedef struct off_tensor {
  char *name;
  sg_gva gva;
  size_t bytes;
  bool bound;
} off_tensor;

struct sg_gmem_offload {
  sg_gmem *gm;
  sg_session *s;
  off_tensor *t;
  int n;
};

static void offload_free(sg_gmem_offload *off, bool free_unbound_only) {
  for (int i = 0; i < off->n; i++) {
    off_tensor *t = &off->t[i];
    /* Memory a session is bound to must outlive the session; when we give
     * up half way, it stays allocated until sg_gmem_destroy. */
    if (t->gva.hi != 0 || t->gva.lo != 0)
      if (!free_unbound_only || !t->bound) sg_gmem_free(off->gm, t->gva);
    sg__free(t->name);
  }
  sg__free(off->t);
  sg__free(off);
}

sg_status sg_gmem_offload_optimizer_state(sg_gmem *gm, sg_session *s, const sg_graph *g, sg_gmem_tier tier,
                                          sg_gmem_offload **out) {
  const char *what = "sg_gmem_offload_optimizer_state";
  if (gm == NULL || s == NULL || g == NULL || out == NULL)
    return sg__error(SG_ERR_INVALID_ARG, "%s: NULL gmem, session, graph or out", what);
  *out = NULL;
  if (tier != SG_GMEM_DRAM && tier != SG_GMEM_PMEM)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: a CPU session binds host memory; the %s tier is not", what,
                     sg__tier_name(tier));
  int32_t nt = sg_graph_num_tensors(g);
  int count = 0;
  sg_tensor_info info;
  for (int32_t i = 0; i < nt; i++)
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) == SG_OK && info.role == SG_ROLE_OPTIMIZER_STATE &&
        info.nbytes > 0)
      count++;
  if (count == 0)
    return sg__error(SG_ERR_NOT_FOUND,
                     "%s: the graph has no optimizer state (SGD with momentum or AdamW have some)", what);
  sg_gmem_offload *off = sg__calloc(1, sizeof *off);
  if (off == NULL || (off->t = sg__calloc((size_t)count, sizeof *off->t)) == NULL) {
    sg__free(off);
    return sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
  }
  off->gm = gm;
  off->s = s;
  sg_status st = SG_OK;
  for (int32_t i = 0; i < nt && st == SG_OK; i++) {
    if (sg_graph_tensor_info(g, (sg_tensor){i}, &info) != SG_OK || info.role != SG_ROLE_OPTIMIZER_STATE ||
        info.nbytes == 0)
      continue;
    off_tensor *t = &off->t[off->n++];
    t->bytes = info.nbytes;
    t->name = sg__strdup(info.name);
    if (t->name == NULL) st = sg__error(SG_ERR_NO_MEMORY, "%s: out of memory", what);
    else st = sg_gmem_alloc(gm, tier, info.nbytes, SG_GMEM_READ | SG_GMEM_WRITE, &t->gva);
  }
  for (int i = 0; i < off->n && st == SG_OK; i++) {
    off_tensor *t = &off->t[i];
    void *p;
    st = sg_gmem_ptr(gm, t->gva, t->bytes, SG_GMEM_READ | SG_GMEM_WRITE, &p);
    if (st == SG_OK) st = sg_session_bind_state(s, t->name, p, t->bytes);
    t->bound = st == SG_OK;
  }
  if (st != SG_OK) {
    offload_free(off, true);
    return st;
  }
  *out = off;
  return SG_OK;
}

int sg_gmem_offload_count(const sg_gmem_offload *off) { return off ? off->n : 0; }

sg_status sg_gmem_offload_info(const sg_gmem_offload *off, int i, const char **name, sg_gva *gva,
                               size_t *bytes) {
  if (off == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_offload_info: NULL offload");
  if (i < 0 || i >= off->n)
    return sg__error(SG_ERR_RANGE, "sg_gmem_offload_info: index %d is not in 0..%d", i, off->n - 1);
  if (name) *name = off->t[i].name;
  if (gva) *gva = off->t[i].gva;
  if (bytes) *bytes = off->t[i].bytes;
  return SG_OK;
}

sg_status sg_gmem_offload_persist(sg_gmem_offload *off) {
  if (off == NULL) return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_offload_persist: NULL offload");
  for (int i = 0; i < off->n; i++) SG_CHECK(sg_gmem_persist(off->gm, off->t[i].gva, off->t[i].bytes));
  return SG_OK;
}

typedef struct rebind_ctx {
  sg_session *s;
  const off_tensor *t;
} rebind_ctx;

/* Runs while the new frames hold the data and the old ones still exist:
 * the session copies from where it is bound now, which is the same bytes. */
static sg_status rebind(void *c, void *new_ptr) {
  const rebind_ctx *r = c;
  return sg_session_bind_state(r->s, r->t->name, new_ptr, r->t->bytes);
}

sg_status sg_gmem_offload_migrate(sg_gmem_offload *off, sg_gmem_tier tier) {
  const char *what = "sg_gmem_offload_migrate";
  if (off == NULL) return sg__error(SG_ERR_INVALID_ARG, "%s: NULL offload", what);
  if (tier != SG_GMEM_DRAM && tier != SG_GMEM_PMEM)
    return sg__error(SG_ERR_UNSUPPORTED, "%s: a CPU session binds host memory; the %s tier is not", what,
                     sg__tier_name(tier));
  for (int i = 0; i < off->n; i++) {
    rebind_ctx r = {off->s, &off->t[i]};
    SG_CHECK(sg__gm_migrate(off->gm, off->t[i].gva, tier, rebind, &r));
  }
  return SG_OK;
}

sg_status sg_gmem_offload_destroy(sg_gmem_offload *off) {
  if (off == NULL) return SG_OK;
  offload_free(off, false);
  return SG_OK;
}
