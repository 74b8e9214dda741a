// The node's state on disk (cli.md): every file versioned, every write atomic.
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod";
import { STATE_DIR_MODE, STATE_FILE_MODE, STATE_FORMAT } from "../defaults.ts";
import { isTempName, writeFileAtomicSync } from "../durable/index.ts";
import { deniedFault, faultLine } from "../faults.ts";
import { Membership, MembershipBus, Mode, Report } from "../vocabulary/index.ts";

/** A state file this host cannot read: newer than it knows, not what it should be, or out of reach. Exit 2. */
export class StateError extends Error {}

/** An errno error on the state directory as what to do: run as root, or point --state elsewhere. */
export function stateFault(e: unknown, path?: string): Error {
  const line = faultLine(e, path ? "write" : undefined, path);
  if (!line) return e as Error;
  return new StateError(deniedFault(e) ? `${line} (run as root or give --state DIR)` : line);
}

const NodeFile = z.object({ format: z.number().int(), node: z.string(), mode: Mode.nullable() });
export type NodeFile = z.infer<typeof NodeFile>;

/** What the host wrote and found, by resource id: each applier's own fields beside the type, kept as written. */
const RecordsFile = z.object({
  format: z.number().int(),
  records: z.record(z.string(), z.looseObject({ type: z.string() })),
  order: z.array(z.string()),
});
export type Records = z.infer<typeof RecordsFile>["records"];

const DeclaredFile = z.object({
  format: z.number().int(),
  seq: z.number().int(),
  digest: z.string(),
  received_at: z.string(),
  /** The mesh key it was verified against when it arrived: a move to another bus must not orphan it. */
  mesh_key: z.string().optional(),
  envelope: z.unknown(),
});
export type DeclaredFile = z.infer<typeof DeclaredFile>;

const MembershipFile = z.object({ format: z.number().int(), membership: Membership });

const GenesisFile = z.object({ format: z.number().int(), digest: z.string(), mode: Mode, at: z.string() });
export type GenesisFile = z.infer<typeof GenesisFile>;

const OwedFile = z.object({ format: z.number().int(), ids: z.array(z.string()) });

const LastFile = z.object({
  format: z.number().int(),
  seq: z.number().int(),
  outcome: z.string(),
  at: z.string(),
});
export type LastFile = z.infer<typeof LastFile>;

const LastReportFile = z.object({ format: z.number().int(), report: Report });

/** The bus a node is on, never its password: the only fields of the membership `status` reads (built on first use). */
const BusSummary = z.lazy(() =>
  MembershipBus.unwrap().pick({ servers: true, user: true, fingerprint: true }).strip(),
);
export type BusSummary = z.infer<typeof BusSummary>;
/** membership.json as the host writes it (`{format, membership}`), or the membership bare. */
const MembershipText = z.lazy(() => z.union([z.object({ membership: BusSummary }), BusSummary]));

/** Every state file's first field, read alone to say "a newer binary wrote it" rather than "not valid". */
const Versioned = z.looseObject({ format: z.number() });

/** The state directory: identity, records, the kept declaration, holds, outbox, confirmation. */
export class State {
  constructor(readonly dir: string) {}

