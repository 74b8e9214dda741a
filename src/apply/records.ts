// Whether an apply changed the records: a no-op (the drift check, most of the time) writes none.
import type { RecordOfAny } from "../appliers/index.ts";
import type { Host } from "../hosts/index.ts";
import type { Records } from "../store/index.ts";
import { isHeldRecord } from "./adopted.ts";

/**
 * Whether a record from disk is one its type's applier can read, parsed by the applier's record schema before
 * anything decides on it: a hold's is the apply's own, and a type with no applier here is refused at its
 * removal ("no applier on this host gives back …"), as before.
 */
export const readableBy =
  (host: Host) =>
  (record: RecordOfAny): boolean => {
    if (isHeldRecord(record)) return true;
    const schema = host.appliers.get(record.type)?.recordSchema;
    return !schema || schema.safeParse(record).success;
  };

/**
 * Whether the records and their order are what they were, as they would be written: an entry an executor
 * handed back untouched is the same object, so only an entry that is not is compared by its JSON (two
 * stringifies of the whole records were a tenth of a 1,000-file drift check, issue 22).
 */
export function sameRecords(next: Records, nextOrder: string[], records: Records, order: string[]): boolean {
  const ids = Object.keys(next);
  const was = Object.keys(records);
  if (ids.length !== was.length || nextOrder.length !== order.length) return false;
  if (nextOrder.some((id, i) => id !== order[i]) || ids.some((id, i) => id !== was[i])) return false;
  return ids.every(
    (id) => next[id] === records[id] || JSON.stringify(next[id]) === JSON.stringify(records[id]),
  );
}
