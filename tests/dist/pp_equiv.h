/* Pipeline x data parallelism against one process (pp_equiv.c). */
#ifndef PP_EQUIV_H
#define PP_EQUIV_H

/* `pp_worker equiv MODEL D M [metis]` as every rank of a job of K*D ranks:
 * MODEL is mlp, drop (the MLP with dropout) or resnet. Returns the exit
 * status; failures exit through worker_check.h's FAIL. */
int pp_equiv_main(int argc, char **argv);

#endif /* PP_EQUIV_H */
