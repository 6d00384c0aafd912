#include "options.hpp"

#include "activity.hpp"
#include "process_ranks.hpp"

#include "vlattice/atomic_file.hpp"
#include "vlattice/printable.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlattice::cli {

bool parse_command_line(int argc, char** argv, const CommandHelp& help,
                        const std::function<void(po::options_description&)>& declare, po::variables_map& values) {
    po::options_description options("options");
    declare(options);
    options.add_options()("help,h", "print this help and exit");
    po::options_description hidden;
    if (help.many_inputs) {
        hidden.add_options()("input", po::value<std::vector<std::string>>(), "");
    } else {
        hidden.add_options()("input", po::value<std::string>(), "");
    }
    po::options_description all;
    all.add(options).add(hidden);
    po::positional_options_description positional;
    positional.add("input", help.many_inputs ? -1 : 1);

    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), values);
    if (values.count("help")) {
        std::cout << "usage: vlattice " << help.name << ' ' << help.synopsis << "\n\n"
                  << help.description << "\n\n"
                  << options << '\n';
        return false;
    }
    // notify() checks required options and fills bound variables; it runs after the help check so
    // that `--help` works without them.
    po::notify(values);
    if (!help.many_inputs && !values.count("input")) {
        throw UsageError("missing " + help.positional);
    }
    return true;
}

namespace {

int run_reporting(const std::string& prefix, const std::string& command, const std::function<int()>& body) {
    // Messages quote names and values from the inputs; printable() keeps them from acting on the terminal.
    const auto usage = [&](const char* message) {
        std::cerr << prefix << printable(message) << "\nrun 'vlattice " << command << " --help' for usage\n";
        return kExitUsage;
    };
    try {
        return body();
    } catch (const UsageError& e) {
        return usage(e.what());
    } catch (const po::error& e) {
        return usage(e.what());
    } catch (const Error& e) {
        std::cerr << prefix << printable(e.what()) << '\n';
    } catch (const std::bad_alloc&) {
        const std::string& step = failed_activity();
        std::cerr << prefix << "ran out of memory" << (step.empty() ? "" : " while " + step)
                  << " (the allocation failed: the data or the options ask for more memory than this machine, or "
                     "the process's limit, allows)\n";
    } catch (const std::exception& e) {
        std::cerr << prefix << "unexpected failure: " << printable(e.what()) << '\n';
    }
    return kExitData;
}

}  // namespace

int run_guarded(const std::string& command, const std::function<int()>& body) {
    Collective* ranks = process_ranks();
    // Under mpirun every rank reports its own error; the first ends the others' runs too.
    const std::string prefix = "vlattice " + command + ": error: " +
                               (ranks ? "rank " + std::to_string(ranks->rank()) + " of " +
                                            std::to_string(ranks->size()) + ": "
                                      : std::string());
    // A command that returns, even with a failure it reports (batch's failed jobs), returns on every
    // rank alike; one that throws leaves the others waiting on an exchange.
    bool threw = true;
    const int code = run_reporting(prefix, command, [&] {
        const int returned = body();
        threw = false;
        return returned;
    });
    if (ranks != nullptr && threw) {
        std::fflush(stdout);
        std::cerr.flush();
        ranks->abandon(code);
    }
    return code;
}

std::uint64_t parse_byte_size_option(const std::string& text, const char* option) {
    static const std::map<std::string, double> units{
        {"", 1.0},     {"B", 1.0},           {"kB", 1e3},           {"KB", 1e3},           {"MB", 1e6},
        {"GB", 1e9},   {"TB", 1e12},         {"KiB", 1024.0},       {"MiB", 1048576.0},   {"GiB", 1073741824.0},
        {"TiB", 1099511627776.0}};
    const std::size_t number_end = text.find_first_not_of("0123456789.");
    const std::string number = text.substr(0, number_end);
    const std::string unit = number_end == std::string::npos ? "" : text.substr(number_end);
    const auto scale = units.find(unit);
    double value = 0.0;
    std::size_t used = 0;
    bool valid = !number.empty() && number.find_first_of("0123456789") != std::string::npos &&
                 std::count(number.begin(), number.end(), '.') <= 1 && scale != units.end();
    if (valid) {
        value = std::stod(number, &used) * scale->second;
        valid = used == number.size() && value >= 1.0 && value < 18446744073709551616.0;
    }
    if (!valid) {
        throw UsageError(std::string(option) + " must be a size of at least 1 byte, as 256MiB, 8GiB or 1.5GB (units "
                         "B, kB, MB, GB, TB or KiB, MiB, GiB, TiB), got '" + text + "'");
    }
    return static_cast<std::uint64_t>(value);
}

std::uint64_t parse_unsigned_option(const std::string& text, const char* option) {
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    std::uint64_t value = 0;
    bool fits = digits;
    try {
        value = digits ? std::stoull(text) : 0;
    } catch (const std::out_of_range&) {
        fits = false;
    }
    if (!fits) {
        throw UsageError(std::string(option) + " must be a whole number in [0, 2^64), got '" + text + "'");
    }
    return value;
}

namespace {

// What names one file: its device and inode where it exists (whatever path or link leads to it),
// else its path made absolute, with the links that exist along it resolved.
std::string file_identity(const std::string& path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) {
        return "inode " + std::to_string(status.st_dev) + ":" + std::to_string(status.st_ino);
    }
    std::error_code unknown;
    return "path " + std::filesystem::weakly_canonical(path, unknown).string();
}

}  // namespace

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
    std::map<std::string, const NamedPath*> read;
    for (const NamedPath& in : inputs) {
        if (!in.path.empty()) {
            read.emplace(file_identity(in.path), &in);
        }
    }
    std::map<std::string, const NamedPath*> written;
    for (const NamedPath& out : outputs) {
        if (out.path.empty()) {
            continue;
        }
        if (out.path == "-") {
            throw UsageError(out.name + " -: this output cannot go to standard output; name a file");
        }
        check_output_path(out.path);
        const std::string identity = file_identity(out.path);
        if (const auto in = read.find(identity); in != read.end()) {
            throw UsageError(out.name + " " + out.path + " is the input " + in->second->name + " " + in->second->path +
                             ": writing it would replace the data being read; choose another output");
        }
        if (const auto [other, fresh] = written.emplace(identity, &out); !fresh) {
            throw UsageError(out.name + " " + out.path + " and " + other->second->name + " " + other->second->path +
                             " are the same file: one would overwrite the other");
        }
    }
}

void clear_stale_temporaries(const std::string& command, const std::vector<NamedPath>& outputs, bool quiet) {
    for (const NamedPath& out : outputs) {
        if (out.path.empty()) {
            continue;
        }
        for (const StaleTemporary& file : remove_stale_temporaries(out.path)) {
            if (!quiet) {
                print_notice(command, "note",
                             "removed " + file.path + " (" + std::to_string(file.bytes) +
                                 " bytes), a temporary file of " + out.path + " left by process " +
                                 std::to_string(file.writer) + ", which no longer runs");
            }
        }
    }
}

void print_notice(const std::string& command, const std::string& kind, const std::string& message) {
    std::cerr << "vlattice " << command << ": " << kind << ": " << message << '\n';
}

}  // namespace vlattice::cli
