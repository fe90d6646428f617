# Shared by the lint tests tests/lint/layering.sh and tests/lint/core_is_transport_free.sh. Sourced,
# not run.
#   gpsel_folders          the library folders (the layers of the top CMakeLists.txt), a folder
#                          nested in another (client/cli in client) listed on its own.
#   gpsel_includes FOLDER  prints "file:line:layer:path" for every #include "path" or <path> in
#                          FOLDER's .h and .cc files (recursively, but not into a nested listed
#                          folder), where layer is the gpsel folder the header belongs to: the
#                          longest listed folder F with path = "gpsel/F/...", "proto" for the
#                          generated contract (gpsel/v1, google/rpc, grpc/health/v1;
#                          proto/CMakeLists.txt), "-" for system and third-party headers.
#                          An include of gpsel's own headers in any other form (the old
#                          "core/fit.h") gets the layer "unprefixed".
# One grep and one awk per folder: a subshell per include took ~40 s on the loaded 2-core builder.

gpsel_folders="core proto/bridge server/validation server/store server/metrics server/jobs
server/service client client/report client/cli"

gpsel_includes() {
  local folder="$1" prune=() nested
  for nested in $gpsel_folders; do
    case "$nested" in "$folder"/*) prune+=(-path "$nested" -prune -o) ;; esac
  done
  find "$folder" "${prune[@]}" -type f \( -name '*.h' -o -name '*.cc' \) -print0 | sort -z |
    xargs -0 -r grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^">]+[">]' |
    awk -v folders="$(echo $gpsel_folders)" '
      BEGIN {
        n = split(folders, f, " ")
        tops["core"] = 1; tops["proto"] = 1; tops["server"] = 1; tops["client"] = 1
        tops["bridge"] = 1; tops["store"] = 1; tops["metrics"] = 1; tops["jobs"] = 1
        tops["service"] = 1; tops["report"] = 1; tops["cli"] = 1
      }
      {
        file = $0; sub(/:.*/, "", file)
        rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
        path = rest; sub(/^[^<"]*[<"]/, "", path); sub(/[">].*/, "", path)
        layer = "-"
        if (path ~ /^(gpsel\/v1|google\/rpc|grpc\/health\/v1)\//) layer = "proto"
        else if (path ~ /^gpsel\//) {
          best = ""
          for (i = 1; i <= n; i++)
            if (index(path, "gpsel/" f[i] "/") == 1 && length(f[i]) > length(best)) best = f[i]
          layer = best == "" ? "unprefixed" : best
        } else if (index(path, "/") > 0) {
          top = path; sub(/\/.*/, "", top)
          if (top in tops) layer = "unprefixed"
        }
        print file ":" line ":" layer ":" path
      }'
}
