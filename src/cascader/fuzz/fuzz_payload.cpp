// Fuzz driver for the binary front door: mutated driver payloads through the parser, the
// command-stream decoder, the estimator and the executor, built with AddressSanitizer and
// UBSan (CMake option CASCADER_BUILD_FUZZ; tests/test_sanitizers.py builds and runs it).
//
//   fuzz_payload CASES SEED REGION_BYTES PAYLOAD FLASH [PAYLOAD FLASH ...]
//
// Each case takes one seed (round robin): a payload and its flash image (region 0: weights,
// scales, LUTs). It applies a few random mutations to the payload (word overwrites, bit flips,
// opcode swaps, truncation) or, one case in four, to the flash (broken weight streams) and
// runs it with the flash in region 0 and zeroed regions of REGION_BYTES elsewhere. A cascader::Error is the expected rejection; anything
// else (another exception, a sanitizer report, a crash) fails the run. Prints the counts of
// accepted and rejected cases.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cascader/arch/accelerator.hpp"
#include "cascader/arch/arch_config.hpp"
#include "cascader/arch/target_family.hpp"
#include "cascader/arch/system_config.hpp"
#include "cascader/common/error.hpp"
#include "cascader/perf/cycle_model.hpp"
#include "cascader/sim/command_stream.hpp"
#include "cascader/sim/driver_payload.hpp"
#include "cascader/sim/estimator.hpp"
#include "cascader/sim/executor.hpp"

namespace {

using namespace cascader;

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void put_word(std::vector<uint8_t>& b, size_t word, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[word * 4 + size_t(i)] = uint8_t(v >> (8 * i));
}

uint32_t get_word(const std::vector<uint8_t>& b, size_t word) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(b[word * 4 + size_t(i)]) << (8 * i);
  return v;
}

std::vector<uint8_t> mutate(std::vector<uint8_t> b, std::mt19937_64& rng) {
  const size_t words = b.size() / 4;
  if (words < 2) return b;
  std::uniform_int_distribution<size_t> any_word(0, words - 1);
  const int mutations = 1 + int(rng() % 4);
  for (int m = 0; m < mutations; ++m) {
    const size_t w = any_word(rng);
    switch (rng() % 6) {
      case 0:  // a random word: addresses, lengths, register values
        put_word(b, w, uint32_t(rng()));
        break;
      case 1:  // one flipped bit
        put_word(b, w, get_word(b, w) ^ (uint32_t(1) << (rng() % 32)));
        break;
      case 2:  // another command's opcode in this word's low 10 bits (cmd0 and cmd1 both)
        put_word(b, w, (get_word(b, w) & ~0x3ffu) | uint32_t(rng() % 0x400) | (rng() % 2 ? 0x4000u : 0u));
        break;
      case 3:  // a small register payload value, where range checks matter most
        put_word(b, w, (get_word(b, w) & 0xffffu) | (uint32_t(rng() % 8) << 16));
        break;
      case 4:  // a large parameter in a cmd1's second word (addresses, strides)
        put_word(b, w, uint32_t(0xffff0000u | (rng() & 0xffff)));
        break;
      default:  // truncation
        b.resize(size_t(rng() % b.size()));
        return b;
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || (argc - 4) % 2) {
    std::fprintf(stderr, "usage: %s CASES SEED REGION_BYTES PAYLOAD FLASH [PAYLOAD FLASH ...]\n", argv[0]);
    return 2;
  }
  const long cases = std::atol(argv[1]);
  std::mt19937_64 rng(std::strtoull(argv[2], nullptr, 10));
  const size_t region_bytes = std::strtoull(argv[3], nullptr, 10);
  std::vector<std::vector<uint8_t>> seeds, flashes;
  for (int i = 4; i + 1 < argc; i += 2) {
    seeds.push_back(read_file(argv[i]));
    flashes.push_back(read_file(argv[i + 1]));
  }
  std::vector<std::vector<uint8_t>> regions(8, std::vector<uint8_t>(region_bytes, 0));
  BlockConfigCache blocks;
  long accepted = 0, rejected = 0;
  for (long c = 0; c < cases; ++c) {
    // The first pass over the seeds runs them unmutated: they must be accepted, or the
    // mutations would only be exercising the rejection of a broken seed.
    const bool pristine = size_t(c) < seeds.size();
    const size_t s = size_t(c) % seeds.size();
    const bool flash_case = !pristine && rng() % 4 == 0;
    const std::vector<uint8_t> data = pristine || flash_case ? seeds[s] : mutate(seeds[s], rng);
    regions[0] = flash_case ? mutate(flashes[s], rng) : flashes[s];
    try {
      const sim::DriverPayload p = sim::parse_driver_payload(data.data(), data.size());
      const sim::CommandStream cs = sim::decode_command_stream(p.command_stream.data(), p.command_stream.size(), static_cast<Product>(p.config.product));
      const TargetFamily& family = target_family(static_cast<Product>(p.config.product));
      const ArchConfig arch(accelerator_config(p.config.accelerator()), system_config_preset(family.default_system),
                            family.default_memory_mode);
      sim::estimate_stream(cs, arch, blocks);
      std::array<sim::RegionMemory, 8> mem{};
      for (size_t r = 0; r < 8; ++r) {
        if (r > 0) std::fill(regions[r].begin(), regions[r].end(), uint8_t(0));
        mem[r] = {regions[r].data(), regions[r].size()};
      }
      sim::Executor(p.config, mem).run(cs);
      ++accepted;
    } catch (const Error& e) {
      if (pristine) {
        std::fprintf(stderr, "seed %ld is rejected: %s\n", c, e.what());
        return 1;
      }
      if (rejected++ < 3) std::fprintf(stderr, "case %ld rejected: %s\n", c, e.what());
    }
  }
  std::printf("accepted %ld rejected %ld\n", accepted, rejected);
  return 0;
}
