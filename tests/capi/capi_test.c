/* The C API from a C program (compiled as C, linked against libkiln.so
 * only): loading, introspection, calls with kiln-owned and caller-owned
 * outputs, calls by name, asynchronous calls, the in-flight limit, options
 * and errors with their codes and locations. Exit status 0 when every
 * check holds; each failed check prints its line. */
#define _POSIX_C_SOURCE 199309L
#include <kiln/kiln_c.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
#define CHECK(cond)                                                           \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                             \
    }                                                                         \
  } while (0)
/* A call that must succeed: prints its error and stops the test otherwise. */
#define OK(call)                                                                              \
  do {                                                                                        \
    kiln_status *st_ = (call);                                                                \
    if (st_) {                                                                                \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,               \
              kiln_code_name(kiln_status_code(st_)), kiln_status_message(st_));               \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static int contains(const char *s, const char *needle) { return s && strstr(s, needle) != NULL; }
/* A status that must have `code` and a message containing `text`; prints
 * what came instead. */
#define CHECK_STATUS(st, code, text)                                                               \
  do {                                                                                             \
    if (kiln_status_code(st) != (code) || !contains(kiln_status_message(st), (text))) {          \
      fprintf(stderr, "%s:%d: expected %s containing '%s', got %s: %s\n", __FILE__, __LINE__,     \
              kiln_code_name(code), (text), kiln_code_name(kiln_status_code(st)),                  \
              kiln_status_message(st));                                                            \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

/* The classifier's reference: scores = max(x W + b, 0), logits = x W + b. */
static void reference(const float *x, float *scores, float *logits) {
  static const float b[3] = {0.5f, -0.25f, 0.125f};
  for (int r = 0; r < 4; ++r)
    for (int n = 0; n < 3; ++n) {
      float acc = b[n];
      for (int k = 0; k < 8; ++k) acc += x[r * 8 + k] * (float)((3 * k + n) % 7 - 3) / 4.0f;
      logits[r * 3 + n] = acc;
      scores[r * 3 + n] = acc > 0 ? acc : 0;
    }
}

static int close_to(const float *a, const float *b, int n) {
  for (int i = 0; i < n; ++i)
    if (fabsf(a[i] - b[i]) > 1e-5f * (1 + fabsf(b[i]))) return 0;
  return 1;
}

/* Callbacks run on kiln's threads: counted atomically, awaited with a bound. */
static _Atomic int released = 0;
static void on_release(void *ctx) { released += *(int *)ctx; }
static _Atomic int ready_calls = 0;
static void on_ready(void *ctx) { (void)ctx; ++ready_calls; }
static void await_count(_Atomic int *counter, int value) {
  for (int i = 0; i < 500 && *counter < value; ++i) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *data = malloc((size_t)n);
  *size = fread(data, 1, (size_t)n, f);
  fclose(f);
  return data;
}

/* A user kernel in C: y = x * scale + 1 (attribute "scale", default 2) over
 * f32, for the custom op acme.scale_plus_one. */
static kiln_status *scale_shape(const kiln_tensor_info *in, size_t n, const kiln_attrs *attrs, kiln_types *out,
                                void *user) {
  (void)attrs;
  (void)user;
  if (n != 1 || in[0].dtype != KILN_F32) return kiln_status_create(KILN_UNSUPPORTED, "takes one f32 tensor");
  return kiln_types_push(out, KILN_F32, in[0].shape, in[0].rank);
}
static _Atomic int kernel_calls = 0;
static kiln_status *scale_compute(const kiln_kernel_context *ctx, void *user) {
  kiln_tensor_info info;
  const float *x = kiln_kernel_input(ctx, 0, &info);
  float *y = kiln_kernel_output(ctx, 0, NULL);
  double scale = 2;
  kiln_status *s = kiln_attrs_get_float(kiln_kernel_attrs(ctx), "scale", &scale);
  kiln_status_free(s); /* missing: the default */
  int64_t n = 1;
  for (size_t d = 0; d < info.rank; ++d) n *= info.shape[d];
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (float)scale + 1;
  kernel_calls += *(int *)user;
  return NULL;
}

/* A traced function: relu(a + b) * a, recorded from eager calls. */
static kiln_status *traced(kiln_eager *eager, kiln_value *const *in, size_t n, kiln_values *outputs, void *user) {
  (void)user;
  if (n != 2) return kiln_status_create(KILN_INVALID_ARGUMENT, "traced: expected two inputs");
  kiln_value *sum = NULL, *relu = NULL, *prod = NULL;
  kiln_status *s;
  kiln_attrs *clamp = kiln_attrs_create();
  kiln_attrs_set_float(clamp, "min_val", 0.0);
  kiln_attrs_set_float(clamp, "max_val", 3.0e38);
  kiln_value *ab[2] = {in[0], in[1]};
  if ((s = kiln_eager_execute(eager, "tosa.add", ab, 2, NULL, &sum))) return s;
  if ((s = kiln_eager_execute(eager, "tosa.clamp", &sum, 1, clamp, &relu))) return s;
  kiln_attrs *shift = kiln_attrs_create();
  kiln_attrs_set_int(shift, "shift", 0);
  kiln_value *ra[2] = {relu, in[0]};
  if ((s = kiln_eager_execute(eager, "tosa.mul", ra, 2, shift, &prod))) return s;
  s = kiln_values_push(outputs, prod);
  kiln_value_free(sum);
  kiln_value_free(relu);
  kiln_value_free(prod);
  kiln_attrs_free(clamp);
  kiln_attrs_free(shift);
  return s;
}
static kiln_status *traced_fails(kiln_eager *eager, kiln_value *const *in, size_t n, kiln_values *outputs,
                                 void *user) {
  (void)eager, (void)in, (void)n, (void)outputs, (void)user;
  return kiln_status_create(KILN_UNSUPPORTED, "this function refuses to be traced");
}

static void eager_and_kernels(void) {
  kiln_options *options = kiln_options_create();
  OK(kiln_options_set(options, "cache", "off"));
  kiln_runtime *rt = NULL;
  OK(kiln_runtime_create(options, &rt));
  kiln_eager *eager = NULL;
  OK(kiln_eager_create(rt, &eager));

  /* Eager ops: types at dispatch, values when awaited. */
  const int64_t shape[] = {2, 3};
  float a[6] = {1, -2, 3, -4, 5, -6}, b[6] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  kiln_tensor *ta = NULL, *tb = NULL;
  OK(kiln_tensor_wrap(KILN_F32, shape, 2, a, sizeof a, NULL, NULL, &ta));
  OK(kiln_tensor_wrap(KILN_F32, shape, 2, b, sizeof b, NULL, NULL, &tb));
  kiln_value *va = NULL, *vb = NULL, *sum = NULL;
  OK(kiln_value_from_tensor(ta, &va));
  OK(kiln_value_from_tensor(tb, &vb));
  kiln_value *ab[2] = {va, vb};
  OK(kiln_eager_execute(eager, "tosa.add", ab, 2, NULL, &sum));
  kiln_tensor_info info;
  kiln_value_info(sum, &info);
  CHECK(info.dtype == KILN_F32 && info.rank == 2 && info.shape[1] == 3);
  kiln_tensor *r = NULL;
  OK(kiln_value_await(sum, &r));
  CHECK(((float *)kiln_tensor_data(r))[3] == -3.5f);
  kiln_tensor_free(r);
  kiln_attrs *axis = kiln_attrs_create();
  OK(kiln_attrs_set_int(axis, "axis", 1));
  kiln_value *rs = NULL;
  OK(kiln_eager_execute(eager, "tosa.reduce_sum", &sum, 1, axis, &rs));
  OK(kiln_value_await(rs, &r));
  CHECK(kiln_tensor_rank(r) == 2 && kiln_tensor_shape(r)[1] == 1 && ((float *)kiln_tensor_data(r))[0] == 3.5f);
  kiln_tensor_free(r);
  kiln_value_free(rs);
  kiln_attrs_free(axis);
  /* Dispatch errors come back at once. */
  kiln_value *bad = NULL;
  kiln_status *s = kiln_eager_execute(eager, "tosa.frobnicate", ab, 2, NULL, &bad);
  CHECK(s != NULL && bad == NULL && contains(kiln_status_message(s), "tosa.frobnicate"));
  kiln_status_free(s);
  const int64_t other[] = {3, 2};
  kiln_tensor *tc = NULL;
  kiln_value *vc = NULL;
  OK(kiln_tensor_create(KILN_F32, other, 2, &tc));
  OK(kiln_value_from_tensor(tc, &vc));
  kiln_value *mismatch[2] = {va, vc};
  s = kiln_eager_execute(eager, "tosa.add", mismatch, 2, NULL, &bad);
  CHECK(s != NULL && bad == NULL && kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  kiln_status_free(s);

  /* Trace capture: a module whose main replays the eager calls. */
  kiln_tensor_info examples[2] = {{"a", KILN_F32, 2, shape}, {"b", KILN_F32, 2, shape}};
  kiln_module *tm = NULL;
  char *mlir = NULL;
  OK(kiln_eager_trace(eager, traced, NULL, examples, 2, &tm, &mlir));
  CHECK(contains(mlir, "tosa.clamp") && contains(mlir, "return"));
  kiln_string_free(mlir);
  kiln_tensor *ins[2] = {ta, tb};
  r = NULL; /* NULL: kiln allocates the result */
  OK(kiln_module_call(tm, NULL, ins, 2, &r, 1));
  for (int i = 0; i < 6; ++i) {
    float want = (a[i] + b[i] > 0 ? a[i] + b[i] : 0) * a[i];
    CHECK(fabsf(((float *)kiln_tensor_data(r))[i] - want) < 1e-6f);
  }
  kiln_tensor_free(r);
  kiln_module_free(tm);
  s = kiln_eager_trace(eager, traced_fails, NULL, examples, 2, &tm, NULL);
  CHECK(kiln_status_code(s) == KILN_UNSUPPORTED && contains(kiln_status_message(s), "refuses") && tm == NULL);
  kiln_status_free(s);

  /* A user kernel, registered from C, run in a graph and eagerly. */
  static int one = 1;
  OK(kiln_register_kernel("tosa.custom:acme.scale_plus_one", "c_loops", NULL, 0, scale_shape, scale_compute, &one));
  s = kiln_register_kernel("tosa.custom:acme.scale_plus_one", "again", NULL, 0, scale_shape, scale_compute, &one);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "already has a kernel"));
  kiln_status_free(s);
  const char *graph =
      "func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
      "  %y = tosa.custom %x {operator_name = \"scale_plus_one\", domain_name = \"acme\", implementation_attrs = \"\"}"
      " : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "  return %y : tensor<2x3xf32>\n}\n";
  kiln_module *km = NULL;
  OK(kiln_runtime_load_memory(rt, graph, strlen(graph), "custom.mlir", &km));
  r = NULL;
  OK(kiln_module_call(km, NULL, &ta, 1, &r, 1));
  CHECK(((float *)kiln_tensor_data(r))[2] == 7.0f && ((float *)kiln_tensor_data(r))[5] == -11.0f);
  kiln_tensor_free(r);
  kiln_attrs *scale = kiln_attrs_create();
  OK(kiln_attrs_set_float(scale, "scale", 10.0));
  kiln_value *scaled = NULL;
  OK(kiln_eager_execute(eager, "tosa.custom:acme.scale_plus_one", &va, 1, scale, &scaled));
  OK(kiln_value_await(scaled, &r));
  CHECK(((float *)kiln_tensor_data(r))[0] == 11.0f);
  CHECK(kernel_calls == 2);
  kiln_tensor_free(r);
  kiln_value_free(scaled);
  kiln_attrs_free(scale);
  kiln_module_free(km);

  /* Built-in models. */
  CHECK(kiln_builtin_model_count() >= 3 && strcmp(kiln_builtin_model_name(0), "mlp") == 0);
  kiln_module *mlp = NULL;
  OK(kiln_runtime_load_builtin(rt, "mlp", &mlp));
  kiln_module_free(mlp);
  s = kiln_runtime_load_builtin(rt, "alexnet", &mlp);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "resnet50"));
  kiln_status_free(s);

  kiln_value_free(vc);
  kiln_tensor_free(tc);
  kiln_value_free(sum);
  kiln_value_free(va);
  kiln_value_free(vb);
  kiln_tensor_free(ta);
  kiln_tensor_free(tb);
  kiln_eager_free(eager);
  kiln_runtime_free(rt);
  kiln_options_free(options);
}

