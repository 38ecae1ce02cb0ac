#include "data/gpt2_bpe_vocab.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/gpt2_pretokenizer.h"
#include "varuna/io/posix_file.h"

namespace data::gpt2_bpe_internal {
namespace {

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// ---- GPT-2's bytes_to_unicode: the character that stands for each byte in token strings.

// The 188 printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF stand for themselves; the other 68
// map, in increasing byte order, to U+0100, U+0101, ...
std::array<int32_t, 256> ByteToCodePoint() {
  std::array<int32_t, 256> map;
  int32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? b : next++;
  }
  return map;
}

// The bytes a vocab.json token string stands for. A character outside GPT-2's byte alphabet
// (possible in added tokens) stands for its own UTF-8 bytes. `token` is valid UTF-8.
std::string TokenBytes(const std::string& token, const std::array<int, 0x144>& code_point_byte) {
  std::string bytes;
  const auto* s = reinterpret_cast<const unsigned char*>(token.data());
  for (size_t i = 0; i < token.size();) {
    int32_t c = -1;
    const int length = std::max(DecodeUtf8(s + i, token.size() - i, &c), 1);
    if (c >= 0 && c < static_cast<int32_t>(code_point_byte.size()) && code_point_byte[c] >= 0) {
      bytes.push_back(static_cast<char>(code_point_byte[c]));
    } else {
      bytes.append(token, i, length);
    }
    i += length;
  }
  return bytes;
}

// ---- vocab.json: one JSON object, token string -> id.

// What every vocab.json error says the file must be.
constexpr absl::string_view kVocabFix =
    "the vocabulary must be GPT-2's vocab.json: one JSON object mapping each token string to its "
    "id, the ids 0..n-1 each once (OpenAI's encoder.json, Megatron's gpt2-vocab.json or Hugging "
    "Face's vocab.json; check that the vocabulary file given is that file)";

struct VocabEntry {
  std::string token;
  int64_t id;
  size_t offset;  // of the token's opening quote in the file
};

// A parser of exactly the JSON that vocab.json holds, an object whose values are integers, with
// the file's line and column in every error. (A general JSON parser that keeps key order, such
// as nlohmann's ordered_json, takes seconds for GPT-2's 50257 keys.)
class VocabParser {
 public:
  VocabParser(const std::string& file, std::string_view text) : file_(file), text_(text) {}

  // The entries in file order. Errors: InvalidArgument naming file, line and column.
  absl::StatusOr<std::vector<VocabEntry>> Parse() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte-order mark
    SkipSpace();
    if (!Consume('{')) return Error(pos_, absl::StrCat("expected '{' ", Found()));
    std::vector<VocabEntry> entries;
    SkipSpace();
    if (!Consume('}')) {
      while (true) {
        SkipSpace();
        VocabEntry entry;
        entry.offset = pos_;
        if (pos_ >= text_.size() || text_[pos_] != '"') {
          return Error(pos_, absl::StrCat("expected a token string ", Found()));
        }
        if (absl::Status s = ParseString(&entry.token); !s.ok()) return s;
        SkipSpace();
        if (!Consume(':')) return Error(pos_, absl::StrCat("expected ':' ", Found()));
        SkipSpace();
        if (absl::Status s = ParseId(entry.token, &entry.id); !s.ok()) return s;
        entries.push_back(std::move(entry));
        SkipSpace();
        if (Consume('}')) break;
        if (!Consume(',')) return Error(pos_, absl::StrCat("expected ',' or '}' ", Found()));
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) {
      return Error(pos_, absl::StrCat("unexpected text after the object ", Found()));
    }
    return entries;
  }

  // "<file>:<line>:<column>" of byte `offset`.
  std::string Where(size_t offset) const {
    const std::string_view before = text_.substr(0, offset);
    const size_t line_start = before.rfind('\n') + 1;  // 0 without a newline
    return absl::StrCat(file_, ":", 1 + std::count(before.begin(), before.end(), '\n'), ":",
                        offset - line_start + 1);
  }

 private:
  absl::Status Error(size_t offset, absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(Where(offset), ": ", problem, "; ", kVocabFix));
  }

  // "(found 'x')" or "(found the end of the file)", for messages.
  std::string Found() const {
    if (pos_ >= text_.size()) return "(found the end of the file)";
    return absl::StrCat("(found '", View(text_.substr(pos_, 1)), "')");
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool Consume(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // Four hex digits at pos_ (after "\u").
  bool ParseHex4(int32_t* value) {
    if (text_.size() - pos_ < 4) return false;
    *value = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_ + i];
      int digit;
      if (h >= '0' && h <= '9') {
        digit = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        digit = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        digit = h - 'A' + 10;
      } else {
        return false;
      }
      *value = *value * 16 + digit;
    }
    pos_ += 4;
    return true;
  }

