// Text files for the commands: sacreBLEU's lines, where a model lives, where output may go.
#pragma once

#include <string>
#include <vector>

namespace tapestry::cli {

// The lines of a UTF-8 text file, or of standard input for "-", read by models::read_lines (a
// regular file only; a byte-order mark dropped; CR LF endings; invalid UTF-8 and control characters
// refused with file and line) and right-stripped of whitespace, as sacreBLEU reads them. Throws
// Error naming the file if it cannot be read, or is empty when !allow_empty.
std::vector<std::string> read_text_lines(const std::string& path, bool allow_empty = false);

// The checkpoint of a model given as a run directory (DIR/model.safetensors) or a file. Throws
// Error saying what is missing.
std::string model_file(const std::string& dir_or_file);

// Refuses, before any work is done, an output file `path` given with `flag` ("--heatmap") that
// write_file_atomic could not write or would wrongly replace: an existing directory, something
// other than a regular file (a device, a named pipe), or a path whose directory does not exist.
// Throws UsageError.
void check_output_file(const std::string& flag, const std::string& path);

}  // namespace tapestry::cli
