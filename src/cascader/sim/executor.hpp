// Bit-exact functional execution of decoded Ethos-U operations over region memories.
//
// Each block operation gathers its IFM(s) into a dense zero-point-corrected buffer (through
// the tiles, strides and layout the registers give), computes in 64/128-bit integers the way
// the NPU's MAC and output units do (40-bit bias, per-channel or global 32-bit scale and
// 6-bit shift, the rounding mode, zero points, clamp, LUT), and scatters the OFM back.
// Complexity: O(MACs) for convolutions, O(elements) otherwise; every access is bounds-checked
// against its region so a bad binary raises BinaryError instead of touching foreign memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "cascader/arch/ethos_u85/accumulators.hpp"
#include "cascader/emit/weights.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/driver_payload.hpp"

namespace cascader::sim {

// A region's memory, owned by the caller. Several regions may share the same bytes (Vela's
// scratch and scratch_fast are the same arena on a Shared_Sram system).
struct RegionMemory {
  uint8_t* data = nullptr;
  size_t size = 0;
};

// A dense H x W x C map of values with the zero point removed (an operation's input).
struct Dense {
  int h = 0, w = 0, c = 0;
  std::vector<int64_t> v;
  const int64_t* at(int y, int x) const { return v.data() + (static_cast<size_t>(y) * w + x) * c; }
};

struct ExecutionStats {
  size_t operations = 0;
  size_t dma_bytes = 0;
  uint64_t macs = 0;
};

class Executor {
 public:
  Executor(const NpuConfig& config, const std::array<RegionMemory, 8>& regions);

  // Runs the operations in order (at most `max_operations` of them, to inspect
  // intermediates). Vela's waits only order work that is already ordered here, so
  // sequential execution gives the hardware's results.
  ExecutionStats run(const CommandStream& stream, size_t max_operations = std::numeric_limits<size_t>::max());

  void execute(const NpuOperation& op);

  const std::vector<uint8_t>& shram() const { return shram_; }

 private:
  NpuConfig config_;
  std::array<RegionMemory, 8> regions_;
  std::vector<uint8_t> shram_;
  ExecutionStats stats_;
  // Ethos-U85: the accelerator (its micro-blocks and weight decoders), and the chaining
  // buffers, numbered by the REGION field of the map in them: each holds the OFM of an
  // operation whose OFM storage is CHAINED (values in its OFM type) until a later operation of
  // the chain reads it as its IFM or IFM2 (a chain of up to 4 operations uses several).
  const AcceleratorConfig* accelerator_ = nullptr;
  struct Chained {
    int h = 0, w = 0, c = 0;
    DataType dtype = DataType::S8;
    std::vector<int64_t> v;
    bool valid = false;
  };
  std::array<Chained, 8> chained_;
  // The LUT RAM bytes [begin, end) the operations of the chain not yet ended read their tables
  // from: the chain runs its operations block by block together, so until its last operation
  // those bytes must hold the tables (a DMA over them is refused).
  std::vector<std::pair<uint64_t, uint64_t>> chain_tables_;
  ethos_u85::AccumulatorRam accumulators_;  // kept between Ethos-U85 operations
  bool u85() const { return config_.product == static_cast<int>(Product::EthosU85); }
  Dense read_input(const NpuOperation& op, const FeatureMap& fm, int storage, int H, int W, int C, int upscale,
                   const char* what);

  uint8_t* bytes(const NpuOperation& op, int region, uint64_t address, uint64_t length, const char* what);
  Dense read_map(const NpuOperation& op, const FeatureMap& fm, int H, int W, int C, int upscale, const char* what);
  void load_weights(const NpuOperation& op, int kh, int kw, int ifm_depth, std::vector<int16_t>& w,
                    std::vector<emit::BiasScale>& scales);
  void dma(const NpuOperation& op);
  void block(const NpuOperation& op);
  void write_output(const NpuOperation& op, const std::vector<int64_t>& acc,
                    const std::vector<emit::BiasScale>& channel_scale);
};

// The output unit's scaling of an accumulator: (acc * scale) >> shift with the given rounding.
// TFL reproduces TensorFlow Lite's fixed-point multiply (a rounding doubling high multiply
// then a rounding right shift); NATURAL rounds half up; TRUNCATE rounds toward zero.
int64_t scale_accumulator(int64_t acc, uint32_t scale, int shift, Rounding rounding);

}  // namespace cascader::sim
