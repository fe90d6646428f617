// Writes the seed corpus of request_fuzzer (tests/fuzz/corpus/request_fuzzer/): valid requests
// of every type, built from the heads of the bundled data/ CSVs with the kernels and options of
// the README's examples, serialized behind the selector byte request_fuzzer.cc reads (its switch
// gives the numbers). Built with the fuzz targets (GPSEL_FUZZ=ON); run by hand when the request
// messages change:
//   build-fuzz/tests/fuzz/make_request_seeds data tests/fuzz/corpus/request_fuzzer
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/model_selection.pb.h"

namespace {

namespace v1 = gpsel::v1;

enum Selector : char {
  kScore = 0,
  kSearch = 1,
  kPredict = 2,
  kSubmitEvidence = 3,
  kGetJob = 4,
  kWatchJob = 5,
  kCancelJob = 6,
  kListJobs = 7,
};

// The first `rows` data rows (and the header) of a bundled CSV: small seeds mutate faster.
gpsel::Dataset Head(const std::string& path, int rows) {
  std::ifstream in(path);
  std::string line, text;
  for (int i = 0; i <= rows && std::getline(in, line); ++i) text += line + "\n";
  absl::StatusOr<gpsel::Dataset> data = gpsel::ParseCsv(text);
  if (!data.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), data.status().ToString().c_str());
    std::exit(1);
  }
  return *data;
}

gpsel::KernelExpr Kernel(const char* text) {
  absl::StatusOr<gpsel::KernelExpr> k = gpsel::ParseKernel(text);
  if (!k.ok()) std::exit(1);
  return *k;
}

void Write(const std::string& dir, const std::string& name, Selector selector,
           const google::protobuf::Message& message) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.put(selector);
  out << message.SerializeAsString();
  std::printf("%s/%s\n", dir.c_str(), name.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATA_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string data_dir = argv[1];
  const std::string out = argv[2];
  const gpsel::Dataset linear = Head(data_dir + "/interpretable_linear.csv", 10);
  const gpsel::Dataset mauna = Head(data_dir + "/mauna_loa_monthly.csv", 16);
  const gpsel::Dataset nile = Head(data_dir + "/nile.csv", 8);

  gpsel::ScoreOptions score_options;
  score_options.metrics = {gpsel::Metric::kMll, gpsel::Metric::kLap};
  v1::ScoreRequest score = gpsel::bridge::ScoreRequestOf(
      linear, {Kernel("LIN"), Kernel("C*SE + LIN"), Kernel("(SE*LIN[0]) + se")}, score_options);
  Write(out, "score-linear", kScore, score);
  score.add_laplace_r(-0.5);
  (*score.mutable_fit()->mutable_prior_overrides())["SE.lengthscale"].set_sd(2.0);
  (*score.mutable_fit()->mutable_fixed_values())["noise"] = 0.1;
  score.mutable_fit()->set_scale_x("auto");
  Write(out, "score-options", kScore, score);

  gpsel::SearchOptions search_options;
  search_options.base_kernels = {Kernel("SE"), Kernel("PER"), Kernel("LIN"), Kernel("RQ")};
  search_options.max_depth = 2;
  Write(out, "search-mauna-loa", kSearch, gpsel::bridge::SearchRequestOf(mauna, search_options));

  gpsel::PredictOptions predict_options;
  predict_options.hyperparameters = {{"SE.lengthscale", 3.0}, {"noise", 0.1}};
  Eigen::MatrixXd x_new(2, 1);
  x_new << 1880.0, 1881.5;
  Write(out, "predict-nile-given", kPredict,
        gpsel::bridge::PredictRequestOf(nile, Kernel("SE"), x_new, predict_options));
  Write(out, "predict-nile-fit", kPredict,
        gpsel::bridge::PredictRequestOf(nile, Kernel("C*SE+LIN"), x_new, gpsel::PredictOptions{}));

  gpsel::EvidenceOptions evidence_options;
  evidence_options.sampling.num_live = 100;
  v1::SubmitEvidenceRequest evidence =
      gpsel::bridge::SubmitEvidenceRequestOf(mauna, Kernel("C*PER*SE + C*SE"), evidence_options);
  evidence.set_request_id("seed-1");
  Write(out, "evidence-mauna-loa", kSubmitEvidence, evidence);

  v1::GetJobRequest get;
  get.set_name("jobs/01KAZ3Q4W5E6R7T8Y9U0I1O2P3");
  Write(out, "get-job", kGetJob, get);
  v1::WatchJobRequest watch;
  watch.set_name("01KAZ3Q4W5E6R7T8Y9U0I1O2P3");
  Write(out, "watch-job", kWatchJob, watch);
  v1::CancelJobRequest cancel;
  cancel.set_name("jobs/01KAZ3Q4W5E6R7T8Y9U0I1O2P3");
  Write(out, "cancel-job", kCancelJob, cancel);
  v1::ListJobsRequest list;
  list.set_page_size(20);
  list.set_page_token("p1.42");
  list.set_state(v1::JOB_STATE_RUNNING);
  Write(out, "list-jobs", kListJobs, list);
  return 0;
}
