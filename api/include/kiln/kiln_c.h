/* kiln's C API: the stable interface of libkiln.so.
 *
 *   kiln_runtime *rt;  kiln_module *m;  kiln_tensor *x, *y = NULL;
 *   kiln_status *s = kiln_runtime_create(NULL, &rt);          // NULL status = success
 *   s = kiln_runtime_load_file(rt, "model.mlir", &m);
 *   s = kiln_tensor_create(KILN_F32, shape, 2, &x);           // or kiln_tensor_wrap(your memory)
 *   s = kiln_module_call(m, NULL, &x, 1, &y, 1);               // JIT-compiles on the first call
 *   ... kiln_tensor_data(y) ...
 *   kiln_tensor_free(y); kiln_tensor_free(x); kiln_module_free(m); kiln_runtime_free(rt);
 *
 * Conventions:
 * - Every fallible function returns a kiln_status*: NULL on success, else an
 *   object with a code, a message and a location ("file:line:col" of the
 *   model, may be empty) that the caller frees with kiln_status_free.
 * - Objects are opaque handles; each *_create / *_load / *_call that hands
 *   one out gives the caller ownership, released with the matching *_free
 *   (every *_free accepts NULL). Strings returned as `const char *` belong to
 *   the object they came from and live as long as it.
 * - A module keeps what it needs of its runtime alive; tensors are
 *   reference-counted internally, so freeing a handle never invalidates
 *   another.
 * - Accessors that cannot fail (kiln_tensor_data, kiln_module_function_count,
 *   ...) take valid handles; NULL there is undefined, as in other C APIs.
 * - Thread-safety: runtimes and modules may be used from several threads at
 *   once; a tensor handle may be read from several threads, written by one.
 * - Only the C standard library is needed to include this header.
 */
#ifndef KILN_KILN_C_H
#define KILN_KILN_C_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/version.h"

#if defined(__GNUC__)
#define KILN_API __attribute__((visibility("default")))
#else
#define KILN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ---------------------------------------------------------------- */

typedef enum kiln_code {
  KILN_OK = 0,
  KILN_INVALID_ARGUMENT = 1,   /* bad input: a malformed model, wrong shapes or dtypes, bad options */
  KILN_UNSUPPORTED = 2,        /* well-formed, but kiln cannot run it (op, dtype, dialect) */
  KILN_COMPILE_FAILED = 3,     /* MLIR or LLVM failed on input kiln accepted */
  KILN_IO = 4,                 /* files, the disk cache */
  KILN_RESOURCE_EXHAUSTED = 5, /* memory, sizes that do not fit */
  KILN_CANCELLED = 6,          /* a cancelled call, or one past its deadline */
  KILN_UNAVAILABLE = 7,        /* a device that is not there; "busy": too many calls in flight */
  KILN_INTERNAL = 8            /* a kiln bug */
} kiln_code;

typedef struct kiln_status kiln_status;

KILN_API kiln_code kiln_status_code(const kiln_status *status);  /* KILN_OK for NULL */
KILN_API const char *kiln_status_message(const kiln_status *status);
KILN_API const char *kiln_status_location(const kiln_status *status); /* "" when unknown */
KILN_API void kiln_status_free(kiln_status *status);
/* "invalid argument", "unsupported", ... */
KILN_API const char *kiln_code_name(kiln_code code);

/* ---- Version --------------------------------------------------------------- */

/* The library's version, "MAJOR.MINOR.PATCH" (KILN_VERSION_STRING is the
 * headers'). */
KILN_API const char *kiln_version(void);

/* ---- Tensors --------------------------------------------------------------- */

typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F16 = 1,
  KILN_BF16 = 2,
  KILN_F64 = 3,
  KILN_I64 = 4,
  KILN_I32 = 5,
  KILN_I16 = 6,
  KILN_I8 = 7,
  KILN_U8 = 8,
  KILN_BOOL = 9 /* i1, one byte per element (0 or 1) */
} kiln_dtype;

/* "f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "ui8", "i1"; NULL if unknown. */
KILN_API const char *kiln_dtype_name(kiln_dtype dtype);
/* Bytes per element (0 if unknown). */
KILN_API size_t kiln_dtype_size(kiln_dtype dtype);

/* Marks a dynamic dimension in signatures. */
#define KILN_DYNAMIC (-1)

typedef struct kiln_tensor kiln_tensor;

