/* Generated C to loaded code: the system compiler run by posix_spawn (no
 * shell, so nothing in a path or flag is interpreted), its output written
 * under a private temporary directory (mkdtemp, 0700) and renamed into
 * place, then dlopen(RTLD_NOW | RTLD_LOCAL): every symbol resolved at load,
 * none leaking into the process.
 *
 * Flags: -O3 -march=native (the host's ISA level for the auto-vectorizer)
 * and -ffp-contract=off (no FMA contraction: results equal the reference
 * kernels'). Never -ffast-math: with gcc it links crtfastmath.o, whose
 * constructor turns on flush-to-zero for the whole process when the object
 * loads; as a guard, MXCSR is compared around dlopen and restored with a
 * warning if a wrapper compiler ($SG_CC) changed it. -fno-math-errno and
 * -fno-trapping-math are not fast-math and change no result: the first
 * lets sqrtf be one instruction, the second lets GCC compute both sides of
 * a select (FP exceptions are masked in sgrt's threads), without which it
 * keeps the selects of sgk_math.h as branches and does not vectorize. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SG_HAVE_MXCSR 1
#endif

#include "backend/cpu/cpu_internal.h"

#ifndef SG_JIT_CC
#define SG_JIT_CC "cc"
#endif

extern char **environ;

/* One string (the compile cache will key on it), split into words at run. */
#define JIT_FLAGS                                                                                  \
  "-std=c11 -O3 -march=native -fPIC -shared -ffp-contract=off -fno-math-errno -fno-trapping-math " \
  "-fvisibility=hidden -fno-plt"

struct sg__jit_lib {
  void *handle;
  char dir[PATH_MAX]; /* our temporary directory; "" for sg__jit_open */
  char path[PATH_MAX + 32];
};

const char *sg__jit_compiler(void) {
  const char *cc = getenv("SG_CC");
  return cc && *cc ? cc : SG_JIT_CC;
}

const char *sg__jit_flags(void) { return JIT_FLAGS; }

static void remove_dir(const char *dir) {
  if (dir[0] == '\0') return;
  static const char *const files[] = {"kernels.c", "compile.log", "kernels.so", "kernels.so.tmp"};
  char p[PATH_MAX + 32];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  rmdir(dir);
}

static sg_status write_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return sg__error(SG_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      close(fd);
      return sg__error(SG_ERR_IO, "cannot write '%s': %s", path, n < 0 ? strerror(e) : "short write");
    }
    data += n;
    len -= (size_t)n;
  }
  if (close(fd) != 0) return sg__error(SG_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return SG_OK;
}

/* The first lines of the compiler's output, on one line each, for a message. */
static void read_log(const char *path, char *buf, size_t cap) {
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  for (char *c = buf; *c; c++)
    if (*c == '\n' && c[1] != '\0') *c = '|';
  size_t l = strlen(buf);
  if (l > 0 && buf[l - 1] == '\n') buf[l - 1] = '\0';
}

/* Runs the compiler on dir/kernels.c into dir/kernels.so.tmp. */
static sg_status run_compiler(const char *dir) {
  const char *cc = sg__jit_compiler();
  char src[PATH_MAX + 16], obj[PATH_MAX + 16], log[PATH_MAX + 16];
  snprintf(src, sizeof src, "%s/kernels.c", dir);
  snprintf(obj, sizeof obj, "%s/kernels.so.tmp", dir);
  snprintf(log, sizeof log, "%s/compile.log", dir);
  char flags[] = JIT_FLAGS;
  const char *argv[32];
  int argc = 0;
  argv[argc++] = cc;
  for (char *save = NULL, *w = strtok_r(flags, " ", &save); w && argc < 27; w = strtok_r(NULL, " ", &save))
    argv[argc++] = w;
  argv[argc++] = "-o";
  argv[argc++] = obj;
  argv[argc++] = src;
  argv[argc++] = "-lm";
  argv[argc] = NULL;
  int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (logfd < 0) return sg__error(SG_ERR_IO, "cannot create '%s': %s", log, strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, logfd, 1);
  posix_spawn_file_actions_adddup2(&fa, logfd, 2);
  pid_t pid;
  /* posix_spawnp: SG_CC may name a compiler on PATH ("clang"). */
  int e = posix_spawnp(&pid, cc, &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(logfd);
  if (e != 0)
    return sg__error(SG_ERR_COMPILER,
                     "the C compiler '%s' could not be started: %s (set SG_CC to a C compiler)", cc,
                     strerror(e));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    return sg__error(SG_ERR_COMPILER, "waiting for the C compiler '%s' failed: %s", cc, strerror(errno));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return SG_OK;
  char out[1536];
  read_log(log, out, sizeof out);
  if (WIFEXITED(status))
    return sg__error(SG_ERR_COMPILER, "'%s %s -o %s %s -lm' exited with status %d: %s", cc, sg__jit_flags(),
                     obj, src, WEXITSTATUS(status), out[0] ? out : "(no output)");
  return sg__error(SG_ERR_COMPILER, "the C compiler '%s' was killed by signal %d: %s", cc,
                   WIFSIGNALED(status) ? WTERMSIG(status) : 0, out[0] ? out : "(no output)");
}

/* dlopen with the floating-point environment guarded (see the top). */
static sg_status load(sg__jit_lib *lib) {
#ifdef SG_HAVE_MXCSR
  unsigned before = _mm_getcsr();
#endif
  lib->handle = dlopen(lib->path, RTLD_NOW | RTLD_LOCAL);
#ifdef SG_HAVE_MXCSR
  unsigned after = _mm_getcsr();
  if (after != before) {
    _mm_setcsr(before);
    SG_WARN("loading '%s' changed the floating-point control register (MXCSR 0x%x -> 0x%x; a -ffast-math "
            "build?): restored",
            lib->path, before, after);
  }
#endif
  if (lib->handle == NULL) {
    const char *why = dlerror();
    return sg__error(SG_ERR_COMPILER, "cannot load generated kernels '%s': %s", lib->path, why ? why : "?");
  }
  return SG_OK;
}

/* SG_DUMP_KERNELS=DIR: every translation unit is also written to
 * DIR/kernels-PID-N.c, to read or to compile by hand (docs/compiler.md). */
static void dump(const char *src, size_t len) {
  const char *dir = getenv("SG_DUMP_KERNELS");
  if (dir == NULL || dir[0] == '\0') return;
  static int seq;
  char path[PATH_MAX];
  int n = __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED);
  if ((size_t)snprintf(path, sizeof path, "%s/kernels-%d-%d.c", dir, (int)getpid(), n) >= sizeof path) return;
  mkdir(dir, 0700);
  unlink(path);
  if (write_file(path, src, len) != SG_OK) SG_WARN("SG_DUMP_KERNELS: %s", sg_last_error());
  else SG_INFO("generated kernels written to %s", path);
}

