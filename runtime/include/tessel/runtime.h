/*===- runtime.h - Tessel runtime C ABI ----------------------------------===*
 *
 * The contract between generated code, the launcher and every backend. It is
 * backend-neutral: buffers are device memory (host memory on the CPU
 * backend), kernels and copies are issued on the rank's stream and may run
 * asynchronously (the CPU backend runs them at once); tessel_synchronize
 * waits for them. A CUDA/NCCL backend fills the same ABI without changing
 * generated code or the launcher.
 *
 * Shapes are int64_t; element types are tessel_dtype codes. Kernels compute
 * in f32 (f64 for f64 tensors); f16/bf16 tensors are stored in 16 bits and
 * converted on load/store (round to nearest even).
 *
 *===----------------------------------------------------------------------===*/

#ifndef TESSEL_RUNTIME_H
#define TESSEL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: training (backward kernels, optimizer update, tessel_zero, the
 * microbatch counter) and the model description's entries, grads, states
 * and grad_scale.
 * 3: multi-rank execution: the device mesh and comm kind of a context, the
 * local (threads) and MPI worlds, collectives over mesh-axis groups and
 * their counters.
 * 4: mixed precision with f32 master weights: under --precision bf16 a
 * trained parameter is stored in bf16 with an f32 master copy among its
 * optimizer states (the description's "master_of"), updated by
 * tessel_optimizer_update_master, and a gradient's dtype may differ from
 * its parameter's (f32 for a bf16 parameter). Descriptions 1 to 3 still
 * load.
 * 5: asynchronous collectives: tessel_*_start and tessel_comm_wait /
 * tessel_comm_wait_all, with which generated code overlaps a collective
 * with the kernels after it; their counters (tessel_comm_async_bytes).
 * Descriptions 1 to 4 still load.
 * 6: tessel_matmul_epilogue, a GEMM that accumulates into its output
 * (beta 1) and adds a bias, which tessel-fuse-epilogues uses in place of a
 * matmul and the add after it; TESSEL_COMM_TCP (one process per rank,
 * joined by a TCP rendezvous, as under torchrun) and the options'
 * rendezvous_host/port/key. Descriptions 1 to 5 still load.
 * 7: tessel_matmul_epilogue_aux, the GELU epilogues (a linear layer's
 * bias and tanh GELU in its GEMM, keeping the pre-activation; the GELU's
 * gradient applied to the GEMM that computes its input gradient) and the
 * bias-gradient epilogue (a weight gradient's GEMM also sums its bias
 * gradient).
 * 8: tessel_fill, a splat constant written from one host element (before,
 * a strided copy read it from the .so with stride 0, which a GPU cannot).
 * 9: tessel_dropout_current, tessel_dropout_block_current,
 * tessel_optimizer_update_current and tessel_optimizer_update_master_current:
 * the step (and the learning rate, from a tessel_lr_schedule) are read
 * from the context when the kernel runs instead of passed by the caller
 * when it is issued, so a step captured once (tessel_graph_begin) replays
 * with each launch's step. Generated code no longer calls tessel_get_step
 * or tessel_lr_at; consecutive updates that share their constants are one
 * tessel_optimizer_update_group_current (one kernel on a GPU). Descriptions
 * 1 to 8 still load (their entries remain).
 * 10: tessel_add_layer_norm and tessel_layer_norm_grad_add, a residual add
 * and the layer (or RMS) norm of its sum in one pass, and the norm's
 * gradient added to the residual stream's, which tessel-fuse-epilogues
 * uses in place of tessel_binary beside tessel_layer_norm(_grad).
 * Descriptions 1 to 9 still load.
 * 11: tessel_attention_lse and tessel_attention_grad_lse: the forward also
 * writes each query row's log-sum-exp, and the backward reads it and the
 * forward's output instead of running the forward again (flash-attention
 * 2's saved statistics). Descriptions 1 to 10 still load: their
 * tessel_attention_grad recomputes both.
 * 12: tessel_matmul_accumulate_f32, a 16-bit GEMM summed into an f32
 * output (a bf16 weight gradient added into its f32 gradient buffer by
 * the GEMM: Megatron's gradient-accumulation fusion), optionally with its
 * bias gradient in f32. Descriptions 1 to 11 still load.
 * 13: the loss's fusions. tessel_cross_entropy_f32 and
 * tessel_cross_entropy_grad_f32, the cross-entropy of 16-bit logits with
 * the loss in f32 (the widening cast before the loss and the rounding
 * after its gradient, folded into the two kernels: no f32 copy of the
 * logits or of their gradient); tessel_cross_entropy_with_grad, a training
 * step's loss and its gradient from one reading of each row's statistics,
 * the gradient optionally written over the logits (llm.c's fused
 * classifier). Descriptions 1 to 12 still load.
 * 14: f32 gradients of 16-bit parameters written by their kernels:
 * tessel_layer_norm_grad_f32 and tessel_layer_norm_grad_add_f32 (a norm's
 * dgamma and dbeta) and tessel_embedding_grad_f32 (an embedding table's
 * gradient) sum in f32 or wider and round once, to f32, instead of to 16
 * bits for a cast to widen after (bf16 mixed precision). Descriptions 1 to
 * 13 still load.
 * 15: tessel_matmul_f32, a 16-bit GEMM written to an f32 output (a bf16
 * weight gradient that a data-parallel bucket reduces in f32, written
 * there by the GEMM instead of a 16-bit product and a cast), optionally
 * with its bias gradient in f32. Descriptions 1 to 14 still load.
 * 16: tessel_reduce_f32, a reduction of a 16-bit tensor written in f32 (a
 * bf16 bias or position-embedding gradient on its way to an f32 reduction
 * or buffer, instead of a 16-bit sum and a cast). Descriptions 1 to 15
 * still load.
 * 17: tessel_binary_broadcast, a binary op whose one operand is broadcast
 * along the rows or the columns of the other (a bias added after a
 * row-parallel all-reduce, a row statistic subtracted), read where it lies
 * instead of copied out to the full shape first. Descriptions 1 to 16
 * still load.
 * 18: an f64 model's update in f64: tessel_sum_squares_f64 and
 * tessel_clip_scale_f64 (the global norm and the clipping factor as f64
 * scalars) and tessel_optimizer_update_f64_group_current (f64 optimizer
 * states and gradient scale), where the states, the norm and the factor
 * were f32 and rounded an f64 model's update to f32 precision.
 * Descriptions 1 to 17 still load (their f32 states and scalars).
 * 19: tessel_rope, the rotary position embedding of queries and keys
 * (nn.rope) and, by the negative angle, its gradient. Descriptions 1 to 18
 * still load.
 * 20: tessel_attention_window and tessel_attention_grad_window, causal
 * attention over a sliding window of keys (nn.attention's `window`:
 * Mistral's, Gemma's local layers). Descriptions 1 to 19 still load.
 * 21: tessel_mask_labels, the labels of a cross-entropy that ignores
 * positions (nn.cross_entropy's `ignore_index`: fine-tuning's -100) and
 * the weight of each. Descriptions 1 to 20 still load.
 * 22: the "loss_count" role, a scalar a model returns after its loss (a
 * mean over labelled positions returns their sum and their count): the
 * launcher divides the sum of a step's losses by the sum of their counts
 * and scales the gradients by one over it, so that the step's loss is one
 * mean over every microbatch's positions. Descriptions 1 to 21 still
 * load.
 * 23: tessel_set_layer and tessel_get_layer, the model's layer the next
 * kernels belong to: per-layer attention windows and rope thetas
 * (alternating local and global layers: Gemma 2 and 3, Command R7B) are
 * read from a table by the layer's index. Descriptions 1 to 22 still
 * load.
 * 24: tessel_attention_softcap and tessel_attention_grad_softcap,
 * attention whose scaled scores are soft-capped, cap · tanh(s / cap),
 * before the mask (nn.attention's `softcap`: Gemma 2's
 * attn_logit_softcapping). Descriptions 1 to 23 still load.
 * 25: tessel_rope_yarn, rope under YaRN's frequency scaling (nn.rope's
 * `yarn`: Hugging Face's rope_type "yarn", Qwen's long contexts).
 * Descriptions 1 to 24 still load.
 * 26: tessel_rope_factors, rope over the first rotary_dim elements of each
 * head (nn.rope's `rotary_dim`: a partial rope) with each pair's frequency
 * divided by its own factor (nn.rope's `longrope`: Hugging Face's
 * rope_type "longrope", Phi-3's 128k contexts) and cos and sin by an
 * attention factor (nn.rope's `attention_factor`). Descriptions 1 to 25
 * still load.
 * 27: tessel_cross_entropy_softcap, tessel_cross_entropy_grad_softcap and
 * tessel_cross_entropy_with_grad_softcap, the loss of soft-capped logits
 * and its gradient with the cap inside the kernels (nn.cross_entropy's
 * `logit_softcap`: Gemma 2's final_logit_softcapping, with no capped copy
 * of the logits). Descriptions 1 to 26 still load.
 * 28: tessel_cross_entropy_smoothed, tessel_cross_entropy_grad_smoothed and
 * tessel_cross_entropy_with_grad_smoothed, the loss of a label-smoothed
 * target and its gradient inside the kernels (nn.cross_entropy's
 * `label_smoothing`: PyTorch's, with no logits-sized term of its own),
 * with or without a logit soft cap. Descriptions 1 to 27 still load.
 * 29: tessel_vocab_loss_stats and tessel_vocab_loss_grad, the
 * vocabulary-parallel cross-entropy's block statistics and gradient in one
 * pass each (Megatron's fused vocab-parallel loss: no exponentials of the
 * block stored), with the logit soft cap and label smoothing inside.
 * Descriptions 1 to 28 still load.
 * 30: tessel_vocab_loss_stats_f32 and tessel_vocab_loss_grad_f32, the
 * vocabulary-parallel kernels of 16-bit logits with f32 statistics (an f32
 * loss of bf16 logits split over the vocabulary, mixed precision's: no
 * f32 copy of the block). Descriptions 1 to 29 still load.
 * 31: tessel_attention_block and tessel_attention_grad_block, causal
 * attention over a block of the queries at a query offset, and
 * tessel_rope_block, tessel_rope_yarn_block and tessel_rope_factors_block,
 * rope from a first position (context parallelism: a rank's block of the
 * sequence against every key). Descriptions 1 to 30 still load. */
#define TESSEL_ABI_VERSION 31

typedef enum tessel_dtype {
  TESSEL_F32 = 0,
  TESSEL_F16 = 1,
  TESSEL_BF16 = 2,
  TESSEL_F64 = 3,
  TESSEL_I32 = 4,
  TESSEL_I64 = 5,
} tessel_dtype;

/* Bytes of one element of `dtype` (0 for an unknown code). */
int64_t tessel_dtype_size(int32_t dtype);

/*===--- Context ---------------------------------------------------------===*/

typedef enum tessel_backend {
  TESSEL_BACKEND_CPU = 0,
  TESSEL_BACKEND_CUDA = 1,
} tessel_backend;

#define TESSEL_MAX_MESH_AXES 8

typedef enum tessel_comm_kind {
  TESSEL_COMM_NONE = 0,  /* world_size must be 1 */
  TESSEL_COMM_LOCAL = 1, /* ranks are threads of one process (shared memory) */
  TESSEL_COMM_MPI = 2,   /* one process per rank, MPI_COMM_WORLD */
  TESSEL_COMM_TCP = 3,   /* one process per rank, TCP rendezvous (torchrun) */
} tessel_comm_kind;

/* The shared state of world_size ranks that are threads of one process.
 * Create once, pass to every rank's tessel_ctx_create, destroy after every
 * ctx is destroyed. Null for world_size < 1. */
typedef struct tessel_local_world tessel_local_world;
tessel_local_world *tessel_local_world_create(int32_t world_size);
void tessel_local_world_destroy(tessel_local_world *world);
/* A rank that fails calls this: every rank waiting in (or later entering) a
 * collective, tessel_send or tessel_recv of this world returns at once with
 * the error "rank R failed: MSG" recorded on its ctx (no hang). The first
 * abort's rank and message are the ones reported. */
void tessel_local_world_abort(tessel_local_world *world, int32_t rank,
                              const char *message);

/* MPI: MPI_Init (if not yet) and this process's rank/size; 0 on success,
 * non-zero with tessel_error(NULL) set when the runtime was built without
 * MPI. Finalize once at exit (after destroying every MPI context). */
int32_t tessel_mpi_init(int32_t *rank, int32_t *world_size);
void tessel_mpi_finalize(void);
/* MPI_Abort(MPI_COMM_WORLD, code); without MPI, exits the process with
 * `code`. */
void tessel_mpi_abort(int32_t code);

typedef struct tessel_ctx_options {
  int32_t backend;    /* tessel_backend */
  int32_t rank;       /* this rank, in [0, world_size) */
  int32_t world_size; /* number of ranks */
  int32_t device;     /* device ordinal (CUDA); ignored on CPU */
  int32_t comm;       /* tessel_comm_kind */
  int32_t mesh_rank;  /* mesh axes; 0 = one axis of world_size */
  int64_t mesh_shape[TESSEL_MAX_MESH_AXES]; /* product == world_size */
  tessel_local_world *local_world;          /* TESSEL_COMM_LOCAL */
  double comm_timeout_seconds; /* a collective waiting longer fails; 0 = 600 */
  /* The backend by name ("cpu"); null: the one `backend` names (so a
   * zero-initialised struct is the CPU backend). When both are set they must
   * agree. An unknown name fails tessel_ctx_create. */
  const char *backend_name;
  /* TESSEL_COMM_TCP: rank 0 listens on rendezvous_port (all interfaces),
   * the others connect to rendezvous_host:rendezvous_port (null: 127.0.0.1)
   * and present rendezvous_key (null: ""), which strangers lack. Creation
   * is collective and bounded by comm_timeout_seconds. */
  const char *rendezvous_host;
  int32_t rendezvous_port;
  const char *rendezvous_key;
} tessel_ctx_options;
/* (Zero-initialised new fields keep old callers working: comm NONE, world
 * 1.) */

typedef struct tessel_ctx tessel_ctx;

/* Creates the context of one rank; null on failure (see tessel_error). The
 * CPU backend pins OpenBLAS to one thread per rank so ranks-as-threads do
 * not oversubscribe the cores. Fails on a mesh whose product is not
 * world_size, a comm kind that does not fit the world (NONE with more than
 * one rank, LOCAL without a world of world_size ranks or with a rank that
 * already has a context there, MPI without MPI or with a rank/size other
 * than MPI_COMM_WORLD's, TCP with a port outside [1, 65535] or a rendezvous
 * that fails or times out). An MPI context creation is collective: every
 * rank creates its context (it splits MPI_COMM_WORLD into the mesh axes'
 * groups); so is a TCP one (the rendezvous connects every pair of ranks). */
tessel_ctx *tessel_ctx_create(const tessel_ctx_options *options);
void tessel_ctx_destroy(tessel_ctx *ctx);
/* The name of the context's backend ("cpu"); null for a null ctx. */
const char *tessel_ctx_backend(const tessel_ctx *ctx);
/* 1 when the backend called `name` (null: "cpu") is compiled in and can run
 * on this host, else 0: a launcher checks before it starts ranks. */
int32_t tessel_backend_available(const char *name);
int32_t tessel_ctx_rank(const tessel_ctx *ctx);
int32_t tessel_ctx_world_size(const tessel_ctx *ctx);

/*===--- Mesh and collectives --------------------------------------------===*
 *
 * Rank r's coordinates on a mesh of shape [s_0 .. s_{n-1}] are row-major
 * (last axis fastest). On a null ctx, an axis outside the mesh or a mask
 * naming one, tessel_ctx_mesh_size returns 0 and the coordinate and group
 * queries return -1.
 *===----------------------------------------------------------------------===*/

/* Mesh axes of the context: 1 when created with mesh_rank 0. */
int32_t tessel_ctx_mesh_rank(const tessel_ctx *ctx);
int64_t tessel_ctx_mesh_size(const tessel_ctx *ctx, int32_t axis);
int64_t tessel_ctx_mesh_coord(const tessel_ctx *ctx, int32_t axis);
/* A group: `axes` is a bit mask of mesh axes (bit i = axis i). The group of
 * a rank is the ranks whose coordinates agree with it on every axis NOT in
 * the mask; its size is the product of the sizes of the masked axes; a
 * rank's index in its group is the row-major linearisation of its
 * coordinates on the masked axes (lower axis index = slower). axes == 0: a
 * group of one. */
int64_t tessel_group_size(const tessel_ctx *ctx, uint32_t axes);
int64_t tessel_group_index(const tessel_ctx *ctx, uint32_t axes);

/* Collectives, blocking, over the calling rank's group for `axes`; every
 * member must make the same call (same collective, dtype, kind and shape),
 * and the members' calls on one group run in the same order. Tensors are
 * row-major with `rank_` dims `shape` (the LOCAL INPUT shape); `dim` a
 * tensor dimension. G = group size, g = this rank's group index. `kind` is
 * tessel_reduce_kind (SUM, MEAN = sum / G, MAX; MAX propagates NaN).
 * Reductions add in group-index order 0..G-1 in f32 (f64 for f64; f16/bf16
 * rounded once at the end; i32/i64 in int64, wrapping, MEAN truncating
 * toward zero) so every rank of a group gets bit-identical results, on
 * either comm kind. in == out allowed for all_reduce only. Errors (timeout,
 * a failed peer, bad arguments, members disagreeing on the arguments) go to
 * tessel_error(ctx); after one, the group's state is undefined: the caller
 * aborts (tessel_local_world_abort, tessel_mpi_abort). On MPI a timeout
 * leaves the collective pending, so the process must abort. */
void tessel_all_reduce(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int64_t count, int32_t kind);
/* out has shape[dim] * G along dim; g' 's input is block g' along dim. */
void tessel_all_gather(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t dim);
/* shape[dim] % G == 0; out = block g (of shape[dim]/G) along dim of the
 * group's reduction. */
void tessel_reduce_scatter(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                           const void *in, void *out, int32_t rank_,
                           const int64_t *shape, int32_t dim, int32_t kind);
/* upstream shard.all_to_all: split `in` along split_dim into G blocks,
 * block j goes to group index j; out = the G received blocks concatenated
 * along concat_dim in group-index order (shape[split_dim] % G == 0; out's
 * concat_dim is shape[concat_dim] * G). */
void tessel_all_to_all(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                       const void *in, void *out, int32_t rank_,
                       const int64_t *shape, int32_t split_dim,
                       int32_t concat_dim);
/* No communication: out = block g along dim of in (shape[dim] % G == 0)
 * (shard.all_slice). */
void tessel_all_slice(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                      const void *in, void *out, int32_t rank_,
                      const int64_t *shape, int32_t dim);

/* Asynchronous collectives. Each *_start takes its blocking counterpart's
 * arguments (`shape` is copied before it returns), checks them the same
 * way and returns once the collective is issued; it then runs in the
 * rank's order of collective calls (started or blocking: a blocking call
 * waits for the ones started before it) while the caller goes on issuing
 * kernels. Until it has completed, its `in` must not be written and its
 * `out` neither read nor written. tessel_comm_wait(ctx, out) returns once
 * every started collective whose output is `out` has completed (at once
 * when none is pending); tessel_comm_wait_all(ctx) once every started
 * collective has. Errors are the blocking call's, recorded on
 * tessel_error(ctx) by the time the wait returns; after one, the
 * collectives issued after it may not run (the group's state is undefined
 * and the caller aborts, as after a failed blocking call). On a backend
 * whose kernels run asynchronously (CUDA), completed means in stream
 * order, as for a kernel: the rank's later kernels and copies see the
 * output, and the wait does not block the host. tessel_send, tessel_recv
 * and tessel_ctx_destroy wait for every started collective first. On a
 * backend whose communicator cannot overlap (MPI without thread support) a
 * start runs the collective before returning. */
void tessel_all_reduce_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int64_t count,
                             int32_t kind);
void tessel_all_gather_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int32_t rank_,
                             const int64_t *shape, int32_t dim);
void tessel_reduce_scatter_start(tessel_ctx *ctx, uint32_t axes,
                                 int32_t dtype, const void *in, void *out,
                                 int32_t rank_, const int64_t *shape,
                                 int32_t dim, int32_t kind);
void tessel_all_to_all_start(tessel_ctx *ctx, uint32_t axes, int32_t dtype,
                             const void *in, void *out, int32_t rank_,
                             const int64_t *shape, int32_t split_dim,
                             int32_t concat_dim);
void tessel_comm_wait(tessel_ctx *ctx, const void *out);
void tessel_comm_wait_all(tessel_ctx *ctx);

typedef enum tessel_collective {
  TESSEL_COLL_ALL_REDUCE = 0,
  TESSEL_COLL_ALL_GATHER = 1,
  TESSEL_COLL_REDUCE_SCATTER = 2,
  TESSEL_COLL_ALL_TO_ALL = 3,
  TESSEL_NUM_COLLECTIVES = 4,
} tessel_collective;
/* Counters per (collective, axes mask), zeroed by tessel_reset_counters.
 * bytes = the payload: all_reduce count·size; all_gather the OUTPUT bytes;
 * reduce_scatter the INPUT bytes; all_to_all the input bytes. all_slice and
 * groups of size 1 count nothing (a call on a group of one is a local
 * copy). A call counts once it has completed without error. */
int64_t tessel_comm_bytes(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes);
int64_t tessel_comm_calls(const tessel_ctx *ctx, int32_t collective,
                          uint32_t axes);
/* Of tessel_comm_bytes, the bytes of the collectives started with a
 * *_start call (the communication the program overlaps with compute). */
int64_t tessel_comm_async_bytes(const tessel_ctx *ctx, int32_t collective,
                                uint32_t axes);

/*===--- Point-to-point --------------------------------------------------===*
 *
 * Messages between two ranks of the world (pipeline stages passing
 * activations and their gradients). The launcher calls these; generated
 * code does not (they are not in runtime_abi.def, and a model's ABI version
 * does not depend on them). `peer` is a world rank other than the caller's;
 * `buf` is device memory of `bytes` (>= 0) bytes. Messages from one rank to
 * another match by `tag` (any int64): several may be in flight, and the
 * receiver takes them in any order; two with the same tag arrive in the
 * order they were sent. Errors go to tessel_error(ctx), as a collective's
 * do: a bad peer (itself, outside the world, or any peer on a context
 * without a communicator), a size mismatch, a timeout, a failed rank (after
 * tessel_local_world_abort every rank waiting in, or later entering, send or
 * recv on that world stops with "rank R failed: MSG"). After a timeout or a
 * mismatch the pair's state is undefined: the caller aborts, as after a
 * failed collective.
 *===----------------------------------------------------------------------===*/

/* Non-blocking from the caller's view: takes a copy of `bytes` bytes of
 * `buf` and returns without waiting for the receiver (buf may be reused at
 * once). */
void tessel_send(tessel_ctx *ctx, int32_t peer, int64_t tag, const void *buf,
                 int64_t bytes);
/* Blocks until the message from `peer` with `tag` has arrived in `buf`. A
 * message of another size than `bytes` is an error naming both sizes, the
 * peer and the tag (the message is consumed). Waiting past the context's
 * comm_timeout_seconds is an error naming the peer, the tag and the
 * context's microbatch (tessel_set_microbatch). */
void tessel_recv(tessel_ctx *ctx, int32_t peer, int64_t tag, void *buf,
                 int64_t bytes);

typedef enum tessel_p2p_direction {
  TESSEL_P2P_SENT = 0,
  TESSEL_P2P_RECEIVED = 1,
} tessel_p2p_direction;
/* Payload bytes and calls per (peer, direction) of the sends and receives
 * that completed without error; zeroed by tessel_reset_counters. 0 for a
 * null ctx, a peer outside the world or an unknown direction. */
int64_t tessel_p2p_bytes(const tessel_ctx *ctx, int32_t peer,
                         int32_t direction);
int64_t tessel_p2p_calls(const tessel_ctx *ctx, int32_t peer,
                         int32_t direction);

/* The training step the next kernels belong to (0 at creation). Counter-
 * based randomness (dropout) reads it, so every step draws fresh masks and a
 * restarted run draws the same ones. */
void tessel_set_step(tessel_ctx *ctx, uint64_t step);
uint64_t tessel_get_step(const tessel_ctx *ctx);

/* The microbatch of the step the next kernels belong to (0 at creation).
 * Dropout in microbatch m of n elements draws the mask of elements
 * m·n .. m·n + n − 1, so M microbatches of a batch-major tensor draw the
 * masks one batch of M times the size would. */
void tessel_set_microbatch(tessel_ctx *ctx, uint64_t microbatch);
uint64_t tessel_get_microbatch(const tessel_ctx *ctx);

/* Whether dropout drops (1, at creation) or is the identity (0: evaluation,
 * PyTorch's model.eval(); tessel-run --eval and --eval-every set it). Read
 * when a dropout is issued; refused while capturing a graph. The launcher's
 * switch, not generated code's. */
void tessel_set_dropout(tessel_ctx *ctx, int32_t enabled);
int32_t tessel_get_dropout(const tessel_ctx *ctx);

/* The random stream the next kernels draw from (0 at creation): dropout's
 * bits are a function of (seed, step, element, stream). Code outside any
 * repeated layer draws from stream 0; layer l of an nn.repeat whose layer
 * draws random bits runs on tessel_fold_in(caller's stream, l), so every
 * layer of a repeat, nested ones included, draws its own masks, and a
 * layer's backward and recomputation draw those of its forward (JAX's
 * fold_in on a PRNG key). */
void tessel_set_rng_stream(tessel_ctx *ctx, uint64_t stream);
uint64_t tessel_get_rng_stream(const tessel_ctx *ctx);
/* A stream derived from `stream` and `data`, distinct from both (a pure
 * function). */
uint64_t tessel_fold_in(uint64_t stream, int64_t data);

/* The model's layer the next kernels belong to (0 at creation): an
 * nn.repeat whose layer holds per-layer attributes (an attention's
 * `layer_windows`, a rope's `layer_thetas`) sets it to each layer's index
 * in the model (a pipeline stage's first layer added) and restores the
 * caller's after its loop; those ops read their layer's entry of the table
 * (ABI 23). */
void tessel_set_layer(tessel_ctx *ctx, int64_t layer);
int64_t tessel_get_layer(const tessel_ctx *ctx);

/* The first error a kernel recorded on this context (e.g. a label out of
 * range), or null. Errors are sticky until tessel_clear_error. */
const char *tessel_error(const tessel_ctx *ctx);
void tessel_clear_error(tessel_ctx *ctx);

/*===--- Memory and copies -----------------------------------------------===*/

/* Device memory, 64-byte aligned, zero-filled; null on failure. */
void *tessel_alloc(tessel_ctx *ctx, int64_t bytes);
void tessel_free(tessel_ctx *ctx, void *ptr);
void tessel_copy_to_device(tessel_ctx *ctx, void *dst, const void *src,
                           int64_t bytes);
void tessel_copy_to_host(tessel_ctx *ctx, void *dst, const void *src,
                         int64_t bytes);
/* Device to device; dst == src is a no-op (an in-place result's copy). */
void tessel_copy(tessel_ctx *ctx, void *dst, const void *src, int64_t bytes);
/* Fills `bytes` bytes of device memory at dst with zero (e.g. the gradient
 * accumulators before a step). */
void tessel_zero(tessel_ctx *ctx, void *dst, int64_t bytes);
void tessel_synchronize(tessel_ctx *ctx);

/*===--- Counters --------------------------------------------------------===*/

typedef struct tessel_counters {
  int64_t kernel_calls;  /* kernels issued */
  double kernel_seconds; /* time spent in kernels (CPU: wall time) */
  int64_t bytes_copied;  /* bytes moved by tessel_copy* */
  int64_t bytes_allocated;      /* device bytes held (tessel_alloc, as asked) */
  int64_t peak_bytes_allocated; /* the most bytes_allocated has been */
} tessel_counters;

void tessel_get_counters(const tessel_ctx *ctx, tessel_counters *out);
/* Zeroes the activity counters, the collectives' counters
 * (tessel_comm_bytes, tessel_comm_calls, tessel_comm_async_bytes) and the
 * point-to-point ones
 * (tessel_p2p_bytes, tessel_p2p_calls); the allocation counters keep
 * counting what is held. */
void tessel_reset_counters(tessel_ctx *ctx);

/*===--- Captured steps --------------------------------------------------===*
 *
 * A training step captured once and launched every step after (CUDA
 * graphs on the CUDA backend, so a step costs one launch instead of a
 * launch per kernel). Between tessel_graph_begin and tessel_graph_end the
 * kernels, device copies and collectives a context is given are captured
 * and not run; tessel_graph_launch runs them again, in order, with the
 * arguments they were given when captured. What changes between steps must
 * therefore be read when the work runs: the step (tessel_set_step before
 * each launch; the _current entries read it), and inputs copied into the
 * arena from device memory. tessel_copy_to_device while capturing captures
 * the host bytes as they are at the call (a constant). Calls that read
 * back, wait, allocate, free, set the step, initialise parameters, reset
 * the counters, trace or send and receive are refused while capturing (an
 * error naming the entry point). A failed capture records its error and
 * returns null. The CPU backend records the calls and replays them, so
 * what a capture fixed shows up there as a wrong result, without a GPU.
 * Each launch adds the captured work's kernel, copy and collective counts
 * to the context's counters; a capture adds nothing. Not part of the model
 * ABI: only launchers call these.
 *===----------------------------------------------------------------------===*/
typedef struct tessel_graph tessel_graph;
/* Starts capturing ctx's work: 0, or non-zero with the error recorded (a
 * capture already running, an error already recorded, a backend that
 * cannot). Started collectives still in flight complete first. */
int32_t tessel_graph_begin(tessel_ctx *ctx);
/* Ends the capture: the graph (the caller destroys it), or null with the
 * error recorded (no capture, or one that failed: then nothing is kept). */
tessel_graph *tessel_graph_end(tessel_ctx *ctx);
/* Runs the captured work once on ctx (the context it was captured on),
 * asynchronously on an asynchronous backend (tessel_synchronize waits). */
void tessel_graph_launch(tessel_ctx *ctx, tessel_graph *graph);
/* Frees a graph (null: nothing). Before its context is destroyed. */
void tessel_graph_destroy(tessel_graph *graph);

/*===--- Trace -----------------------------------------------------------===*/

/* A rank's timeline, for profiling and for checking what overlapped: while a
 * context traces, it records every kernel it issues, every collective from
 * its call or start to its completion (a started one on the CPU completes
 * on the comm thread; on a stream it completes, as far as the host knows, at
 * its wait) and every wait. Times are seconds since tessel_trace_begin
 * (steady clock). Not part of the model ABI: only launchers call these. */
typedef enum tessel_trace_kind {
  TESSEL_TRACE_KERNEL = 0,     /* a kernel the rank's thread issued */
  TESSEL_TRACE_COLLECTIVE = 1, /* a collective, call (or start) to done */
  TESSEL_TRACE_WAIT = 2,       /* the rank's thread in tessel_comm_wait* */
} tessel_trace_kind;

typedef struct tessel_trace_event {
  int32_t kind;       /* tessel_trace_kind */
  int32_t started;    /* collective: 1 when started with a *_start call */
  const char *name;   /* the entry point (static storage) */
  int32_t collective; /* collective: tessel_collective */
  uint32_t axes;      /* collective: the axes mask */
  int64_t bytes;      /* collective: payload bytes, as counted */
  double begin, end;  /* seconds since tessel_trace_begin */
  /* A started collective: the kernels the rank issued between its start and
   * the wait that completed it (-1 before that wait). */
  int64_t kernels_between;
} tessel_trace_event;

/* Starts a new trace of at most max_events events (later ones are counted
 * by tessel_trace_dropped, not kept), after the collectives started before
 * it complete; 0 on success. */
int32_t tessel_trace_begin(tessel_ctx *ctx, int64_t max_events);
/* Stops recording once the started collectives complete; the events stay
 * readable until the next tessel_trace_begin or the context's end. */
void tessel_trace_end(tessel_ctx *ctx);
int64_t tessel_trace_count(const tessel_ctx *ctx);
int64_t tessel_trace_dropped(const tessel_ctx *ctx);
/* Event `index` (in the order recorded) into *out; 0 on success. */
int32_t tessel_trace_get(const tessel_ctx *ctx, int64_t index,
                         tessel_trace_event *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The kernels: parameter initialisation and forward, */
#include "runtime_kernels.h"
/* then backward and the optimizers. */
#include "runtime_grad.h"

#endif /* TESSEL_RUNTIME_H */
