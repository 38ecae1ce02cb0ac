#include "data/gpt2_bpe.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "data/gpt2_bpe_vocab.h"
#include "data/gpt2_pretokenizer.h"

namespace data {
namespace {

using gpt2_bpe_internal::PieceScanner;

// ---- Encoding: each piece of the pre-tokenizer is merged on its own (BPE), and the ids of
// recent pieces are kept in a per-thread cache, so that common words are merged once per thread
// and threads never wait for each other.

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

// Pieces up to this many bytes are merged by the simple quadratic loop; longer ones by the
// heap (O(n log n)). Pieces up to kMaxCachedBytes are cached.
constexpr size_t kMaxQuadraticBytes = 32;
constexpr size_t kMaxCachedBytes = 64;

// Recently merged pieces -> their ids, for one thread and one tokenizer. Open addressing over a
// fixed number of slots; when half of them are used, or the keys fill kMaxKeyBytes, the cache
// starts over (common words come back at once). At most about 6.5 MB (1.5 MB of slots, keys, ids),
// typically 2 MB.
class PieceCache {
 public:
  // Appends the ids of `piece` (`hash` = Hash(piece)) to *ids and returns true if cached.
  bool Find(std::string_view piece, uint64_t hash, std::vector<int>* ids) const {
    if (slots_.empty()) return false;
    for (size_t i = hash & kMask;; i = (i + 1) & kMask) {
      const Slot& slot = slots_[i];
      if (slot.ids_count == 0) return false;
      if (slot.hash == hash && slot.key_length == piece.size() &&
          std::memcmp(keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
        ids->insert(ids->end(), ids_.begin() + slot.ids_offset,
                    ids_.begin() + slot.ids_offset + slot.ids_count);
        return true;
      }
    }
  }

  // Caches `piece` (at most kMaxCachedBytes bytes, not cached yet) -> ids[0, count), count > 0.
  void Insert(std::string_view piece, uint64_t hash, const int* ids, size_t count) {
    if (slots_.empty() || size_ >= kSlots / 2 || keys_.size() + piece.size() > kMaxKeyBytes) {
      Clear();
    }
    size_t i = hash & kMask;
    while (slots_[i].ids_count != 0) i = (i + 1) & kMask;
    slots_[i] = {hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(ids_.size()),
                 static_cast<uint16_t>(piece.size()), static_cast<uint16_t>(count)};
    keys_.append(piece.data(), piece.size());
    ids_.insert(ids_.end(), ids, ids + count);
    ++size_;
  }

  void Clear() {
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }

  static uint64_t Hash(std::string_view piece) { return std::hash<std::string_view>{}(piece); }

 private:
  static constexpr size_t kSlots = size_t{1} << 16;
  static constexpr size_t kMask = kSlots - 1;
  static constexpr size_t kMaxKeyBytes = size_t{1} << 20;

  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t key_length = 0;
    uint16_t ids_count = 0;  // 0: an empty slot
  };

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int> ids_;
  size_t size_ = 0;
};

// A symbol of a piece being merged by the heap: a token id in a doubly linked list.
struct Symbol {
  int id;    // -1 once merged into its left neighbour
  int prev;  // -1 at the start
  int next;  // -1 at the end
};

// A pair that may be merged: the symbols at `pos` and its next, if they still are `left` and
// `right` (candidates are not removed when a neighbour merges; they are checked when popped).
struct Candidate {
  uint32_t rank;
  uint32_t pos;
  int left;
  int right;
  int merged;
};

// Orders the heap so that the lowest rank, then the leftmost position, comes first.
struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

// What one thread keeps for one tokenizer: the cache and the heap merge's scratch space.
struct ThreadState {
  uint64_t owner = 0;  // the tokenizer's instance id
  PieceCache cache;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// This thread's state for tokenizer `instance_id`. The one piece of global mutable state: each
// thread keeps (thread_local) the states of the last kStatesPerThread tokenizers it used, freed
// when the thread ends; a state is reused for a new tokenizer once it is the oldest.
ThreadState& StateOfThisThread(uint64_t instance_id) {
  constexpr size_t kStatesPerThread = 4;
  thread_local std::array<std::unique_ptr<ThreadState>, kStatesPerThread> states;
  thread_local size_t oldest = 0;
  for (const std::unique_ptr<ThreadState>& state : states) {
    if (state != nullptr && state->owner == instance_id) return *state;
  }
  std::unique_ptr<ThreadState>& state = states[oldest];
  oldest = (oldest + 1) % kStatesPerThread;
  if (state == nullptr) state = std::make_unique<ThreadState>();
  state->owner = instance_id;
  state->cache.Clear();
  return *state;
}

// Ids for tokenizer instances, so that per-thread caches never mix two tokenizers (an address
// could be reused by a later tokenizer). Global on purpose; an atomic counter.
uint64_t NextInstanceId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

namespace gpt2_bpe_internal {

// (left id, right id) -> (rank, merged id), open addressing with linear probing.
class MergeTable {
 public:
  struct RankedMerge {
    uint32_t rank = kNoRank;
    int merged = -1;
  };

