/*
 * ringmaster_shim.h: the worker shim's C API, for Python (ctypes) or any
 * language with a C FFI. Links against libringmaster_shim.so.
 *
 * A handle is one worker of one elastic job: it joins the coordinator,
 * builds the communicator (Gloo or NCCL) for each membership generation and
 * keeps the registered state across changes. Typical loop:
 *
 *   rm_shim* s = rm_shim_create(NULL, NULL, NULL, 4, "gloo");  // from env
 *   rm_shim_register(s, "weights", w, sizeof w);
 *   if (rm_shim_start(s) != RM_OK) fail(rm_shim_last_error(s));
 *   while (!done) {
 *     ... compute gradients ...
 *     if (rm_shim_allreduce(s, g, n, RM_FLOAT64, RM_SUM) != RM_OK) {
 *       if (rm_shim_recover(s) == RM_REMOVED) break;  // rolled back
 *       continue;
 *     }
 *     ... apply, then every few steps: rm_shim_commit(s, step, position);
 *     if (rm_shim_step_boundary(s) == RM_REMOVED) break;
 *   }
 *   rm_shim_leave(s, done); rm_shim_destroy(s);
 *
 * The job's key-value store (rm_shim_kv_*) is scoped to one generation:
 * the coordinator keeps the current generation's keys only, so a call for
 * an older generation fails ("stale generation"). Python's
 * torch.distributed.Store over it is python/ringmaster/torch/store.py.
 *
 * Threads: one thread drives a handle. Errors: functions return an
 * rm_status; rm_shim_last_error() says what went wrong (valid until the next
 * call on the handle). A handle whose creation failed returns RM_ERROR from
 * every call.
 */
#ifndef RINGMASTER_WORKER_SHIM_RINGMASTER_SHIM_H_
#define RINGMASTER_WORKER_SHIM_RINGMASTER_SHIM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rm_shim rm_shim;

typedef enum {
  RM_OK = 0,        /* done; for step_boundary: no membership change */
  RM_ERROR = 1,     /* see rm_shim_last_error */
  RM_REFORMED = 2,  /* a new generation is in place (state synced) */
  RM_REMOVED = 3    /* this worker is no longer a member: stop */
} rm_status;

typedef enum { RM_FLOAT32 = 0, RM_FLOAT64 = 1, RM_INT64 = 2 } rm_dtype;
typedef enum { RM_SUM = 0, RM_MAX = 1 } rm_op;

/* Any of coordinator / job / worker may be NULL: then RINGMASTER_COORDINATOR,
 * RINGMASTER_JOB, RINGMASTER_WORKER from the environment are used (what
 * `ringmaster shim run --mode inprocess` sets). backend: "gloo" or "nccl"
 * (NULL = "gloo"). Never returns NULL (except out of memory). */
rm_shim* rm_shim_create(const char* coordinator, const char* job,
                        const char* worker, int desired_workers,
                        const char* backend);
void rm_shim_destroy(rm_shim* shim);
const char* rm_shim_last_error(const rm_shim* shim);

/* How long the shim waits for a generation this worker is a member of: in
 * rm_shim_start (to be admitted: the whole gang must join), and at every
 * membership change (rm_shim_recover, a step boundary's re-formation).
 * 60 s unless RINGMASTER_MEMBERSHIP_TIMEOUT (seconds, or a duration such as
 * "90s", "2m") was set when the handle was created; this call changes it
 * for the waits that begin afterwards (ms > 0). When it runs out the call
 * fails: UNAVAILABLE naming the coordinator's address and why it cannot be
 * reached (never reached, or lost), or DEADLINE_EXCEEDED saying what the
 * coordinator has of the job (a gang still forming, a standby). */
rm_status rm_shim_set_membership_timeout(rm_shim* shim, int64_t ms);
int64_t rm_shim_membership_timeout_ms(const rm_shim* shim);

/* Registers caller-owned state (same names and sizes on every worker),
 * before rm_shim_start. */
rm_status rm_shim_register(rm_shim* shim, const char* name, void* data,
                           size_t bytes);
