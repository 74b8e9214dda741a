// What an apply writes down around its steps: the journal before anything is touched, the temporaries a crash
// left swept before writing anew, and which id holds each original, for the report. Each asks the applier of a
// type what its resources, steps and records say (its traits): nothing here names a type.
import { dirname } from "node:path";
import type { KeptOriginal } from "../appliers/index.ts";
import { errnoWords } from "../faults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records, StoreOriginals } from "../store/index.ts";
import { sweepTempsAt } from "../system/index.ts";
import { type Declaration, pathsOf, type Report } from "../vocabulary/index.ts";
import { isAdoptedStep } from "./adopted.ts";
import type { RecordBook } from "./records.ts";
import type { PlannedStep } from "./steps.ts";
import { traitsOf } from "./traits.ts";

/**
 * Before touching anything: keep every found original the apply is about to write over, then write down the
 * record each new resource will have, so a crash at any instant cannot make the mesh's own file look "found"
 * on the next start, nor leave a found one recorded without its original (the chaos suite's kill -9 found
 * both: a directory's found mode recorded after its chmod, and a taken file's hold not yet kept).
 */
export async function journal(
  host: Host,
  kept: StoreOriginals,
  book: RecordBook,
  steps: PlannedStep[],
): Promise<Map<string, string>> {
  let intents = 0;
  const unheld = new Map<string, string>();
  for (const s of steps) {
    // a hold or give-back touches nothing: there is nothing to journal before it
    if (isAdoptedStep(s)) continue;
    const traits = traitsOf(host, s.type);
    const secretAt = s.wanted && traits.secretAt?.(s.wanted);
    if (secretAt) kept.markSecret(secretAt);
    const { intent, original } = traits.journal?.(s) ?? {};
    if (original && s.wanted) {
      const why = await keptOrWhy(kept, original);
      // an original the state has no room for (a full disk) fails its own step, the found file untouched:
      // written over without its original held, it could never be given back
      if (why) {
        unheld.set(s.id, why);
        continue;
      }
    }
    // an id still recorded as something else keeps that record until its removal has run
    if (!s.record && intent && book.intend(s.id, intent)) intents++;
  }
  if (intents) book.writeJournal();
  return unheld;
}

/** Keep `original`; null once kept, or why it could not be (an errno of the state's file system, said). */
async function keptOrWhy(kept: StoreOriginals, original: KeptOriginal): Promise<string | null> {
  try {
    await kept.keep(original.path, original.bytes, original.meta, original.secret);
    return null;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code !== "string") throw e;
    return `${original.path}: its original could not be held in the state directory: ${errnoWords(code)}; it is left as found`;
  }
}

/** Temporary files a crash left beside declared or recorded files: swept before writing anew. */
export function sweepTemps(host: Host, root: string, d: Declaration, records: Records): void {
  const declared = d.resources.flatMap((r) => (traitsOf(host, r.type).writesFiles ? pathsOf(r) : []));
  const recorded = Object.values(records).flatMap((r) => {
    const traits = traitsOf(host, r.type);
    const path = traits.writesFiles ? traits.pathOf?.(r) : undefined;
    return path === undefined ? [] : [path];
  });
  // each directory reached with no link followed: a linked one is never listed nor swept
  sweepTempsAt(root, new Set([...declared, ...recorded].map((p) => dirname(p))));
}

/** Each original held now, named by the id whose record holds it (its own path, or what it says it holds). */
export function originalsNow(host: Host, originals: StoreOriginals, records: Records): Report["holds"] {
  const idOf = new Map(
    Object.entries(records).flatMap(([id, r]) => {
      const traits = traitsOf(host, r.type);
      const paths = traits.originalsAt?.(r) ?? [traits.pathOf?.(r)];
      return paths.filter((p): p is string => typeof p === "string").map((p) => [p, id] as const);
    }),
  );
  return originals.list().map((h) => ({
    id: idOf.get(h.path) ?? "",
    path: h.path,
    ...(h.original ? { original: h.original } : {}),
  }));
}
