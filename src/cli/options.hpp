// What every sub-command does the same way: parse its arguments with Boost.Program_options, print
// its --help, and turn exceptions into one error line and an exit status.
#pragma once

#include "vlattice/types.hpp"

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vlattice::cli {

namespace po = boost::program_options;

// A mistake in how the command was called (exit 2), as opposed to a problem with the data or the
// machine (vlattice::Error, exit 1).
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

inline constexpr int kExitData = 1;
inline constexpr int kExitUsage = 2;

struct CommandHelp {
    std::string name;        // "compress"
    std::string synopsis;    // "INPUT -o OUT.vlat [options]"
    std::string positional;  // "INPUT": the one positional argument, stored under "input"
    std::string description;
    // Any number of positional arguments (none included), stored as a vector under "input".
    bool many_inputs = false;
};

// Parses argv (argv[0] is the command name) into `values`: the options `declare` adds, -h/--help
// and the positional argument. Returns false when help was asked for and printed; the caller then
// exits 0. Throws UsageError (or a Boost.Program_options error) on a bad command line, including a
// missing positional argument or a missing required option.
bool parse_command_line(int argc, char** argv, const CommandHelp& help,
                        const std::function<void(po::options_description&)>& declare, po::variables_map& values);

// Runs a sub-command's body and maps what it throws to "vlattice <command>: error: <message>" on
// stderr and the exit status: usage errors 2, everything else 1.
int run_guarded(const std::string& command, const std::function<int()>& body);

// Wall seconds since `start`, for the phase times commands report.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "vlattice <command>: <kind>: <message>" on stderr, for notes and warnings that are not errors.
void print_notice(const std::string& command, const std::string& kind, const std::string& message);

// A value as the user would type it: 0.3, not Boost's 0.29999999999999999.
template <class T>
std::string show(const T& value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

// Throws UsageError "<option> must be <rule>, got <got>" unless ok. Whole-number options are read
// into signed types and checked here: Boost reads "-1" for an unsigned type as its largest value.
template <class T>
void require_option(bool ok, const char* option, const char* rule, const T& got) {
    if (!ok) {
        throw UsageError(std::string(option) + " must be " + rule + ", got " + show(got));
    }
}

// A whole number in [0, 2^64) from an option's text, for the options that take that whole range
// (--seed); a sign, a fraction or an overflow is a UsageError naming the option.
std::uint64_t parse_unsigned_option(const std::string& text, const char* option);

// A size in bytes from an option's text (--memory): a number, whole or with a fraction, then a unit
// of B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), bytes without one;
// at least 1 byte and below 2^64. Anything else is a UsageError naming the option.
std::uint64_t parse_byte_size_option(const std::string& text, const char* option);

// A file a command reads or writes, with how its command line names it ("-o", "--report", "INPUT").
struct NamedPath {
    std::string name;
    std::string path;
};

// Before any work, for every output (empty paths are options not given): that it can be one
// (vlattice::check_output_path: not a directory or a device, an Error; not -, standard output, which
// a command that can write there handles before, a UsageError), and that it is not the same
// file as an input or as another output, by whatever path or link either is named. Writing it would
// replace the data being read, or one output would overwrite another: a UsageError naming both.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// Removes what runs killed before they could clean up left under the temporary names of these
// outputs (vlattice::remove_stale_temporaries) and, unless `quiet`, notes each file it removed.
void clear_stale_temporaries(const std::string& command, const std::vector<NamedPath>& outputs, bool quiet);

// Runs a library parser (parse_metric, parse_device ...) on an option's text, turning its Error into
// a usage error.
template <class Parse>
auto parse_option_value(Parse parse) -> decltype(parse()) {
    try {
        return parse();
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
}

}  // namespace vlattice::cli
