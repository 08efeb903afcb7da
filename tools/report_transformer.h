// The report's section for a Transformer run: every head's attention on one sentence.
#pragma once

#include <string>
#include <vector>

#include "tapestry/models/saved_model.h"

namespace tapestry::cli {

// Heatmaps of the cross-attention of every decoder layer and head (and their mean), and of the
// encoder's self-attention per layer and head, with the model teacher-forced on `target` (its
// words without <eos>) after reading `source`; `what` names the sentence in the text. Empty for
// an RNN model or an empty sentence.
std::string transformer_heads_section(models::SavedModel& m, const std::vector<std::string>& source,
                                      const std::vector<std::string>& target,
                                      const std::string& what);

}  // namespace tapestry::cli
