// The Ethos-U driver payload ("COP1"): the blob Vela stores as an `ethos-u` custom operator's
// command-stream tensor. It is a fourcc followed by driver actions (config, NOPs, register
// reads, SHRAM dumps) and the command stream itself. Complexity: O(words).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cascader::sim {

struct NpuConfig {
  uint32_t config_word = 0;
  uint32_t id_word = 0;
  int macs_per_cc = 0;    // 2^log2 from the config word
  int shram_kib = 0;
  int product = 0;        // 0 Ethos-U55, 1 Ethos-U65
  int cmd_stream_version = 0;

  // Accelerator name in Vela's spelling ("ethos-u55-128"), derived from product and MACs.
  const char* accelerator() const;
  int ofm_ublock_depth() const { return macs_per_cc == 32 ? 4 : 8; }
  // Ethos-U65-512 is two 256-MAC cores; the config word's SHRAM size is their sum, while DMA
  // addresses (the LUTs) are within one core's SHRAM.
  int cores() const { return product == 1 && macs_per_cc >= 512 ? 2 : 1; }
  size_t shram_bytes_per_core() const { return static_cast<size_t>(shram_kib) * 1024 / static_cast<size_t>(cores()); }
  int ifm_ublock_depth() const { return 8; }
};

struct DriverPayload {
  NpuConfig config;
  bool has_config = false;
  std::vector<uint32_t> command_stream;
  size_t command_stream_word = 0;  // offset of the first command word within the payload
};

// Parses a driver payload. Throws BinaryError naming the word offset when the fourcc, an
// action tag or a length is wrong.
DriverPayload parse_driver_payload(const uint8_t* data, size_t size);

}  // namespace cascader::sim
