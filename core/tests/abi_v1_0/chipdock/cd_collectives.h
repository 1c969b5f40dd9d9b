/*
 * chipdock device ABI — collective communication types.
 *
 * The collectives group mirrors NCCL's shape so that NCCL, RCCL, HCCL, BKCL
 * and Gloo map onto it directly: one rank creates a unique id, every rank
 * receives it out of band (the core does that), each rank creates a
 * communicator for its device, and operations are enqueued on streams.
 * Calls between comm_group_start and comm_group_end are fused into one
 * launch (needed for send/recv pairs that would otherwise deadlock).
 */
#ifndef CHIPDOCK_CD_COLLECTIVES_H_
#define CHIPDOCK_CD_COLLECTIVES_H_

#include "chipdock/cd_base.h"

CD_EXTERN_C_BEGIN

/* Opaque bytes identifying one communicator clique. Sized like
 * ncclUniqueId so that it can carry one verbatim. */
#define CD_COMM_UNIQUE_ID_BYTES 128
typedef struct cd_comm_unique_id {
  char internal[CD_COMM_UNIQUE_ID_BYTES];
} cd_comm_unique_id;

/* Reduction operators. */
typedef int32_t cd_reduce_op_t;
#define CD_REDUCE_SUM 0
#define CD_REDUCE_PROD 1
#define CD_REDUCE_MAX 2
#define CD_REDUCE_MIN 3
#define CD_REDUCE_AVG 4

CD_EXTERN_C_END

#endif /* CHIPDOCK_CD_COLLECTIVES_H_ */
