// Apply a declaration: check who and which mode, plan, journal, execute step by step, read back, report.
import { dirname } from "node:path";
import type { DecideContext, Ports } from "../appliers/index.ts";
import { fileDiff } from "../appliers/portable/index.ts";
import { FILE_READ_CONCURRENCY, FILE_WRITE_CONCURRENCY, VERSION } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records, State, StoreOriginals } from "../store/index.ts";
import { forgetResolved, sweepTempsAt } from "../system/index.ts";
import {
  type Declaration,
  Membership,
  type Outcome,
  type Refusal,
  type Report,
  type ReportStep,
  type Resource,
} from "../vocabulary/index.ts";
import {
  CHANGING,
  decider,
  mapLimited,
  noteChange,
  type PlannedStep,
  planSteps,
  readsChanges,
} from "./plan.ts";
import { sameRecords } from "./records.ts";
import { failureDetail, INTERRUPTED, interruption, logSteps } from "./steps.ts";

/** Opens a value of `secrets` (named, so an installer's secret can be found by its name) or the membership. */
export type Unseal = (
  sealed: string,
  name?: string,
) => { ok: true; bytes: Uint8Array } | { ok: false; reason: string };

export interface ApplyRequest {
  declaration: Declaration;
  seq: number;
  digest: string;
  /** "link": signed and delivered by the mesh, so it may set the mode; "file": an offline apply, which may not. */
  source: "link" | "file";
  dryRun: boolean;
  host: Host;
  state: State;
  originals: StoreOriginals;
  ports: Omit<Ports, "originals">;
  unseal: Unseal;
  /** Each planned file write carries its diff (`--diff`). */
  diff?: boolean;
  /** Aborted (Ctrl-C, SIGTERM): the step in progress finishes, the rest are not reached, the report says so. */
  signal?: AbortSignal;
  /** Told the plan after it is decided and before anything is touched: show, then act. */
  onPlan?: (plan: PlanLine[]) => void;
  /** Told each time a step is done, with how many of how many: a progress line for a long apply. */
  onStep?: (done: number, total: number) => void;
}

export interface PlanLine {
  id: string;
  type: string;
  did: ReportStep["did"];
  detail: string;
  /** `--diff`: a file's content as a unified diff, its mode and owner change; never a secret's content. */
  diff?: string[];
}

export interface ApplyResult {
  plan: PlanLine[];
  report: Report;
  /** The bus this declaration moves the node to, unsealed and checked; taken by the hold after the report. */
  moveTo?: Membership;
  /** 0 applied (or nothing to do), 1 failed, 2 refused. */
  exit: 0 | 1 | 2;
  /** Stopped part-way by the signal: how many steps ran of how many planned. */
  interrupted?: { after: number; of: number };
}

const now = () => new Date().toISOString();

export function planLine(s: { id: string; type: string; did: ReportStep["did"]; detail: string }): PlanLine {
  return { id: s.id, type: s.type, did: s.did, detail: s.detail };
}

const withDiff = (line: PlanLine, diff: string[] | undefined): PlanLine =>
  diff?.length ? { ...line, diff } : line;

/** A report for a declaration that never reached the machine. */
export function refusedReport(
  node: string,
  seq: number,
  digest: string,
  refusals: Refusal[],
  host: Host,
  outcome: Outcome = "refused",
): Report {
  const at = now();
  return {
    v: 1,
    node,
    declaration: { seq, digest },
    outcome,
    started_at: at,
    finished_at: at,
    steps: [],
    holds: [],
    refusals,
    host: { version: VERSION, os: host.kind },
  };
}

/** Who and which mode: a declaration for another node, or one saying the other mode offline, changes nothing. */
function identityRefusals(req: ApplyRequest): Refusal[] {
  const known = req.state.readNode();
  const d = req.declaration;
  if (known && known.node !== d.node)
    return [{ id: "declaration", field: "node", reason: `is "${d.node}", but this node is "${known.node}"` }];
  if (req.source === "file" && known?.mode && known.mode !== d.mode) return [modeRefusal(d.mode, known.mode)];
  return [];
}

/** The refusal of the seed's incident: both modes named, and the one act that changes a node's mode. */
export function modeRefusal(said: string, recorded: string): Refusal {
  const act = said === "converged" ? "converge" : "adopt";
  return {
    id: "declaration",
    field: "mode",
    reason: `says ${said}, but this node is ${recorded}; only a signed declaration from the mesh (its ${act} act) changes the mode`,
  };
}