  // A table for up to `capacity` merges.
  explicit MergeTable(size_t capacity) {
    size_t slots = 16;
    while (slots < 2 * capacity) slots *= 2;
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
  }

  // Adds the merge of (left, right), a pair that has none yet.
  void Insert(int left, int right, RankedMerge merge) {
    const uint64_t key = Key(left, right);
    size_t i = Home(key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = {key, merge};
  }

  // The merge of (left, right); rank kNoRank if there is none.
  RankedMerge Find(int left, int right) const {
    const uint64_t key = Key(left, right);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].merge;
      if (slots_[i].key == kEmpty) return RankedMerge{};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are ints >= 0: never a key

  struct Slot {
    uint64_t key = kEmpty;
    RankedMerge merge;
  };

  static uint64_t Key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t Home(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace gpt2_bpe_internal

namespace {

using gpt2_bpe_internal::MergeTable;

// Merges pieces for one Encode call.
class PieceEncoder {
 public:
  PieceEncoder(const MergeTable& merges, const std::array<int, 256>& byte_ids, ThreadState* state)
      : merges_(merges), byte_ids_(byte_ids), state_(*state) {}

  // Appends the ids of `piece` (one pre-tokenized piece, not empty) to *ids.
  void Encode(std::string_view piece, std::vector<int>* ids) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(piece.data());
    if (piece.size() == 1) {
      ids->push_back(byte_ids_[bytes[0]]);
      return;
    }
    if (piece.size() > kMaxCachedBytes) {
      MergeWithHeap(bytes, piece.size(), ids);
      return;
    }
    const uint64_t hash = PieceCache::Hash(piece);
    if (state_.cache.Find(piece, hash, ids)) return;
    const size_t start = ids->size();
    if (piece.size() <= kMaxQuadraticBytes) {
      MergeQuadratic(bytes, piece.size(), ids);
    } else {
      MergeWithHeap(bytes, piece.size(), ids);
    }
    state_.cache.Insert(piece, hash, ids->data() + start, ids->size() - start);
  }

 private:
  // For short pieces: find the lowest-ranked pair (leftmost on a tie), merge it, repeat.
  void MergeQuadratic(const unsigned char* bytes, size_t n, std::vector<int>* ids) const {
    int symbols[kMaxQuadraticBytes];
    MergeTable::RankedMerge pairs[kMaxQuadraticBytes];  // pairs[i]: of symbols i and i + 1
    for (size_t i = 0; i < n; ++i) symbols[i] = byte_ids_[bytes[i]];
    for (size_t i = 0; i + 1 < n; ++i) pairs[i] = merges_.Find(symbols[i], symbols[i + 1]);
    size_t m = n;
    while (m > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < m; ++i) {
        if (pairs[i].rank < pairs[best].rank) best = i;
      }
      if (pairs[best].rank == kNoRank) break;
      symbols[best] = pairs[best].merged;
      std::copy(symbols + best + 2, symbols + m, symbols + best + 1);
      if (best + 2 < m - 1) std::copy(pairs + best + 2, pairs + m - 1, pairs + best + 1);
      --m;
      if (best + 1 < m) pairs[best] = merges_.Find(symbols[best], symbols[best + 1]);
      if (best > 0) pairs[best - 1] = merges_.Find(symbols[best - 1], symbols[best]);
    }
    ids->insert(ids->end(), symbols, symbols + m);
  }

  // For long pieces: the same merges in O(n log n), with a linked list of symbols and a heap of
  // candidate pairs checked when popped.
  void MergeWithHeap(const unsigned char* bytes, size_t n, std::vector<int>* ids) {
    std::vector<Symbol>& symbols = state_.symbols;
    std::vector<Candidate>& heap = state_.heap;
    symbols.resize(n);
    for (size_t i = 0; i < n; ++i) {
      symbols[i] = {byte_ids_[bytes[i]], static_cast<int>(i) - 1,
                    i + 1 < n ? static_cast<int>(i) + 1 : -1};
    }
    heap.clear();
    const auto add_candidate = [&](int pos) {
      const int next = symbols[pos].next;
      if (next < 0) return;
      const MergeTable::RankedMerge merge = merges_.Find(symbols[pos].id, symbols[next].id);
      if (merge.rank == kNoRank) return;
      heap.push_back({merge.rank, static_cast<uint32_t>(pos), symbols[pos].id, symbols[next].id,
                      merge.merged});
    };
    for (size_t i = 0; i + 1 < n; ++i) add_candidate(static_cast<int>(i));
    std::make_heap(heap.begin(), heap.end(), LaterCandidate());
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), LaterCandidate());
      const Candidate candidate = heap.back();
      heap.pop_back();
      // Stale if either symbol has changed since: a symbol's id only ever grows (in bytes), and
      // its next changes only when it merges, so equal ids mean the same pair.
      Symbol& left = symbols[candidate.pos];
      if (left.id != candidate.left) continue;
      const int right = left.next;
      if (right < 0 || symbols[right].id != candidate.right) continue;
      left.id = candidate.merged;
      symbols[right].id = -1;
      left.next = symbols[right].next;
      if (left.next >= 0) symbols[left.next].prev = static_cast<int>(candidate.pos);
      for (const int pos : {left.prev, static_cast<int>(candidate.pos)}) {
        if (pos < 0) continue;
        const size_t before = heap.size();
        add_candidate(pos);
        if (heap.size() > before) std::push_heap(heap.begin(), heap.end(), LaterCandidate());
      }
    }
    for (int i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
  }

