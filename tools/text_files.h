// Text files for the commands: lines as sacreBLEU reads them, and where a model lives.
#pragma once

#include <string>
#include <vector>

namespace tapestry::cli {

// The lines of a UTF-8 text file, split at '\n' only (a final newline ends the last line) and
// right-stripped of whitespace, as sacreBLEU reads them. Throws Error naming the file if it cannot
// be read, or is empty when !allow_empty.
std::vector<std::string> read_text_lines(const std::string& path, bool allow_empty = false);

// The checkpoint of a model given as a run directory (DIR/model.safetensors) or a file. Throws
// Error saying what is missing.
std::string model_file(const std::string& dir_or_file);

}  // namespace tapestry::cli