/* A tensor with kiln-owned, zeroed, 64-byte aligned memory. */
KILN_API kiln_status *kiln_tensor_create(kiln_dtype dtype, const int64_t *shape, size_t rank,
                                         kiln_tensor **out);
/* A tensor over the caller's memory, without a copy. `bytes` must be the
 * tensor's size. kiln reads inputs in place (where the memory is aligned to
 * the element size; else a call copies it) and writes results into such a
 * tensor when it is given as a call's output. `release(release_ctx)` runs
 * once kiln holds no reference to the memory any more (NULL: the caller
 * keeps the memory alive until every call that used it has finished). On
 * an error `release` is never called. */
KILN_API kiln_status *kiln_tensor_wrap(kiln_dtype dtype, const int64_t *shape, size_t rank, void *data,
                                       size_t bytes, void (*release)(void *release_ctx), void *release_ctx,
                                       kiln_tensor **out);
/* A second handle to the same tensor (the memory is shared, not copied). */
KILN_API kiln_status *kiln_tensor_share(const kiln_tensor *tensor, kiln_tensor **out);
KILN_API void kiln_tensor_free(kiln_tensor *tensor);
KILN_API kiln_dtype kiln_tensor_dtype(const kiln_tensor *tensor);
KILN_API size_t kiln_tensor_rank(const kiln_tensor *tensor);
KILN_API const int64_t *kiln_tensor_shape(const kiln_tensor *tensor);
KILN_API int64_t kiln_tensor_element_count(const kiln_tensor *tensor);
KILN_API size_t kiln_tensor_byte_size(const kiln_tensor *tensor);
KILN_API void *kiln_tensor_data(const kiln_tensor *tensor);

/* ---- Options and the runtime ----------------------------------------------- */

typedef struct kiln_options kiln_options;

KILN_API kiln_options *kiln_options_create(void);
KILN_API void kiln_options_free(kiln_options *options);
/* Sets one option by name; the value is text (as the CLI and $KILN_*
 * variables spell it). An unknown name or a bad value is an
 * KILN_INVALID_ARGUMENT naming it. Names:
 *   threads            worker threads (0 = the machine's cores)
 *   compile_threads    threads one compile uses (0 = the machine's cores)
 *   cache_dir          persistent compile cache directory
 *   cache              off | ro | rw
 *   cache_max_bytes    e.g. 2G
 *   op_mode            per-op placement, e.g. "tosa.conv2d=kernel,*=auto"
 *   placement          measure | fixed (see README "Reproducible results")
 *   opt_level          0..3
 *   max_vector_bits    128 | 256 | 512 (0 = the host's widest)
 *   prefetch_bytes     how far ahead generated loops prefetch streamed weight
 *                      rows (0 = none; default $KILN_PREFETCH_BYTES, else 8192)
 *   memory_limit       bytes of tensor memory, e.g. 512M (0 = none)
 *   call_timeout       seconds a call may run (0 = no limit)
 *   max_in_flight      calls (sync and async) running at once per runtime (0 = no limit)
 *   when_busy          wait | fail: what a call beyond max_in_flight does
 *   compile_policy     wait | tiered | kernels-only: what a call of a shape without
 *                      compiled code does (wait for the compile; run at once on
 *                      handwritten kernels while the JIT compiles in the background;
 *                      kernels only)
 *   batch_ranges       0 | 1 (default 1): a function that computes its batch item by
 *                      item runs every batch size as calls of batch 1 (one compile)
 *   hot_batch_calls    calls of one batch size after which its own code compiles in
 *                      the background, taking over if faster (default 8; 0 = never)
 *   hot_shape_calls    under tiered, for a function with dynamic dims other than a
 *                      batch the range code serves (a sequence length): calls of one
 *                      shape, and at least 1 in 16 of the calls kernel plans served,
 *                      before its JIT compile starts (default 2; 1 = at once)
 *   device             cpu | cuda | cuda:N
 *   huge_pages         0 | 1
 *   serial_steps       0 | 1 (one step of a call at a time: profiling)
 *   gpu_graphs         0 | 1: on a GPU, each plan replayed as one CUDA graph
 *   gpu_tf32           0 | 1: FP32 convolutions on a GPU may use TF32 tensor cores
 *   gpu_profile        0 | 1: every GPU launch timed, totals on stderr at unload
 *   gpu_conv_algo      find | heuristic: cuDNN's convolution algorithms timed
 *                      once on the device (default) or chosen by its heuristics
 * Options not set come from the environment ($KILN_*), else defaults. */
