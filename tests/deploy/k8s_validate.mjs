// Validates rendered Kubernetes objects (a JSON array, argv[3]) against the Kubernetes,
// KEDA and prometheus-operator JSON schemas of the npm packages kubernetes-models,
// @kubernetes-models/keda and @kubernetes-models/prometheus-operator, installed under argv[2]
// (scripts/install-deps.sh tools). Offline: the schemas ship compiled inside the packages.
// Types, required fields, enums and formats are checked; these schemas do not forbid unknown
// fields, which tests/deploy/check_k8s.sh's own checks cover where it matters.
//   node k8s_validate.mjs TOOLS_DIR objects.json
// Exit 0 when every object is valid; 1 naming each invalid or unknown object.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [, , toolsDir, objectsFile] = process.argv;
const modules = join(toolsDir, "node_modules");
// apiVersion group -> the package holding its models.
const packages = {
  "": "kubernetes-models",
  apps: "kubernetes-models",
  policy: "kubernetes-models",
  "keda.sh": "@kubernetes-models/keda",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};
let failures = 0;
for (const object of JSON.parse(readFileSync(objectsFile, "utf8"))) {
  const [group, version] = object.apiVersion.includes("/")
    ? object.apiVersion.split("/")
    : ["", object.apiVersion];
  const what = `${object.kind} ${object.metadata?.name} (${object.apiVersion})`;
  const pkg = packages[group];
  if (!pkg) {
    console.log(`FAIL ${what}: no schema package for group '${group}'`);
    failures++;
    continue;
  }
  const file = join(modules, pkg, ...(group ? [group] : []), version, `${object.kind}.js`);
  let Model;
  try {
    Model = (await import(pathToFileURL(file).href))[object.kind];
  } catch (error) {
    console.log(`FAIL ${what}: no schema (${file}): ${error.message}`);
    failures++;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok   ${what}`);
  } catch (error) {
    console.log(`FAIL ${what}: ${error.message}`);
    failures++;
  }
}
process.exit(failures ? 1 : 0);
