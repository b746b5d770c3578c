/* A strict reader and a writer of NumPy's .npy files (format versions 1.0,
 * 2.0 and 3.0), for the `sgrt run` command.
 *
 * The reader accepts exactly what np.save writes for a C-order array of a type
 * sgrt has: the magic, a version, a header that is a Python dict literal with
 * the keys 'descr', 'fortran_order' and 'shape' (each once, any order), then
 * exactly the data the shape calls for. Anything else (another dtype, a
 * big-endian or Fortran-order array, a bad header, a file shorter or longer
 * than its header says) is an error with a one-line message; nothing in a
 * file can make it read out of bounds or allocate more than the file holds. */
#ifndef SGRT_TOOLS_NPY_H
#define SGRT_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include <sgrt/sgrt.h>

/* An array read from a .npy file. `data` (malloc'd, freed by npy_free) holds
 * `nbytes` bytes in C order; a 0-d array has ndim 0 and one element. */
typedef struct npy_array {
  sg_dtype dtype; /* SG_F32 ('<f4'), SG_I64 ('<i8'), SG_I32 ('<i4'), SG_F16 ('<f2'), SG_U8 ('|u1'), SG_BOOL
                     ('|b1') */
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  size_t nbytes;
  void *data;
} npy_array;

/* Parses a whole .npy file held in memory. The array's data is copied.
 * Returns 0, or -1 with a message (no trailing newline) in err[0..cap). */
int npy_parse(const void *buf, size_t len, npy_array *out, char *err, size_t cap);

/* Reads the .npy file at `path`, which must be a regular file: a FIFO, a
 * device or a directory is refused without blocking (cli_open_regular).
 * Returns 0, or -1 with a message in err (the path is part of it only when
 * it says what the path is: "'x.npy' is a FIFO, not a regular file"). */
int npy_read(const char *path, npy_array *out, char *err, size_t cap);

/* Frees the data of an array filled by npy_read/npy_parse; accepts an array
 * that was never filled if it was zero-initialised. */
void npy_free(npy_array *a);

/* The .npy type string of an sgrt dtype ('<f4', ...); NULL for one .npy has
 * no type for (bf16). */
const char *npy_descr(sg_dtype dtype);

/* Builds the bytes of a .npy version 1.0 file of a C-order array; the caller
 * frees *out with free(). Returns 0, or -1 with a message in err. */
int npy_format(sg_dtype dtype, int ndim, const int64_t *dims, const void *data, size_t nbytes, void **out,
               size_t *out_len, char *err, size_t cap);

/* Writes a .npy version 1.0 file (a partial file is removed on failure). An
 * existing path that is not a regular file (a FIFO, a device, a directory)
 * is refused without blocking. Returns 0, or -1 with a message in err. */
int npy_write(const char *path, sg_dtype dtype, int ndim, const int64_t *dims, const void *data,
              size_t nbytes, char *err, size_t cap);

#endif /* SGRT_TOOLS_NPY_H */