/* Waits to be a member, forms the communicator, syncs state. */
rm_status rm_shim_start(rm_shim* shim);

rm_status rm_shim_allreduce(rm_shim* shim, void* data, size_t count,
                            rm_dtype dtype, rm_op op);
rm_status rm_shim_broadcast(rm_shim* shim, void* data, size_t bytes, int root);
rm_status rm_shim_barrier(rm_shim* shim);

rm_status rm_shim_commit(rm_shim* shim, int64_t step, int64_t position);
/* The training loop's measured speed in this generation: seconds per
 * optimizer step and global samples per step (0: unknown). The next
 * rm_shim_commit of the same generation sends it to the coordinator (rank 0),
 * which keeps the mean by the generation's size (GPUs, nodes) for the
 * scheduler's speed model; a re-formation drops an unsent one. RM_ERROR for
 * a negative, infinite or NaN value. */
rm_status rm_shim_report_step(rm_shim* shim, double seconds, double samples);
/* RM_OK, RM_REFORMED (planned change, no rollback) or RM_REMOVED. */
rm_status rm_shim_step_boundary(rm_shim* shim);
/* After a failed collective: RM_REFORMED (rolled back to the last commit) or
 * RM_REMOVED. */
rm_status rm_shim_recover(rm_shim* shim);
rm_status rm_shim_leave(rm_shim* shim, int finished);

/* Key-value store of `generation` (bytes in, bytes out). rm_shim_kv_get
 * with timeout_ms < 0 does not wait: RM_OK with *value == NULL when the key
 * is absent; with timeout_ms >= 0 it waits that long for the key (RM_ERROR
 * "DEADLINE_EXCEEDED ..." when it does not come). *value points into the
 * handle and stays valid until the next call on it. */
rm_status rm_shim_kv_set(rm_shim* shim, int64_t generation, const char* key,
                         const void* value, size_t bytes);
rm_status rm_shim_kv_get(rm_shim* shim, int64_t generation, const char* key,
                         int64_t timeout_ms, const void** value,
                         size_t* bytes);
rm_status rm_shim_kv_wait(rm_shim* shim, int64_t generation,
                          const char* const* keys, size_t count,
                          int64_t timeout_ms);

/* The last completed re-formation (what rm_shim_start, _step_boundary or
 * _recover did): times are Unix microseconds. */
typedef struct {
  int64_t generation;
  int rank;
  int world_size;
  int rolled_back;  /* the registered state was restored to the last commit */
  int sync_root;    /* rank the state was synced from; -1 = nobody had state */
  int reason;       /* api::Reason: 1 initial, 2 planned shrink, 3 grow,
                       4 failure, 5 recovery */
  int prepared;     /* the rendezvous ran ahead of the step boundary */
  int64_t published_unix_us;  /* coordinator published the generation */
  int64_t boundary_unix_us;   /* this worker began moving to it */
  int64_t formed_unix_us;     /* the new communicator works */
  int64_t synced_unix_us;     /* the registered state is synced */
} rm_reform_info;
/* RM_ERROR before the first re-formation. */
rm_status rm_shim_last_reform(rm_shim* shim, rm_reform_info* info);

/* For tests and demos: every later re-formation waits `ms` before its
 * rendezvous (so that a kill can land while the members are re-forming). */
rm_status rm_shim_set_reform_delay(rm_shim* shim, int ms);

/* The newest generation this worker has heard of (>= rm_shim_generation
 * once started; greater while a change is pending). */
int64_t rm_shim_latest_generation(const rm_shim* shim);

/* The newest generation that the coordinator published because a member
 * failed (0: none yet). Greater than rm_shim_generation: a peer of this
 * worker's communicator is gone, and a collective waiting on it elsewhere
 * (another library's communicator) should stop waiting. */
int64_t rm_shim_latest_failure_generation(const rm_shim* shim);

int rm_shim_rank(const rm_shim* shim);
int rm_shim_world_size(const rm_shim* shim);
int64_t rm_shim_generation(const rm_shim* shim);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* RINGMASTER_WORKER_SHIM_RINGMASTER_SHIM_H_ */
