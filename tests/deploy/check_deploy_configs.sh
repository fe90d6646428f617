#!/usr/bin/env bash
# Validates the deployment files without a Docker engine:
#   docker-compose config -q    docker/compose.yaml is a valid Compose file
#   promtool check config       docker/prometheus.yml is a valid Prometheus configuration
# and that they agree with each other and with docker/Dockerfile (service name, ports, store URL,
# health check, non-root user, volume). Installs docker-compose and prometheus (for promtool)
# with apt-get when they are missing. Exits non-zero on the first failure.
#
#   bash tests/deploy/check_deploy_configs.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "check_deploy_configs: FAIL: $*" >&2; exit 1; }

need=()
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v promtool >/dev/null || need+=(prometheus)
python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
if [ ${#need[@]} -gt 0 ]; then
  echo "check_deploy_configs: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The prometheus package starts a daemon where systemd runs; only promtool is wanted.
fi

echo "\$ docker-compose -f docker/compose.yaml config -q"
docker-compose -f docker/compose.yaml config -q || fail "docker/compose.yaml is not a valid Compose file"

echo "\$ promtool check config docker/prometheus.yml"
promtool check config docker/prometheus.yml || fail "docker/prometheus.yml is not a valid Prometheus config"

# Cross-checks between the three files (YAML anchors resolved by the parser).
python3 - docker/compose.yaml docker/prometheus.yml docker/Dockerfile <<'PY' || fail "cross-checks failed"
import re, sys, yaml

compose = yaml.safe_load(open(sys.argv[1]))
prom = yaml.safe_load(open(sys.argv[2]))
dockerfile = open(sys.argv[3]).read()
errors = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        errors.append(what)

services = compose["services"]
check("postgres" in services and str(services["postgres"].get("image", "")).startswith("postgres:15"),
      "compose: service postgres uses the official postgres:15 image")
pg = services.get("postgres", {})
check(bool(pg.get("healthcheck")), "compose: postgres has a healthcheck")
check(any(str(v).endswith(":/var/lib/postgresql/data:rw") or str(v).endswith(":/var/lib/postgresql/data")
          for v in pg.get("volumes", [])), "compose: postgres data is on a volume")

gpsel = {name: s for name, s in services.items() if "docker/Dockerfile" in str(s.get("build", {}))}
check(len(gpsel) >= 1, "compose: a service is built from docker/Dockerfile")
replicas = sum((s.get("deploy") or {}).get("replicas", 1) for s in gpsel.values())
check(replicas >= 2, f"compose: at least 2 gpsel-server replicas ({replicas})")
for name, s in gpsel.items():
    cmd = s.get("command") or []
    cmd = cmd if isinstance(cmd, list) else cmd.split()
    store = cmd[cmd.index("--store") + 1] if "--store" in cmd else ""
    check(re.match(r"^postgres(ql)?://[^@/]+@postgres:5432/\w+$", store) is not None,
          f"compose: {name} uses the shared PostgreSQL store ({store})")
    check("postgres" in (s.get("depends_on") or {}), f"compose: {name} depends on postgres")

prometheus = services.get("prometheus", {})
check(any("prometheus.yml:/etc/prometheus/prometheus.yml" in str(v) for v in prometheus.get("volumes", [])),
      "compose: prometheus mounts docker/prometheus.yml")

# Prometheus must scrape the replicas' metrics port, by the compose service name.
exposed = re.search(r"^EXPOSE\s+(.+)$", dockerfile, re.M)
exposed = exposed.group(1).split() if exposed else []
metrics_port = re.search(r"--metrics-listen\"?,?\s*\"?[0-9.]+:(\d+)", dockerfile)
metrics_port = int(metrics_port.group(1)) if metrics_port else None
targets = set()
for job in prom.get("scrape_configs", []):
    for sd in job.get("dns_sd_configs", []):
        for n in sd.get("names", []):
            targets.add((n, int(sd.get("port", 0))))
    for sc in job.get("static_configs", []):
        for t in sc.get("targets", []):
            host, _, port = t.rpartition(":")
            targets.add((host, int(port)))
for name in gpsel:
    check((name, metrics_port) in targets,
          f"prometheus.yml scrapes {name}:{metrics_port} (the image's --metrics-listen port)")

# Dockerfile essentials.
check(str(metrics_port) in exposed and "50051" in exposed, f"Dockerfile: EXPOSE 50051 and {metrics_port}")
check(re.search(r"^USER\s+(?!root\b|0\b)\S+", dockerfile, re.M) is not None, "Dockerfile: runs as a non-root USER")
check(re.search(r"^HEALTHCHECK\b.*\n?.*gpsel\", \"health\"", dockerfile, re.M) is not None,
      "Dockerfile: HEALTHCHECK runs gpsel health")
check(re.search(r"^VOLUME\s+\[?\"?/var/lib/gpsel", dockerfile, re.M) is not None,
      "Dockerfile: VOLUME /var/lib/gpsel")
check(re.search(r"sqlite:/var/lib/gpsel/", dockerfile) is not None,
      "Dockerfile: default store is SQLite in the volume")
sys.exit(1 if errors else 0)
PY
echo "check_deploy_configs: all checks passed"