sg_status sg__jit_build(const char *src, size_t len, sg__jit_lib **out) {
  *out = NULL;
  dump(src, len);
  sg__jit_lib *lib = sg__calloc(1, sizeof *lib);
  if (lib == NULL) return sg__error(SG_ERR_NO_MEMORY, "generated kernels: out of memory");
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  sg_status st = SG_OK;
  if ((size_t)snprintf(lib->dir, sizeof lib->dir, "%s/sgrt-jit-XXXXXX", tmp) >= sizeof lib->dir - 32) {
    st = sg__error(SG_ERR_IO, "TMPDIR '%s' is too long", tmp);
    lib->dir[0] = '\0';
    goto fail;
  }
  if (mkdtemp(lib->dir) == NULL) {
    st = sg__error(SG_ERR_IO, "cannot create a temporary directory under '%s': %s", tmp, strerror(errno));
    lib->dir[0] = '\0';
    goto fail;
  }
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%s/kernels.c", lib->dir);
  SG_CHECK_GOTO(write_file(path, src, len), st, fail);
  SG_CHECK_GOTO(run_compiler(lib->dir), st, fail);
  snprintf(path, sizeof path, "%s/kernels.so.tmp", lib->dir);
  snprintf(lib->path, sizeof lib->path, "%s/kernels.so", lib->dir);
  if (rename(path, lib->path) != 0) {
    st = sg__error(SG_ERR_IO, "cannot rename '%s': %s", path, strerror(errno));
    goto fail;
  }
  SG_CHECK_GOTO(load(lib), st, fail);
  *out = lib;
  return SG_OK;
fail:
  sg__jit_close(lib);
  return st;
}

sg_status sg__jit_open(const char *path, sg__jit_lib **out) {
  *out = NULL;
  sg__jit_lib *lib = sg__calloc(1, sizeof *lib);
  if (lib == NULL) return sg__error(SG_ERR_NO_MEMORY, "generated kernels: out of memory");
  if ((size_t)snprintf(lib->path, sizeof lib->path, "%s", path) >= sizeof lib->path) {
    sg__free(lib);
    return sg__error(SG_ERR_IO, "path '%.64s...' is too long", path);
  }
  sg_status st = load(lib);
  if (st != SG_OK) {
    sg__free(lib);
    return st;
  }
  *out = lib;
  return SG_OK;
}

const char *sg__jit_path(const sg__jit_lib *lib) { return lib->path; }

sg__jit_kernel_fn sg__jit_symbol(sg__jit_lib *lib, const char *name) {
  dlerror();
  void *p = dlsym(lib->handle, name);
  if (p == NULL) {
    sg__error(SG_ERR_NOT_FOUND, "generated kernels '%s' have no kernel '%s'", lib->path, name);
    return NULL;
  }
  sg__jit_kernel_fn fn;
  memcpy(&fn, &p, sizeof fn); /* ISO C has no object-to-function pointer cast */
  return fn;
}

void sg__jit_close(sg__jit_lib *lib) {
  if (lib == NULL) return;
  if (lib->handle) dlclose(lib->handle);
  remove_dir(lib->dir);
  sg__free(lib);
}
