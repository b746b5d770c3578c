/* The VRAM tier (SPEC A3) through the backend interface: device memory comes
 * from the "cuda" backend's buffer_alloc and moves with its upload/download
 * (through pinned staging), so the page table needs no CUDA code of its
 * own. Where the build has no CUDA backend the tier is refused with
 * SG_ERR_UNSUPPORTED when asked for, and never otherwise; where it has one
 * but the machine has no GPU, the backend's SG_ERR_DEVICE says why. VRAM
 * frames are local only: they are not registered with UCX (that needs
 * UCX's CUDA support), so other nodes cannot reach them. */
#include "backend/backend.h"
#include "gmem/gmem_internal.h"

sg_status sg__tier_vram_init(sg__tier *t, int device, size_t bytes) {
  t->kind = SG_GMEM_VRAM;
  if (bytes == 0) return SG_OK;
  const sg__backend_i *be = sg__backend_find("cuda");
  if (be == NULL)
    return sg__error(
        SG_ERR_UNSUPPORTED,
        "sg_gmem_create: a VRAM tier (%zu bytes on device %d) needs the CUDA backend, which this "
        "build of sgrt does not have",
        bytes, device);
  if (device != 0)
    return sg__error(SG_ERR_UNSUPPORTED,
                     "sg_gmem_create: the CUDA backend places memory on device 0 only, not %d", device);
  if (bytes < SG__GM_PAGE)
    return sg__error(SG_ERR_INVALID_ARG, "sg_gmem_create: vram_bytes %zu is less than one page", bytes);
  sg__backend_config cfg = {1, 0};
  SG_CHECK(be->create(&cfg, &t->be_state));
  t->backend = be;
  t->bytes = bytes / SG__GM_PAGE * SG__GM_PAGE;
  sg_status st = be->buffer_alloc(t->be_state, t->bytes, &t->dev);
  if (st != SG_OK) {
    sg__tier_vram_release(t);
    return st;
  }
  return sg__tier_frames_init(t);
}

void sg__tier_vram_release(sg__tier *t) {
  const sg__backend_i *be = t->backend;
  if (be == NULL) return;
  be->buffer_free(t->be_state, t->dev);
  be->destroy(t->be_state);
  t->backend = NULL;
  t->dev = NULL;
}

sg_status sg__vram_copy(sg__tier *t, uint64_t at, void *host, size_t n, bool to_device) {
  const sg__backend_i *be = t->backend;
  if (be == NULL) return sg__error(SG_ERR_INTERNAL, "gmem: VRAM tier used without a backend");
  uint8_t *dev = (uint8_t *)t->dev + at;
  if (to_device) return be->upload(t->be_state, dev, host, n);
  return be->download(t->be_state, host, dev, n);
}
