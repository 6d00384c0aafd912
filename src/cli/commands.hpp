// The sub-commands of the vlattice CLI. Each takes the arguments after `vlattice`, so argv[0] is the
// command's own name, and returns the process exit status.
#pragma once

namespace vlattice::cli {

int run_batch(int argc, char** argv);
int run_compress(int argc, char** argv);
int run_compare(int argc, char** argv);
int run_decompress(int argc, char** argv);
int run_encode(int argc, char** argv);
int run_info(int argc, char** argv);
int run_query(int argc, char** argv);
int run_train(int argc, char** argv);

}  // namespace vlattice::cli
