// `version`: what this binary is. It needs no state, no appliers and no logger, so it loads none of them.
import { BUILD } from "../../build-info.ts";
import { detectHostKind } from "../../host-kind.ts";
import type { Args } from "../args.ts";
import { writeJson, writeOut } from "../output.ts";

export function versionCommand(args: Args): number {
  const doc = {
    version: BUILD.version,
    commit: BUILD.commit,
    node: process.version,
    host: args.host ?? detectHostKind(),
  };
  if (args.json) writeJson(doc);
  else writeOut(`mesh-host ${doc.version} (commit ${doc.commit}) node ${doc.node} host ${doc.host}`);
  return 0;
}
