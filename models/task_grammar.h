// Internal to the grammar task (models/task_grammar.cpp): its words, English and French, with
// their genders and forms, and the determiners (defined in models/task_grammar_words.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tapestry::models::detail {

enum class Gender { masc, fem };
enum class Det { the, a, some, my, this_, these, bare };

struct Noun {
  const char *en_sg, *en_pl, *fr_sg, *fr_pl;
  Gender gender;
};
struct Adjective {
  const char* en;
  int rank;  // English order: 0 opinion, 1 size, 2 age, 3 colour, 4 origin, 5 purpose
  bool before_noun;
  std::array<const char*, 4> fr;  // masc sg, fem sg, masc pl, fem pl
};
struct Verb {
  const char *en_3sg, *en_base, *fr_3sg, *fr_3pl;
};
struct Prep {
  const char *en, *fr;
};
// A fixed multi-word noun phrase; fr_from[i] = index of the English word French word i translates.
struct Phrase {
  std::vector<const char*> en, fr;
  std::vector<int32_t> fr_from;
  Gender gender;
  bool en_plural, fr_plural;
  std::vector<Det> dets;  // the determiners it takes
};

const std::vector<Noun>& nouns();
const std::vector<Adjective>& adjectives();
const std::vector<Verb>& verbs();
const std::vector<Prep>& preps();
const std::vector<Phrase>& phrases();

const char* det_english(Det det);
const char* det_french(Det det, Gender gender, bool plural);
bool det_fits(Det det, bool plural);

}  // namespace tapestry::models::detail
