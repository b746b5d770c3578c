/* Hostile clients of the rendezvous store (src/comm/store_server.c), for
 * store_attack_test.c (each attack against a store in the same process,
 * while an honest client works) and store_attack_tool.c (all of them at once
 * against a running job's store). Each function plays one attack on
 * 127.0.0.1:port and reports what the server did. */
#ifndef SG_TEST_STORE_ATTACKS_H
#define SG_TEST_STORE_ATTACKS_H

#include <stdint.h>

/* Connects to 127.0.0.1:port; the fd, or -1. */
int attack_connect(int port);

/* Waits up to limit_ms for the server to close fd (EOF or reset), reading
 * and discarding anything it sends first. Milliseconds it took, or -1 if it
 * is still open. *reply_status: the status byte of a reply it sent first, or
 * -1. Does not close fd. */
int64_t attack_wait_closed(int fd, int limit_ms, int *reply_status);

/* Slow drip: 15 bytes of a HELLO header, then one byte every interval_ms,
 * until the server closes the connection (or limit_ms). Milliseconds from
 * the first byte to the close, or -1. */
int64_t attack_drip(int port, int interval_ms, int limit_ms);

/* n connections that send nothing, held until the server closes them or
 * hold_ms passes. How many the server closed. */
int attack_idle(int port, int n, int hold_ms);

/* What the frame attacks below return when the server closed the
 * connection without a reply, or it could not be made: under a flood the
 * server drops the oldest connection still waiting to authenticate, which
 * may be this one (store_server.c), and refuses connections past its cap.
 * A defence, not an answer. */
#define ATTACK_DROPPED (-2)

/* A HELLO header claiming a 2 GiB token: the server's reply status (BAD),
 * ATTACK_DROPPED, or -1 when it kept the connection. */
int attack_oversize(int port);

/* A HELLO with token_len wrong bytes: the reply status (DENIED),
 * ATTACK_DROPPED, or -1. */
int attack_wrong_token(int port, int token_len);

/* A SET before any HELLO: the reply status (DENIED), ATTACK_DROPPED, or -1. */
int attack_no_hello(int port);

/* Half a header, then the write side shut (a half-open connection); the
 * server must close it. 0 when it did within limit_ms, else -1. Also plays
 * a connection reset (SO_LINGER 0) in the middle of a frame. */
int attack_half_open(int port, int limit_ms);

#endif
