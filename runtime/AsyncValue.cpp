#include "runtime/AsyncValue.h"

namespace kiln {

AsyncValueRef<Chain> readyChain() {
  static AsyncValueOf<Chain> *chain = [] {
    auto *c = AsyncValueOf<Chain>::immortal();
    c->emplace();
    return c;
  }();
  return AsyncValueRef<Chain>::ready(chain);
}

}  // namespace kiln
