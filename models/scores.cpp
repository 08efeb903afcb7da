// Translation scores as papers report them: BLEU cased and lower-cased, chrF2, signatures.
#include "tapestry/models/scores.h"

#include <fmt/format.h>

namespace tapestry::models {

FieldScores field_scores(const std::vector<std::string>& hyps,
                         const std::vector<std::string>& refs) {
  const std::vector<std::vector<std::string>> streams = {refs};
  BleuOptions lc;
  lc.lowercase = true;
  FieldScores s;
  s.bleu = corpus_bleu(hyps, streams);
  s.bleu_lc = corpus_bleu(hyps, streams, lc);
  s.chrf = corpus_chrf(hyps, streams);
  s.bleu_signature = bleu_signature(streams);
  s.bleu_lc_signature = bleu_signature(streams, lc);
  s.chrf_signature = chrf_signature(streams);
  return s;
}

std::string FieldScores::lines(const std::string& indent) const {
  return fmt::format("{0}{1}\n{0}  {2}\n{0}{3}\n{0}  {4}\n{0}{5}\n{0}  {6}\n", indent, bleu.str(),
                     bleu_signature, bleu_lc.str(), bleu_lc_signature, chrf.str(), chrf_signature);
}

}  // namespace tapestry::models