KILN_API kiln_status *kiln_options_set(kiln_options *options, const char *name, const char *value);

typedef struct kiln_runtime kiln_runtime;

/* `options` may be NULL (environment and defaults); it is copied. */
KILN_API kiln_status *kiln_runtime_create(const kiln_options *options, kiln_runtime **out);
/* Waits for the runtime's calls in flight, then frees it (modules still
 * alive keep what they need). */
KILN_API void kiln_runtime_free(kiln_runtime *runtime);
/* What generated code targets (host CPU or GPU). */
KILN_API const char *kiln_runtime_target(const kiln_runtime *runtime);

typedef struct kiln_cache_stats {
  uint64_t memory_hits, memory_misses; /* compiled functions found / not found in memory */
  uint64_t disk_hits;                  /* loaded from the persistent cache, not compiled */
  uint64_t compiles, compile_failures;
  uint64_t jit_fallbacks;              /* JIT kernels that failed to compile and ran as handwritten kernels */
  double compile_ms, disk_load_ms;
  uint64_t disk_writes, disk_rejected; /* entries stored; entries found unusable (corrupt, other target) */
} kiln_cache_stats;

KILN_API void kiln_runtime_cache_stats(const kiln_runtime *runtime, kiln_cache_stats *out);

/* ---- Modules --------------------------------------------------------------- */

typedef struct kiln_module kiln_module;

/* MLIR (TOSA / linalg on tensors), text or bytecode. */
KILN_API kiln_status *kiln_runtime_load_file(kiln_runtime *runtime, const char *path, kiln_module **out);
KILN_API kiln_status *kiln_runtime_load_memory(kiln_runtime *runtime, const void *data, size_t size,
                                               const char *name, kiln_module **out);
/* Waits for the module's first calls still compiling, then frees it. */
KILN_API void kiln_module_free(kiln_module *module);

/* Introspection. A tensor's description: the name comes from the model
 * (kiln.name argument/result attributes, tf.entry_function) else is
 * "input_<i>" / "output_<i>"; dims are KILN_DYNAMIC where the model leaves
 * them open. */
typedef struct kiln_tensor_info {
  const char *name;
  kiln_dtype dtype;
  size_t rank;
  const int64_t *shape;
} kiln_tensor_info;

KILN_API size_t kiln_module_function_count(const kiln_module *module);
/* The i-th public function's name (NULL past the end). */
KILN_API const char *kiln_module_function_name(const kiln_module *module, size_t i);
/* The function that `function` names (NULL or "" = "main", else the
 * module's only function): *name = its name, valid while the module lives;
 * KILN_INVALID_ARGUMENT where there is none (the message lists the module's
 * functions). Servers and bindings ask this once instead of repeating the
 * rule. */
KILN_API kiln_status *kiln_module_resolve_function(const kiln_module *module, const char *function, const char **name);
/* `function` NULL or "" = "main", else the module's only function. */
KILN_API kiln_status *kiln_module_input_count(const kiln_module *module, const char *function, size_t *out);
KILN_API kiln_status *kiln_module_output_count(const kiln_module *module, const char *function, size_t *out);
KILN_API kiln_status *kiln_module_input_info(const kiln_module *module, const char *function, size_t i,
                                             kiln_tensor_info *out);
KILN_API kiln_status *kiln_module_output_info(const kiln_module *module, const char *function, size_t i,
                                              kiln_tensor_info *out);
/* Whether `function`'s batch items are computed apart from each other (kiln's
 * analysis of dimension 0 of its dynamic inputs): *separable = 1 when a call
 * of batch N equals N calls of batch 1 on its slices (requests may be merged
 * along dimension 0 and split back); else 0 and, when `why` is not NULL,
 * *why = the reason (the op and where; valid while the module lives). */
KILN_API kiln_status *kiln_module_batch_separable(const kiln_module *module, const char *function, int *separable,
                                                  const char **why);

/* Calls `function` (NULL = main or the only function) and waits.
 * outputs[i] == NULL: set to a new tensor the caller frees.
 * outputs[i] != NULL: the result is computed directly into that tensor's
 * memory (its dtype and shape must match the result's, and it must not
 * overlap an input), as ONNX Runtime's IoBinding: no kiln output buffer, no
 * copy (memory not aligned to the element size is filled by a copy). */
