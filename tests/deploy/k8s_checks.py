#!/usr/bin/env python3
"""What the Kubernetes schemas cannot see in a rendered overlay of deploy/k8s (a JSON array):
selectors that select, one handler per probe (gRPC probes without TLS, `gpsel health --tls-ca`
with it), terminationGracePeriodSeconds above --shutdown-grace with room to hand leases back and
--job-lease no longer than it, every Secret present or made out of band, the token file where
--auth-token-file reads it, metrics ports that match the image (docker/Dockerfile), KEDA and the
ServiceMonitor pointing at real objects, and the KEDA query's table in the PostgreSQL store.

    python3 tests/deploy/k8s_checks.py OVERLAY objects.json
"""
import json
import re
import sys

overlay, path = sys.argv[1], sys.argv[2]
objects = json.load(open(path))
# Secrets an overlay expects to be created out of band (its kustomization.yaml says how).
OUT_OF_BAND = {"production": {"gpsel-postgres", "gpsel-token", "gpsel-tls"}}
errors = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        errors.append(what)


def of_kind(kind):
    return [o for o in objects if o["kind"] == kind]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def option(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


deployments = [d for d in of_kind("Deployment") if d["metadata"]["name"] == "gpsel"]
check(len(deployments) == 1, "one Deployment gpsel")
deployment = deployments[0]
pod = deployment["spec"]["template"]
pod_labels = pod["metadata"]["labels"]
check(deployment["spec"].get("replicas", 1) >= 2, f"replicas >= 2 ({deployment['spec'].get('replicas')})")
check(selects(deployment["spec"]["selector"]["matchLabels"], pod_labels),
      "the Deployment's selector matches its pods")
container = next(c for c in pod["spec"]["containers"] if c["name"] == "gpsel-server")
args = container["args"]
store = option(args, "--store")
check(store == "$(GPSEL_STORE_URL)" and any(e["name"] == "GPSEL_STORE_URL" for e in container["env"]),
      "--store is the PostgreSQL URL from the Secret")
check(any(e["name"] == "PGPASSWORD" for e in container["env"]),
      "the database password reaches libpq as PGPASSWORD")

# Shutdown: grace for running calls, then the leases are handed back before SIGKILL.
grace = pod["spec"]["terminationGracePeriodSeconds"]
shutdown = float(option(args, "--shutdown-grace") or 10)
lease = float(option(args, "--job-lease") or 30)
check(grace >= shutdown + 10,
      f"terminationGracePeriodSeconds {grace} >= --shutdown-grace {shutdown:g} + 10 s to release leases")
check(lease <= grace, f"--job-lease {lease:g} <= terminationGracePeriodSeconds {grace}")

# Probes: exactly one handler each; built-in gRPC without TLS, `gpsel health` with the CA with it.
tls = "--tls-cert" in args
for probe_name in ("readinessProbe", "livenessProbe"):
    probe = container.get(probe_name) or {}
    handlers = [h for h in ("exec", "grpc", "httpGet", "tcpSocket") if probe.get(h) is not None]
    check(len(handlers) == 1, f"{probe_name} has one handler ({handlers})")
    if tls:
        command = (probe.get("exec") or {}).get("command", [])
        check(command[:2] == ["gpsel", "health"] and "--tls-ca" in command,
              f"{probe_name}: TLS on, so `gpsel health --tls-ca` (kubelet gRPC probes are plaintext)")
    else:
        check((probe.get("grpc") or {}).get("port") == 50051, f"{probe_name}: built-in gRPC probe on 50051")

# Secrets: present in the render, or made out of band for this overlay.
secrets = {s["metadata"]["name"] for s in of_kind("Secret")}
referenced = {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
referenced |= {e["valueFrom"]["secretKeyRef"]["name"] for e in container["env"]
               if "secretKeyRef" in e.get("valueFrom", {})}
for name in sorted(referenced):
    check(name in secrets or name in OUT_OF_BAND.get(overlay, set()),
          f"Secret {name} is rendered or made out of band")
token_file = option(args, "--auth-token-file")
token_volume = next(v for v in pod["spec"]["volumes"] if v.get("secret", {}).get("secretName", "").startswith("gpsel-token"))
token_mount = next(m for m in container["volumeMounts"] if m["name"] == token_volume["name"])
check(token_file == token_mount["mountPath"] + "/token", f"--auth-token-file {token_file} is the mounted Secret's key 'token'")
if tls:
    tls_mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")["mountPath"]
    check(option(args, "--tls-cert") == tls_mount + "/tls.crt" and option(args, "--tls-key") == tls_mount + "/tls.key",
          "--tls-cert/--tls-key are the mounted kubernetes.io/tls Secret's keys")

# Ports: as the image listens (docker/Dockerfile ENTRYPOINT), scraped where it serves /metrics.
dockerfile = open("docker/Dockerfile").read().replace("\\\n", " ")  # continuation lines
entrypoint = re.search(r'^ENTRYPOINT (\[.*\])', dockerfile, re.M)
entry = json.loads(entrypoint.group(1)) if entrypoint else []
grpc_port = int(option(entry, "--listen").rsplit(":", 1)[1])
metrics_port = int(option(entry, "--metrics-listen").rsplit(":", 1)[1])
ports = {p["name"]: p["containerPort"] for p in container["ports"]}
check(ports.get("grpc") == grpc_port and ports.get("metrics") == metrics_port,
      f"container ports grpc {grpc_port} and metrics {metrics_port}, as the image listens")
annotations = pod["metadata"].get("annotations", {})
check(annotations.get("prometheus.io/scrape") == "true" and
      annotations.get("prometheus.io/port") == str(metrics_port), "pods carry the scrape annotations")
services = [s for s in of_kind("Service") if s["metadata"]["name"] == "gpsel"]
check(len(services) == 1 and selects(services[0]["spec"]["selector"], pod_labels),
      "Service gpsel selects the pods")
service_ports = {p["name"]: p for p in services[0]["spec"]["ports"]}
check(set(service_ports) == {"grpc", "metrics"} and
      all(service_ports[n]["targetPort"] in (n, ports[n]) for n in service_ports),
      "the Service's ports reach the container's")
pdbs = of_kind("PodDisruptionBudget")
check(len(pdbs) == 1 and selects(pdbs[0]["spec"]["selector"]["matchLabels"], pod_labels) and
      pdbs[0]["spec"].get("maxUnavailable") == 1, "a PodDisruptionBudget over the pods, one at a time")

# KEDA and the ServiceMonitor (where the overlay has them) point at real things.
for scaled in of_kind("ScaledObject"):
    check(scaled["spec"]["scaleTargetRef"]["name"] == "gpsel", "the ScaledObject scales Deployment gpsel")
    triggers = [t for t in scaled["spec"]["triggers"] if t["type"] == "postgresql"]
    check(len(triggers) == 1, "one postgresql trigger")
    query = triggers[0]["metadata"]["query"]
    store_source = open("server/store/job_store_postgres.cc").read()
    table = re.search(r"FROM (\w+)", query).group(1)
    check(f"CREATE TABLE IF NOT EXISTS {table} (" in store_source and "state" in query,
          f"the trigger counts rows of {table}, the store's job table")
    auth = triggers[0].get("authenticationRef", {}).get("name")
    check(auth in {t["metadata"]["name"] for t in of_kind("TriggerAuthentication")},
          f"TriggerAuthentication {auth} is rendered")
    check(scaled["spec"]["minReplicaCount"] >= 2, "KEDA keeps at least 2 replicas")
for monitor in of_kind("ServiceMonitor"):
    check(selects(monitor["spec"]["selector"]["matchLabels"], services[0]["metadata"]["labels"]),
          "the ServiceMonitor selects Service gpsel")
    check(all(e["port"] in service_ports for e in monitor["spec"]["endpoints"]),
          "the ServiceMonitor scrapes a named port of the Service")
namespaces = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
check(len(namespaces) == 1 and None not in namespaces, f"every object in one namespace ({namespaces})")

sys.exit(1 if errors else 0)
