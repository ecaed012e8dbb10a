# cmake -DINPUT=file -DOUTPUT=file.cc -DNAMESPACE=gdn -DFUNCTION=Name -P GdnEmbedFile.cmake
# Writes a C++ source defining `absl::string_view NAMESPACE::FUNCTION()` that
# returns INPUT's bytes. Bytes, not a raw string literal, so that no content
# can end the literal early. Used at build time: the output lives in the build
# directory and is never committed.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# 16 bytes a line keeps the generated file readable in a debugger.
string(REGEX REPLACE "(('[^']*',){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by cmake/GdnEmbedFile.cmake. Do not edit.
#include \"absl/strings/string_view.h\"

namespace ${NAMESPACE} {
namespace {
constexpr char kBytes[] = {
    ${bytes}'\\0'};
}  // namespace

absl::string_view ${FUNCTION}() { return absl::string_view(kBytes, ${size}); }

}  // namespace ${NAMESPACE}
")
# Only touch OUTPUT when it changes, so an unchanged page rebuilds nothing.
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
