// The .vlat writer and reader. docs/format.md is the specification; the constants and checks here
// follow it field by field, and every reader check runs before the allocation it protects.
#include "vlattice/format.hpp"

#include "format/bitpack.hpp"
#include "format/format_product.hpp"
#include "format/little_endian.hpp"
#include "io/binary_file.hpp"
#include "vlattice/atomic_file.hpp"
#include "vlattice/codec.hpp"
#include "vlattice/half.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>

namespace vlattice {

namespace {

using Bytes = std::vector<std::uint8_t>;

constexpr std::array<char, 8> kMagic = {'V', 'L', 'A', 'T', 'T', 'I', 'C', 'E'};
// Header field offsets (docs/format.md, "Header").
constexpr std::size_t kVersionOffset = 8;
constexpr std::size_t kNOffset = 12;
constexpr std::size_t kDOffset = 20;
constexpr std::size_t kMOffset = 24;
constexpr std::size_t kMetricOffset = 28;
constexpr std::size_t kStorageOffset = 29;
constexpr std::size_t kCodecOffset = 30;
constexpr std::size_t kBitsOffset = 31;
constexpr std::size_t kSectionCountOffset = 32;
constexpr std::size_t kChecksumOffset = 36;  // the header checksum covers bytes [0, 36)
constexpr std::size_t kHeaderBytes = 44;
constexpr std::size_t kSectionHeadBytes = 12;  // tag + payload length
constexpr std::size_t kSectionChecksumBytes = 8;

constexpr const char* kAnchorsTag = "ANCH";
constexpr const char* kAssignmentsTag = "ASGN";
constexpr const char* kResidualsTag = "RESI";
constexpr const char* kRotationTag = "ROTN";
constexpr const char* kCodebookTag = "CDBK";
constexpr const char* kCodesTag = "CODE";
constexpr const char* kMetadataTag = "META";
constexpr std::array<const char*, 7> kKnownTags = {kAnchorsTag,  kAssignmentsTag, kResidualsTag, kRotationTag,
                                                   kCodebookTag, kCodesTag,       kMetadataTag};
// Each version's files hold exactly these sections, once each, in this order.
const std::vector<const char*> kVersion1Sections = {kAnchorsTag, kAssignmentsTag, kMetadataTag};
const std::vector<const char*> kVersion2Sections = {kAnchorsTag, kAssignmentsTag, kResidualsTag, kMetadataTag};
const std::vector<const char*> kVersion3Sections = {kAnchorsTag,  kAssignmentsTag, kRotationTag,
                                                    kCodebookTag, kCodesTag,       kMetadataTag};

const std::vector<const char*>& section_order(std::uint32_t version) {
    if (version == kVlatVersionProduct || version == kVlatVersionStaged) {
        return kVersion3Sections;
    }
    return version == kVlatVersion ? kVersion1Sections : kVersion2Sections;
}

// The residual codec each version's header holds.
ResidualCodec version_codec(std::uint32_t version) {
    if (version == kVlatVersionProduct || version == kVlatVersionStaged) {
        return ResidualCodec::product;
    }
    return version == kVlatVersion ? ResidualCodec::none : ResidualCodec::scalar;
}

std::string section_list(std::uint32_t version) {
    std::string out;
    for (const char* tag : section_order(version)) {
        out += (out.empty() ? "" : ", ") + std::string(tag);
    }
    return out;
}

struct Header {
    std::uint32_t version = 0;
    std::uint64_t n = 0;
    std::uint32_t d = 0;
    std::uint32_t m = 0;
    std::uint8_t metric = 0;
    std::uint8_t anchor_storage = 0;
    std::uint8_t codec = 0;
    std::uint8_t bits = 0;
    std::uint32_t section_count = 0;
};

std::uint64_t checksum(const std::uint8_t* data, std::size_t size) {
    return XXH3_64bits(data, size);
}

std::size_t anchor_element_bytes(AnchorStorage storage) {
    return storage == AnchorStorage::f16 ? sizeof(std::uint16_t) : sizeof(float);
}

// A damaged file's tag can be any four bytes; the message must stay printable.
std::string quoted_tag(const std::string& tag) {
    std::string out = "'";
    for (const char c : tag) {
        if (c >= 0x20 && c < 0x7f) {
            out += c;
        } else {
            static const char* const kHex = "0123456789abcdef";
            const auto byte = static_cast<unsigned char>(c);
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 0xf];
        }
    }
    return out + "'";
}

void check_assignments(const std::string& path, const std::vector<std::uint32_t>& assignments, std::size_t m) {
    for (std::size_t i = 0; i < assignments.size(); ++i) {
        if (assignments[i] >= m) {
            throw Error(path + ": assignment of vector " + std::to_string(i) + " is " + std::to_string(assignments[i]) +
                        ", but there are " + std::to_string(m) + " anchors");
        }
    }
}

void check_residuals(const std::string& path, const VlatFile& file);

void check_writable(const std::string& path, const VlatFile& file) {
    const Matrix& anchors = file.anchors;
    const std::size_t m = anchors.rows;
    if (m == 0 || m > std::numeric_limits<std::uint32_t>::max()) {
        throw Error(path + ": cannot write " + std::to_string(m) + " anchors (a .vlat file holds 1 to 2^32-1)");
    }
    if (file.d == 0 || anchors.cols != file.d || anchors.data.size() != m * anchors.cols) {
        throw Error(path + ": anchors are " + std::to_string(m) + " x " + std::to_string(anchors.cols) + " (" +
                    std::to_string(anchors.data.size()) + " values), but the dimension is " + std::to_string(file.d));
    }
    if (file.assignments.size() != file.n) {
        throw Error(path + ": n is " + std::to_string(file.n) + " but there are " +
                    std::to_string(file.assignments.size()) + " assignments");
    }
    // A model (n = 0) holds anchors and codebooks for vectors encoded later.
    if (file.n > 0 && file.n < m) {
        throw Error(path + ": " + std::to_string(file.n) + " vectors cannot have " + std::to_string(m) + " anchors");
    }
    if (static_cast<std::uint8_t>(file.metric) > static_cast<std::uint8_t>(Metric::ip) ||
        static_cast<std::uint8_t>(file.anchor_storage) > static_cast<std::uint8_t>(AnchorStorage::f16) ||
        static_cast<std::uint8_t>(file.codec) > static_cast<std::uint8_t>(ResidualCodec::product)) {
        throw Error(path + ": metric, anchor storage or residual codec has a value the format does not define");
    }
    check_assignments(path, file.assignments, m);
    check_residuals(path, file);
}

// A width table from a file or a caller, with the file named in the message.
CodeLayout code_layout_or_throw(const std::string& path, const std::vector<std::uint8_t>& widths) {
    try {
        return code_layout(widths);
    } catch (const Error& e) {
        throw Error(path + ": section RESI: " + e.what());
    }
}

// The codes' shapes are checked where every decoder checks them (check_compressed_set).
void check_residuals(const std::string& path, const VlatFile& file) {
    const auto check_kind = [&](ResidualCodec codec, bool given, const char* kind) {
        if ((file.codec == codec) != given) {
            throw Error(path + ": the residual codec is " + codec_name(file.codec) + ", but " + kind + " codes are " +
                        (given ? "given" : "missing"));
        }
    };
    check_kind(ResidualCodec::scalar, !file.residuals.empty(), "residual");
    check_kind(ResidualCodec::product, !file.product.empty(), "product");
    try {
        check_compressed_set(file);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
}

Bytes encode_residuals_section(const VlatFile& file) {
    const ResidualCodes& r = file.residuals;
    Bytes out(r.layout.bits.begin(), r.layout.bits.end());
    out.reserve(out.size() + 2 * sizeof(float) * r.offset.data.size() + r.codes.size());
    for (const Matrix* values : {&r.offset, &r.step}) {
        for (const float value : values->data) {
            le::append_float(out, value);
        }
    }
    out.insert(out.end(), r.codes.begin(), r.codes.end());
    return out;
}

// The length was checked against the widths before the payload was read.
ResidualCodes decode_residuals(const std::string& path, const Header& h, const Bytes& payload) {
    ResidualCodes r;
    r.layout = code_layout_or_throw(path, Bytes(payload.begin(), payload.begin() + h.d));
    std::size_t at = h.d;
    for (Matrix* values : {&r.offset, &r.step}) {
        *values = Matrix(h.m, h.d);
        for (float& value : values->data) {
            value = le::load_float(payload.data() + at);
            at += sizeof(float);
        }
    }
    for (std::size_t i = 0; i < r.step.data.size(); ++i) {
        if (!std::isfinite(r.offset.data[i]) || !std::isfinite(r.step.data[i]) || r.step.data[i] < 0.0f) {
            throw Error(path + ": section RESI: anchor " + std::to_string(i / h.d) + ", dimension " +
                        std::to_string(i % h.d) + " has offset " + std::to_string(r.offset.data[i]) + " and step " +
                        std::to_string(r.step.data[i]) + " (must be finite, step >= 0)");
        }
    }
    r.codes.assign(payload.begin() + static_cast<std::ptrdiff_t>(at), payload.end());
    return r;
}

Bytes encode_header(const VlatFile& file) {
    const std::uint64_t m = file.anchors.rows;
    Bytes header(kMagic.begin(), kMagic.end());
    le::append(header, format_version(file));
    le::append(header, file.n);
    le::append(header, file.d);
    le::append(header, static_cast<std::uint32_t>(m));
    le::append(header, static_cast<std::uint8_t>(file.metric));
    le::append(header, static_cast<std::uint8_t>(file.anchor_storage));
    le::append(header, static_cast<std::uint8_t>(file.codec));
    le::append(header, static_cast<std::uint8_t>(assignment_bits(m)));
    le::append(header, static_cast<std::uint32_t>(section_order(format_version(file)).size()));
    le::append(header, checksum(header.data(), header.size()));
    return header;
}

// Silently turning a large anchor into infinity would corrupt every vector assigned to it.
std::uint16_t half_or_throw(const std::string& path, float value, std::size_t index, std::size_t d) {
    const std::uint16_t half = float_to_half(value);
    if (std::isinf(half_to_float(half)) && !std::isinf(value)) {
        throw Error(path + ": anchor " + std::to_string(index / d) + ", component " + std::to_string(index % d) +
                    " is " + std::to_string(value) + ", outside the float16 range (|x| <= 65504); store anchors as f32");
    }
    return half;
}

Bytes encode_anchors(const std::string& path, const VlatFile& file) {
    const auto& values = file.anchors.data;
    Bytes out(values.size() * anchor_element_bytes(file.anchor_storage));
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (file.anchor_storage == AnchorStorage::f16) {
            le::store(out.data() + 2 * i, half_or_throw(path, values[i], i, file.d));
        } else {
            le::store_float(out.data() + 4 * i, values[i]);
        }
    }
    return out;
}

Bytes encode_metadata(const std::string& json) {
    if (json.empty()) {
        return Bytes{'{', '}'};
    }
    return Bytes(json.begin(), json.end());
}

void write_bytes(std::ostream& out, const Bytes& bytes) {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_section(std::ostream& out, const char* tag, const Bytes& payload) {
    Bytes head(tag, tag + 4);
    le::append(head, static_cast<std::uint64_t>(payload.size()));
    Bytes tail;
    le::append(tail, checksum(payload.data(), payload.size()));
    write_bytes(out, head);
    write_bytes(out, payload);
    write_bytes(out, tail);
}

// Which check fails says more than "truncated" where it can: a short file with the wrong magic is
// not a .vlat file, and a short file of a later version may have a different header size.
Header read_header(io::BinaryFile& in) {
    const std::string& path = in.path();
    std::array<std::uint8_t, kHeaderBytes> raw{};
    const std::size_t available = static_cast<std::size_t>(std::min<std::uint64_t>(in.size(), kHeaderBytes));
    in.read_at(0, raw.data(), available, "header");
    if (std::memcmp(raw.data(), kMagic.data(), std::min(available, kMagic.size())) != 0) {
        throw Error(path + ": not a .vlat file (bad magic)");
    }
    if (available >= kVersionOffset + 4) {
        const auto version = le::load<std::uint32_t>(raw.data() + kVersionOffset);
        if (version < kVlatVersion || version > kVlatVersionStaged) {
            throw Error(path + ": unsupported .vlat version " + std::to_string(version) + " (this build reads " +
                        std::to_string(kVlatVersion) + " to " + std::to_string(kVlatVersionStaged) + ")");
        }
    }
    if (available < kHeaderBytes) {
        throw Error(path + ": truncated header: " + std::to_string(available) + " of " + std::to_string(kHeaderBytes) +
                    " bytes");
    }
    if (le::load<std::uint64_t>(raw.data() + kChecksumOffset) != checksum(raw.data(), kChecksumOffset)) {
        throw Error(path + ": header checksum mismatch (file damaged)");
    }
    Header h;
    h.version = le::load<std::uint32_t>(raw.data() + kVersionOffset);
    h.n = le::load<std::uint64_t>(raw.data() + kNOffset);
    h.d = le::load<std::uint32_t>(raw.data() + kDOffset);
    h.m = le::load<std::uint32_t>(raw.data() + kMOffset);
    h.metric = raw[kMetricOffset];
    h.anchor_storage = raw[kStorageOffset];
    h.codec = raw[kCodecOffset];
    h.bits = raw[kBitsOffset];
    h.section_count = le::load<std::uint32_t>(raw.data() + kSectionCountOffset);
    return h;
}

void check_header(const std::string& path, const Header& h) {
    const auto fail = [&](const std::string& what) { throw Error(path + ": invalid header: " + what); };
    if (h.metric > static_cast<std::uint8_t>(Metric::ip)) {
        fail("unknown metric code " + std::to_string(h.metric));
    }
    if (h.anchor_storage > static_cast<std::uint8_t>(AnchorStorage::f16)) {
        fail("unknown anchor storage code " + std::to_string(h.anchor_storage));
    }
    const auto codec = static_cast<std::uint8_t>(version_codec(h.version));
    if (h.codec != codec) {
        fail("residual codec code " + std::to_string(h.codec) + " in a version " + std::to_string(h.version) +
             " file (which has " + std::to_string(codec) + ")");
    }
    if (h.d == 0) {
        fail("dimension d is 0");
    }
    if (h.m == 0) {
        fail("anchor count m is 0");
    }
    // n = 0 is a model: anchors (and codebooks) without vectors.
    if (h.n > 0 && h.m > h.n) {
        fail(std::to_string(h.m) + " anchors for " + std::to_string(h.n) + " vectors (m > n)");
    }
    if (h.bits != assignment_bits(h.m)) {
        fail(std::to_string(h.bits) + " bits per assignment, but " + std::to_string(h.m) + " anchors take " +
             std::to_string(assignment_bits(h.m)));
    }
    if (h.n > std::vector<std::uint32_t>().max_size()) {
        fail(std::to_string(h.n) + " vectors are more than this machine can address");
    }
}

std::uint64_t expected_anchor_bytes(const std::string& path, const Header& h) {
    const AnchorStorage storage = static_cast<AnchorStorage>(h.anchor_storage);
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(std::uint64_t{h.m} * h.d, anchor_element_bytes(storage), &bytes)) {
        throw Error(path + ": invalid header: " + std::to_string(h.m) + " x " + std::to_string(h.d) +
                    " anchors do not fit in 64-bit sizes");
    }
    return bytes;
}

std::uint64_t expected_assignment_bytes(const std::string& path, const Header& h) {
    const std::optional<std::uint64_t> bytes = packed_byte_count(h.n, h.bits);
    if (!bytes) {
        throw Error(path + ": invalid header: " + std::to_string(h.n) + " assignments of " + std::to_string(h.bits) +
                    " bits do not fit in 64-bit sizes");
    }
    return *bytes;
}

// A corrupt length can be close to 2^64, where adding the checksum bytes would wrap.
std::string payload_and_checksum_bytes(std::uint64_t length) {
    if (length > std::numeric_limits<std::uint64_t>::max() - kSectionChecksumBytes) {
        return std::to_string(length) + " + " + std::to_string(kSectionChecksumBytes);
    }
    return std::to_string(length + kSectionChecksumBytes);
}

struct RawSection {
    VlatSection info;
    Bytes payload;
};

// The tag at position `index` of a file of this version.
void check_tag(const std::string& path, const Header& h, const std::string& tag, std::size_t index, std::uint64_t offset) {
    const std::vector<const char*>& order = section_order(h.version);
    const bool known = std::any_of(kKnownTags.begin(), kKnownTags.end(), [&](const char* t) { return tag == t; });
    if (!known) {
        throw Error(path + ": unknown section tag " + quoted_tag(tag) + " at offset " + std::to_string(offset) +
                    " (.vlat version " + std::to_string(h.version) + " has " + section_list(h.version) + ")");
    }
    if (index >= order.size() || tag != order[index]) {
        throw Error(path + ": section " + tag + " at offset " + std::to_string(offset) + " is out of place (.vlat version " +
                    std::to_string(h.version) + " has " + section_list(h.version) + " once each, in this order)");
    }
}

// RESI opens with one width per dimension, which sets the length of the rest; they are read and
// checked before the payload is.
std::uint64_t expected_residual_bytes(io::BinaryFile& in, const Header& h, std::uint64_t payload_offset,
                                      std::uint64_t length) {
    const std::string& path = in.path();
    if (length < h.d) {
        throw Error(path + ": section RESI has " + std::to_string(length) + " bytes, fewer than the " +
                    std::to_string(h.d) + " widths it opens with");
    }
    Bytes widths(h.d);
    in.read_at(payload_offset, widths.data(), widths.size(), "section RESI widths");
    const CodeLayout layout = code_layout_or_throw(path, widths);
    std::uint64_t ranges = 0;
    std::uint64_t codes = 0;
    std::uint64_t total = 0;
    if (__builtin_mul_overflow(std::uint64_t{h.m} * h.d, 2 * sizeof(float), &ranges) ||
        __builtin_mul_overflow(h.n, std::uint64_t{layout.code_bytes}, &codes) ||
        __builtin_add_overflow(ranges, codes, &total) || __builtin_add_overflow(total, std::uint64_t{h.d}, &total)) {
        throw Error(path + ": invalid header: the residual codes of n = " + std::to_string(h.n) + ", d = " +
                    std::to_string(h.d) + ", m = " + std::to_string(h.m) + " do not fit in 64-bit sizes");
    }
    return total;
}

// The length of a section other than META, from the header, the fields the section opens with and
// the sections before it (`file`, decoded so far).
SectionLength expected_payload_length(io::BinaryFile& in, const Header& h, const VlatFile& file, const std::string& tag,
                                      std::uint64_t payload_offset, std::uint64_t length) {
    namespace product = product_sections;
    if (tag == kRotationTag) {
        return product::rotation_length(in, payload_offset, length, h.d);
    }
    if (tag == kCodebookTag) {
        return product::codebook_length(in, payload_offset, length, file.product.book.coded_dims(),
                                        h.version == kVlatVersionStaged);
    }
    if (tag == kCodesTag) {
        return product::codes_length(in.path(), h.n, file.product.book);
    }
    const std::string from = "the header's n = " + std::to_string(h.n) + ", d = " + std::to_string(h.d) +
                             ", m = " + std::to_string(h.m);
    if (tag == kResidualsTag) {
        return {expected_residual_bytes(in, h, payload_offset, length), from};
    }
    return {tag == kAnchorsTag ? expected_anchor_bytes(in.path(), h) : expected_assignment_bytes(in.path(), h), from};
}

RawSection read_section(io::BinaryFile& in, const Header& h, const VlatFile& file, std::size_t index,
                        std::uint64_t offset) {
    const std::string& path = in.path();
    const std::uint64_t left = in.size() - offset;
    if (left < kSectionHeadBytes) {
        throw Error(path + ": truncated: section " + std::to_string(index + 1) + " of " +
                    std::to_string(h.section_count) + " needs " + std::to_string(kSectionHeadBytes) +
                    " header bytes at offset " + std::to_string(offset) + ", file has " + std::to_string(left));
    }
    std::array<std::uint8_t, kSectionHeadBytes> head{};
    in.read_at(offset, head.data(), head.size(), "section header");
    RawSection s;
    s.info.tag.assign(head.begin(), head.begin() + 4);
    s.info.offset = offset + kSectionHeadBytes;
    s.info.length = le::load<std::uint64_t>(head.data() + 4);
    check_tag(path, h, s.info.tag, index, offset);

    const std::string& tag = s.info.tag;
    const std::uint64_t body_left = left - kSectionHeadBytes;
    if (s.info.length > body_left || body_left - s.info.length < kSectionChecksumBytes) {
        throw Error(path + ": section " + tag + " truncated: needs " + payload_and_checksum_bytes(s.info.length) +
                    " bytes, file has " + std::to_string(body_left));
    }
    if (tag != kMetadataTag) {
        const SectionLength expected = expected_payload_length(in, h, file, tag, s.info.offset, s.info.length);
        if (s.info.length != expected.bytes) {
            throw Error(path + ": section " + tag + " has " + std::to_string(s.info.length) + " bytes, " +
                        expected.from + " need " + std::to_string(expected.bytes));
        }
    }
    s.payload.resize(static_cast<std::size_t>(s.info.length));
    in.read_at(s.info.offset, s.payload.data(), s.payload.size(), "section " + tag);
    std::array<std::uint8_t, kSectionChecksumBytes> stored{};
    in.read_at(s.info.offset + s.info.length, stored.data(), stored.size(), "section " + tag + " checksum");
    s.info.checksum = le::load<std::uint64_t>(stored.data());
    if (s.info.checksum != checksum(s.payload.data(), s.payload.size())) {
        throw Error(path + ": section " + tag + ": checksum mismatch (file damaged)");
    }
    return s;
}

Matrix decode_anchors(const Header& h, const Bytes& payload) {
    Matrix anchors(h.m, h.d);
    for (std::size_t i = 0; i < anchors.data.size(); ++i) {
        if (h.anchor_storage == static_cast<std::uint8_t>(AnchorStorage::f16)) {
            anchors.data[i] = half_to_float(le::load<std::uint16_t>(payload.data() + 2 * i));
        } else {
            anchors.data[i] = le::load_float(payload.data() + 4 * i);
        }
    }
    return anchors;
}

void decode_section(const std::string& path, const Header& h, RawSection& s, VlatFile& file) {
    if (s.info.tag == kAnchorsTag) {
        file.anchors = decode_anchors(h, s.payload);
    } else if (s.info.tag == kAssignmentsTag) {
        // With one anchor the section is empty, so only memory bounds n.
        try {
            file.assignments = unpack_bits(s.payload, h.bits, static_cast<std::size_t>(h.n));
        } catch (const std::bad_alloc&) {
            throw Error(path + ": not enough memory for " + std::to_string(h.n) + " assignments");
        }
        for (std::size_t i = 0; i < file.assignments.size(); ++i) {
            if (file.assignments[i] >= h.m) {
                throw Error(path + ": assignment of vector " + std::to_string(i) + " is " +
                            std::to_string(file.assignments[i]) + ", but the file has " + std::to_string(h.m) +
                            " anchors");
            }
        }
    } else if (s.info.tag == kResidualsTag) {
        file.residuals = decode_residuals(path, h, s.payload);
    } else if (s.info.tag == kRotationTag) {
        product_sections::decode_rotation(s.payload, h.d, file.product.book);
    } else if (s.info.tag == kCodebookTag) {
        product_sections::decode_codebook(s.payload, h.version == kVlatVersionStaged, file.product.book);
    } else if (s.info.tag == kCodesTag) {
        // n codes can be most of the file: moved, not copied.
        product_sections::decode_codes(path, std::move(s.payload), h.n, file.product);
    } else {
        file.metadata_json.assign(s.payload.begin(), s.payload.end());
    }
}

}  // namespace