int main(void) {
  CHECK(strcmp(kiln_version(), KILN_VERSION_STRING) == 0);
  CHECK(strcmp(kiln_dtype_name(KILN_BF16), "bf16") == 0 && kiln_dtype_size(KILN_F64) == 8);
  CHECK(kiln_dtype_name((kiln_dtype)99) == NULL);

  /* Options: unknown names and bad values are errors naming them. */
  kiln_options *options = kiln_options_create();
  kiln_status *s = kiln_options_set(options, "thread", "2");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "unknown option 'thread'"));
  kiln_status_free(s);
  s = kiln_options_set(options, "gpu_tf32", "maybe");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "gpu_tf32='maybe'"));
  kiln_status_free(s);
  s = kiln_options_set(options, "gpu_conv_algo", "fastest");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "find or heuristic"));
  kiln_status_free(s);
  CHECK(kiln_options_set(options, "gpu_conv_algo", "heuristic") == NULL);
  CHECK(kiln_options_set(options, "gpu_graphs", "1") == NULL);
  s = kiln_options_set(options, "threads", "many");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "threads='many'"));
  kiln_status_free(s);
  s = kiln_options_set(options, "compile_policy", "lazy");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "wait, tiered or kernels-only"));
  kiln_status_free(s);
  s = kiln_options_set(options, "prefetch_bytes", "-1");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "prefetch_bytes='-1'") &&
        contains(kiln_status_message(s), "bytes from 0 (no prefetches) to 16777216"));
  kiln_status_free(s);
  OK(kiln_options_set(options, "prefetch_bytes", "8192"));
  OK(kiln_options_set(options, "compile_policy", "wait"));
  OK(kiln_options_set(options, "threads", "2"));
  OK(kiln_options_set(options, "cache", "off"));
  OK(kiln_options_set(options, "placement", "fixed"));
  kiln_runtime *rt = NULL;
  OK(kiln_runtime_create(options, &rt));
  CHECK(strlen(kiln_runtime_target(rt)) > 0);

  /* Load from a file and from memory; introspection by name. */
  kiln_module *m = NULL;
  OK(kiln_runtime_load_file(rt, KILN_CLASSIFIER, &m));
  size_t size = 0;
  char *text = read_file(KILN_CLASSIFIER, &size);
  CHECK(text != NULL);
  kiln_module *m2 = NULL;
  OK(kiln_runtime_load_memory(rt, text, size, "classifier", &m2));
  free(text);
  CHECK(kiln_module_function_count(m) == 1 && strcmp(kiln_module_function_name(m, 0), "main") == 0);
  CHECK(kiln_module_function_name(m, 1) == NULL);
  const char *resolved = NULL;
  OK(kiln_module_resolve_function(m, NULL, &resolved));
  CHECK(resolved != NULL && strcmp(resolved, "main") == 0);
  s = kiln_module_resolve_function(m, "missing", &resolved);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "@missing") &&
        contains(kiln_status_message(s), "@main") && resolved == NULL);
  kiln_status_free(s);
  s = kiln_module_resolve_function(m, NULL, NULL);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  size_t n_in = 0, n_out = 0;
  OK(kiln_module_input_count(m, NULL, &n_in));
  OK(kiln_module_output_count(m, "main", &n_out));
  CHECK(n_in == 1 && n_out == 2);
  kiln_tensor_info info;
  OK(kiln_module_input_info(m, NULL, 0, &info));
  CHECK(strcmp(info.name, "features") == 0 && info.dtype == KILN_F32 && info.rank == 3 && info.shape[2] == 8);
  OK(kiln_module_output_info(m, NULL, 1, &info));
  CHECK(strcmp(info.name, "logits") == 0 && info.rank == 3 && info.shape[1] == 4 && info.shape[2] == 3);
  s = kiln_module_output_info(m, NULL, 2, &info);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "2 outputs"));
  kiln_status_free(s);
  s = kiln_module_input_count(m, "missing", &n_in);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "@missing") &&
        contains(kiln_status_message(s), "@main"));
  kiln_status_free(s);

  /* A call with kiln-owned outputs. */
  float x[32], want_scores[12], want_logits[12];
  for (int i = 0; i < 32; ++i) x[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  reference(x, want_scores, want_logits);
  const int64_t in_shape[] = {1, 4, 8}, out_shape[] = {1, 4, 3};
  int weight = 1;
  kiln_tensor *input = NULL;
  OK(kiln_tensor_wrap(KILN_F32, in_shape, 3, x, sizeof x, on_release, &weight, &input));
  kiln_tensor *outs[2] = {NULL, NULL};
  OK(kiln_module_call(m, NULL, &input, 1, outs, 2));
  CHECK(kiln_tensor_dtype(outs[0]) == KILN_F32 && kiln_tensor_rank(outs[0]) == 3 &&
        kiln_tensor_shape(outs[0])[2] == 3 && kiln_tensor_byte_size(outs[0]) == 48);
  CHECK(close_to(kiln_tensor_data(outs[0]), want_scores, 12));
  CHECK(close_to(kiln_tensor_data(outs[1]), want_logits, 12));
  kiln_tensor_free(outs[0]);
  kiln_tensor_free(outs[1]);

  /* Outputs written into the caller's arrays, inputs by name, the module
   * loaded from memory. */
  float scores[12], logits[12];
  memset(scores, 0xff, sizeof scores);
  memset(logits, 0xff, sizeof logits);
  kiln_tensor *into[2] = {NULL, NULL};
  OK(kiln_tensor_wrap(KILN_F32, out_shape, 3, scores, sizeof scores, NULL, NULL, &into[0]));
  OK(kiln_tensor_wrap(KILN_F32, out_shape, 3, logits, sizeof logits, NULL, NULL, &into[1]));
  const char *names[] = {"features"};
  OK(kiln_module_call_named(m2, NULL, names, &input, 1, into, 2));
  CHECK(close_to(scores, want_scores, 12) && close_to(logits, want_logits, 12));
  const char *wrong[] = {"pixels"};
  s = kiln_module_call_named(m2, NULL, wrong, &input, 1, into, 2);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "'pixels'") &&
        contains(kiln_status_message(s), "'features'"));
  kiln_status_free(s);

  /* An output of the wrong shape is refused before anything is written. */
  const int64_t bad_shape[] = {1, 3, 4};
  float bad[12];
  kiln_tensor *bad_out[2] = {NULL, into[1]};
  OK(kiln_tensor_wrap(KILN_F32, bad_shape, 3, bad, sizeof bad, NULL, NULL, &bad_out[0]));
  s = kiln_module_call(m, NULL, &input, 1, bad_out, 2);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "output 0"));
  kiln_status_free(s);
  kiln_tensor_free(bad_out[0]);

  /* An output over the input's own memory is refused (kiln reads inputs
   * while it writes outputs). */
  kiln_tensor *overlap[2] = {NULL, NULL};
  OK(kiln_tensor_wrap(KILN_F32, out_shape, 3, x + 4, 12 * sizeof(float), NULL, NULL, &overlap[0]));
  s = kiln_module_call(m, NULL, &input, 1, overlap, 2);
  CHECK_STATUS(s, KILN_INVALID_ARGUMENT, "overlaps input 0");
  kiln_status_free(s);
  kiln_tensor_free(overlap[0]);
  if (overlap[1]) kiln_tensor_free(overlap[1]);

  /* A misaligned input (a float at an odd address) is copied, not misread. */
  char raw[32 * sizeof(float) + 1];
  memcpy(raw + 1, x, sizeof x);
  kiln_tensor *odd = NULL;
  OK(kiln_tensor_wrap(KILN_F32, in_shape, 3, raw + 1, sizeof x, NULL, NULL, &odd));
  outs[0] = outs[1] = NULL;
  OK(kiln_module_call(m, NULL, &odd, 1, outs, 2));
  CHECK(close_to(kiln_tensor_data(outs[1]), want_logits, 12));
  if (!close_to(kiln_tensor_data(outs[1]), want_logits, 12))
    fprintf(stderr, "  misaligned: logits[0] %g, want %g\n", ((float *)kiln_tensor_data(outs[1]))[0], want_logits[0]);
  kiln_tensor_free(outs[0]);
  kiln_tensor_free(outs[1]);
  kiln_tensor_free(odd);

  /* Wrong input shape and wrong sizes: errors, not crashes. */
  const int64_t wrong_shape[] = {1, 4, 9};
  kiln_tensor *t9 = NULL;
  OK(kiln_tensor_create(KILN_F32, wrong_shape, 3, &t9));
  outs[0] = outs[1] = NULL;
  s = kiln_module_call(m, NULL, &t9, 1, outs, 2);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && outs[0] == NULL);
  kiln_status_free(s);
  kiln_tensor_free(t9);
  kiln_tensor *t = NULL;
  s = kiln_tensor_wrap(KILN_F32, in_shape, 3, x, 12, NULL, NULL, &t);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "128 bytes") && t == NULL);
  kiln_status_free(s);
  const int64_t negative[] = {2, -3};
  s = kiln_tensor_create(KILN_F32, negative, 2, &t);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && t == NULL);
  kiln_status_free(s);

  /* Malformed MLIR: the error says where. */
  const char *broken = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = tosa.add %x, %x : oops\n}\n";
  kiln_module *bm = NULL;
  s = kiln_runtime_load_memory(rt, broken, strlen(broken), "broken.mlir", &bm);
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && bm == NULL);
  CHECK(contains(kiln_status_location(s), "broken.mlir:2:"));
  kiln_status_free(s);
  s = kiln_runtime_load_file(rt, "/nonexistent/model.mlir", &bm);
  CHECK(kiln_status_code(s) != KILN_OK && contains(kiln_status_message(s), "/nonexistent/model.mlir"));
  kiln_status_free(s);

  /* Asynchronous calls, callbacks, prewarm and compile information. */
  kiln_call *call = NULL;
  OK(kiln_module_call_async(m, NULL, &input, 1, 0, &call));
  kiln_call_on_ready(call, on_ready, NULL);
  outs[0] = outs[1] = NULL;
  OK(kiln_call_wait(call, outs, 2));
  await_count(&ready_calls, 1);
  CHECK(kiln_call_ready(call) && ready_calls == 1);
  CHECK(close_to(kiln_tensor_data(outs[0]), want_scores, 12));
  kiln_tensor_free(outs[0]);
  kiln_tensor_free(outs[1]);
  kiln_call_free(call);
  kiln_tensor_info sig = {NULL, KILN_F32, 3, in_shape};
  OK(kiln_module_prewarm(m, NULL, &sig, 1));
  kiln_compile_info ci;
  OK(kiln_module_compile_info(m, NULL, &sig, 1, &ci));
  CHECK(ci.placement != NULL && strlen(ci.placement) > 0 && ci.placements_measured == 0);
  kiln_module_stats ms;
  kiln_module_stats_get(m, &ms);
  CHECK(ms.functions_compiled == 1);
  kiln_cache_stats cs;
  kiln_runtime_cache_stats(rt, &cs);
  CHECK(cs.compiles >= 1 && cs.memory_hits >= 1);

  /* The release callback of a wrapped tensor runs once kiln is done with it. */
  kiln_module_free(m2);
  kiln_tensor_free(input);
  await_count(&released, 1);
  CHECK(released == 1);
  kiln_tensor_free(into[0]);
  kiln_tensor_free(into[1]);
  kiln_module_free(m);
  kiln_runtime_free(rt);
  kiln_options_free(options);

  /* max_in_flight = 1, when_busy = fail: a second call while one runs is
   * "busy"; cancelling the first frees the slot. */
  options = kiln_options_create();
  OK(kiln_options_set(options, "cache", "off"));
  OK(kiln_options_set(options, "max_in_flight", "1"));
  OK(kiln_options_set(options, "when_busy", "fail"));
  OK(kiln_runtime_create(options, &rt));
  OK(kiln_runtime_load_file(rt, KILN_NEVER_ENDING, &m));
  const int64_t scalar_shape[1] = {0};
  kiln_tensor *scalar = NULL;
  OK(kiln_tensor_create(KILN_F32, scalar_shape, 0, &scalar));
  OK(kiln_module_call_async(m, "main", &scalar, 1, 60, &call));
  kiln_call *second = NULL;
  s = kiln_module_call_async(m, "main", &scalar, 1, 60, &second);
  CHECK(kiln_status_code(s) == KILN_UNAVAILABLE && contains(kiln_status_message(s), "busy") && second == NULL);
  kiln_status_free(s);
  kiln_call_cancel(call);
  kiln_tensor *result = NULL;
  s = kiln_call_wait(call, &result, 1);
  CHECK(kiln_status_code(s) == KILN_CANCELLED && result == NULL);
  kiln_status_free(s);
  kiln_call_free(call);
  const int64_t four[] = {4};
  kiln_tensor *v = NULL;
  OK(kiln_tensor_create(KILN_F32, four, 1, &v));
  ((float *)kiln_tensor_data(v))[3] = 2.5f;
  OK(kiln_module_call(m, "twice", &v, 1, &result, 1));
  CHECK(((float *)kiln_tensor_data(result))[3] == 5.0f);
  s = kiln_module_input_count(m, NULL, &n_in);  /* no @main-only: @main exists here */
  CHECK(s == NULL && n_in == 1);
  kiln_tensor_free(result);
  kiln_tensor_free(v);
  kiln_tensor_free(scalar);
  kiln_module_free(m);
  kiln_runtime_free(rt);
  kiln_options_free(options);

  /* compile_policy = tiered: the first call of a shape runs on a kernel
   * plan, its JIT compile in the background, then the swap. */
  options = kiln_options_create();
  OK(kiln_options_set(options, "cache", "off"));
  OK(kiln_options_set(options, "compile_policy", "tiered"));
  s = kiln_options_set(options, "batch_ranges", "sometimes");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "0 or 1"));
  kiln_status_free(s);
  OK(kiln_options_set(options, "batch_ranges", "0"));  /* batch 3 gets a plan and code of its own */
  s = kiln_options_set(options, "hot_shape_calls", "0");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "at least 1"));
  kiln_status_free(s);
  OK(kiln_options_set(options, "hot_shape_calls", "1"));  /* compile behind the first call (not the second) */
  OK(kiln_runtime_create(options, &rt));
  OK(kiln_runtime_load_builtin(rt, "mlp", &m));
  const int64_t mlp_shape[] = {3, 64};
  kiln_tensor *mx = NULL;
  OK(kiln_tensor_create(KILN_F32, mlp_shape, 2, &mx));
  result = NULL;  /* (a non-NULL entry is an output to compute into) */
  OK(kiln_module_call(m, NULL, &mx, 1, &result, 1));
  kiln_tensor_free(result);
  result = NULL;
  kiln_module_wait_background_compiles(m);
  kiln_tier_stats ts;
  kiln_module_tier_stats_get(m, &ts);
  CHECK(ts.kernel_plan_calls == 1 && ts.background_compiles == 1 && ts.swaps == 1 && ts.failures == 0);
  OK(kiln_module_call(m, NULL, &mx, 1, &result, 1));  /* on the compiled code */
  kiln_module_tier_stats_get(m, &ts);
  CHECK(ts.kernel_plan_calls == 1);
  kiln_tensor_free(result);
  kiln_module_free(m);
  kiln_runtime_free(rt);
  kiln_options_free(options);

  /* batch_ranges (the default): batch 3 of the mlp runs as three calls of
   * batch 1, one compile (batch 1) for every size. */
  options = kiln_options_create();
  OK(kiln_options_set(options, "cache", "off"));
  s = kiln_options_set(options, "hot_batch_calls", "-1");
  CHECK(kiln_status_code(s) == KILN_INVALID_ARGUMENT && contains(kiln_status_message(s), "0 = never"));
  kiln_status_free(s);
  OK(kiln_options_set(options, "hot_batch_calls", "1000"));
  OK(kiln_runtime_create(options, &rt));
  OK(kiln_runtime_load_builtin(rt, "mlp", &m));
  result = NULL;
  OK(kiln_module_call(m, NULL, &mx, 1, &result, 1));
  CHECK(kiln_tensor_shape(result)[0] == 3);
  kiln_tensor_free(result);
  kiln_module_tier_stats_get(m, &ts);
  CHECK(ts.range_calls == 1 && ts.hot_size_compiles == 0);
  kiln_module_stats_get(m, &ms);
  CHECK(ms.functions_compiled == 1);
  kiln_tensor_free(mx);
  kiln_module_free(m);
  kiln_runtime_free(rt);
  kiln_options_free(options);

  eager_and_kernels();

  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("capi_test: all checks passed\n");
  return failures ? 1 : 0;
}
