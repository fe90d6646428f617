#!/usr/bin/env bash
# ctest report_in_browser: `gpsel report` on the first ten years of Mauna Loa (search, scores,
# evidence: all six figures), then report.html opened in headless Chromium (Debian `chromium`):
#   * the page logs no console error (a page with a deliberate error proves the check sees one);
#   * every figure is there and not blank: each figure's box, measured in the page, cut out of a
#     screenshot has pixel variance (an empty stretch of the page proves the check sees blank);
#   * the page names the chosen kernel that gpsel printed.
# Exit 77 (ctest SKIP_RETURN_CODE) only when chromium is not installed.
#
#   bash tests/client/report/browser_test.sh build/bin/gpsel data
set -euo pipefail
gpsel="$1"
data_dir="$2"

browser=""
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then browser="$(command -v "$candidate")"; break; fi
done
if [ -z "$browser" ]; then
  echo "report_in_browser: chromium is not installed (scripts/install-deps.sh installs it); skipped"
  exit 77
fi
# Debian's python3 (python3-pil), even when another python3 comes first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3)"
"$python" -c 'import PIL' 2>/dev/null || {
  echo "report_in_browser: python3-pil missing (scripts/install-deps.sh installs it)"
  exit 1
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The first 120 months (1958-1968), header kept.
head -n 121 "$data_dir/mauna_loa_monthly.csv" > "$work/mauna_loa_10y.csv"
"$gpsel" report --data "$work/mauna_loa_10y.csv" --search --base SE,PER,LIN --depth 2 \
  --kernel 'C*SE' --restarts 2 --threads 2 --evidence --nlive 60 --dlogz 0.5 --y-unit ppm \
  --out "$work/out" > "$work/summary.txt"
cat "$work/summary.txt"
chosen="$(sed -n 's/^chosen kernel \([^:]*\):.*/\1/p' "$work/summary.txt")"
[ -n "$chosen" ] || { echo "FAIL: gpsel report printed no chosen kernel"; exit 1; }

# Chromium, headless, with nothing reaching out to the network, a fresh profile each run.
run_browser() {
  local profile
  profile="$(mktemp -d "$work/profile.XXXX")"
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --disable-dev-shm-usage --user-data-dir="$profile" --enable-logging=stderr --v=0 \
    --hide-scrollbars --window-size=1000,9000 "$@"
}

# Console messages of a page at level error, as Chromium logs them (":CONSOLE(" lines of a
# level above INFO, or "Uncaught" exceptions).
console_errors() {
  grep -E 'CONSOLE|Uncaught' "$1" | grep -E 'ERROR|Uncaught|Failed to load' || true
}

# Negative control: a page whose script throws must be caught by console_errors.
printf '<!DOCTYPE html><html><body><script>console.error("deliberate"); undefinedCall();</script></body></html>\n' \
  > "$work/broken.html"
run_browser --dump-dom "file://$work/broken.html" > /dev/null 2> "$work/broken.log" || true
if [ -z "$(console_errors "$work/broken.log")" ]; then
  echo "FAIL: the console-error check missed a deliberate error; chromium said:"
  cat "$work/broken.log"
  exit 1
fi

# The report itself, untouched: DOM after load, and the console.
run_browser --dump-dom "file://$work/out/report.html" > "$work/dom.html" 2> "$work/report.log"
errors="$(console_errors "$work/report.log")"
if [ -n "$errors" ]; then
  echo "FAIL: console errors on report.html:"
  echo "$errors"
  exit 1
fi

# A copy with a script that writes each figure's box (page pixels) into the DOM, for cropping
# the screenshot: the report itself carries no script.
sed 's#</body>#<script>document.body.insertAdjacentHTML("beforeend", "<pre id=\\"layout\\">" + JSON.stringify([...document.querySelectorAll("figure svg")].map(s => { const r = s.getBoundingClientRect(); return {id: s.closest("figure").id, x: r.x, y: r.y + window.scrollY, w: r.width, h: r.height}; })) + "</pre>");</script></body>#' \
  "$work/out/report.html" > "$work/out/measured.html"
run_browser --dump-dom "file://$work/out/measured.html" > "$work/measured_dom.html" \
  2> "$work/measured.log"
run_browser --screenshot="$work/page.png" "file://$work/out/report.html" > /dev/null \
  2> "$work/screenshot.log"

"$python" - "$work" "$chosen" <<'EOF'
import html, json, re, sys
from PIL import Image, ImageStat

work, chosen = sys.argv[1], sys.argv[2]
dom = open(f"{work}/dom.html", encoding="utf-8").read()
failures = []

figures = re.findall(r'<figure id="fig-([a-z]+)"', dom)
# The figures gpsel says it wrote ("  fit: DIR/fit.svg, DIR/fit.png"), in order; all but
# "components" (drawn only when the chosen kernel is a sum) are due with a search and evidence.
expected = re.findall(r"^  ([a-z]+): \S+\.svg, ", open(f"{work}/summary.txt").read(), re.M)
if figures != expected:
    failures.append(f"figures {figures}, gpsel wrote {expected}")
for due in ["fit", "search", "metrics", "laplace", "residuals"]:
    if due not in figures:
        failures.append(f"figure {due} is missing")
if len(re.findall(r"<svg", dom)) != len(expected):
    failures.append("not one inline svg per figure")
named = re.search(r'<code id="chosen-kernel">([^<]*)</code>', dom)
if not named or html.unescape(named.group(1)) != chosen:
    failures.append(f"page names {named.group(1) if named else None!r}, gpsel chose {chosen!r}")
if not re.search(r'id="description">The data look like [^<]*noise of sd', dom):
    failures.append("no description in words")

layout = re.search(r'<pre id="layout">([^<]*)</pre>', open(f"{work}/measured_dom.html").read())
boxes = json.loads(html.unescape(layout.group(1))) if layout else []
if [b["id"][4:] for b in boxes] != expected:
    failures.append(f"measured boxes {boxes}")
page = Image.open(f"{work}/page.png").convert("L")
for b in boxes:
    if b["w"] < 300 or b["h"] < 150:
        failures.append(f"{b['id']} is only {b['w']:.0f}x{b['h']:.0f} px on the page")
        continue
    box = (int(b["x"]), int(b["y"]), int(b["x"] + b["w"]), int(b["y"] + b["h"]))
    if box[3] > page.height:
        failures.append(f"{b['id']} lies below the screenshot ({box[3]} > {page.height})")
        continue
    crop = page.crop(box)
    variance = ImageStat.Stat(crop).var[0]
    dark = sum(crop.histogram()[:128]) / (crop.width * crop.height)
    print(f"{b['id']:>10}: {crop.width}x{crop.height} px, variance {variance:7.1f}, "
          f"dark pixels {100 * dark:.1f} %")
    if variance < 200 or dark < 0.005:
        failures.append(f"{b['id']} looks blank (variance {variance:.1f}, dark {dark:.4f})")
# Negative control: the empty page below the last figure has no variance.
last = max(b["y"] + b["h"] for b in boxes) if boxes else 0
blank_top = int(last) + 400
if blank_top + 200 <= page.height:
    blank = ImageStat.Stat(page.crop((0, blank_top, page.width, blank_top + 200))).var[0]
    if blank > 1:
        failures.append(f"the blank-page control has variance {blank:.1f}")
else:
    failures.append("the screenshot has no room for the blank control: raise --window-size")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"report_in_browser: OK ({len(boxes)} figures, chosen kernel {chosen})")
EOF
