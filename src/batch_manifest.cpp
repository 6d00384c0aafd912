#include "vlattice/batch_manifest.hpp"

#include "io/binary_file.hpp"
#include "vlattice/json_text.hpp"
#include "vlattice/residual.hpp"
#include "vlattice/types.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>

namespace vlattice {

namespace {

// A list of jobs is a few hundred bytes per job; a file past this is a data file named by mistake,
// which would otherwise be read whole into memory before the parser refused it.
constexpr std::uint64_t kMaxManifestBytes = std::uint64_t{64} << 20;

constexpr std::array<const char*, 7> kKeys = {"file", "name", "anchors", "metric", "device", "dataset", "bits"};

// io::BinaryFile refuses what is not a regular file (a directory, a FIFO, a device) before reading.
std::string manifest_text(const std::string& path) {
    io::BinaryFile in(path);
    if (in.size() > kMaxManifestBytes) {
        throw Error(path + ": " + std::to_string(in.size()) + " bytes; a manifest is JSON of at most " +
                    std::to_string(kMaxManifestBytes) + " bytes");
    }
    std::string text(static_cast<std::size_t>(in.size()), '\0');
    in.read(text.data(), text.size(), "the manifest");
    return text;
}

std::optional<std::string> text_field(const nlohmann::json& entry, const char* key, const std::string& where) {
    if (!entry.contains(key)) {
        return std::nullopt;
    }
    if (!entry[key].is_string()) {
        throw Error(where + ": \"" + key + "\" must be text");
    }
    return entry[key].get<std::string>();
}

ManifestJob parse_entry(const nlohmann::json& entry, const std::filesystem::path& base, const std::string& where) {
    if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string() ||
        entry["file"].get<std::string>().empty()) {
        throw Error(where + ": expected an object with a \"file\" that names one");
    }
    for (const auto& item : entry.items()) {
        if (std::find(kKeys.begin(), kKeys.end(), item.key()) == kKeys.end()) {
            // Escaped as JSON, so that a key holding control characters cannot forge output lines.
            const std::string key =
                nlohmann::json(item.key()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            throw Error(where + ": unknown key " + key);
        }
    }
    ManifestJob job;
    job.file = (base / entry["file"].get<std::string>()).string();
    job.name = text_field(entry, "name", where);
    job.metric = text_field(entry, "metric", where);
    job.device = text_field(entry, "device", where);
    job.dataset = text_field(entry, "dataset", where);
    if (entry.contains("anchors")) {
        // Read at full width and bounded, so that no conversion wraps a huge count into a small one.
        const nlohmann::json& anchors = entry["anchors"];
        if (!anchors.is_number_unsigned() || anchors.get<std::uint64_t>() < 1 ||
            anchors.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) {
            throw Error(where + ": \"anchors\" must be a whole number >= 1");
        }
        job.anchors = static_cast<long long>(anchors.get<std::uint64_t>());
    }
    if (entry.contains("bits")) {
        // Read at full width: get<unsigned>() would wrap 2^32 + 2 to an accepted 2.
        const nlohmann::json& bits = entry["bits"];
        if (!bits.is_number_unsigned() || bits.get<std::uint64_t>() > 8 ||
            !is_residual_width(static_cast<unsigned>(bits.get<std::uint64_t>()))) {
            throw Error(where + ": \"bits\" must be 0, 2, 4 or 8");
        }
        job.bits = static_cast<unsigned>(bits.get<std::uint64_t>());
    }
    return job;
}

}  // namespace

std::vector<ManifestJob> read_batch_manifest(const std::string& path) {
    const std::string text = manifest_text(path);
    const nlohmann::json manifest = parse_json_text(text, path);
    const nlohmann::json& list = manifest.is_object() && manifest.contains("jobs") ? manifest["jobs"] : manifest;
    if (!list.is_array()) {
        throw Error(path + ": expected {\"jobs\": [...]} or a list of jobs");
    }
    const std::filesystem::path base = std::filesystem::path(path).parent_path();
    std::vector<ManifestJob> jobs;
    for (std::size_t i = 0; i < list.size(); ++i) {
        jobs.push_back(parse_entry(list[i], base, path + ": job " + std::to_string(i + 1)));
    }
    return jobs;
}

}  // namespace vlattice
