#include "data/gpt2_pretokenizer.h"

#include <unicode/uchar.h>

#include <array>

namespace data::gpt2_bpe_internal {

CharClass ClassOfCodePoint(int32_t c) {
  if (u_isUWhiteSpace(c)) return CharClass::kSpace;
  const uint32_t category = U_GET_GC_MASK(c);
  if (category & U_GC_L_MASK) return CharClass::kLetter;
  if (category & U_GC_N_MASK) return CharClass::kNumber;
  return CharClass::kOther;
}

const CharClass* AsciiClasses() {
  static const std::array<CharClass, 128> classes = [] {
    std::array<CharClass, 128> result;
    for (UChar32 c = 0; c < 128; ++c) result[c] = ClassOfCodePoint(c);
    return result;
  }();
  return classes.data();
}

void AppendUtf8(int32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace data::gpt2_bpe_internal