KILN_API kiln_status *kiln_module_call(kiln_module *module, const char *function, kiln_tensor *const *inputs,
                                       size_t num_inputs, kiln_tensor **outputs, size_t num_outputs);
/* The same, with the inputs given by name (in any order; every input once). */
KILN_API kiln_status *kiln_module_call_named(kiln_module *module, const char *function,
                                             const char *const *input_names, kiln_tensor *const *inputs,
                                             size_t num_inputs, kiln_tensor **outputs, size_t num_outputs);

/* Asynchronous calls: returns at once (a first call compiles in the
 * background). `timeout_seconds` > 0 bounds this call (else the runtime's
 * call_timeout). With max_in_flight reached, waits or fails with
 * KILN_UNAVAILABLE ("busy"), as when_busy says. */
typedef struct kiln_call kiln_call;

KILN_API kiln_status *kiln_module_call_async(kiln_module *module, const char *function, kiln_tensor *const *inputs,
                                             size_t num_inputs, double timeout_seconds, kiln_call **out);
/* 1 when every result is available (or the call failed). */
KILN_API int kiln_call_ready(const kiln_call *call);
/* Stops launching the call's remaining steps; it then fails with KILN_CANCELLED. */
KILN_API void kiln_call_cancel(kiln_call *call);
/* Runs `callback(ctx)` once the call is ready (at once if it is), on a kiln thread. */
KILN_API void kiln_call_on_ready(kiln_call *call, void (*callback)(void *ctx), void *ctx);
/* Waits and takes the results (outputs as in kiln_module_call, except that
 * a given tensor receives a copy of the result). */
KILN_API kiln_status *kiln_call_wait(kiln_call *call, kiln_tensor **outputs, size_t num_outputs);
KILN_API void kiln_call_free(kiln_call *call);

/* Compiles what will serve `function` at these input types (names ignored)
 * without running it, so that later calls, here or in another process
 * sharing the disk cache, start warm: with batch ranges on (the default) a
 * function that computes its batch item by item runs every batch size as
 * calls of batch 1, so batch 1's code is what compiles. */
KILN_API kiln_status *kiln_module_prewarm(kiln_module *module, const char *function,
                                          const kiln_tensor_info *inputs, size_t num_inputs);

/* What was compiled to serve `function` at these input types (compiling it
 * if it was not; batch 1's code for a batch that runs as calls of batch 1,
 * as in kiln_module_prewarm). */
typedef struct kiln_compile_info {
  int from_disk_cache;     /* 1: loaded from the persistent cache (no compile in this process) */
  int kernels_compiled;    /* JIT kernels compiled */
  int kernels_shared;      /* JIT kernels that reused an identical kernel's code */
  int placements_measured; /* ops timed JIT against handwritten kernel */
  int kernels_chosen;      /* of those, placed on the handwritten kernel */
  int jit_fallbacks;       /* JIT kernels that failed to compile and run as handwritten kernels */
  double compile_ms;
  const char *placement;   /* e.g. "12 JIT steps (40 ops), 3 kernel steps (tosa.conv2d x3)"; lives with the module */
} kiln_compile_info;

KILN_API kiln_status *kiln_module_compile_info(kiln_module *module, const char *function,
                                               const kiln_tensor_info *inputs, size_t num_inputs,
                                               kiln_compile_info *out);
typedef struct kiln_module_stats {
  uint64_t functions_compiled; /* distinct (function, input types) this module holds code for */
  uint64_t pipeline_runs;      /* MLIR pipelines run for it (0 on a warm start from the disk cache) */
} kiln_module_stats;

KILN_API void kiln_module_stats_get(const kiln_module *module, kiln_module_stats *out);

/* Tiered execution (option compile_policy = tiered): how calls of shapes
 * without compiled code were served. */
typedef struct kiln_tier_stats {
  uint64_t kernel_plan_calls;   /* calls run on a plan of handwritten kernels while JIT code compiled */
  uint64_t background_compiles; /* JIT compiles started behind a kernel plan (one per shape signature) */
  uint64_t swaps;               /* signatures switched from their kernel plan to compiled code */
  uint64_t failures;            /* background compiles that failed (the kernel plan keeps serving) */
  /* Range code (option batch_ranges, on by default): calls of a batch-separable
   * function run as calls of batch 1; batch sizes called hot_batch_calls times
   * whose own code compiled in the background (counted in background_compiles;
   * those that took over in swaps); and those whose own code measured no
   * faster, so the calls of batch 1 keep serving them. */
  uint64_t range_calls;
  uint64_t hot_size_compiles;
  uint64_t range_kept;
} kiln_tier_stats;

