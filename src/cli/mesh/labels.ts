// `mesh node label NAME KEY=VALUE… KEY-…`: the operator's labels on a node, what `--where` selects by with the
// node's facts. Bad words are one line, exit 2, nothing changed.
import { checkNodeName, labelNode, type MeshDir, parseLabels } from "../../mesh/index.ts";
import { UsageError } from "../args.ts";
import { writeJson, writeOut } from "../output.ts";
import type { MeshArgs } from "./args.ts";

export async function nodeLabelCommand(mesh: MeshDir, args: MeshArgs): Promise<number> {
  const [name, ...words] = args.positionals;
  checkNodeName(name);
  if (!words.length)
    throw new UsageError("mesh node label needs NAME and KEY=VALUE (to set) or KEY- (to remove)");
  mesh.config();
  const labels = await labelNode(mesh, name!, parseLabels(words));
  if (args.json) writeJson({ node: name, labels });
  else writeOut(`${name}: ${labelText(labels)}`);
  return 0;
}

/** `role=web, tier=a`, or that there are none. */
export function labelText(labels: Record<string, string>): string {
  const said = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  return said.length ? said.join(", ") : "no labels";
}

/** `node add --label k=v`: only labels to set (nothing to remove from a new node). */
export function labelsToAdd(words: string[]): Record<string, string> {
  const change = parseLabels(words);
  if (change.remove.length)
    throw new UsageError(`--label ${change.remove[0]}- removes a label: a new node has none`);
  return change.set;
}
