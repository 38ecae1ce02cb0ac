#include "data/document_reader.h"

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/tiny_corpus.h"

namespace data {
namespace {

using ::data::tiny_corpus::TempPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// All documents of `path`, or the error message as the only element.
std::vector<std::string> ReadAll(const std::string& path, const std::string& key = "text") {
  auto reader = DocumentReader::Open(path, key);
  if (!reader.ok()) return {"ERROR " + std::string(reader.status().message())};
  std::vector<std::string> documents;
  std::string text;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&text);
    if (!more.ok()) {
      documents.push_back("ERROR " + std::string(more.status().message()));
      break;
    }
    if (!*more) break;
    documents.push_back(text);
  }
  return documents;
}

TEST(DocumentReaderTest, PlainTextBlocksSeparatedByBlankLines) {
  const std::string path =
      Write("blocks.txt", "\n\nfirst line\nsecond line\n\t \nthird\r\n\r\n\n  indented\n");
  EXPECT_THAT(ReadAll(path), ElementsAre("first line\nsecond line", "third", "  indented"));
  EXPECT_THAT(ReadAll(Write("empty.txt", "")), ElementsAre());
  EXPECT_THAT(ReadAll(Write("no_newline.txt", "last")), ElementsAre("last"));
}

TEST(DocumentReaderTest, JsonLinesUseTheKeyAndSkipBlankLines) {
  const std::string path = Write("lines.jsonl",
                                 "{\"text\": \"a\\nb\", \"n\": 1}\n\n{\"id\": 2, \"text\": "
                                 "\"caf\\u00e9\"}\r\n{\"text\":\"\"}");
  EXPECT_THAT(ReadAll(path), ElementsAre("a\nb", "caf\xc3\xa9", ""));
  EXPECT_TRUE(IsJsonLinesFile("x.json"));
  EXPECT_TRUE(IsJsonLinesFile("x.jsonl"));
  EXPECT_FALSE(IsJsonLinesFile("x.json.txt"));
}

TEST(DocumentReaderTest, ErrorsNameFileLineAndProblem) {
  const std::string bad = Write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{text}\n");
  EXPECT_THAT(ReadAll(bad).back(), HasSubstr("ERROR " + bad + " line 3: invalid JSON"));
  const std::string key = Write("key.jsonl", "{\"title\": \"x\"}\n");
  EXPECT_THAT(ReadAll(key).back(), HasSubstr(key + " line 1: the object has no \"text\" field "
                                                   "(its keys: \"title\")"));
  EXPECT_THAT(ReadAll(TempPath("nope.txt")).back(),
              HasSubstr("cannot open input file " + TempPath("nope.txt")));
  // Plain text must be UTF-8, as JSON strings must: binary garbage is refused, not tokenized.
  const std::string binary =
      Write("binary.txt", std::string("text\n\x89PNG\r\n\x1a\n\xff\xfe", 16));
  EXPECT_THAT(ReadAll(binary).back(),
              HasSubstr("ERROR " + binary + " line 2: not UTF-8 text (is it a binary file?)"));
}

TEST(DocumentReaderTest, BytesReadCountsTheWholeFile) {
  const std::string path = Write("bytes.txt", "ab\n\ncd\r\n");
  auto reader = DocumentReader::Open(path, "text");
  ASSERT_TRUE(reader.ok());
  std::string text;
  while (*(*reader)->Next(&text)) {
  }
  EXPECT_EQ((*reader)->bytes_read(), 8);
}

TEST(DocumentSentencesTest, YieldsNonEmptyLinesOfEveryDocumentOfEveryFile) {
  const std::string a =
      Write("sent.jsonl", "{\"text\": \"one\\n\\ntwo\"}\n{\"text\": \"three\"}\n");
  const std::string b = Write("sent.txt", "four\nfive\n\nsix\n");
  DocumentSentences sentences({a, b}, "text");
  std::vector<std::string> all;
  std::string sentence;
  while (sentences.Next(&sentence)) all.push_back(sentence);
  EXPECT_THAT(all, ElementsAre("one", "two", "three", "four", "five", "six"));
  EXPECT_EQ(sentences.error(), "");
  EXPECT_EQ(sentences.documents(), 4);
  EXPECT_EQ(sentences.sentences(), 6);

  DocumentSentences broken({a, Write("sent_bad.jsonl", "{\"text\": 1}\n")}, "text");
  int count = 0;
  while (broken.Next(&sentence)) ++count;
  EXPECT_EQ(count, 3);
  EXPECT_THAT(broken.error(), HasSubstr("sent_bad.jsonl line 1: field \"text\" is a int"));
}

}  // namespace
}  // namespace data