KILN_API void kiln_module_tier_stats_get(const kiln_module *module, kiln_tier_stats *out);
/* Blocks until every background compile started so far has swapped, kept the
 * range code, or failed. */
KILN_API void kiln_module_wait_background_compiles(kiln_module *module);

/* Built-in models, built in code from deterministic weights (the same bytes
 * on every machine): "mlp", "cnn", "resnet50". */
KILN_API size_t kiln_builtin_model_count(void);
KILN_API const char *kiln_builtin_model_name(size_t i); /* NULL past the end */
KILN_API kiln_status *kiln_runtime_load_builtin(kiln_runtime *runtime, const char *name, kiln_module **out);

/* ---- Attributes (eager ops and user kernels) ------------------------------- */

typedef struct kiln_attrs kiln_attrs;

KILN_API kiln_attrs *kiln_attrs_create(void);
KILN_API void kiln_attrs_free(kiln_attrs *attrs);
KILN_API kiln_status *kiln_attrs_set_int(kiln_attrs *attrs, const char *name, int64_t value);
KILN_API kiln_status *kiln_attrs_set_float(kiln_attrs *attrs, const char *name, double value);
KILN_API kiln_status *kiln_attrs_set_ints(kiln_attrs *attrs, const char *name, const int64_t *values, size_t count);
KILN_API kiln_status *kiln_attrs_set_string(kiln_attrs *attrs, const char *name, const char *value);
/* Reads an attribute; a missing one or another kind is KILN_INVALID_ARGUMENT. */
KILN_API kiln_status *kiln_attrs_get_int(const kiln_attrs *attrs, const char *name, int64_t *out);
KILN_API kiln_status *kiln_attrs_get_float(const kiln_attrs *attrs, const char *name, double *out);
/* Copies up to `capacity` values into `out`; `count` receives how many there are. */
KILN_API kiln_status *kiln_attrs_get_ints(const kiln_attrs *attrs, const char *name, int64_t *out, size_t capacity,
                                          size_t *count);

/* ---- Eager execution ------------------------------------------------------- */

/* Ops run one by one as they are called, with the same shape functions and
 * kernels as graphs. A kiln_value is an op's result: its type is known at
 * once, its value when computed (kiln_value_await). */
typedef struct kiln_eager kiln_eager;
typedef struct kiln_value kiln_value;

KILN_API kiln_status *kiln_eager_create(kiln_runtime *runtime, kiln_eager **out); /* must not outlive the runtime */
KILN_API void kiln_eager_free(kiln_eager *eager);
KILN_API kiln_status *kiln_value_from_tensor(const kiln_tensor *tensor, kiln_value **out);
/* A second handle to the same value. */
KILN_API kiln_status *kiln_value_share(const kiln_value *value, kiln_value **out);
KILN_API void kiln_value_free(kiln_value *value);
/* The value's type (name NULL); the shape lives as long as the value. */
KILN_API void kiln_value_info(const kiln_value *value, kiln_tensor_info *out);
/* Waits for the value: a new tensor, or the op's error (naming the op, its
 * operands and their shapes). */
KILN_API kiln_status *kiln_value_await(const kiln_value *value, kiln_tensor **out);
/* Runs `op` (a TOSA op name, e.g. "tosa.add", "tosa.matmul", "tosa.conv2d")
 * on `inputs` with `attrs` (NULL: none; names as the TOSA op's attributes).
 * Returns at once; an op that cannot be dispatched (unknown op, wrong
 * types) is an error here. */
KILN_API kiln_status *kiln_eager_execute(kiln_eager *eager, const char *op, kiln_value *const *inputs, size_t num_inputs,
                                         const kiln_attrs *attrs, kiln_value **out);

/* Trace capture: runs `fn` on symbolic values of the example types and
 * records its eager ops as a graph (TOSA), loaded as a module with one
 * function, main. `fn` pushes its results with kiln_values_push and returns
 * NULL, or an error that ends the trace. `mlir`, when not NULL, receives the
 * recorded MLIR text (kiln_string_free). */