  // A JSON string at pos_ (its opening quote), decoded to UTF-8.
  absl::Status ParseString(std::string* out) {
    const size_t start = pos_++;
    while (true) {
      if (pos_ >= text_.size()) return Error(start, "unterminated string");
      const unsigned char c = text_[pos_];
      if (c == '"') break;
      if (c < 0x20) return Error(pos_, "a control character in a string (JSON needs an escape)");
      if (c == '\\') {
        const size_t escape = pos_++;
        if (pos_ >= text_.size()) return Error(start, "unterminated string");
        const char e = text_[pos_++];
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out->push_back(e);
            break;
          case 'b':
            out->push_back('\b');
            break;
          case 'f':
            out->push_back('\f');
            break;
          case 'n':
            out->push_back('\n');
            break;
          case 'r':
            out->push_back('\r');
            break;
          case 't':
            out->push_back('\t');
            break;
          case 'u': {
            int32_t u;
            if (!ParseHex4(&u)) return Error(escape, "\\u not followed by four hex digits");
            if (u >= 0xD800 && u <= 0xDBFF) {  // a high surrogate: a low one must follow
              int32_t low;
              if (text_.substr(pos_, 2) != "\\u") return Error(escape, "unpaired surrogate");
              pos_ += 2;
              if (!ParseHex4(&low) || low < 0xDC00 || low > 0xDFFF) {
                return Error(escape, "unpaired surrogate");
              }
              u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00);
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
              return Error(escape, "unpaired surrogate");
            }
            AppendUtf8(u, out);
            break;
          }
          default:
            return Error(escape, absl::StrCat("invalid escape \\", std::string(1, e)));
        }
        continue;
      }
      int32_t code_point;
      const int length = DecodeUtf8(reinterpret_cast<const unsigned char*>(text_.data()) + pos_,
                                    text_.size() - pos_, &code_point);
      if (length == 0) return Error(pos_, "invalid UTF-8 in a string");
      out->append(text_.data() + pos_, length);
      pos_ += length;
    }
    ++pos_;  // the closing quote
    return absl::OkStatus();
  }

  // The id of `token` at pos_: a non-negative JSON integer that fits an int.
  absl::Status ParseId(const std::string& token, int64_t* id) {
    const size_t start = pos_;
    const auto bad = [&](absl::string_view why) {
      return Error(start, absl::StrCat("the id of token \"", token, "\" is ", why,
                                       ", not a non-negative integer"));
    };
    if (pos_ < text_.size() && text_[pos_] == '-') return bad("negative");
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      return bad(pos_ >= text_.size() ? "missing"
                                      : absl::StrCat("'", View(text_.substr(pos_, 1)), "...'"));
    }
    *id = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      *id = *id * 10 + (text_[pos_++] - '0');
      if (*id > std::numeric_limits<int>::max()) return bad("too large");
    }
    if (text_[start] == '0' && pos_ - start > 1) return bad("written with a leading zero");
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      return bad("a fraction or has an exponent");
    }
    return absl::OkStatus();
  }

  const std::string& file_;
  std::string_view text_;
  size_t pos_ = 0;
};

// Reads vocab.json into vocab->tokens, token_bytes, byte_ids and eod_id, and *ids (token
// string -> id).
absl::Status ReadVocabJson(const std::string& vocab_file, Gpt2BpeVocab* vocab,
                           std::unordered_map<std::string, int>* ids_out) {
  std::unordered_map<std::string, int>& ids = *ids_out;  // token string -> id
  absl::StatusOr<std::string> vocab_text = varuna::ReadFileToString(vocab_file);
  if (!vocab_text.ok()) {
    return absl::Status(
        vocab_text.status().code(),
        absl::StrCat("cannot read the GPT-2 vocabulary: ", vocab_text.status().message(),
                     "; give the path of GPT-2's vocab.json (gpt2-vocab.json)"));
  }
  VocabParser parser(vocab_file, *vocab_text);
  absl::StatusOr<std::vector<VocabEntry>> entries = parser.Parse();
  if (!entries.ok()) return entries.status();
  const size_t n = entries->size();
  ids.reserve(n);
  std::vector<size_t> entry_of_id(n, n);  // id -> index in *entries, n if none yet
  for (size_t i = 0; i < n; ++i) {
    const VocabEntry& entry = (*entries)[i];
    const auto [it, added] = ids.emplace(entry.token, static_cast<int>(entry.id));
    if (!added) {
      return absl::InvalidArgumentError(absl::StrCat(
          parser.Where(entry.offset), ": token \"", entry.token, "\" appears a second time (first ",
          parser.Where((*entries)[entry_of_id[it->second]].offset), "); ", kVocabFix));
    }
    if (entry.id >= static_cast<int64_t>(n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          parser.Where(entry.offset), ": token \"", entry.token, "\" has id ", entry.id,
          ", but the ids of a vocabulary of ", n, " tokens must be 0..", n - 1, "; ", kVocabFix));
    }
    if (entry_of_id[entry.id] != n) {
      const VocabEntry& first = (*entries)[entry_of_id[entry.id]];
      return absl::InvalidArgumentError(
          absl::StrCat(parser.Where(entry.offset), ": token \"", entry.token, "\" has id ",
                       entry.id, ", the id of token \"", first.token, "\" (",
                       parser.Where(first.offset), ") too; ", kVocabFix));
    }
    entry_of_id[entry.id] = i;
  }
  // n entries with distinct ids in [0, n): the ids are exactly 0..n-1.

  const std::array<int32_t, 256> byte_code_points = ByteToCodePoint();
  std::array<int, 0x144> code_point_byte;  // the inverse; -1 for other code points
  code_point_byte.fill(-1);
  for (int b = 0; b < 256; ++b) code_point_byte[byte_code_points[b]] = b;

  vocab->tokens.resize(n);
  vocab->token_bytes.resize(n);
  for (VocabEntry& entry : *entries) {
    vocab->token_bytes[entry.id] = TokenBytes(entry.token, code_point_byte);
    vocab->tokens[entry.id] = std::move(entry.token);
  }
  entries->clear();
  for (int b = 0; b < 256; ++b) {
    std::string token;
    AppendUtf8(byte_code_points[b], &token);
    const auto it = ids.find(token);
    if (it == ids.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          vocab_file, ": no token \"", token, "\" for the byte 0x", absl::Hex(b, absl::kZeroPad2),
          "; a GPT-2 vocabulary has a token for each of the 256 bytes (GPT-2's bytes_to_unicode "
          "characters), so this is not one: ",
          kVocabFix));
    }
    vocab->byte_ids[b] = it->second;
  }
  const auto eod = ids.find("<|endoftext|>");
  if (eod == ids.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        vocab_file, ": no token \"<|endoftext|>\", GPT-2's end-of-document token; ", kVocabFix));
  }
  vocab->eod_id = eod->second;
  return absl::OkStatus();
}