/** Every secret a file names, unsealed up front so a bad one refuses the whole declaration before anything is written. */
function unsealAll(req: ApplyRequest): { secrets: Map<string, Uint8Array>; refusals: Refusal[] } {
  const secrets = new Map<string, Uint8Array>();
  const refusals: Refusal[] = [];
  for (const r of req.declaration.resources) {
    if (r.type !== "file" || !r.secret || secrets.has(r.secret)) continue;
    const sealed = req.declaration.secrets?.[r.secret];
    const opened = sealed
      ? req.unseal(sealed, r.secret)
      : { ok: false as const, reason: "is not carried by the declaration" };
    if (opened.ok) secrets.set(r.secret, opened.bytes);
    else refusals.push({ id: r.id, field: "secret", reason: `secret "${r.secret}" ${opened.reason}` });
  }
  return { secrets, refusals };
}

/** A sealed membership, opened and checked before anything is applied: a bad one refuses the whole declaration. */
function openMembership(req: ApplyRequest): { moveTo?: Membership; refusals: Refusal[] } {
  const sealed = req.declaration.membership;
  if (!sealed) return { refusals: [] };
  const refuse = (reason: string) => ({ refusals: [{ id: "declaration", field: "membership", reason }] });
  const opened = req.unseal(sealed);
  if (!opened.ok) return refuse(opened.reason);
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(opened.bytes).toString("utf8"));
  } catch {
    return refuse("does not unseal to JSON");
  }
  const parsed = Membership.safeParse(json);
  if (!parsed.success)
    return refuse(`is not a membership (${parsed.error.issues[0]?.path.join(".") || "shape"})`);
  if (parsed.data.user !== `node.${req.declaration.node}`)
    return refuse(`names user ${parsed.data.user}, not node.${req.declaration.node}`);
  return { moveTo: parsed.data, refusals: [] };
}

function contextFor(
  req: ApplyRequest,
  secrets: Map<string, Uint8Array>,
): Omit<DecideContext, "changed" | "declaredPaths" | "made"> {
  return { ports: { ...req.ports, originals: req.originals }, secret: (name) => secrets.get(name)! };
}

/** Plan, and unless it is a dry run, apply: the one entry point for `apply`, `plan`, `reconcile` and the link. */
export async function applyDeclaration(req: ApplyRequest): Promise<ApplyResult> {
  // what one apply resolved is its own: the next one looks at the machine afresh
  forgetResolved();
  try {
    return await applyWhole(req);
  } finally {
    forgetResolved();
  }
}

