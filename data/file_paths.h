// File-path helpers shared by the data caches (data/gpt_index.cc, data/blended_dataset.cc):
// the parts of a path and whether a file exists. Plain string operations on '/'-separated
// paths; no normalisation ("a//b" and "./a" are taken as written).
#ifndef DATA_FILE_PATHS_H_
#define DATA_FILE_PATHS_H_

#include <string>

namespace data {

// The part after the last '/': "/d/a_text_document" -> "a_text_document"; `path` itself when it
// has no '/'.
std::string Basename(const std::string& path);

// The part before the last '/': "/d/a_text_document" -> "/d"; "." when `path` has no '/'.
std::string Dirname(const std::string& path);

// True if something (a file, a directory, ...) exists at `path` (stat succeeds).
bool FileExists(const std::string& path);

}  // namespace data

#endif  // DATA_FILE_PATHS_H_
