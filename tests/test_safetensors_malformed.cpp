// Malformed safetensors files, one test per kind: each is refused with a CheckpointError naming
// the file and the problem, by the loader and by the header-only reader alike.
#include <catch2/catch.hpp>
#include <string>

#include "safetensors_files.h"
#include "tapestry/nn/checkpoint.h"

using namespace tapestry;
using namespace tapestry::nn;
using namespace tapestry::test;
using namespace std::string_literals;
using Catch::Contains;

namespace {
// One valid 24-byte F32 tensor of shape (2,3).
const std::string kEntry = R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
const std::string kData(24, '\0');
}  // namespace

TEST_CASE("checkpoint malformed: missing file", "[checkpoint]") {
  CHECK_THAT(load_error(scratch("does_not_exist.safetensors")),
             Contains("cannot open: No such file or directory"));
}

TEST_CASE("checkpoint malformed: a directory instead of a file", "[checkpoint]") {
  fs::create_directories(scratch("a_directory.safetensors"));
  CHECK_THAT(load_error(scratch("a_directory.safetensors")), Contains("not a regular file"));
  // A refused file is closed again, however early the refusal.
  auto open_files = [] {
    return std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator());
  };
  const auto before = open_files();
  for (int i = 0; i < 20; ++i) CHECK_THROWS(load_safetensors(scratch("a_directory.safetensors")));
  CHECK(open_files() == before);
}

TEST_CASE("checkpoint malformed: shorter than the 8-byte header length", "[checkpoint]") {
  CHECK_THAT(load_error(write_bytes("short.safetensors", "\x02\x00\x00\x00\x00"s)),
             Contains("truncated: 5 bytes, too short for the 8-byte header length"));
  CHECK_THAT(load_error(write_bytes("empty.safetensors", "")), Contains("truncated: 0 bytes"));
}

TEST_CASE("checkpoint malformed: header length past the end of the file", "[checkpoint]") {
  // Claims a 100-byte header; the file has 8 + 2 bytes.
  CHECK_THAT(load_error(write_bytes("header_past_end.safetensors", le64(100) + "{}")),
             Contains("truncated: header length 100 runs past the end of the file (10 bytes)"));
}

TEST_CASE("checkpoint malformed: absurd header length", "[checkpoint]") {
  CHECK_THAT(load_error(write_bytes("huge_header.safetensors", le64(100'000'001) + "{}")),
             Contains("header length 100000001 is over the limit of 100000000 bytes"));
  CHECK_THAT(load_error(write_bytes("max_header.safetensors", le64(~uint64_t{0}) + "{}")),
             Contains("header length 18446744073709551615 is over the limit"));
}

TEST_CASE("checkpoint malformed: header is not valid JSON", "[checkpoint]") {
  std::string msg = load_error(write_safetensors("cut_json.safetensors", R"({"w":{"dtype":)", ""));
  CHECK_THAT(msg, Contains("header is not valid JSON"));
  CHECK_THAT(msg, Contains("parse error"));  // the JSON parser's own message follows
  CHECK_THAT(load_error(write_safetensors("bad_utf8.safetensors", "{\"\xff\": 1}", "")),
             Contains("header is not valid JSON"));
  CHECK_THAT(load_error(write_safetensors("empty_header.safetensors", "", "")),
             Contains("header is not valid JSON"));
}

TEST_CASE("checkpoint malformed: header is not a JSON object", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors("array_header.safetensors", "[1, 2, 3]", "")),
             Contains("header must be a JSON object, got array [1,2,3]"));
}

TEST_CASE("checkpoint malformed: header nested too deep", "[checkpoint]") {
  // The reference's parser (serde_json) stops at 128 levels; a valid header needs 3.
  const std::string deep = std::string(129, '[') + std::string(129, ']');
  CHECK_THAT(load_error(write_safetensors("deep.safetensors", deep, "")),
             Contains("header nests more than 128 levels deep"));
  const std::string very_deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  CHECK_THAT(
      load_error(write_safetensors("very_deep.safetensors", "{\"w\":" + very_deep + "}", "")),
      Contains("header nests more than 128 levels deep"));
  // 128 levels parse (and are then refused for what they hold).
  const std::string limit = std::string(128, '[') + std::string(128, ']');
  CHECK_THAT(load_error(write_safetensors("limit.safetensors", limit, "")),
             Contains("header must be a JSON object, got array [[[[...]]]]"));
}