void write_vlat(const std::string& path, const VlatFile& file) {
    check_writable(path, file);
    const Bytes header = encode_header(file);
    const Bytes anchors = encode_anchors(path, file);
    const Bytes assignments = pack_bits(file.assignments, assignment_bits(file.anchors.rows));
    const Bytes metadata = encode_metadata(file.metadata_json);

    AtomicFile out(path);
    write_bytes(out.stream(), header);
    write_section(out.stream(), kAnchorsTag, anchors);
    write_section(out.stream(), kAssignmentsTag, assignments);
    if (file.codec == ResidualCodec::scalar) {
        write_section(out.stream(), kResidualsTag, encode_residuals_section(file));
    }
    if (file.codec == ResidualCodec::product) {
        write_section(out.stream(), kRotationTag, product_sections::encode_rotation(file.product.book));
        write_section(out.stream(), kCodebookTag, product_sections::encode_codebook(file.product.book));
        write_section(out.stream(), kCodesTag, file.product.codes);
    }
    write_section(out.stream(), kMetadataTag, metadata);
    out.commit();
}

std::uint32_t format_version(const VlatFile& file) {
    switch (file.codec) {
    case ResidualCodec::none:
        return kVlatVersion;
    case ResidualCodec::scalar:
        return kVlatVersionWithCodes;
    case ResidualCodec::product:
        return file.product.book.stages > 1 ? kVlatVersionStaged : kVlatVersionProduct;
    }
    throw Error("residual codec " + std::to_string(static_cast<unsigned>(file.codec)) + " has no .vlat version");
}

