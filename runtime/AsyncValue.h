// AsyncValue: a value that becomes available later, as a concrete T or an
// error (a Status: code, message, location, carried unchanged to awaitValue).
//
// State machine: unavailable -> concrete | error, exactly once. The state and
// the list of waiting continuations share one atomic word (low 2 bits: state;
// the rest: the head of a lock-free stack of waiters), so setting a value,
// checking it and adding a continuation take no mutex. `await()` blocks the
// calling thread (it must not be an executor worker).
//
// Ownership: intrusive reference count; AsyncValueRef<T> is the smart pointer.
// Thread-safety: all methods are thread-safe. The payload may be read by any
// thread once the value is available; it must not be mutated after that.
#pragma once

#include "runtime/Error.h"

#include "llvm/ADT/FunctionExtras.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

namespace kiln {

class AsyncValue {
public:
  enum class State : uintptr_t { kUnavailable = 0, kConcrete = 1, kError = 2 };

  AsyncValue(const AsyncValue &) = delete;
  AsyncValue &operator=(const AsyncValue &) = delete;

  State state() const { return State(word_.load(std::memory_order_acquire) & kStateMask); }
  bool isAvailable() const { return state() != State::kUnavailable; }
  bool isConcrete() const { return state() == State::kConcrete; }
  bool isError() const { return state() == State::kError; }

  /// The error (code, message, location); only valid when isError().
  const Status &error() const {
    assert(isError());
    return error_;
  }
  /// Makes the value an error (must be unavailable).
  void setError(Status status) {
    error_ = std::move(status);
    publish(State::kError);
  }
  /// The same from a failed llvm::Error (consumed).
  void setError(llvm::Error err) { setError(toStatus(std::move(err))); }

  /// Runs `f` once the value is available: inline now if it already is,
  /// otherwise on the thread that makes it available.
  template <typename F> void andThen(F &&f) {
    uintptr_t w = word_.load(std::memory_order_acquire);
    if ((w & kStateMask) != uintptr_t(State::kUnavailable)) {
      f();
      return;
    }
    auto *node = new Waiter{nullptr, llvm::unique_function<void()>(std::forward<F>(f))};
    while (true) {
      if ((w & kStateMask) != uintptr_t(State::kUnavailable)) {
        node->fn();
        delete node;
        return;
      }
      node->next = reinterpret_cast<Waiter *>(w & ~kStateMask);
      if (word_.compare_exchange_weak(w, reinterpret_cast<uintptr_t>(node),
                                      std::memory_order_acq_rel, std::memory_order_acquire))
        return;
    }
  }

