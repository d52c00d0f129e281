// whenAllAvailable: a callback once every one of a call's results is
// available (TFRT's RunWhenReady), for the API's own .cpp files: the call
// limiter's release, range code's items, the C API's kiln_call_on_ready.
// Its home is runtime/AsyncValue.h beside andThen; it sits here until a
// change to that header (which rebuilds the tree) moves it.
#pragma once

#include "runtime/AsyncValue.h"
#include "runtime/Tensor.h"

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace kiln {

/// Runs `f` once every value of `values` is available (TFRT's RunWhenReady);
/// at once when there are none.
inline void whenAllAvailable(const std::vector<AsyncValueRef<Tensor>> &values, std::function<void()> f) {
  if (values.empty()) return f();
  auto pending = std::make_shared<std::atomic<size_t>>(values.size());
  auto shared = std::make_shared<std::function<void()>>(std::move(f));
  for (const auto &v : values)
    v->andThen([pending, shared] {
      if (pending->fetch_sub(1, std::memory_order_acq_rel) == 1) (*shared)();
    });
}

}  // namespace kiln
