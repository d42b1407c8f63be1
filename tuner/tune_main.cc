// `tune`: thin main over the tuner library (tuner/cli.h).
#include <iostream>
#include <string>
#include <vector>

#include "tuner/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return meshtune::tuner::RunTune(args, std::cout, std::cerr);
}
