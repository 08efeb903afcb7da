// Checkpoint averaging: a model whose every parameter is the mean of the same parameter in
// several checkpoints of one run (the last epochs' models, as NMT toolkits average them).
#pragma once

#include <string>
#include <vector>

#include "tapestry/models/saved_model.h"

namespace tapestry::models {

// Loads every file and averages its parameters (summed in double, rounded to float once). The
// files must hold models of one configuration, vocabularies and preprocessing: otherwise throws
// nn::CheckpointError naming the file and the metadata key that differs from the first file's.
// The result's metadata is the first file's, with "averaged_from" listing the files.
SavedModel average_models(const std::vector<std::string>& paths);

}  // namespace tapestry::models
