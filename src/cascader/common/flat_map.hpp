// An insert-only hash map with open addressing (linear probing) in one array: the memo
// caches of the planner's inner loops look up and insert tens of thousands of small keys per
// plan, and a node-based std::unordered_map spends most of that time in malloc and free.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace cascader {

template <typename Key, typename Value, typename Hash>
class FlatMap {
 public:
  // The value stored for `key`, or nullptr.
  const Value* find(const Key& key) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = slot_of(key); slots_[i].used; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return &slots_[i].value;
    }
    return nullptr;
  }

  // Stores `value` for `key` (which must not be stored yet) and returns it.
  const Value& insert(const Key& key, Value value) {
    if (2 * (count_ + 1) > slots_.size()) grow();
    size_t i = slot_of(key);
    while (slots_[i].used) i = (i + 1) & mask();
    slots_[i] = Slot{key, std::move(value), true};
    ++count_;
    return slots_[i].value;
  }

  size_t size() const { return count_; }

 private:
  struct Slot {
    Key key{};
    Value value{};
    bool used = false;
  };

  size_t mask() const { return slots_.size() - 1; }

  // The probe starts from the hash's bits all mixed down: the table keeps only the low ones.
  size_t slot_of(const Key& key) const {
    size_t h = Hash{}(key);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h & mask();
  }

  // Doubles the table (a power of two, at most half full), re-inserting every entry.
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : 2 * old.size(), Slot{});
    count_ = 0;
    for (Slot& s : old) {
      if (s.used) insert(s.key, std::move(s.value));
    }
  }

  std::vector<Slot> slots_;
  size_t count_ = 0;
};

}  // namespace cascader