TEST_CASE("checkpoint malformed: an entry lacks dtype, shape or data_offsets", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors("no_dtype.safetensors",
                                          R"({"w":{"shape":[2,3],"data_offsets":[0,24]}})", kData)),
             Contains("tensor 'w': entry has no \"dtype\""));
  CHECK_THAT(load_error(write_safetensors("no_shape.safetensors",
                                          R"({"w":{"dtype":"F32","data_offsets":[0,24]}})", kData)),
             Contains("tensor 'w': entry has no \"shape\""));
  CHECK_THAT(load_error(write_safetensors("no_offsets.safetensors",
                                          R"({"w":{"dtype":"F32","shape":[2,3]}})", kData)),
             Contains("tensor 'w': entry has no \"data_offsets\""));
}

TEST_CASE("checkpoint malformed: entry fields of the wrong type", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors("entry_number.safetensors", R"({"w":7})", "")),
             Contains("tensor 'w': entry must be an object with dtype, shape and data_offsets, "
                      "got number 7"));
  CHECK_THAT(load_error(write_safetensors(
                 "dtype_number.safetensors",
                 R"({"w":{"dtype":32,"shape":[2,3],"data_offsets":[0,24]}})", kData)),
             Contains("tensor 'w': \"dtype\" must be a string, got number 32"));
  CHECK_THAT(load_error(write_safetensors(
                 "shape_string.safetensors",
                 R"({"w":{"dtype":"F32","shape":"2x3","data_offsets":[0,24]}})", kData)),
             Contains("tensor 'w': \"shape\" must be an array, got string \"2x3\""));
  CHECK_THAT(load_error(write_safetensors(
                 "shape_of_strings.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2,"3"],"data_offsets":[0,24]}})", kData)),
             Contains("dimension 1 is \"3\" (a string, not a number)"));
  CHECK_THAT(
      load_error(write_safetensors(
          "offsets_object.safetensors",
          R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":{"begin":0,"end":24}}})", kData)),
      Contains("\"data_offsets\" must be an array [begin, end], got {\"begin\":0,\"end\":24}"));
  CHECK_THAT(load_error(write_safetensors(
                 "offsets_three.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12,24]}})", kData)),
             Contains("\"data_offsets\" must be an array [begin, end], got [0,12,24]"));
  CHECK_THAT(load_error(write_safetensors(
                 "offsets_negative.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[-8,16]}})", kData)),
             Contains("but begin is -8 (negative)"));
}

TEST_CASE("checkpoint malformed: unsupported dtype", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors(
                 "f16.safetensors", R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})",
                 std::string(12, '\0'))),
             Contains("tensor 'w': unsupported dtype \"F16\" (supported: F32, F64)"));
  CHECK_THAT(load_error(write_safetensors(
                 "lowercase.safetensors",
                 R"({"w":{"dtype":"f32","shape":[2,3],"data_offsets":[0,24]}})", kData)),
             Contains("unsupported dtype \"f32\" (supported: F32, F64)"));
}

TEST_CASE("checkpoint malformed: negative shape", "[checkpoint]") {
  CHECK_THAT(
      load_error(write_safetensors("negative_shape.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})",
                                   kData)),
      Contains("tensor 'w': \"shape\" [2,-3] must hold non-negative integers, but dimension 1 is "
               "-3 (negative)"));
}

TEST_CASE("checkpoint malformed: non-integer shape", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors(
                 "float_shape.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2.5,3],"data_offsets":[0,24]}})", kData)),
             Contains("dimension 0 is 2.5 (not an integer)"));
  // 2.0 is a float in JSON, as the reference (serde, usize) also refuses.
  CHECK_THAT(load_error(write_safetensors(
                 "float_two.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2.0,3],"data_offsets":[0,24]}})", kData)),
             Contains("(not an integer)"));
}

