/* The C API from C: load the classifier, list its inputs and outputs, call it
 * with the results written into the program's own arrays, and show what an
 * error looks like.
 *   c_api [MODEL]   (default: the samples' classifier, 1x4x8 -> 2 x 1x4x3) */
#include <kiln/kiln_c.h>

#include <stdio.h>

static int fail(kiln_status *s, const char *what) {
  fprintf(stderr, "c_api: %s: %s error: %s\n", what, kiln_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : KILN_SAMPLE_MODEL;
  kiln_runtime *rt = NULL;
  kiln_module *m = NULL;
  kiln_status *s;
  if ((s = kiln_runtime_create(NULL, &rt))) return fail(s, "runtime");
  if ((s = kiln_runtime_load_file(rt, path, &m))) return fail(s, "load");
  printf("kiln %s on %s\n", kiln_version(), kiln_runtime_target(rt));

  size_t n_in = 0, n_out = 0;
  if ((s = kiln_module_input_count(m, NULL, &n_in)) || (s = kiln_module_output_count(m, NULL, &n_out)))
    return fail(s, "signature");
  for (size_t i = 0; i < n_in + n_out; ++i) {
    kiln_tensor_info info;
    s = i < n_in ? kiln_module_input_info(m, NULL, i, &info) : kiln_module_output_info(m, NULL, i - n_in, &info);
    if (s) return fail(s, "signature");
    printf("%s %s: %s[", i < n_in ? "input " : "output", info.name, kiln_dtype_name(info.dtype));
    for (size_t d = 0; d < info.rank; ++d) printf(d ? "x%lld" : "%lld", (long long)info.shape[d]);
    printf("]\n");
  }

  /* The inputs and both outputs live in this program's arrays. */
  float x[1 * 4 * 8], scores[1 * 4 * 3], logits[1 * 4 * 3];
  for (int i = 0; i < 32; ++i) x[i] = (float)(i % 5) * 0.5f - 1.0f;
  const int64_t in_shape[] = {1, 4, 8}, out_shape[] = {1, 4, 3};
  kiln_tensor *input = NULL, *outputs[2] = {NULL, NULL};
  if ((s = kiln_tensor_wrap(KILN_F32, in_shape, 3, x, sizeof x, NULL, NULL, &input)) ||
      (s = kiln_tensor_wrap(KILN_F32, out_shape, 3, scores, sizeof scores, NULL, NULL, &outputs[0])) ||
      (s = kiln_tensor_wrap(KILN_F32, out_shape, 3, logits, sizeof logits, NULL, NULL, &outputs[1])))
    return fail(s, "tensors");
  const char *names[] = {"features"};
  if ((s = kiln_module_call_named(m, NULL, names, &input, 1, outputs, 2))) return fail(s, "call");
  printf("scores[0] = %.4f %.4f %.4f, logits[0] = %.4f %.4f %.4f\n", scores[0], scores[1], scores[2], logits[0],
         logits[1], logits[2]);

  /* A wrong input name is an error naming it; the module stays usable. */
  const char *wrong[] = {"pixels"};
  s = kiln_module_call_named(m, NULL, wrong, &input, 1, outputs, 2);
  printf("wrong name: %s: %s\n", kiln_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);

  kiln_tensor_free(outputs[0]);
  kiln_tensor_free(outputs[1]);
  kiln_tensor_free(input);
  kiln_module_free(m);
  kiln_runtime_free(rt);
  return 0;
}