  /// Blocks until the value is available. Spins briefly first: results of
  /// short executions usually arrive sooner than a sleeping thread wakes up.
  void await() {
    if (isAvailable()) return;
    for (int i = 0; i < 2048; ++i) {  // some tens of microseconds at most
      if (isAvailable()) return;
      if ((i & 63) == 63) std::this_thread::yield();
#if defined(__x86_64__)
      else __builtin_ia32_pause();
#endif
    }
    struct Sync {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto sync = std::make_shared<Sync>();
    andThen([sync] {
      std::lock_guard<std::mutex> lock(sync->mu);
      sync->done = true;
      sync->cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(sync->mu);
    sync->cv.wait(lock, [&] { return sync->done; });
  }

  void addRef() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void dropRef() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy_(const_cast<AsyncValue *>(this));
  }
  uint32_t refCount() const { return refs_.load(std::memory_order_relaxed); }

protected:
  using Destroy = void (*)(AsyncValue *);
  explicit AsyncValue(Destroy destroy, uint32_t refs = 1) : refs_(refs), destroy_(destroy) {}
  ~AsyncValue() {
    // Unfired waiters (never made available) are freed without running.
    uintptr_t w = word_.load(std::memory_order_acquire);
    if ((w & kStateMask) == uintptr_t(State::kUnavailable)) {
      for (Waiter *n = reinterpret_cast<Waiter *>(w & ~kStateMask); n;) {
        Waiter *next = n->next;
        delete n;
        n = next;
      }
    }
  }

  /// Flips the state and runs the waiters in the order they were added.
  void publish(State s) {
    uintptr_t old = word_.exchange(uintptr_t(s), std::memory_order_acq_rel);
    assert((old & kStateMask) == uintptr_t(State::kUnavailable) && "AsyncValue set twice");
    Waiter *list = reinterpret_cast<Waiter *>(old & ~kStateMask), *reversed = nullptr;
    while (list) {
      Waiter *next = list->next;
      list->next = reversed;
      reversed = list;
      list = next;
    }
    while (reversed) {
      Waiter *next = reversed->next;
      reversed->fn();
      delete reversed;
      reversed = next;
    }
  }

private:
  struct alignas(8) Waiter {
    Waiter *next;
    llvm::unique_function<void()> fn;
  };
  static constexpr uintptr_t kStateMask = 3;
  std::atomic<uintptr_t> word_{0};
  mutable std::atomic<uint32_t> refs_;
  Destroy destroy_;
  Status error_;
};

/// An AsyncValue holding a T once concrete.
template <typename T> class AsyncValueOf final : public AsyncValue {
public:
  AsyncValueOf() : AsyncValue(&destroy) {}
  ~AsyncValueOf() {
    if (isConcrete()) get().~T();
  }
  template <typename... Args> void emplace(Args &&...args) {
    new (&storage_) T(std::forward<Args>(args)...);
    publish(State::kConcrete);
  }
  const T &get() const {
    assert(isConcrete());
    return *std::launder(reinterpret_cast<const T *>(&storage_));
  }
  T &get() {
    assert(isConcrete());
    return *std::launder(reinterpret_cast<T *>(&storage_));
  }

  /// A process-lifetime value (e.g. the ready chain): its count starts so
  /// high that balanced addRef/dropRef pairs never free it.
  static AsyncValueOf *immortal() { return new AsyncValueOf(StaticTag{}); }

private:
  struct StaticTag {};
  explicit AsyncValueOf(StaticTag) : AsyncValue(&destroy, 1u << 30) {}
  static void destroy(AsyncValue *v) { delete static_cast<AsyncValueOf *>(v); }
  alignas(T) unsigned char storage_[sizeof(T)];
};

/// Reference-counted handle to an AsyncValueOf<T>.
template <typename T> class AsyncValueRef {
public:
  AsyncValueRef() = default;
  explicit AsyncValueRef(AsyncValueOf<T> *adopt) : v_(adopt) {}
  AsyncValueRef(const AsyncValueRef &o) : v_(o.v_) {
    if (v_) v_->addRef();
  }
  AsyncValueRef(AsyncValueRef &&o) noexcept : v_(std::exchange(o.v_, nullptr)) {}
  AsyncValueRef &operator=(AsyncValueRef o) noexcept {
    std::swap(v_, o.v_);
    return *this;
  }
  ~AsyncValueRef() {
    if (v_) v_->dropRef();
  }

  explicit operator bool() const { return v_ != nullptr; }
  AsyncValueOf<T> *get() const { return v_; }
  AsyncValueOf<T> *operator->() const { return v_; }
  AsyncValueOf<T> &operator*() const { return *v_; }

  /// Blocks, then returns the value or the error as an llvm::Error.
  llvm::Expected<T> awaitValue() const {
    v_->await();
    if (v_->isError()) return makeError(v_->error());
    return v_->get();
  }

  static AsyncValueRef ready(const AsyncValueOf<T> *staticValue) {
    staticValue->addRef();
    return AsyncValueRef(const_cast<AsyncValueOf<T> *>(staticValue));
  }

private:
  AsyncValueOf<T> *v_ = nullptr;
};

template <typename T> AsyncValueRef<T> makeUnavailable() {
  return AsyncValueRef<T>(new AsyncValueOf<T>());
}
template <typename T, typename... Args> AsyncValueRef<T> makeAvailable(Args &&...args) {
  auto v = makeUnavailable<T>();
  v->emplace(std::forward<Args>(args)...);
  return v;
}
template <typename T> AsyncValueRef<T> makeErrorValue(Status status) {
  auto v = makeUnavailable<T>();
  v->setError(std::move(status));
  return v;
}

/// A control dependency without a payload.
struct Chain {};
/// An available Chain shared by everyone: getting it allocates nothing.
AsyncValueRef<Chain> readyChain();

}  // namespace kiln
