/* The generated kernels of a plan, through the compile cache (SPEC C4;
 * docs/compiler.md "The compile cache").
 *
 * Key: XXH3-128 of a canonical text encoding of everything the generated
 * code depends on -- the encoding's version, sgrt's version, the codegen
 * version, the backend's identity (compiler, flags, CPU, layout block), the
 * graph's content hash, the plan options, and the fusion plan itself: every
 * kernel of the IR, instruction by instruction, with its sums and prologue
 * (the IR is plain data, so its text is canonical). The rank is not in it: all ranks of a job share
 * entries. An entry holds the backend's artifact (the shared object) and
 * info.txt (what `sgrt cache list` shows). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "compile/cache.h"
#include "compile/plan_internal.h"

#define KEY_ENCODING_VERSION 1

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

sg__cache_key sg__compile_key_text(const char *sgrt_version, const char *identity, const char *rest) {
  sg__strbuf b = {0};
  sg__strbuf_put(&b, "sgrt-compile-key %d\nsgrt %s\ncodegen %d\n%s\n%s", KEY_ENCODING_VERSION, sgrt_version,
                 SG__CODEGEN_VERSION, identity, rest);
  /* Out of memory: a key no entry has (the store then fails as well). */
  sg__cache_key key = b.failed ? (sg__cache_key){0} : sg__cache_key_of(b.s, b.len);
  sg__free(b.s);
  return key;
}

static sg_status make_key(const sg_graph *g, const sg__plan *p, const sg__plan_options *opt,
                          const char *identity, sg__cache_key *key, uint64_t *graph_hash) {
  SG_CHECK(sg_graph_hash(g, 0, graph_hash));
  sg__strbuf b = {0};
  sg__strbuf_put(&b, "graph %016llx\nupdates_last %d\n", (unsigned long long)*graph_hash, opt->updates_last);
  for (uint32_t t = 0; opt->no_memory && t < g->n_tensors; t++)
    if (opt->no_memory[t]) sg__strbuf_put(&b, "no_memory %u\n", t);
  for (uint32_t i = 0; i < p->n_groups; i++) sg__fuse_kernel_text(&b, &p->kernels[i], true);
  if (b.failed) {
    sg__free(b.s);
    return sg__error(SG_ERR_NO_MEMORY, "compile: out of memory");
  }
  *key = sg__compile_key_text(sg_version(), identity, b.s);
  sg__free(b.s);
  return SG_OK;
}

static sg_status read_file(const char *path, char **data, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return sg__error(SG_ERR_IO, "compile cache: cannot open %s: %s", path, strerror(errno));
  *data = NULL;
  *bytes = 0;
  size_t cap = 0;
  for (;;) {
    if (*bytes == cap) {
      size_t ncap = cap ? 2 * cap : 1 << 16;
      char *n = sg__realloc(*data, ncap);
      if (n == NULL) {
        fclose(f);
        sg__free(*data);
        return sg__error(SG_ERR_NO_MEMORY, "compile cache: out of memory reading %s", path);
      }
      *data = n;
      cap = ncap;
    }
    size_t got = fread(*data + *bytes, 1, cap - *bytes, f);
    *bytes += got;
    if (got == 0) break;
  }
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    sg__free(*data);
    return sg__error(SG_ERR_IO, "compile cache: cannot read %s", path);
  }
  return SG_OK;
}

/* Stores the module's artifact; a failure (no space, ...) only costs the
 * next start a compile. */
static void store(sg__cache *c, sg__cache_key key, const sg_graph *g, const sg__plan *p, const char *artifact,
                  uint64_t graph_hash, const char *identity) {
  char *so = NULL;
  size_t so_bytes = 0;
  sg_status st = read_file(artifact, &so, &so_bytes);
  sg__strbuf info = {0};
  const char *cc = strstr(identity, "cc="), *sp = cc ? strchr(cc, ' ') : NULL;
  sg__strbuf_put(&info,
                 "graph %u ops, %u tensors\ngraph_hash %016llx\nkernels %u\nops %u\ndevice %.*s\ncompiler "
                 "%.*s\nsgrt %s\n"
                 "created %lld\n",
                 g->n_ops, g->n_tensors, (unsigned long long)graph_hash, p->n_groups, p->n_fused_ops,
                 (int)strcspn(identity, " "), identity, cc && sp ? (int)(sp - cc - 3) : 0, cc ? cc + 3 : "",
                 sg_version(), (long long)time(NULL));
  if (st == SG_OK && info.failed) st = sg__error(SG_ERR_NO_MEMORY, "compile cache: out of memory");
  if (st == SG_OK) {
    sg__cache_file files[] = {{"kernels.so", so, so_bytes}, {"info.txt", info.s, info.len}};
    st = sg__cache_put(c, key, files, 2);
  }
  if (st != SG_OK) SG_WARN("compile cache: not stored, running uncached: %s", sg_last_error());
  sg__free(so);
  sg__free(info.s);
}

sg_status sg__compile_module(const sg_graph *g, const sg__plan *p, const sg__plan_options *opt,
                             const sg__backend_i *be, void *be_state, sg__module **out,
                             sg__compile_stats *stats) {
  *out = NULL;
  if (p->n_groups == 0) return SG_OK;
  if (be->module_build == NULL)
    return sg__error(SG_ERR_INTERNAL, "compile: backend %s runs no generated kernels", be->name);
  double t0 = now_s();
  char identity[1024];
  SG_CHECK(be->module_identity(be_state, identity, sizeof identity));
  sg__cache *c = NULL;
  if (sg__cache_open(NULL, &c) != SG_OK) {
    SG_WARN("compile cache: %s; compiling without it", sg_last_error());
    c = NULL;
  }
  sg__cache_key key = {0};
  uint64_t graph_hash = 0;
  sg_status st = SG_OK;
  if (c != NULL) st = make_key(g, p, opt, identity, &key, &graph_hash);
  char path[4096];
  if (st == SG_OK && c != NULL && sg__cache_get(c, key, path, sizeof path) == SG_OK) {
    size_t n = strlen(path);
    snprintf(path + n, sizeof path - n, "/kernels.so");
    if (be->module_build(be_state, p->unique, p->n_unique, path, out) == SG_OK) {
      stats->cache_hits++;
    } else {
      SG_WARN("compile cache: entry %s unusable (%s); rebuilding it", path, sg_last_error());
      *out = NULL;
    }
  }
  if (st == SG_OK && *out == NULL) {
    if (c != NULL) stats->cache_misses++;
    stats->compiler_invocations++;
    st = be->module_build(be_state, p->unique, p->n_unique, NULL, out);
    if (st == SG_OK) {
      stats->kernels_generated += p->n_unique;
      const char *artifact = be->module_artifact(be_state, *out);
      if (c != NULL && artifact != NULL) store(c, key, g, p, artifact, graph_hash, identity);
    }
  }
  sg__cache_close(c);
  stats->seconds += now_s() - t0;
  return st;
}
