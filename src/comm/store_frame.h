/* The rendezvous store's wire format, shared by its server
 * (store_server.c) and its client (store.c). Frames are big-endian:
 *
 *   client to server: u32 magic 'SGST' | u8 op | u8 0 | u16 0 | u32 key_len | u32 value_len | key | value
 *   server to client: u32 magic 'SGSR' | u8 status | u8 0 | u16 0 | u32 value_len | value
 *
 * ops: HELLO (key empty, value = the job token), SET, GET, ADD (value = i64
 * delta, reply = i64 sum). Lengths are bounded by SG_STORE_MAX_KEY and
 * SG_STORE_MAX_VALUE (comm_internal.h). Internal to src/comm. */
#ifndef SG_COMM_STORE_FRAME_H
#define SG_COMM_STORE_FRAME_H

#include <stdint.h>
#include <sys/socket.h>

#include "sgrt/status.h"

#define SG__STORE_MAGIC_REQ 0x53475354u
#define SG__STORE_MAGIC_REP 0x53475352u
#define SG__STORE_REQ_HEADER 16
#define SG__STORE_REP_HEADER 12

enum { SG__STORE_OP_HELLO = 1, SG__STORE_OP_SET = 2, SG__STORE_OP_GET = 3, SG__STORE_OP_ADD = 4 };
enum { SG__STORE_OK = 0, SG__STORE_NOT_FOUND = 1, SG__STORE_DENIED = 2, SG__STORE_BAD = 3 };

static inline void sg__store_put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static inline uint32_t sg__store_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void sg__store_put_i64(uint8_t *p, int64_t v) {
  sg__store_put_u32(p, (uint32_t)((uint64_t)v >> 32));
  sg__store_put_u32(p + 4, (uint32_t)v);
}

static inline int64_t sg__store_get_i64(const uint8_t *p) {
  return (int64_t)((uint64_t)sg__store_get_u32(p) << 32 | sg__store_get_u32(p + 4));
}

/* The address of the store: addr (a name or a numeric address) and port
 * resolved into *ss (store.c). SG_ERR_INVALID_ARG when it does not resolve. */
sg_status sg__store_resolve(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len);

#endif /* SG_COMM_STORE_FRAME_H */
