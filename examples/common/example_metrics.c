/* Metrics of a training example (example_metrics.h): a JSON-lines file and a
 * Prometheus endpoint. The server is a thread that accepts one connection at
 * a time and answers GET /metrics from a text snapshot rebuilt after each
 * step, so a slow scraper never holds up training. */
#include "example_metrics.h"
#include "example_tfevents.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* The step-time histogram's upper bounds, seconds (Prometheus' le labels). */
static const double bucket_le[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
#define N_BUCKETS (sizeof bucket_le / sizeof bucket_le[0])

struct example_metrics {
  FILE *file;
  example_tfevents *tb;
  int listen_fd;
  pthread_t thread;
  int serving;
  pthread_mutex_t mu;
  int stop;        /* under mu */
  char *text;      /* the latest exposition, under mu */
  size_t text_len; /* under mu */
  /* Totals over the steps (the compute thread only). */
  uint64_t steps, bucket_count[N_BUCKETS];
  double step_seconds_sum, allreduce_bytes_total, exposed_comm_seconds_total;
};

int example_metrics_env_port(const char *prog) {
  const char *v = getenv("SG_METRICS_PORT");
  if (v == NULL || *v == '\0') return 0;
  char *end;
  errno = 0;
  long p = strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || p < 1 || p > 65535) {
    fprintf(stderr, "%s: SG_METRICS_PORT='%.32s' is not a port in 1..65535\n", prog, v);
    return -1;
  }
  return (int)p;
}

/* Reads the request (up to its blank line, 1 s at most) and answers it. */
static void answer(example_metrics *m, int fd) {
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char req[4096];
  size_t got = 0;
  while (got + 1 < sizeof req) {
    ssize_t r = recv(fd, req + got, sizeof req - 1 - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
    req[got] = '\0';
    if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n")) break;
  }
  req[got] = '\0';
  int is_get = strncmp(req, "GET ", 4) == 0, is_head = strncmp(req, "HEAD ", 5) == 0;
  const char *path = req + (is_get ? 4 : is_head ? 5 : 0);
  int metrics = (is_get || is_head) && strncmp(path, "/metrics", 8) == 0 &&
                (path[8] == ' ' || path[8] == '?' || path[8] == '\r' || path[8] == '\n');
  char head[256];
  if (!metrics) {
    static const char body[] = "not found: the metrics are at /metrics\n";
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     is_get || is_head ? "404 Not Found" : "405 Method Not Allowed", sizeof body - 1);
    (void)!send(fd, head, (size_t)n, MSG_NOSIGNAL);
    (void)!send(fd, body, sizeof body - 1, MSG_NOSIGNAL);
    return;
  }
  pthread_mutex_lock(&m->mu);
  size_t len = m->text_len;
  char *copy = malloc(len ? len : 1);
  if (copy != NULL) memcpy(copy, m->text ? m->text : "", len);
  pthread_mutex_unlock(&m->mu);
  if (copy == NULL) return;
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                   len);
  (void)!send(fd, head, (size_t)n, MSG_NOSIGNAL);
  if (is_get) (void)!send(fd, copy, len, MSG_NOSIGNAL);
  free(copy);
}

