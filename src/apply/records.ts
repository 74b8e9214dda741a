// The records an apply reads and leaves: each checked by its type's record schema as it is read, and one owner
// of every change to them (RecordBook for an apply, Forecast for a plan): no other file of src/apply/ writes
// into a records object, and a no-op (the drift check, most of the time) writes none.
import type { RecordBase, RecordOfAny } from "../appliers/index.ts";
import type { Host } from "../hosts/index.ts";
import type { Records, State } from "../store/index.ts";
import type { Declaration } from "../vocabulary/index.ts";
import { isHeldRecord } from "./adopted.ts";

/**
 * A record from disk as its type's applier reads it, parsed by the applier's record schema before anything
 * decides on it, or undefined when it does not parse (the records file is then unreadable): the parsed record
 * is the one handed on. A hold's is the apply's own, and a type with no applier here is kept as written, to be
 * refused at its removal ("no applier on this host gives back …"), as before.
 */
export const checkedBy =
  (host: Host) =>
  (record: RecordOfAny): RecordOfAny | undefined => {
    if (isHeldRecord(record)) return record;
    const applier = host.appliers.get(record.type);
    return applier ? applier.check(record) : record;
  };

/**
 * Whether the records and their order are what they were, as they would be written: an entry an executor
 * handed back untouched is the same object, so only an entry that is not is compared, field by field in any
 * order (a record read back is in its schema's order, one an executor built in its own), by its JSON (two
 * stringifies of the whole records were a tenth of a 1,000-file drift check, issue 22).
 */
export function sameRecords(next: Records, nextOrder: string[], records: Records, order: string[]): boolean {
  const ids = Object.keys(next);
  const was = Object.keys(records);
  if (ids.length !== was.length || nextOrder.length !== order.length) return false;
  if (nextOrder.some((id, i) => id !== order[i]) || ids.some((id, i) => id !== was[i])) return false;
  return ids.every((id) => next[id] === records[id] || canonical(next[id]) === canonical(records[id]));
}

/** `value` as JSON with every object's fields sorted: two records equal but for their fields' order say the same. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** What the decider reads of the records as they stand when it is asked (`wrote`): an apply's, or a plan's. */
export interface LiveRecords {
  readonly now: Readonly<Records>;
}

/** A plan's own view of the records: what each step will journal, fed forward so a later `wrote` reads it. */
export class Forecast implements LiveRecords {
  private readonly current: Records;

  constructor(records: Records) {
    this.current = { ...records };
  }

  get now(): Readonly<Records> {
    return this.current;
  }

  /** The record the step journals is the one the apply will leave. */
  foresee(id: string, intent: RecordBase): void {
    this.current[id] = intent;
  }
}

/**
 * The records as an apply changes them, from the ones it planned against: the journal's pending intents, each
 * step's outcome, and the writes of the records file. Nothing else in the apply changes a record.
 */
export class RecordBook implements LiveRecords {
  private readonly current: Records;

  constructor(
    private readonly state: State,
    private readonly declaration: Declaration,
    /** The records and order the plan was decided against. */
    readonly was: Records,
    readonly order: string[],
  ) {
    this.current = { ...was };
  }

  get now(): Readonly<Records> {
    return this.current;
  }

  /**
   * The record `id` will have, pending until its step has run (a file an interrupted apply never wrote is then
   * created, not repaired); false, and nothing changed, while the id is still recorded as something else.
   */
  intend(id: string, intent: RecordBase): boolean {
    if (this.current[id]) return false;
    this.current[id] = { ...intent, pending: true };
    return true;
  }

  /** What a step came to: its record kept, or (a removal, `forget`) forgotten. */
  settle(id: string, record: RecordBase | null, forget: boolean): void {
    if (record) this.current[id] = record;
    else if (forget) delete this.current[id];
  }

  /** The journal written before any step runs: every id recorded now, then the earlier order. */
  writeJournal(): void {
    this.state.writeRecords(this.current, [...new Set([...Object.keys(this.current), ...this.order])]);
  }

  /** The records written as they stand, in the order they will be kept. */
  write(): void {
    this.state.writeRecords(this.current, this.orderNow());
  }

  /** The ids to keep in order: the declaration's first, then the records' own, each only while it is recorded. */
  orderNow(): string[] {
    const ids = [...this.declaration.resources.map((r) => r.id), ...this.order];
    return [...new Set(ids)].filter((id) => this.current[id]);
  }

  /** The records as the apply leaves them, written only when they changed; the order they are kept in. */
  finish(): string[] {
    const order = this.orderNow();
    // a no-op (the drift check, most of the time) writes nothing: two fsyncs were most of its cost
    if (!sameRecords(this.current, order, this.was, this.order)) this.state.writeRecords(this.current, order);
    return order;
  }
}
