#include "cascader/sim/driver_payload.hpp"

#include <cstring>
#include <string>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/ethos_u85/ethos_u85.hpp"
#include "cascader/arch/target_family.hpp"
#include "cascader/common/error.hpp"

namespace cascader::sim {

namespace {

[[noreturn]] void fail(size_t word, const std::string& what) {
  throw BinaryError("driver payload word " + std::to_string(word) + ": " + what);
}

uint32_t tag(DriverAction id, uint32_t reserved, uint32_t param) {
  return static_cast<uint32_t>(id) | (reserved << 8) | (param << 16);
}

int log2_exact(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

bool is_u85(int product) { return product == static_cast<int>(Product::EthosU85); }

}  // namespace

NpuConfig NpuConfig::for_accelerator(const std::string& name, uint32_t id_word) {
  const AcceleratorConfig& a = accelerator_config(name);
  NpuConfig c;
  c.macs_per_cc = a.macs_per_cycle * a.cores;
  c.product = static_cast<int>(a.product);
  if (a.product == Product::EthosU85) {
    c.cmd_stream_version = ethos_u85::kCommandStreamVersion;
    c.axi_sram_ports_log2 = a.axi_sram_ports_log2;
    c.axi_ext_ports_log2 = a.axi_ext_ports_log2;
    c.weight_decoders = a.weight_decoders;
  } else {
    c.shram_kib = a.shram_banks * a.shram_bank_bytes / 1024 * a.cores;
  }
  c.id_word = id_word != 0 ? id_word : target_family(a.product).id_word;
  c.config_word = c.pack();
  return c;
}

uint32_t NpuConfig::pack() const {
  uint32_t w = static_cast<uint32_t>(log2_exact(macs_per_cc)) | (static_cast<uint32_t>(cmd_stream_version & 0xF) << 4) |
               (static_cast<uint32_t>(product & 0xF) << 28);
  if (is_u85(product)) {
    return w | (static_cast<uint32_t>(axi_sram_ports_log2 & 3) << 8) |
           (static_cast<uint32_t>(axi_ext_ports_log2 & 1) << 10) |
           (static_cast<uint32_t>(log2_exact(weight_decoders) & 3) << 12);
  }
  return w | (static_cast<uint32_t>(shram_kib & 0xFF) << 8);
}

void NpuConfig::unpack() {
  const uint32_t c = config_word;
  macs_per_cc = 1 << (c & 0xF);
  cmd_stream_version = (c >> 4) & 0xF;
  product = (c >> 28) & 0xF;
  if (is_u85(product)) {
    shram_kib = 0;
    axi_sram_ports_log2 = (c >> 8) & 3;
    axi_ext_ports_log2 = (c >> 10) & 1;
    weight_decoders = 1 << ((c >> 12) & 3);
  } else {
    shram_kib = (c >> 8) & 0xFF;
  }
}

std::string NpuConfig::accelerator() const {
  for (const auto& f : target_families()) {
    if (static_cast<int>(f.product) != product) continue;
    for (const auto& a : f.accelerators) {
      if (a.macs_per_cycle * a.cores == macs_per_cc) return a.name;
    }
  }
  return "";
}

DriverPayload parse_driver_payload(const uint8_t* data, size_t size) {
  if (size % 4 != 0) {
    throw BinaryError("driver payload size " + std::to_string(size) + " is not a multiple of 4 bytes");
  }
  const size_t n = size / 4;
  std::vector<uint32_t> w(n);
  if (n) std::memcpy(w.data(), data, n * 4);  // little-endian host assumed, as the NPU is
  if (n == 0 || w[0] != kCop1Fourcc) fail(0, "missing the 'COP1' fourcc");
  DriverPayload p;
  size_t i = 1;
  bool have_stream = false;
  while (i < n) {
    const size_t at = i;
    const uint32_t t = w[i++];
    switch (static_cast<DriverAction>(t & 0xFF)) {
      case DriverAction::Config: {
        if (i + 2 > n) fail(at, "truncated config action");
        p.config.config_word = w[i];
        p.config.id_word = w[i + 1];
        i += 2;
        p.config.unpack();
        if (p.config.product > static_cast<int>(Product::EthosU85)) {
          fail(at + 1, "unknown product " + std::to_string(p.config.product));
        }
        if (p.config.accelerator().empty()) {
          fail(at + 1, "no " + target_family(static_cast<Product>(p.config.product)).name + " accelerator has " +
                           std::to_string(p.config.macs_per_cc) + " MACs per cycle");
        }
        if (!is_u85(p.config.product) && p.config.shram_kib == 0) fail(at + 1, "config word gives a SHRAM size of 0");
        p.has_config = true;
        break;
      }
      case DriverAction::CmdStream: {
        if (have_stream) fail(at, "a second command stream");
        const size_t len = ((t >> 16) & 0xFFFF) | (((t >> 8) & 0xFF) << 16);
        if (i + len > n) {
          fail(at, "command stream of " + std::to_string(len) + " words overruns the payload (" +
                       std::to_string(n - i) + " words left)");
        }
        p.command_stream.assign(w.begin() + static_cast<std::ptrdiff_t>(i),
                                w.begin() + static_cast<std::ptrdiff_t>(i + len));
        p.command_stream_word = i;
        i += len;
        have_stream = true;
        break;
      }
      case DriverAction::ReadApb: case DriverAction::DumpShram: case DriverAction::Nop:
        break;
      default:
        fail(at, "unknown driver action " + std::to_string(t & 0xFF));
    }
  }
  if (!have_stream) fail(n, "no command stream action");
  if (!p.has_config) fail(n, "no config action");
  return p;
}

std::vector<uint8_t> encode_driver_payload(const std::vector<uint32_t>& command_stream, const NpuConfig& config) {
  if (command_stream.empty()) throw InvalidArgument("the command stream is empty");
  if (command_stream.size() > kMaxCommandStreamWords) {
    throw InvalidArgument("the command stream has " + std::to_string(command_stream.size()) +
                          " words; the driver payload's length field holds at most " +
                          std::to_string(kMaxCommandStreamWords));
  }
  std::vector<uint32_t> w{kCop1Fourcc, tag(DriverAction::Config, 0, kConfigActionParam), config.config_word,
                          config.id_word};
  // The NPU fetches commands in 16-byte beats: pad so the first command word is aligned.
  while ((w.size() + 1) % 4 != 0) w.push_back(tag(DriverAction::Nop, 0, 0));
  const auto len = static_cast<uint32_t>(command_stream.size());
  w.push_back(tag(DriverAction::CmdStream, len >> 16, len & 0xFFFF));
  w.insert(w.end(), command_stream.begin(), command_stream.end());
  std::vector<uint8_t> bytes(w.size() * 4);
  std::memcpy(bytes.data(), w.data(), bytes.size());  // little-endian host, as in the parser
  return bytes;
}

}  // namespace cascader::sim