async function applyWhole(req: ApplyRequest): Promise<ApplyResult> {
  const started = now();
  const d = req.declaration;
  const refuse = (refusals: Refusal[]): ApplyResult => ({
    plan: [],
    report: refusedReport(d.node, req.seq, req.digest, refusals, req.host),
    exit: 2,
  });
  const early = identityRefusals(req);
  if (early.length) return refuse(early);
  const { secrets, refusals } = unsealAll(req);
  const { moveTo, refusals: moveRefusals } = openMembership(req);
  if (refusals.length || moveRefusals.length) return refuse([...refusals, ...moveRefusals]);
  const { records, order } = req.state.readRecords();
  const owed = new Set(req.state.readOwed());
  const input = { declaration: d, records, order, host: req.host, ctx: contextFor(req, secrets), owed };
  const steps = await planSteps(input);
  const plan = await mapLimited(steps, FILE_READ_CONCURRENCY, async (s) =>
    withDiff(planLine(s), req.diff ? await fileDiff(s, req.ports.root) : undefined),
  );
  req.ports.log.debug(
    { seq: req.seq, steps: plan.length, changing: plan.filter((p) => CHANGING.has(p.did)).length },
    req.dryRun ? "planned (a dry run: nothing will be changed)" : "planned",
  );
  const refused = steps
    .filter((s) => s.action === "refuse")
    .map((s) => ({ id: s.id, field: s.field ?? "path", reason: s.detail }));
  if (refused.length) return { ...refuse(refused), plan };
  if (req.dryRun)
    return {
      plan,
      report: {
        ...refusedReport(d.node, req.seq, req.digest, [], req.host, "applied"),
        steps: steps.map(planLine),
      },
      exit: 0,
    };
  req.onPlan?.(plan);
  const notes = recordNode(req);
  req.state.sweepTemps();
  sweepTemps(req.ports.root, d, records);
  const next = { ...records };
  // owed before anything changes: a kill between a change and what is `on` it must not forget the dependent
  const changing = steps.filter((s) => CHANGING.has(s.did)).map((s) => s.id);
  if (changing.length) req.state.writeOwed([...new Set([...owed, ...changing])]);
  await journal(req.state, req.originals, next, order, steps);
  const orderOf = () => [...new Set([...d.resources.map((r) => r.id), ...order])].filter((id) => next[id]);
  const executed = await execute(
    steps,
    input,
    next,
    () => req.state.writeRecords(next, orderOf()),
    req.onStep,
    req.signal,
  );
  logSteps(req.ports.log, executed);
  const interrupted = interruption(executed);
  if (interrupted) notes.push(`interrupted after ${interrupted.after} of ${interrupted.of} steps`);
  const outcome: Outcome = executed.some((s) => s.did === "failed") || interrupted ? "failed" : "applied";
  // every dependent ran: nothing is owed; a failed apply keeps what it changed owed for the next one
  if (outcome === "applied") req.state.writeOwed([]);
  const nextOrder = orderOf();
  // a no-op (the drift check, most of the time) writes nothing: two fsyncs were most of its cost
  if (!sameRecords(next, nextOrder, records, order)) req.state.writeRecords(next, nextOrder);
  req.originals.commit(nextOrder.length);
  const report: Report = {
    v: 1,
    node: d.node,
    declaration: { seq: req.seq, digest: req.digest },
    outcome,
    started_at: started,
    finished_at: now(),
    steps: executed,
    holds: heldNow(req.originals, next),
    refusals: [],
    host: { version: VERSION, os: req.host.kind },
    mode: d.mode,
    ...(notes.length ? { notes } : {}),
  };
  // every apply, so `status` and the heartbeat say when the machine was last made to match, and why it failed
  req.state.writeLast({ seq: req.seq, outcome, at: report.finished_at });
  req.state.writeLastReport(report);
  return {
    plan,
    report,
    exit: outcome === "failed" ? 1 : 0,
    moveTo: outcome === "applied" ? moveTo : undefined,
    ...(interrupted ? { interrupted } : {}),
  };
}

/** The node's name and mode: the mesh's signed word sets the mode; an offline apply only where none is recorded. */
function recordNode(req: ApplyRequest): string[] {
  const known = req.state.readNode();
  const mode = req.source === "link" ? req.declaration.mode : (known?.mode ?? req.declaration.mode);
  if (!known || known.node !== req.declaration.node || known.mode !== mode)
    req.state.writeNode({ node: req.declaration.node, mode });
  // the mesh's signed word wins over a state that drifted from it, and the repair is said
  if (req.source === "link" && known?.mode && known.mode !== mode)
    return [`mode repaired: the state said ${known.mode}, the mesh's signed declaration says ${mode}`];
  return [];
}

/**
 * Before touching anything: keep every found original the apply is about to write over, then write down the
 * record each new resource will have, so a crash at any instant cannot make the mesh's own file look "found"
 * on the next start, nor leave a found one recorded without its original (the chaos suite's kill -9 found
 * both: a directory's found mode recorded after its chmod, and a taken file's hold not yet kept).
 */
async function journal(
  state: State,
  kept: StoreOriginals,
  next: Records,
  order: string[],
  steps: PlannedStep[],
): Promise<void> {
  let intents = 0;
  for (const s of steps) {
    const data = s.data as
      | { intent?: Records[string]; hold?: { bytes: Uint8Array; mode: number; uid: number; gid: number } }
      | undefined;
    if (s.resource && "path" in s.resource && carriesSecret(s.resource)) kept.markSecret(s.resource.path);
    if (data?.hold && s.resource && "path" in s.resource) {
      const { bytes, mode, uid, gid } = data.hold;
      await kept.keep(s.resource.path, bytes, { mode, uid, gid }, carriesSecret(s.resource));
    }
    // an id still recorded as something else keeps that record until its removal has run
    if (s.record || !data?.intent || next[s.id]) continue;
    // pending until its step has run: a file an interrupted apply never wrote is then created, not repaired
    next[s.id] = { ...data.intent, pending: true };
    intents++;
  }
  if (intents) state.writeRecords(next, [...new Set([...Object.keys(next), ...order])]);
}

/** What is written at this resource's path is a secret: a sealed value, or an overlay's private key. */
function carriesSecret(r: Resource): boolean {
  return (r.type === "file" && r.secret !== undefined) || r.type === "overlay";
}

