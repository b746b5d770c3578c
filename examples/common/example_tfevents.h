/* TensorBoard scalars from the examples (--tensorboard DIR): an event file
 * that `tensorboard --logdir DIR` plots, written without TensorFlow. */
#ifndef EXAMPLE_TFEVENTS_H
#define EXAMPLE_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct example_tfevents example_tfevents;

/* Creates DIR/events.out.tfevents.<time>.<host>.<pid> with its version
 * record. 0, or -1 with the reason in err. */
int example_tfevents_open(const char *dir, example_tfevents **out, char *err, size_t cap);
/* One Event at `step` holding n scalars (tags[i] = values[i]), flushed. 0 or -1. */
int example_tfevents_scalars(example_tfevents *w, int64_t step, const char *const *tags, const double *values,
                             int n);
/* Closes the file. Accepts NULL. */
void example_tfevents_close(example_tfevents *w);

#endif /* EXAMPLE_TFEVENTS_H */