static void *serve(void *arg) {
  example_metrics *m = arg;
  for (;;) {
    pthread_mutex_lock(&m->mu);
    int stop = m->stop;
    pthread_mutex_unlock(&m->mu);
    if (stop) break;
    struct pollfd p = {m->listen_fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue; /* a tenth of a second to notice the stop */
    int fd = accept(m->listen_fd, NULL, NULL);
    if (fd < 0) continue;
    answer(m, fd);
    close(fd);
  }
  return NULL;
}

int example_metrics_open(const char *prog, const char *file, int port, const char *tensorboard_dir,
                         example_metrics **out) {
  *out = NULL;
  if (file == NULL && port == 0 && tensorboard_dir == NULL) return 0;
  example_metrics *m = calloc(1, sizeof *m);
  if (m == NULL) {
    fprintf(stderr, "%s: out of memory for the metrics\n", prog);
    return 2;
  }
  m->listen_fd = -1;
  pthread_mutex_init(&m->mu, NULL);
  if (file != NULL && (m->file = fopen(file, "w")) == NULL) {
    fprintf(stderr, "%s: --metrics-file '%s': %s\n", prog, file, strerror(errno));
    example_metrics_close(m);
    return 2;
  }
  char err[4200];
  if (tensorboard_dir != NULL && example_tfevents_open(tensorboard_dir, &m->tb, err, sizeof err) != 0) {
    fprintf(stderr, "%s: --tensorboard: %s\n", prog, err);
    example_metrics_close(m);
    return 2;
  }
  if (port > 0) {
    /* Every interface, as exporters do: Prometheus usually scrapes from another host. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
      fprintf(stderr, "%s: cannot serve metrics on port %d: %s\n", prog, port, strerror(errno));
      if (fd >= 0) close(fd);
      example_metrics_close(m);
      return 2;
    }
    m->listen_fd = fd;
    if (pthread_create(&m->thread, NULL, serve, m) != 0) {
      fprintf(stderr, "%s: cannot start the metrics server\n", prog);
      example_metrics_close(m);
      return 2;
    }
    m->serving = 1;
    fprintf(stderr, "%s: Prometheus metrics on http://0.0.0.0:%d/metrics\n", prog, port);
  }
  *out = m;
  return 0;
}

/* Appends to a growing buffer; on failure the buffer is dropped (the next step tries again). */
typedef struct text {
  char *p;
  size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  if (t->p == NULL && t->cap != 0) return; /* failed before */
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (t->p != NULL && t->len + (size_t)n < t->cap) {
      t->len += (size_t)n;
      return;
    }
    size_t cap = (t->cap ? t->cap : 4096) * 2 + (size_t)n;
    char *p = realloc(t->p, cap);
    if (p == NULL) {
      free(t->p);
      t->p = NULL;
      t->cap = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
}

/* A gauge or counter with its HELP and TYPE lines. */
static void metric(text *t, const char *name, const char *type, const char *help, double v) {
  put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void expose(example_metrics *m, const example_step *s) {
  text t = {0};
  metric(&t, "sgrt_steps_total", "counter", "Training steps completed.", (double)m->steps);
  put(&t, "# HELP sgrt_step_seconds Wall time of a training step.\n# TYPE sgrt_step_seconds histogram\n");
  for (size_t b = 0; b < N_BUCKETS; b++)
    put(&t, "sgrt_step_seconds_bucket{le=\"%g\"} %llu\n", bucket_le[b],
        (unsigned long long)m->bucket_count[b]);
  put(&t, "sgrt_step_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)m->steps);
  put(&t, "sgrt_step_seconds_sum %.17g\nsgrt_step_seconds_count %llu\n", m->step_seconds_sum,
      (unsigned long long)m->steps);
  metric(&t, "sgrt_images_per_second", "gauge", "Images per second of the whole job in the last step.",
         s->images_per_s);
  if (!isnan(s->loss)) metric(&t, "sgrt_loss", "gauge", "Loss of the last step.", s->loss);
  metric(&t, "sgrt_step_compute_seconds", "gauge",
         "Compute time of the last step (its wall time less the waits).",
         fmax(0, s->step_ms - s->exposed_comm_ms) / 1e3);
  metric(&t, "sgrt_step_exposed_comm_seconds", "gauge",
         "Time the last step waited for communication (not hidden by compute).", s->exposed_comm_ms / 1e3);
  metric(&t, "sgrt_exposed_comm_seconds_total", "counter", "Time waited for communication, all steps.",
         m->exposed_comm_seconds_total);
  metric(&t, "sgrt_allreduce_bytes_total", "counter", "Bytes this rank allreduced.",
         m->allreduce_bytes_total);
  metric(&t, "sgrt_recoveries_total", "counter", "Recoveries from lost ranks.", s->recoveries);
  metric(&t, "sgrt_last_rto_seconds", "gauge", "RTO of the latest recovery (detection to resumption).",
         s->rto_ms / 1e3);
  metric(&t, "sgrt_world_size", "gauge", "Ranks in the job now.", s->world);
  put(&t, "# HELP sgrt_ranks Ranks of the job by health state.\n# TYPE sgrt_ranks gauge\n");
  put(&t,
      "sgrt_ranks{state=\"healthy\"} %d\nsgrt_ranks{state=\"degraded\"} "
      "%d\nsgrt_ranks{state=\"unreachable\"} %d\n",
      s->healthy, s->degraded, s->unreachable);
  int any = 0;
  for (int r = 0; r < s->n_ranks && r < EXAMPLE_METRICS_MAX_RANKS; r++) {
    if (s->heartbeat_age_ms[r] < 0) continue;
    if (!any)
      put(&t, "# HELP sgrt_heartbeat_age_seconds Time since this rank last heard from a peer (a heartbeat or "
              "a check-in).\n"
              "# TYPE sgrt_heartbeat_age_seconds gauge\n");
    any = 1;
    put(&t, "sgrt_heartbeat_age_seconds{rank=\"%d\"} %.6f\n", r, s->heartbeat_age_ms[r] / 1e3);
  }
  if (t.p == NULL) return;
  pthread_mutex_lock(&m->mu);
  free(m->text);
  m->text = t.p;
  m->text_len = t.len;
  pthread_mutex_unlock(&m->mu);
}

void example_metrics_step(example_metrics *m, const example_step *s) {
  if (m == NULL) return;
  double sec = s->step_ms / 1e3;
  m->steps++;
  m->step_seconds_sum += sec;
  for (size_t b = 0; b < N_BUCKETS; b++) m->bucket_count[b] += sec <= bucket_le[b];
  m->allreduce_bytes_total += s->allreduce_bytes;
  m->exposed_comm_seconds_total += s->exposed_comm_ms / 1e3;
  if (m->file != NULL) {
    fprintf(m->file, "{\"step\":%d,\"loss\":", s->step);
    if (isnan(s->loss)) fputs("null", m->file);
    else fprintf(m->file, "%.9g", s->loss);
    fprintf(m->file,
            ",\"images_per_s\":%.6g,\"step_ms\":%.6g,\"compute_ms\":%.6g,\"exposed_comm_ms\":%.6g,"
            "\"allreduce_bytes\":%.17g,\"world_size\":%d,\"healthy_ranks\":%d,\"degraded_ranks\":%d,"
            "\"unreachable_ranks\":%d,\"recoveries\":%d}\n",
            s->images_per_s, s->step_ms, fmax(0, s->step_ms - s->exposed_comm_ms), s->exposed_comm_ms,
            s->allreduce_bytes, s->world, s->healthy, s->degraded, s->unreachable, s->recoveries);
    fflush(m->file);
  }
  if (m->tb != NULL) {
    static const char *const tags[] = {
        "loss", "images_per_s", "step_ms", "compute_ms", "exposed_comm_ms", "healthy_ranks", "recoveries"};
    double v[] = {s->loss,
                  s->images_per_s,
                  s->step_ms,
                  fmax(0, s->step_ms - s->exposed_comm_ms),
                  s->exposed_comm_ms,
                  (double)s->healthy,
                  (double)s->recoveries};
    int first = isnan(s->loss) ? 1 : 0; /* no loss: the other scalars only */
    if (example_tfevents_scalars(m->tb, s->step, tags + first, v + first, 7 - first) != 0) {
      fprintf(stderr, "example: --tensorboard: a write failed; no more events\n");
      example_tfevents_close(m->tb);
      m->tb = NULL;
    }
  }
  if (m->serving) expose(m, s);
}

void example_metrics_close(example_metrics *m) {
  if (m == NULL) return;
  if (m->serving) {
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
  }
  if (m->listen_fd >= 0) close(m->listen_fd);
  if (m->file != NULL) fclose(m->file);
  example_tfevents_close(m->tb);
  pthread_mutex_destroy(&m->mu);
  free(m->text);
  free(m);
}
