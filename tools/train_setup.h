// What `tapestry train` reads from its flags: the data source, the model and the training
// options, and how they become splits, vocabularies and a model configuration.
#pragma once

#include <string>

#include "tapestry/models/config.h"
#include "tapestry/models/preprocess.h"
#include "tapestry/models/tasks.h"
#include "tapestry/models/train.h"
#include "tools/flags.h"

namespace tapestry::cli {

struct TrainSettings {
  // data: one of task, data (TSV) or train_prefix
  std::string task, data, train_prefix, valid_prefix, test_prefix, src_lang, tgt_lang;
  int64_t min_len = 5, max_len = 25, symbols = 20;
  int64_t train_size = 20000, valid_size = 1000, test_size = 1000;
  bool reverse = false, lowercase = false, split_punct = false, tutorial = false;
  // max_tokens bounds the training sentences' length (--max-len is taken by the toy tasks'
  // generated lengths): an over-long pair costs memory and time quadratic in its length.
  int64_t max_tokens = 100, min_freq = 1, max_vocab = 0;
  double valid_fraction = 0.05, test_fraction = 0.05;
  // subwords (SentencePiece): "" for words, else bpe or unigram
  std::string subword;
  int64_t vocab_size = 8000;
  bool joint_vocab = false;
  double subword_sample = 0;  // BPE-dropout / unigram sampling alpha while training (0: off)
  // model
  std::string arch = "rnn";
  std::string cell = "gru", attention = "bahdanau", decoder = "bahdanau";
  int64_t layers = 1, emb = 64, hidden = 128, attn_size = 0, window = 2;
  bool bidirectional = true, deep_output = true;
  double dropout = 0;
  int64_t d_model = 256, heads = 8, ffn = 512, enc_layers = 3, dec_layers = 3;
  int64_t max_positions = 256;
  std::string norm = "post", activation = "relu", positions = "sinusoidal";
  bool share_embeddings = false;
  // training
  int64_t epochs = 10, batch_size = 64, step_size = 5, patience = 1, warmup = 4000;
  std::string optimizer = "adam", schedule = "none";
  double lr = 1e-3, weight_decay = 0, clip = 1.0, teacher_forcing = 1.0, gamma = 0.5;
  double adam_beta2 = 0.999, adam_eps = 1e-8, label_smoothing = 0;
  int64_t seed = 1, threads = 0, valid_decode = 1000, test_beam = 5;
  double time_limit = 0;     // minutes
  int64_t average_last = 0;  // keep the last N epochs' models and average them at the end
  bool detect_anomaly = false;
  int64_t log_every = 50;  // steps between the loss lines of metrics.jsonl (0: none)
  std::string out, resume;
  bool quiet = false;

  // Declares every flag on `f`, bound to these fields.
  void declare(Flags& f);
  // Cross-flag checks (exactly one data source, ...), and sizes that cannot fit in memory
  // whatever the data (see model_config); throws UsageError.
  void check(const Flags& f) const;
  std::string data_description() const;
};

struct TrainData {
  models::Splits splits;
  models::Preprocess preprocess;
  // subword: the training pairs' raw text, in splits.train's order, for sampled segmentations
  std::vector<std::pair<std::string, std::string>> train_text;
  std::string description;  // for the log: "task reverse (lengths 5-25, 20 symbols)", file names
  int64_t dropped = 0;      // pairs removed by filters
};
// The preprocessing (with a subword model's segmentations) kept in a model file's metadata.
// Throws Error when the file has none.
models::Preprocess saved_preprocess(const std::string& model_path);

// Reads (or generates) the data. With --subword, trains the segmentation on the training text,
// unless `segmentation` gives one (a resumed run's, which must not change).
TrainData load_train_data(const TrainSettings& s, const models::Preprocess* segmentation = nullptr);
// The data of the run in `dir`, rebuilt from its command.json as `train` built it (a toy task is
// generated again from its seed, files are read again, a subword run's segmentation is its
// model's). Throws Error when the run has no command.json or its data cannot be loaded any more.
TrainData run_data(const std::string& dir);

// The model's configuration. Refuses settings whose training cannot fit in this machine's memory
// (parameters, gradients, the optimizer's state and a batch's activations, against the physical
// memory), naming the flag most to blame: UsageError "--hidden 65536: training would need
// 1.3 TiB (...), more than this machine's 23 GiB", or Error naming the vocabularies when the data
// made them too large. check() refuses what the flags alone make too large, before any data is
// read.
models::Seq2SeqConfig model_config(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab);
// The same without the memory check.
models::Seq2SeqConfig model_config_unchecked(const TrainSettings& s, int64_t src_vocab,
                                             int64_t tgt_vocab);
// Refuses settings whose training cannot fit in this machine's memory, before anything is
// allocated, naming the flag most to blame: the size flag whose default would shrink the need
// most (a UsageError), else the vocabularies the data gave (an Error). Vocabularies of -1: the
// least the flags allow.
void check_training_memory(const TrainSettings& s, int64_t src_vocab, int64_t tgt_vocab);
models::TrainOptions train_options(const TrainSettings& s);

// The training pairs segmented again with sampling (--subword-sample), reproducibly from the
// run's seed and the epoch; pairs longer than --max-tokens keep their deterministic segmentation.
std::vector<models::Example> sampled_training_pairs(const TrainSettings& s, const TrainData& d,
                                                    int64_t epoch);

}  // namespace tapestry::cli
