"""PyTorch's ResNet-50 at batch 1 on the GPU with cuDNN, FP32 and FP16 (channels-last),
timed with CUDA events: the peer bench/gpu/run.sh compares kiln with. Random weights
(latency does not depend on their values). Prints one line per precision."""
import statistics
import sys

try:
    import torch
    import torchvision
except ImportError as e:  # the peer is optional
    print(f"skipped: {e}")
    sys.exit(1)

if not torch.cuda.is_available():
    print("skipped: torch sees no GPU")
    sys.exit(1)

torch.backends.cudnn.benchmark = True
model = torchvision.models.resnet50().eval().cuda().to(memory_format=torch.channels_last)
x = torch.randn(1, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
    m = model.to(dtype)
    xi = x.to(dtype)
    times = []
    with torch.inference_mode():
        for _ in range(30):
            m(xi)
        torch.cuda.synchronize()
        for _ in range(200):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            m(xi)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    times.sort()
    print(f"torch {name}: p50 {statistics.median(times):.3f} ms, p90 {times[int(0.9 * len(times))]:.3f} ms "
          f"({torch.cuda.get_device_name()}, torch {torch.__version__})")
