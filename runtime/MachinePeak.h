// What this machine can do at best, measured in the calling thread's CPU
// time (so that other work on the machine does not lower the figures): one
// core's fp32 FMA throughput and the memory bandwidth one thread reaches. Profiles and
// benchmarks put kernels' achieved rates against these.
#pragma once

namespace kiln {

/// One core's fp32 FMA peak in GFLOP/s, measured with register-resident FMA
/// chains on the widest vectors the host has (at most `maxVectorBits`, 0 =
/// no cap); 0 when the host has neither AVX-512 nor AVX2+FMA. About 0.1 s.
double measureFmaPeakGflops(int maxVectorBits = 0);

/// Memory bandwidth of one thread in GB/s (read + write of a buffer well
/// past the last-level cache, best of a few copies). About 0.1 s.
double measureMemoryBandwidthGBs();

}  // namespace kiln