VlatShape vlat_shape(const VlatFile& file) {
    VlatShape shape;
    shape.n = file.n;
    shape.d = file.d;
    shape.m = file.anchors.rows;
    shape.storage = file.anchor_storage;
    set_code_shape(shape, file.codec, file.residuals, file.product.book);
    shape.metadata_bytes = encode_metadata(file.metadata_json).size();
    return shape;
}

void set_code_shape(VlatShape& shape, ResidualCodec codec, const ResidualCodes& scalar,
                    const ProductCodebook& product) {
    shape.codec = codec;
    shape.scalar_code_bytes = scalar.layout.code_bytes;
    shape.rotated_dims = product.coded_dims();
    shape.subspaces = product.subspaces();
    shape.stages = product.stages;
    shape.bits = product.bits;
}

std::uint64_t vlat_file_bytes(const VlatShape& shape) {
    const auto section = [](std::uint64_t payload) { return kSectionHeadBytes + payload + kSectionChecksumBytes; };
    std::uint64_t bytes = kHeaderBytes + section(shape.m * shape.d * anchor_element_bytes(shape.storage)) +
                          section(*packed_byte_count(shape.n, assignment_bits(shape.m))) +
                          section(shape.metadata_bytes);
    if (shape.codec == ResidualCodec::scalar) {
        bytes += section(shape.d + 2 * sizeof(float) * shape.m * shape.d + shape.n * shape.scalar_code_bytes);
    }
    if (shape.codec == ResidualCodec::product) {
        const std::uint64_t code_bytes = *packed_byte_count(shape.stages * shape.subspaces, shape.bits);
        bytes += section(product_sections::rotation_bytes(shape.rotated_dims, shape.d)) +
                 section(product_sections::codebook_bytes(shape.bits, shape.subspaces, shape.stages,
                                                          shape.rotated_dims)) +
                 section(shape.n * code_bytes);
    }
    return bytes;
}

