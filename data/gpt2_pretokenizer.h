// GPT-2's pre-tokenizer (data/gpt2_bpe.h, step 1) and the UTF-8 helpers of the tokenizer:
// internal to //data:gpt2_bpe. Stateless; safe from any thread.
#ifndef DATA_GPT2_PRETOKENIZER_H_
#define DATA_GPT2_PRETOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace data::gpt2_bpe_internal {

// The classes GPT-2's regex distinguishes: \p{L} (general category L*), \p{N} (N*), \s (the
// White_Space property) and everything else.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

// The class of code point `c`, from ICU.
CharClass ClassOfCodePoint(int32_t c);

// ClassOfCodePoint of the 128 ASCII characters, computed once.
const CharClass* AsciiClasses();

// Appends code point `c` (< 0x110000) to *out as UTF-8.
void AppendUtf8(int32_t c, std::string* out);

inline bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Decodes the UTF-8 sequence at s[0, n) (n >= 1): sets *c and returns its length in bytes, or
// returns 0 if s[0] does not begin a valid sequence (overlong forms, surrogates and code points
// above U+10FFFF are invalid).
inline int DecodeUtf8(const unsigned char* s, size_t n, int32_t* c) {
  const unsigned char b0 = s[0];
  if (b0 < 0x80) {
    *c = b0;
    return 1;
  }
  if (b0 < 0xC2) return 0;  // a continuation byte, or the lead of an overlong 2-byte form
  if (b0 < 0xE0) {
    if (n < 2 || !IsContinuation(s[1])) return 0;
    *c = ((b0 & 0x1F) << 6) | (s[1] & 0x3F);
    return 2;
  }
  if (b0 < 0xF0) {
    if (n < 3) return 0;
    const unsigned char low = b0 == 0xE0 ? 0xA0 : 0x80;   // no overlong forms
    const unsigned char high = b0 == 0xED ? 0x9F : 0xBF;  // no surrogates
    if (s[1] < low || s[1] > high || !IsContinuation(s[2])) return 0;
    *c = ((b0 & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return 3;
  }
  if (b0 < 0xF5) {
    if (n < 4) return 0;
    const unsigned char low = b0 == 0xF0 ? 0x90 : 0x80;   // no overlong forms
    const unsigned char high = b0 == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    if (s[1] < low || s[1] > high || !IsContinuation(s[2]) || !IsContinuation(s[3])) return 0;
    *c = ((b0 & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
  }
  return 0;
}

// Finds the pieces of a text, one at a time: PieceEnd(begin) is the end of the regex's match
// at `begin`. The alternatives, in the regex's order:
//   1. 's 't 're 've 'm 'll 'd  (ASCII, lowercase)
//   2-4. ` ?X+` for X = letters, numbers, others: an optional U+0020, then a maximal run of one
//      class; the space is taken only if a character of that class follows it;
//   5. \s+(?!\S): a whitespace run that ends the text is taken whole; one followed by a
//      non-space backtracks by one character, which starts the next piece (so that " word"
//      keeps its space) -- unless the run is a single character, which then
//   6. \s+ takes alone.
// An invalid UTF-8 byte is one character of class "other".
class PieceScanner {
 public:
  explicit PieceScanner(std::string_view text)
      : s_(reinterpret_cast<const unsigned char*>(text.data())),
        n_(text.size()),
        ascii_(AsciiClasses()) {}

  // The end of the piece that starts at `begin` (< the text's size); always > begin.
  size_t PieceEnd(size_t begin) const {
    const unsigned char b = s_[begin];
    if (b == '\'' && begin + 1 < n_) {
      const unsigned char c1 = s_[begin + 1];
      if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return begin + 2;
      if (begin + 2 < n_) {
        const unsigned char c2 = s_[begin + 2];
        if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
          return begin + 3;
        }
      }
    }
    if (b == ' ' && begin + 1 < n_) {
      const Char next = At(begin + 1);
      if (next.cls != CharClass::kSpace) return RunEnd(begin + 1 + next.length, next.cls);
    }
    const Char first = At(begin);
    if (first.cls != CharClass::kSpace) return RunEnd(begin + first.length, first.cls);
    size_t last = begin;  // the start of the run's last character
    size_t i = begin + first.length;
    while (i < n_) {
      const Char c = At(i);
      if (c.cls != CharClass::kSpace) break;
      last = i;
      i += c.length;
    }
    return i == n_ || last == begin ? i : last;
  }

 private:
  struct Char {
    int length;
    CharClass cls;
  };

  Char At(size_t i) const {
    const unsigned char b = s_[i];
    if (b < 0x80) return {1, ascii_[b]};
    int32_t c;
    const int length = DecodeUtf8(s_ + i, n_ - i, &c);
    if (length == 0) return {1, CharClass::kOther};
    return {length, ClassOfCodePoint(c)};
  }

  // The end of the run of `cls` characters that starts at `i`.
  size_t RunEnd(size_t i, CharClass cls) const {
    while (i < n_) {
      const Char c = At(i);
      if (c.cls != cls) break;
      i += c.length;
    }
    return i;
  }

  const unsigned char* s_;
  size_t n_;
  const CharClass* ascii_;
};

}  // namespace data::gpt2_bpe_internal

#endif  // DATA_GPT2_PRETOKENIZER_H_