// Reads merges.txt into vocab->merges, given the vocabulary's `ids` (token string -> id).
absl::Status ReadMerges(const std::string& merge_file, const std::string& vocab_file,
                        const std::unordered_map<std::string, int>& ids, Gpt2BpeVocab* vocab) {
  absl::StatusOr<std::string> merge_text = varuna::ReadFileToString(merge_file);
  if (!merge_text.ok()) {
    return absl::Status(
        merge_text.status().code(),
        absl::StrCat("cannot read the GPT-2 merges: ", merge_text.status().message(),
                     "; give the path of GPT-2's merges.txt (gpt2-merges.txt)"));
  }
  const std::string_view text = *merge_text;
  std::unordered_map<uint64_t, int> line_of_pair;  // (left << 32 | right) -> its line
  const auto merge_error = [&](int line, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(
        merge_file, ":", line, ": ", problem,
        "; the merges must be GPT-2's merges.txt for the vocabulary ", vocab_file,
        " (an optional first line \"#version: ...\", then one merge \"A B\" per line: two tokens "
        "of the vocabulary separated by one space, whose concatenation AB is a token too)"));
  };
  int line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line_number == 1 && line.substr(0, 8) == "#version") continue;
    if (!line.empty() && line.back() == '\r') {
      return merge_error(line_number,
                         "the line ends with a carriage return (Windows line endings): convert "
                         "the file to Unix line endings (e.g. with dos2unix)");
    }
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return merge_error(line_number, absl::StrCat("\"", View(line), "\" is not a merge"));
    }
    const std::string left(line.substr(0, space));
    const std::string right(line.substr(space + 1));
    const auto left_id = ids.find(left);
    const auto right_id = ids.find(right);
    for (const auto& [token, it] : {std::pair(&left, left_id), std::pair(&right, right_id)}) {
      if (it == ids.end()) {
        return merge_error(line_number, absl::StrCat("the merge \"", View(line), "\" names \"",
                                                     *token, "\", which is not in ", vocab_file));
      }
    }
    const auto merged_id = ids.find(left + right);
    if (merged_id == ids.end()) {
      return merge_error(line_number, absl::StrCat("the merge \"", View(line), "\" makes \"", left,
                                                   right, "\", which is not in ", vocab_file));
    }
    const uint64_t pair = (static_cast<uint64_t>(left_id->second) << 32) | right_id->second;
    const auto [earlier, added] = line_of_pair.emplace(pair, line_number);
    if (!added) {
      return merge_error(line_number, absl::StrCat("the merge \"", View(line),
                                                   "\" repeats the one on line ", earlier->second));
    }
    vocab->merges.push_back({left_id->second, right_id->second, merged_id->second});
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Gpt2BpeVocab> ReadGpt2BpeVocab(const std::string& vocab_file,
                                              const std::string& merge_file) {
  Gpt2BpeVocab vocab;
  std::unordered_map<std::string, int> ids;
  if (absl::Status s = ReadVocabJson(vocab_file, &vocab, &ids); !s.ok()) return s;
  if (absl::Status s = ReadMerges(merge_file, vocab_file, ids, &vocab); !s.ok()) return s;
  return vocab;
}

}  // namespace data::gpt2_bpe_internal