  const MergeTable& merges_;
  const std::array<int, 256>& byte_ids_;
  ThreadState& state_;
};

}  // namespace

Gpt2BpeTokenizer::Gpt2BpeTokenizer() : instance_id_(NextInstanceId()) {}
Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<Gpt2BpeTokenizer>> Gpt2BpeTokenizer::Load(
    const std::string& vocab_file, const std::string& merge_file) {
  absl::StatusOr<gpt2_bpe_internal::Gpt2BpeVocab> vocab =
      gpt2_bpe_internal::ReadGpt2BpeVocab(vocab_file, merge_file);
  if (!vocab.ok()) return vocab.status();
  std::unique_ptr<Gpt2BpeTokenizer> tokenizer(new Gpt2BpeTokenizer());
  tokenizer->vocab_file_ = vocab_file;
  tokenizer->merge_file_ = merge_file;
  tokenizer->pieces_ = std::move(vocab->tokens);
  tokenizer->bytes_ = std::move(vocab->token_bytes);
  tokenizer->byte_ids_ = vocab->byte_ids;
  tokenizer->eod_id_ = vocab->eod_id;
  tokenizer->bytes_[tokenizer->eod_id_].clear();  // decodes as nothing
  auto merges = std::make_unique<MergeTable>(vocab->merges.size());
  for (size_t rank = 0; rank < vocab->merges.size(); ++rank) {
    const gpt2_bpe_internal::Merge& merge = vocab->merges[rank];
    merges->Insert(merge.left, merge.right, {static_cast<uint32_t>(rank), merge.merged});
  }
  tokenizer->merges_ = std::move(merges);
  return tokenizer;
}

std::vector<int> Gpt2BpeTokenizer::Encode(std::string_view text) const {
  std::vector<int> ids;
  ids.reserve(text.size() / 4 + 1);
  PieceEncoder encoder(*merges_, byte_ids_, &StateOfThisThread(instance_id_));
  const PieceScanner scanner(text);
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = scanner.PieceEnd(begin);
    encoder.Encode(text.substr(begin, end - begin), &ids);
    begin = end;
  }
  return ids;
}

std::string Gpt2BpeTokenizer::Decode(const std::vector<int>& ids) const {
  const int n = vocab_size();
  size_t size = 0;
  for (const int id : ids) {
    if (id >= 0 && id < n) size += bytes_[id].size();
  }
  std::string text;
  text.reserve(size);
  for (const int id : ids) {
    if (id >= 0 && id < n) text += bytes_[id];
  }
  return text;
}

std::string Gpt2BpeTokenizer::IdToPiece(int id) const {
  return id >= 0 && id < vocab_size() ? pieces_[id] : std::string();
}

std::vector<std::string_view> Gpt2BpeTokenizer::PreTokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  const PieceScanner scanner(text);
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = scanner.PieceEnd(begin);
    pieces.push_back(text.substr(begin, end - begin));
    begin = end;
  }
  return pieces;
}

}  // namespace data
