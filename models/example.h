// Example and Splits: translation pairs as token lists, with the true alignment where it is known.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tapestry::models {

// One translation pair as tokens, with the true alignment where the task knows it.
struct Example {
  std::vector<std::string> src, tgt;
  // align[t] = index into src of the source token that target token t translates, or -1 where no
  // single source token does (a determiner's gender, a date's separators); empty if unknown.
  std::vector<int32_t> align;
};

struct Splits {
  std::vector<Example> train, valid, test;
};

}  // namespace tapestry::models