  /** Make the directory (0700) if absent; never widens an existing one. */
  ensure(): this {
    if (!existsSync(this.dir)) {
      try {
        mkdirSync(this.dir, { recursive: true, mode: STATE_DIR_MODE });
        chmodSync(this.dir, STATE_DIR_MODE);
      } catch (e) {
        throw stateFault(e);
      }
    }
    return this;
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  /** Temporary files a kill left in the state directory: swept by whoever next holds the lock. */
  sweepTemps(): void {
    for (const sub of ["", "holds", "outbox", "identity"]) {
      for (const name of this.list(sub)) {
        if (!isTempName(name)) continue;
        try {
          unlinkSync(join(this.dir, sub, name));
        } catch {
          // gone already
        }
      }
    }
  }

  readNode(): NodeFile | null {
    return this.readVersioned("node.json", NodeFile);
  }

  writeNode(value: Omit<NodeFile, "format">): void {
    this.writeVersioned("node.json", value);
  }

  /**
   * The records, each as `check` reads it (its type's reader's parse): one it cannot read makes the file
   * unreadable, refused as any state file that is not what it should be (the store knows no type's own fields).
   */
  readRecords(check?: (record: Records[string]) => Records[string] | undefined): {
    records: Records;
    order: string[];
  } {
    const file = this.readVersioned("records.json", RecordsFile);
    if (!file) return { records: {}, order: [] };
    if (!check) return { records: file.records, order: file.order };
    const records: Records = {};
    for (const [id, record] of Object.entries(file.records)) {
      const checked = check(record);
      if (!checked) throw new StateError(`${this.path("records.json")} is not a valid state file`);
      records[id] = checked;
    }
    return { records, order: file.order };
  }

  writeRecords(records: Records, order: string[]): void {
    this.writeVersioned("records.json", { records, order });
  }

  readDeclared(): DeclaredFile | null {
    return this.readVersioned("declared.json", DeclaredFile);
  }

  hasDeclared(): boolean {
    return existsSync(this.path("declared.json"));
  }

  writeDeclared(value: Omit<DeclaredFile, "format">): void {
    this.writeVersioned("declared.json", value);
  }

  readMembership(): Membership | null {
    return this.readVersioned("membership.json", MembershipFile)?.membership ?? null;
  }

  /** The identity the node dials with (0600); the one it replaces is kept beside it as membership.previous.json. */
  writeMembership(membership: Membership, keepPrevious = false): void {
    const current = this.readText("membership.json");
    if (keepPrevious && current !== null) this.writeText("membership.previous.json", current);
    this.writeVersioned("membership.json", { membership });
  }

  readPreviousMembership(): Membership | null {
    return this.readVersioned("membership.previous.json", MembershipFile)?.membership ?? null;
  }

  /** The bundle genesis applied: its digest, so `reconcile` can refuse any other bytes. */
  readGenesis(): GenesisFile | null {
    return this.readVersioned("genesis.json", GenesisFile);
  }

  writeGenesis(value: Omit<GenesisFile, "format">): void {
    this.writeVersioned("genesis.json", value);
  }

  /** Ids changed by an apply that did not complete: their `on`/`restart_on` dependents are still owed. */
  readOwed(): string[] {
    return this.readVersioned("owed.json", OwedFile)?.ids ?? [];
  }

  writeOwed(ids: string[]): void {
    if (!ids.length && this.readText("owed.json") === null) return;
    if (!ids.length) this.remove("owed.json");
    else this.writeVersioned("owed.json", { ids });
  }

  readLast(): LastFile | null {
    return this.readVersioned("last.json", LastFile);
  }

  /**
   * Written after every apply, the drift check's no-op too, and read only by `status` and the heartbeat: whole
   * on disk (temp, fsync, rename) but its directory not synced, so a no-op costs two fsyncs, not four (issue 22).
   */
  writeLast(value: Omit<LastFile, "format">): void {
    this.writeVersioned("last.json", value, false);
  }

  /** The last apply's whole report (every step and its detail; a report never holds a secret). */
  readLastReport(): Report | null {
    return this.readVersioned("last-report.json", LastReportFile)?.report ?? null;
  }

  writeLastReport(report: Report): void {
    this.writeVersioned("last-report.json", { report }, false);
  }

  /**
   * The digest of the binary that started and completed one reconcile: the launcher's `confirmed`, a bare line
   * (a POSIX sh script reads it), not a versioned JSON file.
   */
  readConfirmed(): string | null {
    return this.readText("confirmed")?.trim() ?? null;
  }

  writeConfirmed(digest: string): void {
    if (this.readConfirmed() !== digest) this.writeText("confirmed", `${digest}\n`);
  }

  /**
   * The bus a node is on, read leniently for `status` (as the host writes it, `{format, membership}`, or the
   * membership bare; never its secrets); null when there is none it can read.
   */
  readBusSummary(): BusSummary | null {
    const text = this.readText("membership.json");
    if (!text) return null;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return null;
    }
    const m = MembershipText.safeParse(json);
    if (!m.success) return null;
    return "membership" in m.data ? m.data.membership : m.data;
  }

  /** What the last release installed by an upgrade was (`release.json`): unparsed, its reader judges it. */
  readInstalledRelease(): unknown {
    const text = this.readText("release.json");
    return text === null ? null : JSON.parse(text);
  }

  writeInstalledRelease(value: { manifest: string; binary: string }): void {
    this.writeText("release.json", JSON.stringify(value));
  }

  /** Where a release being fetched is kept, in parts, until it is verified and installed. */
  releaseDir(): string {
    return this.path("release");
  }

  readText(name: string): string | null {
    try {
      return readFileSync(this.path(name), "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw stateFault(e);
    }
  }

  writeText(name: string, text: string, syncDir = true): void {
    this.ensure();
    try {
      writeFileAtomicSync(this.path(name), text, STATE_FILE_MODE, syncDir);
    } catch (e) {
      // the state file meant, never the temporary beside it (nor no path at all: a write's ENOSPC has none)
      throw stateFault(e, this.path(name));
    }
  }

  remove(name: string): void {
    try {
      unlinkSync(this.path(name));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }

  list(sub: string): string[] {
    try {
      return readdirSync(this.path(sub)).sort();
    } catch {
      return [];
    }
  }

  /** A JSON state file, refused clearly when it is newer than this host or not parseable. */
  readVersioned<T extends { format: number }>(name: string, schema: z.ZodType<T>): T | null {
    const text = this.readText(name);
    if (text === null) return null;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new StateError(`${this.path(name)} is not JSON`);
    }
    // the format is looked at before the rest: a newer binary's file is said as that, not as malformed
    const format = Versioned.safeParse(json).data?.format;
    if (format !== undefined && format > STATE_FORMAT)
      throw new StateError(
        `${this.path(name)} has state format ${format}; this mesh-host reads format ${STATE_FORMAT} (a newer binary wrote it)`,
      );
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new StateError(`${this.path(name)} is not a valid state file`);
    return parsed.data;
  }

  writeVersioned(name: string, value: object, syncDir = true): void {
    this.writeText(name, `${JSON.stringify({ format: STATE_FORMAT, ...value }, null, 1)}\n`, syncDir);
  }
}
