// The command-word writer every register encoder shares (U55/U65 in emit/command_encoder, the
// U85 in arch/ethos_u85/command_encoder): cmd0 and cmd1 register writes with range checks and
// redundant-write elimination (a register already holding the value is not written again), and
// operation commands. The word format is common to the products (arch/npu_registers.hpp:
// 10-bit opcode, payload flag, 16-bit parameter; a cmd1's 32-bit payload follows it).
// Complexity: O(1) per write.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cascader/arch/npu_registers.hpp"
#include "cascader/common/error.hpp"
#include "cascader/sim/command_stream.hpp"

namespace cascader::emit {

class RegisterWriter {
 public:
  explicit RegisterWriter(size_t index = 0) : index_(index) { r0_.fill(-1), r1_.fill(~uint64_t{0}); }

  // The operation whose registers are being written (named in errors).
  void set_index(size_t index) { index_ = index; }

  // A cmd0 register write, skipped when the register already holds the value.
  void reg0(uint32_t op, int64_t value, const char* name, int64_t lo, int64_t hi) {
    check(value, lo, hi, name);
    const uint16_t v = static_cast<uint16_t>(value & 0xFFFF);
    if (r0_[op] == v) return;
    r0_[op] = v;
    words_.push_back(op | (static_cast<uint32_t>(v) << npu::kParamShift));
  }
  // A cmd1 register write (48-bit value: the low 32 bits in the payload word).
  void reg1(uint32_t op, uint64_t value, const char* name, uint64_t max = (uint64_t{1} << 48) - 1) {
    if (value > max) fail(name, std::to_string(value) + " exceeds " + std::to_string(max));
    if (r1_[op] == value) return;
    r1_[op] = value;
    words_.push_back(op | npu::kCmd1Flag | (static_cast<uint32_t>(value >> 32) << npu::kParamShift));
    words_.push_back(static_cast<uint32_t>(value & 0xFFFFFFFFu));
  }
  // An operation command (never elided).
  void command(uint32_t op, int64_t param, const char* name) {
    check(param, 0, 0xFFFF, name);
    words_.push_back(op | (static_cast<uint32_t>(param) << npu::kParamShift));
  }

  void check(int64_t value, int64_t lo, int64_t hi, const char* name) const {
    if (value < lo || value > hi) {
      fail(name, std::to_string(value) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    }
  }
  [[noreturn]] void fail(const char* name, const std::string& what) const {
    throw InvalidArgument("operation " + std::to_string(index_) + ": " + name + " " + what);
  }

  std::vector<uint32_t> take() { return std::move(words_); }

 private:
  size_t index_;
  std::vector<uint32_t> words_;
  // -1 (all bits set) marks "never written": a real 16-bit value is at most 0xFFFF.
  std::array<int32_t, 1024> r0_;
  std::array<uint64_t, 1024> r1_;
};

// The registers of one feature map (region, tile bases, strides, tile sizes, zero point): the
// products lay them out alike (the base registers, then the X, Y and C strides, follow the
// first base) at their own opcodes.
struct MapRegisters {
  uint32_t region, base0, h0, h1, w0, zp;
};

inline void write_feature_map(RegisterWriter& w, const sim::FeatureMap& f, const MapRegisters& r) {
  w.reg0(r.region, f.region, "region", 0, 7);
  for (int i = 0; i < 4; ++i) w.reg1(r.base0 + i, f.base[i], "tile base");
  w.reg1(r.base0 + 4, static_cast<uint64_t>(f.stride_x), "stride x", 0xFFFFFFFFu);
  w.reg1(r.base0 + 5, static_cast<uint64_t>(f.stride_y), "stride y", 0xFFFFFFFFu);
  w.reg1(r.base0 + 6, static_cast<uint64_t>(f.stride_c), "stride c", 0xFFFFFFFFu);
  if (f.stride_x < 0 || f.stride_y < 0 || f.stride_c < 0) w.fail("strides", "must not be negative");
  w.reg0(r.h0, f.height0 - 1, "tile height0", 0, 0xFFFF);
  w.reg0(r.h1, f.height1 - 1, "tile height1", 0, 0xFFFF);
  w.reg0(r.w0, f.width0 - 1, "tile width0", 0, 0xFFFF);
  const bool is_unsigned = f.dtype == sim::DataType::U8 || f.dtype == sim::DataType::U16;
  w.reg0(r.zp, f.zero_point, "zero point", is_unsigned ? 0 : -32768, is_unsigned ? 65535 : 32767);
}

}  // namespace cascader::emit
