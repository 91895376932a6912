// Validates KEDA resources (JSON array on stdin) against KEDA's published CRD schemas, as
// packaged by @kubernetes-models/keda (tests/npm/install.sh). Prints one error or null each.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const prefix = process.argv[2];
const models = `${prefix}/node_modules/@kubernetes-models/keda/keda.sh/v1alpha1/index.js`;
const keda = await import(pathToFileURL(models));
const docs = JSON.parse(readFileSync(0, "utf8"));
const errors = docs.map((doc) => {
  const Model = keda[doc.kind];
  if (!Model) return `no KEDA schema for kind ${doc.kind}`;
  try {
    new Model(doc).validate();
    return null;
  } catch (error) {
    return String(error.message || error);
  }
});
process.stdout.write(JSON.stringify(errors));
