/* What the ResNet-50 training examples share (resnet50_train.c,
 * resnet50_dist.c): the generated image dataset. */
#ifndef RESNET50_DATA_H
#define RESNET50_DATA_H

#include <stdint.h>

#include <sgrt/sgrt.h>

/* Class c is a colour (one offset per RGB channel) plus a plane wave of its
 * own frequency, orientation and phase per channel; a sample is its class's
 * pattern plus Gaussian pixel noise (sigma 1), freshly drawn for every
 * batch, so a network cannot memorise samples but learns the classes within
 * tens of steps. The classes depend on the seed only. */
typedef struct resnet50_dataset {
  int classes, res;
  float *colour, *fx, *fy, *phase; /* [classes][3] each */
  uint64_t seed, rng;
} resnet50_dataset;

/* Returns 0, or -1 when out of memory (free it anyway). */
int resnet50_dataset_init(resnet50_dataset *d, int classes, int res, uint64_t seed);
void resnet50_dataset_free(resnet50_dataset *d);
/* Restarts the sample stream at `stream` (the classes stay): data-parallel
 * ranks draw their own shard of a step from stream step * world + rank. */
void resnet50_dataset_seek(resnet50_dataset *d, uint64_t stream);
/* The next n samples: x [n,3,res,res], y [n]. */
void resnet50_dataset_batch(resnet50_dataset *d, int n, float *x, int64_t *y);

#endif /* RESNET50_DATA_H */