/** Temporary files a crash left beside declared or recorded files: swept before writing anew. */
function sweepTemps(root: string, d: Declaration, records: Records): void {
  const declared = d.resources.flatMap((r) => (r.type === "file" ? [r.path] : []));
  const recorded = Object.values(records).flatMap((r) =>
    r.type === "file" && typeof r.path === "string" ? [r.path] : [],
  );
  // each directory reached with no link followed: a linked one is never listed nor swept
  sweepTempsAt(root, new Set([...declared, ...recorded].map((p) => dirname(p))));
}

/**
 * Carry out the planned steps, one run at a time. A failed action stops the apply and the rest are not reached
 * (an action is a command whose effect later steps may need; the seeds' "stopped at the first failing
 * action"); any other failed step is reported failed and the apply goes on: a later step that needs it reads
 * the machine and fails in its own words, and every other step still brings the node nearer the declaration.
 */
async function execute(
  steps: PlannedStep[],
  input: Parameters<typeof decider>[0],
  records: Records,
  saveRecords: () => void,
  onStep?: ApplyRequest["onStep"],
  signal?: AbortSignal,
): Promise<ReportStep[]> {
  // decided against the records as the steps before have left them: `wrote` reads what was just written
  const d = decider(input, records);
  const changed = new Set<string>(input.owed ?? []);
  const made = new Set<string>();
  const out: ReportStep[] = [];
  const ctx = () => d.context(changed, made);
  let stoppedBy: string | undefined;
  const runOne = async (step: PlannedStep): Promise<ReportStep> => {
    if (stoppedBy)
      return { ...planLine(step), did: "not-reached", detail: `not reached: action ${stoppedBy} failed` };
    if (signal?.aborted) return { ...planLine(step), did: "not-reached", detail: INTERRUPTED };
    const applier = input.host.appliers.get(step.type)!;
    // an id that named something else until the removal just before: its new record is journalled now
    const intent = (step.data as { intent?: Records[string] } | undefined)?.intent;
    if (intent && step.resource && !step.record && !records[step.id]) {
      records[step.id] = { ...intent, pending: true };
      saveRecords();
    }
    try {
      // the applier is told exactly the record its decision saw (a removal: the one it gives back)
      const record = step.resource ? step.record : (step.record ?? records[step.id]);
      const done = await applier.execute(step, step.resource, record, ctx());
      if (done.record) records[step.id] = done.record as Records[string];
      else if (!step.resource) delete records[step.id];
      return { id: step.id, type: step.type, did: done.did, detail: done.detail };
    } catch (e) {
      return {
        id: step.id,
        type: step.type,
        did: "failed",
        detail: failureDetail(e, step),
      };
    }
  };
  for (const batch of batches(steps)) {
    const first = batch[0]!;
    // what reads changes is decided again with what actually changed: the same function the plan used
    const fresh =
      first.resource && readsChanges(first.resource) && !signal?.aborted && !stoppedBy
        ? await d.decide(first.resource, changed, made)
        : batch;
    const results = await mapLimited(fresh, FILE_WRITE_CONCURRENCY, runOne);
    results.forEach((r, i) => {
      noteChange(fresh[i]!, r.did, changed, made);
      if (r.did === "failed" && fresh[i]!.type === "action") stoppedBy ??= r.id;
      out.push(r);
    });
    onStep?.(out.length, steps.length);
  }
  return out;
}

/** Steps grouped so that consecutive file writes run side by side (their fsyncs overlap) and all else one at a time. */
function batches(steps: PlannedStep[]): PlannedStep[][] {
  const out: PlannedStep[][] = [];
  const parallel = (s: PlannedStep) => s.type === "file" && s.resource !== undefined;
  for (const s of steps) {
    const last = out.at(-1);
    if (last && parallel(s) && parallel(last[0]!)) last.push(s);
    else out.push([s]);
  }
  return out;
}

function heldNow(originals: StoreOriginals, records: Records): Report["holds"] {
  // a record names what it holds by its own path, or (an overlay's takeover) by the found file's
  const idOf = new Map(
    Object.entries(records).flatMap(([id, r]) => {
      const { path, takeover } = r as { path?: string; takeover?: { path?: string } };
      return [path, takeover?.path]
        .filter((p): p is string => typeof p === "string")
        .map((p) => [p, id] as const);
    }),
  );
  return originals.list().map((h) => ({
    id: idOf.get(h.path) ?? "",
    path: h.path,
    ...(h.original ? { original: h.original } : {}),
  }));
}
