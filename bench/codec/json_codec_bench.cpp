// bench/codec/json_codec_bench.cpp — what idem::json_codec costs per value, against nlohmann/json
// alone in the same run (the baseline: nlohmann::json::parse + get, dump, which json_codec used for
// both directions until 2026-12-04). A benchmark, not a test: nothing here asserts a time.
//
//   idem_bench_json_codec [CALLS]            ns per call of each row, and the ratios
//   idem_bench_json_codec ROW CALLS          runs one row only, for counting instructions:
//     valgrind --tool=callgrind --callgrind-out-file=/dev/null idem_bench_json_codec decode 20000
//     minus the same with 10000, divided by 10000 (rows: decode, nlohmann-decode, encode, nlohmann-encode)
//
// The value is the Redis benchmarks' receipt, {ok, order id, amount}: what a replay decodes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <idem/json_codec.hpp>

namespace {

struct receipt {
  bool ok = false;
  std::string order_id;
  long amount = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(receipt, ok, order_id, amount)
};

const receipt the_receipt{true, "order-00000042", 42};
long sink = 0;  // keeps the results observable

void decode_row(int calls) {
  const idem::json_codec codec;
  const idem::payload stored = codec.encode(the_receipt);
  for (int i = 0; i < calls; ++i) sink += codec.decode<receipt>(stored).amount;
}

void nlohmann_decode_row(int calls) {
  const std::string body = nlohmann::json(the_receipt).dump();
  for (int i = 0; i < calls; ++i) sink += nlohmann::json::parse(body).get<receipt>().amount;
}

void encode_row(int calls) {
  const idem::json_codec codec;
  for (int i = 0; i < calls; ++i) sink += static_cast<long>(codec.encode(the_receipt).body.size());
}

void nlohmann_encode_row(int calls) {
  for (int i = 0; i < calls; ++i) sink += static_cast<long>(nlohmann::json(the_receipt).dump().size());
}

const std::vector<std::pair<std::string_view, void (*)(int)>> rows = {
    {"decode", decode_row},
    {"nlohmann-decode", nlohmann_decode_row},
    {"encode", encode_row},
    {"nlohmann-encode", nlohmann_encode_row},
};

double ns_per_call(void (*row)(int), int calls) {
  row(calls / 10);  // warm the allocator and the parser's buffers
  const auto start = std::chrono::steady_clock::now();
  row(calls);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3) {
    for (const auto& [name, row] : rows)
      if (name == argv[1]) {
        row(std::atoi(argv[2]));
        return sink == 0 ? 1 : 0;
      }
    std::fprintf(stderr, "idem_bench_json_codec: no row %s\n", argv[1]);
    return 2;
  }
  const int calls = argc == 2 ? std::atoi(argv[1]) : 200000;
  std::printf("# idem_bench_json_codec: %d calls per row, 3 rounds, median ns per call\n", calls);
  std::vector<double> ns(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::vector<double> rounds;
    for (int round = 0; round < 3; ++round) rounds.push_back(ns_per_call(rows[r].second, calls));
    std::sort(rounds.begin(), rounds.end());
    ns[r] = rounds[1];
    std::printf("%-16s %8.1f ns\n", std::string(rows[r].first).c_str(), ns[r]);
  }
  std::printf("decode / nlohmann-decode: %.2fx\nencode / nlohmann-encode: %.2fx\n", ns[0] / ns[1], ns[2] / ns[3]);
  return sink == 0 ? 1 : 0;
}
