// Memory around bursts of asynchronous calls, through the public C++ API
// (libkiln.so): resident memory after the first call, the peak while 100
// calls are in flight, and what stays after they finished, for two bursts.
// Memory a burst took should go back (pooled executions are capped, arenas
// of 1 MiB or more are unmapped) and max_in_flight should bound the peak.
//   kiln_burst_memory [MODEL=resnet50] [MAX_IN_FLIGHT=0]
#include <kiln/kiln.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

static long residentMB() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096 / (1 << 20);
}

int main(int argc, char **argv) {
  const std::string model = argc > 1 ? argv[1] : "resnet50";
  const int maxInFlight = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    kiln::Options options;
    options.set("cache", "off").set("max_in_flight", maxInFlight);
    kiln::Runtime rt(options);
    kiln::Module m = rt.loadBuiltin(model);
    std::vector<kiln::Tensor> inputs;
    for (const kiln::TensorInfo &in : m.inputs()) inputs.push_back(kiln::Tensor::zeros(in.dtype, in.shape));
    m.call(inputs);
    std::printf("%s, max_in_flight %d: after the first call %ld MB\n", model.c_str(), maxInFlight, residentMB());
    std::atomic<long> peak{0};
    std::atomic<bool> stop{false};
    std::thread sampler([&] {
      while (!stop) {
        long r = residentMB();
        if (r > peak) peak = r;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    for (int burst = 1; burst <= 2; ++burst) {
      peak = 0;
      {
        std::vector<kiln::AsyncCall> calls;
        for (int i = 0; i < 100; ++i) calls.push_back(m.callAsync("", inputs));
        for (kiln::AsyncCall &c : calls) c.wait();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::printf("burst %d of 100 calls: peak %ld MB, after %ld MB\n", burst, peak.load(), residentMB());
    }
    stop = true;
    sampler.join();
    return 0;
  } catch (const kiln::Error &e) {
    std::fprintf(stderr, "kiln_burst_memory: %s\n", e.what());
    return 1;
  }
}
