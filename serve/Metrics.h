// The server's metrics in Prometheus text format (GET /metrics on the
// metrics port): per model and version, requests, times, batch sizes,
// in-flight requests and compiles; per runtime, the compile cache.
#pragma once

#include "serve/Repository.h"

#include <string>

namespace kiln::serve {

std::string prometheusText(const Repository &repository);

}  // namespace kiln::serve
