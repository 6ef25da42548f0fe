// Throughput of the NPU cycle model: op estimates per second on one core, with the block-config
// choice cached (the planner's use), and without the cache (a block search per estimate).
// Time is this thread's CPU time, so other processes on a shared machine do not skew the
// per-core figure; wall time is printed beside it.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "cascader/arch/arch_config.hpp"
#include "cascader/perf/cycle_model.hpp"

using namespace cascader;

namespace {

// A mix like a planner's: the layers of a MobileNet-style network, each at several stripe heights.
std::vector<NpuOp> make_ops() {
  std::vector<NpuOp> ops;
  struct L { NpuOpType t; int h, c_in, c_out, k, s; };
  const L layers[] = {
      {NpuOpType::Conv2D, 112, 8, 16, 3, 2},         {NpuOpType::DepthwiseConv2D, 56, 16, 16, 3, 1},
      {NpuOpType::Conv2D, 56, 16, 32, 1, 1},         {NpuOpType::DepthwiseConv2D, 56, 32, 32, 3, 2},
      {NpuOpType::Conv2D, 28, 32, 64, 1, 1},         {NpuOpType::DepthwiseConv2D, 28, 64, 64, 3, 1},
      {NpuOpType::Conv2D, 14, 128, 128, 1, 1},       {NpuOpType::Conv2D, 14, 128, 256, 3, 1},
      {NpuOpType::Add, 28, 64, 64, 1, 1},            {NpuOpType::MaxPool, 28, 64, 64, 2, 2},
      {NpuOpType::AvgPool, 7, 256, 256, 7, 1},       {NpuOpType::FullyConnected, 1, 256, 10, 1, 1},
  };
  for (const L& l : layers) {
    for (int stripe : {1, 2, 4, 8, 16, 32}) {
      NpuOp op;
      op.type = l.t;
      const int out_h = std::max(1, l.h / l.s);
      const int oh = std::min(stripe, out_h);
      const bool fc = l.t == NpuOpType::FullyConnected;
      op.kernel.height = op.kernel.width = l.k;
      op.kernel.stride_y = op.kernel.stride_x = l.s;
      op.ofm.shape = Shape4{1, fc ? 1 : oh, fc ? 1 : out_h, l.c_out};
      op.ifm.shape = Shape4{1, fc ? 1 : (oh - 1) * l.s + l.k, fc ? 1 : (out_h - 1) * l.s + l.k, l.c_in};
      if (l.t == NpuOpType::Add) {
        op.ifm.shape = op.ofm.shape;
        op.ifm2 = op.ifm;
      }
      if (l.t == NpuOpType::Conv2D || l.t == NpuOpType::DepthwiseConv2D || fc) {
        op.weight_bytes = int64_t(l.k) * l.k * (l.t == NpuOpType::DepthwiseConv2D ? 1 : l.c_in) * l.c_out;
        op.scale_bytes = 10 * l.c_out;
        op.activation = Activation::Relu;
      }
      ops.push_back(op);
    }
  }
  return ops;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main() {
  const std::vector<NpuOp> ops = make_ops();
  std::printf("cycle-model throughput, one core, %zu distinct ops\n\n", ops.size());
  std::printf("%-16s %-22s %16s %12s %16s\n", "accelerator", "block config", "estimates/cpu-s", "ns/estimate",
              "estimates/wall-s");
  double checksum = 0;
  for (const char* name : {"ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-512"}) {
    const ArchConfig arch(accelerator_config(name), system_config_preset(name[8] == '5' && name[9] == '5'
                                                                               ? "Ethos_U55_High_End_Embedded"
                                                                               : "Ethos_U65_High_End"),
                          MemoryMode::SharedSram);
    // Cached: what the planner does (the same op shapes recur across plans).
    BlockConfigCache cache;
    for (const NpuOp& op : ops) checksum += estimate(op, arch, cache).total_cycles;  // warm up
    const int reps = 4000;
    double c0 = cpu_seconds(), w0 = wall_seconds();
    for (int r = 0; r < reps; ++r) {
      for (const NpuOp& op : ops) checksum += estimate(op, arch, cache).total_cycles;
    }
    double dt = cpu_seconds() - c0, wt = wall_seconds() - w0;
    const double n = double(reps) * ops.size();
    std::printf("%-16s %-22s %16.0f %12.1f %16.0f\n", name, "cached", n / dt, 1e9 * dt / n, n / wt);

    // Uncached: a fresh block-config search for every estimate.
    const int cold_reps = 3;
    c0 = cpu_seconds();
    w0 = wall_seconds();
    for (int r = 0; r < cold_reps; ++r) {
      for (const NpuOp& op : ops) {
        BlockConfigCache fresh;
        checksum += estimate(op, arch, fresh).total_cycles;
      }
    }
    dt = cpu_seconds() - c0;
    wt = wall_seconds() - w0;
    const double m = double(cold_reps) * ops.size();
    std::printf("%-16s %-22s %16.0f %12.1f %16.0f\n", name, "searched every time", m / dt, 1e9 * dt / m, m / wt);
  }
  std::printf("\n(checksum %.0f)\n", checksum);
  return 0;
}
