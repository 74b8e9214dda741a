// Apply a declaration: check who and which mode, plan, journal, execute step by step, read back, report.
import type { DecideContext, Ports } from "../appliers/index.ts";
import { BUILD } from "../build-info.ts";
import { FILE_READ_CONCURRENCY } from "../defaults.ts";
import type { Host } from "../hosts/index.ts";
import type { Records, State, StoreOriginals } from "../store/index.ts";
import { forgetResolved } from "../system/index.ts";
import {
  type Declaration,
  Membership,
  type Outcome,
  type Refusal,
  type Report,
  type ReportStep,
  secretsOf,
} from "../vocabulary/index.ts";
import { isAdoptedStep } from "./adopted.ts";
import { planSteps } from "./decide.ts";
import { execute } from "./execute.ts";
import { journal, originalsNow, sweepTemps } from "./journal.ts";
import { mapLimited } from "./map-limited.ts";
import { checkedBy, RecordBook } from "./records.ts";
import {
  CHANGING,
  interruption,
  logSteps,
  type PlanInput,
  type PlanLine,
  type PlannedStep,
  planLine,
} from "./steps.ts";
import { traitsOf } from "./traits.ts";

export type { PlanLine } from "./steps.ts";

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

export interface ApplyResult {
  plan: PlanLine[];
  report: Report;
  /** The release of mesh-host a signed declaration names for the host; taken by the hold after the report. */
  release?: string;
  /** The bus this declaration moves the node to, unsealed and checked; taken by the hold after the report. */
  moveTo?: Membership;
  /** 0 applied (or nothing to do), 1 failed, 2 refused. */
  exit: 0 | 1 | 2;
  /** Stopped part-way by the signal: how many steps ran of how many planned. */
  interrupted?: { after: number; of: number };
}

const now = () => new Date().toISOString();

const withDiff = (line: PlanLine, diff: string[] | undefined): PlanLine =>
  diff?.length ? { ...line, diff } : line;