TEST_CASE("checkpoint malformed: shapes too large for a tensor", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors(
                 "seven_dims.safetensors",
                 R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,6],"data_offsets":[0,24]}})", kData)),
             Contains("has 7 dimensions, at most 6 are supported"));
  // 2^62 * 2^62 overflows before the 0 is reached; refused rather than wrapped.
  CHECK_THAT(load_error(write_safetensors(
                 "overflow.safetensors",
                 R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,0],)"
                 R"("data_offsets":[0,0]}})",
                 "")),
             Contains("has too many elements"));
  CHECK_THAT(
      load_error(write_safetensors(
          "dim_too_large.safetensors",
          R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,0]}})", "")),
      Contains("dimension 0 is 18446744073709551615 (larger than 9223372036854775807)"));
}

TEST_CASE("checkpoint malformed: data_offsets that disagree with the shape", "[checkpoint]") {
  CHECK_THAT(
      load_error(write_safetensors("size_mismatch.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                                   std::string(20, '\0'))),
      Contains("tensor 'w': \"data_offsets\" [0, 20] hold 20 bytes, but shape (2,3) of F32 "
               "needs 24"));
  CHECK_THAT(load_error(write_safetensors(
                 "reversed.safetensors",
                 R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[24,0]}})", kData)),
             Contains("\"data_offsets\" [24, 0] begin after they end"));
}

TEST_CASE("checkpoint malformed: data_offsets past the end of the data", "[checkpoint]") {
  CHECK_THAT(
      load_error(write_safetensors("past_end.safetensors",
                                   R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})",
                                   kData)),
      Contains("tensor 'w': \"data_offsets\" end 32 is past the end of the data (24 bytes)"));
  // The whole data is missing (a file cut right after its header).
  CHECK_THAT(load_error(write_safetensors("no_data.safetensors", R"({"w":)" + kEntry + "}", "")),
             Contains("end 24 is past the end of the data (0 bytes)"));
}

TEST_CASE("checkpoint malformed: overlapping data_offsets", "[checkpoint]") {
  CHECK_THAT(
      load_error(write_safetensors("overlap.safetensors",
                                   R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                   R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                                   kData)),
      Contains("tensors 'a' [0, 16] and 'b' [8, 24] overlap"));
  // Two names for the same bytes.
  CHECK_THAT(load_error(write_safetensors("alias.safetensors",
                                          R"({"a":)" + kEntry + R"(,"b":)" + kEntry + "}", kData)),
             Contains("overlap"));
}

TEST_CASE("checkpoint malformed: data_offsets that leave a gap", "[checkpoint]") {
  CHECK_THAT(
      load_error(write_safetensors("gap.safetensors",
                                   R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                                   kData)),
      Contains("data bytes [8, 16) belong to no tensor (a gap before 'b')"));
  CHECK_THAT(load_error(write_safetensors(
                 "trailing.safetensors",
                 R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kData)),
             Contains("data bytes [8, 24) belong to no tensor (the data is 24 bytes)"));
  CHECK_THAT(load_error(write_safetensors("no_tensors.safetensors", "{}", "junk")),
             Contains("data bytes [0, 4) belong to no tensor"));
}

TEST_CASE("checkpoint malformed: __metadata__ not a string-to-string map", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors("metadata_number.safetensors",
                                          R"({"__metadata__":{"step":12}})", "")),
             Contains("\"__metadata__\" value of 'step' must be a string, got number 12"));
  CHECK_THAT(load_error(write_safetensors("metadata_nested.safetensors",
                                          R"({"__metadata__":{"config":{"hidden":4}}})", "")),
             Contains("value of 'config' must be a string, got object {\"hidden\":4}"));
  CHECK_THAT(load_error(write_safetensors("metadata_array.safetensors",
                                          R"({"__metadata__":["a","b"]})", "")),
             Contains("\"__metadata__\" must be an object mapping strings to strings, got array"));
}

TEST_CASE("checkpoint malformed: a key given twice", "[checkpoint]") {
  CHECK_THAT(load_error(write_safetensors("duplicate.safetensors",
                                          R"({"w":)" + kEntry + R"(,"w":)" + kEntry + "}", kData)),
             Contains("header has the key 'w' twice"));
  CHECK_THAT(load_error(write_safetensors("duplicate_metadata.safetensors",
                                          R"({"__metadata__":{"a":"1","a":"2"}})", "")),
             Contains("header has the key 'a' twice"));
}

// ---------------------------------------------------------------------------------------------
// A file that does not fit the module: refused, the module unchanged.