double code_bytes_per_vector(const VlatFile& file) {
    if (file.n == 0) {
        throw Error("a model (n = 0) has no vectors to divide its code bytes by");
    }
    const double assignment_bytes = static_cast<double>(*packed_byte_count(file.n, assignment_bits(file.anchors.rows)));
    const double residual_bytes = static_cast<double>(file.residuals.codes.size() + file.product.codes.size());
    return (assignment_bytes + residual_bytes) / static_cast<double>(file.n);
}

VlatFile read_vlat(const std::string& path) {
    io::BinaryFile in(path);
    const Header h = read_header(in);
    check_header(path, h);

    VlatFile file;
    file.n = h.n;
    file.d = h.d;
    file.metric = static_cast<Metric>(h.metric);
    file.anchor_storage = static_cast<AnchorStorage>(h.anchor_storage);
    file.codec = static_cast<ResidualCodec>(h.codec);
    file.file_bytes = in.size();

    std::uint64_t offset = kHeaderBytes;
    for (std::size_t index = 0; index < h.section_count; ++index) {
        RawSection s = read_section(in, h, file, index, offset);
        decode_section(path, h, s, file);
        file.sections.push_back(s.info);
        offset = s.info.offset + s.info.length + kSectionChecksumBytes;
    }
    const std::vector<const char*>& order = section_order(h.version);
    if (file.sections.size() < order.size()) {
        throw Error(path + ": missing section " + order[file.sections.size()] + " (the header lists " +
                    std::to_string(h.section_count) + " sections)");
    }
    if (offset != in.size()) {
        throw Error(path + ": " + std::to_string(in.size() - offset) + " trailing bytes after the last section (offset " +
                    std::to_string(offset) + ")");
    }
    try {
        check_decodes_finite(file);
    } catch (const Error& e) {
        throw Error(path + ": " + e.what());
    }
    return file;
}

}  // namespace vlattice
