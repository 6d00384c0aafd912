// Text from a file, made safe to print: a crafted file must not be able to move the cursor, clear
// the screen or forge output lines on the terminal of whoever inspects it.
#pragma once

#include <string>
#include <string_view>

namespace vlattice {

// `text` with every control character escaped: \n, \r and \t by name, the other C0 characters and
// DEL as \xNN, the C1 characters (U+0080 to U+009F) as \u00NN, and each byte that is not part of
// valid UTF-8 as \xNN. Printable UTF-8 passes through unchanged, backslashes included: the output
// may look like an escape where the text had one, but nothing in it acts on the terminal.
std::string printable(std::string_view text);

}  // namespace vlattice
