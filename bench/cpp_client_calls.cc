// cpp_client_calls: the C++ client's side of bench/python_client_overhead.py. Connects to a
// running gpsel-server, reads a CSV once (as `gpsel` does), then answers one command per stdin
// line with one live call through gpsel::Client's core-typed API, timing the whole call as a
// C++ user sees it (core types to request, the RPC, response to core types):
//
//   score N     Score of kernel SE on the first N points, its parameters fixed (no fit: the
//               call is conversion, transport and one likelihood, not minutes of optimising)
//   predict N   Predict of SE at 100 new inputs with given values from the first N points
// and prints the call's wall seconds (or "error <message>") on its own line.
//
//   build/bench/cpp_client_calls --server 127.0.0.1:50051 --data data/co2_weekly.csv
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "gpsel/client/client.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"

int main(int argc, char** argv) {
  CLI::App app{"C++ client calls for bench/python_client_overhead.py"};
  std::string server, data_path;
  app.add_option("--server", server)->required();
  app.add_option("--data", data_path)->required();
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<gpsel::Dataset> data = gpsel::LoadCsvFile(data_path);
  if (!data.ok()) {
    std::cerr << data.status() << "\n";
    return 2;
  }
  gpsel::ClientOptions options;
  options.target = server;
  absl::StatusOr<std::unique_ptr<gpsel::Client>> client = gpsel::Client::Create(options);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  const gpsel::KernelExpr kernel = *gpsel::ParseKernel("SE");
  const std::map<std::string, double> values = {{"SE.lengthscale", 0.1}, {"noise", 0.05}};
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    int n = 0;
    in >> command >> n;
    if (n < 2 || n > data->num_points()) {
      std::cout << "error bad n" << std::endl;
      continue;
    }
    gpsel::Dataset head;
    head.x = data->x.topRows(n);
    head.y = data->y.head(n);
    const auto start = std::chrono::steady_clock::now();
    absl::Status status;
    if (command == "score") {
      gpsel::ScoreOptions score;
      score.metrics = {gpsel::Metric::kMll};
      score.fit.restarts = 1;
      score.hyperparameters.fixed_values = values;
      status = (*client)->Score(head, {kernel}, score).status();
    } else if (command == "predict") {
      gpsel::PredictOptions predict;
      predict.hyperparameters = values;
      const Eigen::MatrixXd x_new =
          Eigen::VectorXd::LinSpaced(100, head.x(0, 0), head.x(n - 1, 0));
      status = (*client)->Predict(head, kernel, x_new, predict).status();
    } else {
      status = absl::InvalidArgumentError("unknown command");
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status.ok()) {
      std::cout << seconds << std::endl;
    } else {
      std::cout << "error " << status.message() << std::endl;
    }
  }
  return 0;
}
