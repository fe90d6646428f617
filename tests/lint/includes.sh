# Shared by the lint tests tests/lint/layering.sh and tests/lint/core_is_transport_free.sh. Sourced,
# not run.
#   gpsel_includes FOLDER   prints "file:line:layer:path" for every #include "path" or <path> in
#                           FOLDER's .h and .cc files (recursively), where layer is the gpsel
#                           folder the header belongs to: "proto" for the generated contract
#                           (gpsel/v1, google/rpc, grpc/health/v1; proto/CMakeLists.txt), "-" for
#                           system and third-party headers.
# One grep and one awk per folder: a subshell per include took ~40 s on the loaded 2-core builder.

gpsel_folders="core bridge store metrics jobs service client report cli"

gpsel_includes() {
  local folder="$1"
  find "$folder" -type f \( -name '*.h' -o -name '*.cc' \) -print0 | sort -z |
    xargs -0 -r grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]+[">]' |
    awk -v folders="$gpsel_folders proto" '
      BEGIN { n = split(folders, f, " "); for (i = 1; i <= n; i++) gpsel[f[i]] = 1 }
      {
        file = $0; sub(/:.*/, "", file)
        rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
        path = rest; sub(/^[^<"]*[<"]/, "", path); sub(/[">].*/, "", path)
        layer = "-"
        if (path ~ /^(gpsel\/v1|google\/rpc|grpc\/health\/v1)\//) layer = "proto"
        else if (index(path, "/") > 0) {
          top = path; sub(/\/.*/, "", top)
          if (top in gpsel) layer = top
        }
        print file ":" line ":" layer ":" path
      }'
}