/** A report with no steps: for a declaration that never reached the machine, and the frame an apply fills. */
export function reportWithoutSteps(
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
    host: { version: BUILD.version, os: host.kind },
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

/** Every secret a resource reads, unsealed up front so a bad one refuses the whole declaration before anything is written. */
function unsealAll(req: ApplyRequest): { secrets: Map<string, Uint8Array>; refusals: Refusal[] } {
  const secrets = new Map<string, Uint8Array>();
  const refusals: Refusal[] = [];
  for (const r of req.declaration.resources)
    for (const { name } of secretsOf(r)) {
      if (secrets.has(name)) continue;
      const sealed = req.declaration.secrets?.[name];
      const opened = sealed
        ? req.unseal(sealed, name)
        : { ok: false as const, reason: "is not carried by the declaration" };
      if (opened.ok) secrets.set(name, opened.bytes);
      else refusals.push({ id: r.id, field: "secret", reason: `secret "${name}" ${opened.reason}` });
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
  const opened = openedFor(req);
  if ("refusals" in opened) return refused(req, opened.refusals);
  const planned = await planFor(req, opened.secrets);
  const refusals = planned.steps
    .filter((s) => s.action === "refuse")
    .map((s) => ({ id: s.id, field: s.field ?? "path", reason: s.detail }));
  if (refusals.length) return { ...refused(req, refusals), plan: planned.plan };
  if (req.dryRun) {
    const report = reportWithoutSteps(req.declaration.node, req.seq, req.digest, [], req.host, "applied");
    return { plan: planned.plan, report: { ...report, steps: planned.steps.map(planLine) }, exit: 0 };
  }
  req.onPlan?.(planned.plan);
  const done = await carryOut(req, planned);
  return settle(req, planned, done, started, opened.moveTo);
}

/** A result for a declaration that never reached the machine. */
function refused(req: ApplyRequest, refusals: Refusal[]): ApplyResult {
  const report = reportWithoutSteps(req.declaration.node, req.seq, req.digest, refusals, req.host);
  return { plan: [], report, exit: 2 };
}

/** Who, which mode, every secret and the membership, checked before anything: refusals, or what was opened. */
function openedFor(
  req: ApplyRequest,
): { refusals: Refusal[] } | { secrets: Map<string, Uint8Array>; moveTo?: Membership } {
  const early = identityRefusals(req);
  if (early.length) return { refusals: early };
  const { secrets, refusals } = unsealAll(req);
  const { moveTo, refusals: moveRefusals } = openMembership(req);
  if (refusals.length || moveRefusals.length) return { refusals: [...refusals, ...moveRefusals] };
  return { secrets, moveTo };
}

/** The plan, as decided against the records, and what it was decided from. */
interface Planned {
  input: PlanInput;
  steps: PlannedStep[];
  plan: PlanLine[];
  records: Records;
  order: string[];
  owed: Set<string>;
}

async function planFor(req: ApplyRequest, secrets: Map<string, Uint8Array>): Promise<Planned> {
  const { records, order } = req.state.readRecords(checkedBy(req.host));
  const owed = new Set(req.state.readOwed());
  const input = {
    declaration: req.declaration,
    records,
    order,
    host: req.host,
    ctx: contextFor(req, secrets),
    owed,
  };
  const steps = await planSteps(input);
  const diffOf = (s: PlannedStep) =>
    isAdoptedStep(s) ? undefined : traitsOf(req.host, s.type).diff?.(s, s.wanted, req.ports.root);
  const plan = await mapLimited(steps, FILE_READ_CONCURRENCY, async (s) =>
    withDiff(planLine(s), req.diff ? await diffOf(s) : undefined),
  );
  req.ports.log.debug(
    { seq: req.seq, steps: plan.length, changing: plan.filter((p) => CHANGING.has(p.did)).length },
    req.dryRun ? "planned (a dry run: nothing will be changed)" : "planned",
  );
  return { input, steps, plan, records, order, owed };
}

interface CarriedOut {
  executed: ReportStep[];
  /** The records as the steps left them. */
  book: RecordBook;
  notes: string[];
  interrupted?: { after: number; of: number };
}

/** Record the node, sweep, journal, then carry out every step: what the machine was made to be. */
async function carryOut(req: ApplyRequest, p: Planned): Promise<CarriedOut> {
  const notes = recordNode(req);
  req.state.sweepTemps();
  sweepTemps(req.host, req.ports.root, req.declaration, p.records);
  const book = new RecordBook(req.state, req.declaration, p.records, p.order);
  // owed before anything changes: a kill between a change and what is `on` it must not forget the dependent
  const changing = p.steps.filter((s) => CHANGING.has(s.did)).map((s) => s.id);
  if (changing.length) req.state.writeOwed([...new Set([...p.owed, ...changing])]);
  const unheld = await journal(req.host, req.originals, book, p.steps);
  const run = { book, onStep: req.onStep, signal: req.signal, unheld };
  const executed = await execute(p.steps, p.input, run);
  logSteps(req.ports.log, executed);
  const interrupted = interruption(executed);
  if (interrupted) notes.push(`interrupted after ${interrupted.after} of ${interrupted.of} steps`);
  return { executed, book, notes, ...(interrupted ? { interrupted } : {}) };
}

/** The records, the owed ids, the holds and the report as the apply leaves them; the result the caller gets. */
function settle(
  req: ApplyRequest,
  p: Planned,
  done: CarriedOut,
  started: string,
  moveTo: Membership | undefined,
): ApplyResult {
  const { executed, book, notes, interrupted } = done;
  const d = req.declaration;
  const outcome: Outcome = executed.some((s) => s.did === "failed") || interrupted ? "failed" : "applied";
  // every dependent ran: nothing is owed; a failed apply keeps what it changed owed for the next one
  if (outcome === "applied") req.state.writeOwed([]);
  req.originals.commit(book.finish().length);
  // the shape (and key order) of every report, filled with what ran
  const report: Report = {
    ...reportWithoutSteps(d.node, req.seq, req.digest, [], req.host, outcome),
    started_at: started,
    steps: executed,
    holds: originalsNow(req.host, req.originals, book.now),
    mode: d.mode,
    ...(notes.length ? { notes } : {}),
  };
  // every apply, so `status` and the heartbeat say when the machine was last made to match, and why it failed
  req.state.writeLast({ seq: req.seq, outcome, at: report.finished_at });
  req.state.writeLastReport(report);
  return {
    plan: p.plan,
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
