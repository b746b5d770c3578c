/* What the program around a public header's worked example would have: the
 * free names its snippet uses (check_header_examples.cmake puts each snippet
 * in main() after this file). Declared only: the snippets are compiled with
 * -Wall -Wextra -Werror, not linked or run (sgrt.h's, a whole program, runs
 * as the test sgrt_h_example). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <sgrt/sgrt.h>

extern sg_graph *g, *graph;
extern sg_session *session;
extern sg_comm *comm;
extern int n, world, rank, peer;
extern int64_t xdims[4], ydims[1];
extern float images[], lr;
extern int64_t labels[];
extern const float w1_init[], w2_init[];
extern void *ctx;
extern const unsigned char msg[];
extern size_t len;
void my_init_weights(sg_session *s);
void load_shard(int rank, int size, int step, float *images, int64_t *labels);
int64_t now_ms(void);
void on_transition(const sg_health_transition *t, void *ctx);
