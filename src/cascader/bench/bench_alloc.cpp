// Allocation benchmark on minimalloc-format CSVs (id,lower,upper,size; capacity in the file name
// as <name>.<capacity>.csv): exact solver at that capacity beside greedy best fit and TFLM's
// greedy first fit. Usage: bench_alloc file.csv...
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cascader/common/error.hpp"
#include "cascader/memory/exact_allocator.hpp"
#include "cascader/memory/greedy_allocator.hpp"

namespace {

std::vector<cascader::LiveRange> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw cascader::InvalidArgument("cannot open " + path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<cascader::LiveRange> ranges;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream row(line);
    std::string field;
    std::vector<int64_t> v;
    while (std::getline(row, field, ',')) v.push_back(std::stoll(field));
    if (v.size() < 4) throw cascader::InvalidArgument(path + ": short row: " + line);
    ranges.push_back({v[1], v[2], v[3], v.size() > 4 ? v[4] : 1});
  }
  return ranges;
}

int64_t capacity_of(const std::string& path) {
  const size_t end = path.rfind('.');
  const size_t begin = path.rfind('.', end - 1);
  return std::stoll(path.substr(begin + 1, end - begin - 1));
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("%-10s %6s %10s %10s %10s %8s %8s %9s %10s %s\n", "instance", "n", "lower", "exact", "greedy-bf",
              "gap-bf", "tflm-ff", "time-s", "nodes", "status");
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    const auto ranges = read_csv(path);
    const int64_t capacity = capacity_of(path);
    const auto bf = cascader::greedy_allocate(ranges, cascader::GreedyFit::BestFit);
    const auto ff = cascader::greedy_allocate(ranges, cascader::GreedyFit::FirstFit);
    cascader::ExactOptions options;
    options.capacity = capacity;
    options.minimise = false;
    options.time_limit_s = getenv("TL") ? atof(getenv("TL")) : 10.0;
    options.node_limit = 100'000'000;
    std::string name = path.substr(path.rfind('/') + 1);
    try {
      const auto ex = cascader::exact_allocate(ranges, options);
      cascader::check_allocation(ranges, ex.offsets);
      std::printf("%-10s %6zu %10lld %10lld %10lld %7.1f%% %7.1f%% %9.3f %10lld %s\n", name.c_str(), ranges.size(),
                  (long long)bf.lower_bound, (long long)ex.height, (long long)bf.height,
                  100.0 * double(bf.height - ex.height) / double(ex.height),
                  100.0 * double(ff.height - ex.height) / double(ex.height), ex.seconds, (long long)ex.nodes,
                  ex.height <= capacity ? "fits" : "over");
    } catch (const cascader::BudgetError& e) {
      std::printf("%-10s %6zu FAILED: %s\n", name.c_str(), ranges.size(), e.what());
    }
  }
  return 0;
}
