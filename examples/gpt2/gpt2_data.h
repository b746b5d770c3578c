/* What gpt2_train and gpt2_dist share besides the model: the text, the
 * learning-rate schedule and the training windows. */
#ifndef GPT2_DATA_H
#define GPT2_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Every regular file of `path` (a folder, in name order, hidden files left out; or one file) as bytes,
 * at most 64 MiB in all; *len its size. NULL, with a message on stderr naming `prog` and the path, when
 * it cannot be read. The caller frees it. */
unsigned char *gpt2_load_text(const char *prog, const char *path, size_t *len);

/* nanoGPT's schedule: linear warm-up to `lr` over `warmup` steps, then a cosine down to `min_lr` at step
 * `steps` (0-based `step`). */
double gpt2_lr_at(double lr, double min_lr, int warmup, int steps, int step);

/* Window `sample` of step `step` of text[0..n) (n > seq + 1): the seq bytes at an offset drawn from a
 * counter-based stream of (seed, step, sample) as tokens, the next seq as targets. A step's windows do not
 * depend on how its batch is split, so data-parallel ranks together see what one process sees. */
void gpt2_window(const unsigned char *text, size_t n, int64_t seq, uint64_t seed, uint64_t step,
                 uint64_t sample, int64_t *tokens, int64_t *targets);

#endif /* GPT2_DATA_H */
