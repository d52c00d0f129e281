#include "cache/CompileCache.h"

namespace kiln::cache {

CompileCache::CompileCache(size_t capacity, DiskCacheOptions disk)
    : capacity_(std::max<size_t>(capacity, 1)), disk_(DiskCache::open(std::move(disk))) {}

size_t CompileCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

CompileCacheStats CompileCache::stats() const {
  CompileCacheStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s = stats_;
  }
  s.disk = disk_->stats();
  return s;
}

void CompileCache::recordDiskHit(double ms) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.diskHits;
  stats_.diskLoadMs += ms;
}

void CompileCache::recordCompile(double ms, bool ok, int jitFallbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.compiles;
  stats_.jitFallbacks += uint64_t(jitFallbacks);
  stats_.compileFailures += !ok;
  stats_.compileMs += ms;
}

llvm::Expected<CompileCache::Value>
CompileCache::getOrProduce(const CacheKeyParts &key,
                           llvm::function_ref<llvm::Expected<Value>()> produce) {
  std::string digest = key.digest();
  AsyncValueRef<Value> value;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = entries_.try_emplace(digest);
    it->second.lastUse = ++tick_;
    if (inserted) {
      it->second.value = makeUnavailable<Value>();
      producer = true;
      ++stats_.memoryMisses;
    } else {
      ++stats_.memoryHits;
    }
    value = it->second.value;
  }
  if (!producer) {
    auto v = value.awaitValue();  // single flight: wait for the producer
    if (!v) return v.takeError();
    return *v;
  }
  auto produced = produce();
  std::lock_guard<std::mutex> lock(mu_);
  if (!produced) {
    std::string msg = llvm::toString(produced.takeError());
    entries_.erase(digest);  // not cached: a later call retries
    value->setError(msg);
    return llvm::createStringError("%s", msg.c_str());
  }
  value->emplace(*produced);
  // Bounded: evict the least recently used finished entries.
  while (entries_.size() > capacity_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.value->isAvailable() && it->first() != digest &&
          (victim == entries_.end() || it->second.lastUse < victim->second.lastUse))
        victim = it;
    if (victim == entries_.end()) break;
    entries_.erase(victim);
    ++stats_.evictions;
  }
  return *produced;
}

}  // namespace kiln::cache