typedef struct kiln_values kiln_values;
KILN_API kiln_status *kiln_values_push(kiln_values *outputs, const kiln_value *value);
typedef kiln_status *(*kiln_trace_fn)(kiln_eager *eager, kiln_value *const *inputs, size_t num_inputs,
                                      kiln_values *outputs, void *user);
KILN_API kiln_status *kiln_eager_trace(kiln_eager *eager, kiln_trace_fn fn, void *user,
                                       const kiln_tensor_info *examples, size_t num_examples, kiln_module **out,
                                       char **mlir);

/* ---- User kernels ------------------------------------------------------------ */

/* A handwritten kernel for an op: every runtime in the process then places
 * that op on it (auto mode: when MLIR has no lowering for it, e.g. a
 * "tosa.custom:domain.name" op; kernel mode: on request), in graphs and in
 * eager dispatch. The shape function gives the result types from the input
 * types and attributes (an error: "no kernel for this use"); the compute
 * function fills the outputs. Both must be thread-safe; they run on kiln's
 * threads. `dtypes` (NULL/0: all) restricts the kernel to uses whose first
 * operand has one of them. At most 64 kernels may be registered through the
 * C API per process. */
typedef struct kiln_kernel_context kiln_kernel_context;
typedef struct kiln_types kiln_types;

KILN_API kiln_status *kiln_types_push(kiln_types *types, kiln_dtype dtype, const int64_t *shape, size_t rank);
KILN_API size_t kiln_kernel_input_count(const kiln_kernel_context *ctx);
KILN_API const void *kiln_kernel_input(const kiln_kernel_context *ctx, size_t i, kiln_tensor_info *info);
KILN_API size_t kiln_kernel_output_count(const kiln_kernel_context *ctx);
KILN_API void *kiln_kernel_output(const kiln_kernel_context *ctx, size_t i, kiln_tensor_info *info);
KILN_API const kiln_attrs *kiln_kernel_attrs(const kiln_kernel_context *ctx);

typedef kiln_status *(*kiln_kernel_shape_fn)(const kiln_tensor_info *inputs, size_t num_inputs,
                                             const kiln_attrs *attrs, kiln_types *outputs, void *user);
typedef kiln_status *(*kiln_kernel_compute_fn)(const kiln_kernel_context *ctx, void *user);
KILN_API kiln_status *kiln_register_kernel(const char *op, const char *impl, const kiln_dtype *dtypes,
                                           size_t num_dtypes, kiln_kernel_shape_fn shape,
                                           kiln_kernel_compute_fn compute, void *user);
/* A status for callbacks to return: code and message (copied). */
KILN_API kiln_status *kiln_status_create(kiln_code code, const char *message);

/* ---- Profiling ------------------------------------------------------------- */

typedef struct kiln_profiler kiln_profiler;

/* Starts recording the runtime's calls and compiles (one profiler per
 * runtime at a time). */
KILN_API kiln_status *kiln_profiler_start(kiln_runtime *runtime, kiln_profiler **out);
/* Stops recording. Writes a Chrome trace (Perfetto) to `trace_path` and a
 * self-contained HTML report to `report_path` where given (NULL: not
 * written); `table`, when not NULL, receives the per-kernel table as text,
 * freed with kiln_string_free. */
KILN_API kiln_status *kiln_profiler_stop(kiln_profiler *profiler, const char *trace_path, const char *report_path,
                                         char **table);
/* The same, with the per-kernel table as JSON (every row, plain values) in
 * `table_json` when not NULL (kiln_string_free): {"recorded_ms", "step_ms",
 * "peak_gflops", "bandwidth_gbs", "threads", "kernels": [{"name", "kind",
 * "ops", "provenance", "source", "strategy" (how the code computes: register
 * tiles, blocks, fused ops; or why a handwritten kernel), "output_type",
 * "calls", "total_ms", "mean_ms", "median_ms" (the middle call's time),
 * "gflops", "gbs", "percent_time", "percent_peak", "flops_per_call",
 * "bytes_per_call"}, ...]}, slowest first. */
KILN_API kiln_status *kiln_profiler_stop_json(kiln_profiler *profiler, const char *trace_path,
                                              const char *report_path, char **table, char **table_json);
KILN_API void kiln_profiler_free(kiln_profiler *profiler);
KILN_API void kiln_string_free(char *text);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* KILN_KILN_C_H */
