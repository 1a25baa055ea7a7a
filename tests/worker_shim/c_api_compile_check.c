/* Compiled as C: the C API header must be valid C. Never called. */
#include "worker_shim/ringmaster_shim.h"

int ringmaster_c_api_compile_check(void) {
  rm_shim* s = rm_shim_create(NULL, NULL, NULL, 1, "gloo");
  double x = 1.0;
  int rc = (int)rm_shim_allreduce(s, &x, 1, RM_FLOAT64, RM_SUM);
  rm_shim_destroy(s);
  return rc;
}
